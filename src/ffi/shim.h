/* C wrappers for the static-inline DPDK and libibverbs helpers the driver
 * calls. The data path calls the mempool and mbuf bulk wrappers once per
 * burst (never per packet); the rest are control path. */
#ifndef NET_MANA_SHIM_H
#define NET_MANA_SHIM_H

#include <stddef.h>
#include <stdint.h>

struct rte_eth_dev;
struct rte_pci_device;
struct rte_mbuf;
struct rte_mempool;
struct rte_eth_link;
struct ibv_context;
struct ibv_device_attr_ex;
struct ibv_pd;
struct ibv_parent_domain_init_attr;
struct ibv_wq;
struct ibv_wq_init_attr;
struct ibv_rwq_ind_table;
struct ibv_rwq_ind_table_init_attr;
struct ibv_qp;
struct ibv_qp_init_attr_ex;
struct ibv_mr;
struct ibv_cq;

int mana_shim_errno(void);
void mana_shim_set_errno(int err);
unsigned int mana_shim_lcore_id(void);

int mana_shim_linkstatus_set(struct rte_eth_dev *dev, const struct rte_eth_link *link);
void mana_shim_copy_pci_info(struct rte_eth_dev *dev, struct rte_pci_device *pci_dev);

int mana_shim_pktmbuf_alloc_bulk(struct rte_mempool *mp, struct rte_mbuf **mbufs, unsigned int n);
void mana_shim_pktmbuf_free(struct rte_mbuf *m);
int mana_shim_mempool_get_bulk(struct rte_mempool *mp, void **objs, unsigned int n);
void mana_shim_mempool_put_bulk(struct rte_mempool *mp, void *const *objs, unsigned int n);
uint16_t mana_shim_pktmbuf_data_room_size(struct rte_mempool *mp);
int mana_shim_vlan_insert(struct rte_mbuf **m);
unsigned int mana_shim_mempool_in_use(const struct rte_mempool *mp);

int mana_shim_query_device_ex(struct ibv_context *ctx, struct ibv_device_attr_ex *attr);
struct ibv_pd *mana_shim_alloc_parent_domain(struct ibv_context *ctx,
					     struct ibv_parent_domain_init_attr *attr);
struct ibv_wq *mana_shim_create_wq(struct ibv_context *ctx, struct ibv_wq_init_attr *attr);
int mana_shim_destroy_wq(struct ibv_wq *wq);
struct ibv_rwq_ind_table *mana_shim_create_rwq_ind_table(struct ibv_context *ctx,
							 struct ibv_rwq_ind_table_init_attr *attr);
int mana_shim_destroy_rwq_ind_table(struct ibv_rwq_ind_table *tbl);
struct ibv_qp *mana_shim_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *attr);
struct ibv_mr *mana_shim_reg_mr(struct ibv_pd *pd, void *addr, size_t len);
int mana_shim_req_notify_cq(struct ibv_cq *cq);

/* One row of the C compiler's view of a struct layout (layout.c). */
struct mana_layout_entry {
	const char *name;
	size_t value;
};
extern const struct mana_layout_entry mana_c_layout[];
extern const size_t mana_c_layout_len;

#endif

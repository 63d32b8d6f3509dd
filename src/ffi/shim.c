/* See shim.h. Each wrapper only forwards to the inline it is named after. */
#include <rte_config.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_ether.h>
#include <ethdev_driver.h>
#include <ethdev_pci.h>
#include <infiniband/verbs.h>
#include "shim.h"

int mana_shim_errno(void) { return rte_errno; }
void mana_shim_set_errno(int err) { rte_errno = err; }
unsigned int mana_shim_lcore_id(void) { return rte_lcore_id(); }

int mana_shim_linkstatus_set(struct rte_eth_dev *dev, const struct rte_eth_link *link)
{
	return rte_eth_linkstatus_set(dev, link);
}

void mana_shim_copy_pci_info(struct rte_eth_dev *dev, struct rte_pci_device *pci_dev)
{
	rte_eth_copy_pci_info(dev, pci_dev);
}

int mana_shim_pktmbuf_alloc_bulk(struct rte_mempool *mp, struct rte_mbuf **mbufs, unsigned int n)
{
	return rte_pktmbuf_alloc_bulk(mp, mbufs, n);
}

void mana_shim_pktmbuf_free(struct rte_mbuf *m) { rte_pktmbuf_free(m); }

int mana_shim_mempool_get_bulk(struct rte_mempool *mp, void **objs, unsigned int n)
{
	return rte_mempool_get_bulk(mp, objs, n);
}

void mana_shim_mempool_put_bulk(struct rte_mempool *mp, void *const *objs, unsigned int n)
{
	rte_mempool_put_bulk(mp, objs, n);
}

uint16_t mana_shim_pktmbuf_data_room_size(struct rte_mempool *mp)
{
	return rte_pktmbuf_data_room_size(mp);
}

int mana_shim_vlan_insert(struct rte_mbuf **m) { return rte_vlan_insert(m); }

unsigned int mana_shim_mempool_in_use(const struct rte_mempool *mp)
{
	return rte_mempool_in_use_count(mp);
}

int mana_shim_query_device_ex(struct ibv_context *ctx, struct ibv_device_attr_ex *attr)
{
	return ibv_query_device_ex(ctx, NULL, attr);
}

struct ibv_pd *mana_shim_alloc_parent_domain(struct ibv_context *ctx,
					     struct ibv_parent_domain_init_attr *attr)
{
	return ibv_alloc_parent_domain(ctx, attr);
}

struct ibv_wq *mana_shim_create_wq(struct ibv_context *ctx, struct ibv_wq_init_attr *attr)
{
	return ibv_create_wq(ctx, attr);
}

int mana_shim_destroy_wq(struct ibv_wq *wq) { return ibv_destroy_wq(wq); }

struct ibv_rwq_ind_table *mana_shim_create_rwq_ind_table(struct ibv_context *ctx,
							 struct ibv_rwq_ind_table_init_attr *attr)
{
	return ibv_create_rwq_ind_table(ctx, attr);
}

int mana_shim_destroy_rwq_ind_table(struct ibv_rwq_ind_table *tbl)
{
	return ibv_destroy_rwq_ind_table(tbl);
}

struct ibv_qp *mana_shim_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *attr)
{
	return ibv_create_qp_ex(ctx, attr);
}

struct ibv_mr *mana_shim_reg_mr(struct ibv_pd *pd, void *addr, size_t len)
{
	return ibv_reg_mr(pd, addr, len, IBV_ACCESS_LOCAL_WRITE);
}

int mana_shim_req_notify_cq(struct ibv_cq *cq) { return ibv_req_notify_cq(cq, 0); }

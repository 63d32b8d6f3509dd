//! Requests of the MANA RDMA function (`enum mana_ib_command_code`,
//! drivers/infiniband/hw/mana) and the GDMA-layer requests only `mana_ib`
//! sends: the adapter (capabilities, creation, the MAC and IP addresses it
//! answers for), per-context doorbell pages (resource ranges) and
//! protection domains.
//!
//! Sizes are those the trixie 6.12 module sends (read from its code: the
//! `GET_ADAPTER_CAP` response it expects is 104 bytes, without the
//! `feature_flags` later kernels append).

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::{reserved_zero, wire_msg, ReqHdr, RespHdr};
use crate::le::{U32, U64};
use crate::{assert_size, DecodeError, WireType};

/// `MANA_IB_GET_ADAPTER_CAP` response (the request is a bare header; the
/// driver asks for version 3).
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
#[allow(missing_docs)]
pub struct QueryAdapterCapsResp {
    pub hdr: RespHdr,
    pub max_sq_id: U32,
    pub max_rq_id: U32,
    pub max_cq_id: U32,
    pub max_qp_count: U32,
    pub max_cq_count: U32,
    pub max_mr_count: U32,
    pub max_pd_count: U32,
    pub max_inbound_read_limit: U32,
    pub max_outbound_read_limit: U32,
    pub mw_count: U32,
    pub max_srq_count: U32,
    /// Bytes of a requester SQ; the driver's `max_qp_wr` is the smaller of
    /// this / 512 (largest SQE) and `max_requester_rq_size` / 256.
    pub max_requester_sq_size: U32,
    pub max_responder_sq_size: U32,
    pub max_requester_rq_size: U32,
    pub max_responder_rq_size: U32,
    pub max_send_sge_count: U32,
    pub max_recv_sge_count: U32,
    pub max_inline_data_size: U32,
}
wire_msg!(
    QueryAdapterCapsResp,
    "mana_ib_query_adapter_caps_resp",
    104,
    []
);

/// `MANA_IB_CREATE_ADAPTER` request (version 2).
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct CreateAdapterReq {
    /// Header.
    pub hdr: ReqHdr,
    /// The EQ the adapter reports fatal errors to (`GDMA_EQE_RNIC_QP_FATAL`).
    pub notify_eq_id: U32,
    /// Must be zero.
    pub reserved: U32,
    /// `MANA_IB_FEATURE_*_REQUEST` (none from 6.12).
    pub feature_flags: U64,
}
wire_msg!(
    CreateAdapterReq,
    "mana_rnic_create_adapter_req",
    56,
    [reserved]
);

/// `MANA_IB_CREATE_ADAPTER` response.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct CreateAdapterResp {
    /// Header.
    pub hdr: RespHdr,
    /// The adapter's handle, named by every later adapter request.
    pub adapter: U64,
}
wire_msg!(CreateAdapterResp, "mana_rnic_create_adapter_resp", 40, []);

/// `MANA_IB_DESTROY_ADAPTER` request.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct DestroyAdapterReq {
    /// Header.
    pub hdr: ReqHdr,
    /// The adapter.
    pub adapter: U64,
}
wire_msg!(DestroyAdapterReq, "mana_rnic_destroy_adapter_req", 48, []);

/// `MANA_IB_QUERY_VF_COUNTERS` request (7.x `mana_ib`, at IB device
/// registration: the port's hardware counters).
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct QueryVfCountersReq {
    /// Header.
    pub hdr: ReqHdr,
    /// The adapter.
    pub adapter: U64,
}
wire_msg!(QueryVfCountersReq, "mana_rnic_query_vf_cntrs_req", 48, []);

/// `MANA_IB_QUERY_VF_COUNTERS` response: 34 counters (requester timeouts
/// and NAKs, responder errors, congestion, then bytes and packets), all of
/// the RDMA function's reliable-connection traffic. Kernels before the
/// byte/packet counters read the first 26 ([`QueryVfCountersResp::SHORT_SIZE`]).
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct QueryVfCountersResp {
    /// Header.
    pub hdr: RespHdr,
    /// The counters, in `struct mana_rnic_query_vf_cntrs_resp` order.
    pub counters: [U64; 34],
}
wire_msg!(
    QueryVfCountersResp,
    "mana_rnic_query_vf_cntrs_resp",
    304,
    []
);

impl QueryVfCountersResp {
    /// Size of the response with the first 26 counters.
    pub const SHORT_SIZE: usize = 32 + 26 * 8;
}

/// `enum mana_ib_addr_op`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddrOp {
    /// `ADDR_OP_ADD`.
    Add = 1,
    /// `ADDR_OP_REMOVE`.
    Remove = 2,
}

fn addr_op(what: &'static str, v: u32) -> Result<AddrOp, DecodeError> {
    match v {
        1 => Ok(AddrOp::Add),
        2 => Ok(AddrOp::Remove),
        _ => Err(DecodeError::InvalidField {
            what,
            field: "op",
            value: u64::from(v),
            expected: "1 (ADDR_OP_ADD) or 2 (ADDR_OP_REMOVE)",
        }),
    }
}

/// `SGID_TYPE_IPV4`.
pub const SGID_TYPE_IPV4: u32 = 1;
/// `SGID_TYPE_IPV6`.
pub const SGID_TYPE_IPV6: u32 = 2;

/// `MANA_IB_CONFIG_IP_ADDR` request: a GID the port answers for (the
/// kernel's `add_gid` / `del_gid`).
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct ConfigIpAddrReq {
    /// Header.
    pub hdr: ReqHdr,
    /// The adapter.
    pub adapter: U64,
    /// [`AddrOp`].
    pub op: U32,
    /// [`SGID_TYPE_IPV4`] or [`SGID_TYPE_IPV6`].
    pub sgid_type: U32,
    /// The GID's 16 bytes in reverse order (byte 15 of the GID first).
    pub ip_addr: [u8; 16],
}
assert_size!(ConfigIpAddrReq, 72);

impl WireType for ConfigIpAddrReq {
    const NAME: &'static str = "mana_rnic_config_addr_req";
    fn validate(&self) -> Result<(), DecodeError> {
        addr_op(Self::NAME, self.op.get())?;
        let t = self.sgid_type.get();
        if t != SGID_TYPE_IPV4 && t != SGID_TYPE_IPV6 {
            return Err(DecodeError::InvalidField {
                what: Self::NAME,
                field: "sgid_type",
                value: u64::from(t),
                expected: "1 (SGID_TYPE_IPV4) or 2 (SGID_TYPE_IPV6)",
            });
        }
        Ok(())
    }
}

impl ConfigIpAddrReq {
    /// The operation (valid after `decode`).
    pub fn op(&self) -> AddrOp {
        addr_op(Self::NAME, self.op.get()).unwrap_or(AddrOp::Add)
    }
    /// The GID in its usual byte order.
    pub fn gid(&self) -> [u8; 16] {
        let mut g = self.ip_addr;
        g.reverse();
        g
    }
}

/// `MANA_IB_CONFIG_MAC_ADDR` request: the MAC the adapter answers for.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct ConfigMacAddrReq {
    /// Header.
    pub hdr: ReqHdr,
    /// The adapter.
    pub adapter: U64,
    /// [`AddrOp`].
    pub op: U32,
    /// The MAC in reverse order (its last byte first).
    pub mac_addr: [u8; 6],
    /// Must be zero.
    pub reserved: [u8; 6],
}
assert_size!(ConfigMacAddrReq, 64);

impl WireType for ConfigMacAddrReq {
    const NAME: &'static str = "mana_rnic_config_mac_addr_req";
    fn validate(&self) -> Result<(), DecodeError> {
        addr_op(Self::NAME, self.op.get())?;
        reserved_zero(Self::NAME, "reserved", &self.reserved)
    }
}

impl ConfigMacAddrReq {
    /// The operation (valid after `decode`).
    pub fn op(&self) -> AddrOp {
        addr_op(Self::NAME, self.op.get()).unwrap_or(AddrOp::Add)
    }
    /// The MAC in its usual byte order.
    pub fn mac(&self) -> [u8; 6] {
        let mut m = self.mac_addr;
        m.reverse();
        m
    }
}

/// `resource_type` of a doorbell page (`GDMA_RESOURCE_DOORBELL_PAGE`).
pub const GDMA_RESOURCE_DOORBELL_PAGE: u32 = 27;

/// `GDMA_ALLOCATE_RESOURCE_RANGE` request (one doorbell page per user
/// context).
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct AllocateResourceRangeReq {
    /// Header.
    pub hdr: ReqHdr,
    /// [`GDMA_RESOURCE_DOORBELL_PAGE`].
    pub resource_type: U32,
    /// How many consecutive resources.
    pub num_resources: U32,
    /// The first one's index is a multiple of this (host pages per
    /// 4 KiB device page).
    pub alignment: U32,
    /// Where to start searching (0).
    pub allocated_resources: U32,
}
wire_msg!(
    AllocateResourceRangeReq,
    "gdma_allocate_resource_range_req",
    56,
    []
);

/// `GDMA_ALLOCATE_RESOURCE_RANGE` response.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct AllocateResourceRangeResp {
    /// Header.
    pub hdr: RespHdr,
    /// The first resource's index.
    pub allocated_resources: U32,
}
wire_msg!(
    AllocateResourceRangeResp,
    "gdma_allocate_resource_range_resp",
    36,
    []
);

/// `GDMA_DESTROY_RESOURCE_RANGE` request.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct DestroyResourceRangeReq {
    /// Header.
    pub hdr: ReqHdr,
    /// [`GDMA_RESOURCE_DOORBELL_PAGE`].
    pub resource_type: U32,
    /// How many.
    pub num_resources: U32,
    /// The first one's index.
    pub allocated_resources: U32,
}
wire_msg!(
    DestroyResourceRangeReq,
    "gdma_destroy_resource_range_req",
    52,
    []
);

/// `GDMA_PD_FLAG_ALLOW_GPA_MR`: the PD may hold guest-physical MRs
/// ([`GDMA_MR_TYPE_GPA`]); 7.x `mana_ib` asks it for PDs without user data.
pub const GDMA_PD_FLAG_ALLOW_GPA_MR: u32 = 1;

/// `GDMA_CREATE_PD` request.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct CreatePdReq {
    /// Header.
    pub hdr: ReqHdr,
    /// `enum gdma_pd_flags`: 0 for a user's PD,
    /// [`GDMA_PD_FLAG_ALLOW_GPA_MR`] for a kernel consumer's (7.x `mana_ib`,
    /// e.g. `ib_mad`'s).
    pub flags: U32,
    /// Must be zero.
    pub reserved: U32,
}
wire_msg!(CreatePdReq, "gdma_create_pd_req", 48, [reserved]);

/// `GDMA_CREATE_PD` response.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct CreatePdResp {
    /// Header.
    pub hdr: RespHdr,
    /// The PD's handle (for `DESTROY_PD`, `CREATE_MR`).
    pub pd_handle: U64,
    /// The PD's number (queues and vPort configuration name it).
    pub pd_id: U32,
    /// Zero.
    pub reserved: U32,
}
wire_msg!(CreatePdResp, "gdma_create_pd_resp", 48, [reserved]);

/// `GDMA_DESTROY_PD` request.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct DestroyPdReq {
    /// Header.
    pub hdr: ReqHdr,
    /// The PD's handle.
    pub pd_handle: U64,
}
wire_msg!(DestroyPdReq, "gdma_destroy_pd_req", 48, []);

/// `GDMA_MR_TYPE_GPA`: a memory region over all of the function's
/// guest-physical (bus) addresses, no DMA region, VA or access flags (7.x
/// `mana_ib_get_dma_mr`, the kernel consumers' local DMA key).
pub const GDMA_MR_TYPE_GPA: u32 = 1;

/// `GDMA_MR_TYPE_GVA`: a memory region addressed by the process's virtual
/// addresses (the only type `mana_ib` creates for user memory).
pub const GDMA_MR_TYPE_GVA: u32 = 2;
/// `enum gdma_mr_access_flags`: local read and write, remote read, write
/// and atomics.
pub const GDMA_ACCESS_FLAGS_VALID: u32 = 0x1f;

/// `GDMA_CREATE_MR` request (the GVA form).
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct CreateMrReq {
    /// Header.
    pub hdr: ReqHdr,
    /// The PD the MR belongs to.
    pub pd_handle: U64,
    /// [`GDMA_MR_TYPE_GVA`].
    pub mr_type: U32,
    /// Must be zero.
    pub reserved_1: U32,
    /// The DMA region with the memory's pages; the MR takes it over.
    pub dma_region_handle: U64,
    /// The virtual address of the region's first byte.
    pub virtual_address: U64,
    /// `GDMA_ACCESS_FLAG_*`.
    pub access_flags: U32,
    /// Padding of the union; must be zero.
    pub reserved_union: U32,
    /// Must be zero.
    pub reserved_2: U32,
    /// Padding; must be zero.
    pub reserved_3: U32,
}
wire_msg!(
    CreateMrReq,
    "gdma_create_mr_request",
    88,
    [reserved_1, reserved_union, reserved_2, reserved_3]
);

/// `GDMA_CREATE_MR` response.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct CreateMrResp {
    /// Header.
    pub hdr: RespHdr,
    /// The MR's handle (for `DESTROY_MR`).
    pub mr_handle: U64,
    /// The key SGEs name the memory by.
    pub lkey: U32,
    /// The remote key.
    pub rkey: U32,
}
wire_msg!(CreateMrResp, "gdma_create_mr_response", 48, []);

/// `GDMA_DESTROY_MR` request.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct DestroyMrReq {
    /// Header.
    pub hdr: ReqHdr,
    /// The MR's handle.
    pub mr_handle: U64,
}
wire_msg!(DestroyMrReq, "gdma_destroy_mr_request", 48, []);

/// `MANA_IB_CREATE_CQ` request: a CQ of the adapter on a DMA region
/// (7.x `mana_ib_gd_create_cq`, 64 bytes).
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct CreateCqReq {
    /// Header.
    pub hdr: ReqHdr,
    /// The adapter.
    pub adapter: U64,
    /// The DMA region with the CQ's memory; the CQ takes it over.
    pub gdma_region: U64,
    /// The EQ its completion events go to (one of the RDMA device's).
    pub eq_id: U32,
    /// The doorbell page the CQ is armed through.
    pub doorbell_page: U32,
}
wire_msg!(CreateCqReq, "mana_rnic_create_cq_req", 64, []);

/// `MANA_IB_CREATE_CQ` response.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct CreateCqResp {
    /// Header.
    pub hdr: RespHdr,
    /// The CQ's handle (for `DESTROY_CQ` and QP creation).
    pub cq_handle: U64,
    /// The CQ's id (its doorbells name it).
    pub cq_id: U32,
    /// Zero.
    pub reserved: U32,
}
wire_msg!(CreateCqResp, "mana_rnic_create_cq_resp", 48, [reserved]);

/// `MANA_IB_DESTROY_CQ` request.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct DestroyCqReq {
    /// Header.
    pub hdr: ReqHdr,
    /// The adapter.
    pub adapter: U64,
    /// The CQ's handle.
    pub cq_handle: U64,
}
wire_msg!(DestroyCqReq, "mana_rnic_destroy_cq_req", 56, []);

/// `IB_QPT_GSI`: the general services QP `ib_mad` creates on a RoCE port.
pub const IB_QPT_GSI: u32 = 1;
/// `IB_QPT_UD`: an unreliable datagram QP.
pub const IB_QPT_UD: u32 = 4;

/// `MANA_IB_CREATE_UD_QP` request: a UD or GSI QP of the adapter, its send
/// queue on `dma_region[0]` and its receive queue on `dma_region[1]` (7.x
/// `mana_ib_gd_create_ud_qp`, 112 bytes; kernel consumers only).
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct CreateUdQpReq {
    /// Header.
    pub hdr: ReqHdr,
    /// The adapter.
    pub adapter: U64,
    /// The PD the QP belongs to.
    pub pd_handle: U64,
    /// The CQ of its sends.
    pub send_cq_handle: U64,
    /// The CQ of its receives.
    pub recv_cq_handle: U64,
    /// DMA regions of the send queue and the receive queue
    /// (`MANA_UD_SEND_QUEUE`, `MANA_UD_RECV_QUEUE`); the QP takes them over.
    pub dma_region: [U64; 2],
    /// [`IB_QPT_GSI`] or [`IB_QPT_UD`].
    pub qp_type: U32,
    /// The doorbell page its queues are rung through.
    pub doorbell_page: U32,
    /// Capacities the consumer asked for.
    pub max_send_wr: U32,
    #[allow(missing_docs)]
    pub max_recv_wr: U32,
    #[allow(missing_docs)]
    pub max_send_sge: U32,
    #[allow(missing_docs)]
    pub max_recv_sge: U32,
}
assert_size!(CreateUdQpReq, 112);

impl WireType for CreateUdQpReq {
    const NAME: &'static str = "mana_rnic_create_udqp_req";
    fn validate(&self) -> Result<(), DecodeError> {
        let t = self.qp_type.get();
        if t != IB_QPT_GSI && t != IB_QPT_UD {
            return Err(DecodeError::InvalidField {
                what: Self::NAME,
                field: "qp_type",
                value: u64::from(t),
                expected: "1 (IB_QPT_GSI) or 4 (IB_QPT_UD)",
            });
        }
        Ok(())
    }
}

/// `MANA_IB_CREATE_UD_QP` response.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct CreateUdQpResp {
    /// Header.
    pub hdr: RespHdr,
    /// The QP's handle.
    pub qp_handle: U64,
    /// Ids of the send queue and the receive queue (the kernel's QP
    /// number is the receive queue's).
    pub queue_ids: [U32; 2],
}
wire_msg!(CreateUdQpResp, "mana_rnic_create_udqp_resp", 48, []);

/// `MANA_IB_DESTROY_UD_QP` request.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct DestroyUdQpReq {
    /// Header.
    pub hdr: ReqHdr,
    /// The adapter.
    pub adapter: U64,
    /// The QP's handle.
    pub qp_handle: U64,
}
wire_msg!(DestroyUdQpReq, "mana_rnic_destroy_udqp_req", 56, []);

/// `struct mana_ib_ah_attr`: the address vector of a connected QP (zero
/// for UD and GSI QPs, whose WQEs carry their own).
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
#[allow(missing_docs)]
pub struct AhAttr {
    pub src_addr: [u8; 16],
    pub dest_addr: [u8; 16],
    pub src_mac: [u8; 6],
    pub dest_mac: [u8; 6],
    pub src_addr_type: u8,
    pub dest_addr_type: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub src_port: crate::le::U16,
    pub dest_port: crate::le::U16,
    pub flow_label: U32,
}
assert_size!(AhAttr, 56);

/// `IB_QPS_ERR`, the last of `enum ib_qp_state` (RESET 0, INIT 1, RTR 2,
/// RTS 3, SQD 4, SQE 5, ERR 6).
pub const IB_QPS_ERR: u32 = 6;

/// `MANA_IB_SET_QP_STATE` request (`ib_modify_qp`), version 3, 184 bytes
/// as 7.3's `mana_ib_gd_modify_qp` sends it: the IB attributes named by
/// `attr_mask` (`enum ib_qp_attr_mask`), the others zero.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
#[allow(missing_docs)]
pub struct SetQpStateReq {
    pub hdr: ReqHdr,
    pub adapter: U64,
    pub qp_handle: U64,
    /// `IB_QP_*` bits: which attributes the request sets.
    pub attr_mask: U64,
    /// `enum ib_qp_state`, up to [`IB_QPS_ERR`].
    pub qp_state: U32,
    pub path_mtu: U32,
    pub rq_psn: U32,
    pub sq_psn: U32,
    pub dest_qpn: U32,
    pub max_dest_rd_atomic: U32,
    pub retry_cnt: U32,
    pub rnr_retry: U32,
    pub min_rnr_timer: U32,
    pub rate_limit: U32,
    pub ah_attr: AhAttr,
    /// Must be zero.
    pub reserved1: U64,
    pub qkey: U32,
    pub qp_access_flags: U32,
    pub local_ack_timeout: u8,
    pub max_rd_atomic: u8,
    /// Must be zero.
    pub reserved2: crate::le::U16,
    /// Must be zero.
    pub reserved3: U32,
}
assert_size!(SetQpStateReq, 184);

impl WireType for SetQpStateReq {
    const NAME: &'static str = "mana_rnic_set_qp_state_req";
    fn validate(&self) -> Result<(), DecodeError> {
        reserved_zero(Self::NAME, "reserved1", self.reserved1.as_bytes())?;
        reserved_zero(Self::NAME, "reserved2", self.reserved2.as_bytes())?;
        reserved_zero(Self::NAME, "reserved3", self.reserved3.as_bytes())?;
        let s = self.qp_state.get();
        if s > IB_QPS_ERR {
            return Err(DecodeError::InvalidField {
                what: Self::NAME,
                field: "qp_state",
                value: u64::from(s),
                expected: "an ib_qp_state, 0 (RESET) to 6 (ERR)",
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::{DevId, RequestCode, GDMA_DEVICE_MANA_IB, GDMA_MESSAGE_V2};
    use crate::le::U16;
    use zerocopy::{FromZeros, IntoBytes};

    fn hdr(code: RequestCode, size: usize, resp: usize) -> ReqHdr {
        let mut h = ReqHdr::new(code, size as u32, resp as u32);
        h.dev_id = DevId::new(GDMA_DEVICE_MANA_IB, 0);
        h
    }

    #[test]
    fn golden_adapter_caps() {
        let mut r = QueryAdapterCapsResp::new_zeroed();
        r.max_sq_id = U32::new(0x100);
        r.max_requester_sq_size = U32::new(0x10_0000);
        r.max_recv_sge_count = U32::new(15);
        r.max_inline_data_size = U32::new(0x11);
        let b = r.as_bytes();
        assert_eq!(&b[32..36], &[0, 1, 0, 0]);
        assert_eq!(&b[76..80], &[0, 0, 0x10, 0]);
        assert_eq!(&b[96..100], &[15, 0, 0, 0]);
        assert_eq!(&b[100..104], &[0x11, 0, 0, 0]);
    }

    #[test]
    fn golden_create_adapter() {
        // mana_ib_gd_create_rnic_adapter: version 2, notify EQ 9.
        let mut r = CreateAdapterReq::new_zeroed();
        r.hdr = hdr(RequestCode::MANA_IB_CREATE_ADAPTER, 56, 40);
        r.hdr.req.msg_version = U16::new(GDMA_MESSAGE_V2);
        r.notify_eq_id = U32::new(9);
        let b = r.as_bytes();
        #[rustfmt::skip]
        let head: [u8; 16] = [0, 0, 0, 0, 0x02, 0, 0x03, 0, 2, 0, 0, 0, 56, 0, 0, 0];
        assert_eq!(&b[..16], &head);
        assert_eq!(&b[32..36], &[3, 0, 0, 0]);
        assert_eq!(&b[40..44], &[9, 0, 0, 0]);
        assert_eq!(CreateAdapterReq::decode(b).unwrap().notify_eq_id.get(), 9);
        let mut bad = b.to_vec();
        bad[44] = 1;
        assert_eq!(
            CreateAdapterReq::decode(&bad).unwrap_err().field(),
            Some("reserved")
        );
        assert!(matches!(
            CreateAdapterReq::decode(&b[..55]),
            Err(DecodeError::TooShort { needed: 56, .. })
        ));

        let mut d = DestroyAdapterReq::new_zeroed();
        d.adapter = U64::new(0x1122_3344_5566_7788);
        assert_eq!(
            &d.as_bytes()[40..48],
            &[0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11]
        );
    }

    #[test]
    fn golden_config_mac() {
        // 00:15:5d:4e:0a:01 added, as copy_in_reverse lays it out.
        let mut r = ConfigMacAddrReq::new_zeroed();
        r.hdr = hdr(RequestCode::MANA_IB_CONFIG_MAC_ADDR, 64, 32);
        r.adapter = U64::new(0x77);
        r.op = U32::new(1);
        r.mac_addr = [0x01, 0x0a, 0x4e, 0x5d, 0x15, 0x00];
        let b = r.as_bytes();
        assert_eq!(&b[40..48], &[0x77, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&b[48..52], &[1, 0, 0, 0]);
        assert_eq!(&b[52..58], &[0x01, 0x0a, 0x4e, 0x5d, 0x15, 0x00]);
        let d = ConfigMacAddrReq::decode(b).unwrap();
        assert_eq!(d.op(), AddrOp::Add);
        assert_eq!(d.mac(), [0x00, 0x15, 0x5d, 0x4e, 0x0a, 0x01]);
        let mut bad = b.to_vec();
        bad[48] = 3;
        assert_eq!(
            ConfigMacAddrReq::decode(&bad).unwrap_err().field(),
            Some("op")
        );
        let mut bad = b.to_vec();
        bad[63] = 1;
        assert_eq!(
            ConfigMacAddrReq::decode(&bad).unwrap_err().field(),
            Some("reserved")
        );
    }

    #[test]
    fn golden_config_ip() {
        // The default GID fe80::215:5dff:fe4e:a01, removed.
        let gid: [u8; 16] = [
            0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x15, 0x5d, 0xff, 0xfe, 0x4e, 0x0a, 0x01,
        ];
        let mut r = ConfigIpAddrReq::new_zeroed();
        r.hdr = hdr(RequestCode::MANA_IB_CONFIG_IP_ADDR, 72, 32);
        r.op = U32::new(2);
        r.sgid_type = U32::new(SGID_TYPE_IPV6);
        r.ip_addr = gid;
        r.ip_addr.reverse();
        let b = r.as_bytes();
        assert_eq!(&b[48..56], &[2, 0, 0, 0, 2, 0, 0, 0]);
        assert_eq!(b[56], 0x01);
        assert_eq!(b[71], 0xfe);
        let d = ConfigIpAddrReq::decode(b).unwrap();
        assert_eq!(d.op(), AddrOp::Remove);
        assert_eq!(d.gid(), gid);
        let mut bad = b.to_vec();
        bad[52] = 3;
        assert_eq!(
            ConfigIpAddrReq::decode(&bad).unwrap_err().field(),
            Some("sgid_type")
        );
        bad[52] = 1;
        bad[48] = 0;
        assert_eq!(
            ConfigIpAddrReq::decode(&bad).unwrap_err().field(),
            Some("op")
        );
    }

    #[test]
    fn golden_resource_range_and_pd() {
        // mana_gd_allocate_doorbell_page: one doorbell page, alignment 1.
        let mut a = AllocateResourceRangeReq::new_zeroed();
        a.hdr = hdr(RequestCode::GDMA_ALLOCATE_RESOURCE_RANGE, 56, 36);
        a.resource_type = U32::new(GDMA_RESOURCE_DOORBELL_PAGE);
        a.num_resources = U32::new(1);
        a.alignment = U32::new(1);
        assert_eq!(
            &a.as_bytes()[40..56],
            &[27, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]
        );
        let mut d = DestroyResourceRangeReq::new_zeroed();
        d.allocated_resources = U32::new(5);
        assert_eq!(&d.as_bytes()[48..52], &[5, 0, 0, 0]);

        let mut p = CreatePdResp::new_zeroed();
        p.pd_handle = U64::new(0xabcd);
        p.pd_id = U32::new(7);
        assert_eq!(
            &p.as_bytes()[32..44],
            &[0xcd, 0xab, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0]
        );
        let mut c = CreatePdReq::new_zeroed();
        c.hdr = hdr(RequestCode::GDMA_CREATE_PD, 48, 48);
        let mut bad = c.as_bytes().to_vec();
        bad[44] = 1;
        assert_eq!(
            CreatePdReq::decode(&bad).unwrap_err().field(),
            Some("reserved")
        );
    }

    #[test]
    fn golden_create_mr() {
        // mana_ib_gd_create_mr for a user MR: GVA, region 5, VA
        // 0x7f00_0000_1000, local read + write (as the 6.12 module lays it
        // out: type at 48, region at 56, VA at 64, flags at 72, 88 bytes).
        let mut r = CreateMrReq::new_zeroed();
        r.hdr = hdr(RequestCode::GDMA_CREATE_MR, 88, 48);
        r.pd_handle = U64::new(0x5001);
        r.mr_type = U32::new(GDMA_MR_TYPE_GVA);
        r.dma_region_handle = U64::new(5);
        r.virtual_address = U64::new(0x7f00_0000_1000);
        r.access_flags = U32::new(3);
        let b = r.as_bytes();
        assert_eq!(&b[40..48], &[1, 0x50, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&b[48..52], &[2, 0, 0, 0]);
        assert_eq!(&b[56..64], &[5, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&b[64..72], &[0, 0x10, 0, 0, 0, 0x7f, 0, 0]);
        assert_eq!(&b[72..76], &[3, 0, 0, 0]);
        assert!(CreateMrReq::decode(b).is_ok());
        for (at, field) in [
            (52, "reserved_1"),
            (76, "reserved_union"),
            (80, "reserved_2"),
        ] {
            let mut bad = b.to_vec();
            bad[at] = 1;
            assert_eq!(CreateMrReq::decode(&bad).unwrap_err().field(), Some(field));
        }
        let mut m = CreateMrResp::new_zeroed();
        m.mr_handle = U64::new(0x6000);
        m.lkey = U32::new(0x10001);
        m.rkey = U32::new(0x10001);
        assert_eq!(
            &m.as_bytes()[32..48],
            &[0, 0x60, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 1, 0, 1, 0]
        );
    }
    #[test]
    fn golden_rnic_cq() {
        // 7.3's mana_ib_gd_create_cq (read from the module: a 64-byte
        // request, 48-byte response): adapter at 40, region at 48, EQ id
        // at 56, doorbell page at 60.
        let mut r = CreateCqReq::new_zeroed();
        r.hdr = hdr(RequestCode::MANA_IB_CREATE_CQ, 64, 48);
        r.adapter = U64::new(0x3000);
        r.gdma_region = U64::new(0x21);
        r.eq_id = U32::new(6);
        r.doorbell_page = U32::new(2);
        let b = r.as_bytes();
        assert_eq!(&b[4..8], &[0x08, 0, 0x03, 0]);
        assert_eq!(&b[12..16], &[64, 0, 0, 0]);
        assert_eq!(&b[40..48], &[0, 0x30, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&b[48..56], &[0x21, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&b[56..64], &[6, 0, 0, 0, 2, 0, 0, 0]);
        assert!(matches!(
            CreateCqReq::decode(&b[..63]),
            Err(DecodeError::TooShort { needed: 64, .. })
        ));
        let mut c = CreateCqResp::new_zeroed();
        c.cq_handle = U64::new(0x3007);
        c.cq_id = U32::new(9);
        assert_eq!(
            &c.as_bytes()[32..48],
            &[7, 0x30, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0]
        );
        let mut d = DestroyCqReq::new_zeroed();
        d.hdr = hdr(RequestCode::MANA_IB_DESTROY_CQ, 56, 32);
        d.cq_handle = U64::new(0x3007);
        assert_eq!(&d.as_bytes()[48..56], &[7, 0x30, 0, 0, 0, 0, 0, 0]);
        assert!(DestroyCqReq::decode(d.as_bytes()).is_ok());
    }

    #[test]
    fn golden_ud_qp() {
        // ib_mad's GSI QP as 7.3's mana_ib_gd_create_ud_qp lays it out
        // (112 bytes, response 48): PD, send and receive CQs at 48-71, the
        // SQ's and RQ's regions at 72 and 80, type at 88, doorbell page at
        // 92, then the capacities.
        let mut r = CreateUdQpReq::new_zeroed();
        r.hdr = hdr(RequestCode::MANA_IB_CREATE_UD_QP, 112, 48);
        r.adapter = U64::new(0x3000);
        r.pd_handle = U64::new(0x3001);
        r.send_cq_handle = U64::new(0x3003);
        r.recv_cq_handle = U64::new(0x3004);
        r.dma_region = [U64::new(0x11), U64::new(0x12)];
        r.qp_type = U32::new(IB_QPT_GSI);
        r.doorbell_page = U32::new(2);
        r.max_send_wr = U32::new(128);
        r.max_recv_wr = U32::new(512);
        r.max_send_sge = U32::new(2);
        r.max_recv_sge = U32::new(1);
        let b = r.as_bytes();
        assert_eq!(&b[4..8], &[0x06, 0, 0x03, 0]);
        assert_eq!(&b[48..50], &[0x01, 0x30]);
        assert_eq!(&b[56..58], &[0x03, 0x30]);
        assert_eq!(&b[64..66], &[0x04, 0x30]);
        assert_eq!(b[72], 0x11);
        assert_eq!(b[80], 0x12);
        assert_eq!(&b[88..96], &[1, 0, 0, 0, 2, 0, 0, 0]);
        assert_eq!(
            &b[96..112],
            &[128, 0, 0, 0, 0, 2, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0]
        );
        assert!(CreateUdQpReq::decode(b).is_ok());
        let mut bad = b.to_vec();
        bad[88] = 2; // IB_QPT_RC is not a UD QP
        assert_eq!(
            CreateUdQpReq::decode(&bad).unwrap_err().field(),
            Some("qp_type")
        );
        let mut q = CreateUdQpResp::new_zeroed();
        q.qp_handle = U64::new(0x3005);
        q.queue_ids = [U32::new(3), U32::new(4)];
        assert_eq!(
            &q.as_bytes()[32..48],
            &[5, 0x30, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0]
        );
        let mut d = DestroyUdQpReq::new_zeroed();
        d.qp_handle = U64::new(0x3005);
        assert_eq!(&d.as_bytes()[48..50], &[5, 0x30]);
    }

    #[test]
    fn golden_set_qp_state() {
        // ib_mad moving its GSI QP to INIT: version 3, 184 bytes (7.3's
        // module), state at 64, the qkey at 168.
        let mut r = SetQpStateReq::new_zeroed();
        r.hdr = hdr(RequestCode::MANA_IB_SET_QP_STATE, 184, 32);
        r.hdr.req.msg_version = U16::new(crate::control::GDMA_MESSAGE_V3);
        r.adapter = U64::new(0x3000);
        r.qp_handle = U64::new(0x3005);
        r.attr_mask = U64::new(0x31); // IB_QP_STATE | IB_QP_PKEY_INDEX | IB_QP_QKEY
        r.qp_state = U32::new(1);
        r.qkey = U32::new(0x8001_0000);
        let b = r.as_bytes();
        assert_eq!(&b[8..16], &[3, 0, 0, 0, 184, 0, 0, 0]);
        assert_eq!(&b[56..64], &[0x31, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&b[64..68], &[1, 0, 0, 0]);
        assert_eq!(&b[168..172], &[0, 0, 1, 0x80]);
        assert!(SetQpStateReq::decode(b).is_ok());
        for (at, field) in [(160, "reserved1"), (178, "reserved2"), (180, "reserved3")] {
            let mut bad = b.to_vec();
            bad[at] = 1;
            assert_eq!(
                SetQpStateReq::decode(&bad).unwrap_err().field(),
                Some(field)
            );
        }
        let mut bad = b.to_vec();
        bad[64] = 7;
        assert_eq!(
            SetQpStateReq::decode(&bad).unwrap_err().field(),
            Some("qp_state")
        );
    }

    #[test]
    fn golden_kernel_pd_and_gpa_mr() {
        // 7.x mana_ib_alloc_pd without udata, then mana_ib_get_dma_mr: a
        // GPA MR names only its PD and type.
        let mut p = CreatePdReq::new_zeroed();
        p.hdr = hdr(RequestCode::GDMA_CREATE_PD, 48, 48);
        p.flags = U32::new(GDMA_PD_FLAG_ALLOW_GPA_MR);
        assert_eq!(&p.as_bytes()[40..48], &[1, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(CreatePdReq::decode(p.as_bytes()).unwrap().flags.get(), 1);
        let mut m = CreateMrReq::new_zeroed();
        m.hdr = hdr(RequestCode::GDMA_CREATE_MR, 88, 48);
        m.pd_handle = U64::new(0x3001);
        m.mr_type = U32::new(GDMA_MR_TYPE_GPA);
        let b = m.as_bytes();
        assert_eq!(&b[48..52], &[1, 0, 0, 0]);
        assert!(b[56..88].iter().all(|x| *x == 0));
        assert!(CreateMrReq::decode(b).is_ok());
    }
}

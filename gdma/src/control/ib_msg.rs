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

/// `GDMA_CREATE_PD` request.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct CreatePdReq {
    /// Header.
    pub hdr: ReqHdr,
    /// `enum gdma_pd_flags` (0 from `mana_ib`).
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
}

//! Requests of the MANA Ethernet function (`enum mana_command_code`):
//! device and vPort configuration, work queue objects, RX steering (RSS),
//! fences and statistics.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::{wire_msg, ReqHdr, RespHdr};
use crate::le::{U16, U32, U64};
use crate::{DecodeError, WireType};

/// MANA protocol version the 6.12 driver announces (0.1.1).
pub const MANA_MAJOR_VERSION: u32 = 0;
/// Minor version.
pub const MANA_MINOR_VERSION: u32 = 1;
/// Micro version.
pub const MANA_MICRO_VERSION: u32 = 1;

/// A MANA object handle (`mana_handle_t`); all ones is invalid.
pub const INVALID_MANA_HANDLE: u64 = u64::MAX;

/// Toeplitz key length (`MANA_HASH_KEY_SIZE`).
pub const MANA_HASH_KEY_SIZE: usize = 40;
/// Largest indirection table (`MANA_INDIRECT_TABLE_MAX_SIZE`).
pub const MANA_INDIRECT_TABLE_MAX_SIZE: usize = 512;
/// Indirection table size the kernel uses when the vPort does not say
/// (`MANA_INDIRECT_TABLE_DEF_SIZE`).
pub const MANA_INDIRECT_TABLE_DEF_SIZE: usize = 64;

/// `MANA_QUERY_DEV_CONFIG` request.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
#[allow(missing_docs)]
pub struct QueryDevCfgReq {
    pub hdr: ReqHdr,
    pub mn_drv_cap_flags1: U64,
    pub mn_drv_cap_flags2: U64,
    pub mn_drv_cap_flags3: U64,
    pub mn_drv_cap_flags4: U64,
    pub proto_major_ver: U32,
    pub proto_minor_ver: U32,
    pub proto_micro_ver: U32,
    /// Must be zero.
    pub reserved: U32,
}
wire_msg!(QueryDevCfgReq, "mana_query_device_cfg_req", 88, [reserved]);

/// `MANA_QUERY_DEV_CONFIG` response; version 1 ends after `max_num_eqs`
/// ([`QueryDevCfgResp::V1_SIZE`]), version 2 adds the adapter MTU.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
#[allow(missing_docs)]
pub struct QueryDevCfgResp {
    pub hdr: RespHdr,
    pub pf_cap_flags1: U64,
    pub pf_cap_flags2: U64,
    pub pf_cap_flags3: U64,
    pub pf_cap_flags4: U64,
    pub max_num_vports: U16,
    pub reserved: U16,
    pub max_num_eqs: U32,
    /// Version 2: L2 MTU of the adapter (Ethernet header included).
    pub adapter_mtu: U16,
    pub reserved2: U16,
    pub reserved3: U32,
}
wire_msg!(
    QueryDevCfgResp,
    "mana_query_device_cfg_resp",
    80,
    [reserved, reserved2, reserved3]
);

impl QueryDevCfgResp {
    /// Size of the version 1 response.
    pub const V1_SIZE: usize = 72;
}

/// `MANA_QUERY_LINK_CONFIG` request (7.x: the vPort's speed and QoS).
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
#[allow(missing_docs)]
pub struct QueryLinkCfgReq {
    pub hdr: ReqHdr,
    pub vport: U64,
}
wire_msg!(QueryLinkCfgReq, "mana_query_link_config_req", 48, []);

/// `MANA_QUERY_LINK_CONFIG` response; version 1 ends after
/// `qos_unconfigured` ([`QueryLinkCfgResp::V1_SIZE`]), version 2 adds the
/// link speed.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
#[allow(missing_docs)]
pub struct QueryLinkCfgResp {
    pub hdr: RespHdr,
    /// The QoS clamp, if one is configured.
    pub qos_speed_mbps: U32,
    /// 1: no QoS clamp configured.
    pub qos_unconfigured: u8,
    pub reserved1: [u8; 3],
    pub link_speed_mbps: U32,
    pub reserved2: [u8; 4],
}
wire_msg!(
    QueryLinkCfgResp,
    "mana_query_link_config_resp",
    48,
    [reserved1, reserved2]
);

impl QueryLinkCfgResp {
    /// Size of the version 1 response.
    pub const V1_SIZE: usize = 40;
}

/// `MANA_QUERY_VPORT_CONFIG` request.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct QueryVportCfgReq {
    /// Header.
    pub hdr: ReqHdr,
    /// vPort (port) index.
    pub vport_index: U32,
}
wire_msg!(QueryVportCfgReq, "mana_query_vport_cfg_req", 44, []);

/// `MANA_QUERY_VPORT_CONFIG` response.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
#[allow(missing_docs)]
pub struct QueryVportCfgResp {
    pub hdr: RespHdr,
    pub max_num_sq: U32,
    pub max_num_rq: U32,
    /// Indirection table entries (a power of two up to 512).
    pub num_indirection_ent: U32,
    pub reserved1: U32,
    pub mac_addr: [u8; 6],
    pub reserved2: [u8; 2],
    /// The vPort handle later requests name.
    pub vport: U64,
}
wire_msg!(
    QueryVportCfgResp,
    "mana_query_vport_cfg_resp",
    64,
    [reserved1, reserved2]
);

/// `MANA_CONFIG_VPORT_TX` request.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct ConfigVportReq {
    /// Header.
    pub hdr: ReqHdr,
    /// vPort handle.
    pub vport: U64,
    /// Protection domain the vPort's send queues belong to.
    pub pdid: U32,
    /// Doorbell page of those queues.
    pub doorbell_pageid: U32,
}
wire_msg!(ConfigVportReq, "mana_config_vport_req", 56, []);

/// `MANA_CONFIG_VPORT_TX` response.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct ConfigVportResp {
    /// Header.
    pub hdr: RespHdr,
    /// The vPort offset TX OOBs carry.
    pub tx_vport_offset: U16,
    /// Short TX OOBs are accepted.
    pub short_form_allowed: u8,
    /// Must be zero.
    pub reserved: u8,
}
wire_msg!(ConfigVportResp, "mana_config_vport_resp", 36, [reserved]);

/// `MANA_CREATE_WQ_OBJ` request: a send or receive queue and its CQ.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
#[allow(missing_docs)]
pub struct CreateWqobjReq {
    pub hdr: ReqHdr,
    pub vport: U64,
    /// `gdma_queue_type`: 1 (SQ) or 2 (RQ).
    pub wq_type: U32,
    pub reserved: U32,
    /// DMA region of the work queue; the device takes it over.
    pub wq_gdma_region: U64,
    /// DMA region of the completion queue; the device takes it over.
    pub cq_gdma_region: U64,
    pub wq_size: U32,
    pub cq_size: U32,
    pub cq_moderation_ctx_id: U32,
    /// The EQ the CQ reports to.
    pub cq_parent_qid: U32,
}
wire_msg!(CreateWqobjReq, "mana_create_wqobj_req", 88, [reserved]);

/// What versions 2 and 3 of `MANA_CREATE_WQ_OBJ` add after the 88 bytes of
/// [`CreateWqobjReq`] (7.x kernels send version 3, 96 bytes, with interrupt
/// moderation; 6.12 sends version 1).
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
#[allow(missing_docs)]
pub struct CreateWqobjReqExt {
    /// Version 2: RQ WQE chaining.
    pub allow_rqwqe_chain: u8,
    /// Version 3: the CQ asks for interrupt moderation (the kernel sets it
    /// only if the device advertises `GDMA_PF_CAP_FLAG_1_DYN_INTERRUPT_MODERATION`).
    pub req_cq_moderation: u8,
    pub cq_moderation_comp: U16,
    pub cq_moderation_usec: U16,
    /// Must be zero.
    pub reserved2: [u8; 2],
}
wire_msg!(
    CreateWqobjReqExt,
    "mana_create_wqobj_req (v2/v3 part)",
    8,
    [reserved2]
);

impl CreateWqobjReqExt {
    /// Offset of the extension in the request.
    pub const OFFSET: usize = 88;

    /// The extension of a whole request: zeros for a version 1 request (88
    /// bytes); a longer one must carry exactly the 8 bytes of version 3.
    pub fn of(msg: &[u8]) -> Result<Self, DecodeError> {
        use zerocopy::FromZeros;
        match msg.len() {
            n if n <= Self::OFFSET => Ok(Self::new_zeroed()),
            n if n == Self::OFFSET + core::mem::size_of::<Self>() => {
                Self::decode(&msg[Self::OFFSET..])
            }
            n => Err(DecodeError::InvalidField {
                what: Self::NAME,
                field: "hdr.req.msg_size",
                value: n as u64,
                expected: "88 (version 1) or 96 (version 3) bytes",
            }),
        }
    }
}

/// `MANA_CREATE_WQ_OBJ` response; version 1 ends after `wq_obj`
/// ([`CreateWqobjResp::V1_SIZE`]), version 2 adds the CQ's moderation.
/// 7.x kernels ask version 2 and refuse a shorter answer.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
#[allow(missing_docs)]
pub struct CreateWqobjResp {
    pub hdr: RespHdr,
    pub wq_id: U32,
    pub cq_id: U32,
    pub wq_obj: U64,
    pub cq_moderation_comp: U16,
    pub cq_moderation_usec: U16,
    pub cq_moderation_enabled: u8,
    pub reserved1: [u8; 3],
}
wire_msg!(CreateWqobjResp, "mana_create_wqobj_resp", 56, [reserved1]);

impl CreateWqobjResp {
    /// Size of the version 1 response.
    pub const V1_SIZE: usize = 48;
}

/// `MANA_DESTROY_WQ_OBJ` request.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
#[allow(missing_docs)]
pub struct DestroyWqobjReq {
    pub hdr: ReqHdr,
    pub wq_type: U32,
    pub reserved: U32,
    pub wq_obj_handle: U64,
}
wire_msg!(DestroyWqobjReq, "mana_destroy_wqobj_req", 56, [reserved]);

/// `MANA_FENCE_RQ` request: the device answers, then posts a
/// `CQE_RX_OBJECT_FENCE` completion on the RQ's CQ.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct FenceRqReq {
    /// Header.
    pub hdr: ReqHdr,
    /// The RQ object.
    pub wq_obj_handle: U64,
}
wire_msg!(FenceRqReq, "mana_fence_rq_req", 48, []);

/// `MANA_QUERY_GF_STAT` request.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct QueryGfStatReq {
    /// Header.
    pub hdr: ReqHdr,
    /// `STATISTICS_FLAGS_*` the driver asks for.
    pub req_stats: U64,
}
wire_msg!(QueryGfStatReq, "mana_query_gf_stat_req", 48, []);

/// `MANA_QUERY_GF_STAT` response: the adapter's own counters.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
#[allow(missing_docs, non_snake_case)]
pub struct QueryGfStatResp {
    pub hdr: RespHdr,
    pub reported_stats: U64,
    pub rx_discards_nowqe: U64,
    pub rx_err_vport_disabled: U64,
    pub hc_rx_bytes: U64,
    pub hc_rx_ucast_pkts: U64,
    pub hc_rx_ucast_bytes: U64,
    pub hc_rx_bcast_pkts: U64,
    pub hc_rx_bcast_bytes: U64,
    pub hc_rx_mcast_pkts: U64,
    pub hc_rx_mcast_bytes: U64,
    pub tx_err_gf_disabled: U64,
    pub tx_err_vport_disabled: U64,
    pub tx_err_inval_vport_offset_pkt: U64,
    pub tx_err_vlan_enforcement: U64,
    pub tx_err_ethtype_enforcement: U64,
    pub tx_err_SA_enforcement: U64,
    pub tx_err_SQPDID_enforcement: U64,
    pub tx_err_CQPDID_enforcement: U64,
    pub tx_err_mtu_violation: U64,
    pub tx_err_inval_oob: U64,
    pub hc_tx_bytes: U64,
    pub hc_tx_ucast_pkts: U64,
    pub hc_tx_ucast_bytes: U64,
    pub hc_tx_bcast_pkts: U64,
    pub hc_tx_bcast_bytes: U64,
    pub hc_tx_mcast_pkts: U64,
    pub hc_tx_mcast_bytes: U64,
    pub tx_err_gdma: U64,
}
wire_msg!(QueryGfStatResp, "mana_query_gf_stat_resp", 256, []);

/// `MANA_CONFIG_VPORT_RX` request, version 2, fixed part; the indirection
/// table (`num_indir_entries` RQ object handles) starts at
/// `indir_tab_offset` bytes from the start of the message.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
#[allow(missing_docs)]
pub struct CfgRxSteerReqV2 {
    pub hdr: ReqHdr,
    pub vport: U64,
    pub num_indir_entries: U16,
    pub indir_tab_offset: U16,
    /// `TRI_STATE`: 0 false, 1 true, all ones unknown (leave as is).
    pub rx_enable: U32,
    /// `TRI_STATE`.
    pub rss_enable: U32,
    pub update_default_rxobj: u8,
    pub update_hashkey: u8,
    pub update_indir_tab: u8,
    pub reserved: u8,
    pub default_rxobj: U64,
    pub hashkey: [u8; MANA_HASH_KEY_SIZE],
    pub cqe_coalescing_enable: u8,
    pub reserved2: [u8; 3],
    /// Later versions (7.x sends v5) name bytes v2 reserved: the RSS hash
    /// types and 8-packet CQE coalescing. A v2 request carries zeros.
    pub rss_hash_types: U16,
    pub cqe8_coalescing_enable: u8,
    pub reserved3: u8,
}
wire_msg!(
    CfgRxSteerReqV2,
    "mana_cfg_rx_steer_req_v2",
    120,
    [reserved, reserved2, reserved3]
);

/// `MANA_CONFIG_VPORT_RX` response; version 2 adds the CQE coalescing
/// timeout (0: the device does not say).
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
#[allow(missing_docs)]
pub struct CfgRxSteerResp {
    pub hdr: RespHdr,
    pub cqe_coalescing_timeout_ns: U32,
    pub reserved1: U32,
}
wire_msg!(CfgRxSteerResp, "mana_cfg_rx_steer_resp", 40, [reserved1]);

impl CfgRxSteerResp {
    /// Size of the version 1 response (the header only).
    pub const V1_SIZE: usize = 32;
}

/// A `TRI_STATE` field of [`CfgRxSteerReqV2`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TriState {
    /// Turn off.
    False,
    /// Turn on.
    True,
    /// Leave as it is (`TRI_STATE_UNKNOWN`, -1).
    Unknown,
}

impl TriState {
    fn decode(field: &'static str, v: u32) -> Result<Self, DecodeError> {
        match v {
            0 => Ok(Self::False),
            1 => Ok(Self::True),
            u32::MAX => Ok(Self::Unknown),
            _ => Err(DecodeError::InvalidField {
                what: CfgRxSteerReqV2::NAME,
                field,
                value: v.into(),
                expected: "0, 1 or -1 (TRI_STATE)",
            }),
        }
    }
}

/// A decoded `MANA_CONFIG_VPORT_RX` request.
#[derive(Clone, Copy, Debug)]
pub struct RxSteering<'a> {
    /// The fixed part.
    pub req: CfgRxSteerReqV2,
    /// `rx_enable`.
    pub rx_enable: TriState,
    /// `rss_enable`.
    pub rss_enable: TriState,
    /// The indirection table (empty unless `update_indir_tab`).
    pub table: &'a [U64],
}

impl CfgRxSteerReqV2 {
    /// Decodes the request and its indirection table from the message
    /// (`msg` is `req.msg_size` bytes): the table must lie after the fixed
    /// part and inside the message; when it is updated its size must be a
    /// power of two up to 512; the TRI_STATEs and the update flags must
    /// hold valid values; coalescing, which this device does not do, must
    /// be off.
    pub fn decode_with_table(msg: &[u8]) -> Result<RxSteering<'_>, DecodeError> {
        let r = Self::decode(msg)?;
        let inv = |field, value: u64, expected| DecodeError::InvalidField {
            what: Self::NAME,
            field,
            value,
            expected,
        };
        let rx_enable = TriState::decode("rx_enable", r.rx_enable.get())?;
        let rss_enable = TriState::decode("rss_enable", r.rss_enable.get())?;
        for (field, v) in [
            ("update_default_rxobj", r.update_default_rxobj),
            ("update_hashkey", r.update_hashkey),
            ("update_indir_tab", r.update_indir_tab),
            ("cqe_coalescing_enable", r.cqe_coalescing_enable),
            ("cqe8_coalescing_enable", r.cqe8_coalescing_enable),
        ] {
            if v > 1 {
                return Err(inv(field, v.into(), "0 or 1"));
            }
        }
        // `cqe_coalescing_enable` 1 permits the device to report up to four
        // packets per CQE (`CQE_RX_COALESCED_4`); `mana_ib`'s RSS QPs set it.
        // Whether to coalesce is the device's choice.
        let n = usize::from(r.num_indir_entries.get());
        let table = if r.update_indir_tab == 1 {
            if n == 0 || n > MANA_INDIRECT_TABLE_MAX_SIZE || !n.is_power_of_two() {
                return Err(inv(
                    "num_indir_entries",
                    n as u64,
                    "a power of two up to 512",
                ));
            }
            let off = usize::from(r.indir_tab_offset.get());
            if off < core::mem::size_of::<Self>() || off % 8 != 0 {
                return Err(inv(
                    "indir_tab_offset",
                    off as u64,
                    "8-aligned, after the 120-byte fixed part",
                ));
            }
            let Some(raw) = msg.get(off..off + 8 * n) else {
                return Err(DecodeError::TooShort {
                    what: Self::NAME,
                    needed: off + 8 * n,
                    got: msg.len(),
                });
            };
            <[U64]>::ref_from_bytes(raw).map_err(|_| DecodeError::TooShort {
                what: Self::NAME,
                needed: off + 8 * n,
                got: msg.len(),
            })?
        } else {
            &[]
        };
        Ok(RxSteering {
            req: r,
            rx_enable,
            rss_enable,
            table,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::RequestCode;
    use zerocopy::{FromZeros, IntoBytes};

    #[test]
    fn golden_vport_cfg_resp() {
        let mut r = QueryVportCfgResp::new_zeroed();
        r.max_num_sq = U32::new(4);
        r.max_num_rq = U32::new(4);
        r.num_indirection_ent = U32::new(64);
        r.mac_addr = [0x00, 0x0d, 0x3a, 0x01, 0x02, 0x03];
        r.vport = U64::new(0xabcd);
        let b = r.as_bytes();
        assert_eq!(&b[32..44], &[4, 0, 0, 0, 4, 0, 0, 0, 64, 0, 0, 0]);
        assert_eq!(&b[48..54], &[0x00, 0x0d, 0x3a, 0x01, 0x02, 0x03]);
        assert_eq!(&b[56..64], &[0xcd, 0xab, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn golden_dev_cfg_resp() {
        let mut r = QueryDevCfgResp::new_zeroed();
        r.max_num_vports = U16::new(1);
        r.max_num_eqs = U32::new(64);
        r.adapter_mtu = U16::new(9014);
        let b = r.as_bytes();
        assert_eq!(&b[64..72], &[1, 0, 0, 0, 64, 0, 0, 0]);
        assert_eq!(&b[72..74], &9014u16.to_le_bytes());
    }

    #[test]
    fn golden_wqobj() {
        let mut r = CreateWqobjReq::new_zeroed();
        r.hdr = ReqHdr::new(RequestCode::MANA_CREATE_WQ_OBJ, 88, 48);
        r.vport = U64::new(1);
        r.wq_type = U32::new(2);
        r.wq_gdma_region = U64::new(7);
        r.cq_gdma_region = U64::new(8);
        r.wq_size = U32::new(0x4000);
        r.cq_size = U32::new(0x8000);
        r.cq_parent_qid = U32::new(3);
        let b = r.as_bytes();
        assert_eq!(&b[48..52], &[2, 0, 0, 0]);
        assert_eq!(&b[56..64], &[7, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&b[64..72], &[8, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&b[72..80], &[0, 0x40, 0, 0, 0, 0x80, 0, 0]);
        assert_eq!(&b[84..88], &[3, 0, 0, 0]);
        let mut resp = CreateWqobjResp::new_zeroed();
        resp.wq_id = U32::new(0x400);
        resp.cq_id = U32::new(5);
        resp.wq_obj = U64::new(9);
        assert_eq!(
            &resp.as_bytes()[32..48],
            &[0, 4, 0, 0, 5, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0]
        );
        resp.cq_moderation_comp = U16::new(0x20);
        resp.cq_moderation_usec = U16::new(0x3ff);
        resp.cq_moderation_enabled = 1;
        assert_eq!(&resp.as_bytes()[48..56], &[0x20, 0, 0xff, 3, 1, 0, 0, 0]);
    }

    #[test]
    fn wqobj_versions() {
        let mut r = CreateWqobjReq::new_zeroed();
        r.hdr = ReqHdr::new(RequestCode::MANA_CREATE_WQ_OBJ, 88, 48);
        let v1 = r.as_bytes().to_vec();
        assert_eq!(CreateWqobjReqExt::of(&v1).unwrap().as_bytes(), &[0u8; 8]);
        // Version 3 as a 7.x kernel sends it: moderation asked, 32
        // completions or 100 us.
        let mut v3 = v1.clone();
        v3.extend_from_slice(&[0, 1, 32, 0, 100, 0, 0, 0]);
        let e = CreateWqobjReqExt::of(&v3).unwrap();
        assert_eq!(
            (
                e.allow_rqwqe_chain,
                e.req_cq_moderation,
                e.cq_moderation_comp.get(),
                e.cq_moderation_usec.get()
            ),
            (0, 1, 32, 100)
        );
        v3[95] = 1;
        assert_eq!(
            CreateWqobjReqExt::of(&v3).unwrap_err().field(),
            Some("reserved2")
        );
        assert_eq!(
            CreateWqobjReqExt::of(&v3[..92]).unwrap_err().field(),
            Some("hdr.req.msg_size")
        );
    }

    fn steer(n: u16, update_tab: u8, rss: u32) -> std::vec::Vec<u8> {
        let mut r = CfgRxSteerReqV2::new_zeroed();
        let size = 120 + 8 * usize::from(n);
        r.hdr = ReqHdr::new(RequestCode::MANA_CONFIG_VPORT_RX, size as u32, 32);
        r.vport = U64::new(1);
        r.num_indir_entries = U16::new(n);
        r.indir_tab_offset = U16::new(120);
        r.rx_enable = U32::new(1);
        r.rss_enable = U32::new(rss);
        r.update_default_rxobj = 1;
        r.update_hashkey = 1;
        r.update_indir_tab = update_tab;
        r.default_rxobj = U64::new(0x55);
        r.hashkey[0] = 0x6d;
        r.hashkey[39] = 0xfa;
        let mut v = r.as_bytes().to_vec();
        for i in 0..n {
            v.extend_from_slice(&(0x100 + u64::from(i % 2)).to_le_bytes());
        }
        v
    }

    #[test]
    fn rx_steering() {
        let m = steer(64, 1, 1);
        assert_eq!(&m[48..52], &[64, 0, 120, 0]);
        assert_eq!(&m[60..64], &[1, 1, 1, 0]);
        assert_eq!(m[72], 0x6d);
        assert_eq!(m[111], 0xfa);
        let s = CfgRxSteerReqV2::decode_with_table(&m).unwrap();
        assert_eq!(s.rx_enable, TriState::True);
        assert_eq!(s.table.len(), 64);
        assert_eq!(s.table[1].get(), 0x101);

        // Disabling RX: no table.
        let m = steer(64, 0, 0);
        let s = CfgRxSteerReqV2::decode_with_table(&m).unwrap();
        assert!(s.table.is_empty());
        assert_eq!(s.rss_enable, TriState::False);

        let field = |m: &[u8]| CfgRxSteerReqV2::decode_with_table(m).unwrap_err().field();
        assert_eq!(field(&steer(48, 1, 1)), Some("num_indir_entries"));
        assert_eq!(field(&steer(64, 1, 2)), Some("rss_enable"));
        assert_eq!(field(&steer(64, 2, 1)), Some("update_indir_tab"));
        let mut m = steer(64, 1, 1);
        m[112] = 1;
        assert!(CfgRxSteerReqV2::decode_with_table(&m).is_ok());
        m[112] = 2;
        assert_eq!(field(&m), Some("cqe_coalescing_enable"));
        let mut m = steer(64, 1, 1);
        m[50] = 112;
        assert_eq!(field(&m), Some("indir_tab_offset"));
        let m = steer(64, 1, 1);
        assert!(matches!(
            CfgRxSteerReqV2::decode_with_table(&m[..600]),
            Err(DecodeError::TooShort { needed: 632, .. })
        ));
        let mut m = steer(64, 1, 1);
        m[113] = 1;
        assert_eq!(field(&m), Some("reserved2"));
        // The bytes v5 names: hash types (116..118), 8-packet coalescing
        // (118), then one reserved byte.
        let mut m = steer(64, 1, 1);
        m[116] = 0x3f;
        m[118] = 1;
        let s = CfgRxSteerReqV2::decode_with_table(&m).unwrap();
        assert_eq!(
            (s.req.rss_hash_types.get(), s.req.cqe8_coalescing_enable),
            (0x3f, 1)
        );
        m[118] = 2;
        assert_eq!(field(&m), Some("cqe8_coalescing_enable"));
        m[118] = 0;
        m[119] = 1;
        assert_eq!(field(&m), Some("reserved3"));
    }
}

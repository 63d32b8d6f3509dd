//! The GDMA control protocol carried by the hardware channel (HWC): message
//! headers, request codes and statuses ([`ReqHdr`], [`RespHdr`],
//! [`RequestCode`]), and the request/response bodies of the GDMA layer
//! ([`gdma_msg`]), of the MANA Ethernet function ([`mana_msg`]) and of the
//! MANA RDMA function ([`ib_msg`]).
//!
//! Every message starts with a header; the body follows at byte 40 of a
//! request and byte 32 of a response. `msg_size` counts the header too. The
//! kernel (6.12 `include/net/mana/{gdma,mana}.h`) lays the structures out
//! naturally aligned; here they are little-endian, alignment 1, and their
//! sizes are pinned by `assert_size!`.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::error::mbz;
use crate::le::{U16, U32};
use crate::{assert_size, DecodeError, WireType};

pub mod gdma_msg;
pub mod ib_msg;
pub mod mana_msg;

pub use gdma_msg::*;
pub use ib_msg::*;
pub use mana_msg::*;

/// `hdr_type` of every message (`GDMA_STANDARD_HEADER_TYPE`).
pub const GDMA_STANDARD_HEADER_TYPE: u32 = 0;
/// Message format version 1 (`GDMA_MESSAGE_V1`).
pub const GDMA_MESSAGE_V1: u16 = 1;
/// Message format version 2 (`GDMA_MESSAGE_V2`): longer
/// `QUERY_DEV_CONFIG` / `QUERY_GF_STAT` responses, `CONFIG_VPORT_RX` v2.
pub const GDMA_MESSAGE_V2: u16 = 2;
/// Message format version 3 (`GDMA_MESSAGE_V3`).
pub const GDMA_MESSAGE_V3: u16 = 3;
/// Message format version 4 (`GDMA_MESSAGE_V4`): 7.x kernels ask it of
/// `MANA_IB_GET_ADAPTER_CAP` (a `feature_flags` field after v3's).
pub const GDMA_MESSAGE_V4: u16 = 4;
/// Message format version 5 (`GDMA_MESSAGE_V5`), the newest Linux defines.
pub const GDMA_MESSAGE_V5: u16 = 5;

/// Largest request the HWC carries (`HW_CHANNEL_MAX_REQUEST_SIZE`).
pub const HWC_MAX_REQUEST_SIZE: u32 = 0x1000;
/// Largest response the HWC carries (`HW_CHANNEL_MAX_RESPONSE_SIZE`).
pub const HWC_MAX_RESPONSE_SIZE: u32 = 0x1000;

/// Response statuses. The kernel names only `GDMA_STATUS_MORE_ENTRIES`
/// (0x105, an NTSTATUS value: `STATUS_MORE_ENTRIES`) and treats any other
/// non-zero value as a failure; the failure codes below are the NTSTATUS
/// values for the same conditions, which is what a device whose firmware
/// speaks NTSTATUS would answer. A driver must only test for zero.
pub mod status {
    /// Success.
    pub const SUCCESS: u32 = 0;
    /// Success, and the answer continues in a later request.
    pub const MORE_ENTRIES: u32 = 0x0000_0105;
    /// The request is malformed (size, reserved field, unknown value).
    pub const INVALID_PARAMETER: u32 = 0xC000_000D;
    /// The request names an object that does not exist.
    pub const NOT_FOUND: u32 = 0xC000_0225;
    /// The request is known but this device does not implement it.
    pub const NOT_SUPPORTED: u32 = 0xC000_00BB;
    /// No resources left (queue ids, DMA regions, ...).
    pub const INSUFFICIENT_RESOURCES: u32 = 0xC000_009A;
    /// The object is in use (e.g. a DMA region already owned by a queue).
    pub const DEVICE_BUSY: u32 = 0x8000_0011;
    /// The request is not valid in the current state.
    pub const INVALID_DEVICE_STATE: u32 = 0xC000_0184;
}

/// A message header (`struct gdma_msg_hdr`, 16 bytes).
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    FromBytes,
    IntoBytes,
    Immutable,
    KnownLayout,
    Unaligned,
)]
#[repr(C)]
pub struct MsgHdr {
    /// Always [`GDMA_STANDARD_HEADER_TYPE`].
    pub hdr_type: U32,
    /// The [`RequestCode`].
    pub msg_type: U32,
    /// Format version ([`GDMA_MESSAGE_V1`] ...).
    pub msg_version: U16,
    /// The HWC slot the request was sent from; the response carries it back.
    pub hwc_msg_id: U16,
    /// Size of the whole message, header included.
    pub msg_size: U32,
}
assert_size!(MsgHdr, 16);

/// A GDMA device id (`struct gdma_dev_id`): type and instance.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Hash,
    FromBytes,
    IntoBytes,
    Immutable,
    KnownLayout,
    Unaligned,
)]
#[repr(C)]
pub struct DevId {
    /// [`GDMA_DEVICE_HWC`], [`GDMA_DEVICE_MANA`], [`GDMA_DEVICE_MANA_IB`].
    pub ty: U16,
    /// Instance number.
    pub instance: U16,
}
assert_size!(DevId, 4);

/// Device type of the hardware channel itself.
pub const GDMA_DEVICE_HWC: u16 = 1;
/// Device type of the MANA Ethernet function.
pub const GDMA_DEVICE_MANA: u16 = 2;
/// Device type of the MANA RDMA function.
pub const GDMA_DEVICE_MANA_IB: u16 = 3;

impl DevId {
    /// A device id from its type and instance.
    pub const fn new(ty: u16, instance: u16) -> Self {
        Self {
            ty: U16::new(ty),
            instance: U16::new(instance),
        }
    }
    /// The id as the 32-bit value the kernel compares (`as_uint32`).
    pub const fn as_u32(self) -> u32 {
        self.ty.get() as u32 | (self.instance.get() as u32) << 16
    }
}

/// Request header (`struct gdma_req_hdr`, 40 bytes).
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    FromBytes,
    IntoBytes,
    Immutable,
    KnownLayout,
    Unaligned,
)]
#[repr(C)]
pub struct ReqHdr {
    /// The request: code, version, HWC slot, size.
    pub req: MsgHdr,
    /// The response the driver expects: code, version, size of its buffer.
    pub resp: MsgHdr,
    /// The device the request addresses.
    pub dev_id: DevId,
    /// Chosen by the driver, echoed in the response.
    pub activity_id: U32,
}
assert_size!(ReqHdr, 40);

impl ReqHdr {
    /// A request header as `mana_gd_init_req_hdr` builds it: version 1, the
    /// same code for request and response.
    pub fn new(code: RequestCode, req_size: u32, resp_size: u32) -> Self {
        let h = |size| MsgHdr {
            hdr_type: U32::new(GDMA_STANDARD_HEADER_TYPE),
            msg_type: U32::new(code as u32),
            msg_version: U16::new(GDMA_MESSAGE_V1),
            hwc_msg_id: U16::new(0),
            msg_size: U32::new(size),
        };
        Self {
            req: h(req_size),
            resp: h(resp_size),
            dev_id: DevId::default(),
            activity_id: U32::new(0),
        }
    }
}

impl WireType for ReqHdr {
    const NAME: &'static str = "gdma_req_hdr";
    fn validate(&self) -> Result<(), DecodeError> {
        for (field, h) in [("req.hdr_type", &self.req), ("resp.hdr_type", &self.resp)] {
            if h.hdr_type.get() != GDMA_STANDARD_HEADER_TYPE {
                return Err(DecodeError::InvalidField {
                    what: Self::NAME,
                    field,
                    value: h.hdr_type.get() as u64,
                    expected: "0 (GDMA_STANDARD_HEADER_TYPE)",
                });
            }
        }
        // The request's own format must be one the device parses; the
        // response's is the newest the driver reads (the device answers at
        // most that), so any version Linux defines is acceptable there.
        let req_v = self.req.msg_version.get();
        if !(GDMA_MESSAGE_V1..=GDMA_MESSAGE_V5).contains(&req_v) {
            return Err(DecodeError::InvalidField {
                what: Self::NAME,
                field: "req.msg_version",
                value: req_v as u64,
                expected: "1 to 5 (GDMA_MESSAGE_V1..V5)",
            });
        }
        let resp_v = self.resp.msg_version.get();
        if !(GDMA_MESSAGE_V1..=GDMA_MESSAGE_V5).contains(&resp_v) {
            return Err(DecodeError::InvalidField {
                what: Self::NAME,
                field: "resp.msg_version",
                value: resp_v as u64,
                expected: "1 to 5 (GDMA_MESSAGE_V1..V5)",
            });
        }
        if (self.req.msg_size.get() as usize) < core::mem::size_of::<Self>() {
            return Err(DecodeError::InvalidField {
                what: Self::NAME,
                field: "req.msg_size",
                value: self.req.msg_size.get() as u64,
                expected: "at least the 40-byte request header",
            });
        }
        if (self.resp.msg_size.get() as usize) < core::mem::size_of::<RespHdr>() {
            return Err(DecodeError::InvalidField {
                what: Self::NAME,
                field: "resp.msg_size",
                value: self.resp.msg_size.get() as u64,
                expected: "at least the 32-byte response header",
            });
        }
        Ok(())
    }
}

/// Response header (`struct gdma_resp_hdr`, 32 bytes).
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    FromBytes,
    IntoBytes,
    Immutable,
    KnownLayout,
    Unaligned,
)]
#[repr(C)]
pub struct RespHdr {
    /// Code, version, the request's HWC slot, size of the response.
    pub response: MsgHdr,
    /// The request's device id.
    pub dev_id: DevId,
    /// The request's activity id.
    pub activity_id: U32,
    /// [`status::SUCCESS`] or a failure code.
    pub status: U32,
    /// Must be zero.
    pub reserved: U32,
}
assert_size!(RespHdr, 32);

impl RespHdr {
    /// The header of the response to `req`: the code and version the driver
    /// asked for in `req.resp` (a device answers at most the version
    /// requested), the request's HWC slot, device id and activity id.
    pub fn answering(req: &ReqHdr, version: u16, size: u32, status: u32) -> Self {
        Self {
            response: MsgHdr {
                hdr_type: U32::new(GDMA_STANDARD_HEADER_TYPE),
                msg_type: req.resp.msg_type,
                msg_version: U16::new(version),
                hwc_msg_id: req.req.hwc_msg_id,
                msg_size: U32::new(size),
            },
            dev_id: req.dev_id,
            activity_id: req.activity_id,
            status: U32::new(status),
            reserved: U32::new(0),
        }
    }
}

impl WireType for RespHdr {
    const NAME: &'static str = "gdma_resp_hdr";
    fn validate(&self) -> Result<(), DecodeError> {
        mbz(Self::NAME, "reserved", self.reserved.get() as u64)
    }
}

/// Request codes: the GDMA layer's (`enum gdma_request_type`), the MANA
/// Ethernet function's (`enum mana_command_code`) and the MANA RDMA
/// function's (`enum mana_ib_command_code`, drivers/infiniband/hw/mana).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
#[allow(missing_docs, non_camel_case_types)]
pub enum RequestCode {
    GDMA_VERIFY_VF_DRIVER_VERSION = 1,
    GDMA_QUERY_MAX_RESOURCES = 2,
    GDMA_LIST_DEVICES = 3,
    GDMA_REGISTER_DEVICE = 4,
    GDMA_DEREGISTER_DEVICE = 5,
    GDMA_GENERATE_TEST_EQE = 10,
    GDMA_CREATE_QUEUE = 12,
    GDMA_DISABLE_QUEUE = 13,
    GDMA_ALLOCATE_RESOURCE_RANGE = 22,
    GDMA_DESTROY_RESOURCE_RANGE = 24,
    GDMA_CREATE_DMA_REGION = 25,
    GDMA_DMA_REGION_ADD_PAGES = 26,
    GDMA_DESTROY_DMA_REGION = 27,
    GDMA_CREATE_PD = 29,
    GDMA_DESTROY_PD = 30,
    GDMA_CREATE_MR = 31,
    GDMA_DESTROY_MR = 32,
    GDMA_QUERY_HWC_TIMEOUT = 84,
    MANA_QUERY_DEV_CONFIG = 0x20001,
    MANA_QUERY_GF_STAT = 0x20002,
    MANA_CONFIG_VPORT_TX = 0x20003,
    MANA_CREATE_WQ_OBJ = 0x20004,
    MANA_DESTROY_WQ_OBJ = 0x20005,
    MANA_FENCE_RQ = 0x20006,
    MANA_CONFIG_VPORT_RX = 0x20007,
    MANA_QUERY_VPORT_CONFIG = 0x20008,
    MANA_QUERY_LINK_CONFIG = 0x2000a,
    MANA_REGISTER_FILTER = 0x28000,
    MANA_DEREGISTER_FILTER = 0x28001,
    MANA_REGISTER_HW_PORT = 0x28003,
    MANA_DEREGISTER_HW_PORT = 0x28004,
    MANA_IB_GET_ADAPTER_CAP = 0x30001,
    MANA_IB_CREATE_ADAPTER = 0x30002,
    MANA_IB_DESTROY_ADAPTER = 0x30003,
    MANA_IB_CONFIG_IP_ADDR = 0x30004,
    MANA_IB_CONFIG_MAC_ADDR = 0x30005,
    MANA_IB_CREATE_UD_QP = 0x30006,
    MANA_IB_DESTROY_UD_QP = 0x30007,
    MANA_IB_CREATE_CQ = 0x30008,
    MANA_IB_DESTROY_CQ = 0x30009,
    MANA_IB_CREATE_RC_QP = 0x3000a,
    MANA_IB_DESTROY_RC_QP = 0x3000b,
    MANA_IB_SET_QP_STATE = 0x3000d,
    MANA_IB_QUERY_VF_COUNTERS = 0x30022,
}

impl RequestCode {
    /// Every code, for lookups and tests.
    pub const ALL: [RequestCode; 44] = {
        use RequestCode::*;
        [
            GDMA_VERIFY_VF_DRIVER_VERSION,
            GDMA_QUERY_MAX_RESOURCES,
            GDMA_LIST_DEVICES,
            GDMA_REGISTER_DEVICE,
            GDMA_DEREGISTER_DEVICE,
            GDMA_GENERATE_TEST_EQE,
            GDMA_CREATE_QUEUE,
            GDMA_DISABLE_QUEUE,
            GDMA_ALLOCATE_RESOURCE_RANGE,
            GDMA_DESTROY_RESOURCE_RANGE,
            GDMA_CREATE_DMA_REGION,
            GDMA_DMA_REGION_ADD_PAGES,
            GDMA_DESTROY_DMA_REGION,
            GDMA_CREATE_PD,
            GDMA_DESTROY_PD,
            GDMA_CREATE_MR,
            GDMA_DESTROY_MR,
            GDMA_QUERY_HWC_TIMEOUT,
            MANA_QUERY_DEV_CONFIG,
            MANA_QUERY_GF_STAT,
            MANA_CONFIG_VPORT_TX,
            MANA_CREATE_WQ_OBJ,
            MANA_DESTROY_WQ_OBJ,
            MANA_FENCE_RQ,
            MANA_CONFIG_VPORT_RX,
            MANA_QUERY_VPORT_CONFIG,
            MANA_QUERY_LINK_CONFIG,
            MANA_REGISTER_FILTER,
            MANA_DEREGISTER_FILTER,
            MANA_REGISTER_HW_PORT,
            MANA_DEREGISTER_HW_PORT,
            MANA_IB_GET_ADAPTER_CAP,
            MANA_IB_CREATE_ADAPTER,
            MANA_IB_DESTROY_ADAPTER,
            MANA_IB_CONFIG_IP_ADDR,
            MANA_IB_CONFIG_MAC_ADDR,
            MANA_IB_CREATE_UD_QP,
            MANA_IB_DESTROY_UD_QP,
            MANA_IB_CREATE_CQ,
            MANA_IB_DESTROY_CQ,
            MANA_IB_CREATE_RC_QP,
            MANA_IB_DESTROY_RC_QP,
            MANA_IB_SET_QP_STATE,
            MANA_IB_QUERY_VF_COUNTERS,
        ]
    };

    /// The code for a raw `msg_type`, if it is one the drivers define.
    pub fn from_raw(v: u32) -> Option<Self> {
        Self::ALL.iter().copied().find(|c| *c as u32 == v)
    }

    /// The C name, for logs.
    pub fn name(self) -> &'static str {
        use RequestCode::*;
        match self {
            GDMA_VERIFY_VF_DRIVER_VERSION => "GDMA_VERIFY_VF_DRIVER_VERSION",
            GDMA_QUERY_MAX_RESOURCES => "GDMA_QUERY_MAX_RESOURCES",
            GDMA_LIST_DEVICES => "GDMA_LIST_DEVICES",
            GDMA_REGISTER_DEVICE => "GDMA_REGISTER_DEVICE",
            GDMA_DEREGISTER_DEVICE => "GDMA_DEREGISTER_DEVICE",
            GDMA_GENERATE_TEST_EQE => "GDMA_GENERATE_TEST_EQE",
            GDMA_CREATE_QUEUE => "GDMA_CREATE_QUEUE",
            GDMA_DISABLE_QUEUE => "GDMA_DISABLE_QUEUE",
            GDMA_ALLOCATE_RESOURCE_RANGE => "GDMA_ALLOCATE_RESOURCE_RANGE",
            GDMA_DESTROY_RESOURCE_RANGE => "GDMA_DESTROY_RESOURCE_RANGE",
            GDMA_CREATE_DMA_REGION => "GDMA_CREATE_DMA_REGION",
            GDMA_DMA_REGION_ADD_PAGES => "GDMA_DMA_REGION_ADD_PAGES",
            GDMA_DESTROY_DMA_REGION => "GDMA_DESTROY_DMA_REGION",
            GDMA_CREATE_PD => "GDMA_CREATE_PD",
            GDMA_DESTROY_PD => "GDMA_DESTROY_PD",
            GDMA_CREATE_MR => "GDMA_CREATE_MR",
            GDMA_DESTROY_MR => "GDMA_DESTROY_MR",
            GDMA_QUERY_HWC_TIMEOUT => "GDMA_QUERY_HWC_TIMEOUT",
            MANA_QUERY_DEV_CONFIG => "MANA_QUERY_DEV_CONFIG",
            MANA_QUERY_GF_STAT => "MANA_QUERY_GF_STAT",
            MANA_CONFIG_VPORT_TX => "MANA_CONFIG_VPORT_TX",
            MANA_CREATE_WQ_OBJ => "MANA_CREATE_WQ_OBJ",
            MANA_DESTROY_WQ_OBJ => "MANA_DESTROY_WQ_OBJ",
            MANA_FENCE_RQ => "MANA_FENCE_RQ",
            MANA_CONFIG_VPORT_RX => "MANA_CONFIG_VPORT_RX",
            MANA_QUERY_VPORT_CONFIG => "MANA_QUERY_VPORT_CONFIG",
            MANA_QUERY_LINK_CONFIG => "MANA_QUERY_LINK_CONFIG",
            MANA_REGISTER_FILTER => "MANA_REGISTER_FILTER",
            MANA_DEREGISTER_FILTER => "MANA_DEREGISTER_FILTER",
            MANA_REGISTER_HW_PORT => "MANA_REGISTER_HW_PORT",
            MANA_DEREGISTER_HW_PORT => "MANA_DEREGISTER_HW_PORT",
            MANA_IB_GET_ADAPTER_CAP => "MANA_IB_GET_ADAPTER_CAP",
            MANA_IB_CREATE_ADAPTER => "MANA_IB_CREATE_ADAPTER",
            MANA_IB_DESTROY_ADAPTER => "MANA_IB_DESTROY_ADAPTER",
            MANA_IB_CONFIG_IP_ADDR => "MANA_IB_CONFIG_IP_ADDR",
            MANA_IB_CONFIG_MAC_ADDR => "MANA_IB_CONFIG_MAC_ADDR",
            MANA_IB_CREATE_UD_QP => "MANA_IB_CREATE_UD_QP",
            MANA_IB_DESTROY_UD_QP => "MANA_IB_DESTROY_UD_QP",
            MANA_IB_CREATE_CQ => "MANA_IB_CREATE_CQ",
            MANA_IB_DESTROY_CQ => "MANA_IB_DESTROY_CQ",
            MANA_IB_CREATE_RC_QP => "MANA_IB_CREATE_RC_QP",
            MANA_IB_DESTROY_RC_QP => "MANA_IB_DESTROY_RC_QP",
            MANA_IB_SET_QP_STATE => "MANA_IB_SET_QP_STATE",
            MANA_IB_QUERY_VF_COUNTERS => "MANA_IB_QUERY_VF_COUNTERS",
        }
    }
}

/// Checks that every byte of a reserved field is zero.
pub(crate) fn reserved_zero(
    what: &'static str,
    field: &'static str,
    bytes: &[u8],
) -> Result<(), DecodeError> {
    let mut v = 0u64;
    for (i, b) in bytes.iter().enumerate() {
        if *b != 0 {
            v |= u64::from(*b) << (8 * (i % 8));
        }
    }
    if bytes.iter().any(|b| *b != 0) {
        return Err(DecodeError::ReservedNonZero {
            what,
            field,
            value: v,
        });
    }
    Ok(())
}

/// Implements [`WireType`] for a message body: size check, and every listed
/// reserved field must be zero.
macro_rules! wire_msg {
    ($t:ident, $name:expr, $size:expr, [$($res:ident),* $(,)?]) => {
        $crate::assert_size!($t, $size);
        impl $crate::WireType for $t {
            const NAME: &'static str = $name;
            #[allow(unused_variables)]
            fn validate(&self) -> Result<(), $crate::DecodeError> {
                $(
                    $crate::control::reserved_zero(
                        Self::NAME,
                        stringify!($res),
                        zerocopy::IntoBytes::as_bytes(&self.$res),
                    )?;
                )*
                Ok(())
            }
        }
    };
}
pub(crate) use wire_msg;

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::IntoBytes;

    #[test]
    fn request_codes_round_trip() {
        for c in RequestCode::ALL {
            assert_eq!(RequestCode::from_raw(c as u32), Some(c));
            assert!(c.name().starts_with("GDMA_") || c.name().starts_with("MANA_"));
        }
        assert_eq!(RequestCode::from_raw(0), None);
        assert_eq!(RequestCode::from_raw(0x20009), None);
        assert_eq!(
            RequestCode::from_raw(0x2000a),
            Some(RequestCode::MANA_QUERY_LINK_CONFIG)
        );
    }

    #[test]
    fn golden_req_hdr() {
        // mana_gd_init_req_hdr(&hdr, GDMA_LIST_DEVICES, 40, 296) with
        // dev_id {type 2, instance 1}, activity_id 7, hwc_msg_id 0.
        let mut h = ReqHdr::new(RequestCode::GDMA_LIST_DEVICES, 40, 296);
        h.dev_id = DevId::new(GDMA_DEVICE_MANA, 1);
        h.activity_id = U32::new(7);
        #[rustfmt::skip]
        let golden: [u8; 40] = [
            0, 0, 0, 0,  3, 0, 0, 0,  1, 0,  0, 0,  40, 0, 0, 0,
            0, 0, 0, 0,  3, 0, 0, 0,  1, 0,  0, 0,  0x28, 1, 0, 0,
            2, 0, 1, 0,  7, 0, 0, 0,
        ];
        assert_eq!(h.as_bytes(), &golden);
        assert_eq!(ReqHdr::decode(&golden).unwrap(), h);
        assert_eq!(h.dev_id.as_u32(), 0x0001_0002);
    }

    #[test]
    fn req_hdr_fails_closed() {
        let good = ReqHdr::new(RequestCode::GDMA_LIST_DEVICES, 40, 296);
        let mut b = good.as_bytes().to_vec();
        b[0] = 1; // hdr_type
        assert_eq!(
            ReqHdr::decode(&b).unwrap_err().field(),
            Some("req.hdr_type")
        );
        let mut b = good.as_bytes().to_vec();
        b[24] = 6; // resp.msg_version beyond GDMA_MESSAGE_V5
        assert_eq!(
            ReqHdr::decode(&b).unwrap_err().field(),
            Some("resp.msg_version")
        );
        // A driver may ask a newer response than the device writes (7.x's
        // GET_ADAPTER_CAP asks v4); which request versions a request takes
        // is the device's to check (7.x sends CONFIG_VPORT_RX v5).
        b[24] = GDMA_MESSAGE_V4 as u8;
        assert_eq!(ReqHdr::decode(&b).unwrap().resp.msg_version.get(), 4);
        b[8] = 6; // req.msg_version
        assert_eq!(
            ReqHdr::decode(&b).unwrap_err().field(),
            Some("req.msg_version")
        );
        let mut b = good.as_bytes().to_vec();
        b[12] = 39; // req.msg_size below the header
        assert_eq!(
            ReqHdr::decode(&b).unwrap_err().field(),
            Some("req.msg_size")
        );
        assert!(matches!(
            ReqHdr::decode(&b[..39]),
            Err(DecodeError::TooShort {
                needed: 40,
                got: 39,
                ..
            })
        ));
    }

    #[test]
    fn golden_resp_hdr() {
        let mut req = ReqHdr::new(RequestCode::MANA_QUERY_DEV_CONFIG, 88, 64);
        req.resp.msg_version = U16::new(GDMA_MESSAGE_V2);
        req.req.hwc_msg_id = U16::new(3);
        req.dev_id = DevId::new(GDMA_DEVICE_MANA, 0);
        req.activity_id = U32::new(0x11223344);
        let r = RespHdr::answering(&req, GDMA_MESSAGE_V2, 64, status::NOT_SUPPORTED);
        #[rustfmt::skip]
        let golden: [u8; 32] = [
            0, 0, 0, 0,  0x01, 0, 0x02, 0,  2, 0,  3, 0,  64, 0, 0, 0,
            2, 0, 0, 0,  0x44, 0x33, 0x22, 0x11,  0xBB, 0, 0, 0xC0,  0, 0, 0, 0,
        ];
        assert_eq!(r.as_bytes(), &golden);
        let mut b = golden;
        b[28] = 1;
        assert_eq!(RespHdr::decode(&b).unwrap_err().field(), Some("reserved"));
    }
}

//! GDMA-layer requests (`enum gdma_request_type`): version handshake,
//! resources, device list and registration, event queues, DMA regions.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::{wire_msg, DevId, ReqHdr, RespHdr};
use crate::le::{U32, U64};
use crate::{DecodeError, WireType};

/// `GDMA_PROTOCOL_V1`, the only GDMA protocol version.
pub const GDMA_PROTOCOL_V1: u64 = 1;

/// Driver capability: one EQ may serve several vPorts.
pub const GDMA_DRV_CAP_FLAG_1_EQ_SHARING_MULTI_VPORT: u64 = 1 << 0;
/// Driver capability: the NAPI work_done race is fixed.
pub const GDMA_DRV_CAP_FLAG_1_NAPI_WKDONE_FIX: u64 = 1 << 2;
/// Driver/device capability: the HWC timeout is queried
/// (`GDMA_QUERY_HWC_TIMEOUT`) and may be reconfigured by an event.
pub const GDMA_DRV_CAP_FLAG_1_HWC_TIMEOUT_RECONFIG: u64 = 1 << 3;
/// Driver capability: indirection tables of any power-of-two size.
pub const GDMA_DRV_CAP_FLAG_1_VARIABLE_INDIRECTION_TABLE_SUPPORT: u64 = 1 << 5;
/// Driver capability: `GDMA_LIST_DEVICES` may contain empty slots.
pub const GDMA_DRV_CAP_FLAG_1_DEV_LIST_HOLES_SUP: u64 = 1 << 11;

/// Entries in a `GDMA_LIST_DEVICES` response.
pub const GDMA_DEV_LIST_SIZE: usize = 64;

/// `GDMA_GENERATE_TEST_EQE` request.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct GenerateTestEventReq {
    /// Header.
    pub hdr: ReqHdr,
    /// The EQ to post a `GDMA_EQE_TEST_EVENT` to.
    pub queue_index: U32,
}
wire_msg!(GenerateTestEventReq, "gdma_generate_test_event_req", 44, []);

/// `GDMA_VERIFY_VF_DRIVER_VERSION` request.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct VerifyVerReq {
    /// Header.
    pub hdr: ReqHdr,
    /// Oldest GDMA protocol the driver speaks.
    pub protocol_ver_min: U64,
    /// Newest GDMA protocol the driver speaks.
    pub protocol_ver_max: U64,
    /// `GDMA_DRV_CAP_FLAG_1_*`.
    pub gd_drv_cap_flags1: U64,
    /// Capability flags, word 2.
    pub gd_drv_cap_flags2: U64,
    /// Capability flags, word 3.
    pub gd_drv_cap_flags3: U64,
    /// Capability flags, word 4.
    pub gd_drv_cap_flags4: U64,
    /// Driver version (unused by Linux: 0).
    pub drv_ver: U64,
    /// 0x10 Linux, 0x20 Windows, 0x30 other.
    pub os_type: U32,
    /// Must be zero.
    pub reserved: U32,
    /// Kernel major version.
    pub os_ver_major: U32,
    /// Kernel minor version.
    pub os_ver_minor: U32,
    /// Kernel sublevel.
    pub os_ver_build: U32,
    /// Platform.
    pub os_ver_platform: U32,
    /// Must be zero.
    pub reserved_2: U64,
    /// `uname -s`.
    pub os_ver_str1: [u8; 128],
    /// `uname -r`.
    pub os_ver_str2: [u8; 128],
    /// `uname -v`.
    pub os_ver_str3: [u8; 128],
    /// Unused.
    pub os_ver_str4: [u8; 128],
}
wire_msg!(
    VerifyVerReq,
    "gdma_verify_ver_req",
    640,
    [reserved, reserved_2]
);

/// `GDMA_VERIFY_VF_DRIVER_VERSION` response.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct VerifyVerResp {
    /// Header.
    pub hdr: RespHdr,
    /// The protocol both sides use.
    pub gdma_protocol_ver: U64,
    /// Device capabilities (`GDMA_DRV_CAP_FLAG_1_*` bits the device has).
    pub pf_cap_flags1: U64,
    /// Word 2.
    pub pf_cap_flags2: U64,
    /// Word 3.
    pub pf_cap_flags3: U64,
    /// Word 4.
    pub pf_cap_flags4: U64,
}
wire_msg!(VerifyVerResp, "gdma_verify_ver_resp", 72, []);

/// `GDMA_QUERY_MAX_RESOURCES` response (the request is a bare header).
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
#[allow(missing_docs)]
pub struct QueryMaxResourcesResp {
    pub hdr: RespHdr,
    pub status: U32,
    pub max_sq: U32,
    pub max_rq: U32,
    pub max_cq: U32,
    pub max_eq: U32,
    pub max_db: U32,
    pub max_mst: U32,
    pub max_cq_mod_ctx: U32,
    pub max_mod_cq: U32,
    pub max_msix: U32,
}
wire_msg!(
    QueryMaxResourcesResp,
    "gdma_query_max_resources_resp",
    72,
    []
);

/// `GDMA_LIST_DEVICES` response (the request is a bare header).
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct ListDevicesResp {
    /// Header.
    pub hdr: RespHdr,
    /// Non-empty entries in `devs`.
    pub num_of_devs: U32,
    /// Must be zero.
    pub reserved: U32,
    /// Device ids; an all-zero entry is an empty slot.
    pub devs: [DevId; GDMA_DEV_LIST_SIZE],
}
wire_msg!(ListDevicesResp, "gdma_list_devices_resp", 296, [reserved]);

/// `GDMA_REGISTER_DEVICE` response (the request is a bare header whose
/// `dev_id` names the device).
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct RegisterDeviceResp {
    /// Header.
    pub hdr: RespHdr,
    /// Protection domain of the device's kernel queues.
    pub pdid: U32,
    /// Memory key meaning "this SGE address is a guest physical address".
    pub gpa_mkey: U32,
    /// Doorbell page index of the device's kernel queues.
    pub db_id: U32,
}
wire_msg!(RegisterDeviceResp, "gdma_register_device_resp", 44, []);

/// `GDMA_CREATE_QUEUE` request (event queues only on a VF).
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct CreateQueueReq {
    /// Header.
    pub hdr: ReqHdr,
    /// `gdma_queue_type` (4 = EQ).
    pub queue_type: U32,
    /// Must be zero.
    pub reserved1: U32,
    /// Protection domain (from `GDMA_REGISTER_DEVICE`).
    pub pdid: U32,
    /// Doorbell page index (`doolbell_id` in the kernel).
    pub doorbell_id: U32,
    /// DMA region holding the queue; the device takes it over.
    pub gdma_region: U64,
    /// Must be zero.
    pub reserved2: U32,
    /// Queue size in bytes.
    pub queue_size: U32,
    /// log2 of the EQE count between interrupts (throttling).
    pub log2_throttle_limit: U32,
    /// MSI-X vector the EQ interrupts on.
    pub eq_pci_msix_index: U32,
    /// CQ moderation context (CQs only).
    pub cq_mod_ctx_id: U32,
    /// Parent EQ (CQs only).
    pub cq_parent_eq_id: U32,
    /// RQ option.
    pub rq_drop_on_overrun: u8,
    /// RQ option.
    pub rq_err_on_wqe_overflow: u8,
    /// RQ option.
    pub rq_chain_rec_wqes: u8,
    /// SQ option.
    pub sq_hw_db: u8,
    /// Must be zero.
    pub reserved3: U32,
}
wire_msg!(
    CreateQueueReq,
    "gdma_create_queue_req",
    96,
    [reserved1, reserved2, reserved3]
);

/// `GDMA_CREATE_QUEUE` response.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct CreateQueueResp {
    /// Header.
    pub hdr: RespHdr,
    /// The new queue's id.
    pub queue_index: U32,
}
wire_msg!(CreateQueueResp, "gdma_create_queue_resp", 36, []);

/// `GDMA_DISABLE_QUEUE` request.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct DisableQueueReq {
    /// Header.
    pub hdr: ReqHdr,
    /// `gdma_queue_type`.
    pub queue_type: U32,
    /// The queue id.
    pub queue_index: U32,
    /// The kernel always sends 1.
    pub alloc_res_id_on_creation: U32,
}
wire_msg!(DisableQueueReq, "gdma_disable_queue_req", 52, []);

/// `GDMA_QUERY_HWC_TIMEOUT` request and response body.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct QueryHwcTimeoutReq {
    /// Header.
    pub hdr: ReqHdr,
    /// The driver's current timeout.
    pub timeout_ms: U32,
    /// Must be zero.
    pub reserved: U32,
}
wire_msg!(
    QueryHwcTimeoutReq,
    "gdma_query_hwc_timeout_req",
    48,
    [reserved]
);

/// `GDMA_QUERY_HWC_TIMEOUT` response.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct QueryHwcTimeoutResp {
    /// Header.
    pub hdr: RespHdr,
    /// The timeout the driver is to use.
    pub timeout_ms: U32,
    /// Must be zero.
    pub reserved: U32,
}
wire_msg!(
    QueryHwcTimeoutResp,
    "gdma_query_hwc_timeout_resp",
    40,
    [reserved]
);

/// `GDMA_PAGE_TYPE_4K`: the pages of the region are 4 KiB. Page type `t`
/// means pages of 4 KiB << `t`; `mana_ib` picks the largest that the user
/// memory's layout allows (`PAGE_SZ_BM`: 4 KiB to 2 MiB), the Ethernet
/// driver always 4 KiB.
pub const GDMA_PAGE_TYPE_4K: u32 = 0;
/// The largest page type (2 MiB pages).
pub const GDMA_PAGE_TYPE_MAX: u32 = 9;
/// Page size of DMA regions.
pub const GDMA_PAGE_SIZE: u64 = 4096;

/// `GDMA_CREATE_DMA_REGION` request, fixed part; `page_addr_list_len`
/// 64-bit page addresses follow (see [`CreateDmaRegionReq::pages`]).
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct CreateDmaRegionReq {
    /// Header.
    pub hdr: ReqHdr,
    /// Total bytes of the region.
    pub length: U64,
    /// Offset of the region's first byte in its first page.
    pub offset_in_page: U32,
    /// [`GDMA_PAGE_TYPE_4K`].
    pub gdma_page_type: U32,
    /// Pages of the whole region.
    pub page_count: U32,
    /// Pages listed in this message (the rest come by
    /// `GDMA_DMA_REGION_ADD_PAGES`).
    pub page_addr_list_len: U32,
}
wire_msg!(CreateDmaRegionReq, "gdma_create_dma_region_req", 64, []);

impl CreateDmaRegionReq {
    /// The size of the region's pages (valid after `decode_with_pages`).
    pub fn page_size(&self) -> u64 {
        GDMA_PAGE_SIZE << self.gdma_page_type.get().min(GDMA_PAGE_TYPE_MAX)
    }

    /// Decodes the fixed part and checks it against the region rules: pages
    /// of 4 KiB to 2 MiB, a non-empty length that the page count covers
    /// exactly, an offset inside the first page, no more pages listed than
    /// the region has, each aligned to the page size, and the list inside
    /// the message (`msg`, `req.msg_size` bytes).
    pub fn decode_with_pages(msg: &[u8]) -> Result<(Self, PageList<'_>), DecodeError> {
        let r = Self::decode(msg)?;
        let inv = |field, value: u64, expected| DecodeError::InvalidField {
            what: Self::NAME,
            field,
            value,
            expected,
        };
        if r.gdma_page_type.get() > GDMA_PAGE_TYPE_MAX {
            return Err(inv(
                "gdma_page_type",
                r.gdma_page_type.get().into(),
                "0 (4 KiB pages) to 9 (2 MiB pages)",
            ));
        }
        let ps = r.page_size();
        let len = r.length.get();
        if len == 0 {
            return Err(inv("length", 0, "a non-zero length"));
        }
        let off = u64::from(r.offset_in_page.get());
        if off >= ps {
            return Err(inv("offset_in_page", off, "less than the page size"));
        }
        let need = (off + len).div_ceil(ps);
        if u64::from(r.page_count.get()) != need {
            return Err(inv(
                "page_count",
                r.page_count.get().into(),
                "the pages offset_in_page + length spans",
            ));
        }
        if r.page_addr_list_len.get() > r.page_count.get() {
            return Err(inv(
                "page_addr_list_len",
                r.page_addr_list_len.get().into(),
                "at most page_count",
            ));
        }
        let pages = PageList::decode(
            Self::NAME,
            msg,
            core::mem::size_of::<Self>(),
            r.page_addr_list_len.get(),
        )?;
        if let Some(bad) = pages.iter().find(|p| p % ps != 0) {
            return Err(inv(
                "page_addr_list",
                bad,
                "addresses aligned to the page size",
            ));
        }
        Ok((r, pages))
    }
}

/// `GDMA_CREATE_DMA_REGION` response.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct CreateDmaRegionResp {
    /// Header.
    pub hdr: RespHdr,
    /// The region's handle; 0 (`GDMA_INVALID_DMA_REGION`) is never valid.
    pub dma_region_handle: U64,
}
wire_msg!(CreateDmaRegionResp, "gdma_create_dma_region_resp", 40, []);

/// `GDMA_DMA_REGION_ADD_PAGES` request, fixed part; page addresses follow.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct DmaRegionAddPagesReq {
    /// Header.
    pub hdr: ReqHdr,
    /// The region being completed.
    pub dma_region_handle: U64,
    /// Pages listed in this message.
    pub page_addr_list_len: U32,
    /// Must be zero.
    pub reserved3: U32,
}
wire_msg!(
    DmaRegionAddPagesReq,
    "gdma_dma_region_add_pages_req",
    56,
    [reserved3]
);

impl DmaRegionAddPagesReq {
    /// Decodes the fixed part and the page list that follows it.
    pub fn decode_with_pages(msg: &[u8]) -> Result<(Self, PageList<'_>), DecodeError> {
        let r = Self::decode(msg)?;
        let pages = PageList::decode(
            Self::NAME,
            msg,
            core::mem::size_of::<Self>(),
            r.page_addr_list_len.get(),
        )?;
        Ok((r, pages))
    }
}

/// `GDMA_DESTROY_DMA_REGION` request.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct DestroyDmaRegionReq {
    /// Header.
    pub hdr: ReqHdr,
    /// The region.
    pub dma_region_handle: U64,
}
wire_msg!(DestroyDmaRegionReq, "gdma_destroy_dma_region_req", 48, []);

/// The page addresses of a DMA region message, each 4K-aligned.
#[derive(Clone, Copy, Debug)]
pub struct PageList<'a>(&'a [U64]);

impl<'a> PageList<'a> {
    fn decode(what: &'static str, msg: &'a [u8], at: usize, n: u32) -> Result<Self, DecodeError> {
        let bytes = (n as usize) * 8;
        let Some(raw) = msg.get(at..at + bytes) else {
            return Err(DecodeError::TooShort {
                what,
                needed: at + bytes,
                got: msg.len(),
            });
        };
        let list = <[U64]>::ref_from_bytes(raw).map_err(|_| DecodeError::TooShort {
            what,
            needed: at + bytes,
            got: msg.len(),
        })?;
        if let Some(bad) = list.iter().find(|p| p.get() % GDMA_PAGE_SIZE != 0) {
            return Err(DecodeError::InvalidField {
                what,
                field: "page_addr_list",
                value: bad.get(),
                expected: "4096-aligned page addresses",
            });
        }
        Ok(Self(list))
    }

    /// Number of pages.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// No pages.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The addresses.
    pub fn iter(&self) -> impl Iterator<Item = u64> + 'a {
        self.0.iter().map(|p| p.get())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::{RequestCode, GDMA_DEVICE_MANA};
    use zerocopy::{FromZeros, IntoBytes};

    fn hdr(code: RequestCode, size: usize) -> ReqHdr {
        ReqHdr::new(code, size as u32, 32)
    }

    #[test]
    fn golden_create_queue() {
        // An EQ as mana_gd_create_hw_eq builds it: type 4, pdid 5,
        // doorbell 0, region 0x1122334455667788, 32 KiB, throttle 3, msix 2.
        let mut r = CreateQueueReq::new_zeroed();
        r.hdr = hdr(RequestCode::GDMA_CREATE_QUEUE, 96);
        r.hdr.dev_id = crate::control::DevId::new(GDMA_DEVICE_MANA, 0);
        r.queue_type = U32::new(4);
        r.pdid = U32::new(5);
        r.gdma_region = U64::new(0x1122_3344_5566_7788);
        r.queue_size = U32::new(0x8000);
        r.log2_throttle_limit = U32::new(3);
        r.eq_pci_msix_index = U32::new(2);
        let b = r.as_bytes();
        assert_eq!(&b[40..44], &[4, 0, 0, 0]);
        assert_eq!(&b[48..52], &[5, 0, 0, 0]);
        assert_eq!(
            &b[56..64],
            &[0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11]
        );
        assert_eq!(&b[68..72], &[0, 0x80, 0, 0]);
        assert_eq!(&b[72..76], &[3, 0, 0, 0]);
        assert_eq!(&b[76..80], &[2, 0, 0, 0]);
        assert_eq!(b.len(), 96);
        assert!(CreateQueueReq::decode(b).is_ok());
        let mut bad = b.to_vec();
        bad[92] = 1;
        assert_eq!(
            CreateQueueReq::decode(&bad).unwrap_err().field(),
            Some("reserved3")
        );
        bad[92] = 0;
        bad[44] = 1;
        assert_eq!(
            CreateQueueReq::decode(&bad).unwrap_err().field(),
            Some("reserved1")
        );
    }

    #[test]
    fn golden_verify_ver() {
        let mut r = VerifyVerReq::new_zeroed();
        r.hdr = hdr(RequestCode::GDMA_VERIFY_VF_DRIVER_VERSION, 640);
        r.protocol_ver_min = U64::new(1);
        r.protocol_ver_max = U64::new(1);
        r.gd_drv_cap_flags1 = U64::new(0x82d);
        r.os_type = U32::new(0x10);
        r.os_ver_major = U32::new(6);
        r.os_ver_minor = U32::new(12);
        r.os_ver_str1[..5].copy_from_slice(b"Linux");
        let b = r.as_bytes();
        assert_eq!(&b[40..48], &[1, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&b[56..64], &[0x2d, 0x08, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&b[96..100], &[0x10, 0, 0, 0]);
        assert_eq!(&b[104..108], &[6, 0, 0, 0]);
        assert_eq!(&b[108..112], &[12, 0, 0, 0]);
        assert_eq!(&b[128..133], b"Linux");
        assert!(VerifyVerReq::decode(b).is_ok());
        let mut bad = b.to_vec();
        bad[120] = 1;
        assert_eq!(
            VerifyVerReq::decode(&bad).unwrap_err().field(),
            Some("reserved_2")
        );
    }

    #[test]
    fn golden_responses() {
        let mut l = ListDevicesResp::new_zeroed();
        l.num_of_devs = U32::new(2);
        l.devs[0] = crate::control::DevId::new(1, 0);
        l.devs[1] = crate::control::DevId::new(2, 0);
        let b = l.as_bytes();
        assert_eq!(&b[32..36], &[2, 0, 0, 0]);
        assert_eq!(&b[40..48], &[1, 0, 0, 0, 2, 0, 0, 0]);

        let mut q = QueryMaxResourcesResp::new_zeroed();
        q.max_sq = U32::new(0x11);
        q.max_msix = U32::new(0x22);
        let b = q.as_bytes();
        assert_eq!(&b[36..40], &[0x11, 0, 0, 0]);
        assert_eq!(&b[68..72], &[0x22, 0, 0, 0]);

        let mut r = RegisterDeviceResp::new_zeroed();
        r.pdid = U32::new(1);
        r.gpa_mkey = U32::new(2);
        r.db_id = U32::new(3);
        assert_eq!(&r.as_bytes()[32..44], &[1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0]);
    }

    fn dma_region_msg(offset: u32, length: u64, count: u32, listed: &[u64]) -> std::vec::Vec<u8> {
        let mut r = CreateDmaRegionReq::new_zeroed();
        let size = 64 + 8 * listed.len();
        r.hdr = hdr(RequestCode::GDMA_CREATE_DMA_REGION, size);
        r.length = U64::new(length);
        r.offset_in_page = U32::new(offset);
        r.page_count = U32::new(count);
        r.page_addr_list_len = U32::new(listed.len() as u32);
        let mut v = r.as_bytes().to_vec();
        for p in listed {
            v.extend_from_slice(&p.to_le_bytes());
        }
        v
    }

    #[test]
    fn dma_region_pages() {
        let m = dma_region_msg(0, 8192, 2, &[0x10_0000, 0x20_3000]);
        assert_eq!(
            &m[48..64],
            &[0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0]
        );
        let (r, pages) = CreateDmaRegionReq::decode_with_pages(&m).unwrap();
        assert_eq!(r.length.get(), 8192);
        assert_eq!(
            pages.iter().collect::<std::vec::Vec<_>>(),
            [0x10_0000, 0x20_3000]
        );

        // Partial list: the rest comes by ADD_PAGES.
        let m = dma_region_msg(0, 3 * 4096, 3, &[0x1000]);
        assert_eq!(
            CreateDmaRegionReq::decode_with_pages(&m).unwrap().1.len(),
            1
        );

        let field = |m: &[u8]| {
            CreateDmaRegionReq::decode_with_pages(m)
                .unwrap_err()
                .field()
        };
        assert_eq!(
            field(&dma_region_msg(0, 8192, 3, &[0x1000])),
            Some("page_count")
        );
        assert_eq!(
            field(&dma_region_msg(4096, 8192, 3, &[0x1000])),
            Some("offset_in_page")
        );
        assert_eq!(field(&dma_region_msg(0, 0, 0, &[])), Some("length"));
        assert_eq!(
            field(&dma_region_msg(0, 4096, 1, &[0x1001])),
            Some("page_addr_list")
        );
        assert_eq!(
            field(&dma_region_msg(0, 4096, 1, &[0x1000, 0x2000])),
            Some("page_addr_list_len")
        );
        // 8 KiB pages (type 1): counted, aligned and offset in 8 KiB units.
        let big = |off: u32, len: u64, count: u32, listed: &[u64]| {
            let mut m = dma_region_msg(off, len, count, listed);
            m[52] = 1;
            m
        };
        let m8k = big(4096, 12288, 2, &[0x4000, 0x8000]);
        let (r, p) = CreateDmaRegionReq::decode_with_pages(&m8k).unwrap();
        assert_eq!((r.page_size(), p.len()), (8192, 2));
        assert_eq!(field(&big(0, 8192, 1, &[0x3000])), Some("page_addr_list"));
        assert_eq!(field(&big(0, 8192, 2, &[0x4000])), Some("page_count"));
        let mut m = dma_region_msg(0, 4096, 1, &[0x1000]);
        m[52] = 10;
        assert_eq!(field(&m), Some("gdma_page_type"));
        // An offset moves the end into another page.
        assert!(
            CreateDmaRegionReq::decode_with_pages(&dma_region_msg(16, 4096, 2, &[0, 4096])).is_ok()
        );
        // The list runs past the message.
        let m = dma_region_msg(0, 8192, 2, &[0x1000, 0x2000]);
        assert!(matches!(
            CreateDmaRegionReq::decode_with_pages(&m[..70]),
            Err(DecodeError::TooShort {
                needed: 80,
                got: 70,
                ..
            })
        ));
    }
}

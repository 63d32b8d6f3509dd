//! The device-side view of the GDMA / MANA wire formats.
//!
//! Bit positions follow Linux `include/net/mana/{gdma,mana}.h` (all
//! little-endian, C bit-fields allocated from the LSB).
//!
//! What the device *writes* (CQEs) is encoded with the shared `gdma` crate
//! types. What it *reads* from a driver (WQE headers, SGEs, TX OOBs) is
//! decoded leniently here: real drivers leave garbage in fields the
//! hardware ignores (DPDK >= 23.07 does not zero its TX OOB), so the device
//! checks only what MANA checks. The decoders of this module ([`Cqe`]) are
//! also an independent cross-check of `gdma`'s encoders in the tests.

#![forbid(unsafe_code)]

/// Doorbell register offsets within a doorbell page.
pub const DB_SQ: usize = 0x000;
pub const DB_RQ: usize = 0x400;
pub const DB_CQ: usize = 0x800;
pub const DB_EQ: usize = 0xFF8;
/// 32-bit "short" doorbells (RTE_ARCH_32 builds); rejected by this device.
pub const DB_SHORT_SQ: usize = 0x010;
pub const DB_SHORT_RQ: usize = 0x410;
pub const DB_SHORT_CQ: usize = 0x810;

pub const BU: u32 = 32;
pub const CQE_SIZE: usize = 64;
pub const MAX_TX_WQE: u32 = 512;
pub const MAX_RX_WQE: u32 = 256;
pub const SGE_SIZE: usize = 16;
pub const OWNER_MASK: u64 = 7;
pub const INDIRECTION_TABLE_SIZE: usize = 64;
pub const HASH_KEY_SIZE: usize = 40;

// CQE types (enum mana_cqe_type).
pub const CQE_INVALID: u32 = 0;
pub const CQE_RX_OKAY: u32 = 1;
pub const CQE_RX_COALESCED_4: u32 = 2;
pub const CQE_RX_OBJECT_FENCE: u32 = 3;
pub const CQE_RX_TRUNCATED: u32 = 4;
pub const CQE_TX_OKAY: u32 = 32;
pub const CQE_TX_SA_DROP: u32 = 33;
pub const CQE_TX_MTU_DROP: u32 = 34;
pub const CQE_TX_INVALID_OOB: u32 = 35;
pub const CQE_TX_INVALID_ETH_TYPE: u32 = 36;
pub const CQE_TX_HDR_PROCESSING_ERROR: u32 = 37;
pub const CQE_TX_VF_DISABLED: u32 = 38;
pub const CQE_TX_VPORT_IDX_OUT_OF_RANGE: u32 = 39;
pub const CQE_TX_VPORT_DISABLED: u32 = 40;
pub const CQE_TX_VLAN_TAGGING_VIOLATION: u32 = 41;

/// `MANA_CQE_COMPLETION`, the `client_type` of every data-path CQE.
pub const MANA_CQE_COMPLETION: u32 = 1;

// NDIS hash types reported in `rx_hashtype`.
pub const NDIS_HASH_IPV4: u32 = 1 << 0;
pub const NDIS_HASH_TCP_IPV4: u32 = 1 << 1;
pub const NDIS_HASH_UDP_IPV4: u32 = 1 << 2;
pub const NDIS_HASH_IPV6: u32 = 1 << 3;
pub const NDIS_HASH_TCP_IPV6: u32 = 1 << 4;
pub const NDIS_HASH_UDP_IPV6: u32 = 1 << 5;

/// Emulator-specific `vendor_err` codes carried in error CQEs, so a test
/// (or a person reading a CQE dump) can tell why the device refused a WQE.
pub mod vendor_err {
    pub const NONE: u32 = 0;
    pub const BAD_LKEY: u32 = 1;
    pub const OUT_OF_MR: u32 = 2;
    pub const BAD_WQE_HEADER: u32 = 3;
    pub const BAD_OOB: u32 = 4;
    pub const BAD_CQ_NUM: u32 = 5;
    pub const BAD_SQ_FRAME: u32 = 6;
    pub const BAD_VPORT: u32 = 7;
    pub const MTU: u32 = 8;
    pub const RUNT: u32 = 9;
    pub const BAD_L4_OFFSET: u32 = 10;
    pub const WQE_PAST_TAIL: u32 = 11;
    /// `client_oob_in_sgl` without an MSS in `client_data_unit`.
    pub const LSO_NO_MSS: u32 = 12;
    /// An MSS in `client_data_unit` without `client_oob_in_sgl`.
    pub const MSS_WITHOUT_LSO: u32 = 13;
    /// LSO WQE with fewer than 2 SGEs, `last_vbytes` not the size of SGE 0,
    /// or no payload after the headers.
    pub const LSO_BAD_SGL: u32 = 14;
    /// LSO: SGE 0 is not exactly the L2 + L3 + L4 headers.
    pub const LSO_BAD_HEADER: u32 = 15;
    /// LSO: not a (non-fragmented) IPv4 / IPv6 TCP packet.
    pub const LSO_NOT_TCP: u32 = 16;
    /// LSO: the TX OOB does not request what segmentation needs
    /// (`is_outer_ipv4`/`is_outer_ipv6` matching the packet,
    /// `comp_iphdr_csum` for IPv4, `comp_tcp_csum`, no `comp_udp_csum`,
    /// `trans_off` = L2 + L3 length).
    pub const LSO_BAD_OOB: u32 = 17;
}

/// The 8-byte GDMA WQE header (`struct gdma_wqe`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WqeHeader {
    pub last_vbytes: u8,
    pub num_sge: u8,
    pub inline_oob_size_div4: u8,
    pub client_oob_in_sgl: bool,
    pub client_data_unit: u16,
    /// Bits a well-formed WQE leaves zero (reserved, reserved1 bits and
    /// the upper two flag bits).
    pub reserved_bits: u64,
}

impl WqeHeader {
    pub fn decode(raw: u64) -> Self {
        let dw0 = raw as u32;
        let dw1 = (raw >> 32) as u32;
        WqeHeader {
            last_vbytes: (dw0 >> 24) as u8,
            num_sge: dw1 as u8,
            inline_oob_size_div4: ((dw1 >> 8) & 7) as u8,
            client_oob_in_sgl: (dw1 >> 11) & 1 != 0,
            client_data_unit: ((dw1 >> 16) & 0x3fff) as u16,
            reserved_bits: (raw & 0x00ff_ffff) | (u64::from(dw1 & 0xc000_f000) << 32),
        }
    }

    pub fn encode(&self) -> u64 {
        let dw0 = u32::from(self.last_vbytes) << 24;
        let dw1 = u32::from(self.num_sge)
            | (u32::from(self.inline_oob_size_div4 & 7) << 8)
            | (u32::from(self.client_oob_in_sgl) << 11)
            | (u32::from(self.client_data_unit & 0x3fff) << 16);
        u64::from(dw0) | (u64::from(dw1) << 32)
    }

    /// Bytes of inline OOB that follow the header.
    pub fn oob_bytes(&self) -> usize {
        usize::from(self.inline_oob_size_div4) * 4
    }

    /// Total WQE size in bytes (header + OOB + SGL, rounded up to a BU).
    pub fn wqe_bytes(&self) -> u32 {
        let raw = 8 + self.oob_bytes() as u32 + SGE_SIZE as u32 * u32::from(self.num_sge);
        raw.div_ceil(BU) * BU
    }
}

/// One scatter-gather element (`struct gdma_sge`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sge {
    pub address: u64,
    pub mem_key: u32,
    pub size: u32,
}

impl Sge {
    pub fn decode(b: &[u8; 16]) -> Self {
        Sge {
            address: u64::from_le_bytes(b[0..8].try_into().unwrap()),
            mem_key: u32::from_le_bytes(b[8..12].try_into().unwrap()),
            size: u32::from_le_bytes(b[12..16].try_into().unwrap()),
        }
    }
    pub fn encode(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[0..8].copy_from_slice(&self.address.to_le_bytes());
        b[8..12].copy_from_slice(&self.mem_key.to_le_bytes());
        b[12..16].copy_from_slice(&self.size.to_le_bytes());
        b
    }
}

/// `struct mana_tx_short_oob` plus the fields of `mana_tx_long_oob` the
/// device acts on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxOob {
    pub pkt_fmt: u8,
    pub is_outer_ipv4: bool,
    pub is_outer_ipv6: bool,
    pub comp_iphdr_csum: bool,
    pub comp_tcp_csum: bool,
    pub comp_udp_csum: bool,
    pub suppress_txcqe: bool,
    pub vcq_num: u32,
    pub trans_off: u16,
    pub vsq_frame: u16,
    pub short_vp_offset: u8,
    // long format
    pub inject_vlan: bool,
    pub pcp: u8,
    pub dei: bool,
    pub vlan_id: u16,
    pub long_vp_offset: u16,
}

impl TxOob {
    /// Decodes an 8-byte (short) or 24-byte (long) inline OOB.
    pub fn decode(b: &[u8]) -> Self {
        let d0 = u32::from_le_bytes(b[0..4].try_into().unwrap());
        let d1 = u32::from_le_bytes(b[4..8].try_into().unwrap());
        let mut o = TxOob {
            pkt_fmt: (d0 & 3) as u8,
            is_outer_ipv4: d0 & (1 << 2) != 0,
            is_outer_ipv6: d0 & (1 << 3) != 0,
            comp_iphdr_csum: d0 & (1 << 4) != 0,
            comp_tcp_csum: d0 & (1 << 5) != 0,
            comp_udp_csum: d0 & (1 << 6) != 0,
            suppress_txcqe: d0 & (1 << 7) != 0,
            vcq_num: d0 >> 8,
            trans_off: (d1 & 0x3ff) as u16,
            vsq_frame: ((d1 >> 10) & 0x3fff) as u16,
            short_vp_offset: (d1 >> 24) as u8,
            ..Default::default()
        };
        if b.len() >= 24 {
            let l0 = u32::from_le_bytes(b[8..12].try_into().unwrap());
            let l1 = u32::from_le_bytes(b[12..16].try_into().unwrap());
            o.inject_vlan = l0 & (1 << 3) != 0;
            o.pcp = ((l0 >> 16) & 7) as u8;
            o.dei = (l0 >> 19) & 1 != 0;
            o.vlan_id = ((l0 >> 20) & 0xfff) as u16;
            o.long_vp_offset = ((l1 >> 16) & 0xfff) as u16;
        }
        o
    }

    /// Encodes as a short (8 bytes) or long (24 bytes) OOB.
    pub fn encode(&self, long: bool) -> Vec<u8> {
        let d0 = u32::from(self.pkt_fmt & 3)
            | (u32::from(self.is_outer_ipv4) << 2)
            | (u32::from(self.is_outer_ipv6) << 3)
            | (u32::from(self.comp_iphdr_csum) << 4)
            | (u32::from(self.comp_tcp_csum) << 5)
            | (u32::from(self.comp_udp_csum) << 6)
            | (u32::from(self.suppress_txcqe) << 7)
            | ((self.vcq_num & 0xff_ffff) << 8);
        let d1 = u32::from(self.trans_off & 0x3ff)
            | (u32::from(self.vsq_frame & 0x3fff) << 10)
            | (u32::from(self.short_vp_offset) << 24);
        let mut v = Vec::with_capacity(24);
        v.extend_from_slice(&d0.to_le_bytes());
        v.extend_from_slice(&d1.to_le_bytes());
        if long {
            let l0 = (u32::from(self.inject_vlan) << 3)
                | (u32::from(self.pcp & 7) << 16)
                | (u32::from(self.dei) << 19)
                | (u32::from(self.vlan_id & 0xfff) << 20);
            let l1 = u32::from(self.long_vp_offset & 0xfff) << 16;
            v.extend_from_slice(&l0.to_le_bytes());
            v.extend_from_slice(&l1.to_le_bytes());
            v.extend_from_slice(&[0u8; 8]);
        }
        v
    }
}

/// `cqe_info` dword (byte 60 of a CQE).
pub fn cqe_info(wq_num: u32, is_sq: bool, owner: u32) -> u32 {
    gdma::CqeInfo::new()
        .with_wq_num(wq_num & 0xff_ffff)
        .with_is_sq(is_sq)
        .with_owner_bits((owner & 7) as u8)
        .to_raw()
}

/// `struct mana_cqe_header`.
pub fn cqe_header(cqe_type: u32, vendor_err: u32) -> gdma::CqeHeader {
    gdma::CqeHeader::new()
        .with_cqe_type_raw((cqe_type & 0x3f) as u8)
        .with_client_type(gdma::MANA_CQE_COMPLETION)
        .with_vendor_err(vendor_err & 0xff_ffff)
}

/// Builds the 60 data bytes of a TX completion (`struct mana_tx_comp_oob`).
pub fn tx_comp(cqe_type: u32, vendor_err: u32, tx_wqe_offset: u32) -> [u8; 60] {
    use zerocopy::IntoBytes;
    let o = gdma::TxCompOob {
        cqe_hdr: cqe_header(cqe_type, vendor_err),
        offsets: gdma::TxCompOffsets::new().with_tx_wqe_offset(tx_wqe_offset & 0x7ff_ffff),
        ..Default::default()
    };
    o.as_bytes().try_into().expect("60 bytes")
}

/// Per-packet info of an RX completion.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxPpi {
    pub pkt_len: u16,
    pub pkt_hash: u32,
}

/// The flags dword of `struct mana_rxcomp_oob`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RxFlags {
    pub vlan_id: u16,
    pub vlan_present: bool,
    pub outer_ip_ok: bool,
    pub outer_ip_fail: bool,
    pub hashtype: u16,
    pub ip_ok: bool,
    pub ip_fail: bool,
    pub tcp_ok: bool,
    pub tcp_fail: bool,
    pub udp_ok: bool,
    pub udp_fail: bool,
}

impl RxFlags {
    pub fn encode(&self) -> u32 {
        u32::from(self.vlan_id & 0xfff)
            | (u32::from(self.vlan_present) << 12)
            | (u32::from(self.outer_ip_ok) << 13)
            | (u32::from(self.outer_ip_fail) << 14)
            | (u32::from(self.hashtype & 0x1ff) << 16)
            | (u32::from(self.ip_ok) << 25)
            | (u32::from(self.ip_fail) << 26)
            | (u32::from(self.tcp_ok) << 27)
            | (u32::from(self.tcp_fail) << 28)
            | (u32::from(self.udp_ok) << 29)
            | (u32::from(self.udp_fail) << 30)
    }
    pub fn decode(d: u32) -> Self {
        RxFlags {
            vlan_id: (d & 0xfff) as u16,
            vlan_present: d & (1 << 12) != 0,
            outer_ip_ok: d & (1 << 13) != 0,
            outer_ip_fail: d & (1 << 14) != 0,
            hashtype: ((d >> 16) & 0x1ff) as u16,
            ip_ok: d & (1 << 25) != 0,
            ip_fail: d & (1 << 26) != 0,
            tcp_ok: d & (1 << 27) != 0,
            tcp_fail: d & (1 << 28) != 0,
            udp_ok: d & (1 << 29) != 0,
            udp_fail: d & (1 << 30) != 0,
        }
    }
}

/// Builds the 60 data bytes of an RX completion (`struct mana_rxcomp_oob`).
/// Unused `ppi` entries are zero, as DPDK requires.
pub fn rx_comp(
    cqe_type: u32,
    vendor_err: u32,
    flags: &RxFlags,
    ppi: &[RxPpi],
    rx_wqe_offset: u32,
) -> [u8; 60] {
    use zerocopy::IntoBytes;
    let mut o = gdma::RxCompOob {
        cqe_hdr: cqe_header(cqe_type, vendor_err),
        flags: gdma::RxCompFlags::from_raw(flags.encode()),
        rx_wqe_offset: gdma::le::U32::new(rx_wqe_offset),
        ..Default::default()
    };
    for (i, p) in ppi.iter().take(gdma::RX_OOB_NUM_PPI).enumerate() {
        o.ppi[i] = gdma::RxPacketInfo::new(p.pkt_len, p.pkt_hash);
    }
    o.as_bytes().try_into().expect("60 bytes")
}

/// A decoded 64-byte CQE, for tests and tools.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cqe {
    pub cqe_type: u32,
    pub client_type: u32,
    pub vendor_err: u32,
    pub wq_num: u32,
    pub is_sq: bool,
    pub owner: u32,
    pub reserved_info: u32,
    pub data: [u8; 60],
}

impl Cqe {
    pub fn decode(b: &[u8; 64]) -> Self {
        let hdr = u32::from_le_bytes(b[0..4].try_into().unwrap());
        let info = u32::from_le_bytes(b[60..64].try_into().unwrap());
        Cqe {
            cqe_type: hdr & 0x3f,
            client_type: (hdr >> 6) & 3,
            vendor_err: hdr >> 8,
            wq_num: info & 0xff_ffff,
            is_sq: (info >> 24) & 1 != 0,
            owner: info >> 29,
            reserved_info: (info >> 25) & 0xf,
            data: b[0..60].try_into().unwrap(),
        }
    }
    pub fn dword(&self, i: usize) -> u32 {
        u32::from_le_bytes(self.data[i * 4..i * 4 + 4].try_into().unwrap())
    }
    /// TX: `tx_wqe_offset`.
    pub fn tx_wqe_offset(&self) -> u32 {
        self.dword(2) >> 5
    }
    /// RX: flags dword.
    pub fn rx_flags(&self) -> RxFlags {
        RxFlags::decode(self.dword(1))
    }
    /// RX: per-packet info k.
    pub fn rx_ppi(&self, k: usize) -> RxPpi {
        RxPpi {
            pkt_len: (self.dword(2 + 3 * k) & 0xffff) as u16,
            pkt_hash: self.dword(4 + 3 * k),
        }
    }
    /// RX: `rx_wqe_offset`.
    pub fn rx_wqe_offset(&self) -> u32 {
        self.dword(14)
    }
}

/// Doorbell values (`union gdma_doorbell_entry`).
pub fn sq_doorbell(id: u32, tail: u32) -> u64 {
    u64::from(id & 0xff_ffff) | (u64::from(tail) << 32)
}
pub fn rq_doorbell(id: u32, tail: u32, wqe_cnt: u8) -> u64 {
    u64::from(id & 0xff_ffff) | (u64::from(wqe_cnt) << 24) | (u64::from(tail) << 32)
}
pub fn cq_doorbell(id: u32, tail: u32, arm: bool) -> u64 {
    u64::from(id & 0xff_ffff) | (u64::from(tail & 0x7fff_ffff) << 32) | (u64::from(arm) << 63)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wqe_header_roundtrip() {
        let h = WqeHeader {
            num_sge: 3,
            inline_oob_size_div4: 6,
            client_data_unit: 1448,
            ..Default::default()
        };
        let d = WqeHeader::decode(h.encode());
        assert_eq!(d, h);
        assert_eq!(d.wqe_bytes(), 96); // 8 + 24 + 48 = 80 -> 96
    }

    #[test]
    fn tx_oob_roundtrip() {
        let o = TxOob {
            pkt_fmt: 1,
            comp_tcp_csum: true,
            suppress_txcqe: true,
            vcq_num: 0x1234,
            trans_off: 34,
            vsq_frame: 5,
            short_vp_offset: 7,
            inject_vlan: true,
            pcp: 5,
            dei: true,
            vlan_id: 100,
            ..Default::default()
        };
        assert_eq!(TxOob::decode(&o.encode(true)), o);
    }
}

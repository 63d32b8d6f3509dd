//! Completion queue entries: the 64-byte GDMA CQE, the owner-bit phase
//! protocol, and the MANA completion OOBs carried in its 60 data bytes.

use zerocopy::FromZeros;

use crate::error::{check_bits, mbz};
use crate::le::{U16, U32};
use crate::{
    wire_type, DecodeError, EncodeError, WireType, CQE_DATA_SIZE, CQE_OWNER_MASK, CQE_SIZE,
    RX_OOB_NUM_PPI,
};

// ---------------------------------------------------------------------------
// GDMA CQE
// ---------------------------------------------------------------------------

wire_type! {
    /// The CQE info dword at byte 60 (`gdma_cqe.cqe_info`). The hot path
    /// reads the dword once (`from_raw`) and takes `owner_bits()` from it.
    pub struct CqeInfo: u32 as U32 {
        /// Work queue id the completion is for (bits 0-23).
        #[bits(24)]
        pub wq_num: u32,
        /// The work queue is a send queue (bit 24).
        pub is_sq: bool,
        /// Must be zero (bits 25-28).
        #[bits(4)]
        pub reserved: u8,
        /// Phase: `(producer_index / count) & 7` (bits 29-31).
        #[bits(3)]
        pub owner_bits: u8,
    }
}

impl CqeInfo {
    /// Builds the info dword; fails if `wq_num` exceeds 24 bits or `owner`
    /// 3 bits.
    pub fn try_new(wq_num: u32, is_sq: bool, owner: u8) -> Result<Self, EncodeError> {
        let wq = check_bits(Self::NAME, "wq_num", wq_num as u64, 24)? as u32;
        let ow = check_bits(Self::NAME, "owner_bits", owner as u64, 3)? as u8;
        Ok(Self::new()
            .with_wq_num(wq)
            .with_is_sq(is_sq)
            .with_owner_bits(ow))
    }
}

impl WireType for CqeInfo {
    const NAME: &'static str = "gdma_cqe.cqe_info";
    fn validate(&self) -> Result<(), DecodeError> {
        mbz(Self::NAME, "reserved", self.reserved() as u64)
    }
}

wire_type! {
    /// A 64-byte completion queue entry (`struct gdma_cqe`).
    pub struct Cqe: CQE_SIZE bytes {
        /// Client data: a [`RxCompOob`] or [`TxCompOob`].
        pub data: [u8; CQE_DATA_SIZE],
        /// Queue id, direction and owner bits.
        pub info: CqeInfo,
    }
}

impl Default for Cqe {
    fn default() -> Self {
        Self::new_zeroed()
    }
}

impl core::fmt::Debug for Cqe {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Cqe")
            .field("header", &self.header())
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

impl Cqe {
    /// Byte offset of the info dword; an emulator writes the 60 data bytes,
    /// then a release fence, then this dword (or at least its last byte).
    pub const INFO_OFFSET: usize = CQE_DATA_SIZE;

    /// Builds a CQE from a completion OOB and an info dword.
    pub fn from_parts(data: &[u8; CQE_DATA_SIZE], info: CqeInfo) -> Self {
        Self { data: *data, info }
    }

    /// The MANA CQE header (first data dword), unvalidated.
    #[inline]
    pub fn header(&self) -> CqeHeader {
        CqeHeader::from_raw(u32::from_le_bytes([
            self.data[0],
            self.data[1],
            self.data[2],
            self.data[3],
        ]))
    }

    /// The data bytes viewed as an RX completion OOB (no validation).
    #[inline]
    pub fn rx_oob(&self) -> &RxCompOob {
        zerocopy::transmute_ref!(&self.data)
    }

    /// The data bytes viewed as a TX completion OOB (no validation).
    #[inline]
    pub fn tx_oob(&self) -> &TxCompOob {
        zerocopy::transmute_ref!(&self.data)
    }

    /// Validates the info dword and, by `is_sq`, the RX or TX OOB.
    pub fn validate_full(&self) -> Result<(), DecodeError> {
        self.validate()?;
        if self.info.is_sq() {
            self.tx_oob().validate()
        } else {
            self.rx_oob().validate()
        }
    }
}

impl WireType for Cqe {
    const NAME: &'static str = "gdma_cqe";
    /// Validates the info dword only; the data bytes are client-defined
    /// (see [`Cqe::validate_full`]).
    fn validate(&self) -> Result<(), DecodeError> {
        self.info.validate()
    }
}

// ---------------------------------------------------------------------------
// Owner-bit phase
// ---------------------------------------------------------------------------

/// Owner bits for producer/consumer index `index` of a CQ with `count`
/// entries: `(index / count) & 7`. Both indices start at `count` (see
/// [`cq_initial_index`]), so the first lap carries owner 1 and zeroed
/// memory (owner 0) reads as empty. `count` must be non-zero.
#[inline]
pub const fn owner_bits(index: u32, count: u32) -> u8 {
    ((index / count) & CQE_OWNER_MASK) as u8
}

/// Initial producer (device) and consumer (driver) index of a CQ: `count`.
///
/// Indices are running `u32`s. For power-of-two counts up to 2^29 the phase
/// stays consistent across the 2^32 wrap; other counts lose phase when the
/// index wraps (as in the C driver).
#[inline]
pub const fn cq_initial_index(count: u32) -> u32 {
    count
}

/// Ring slot of CQ index `index`: `index % count`.
#[inline]
pub const fn cq_slot(index: u32, count: u32) -> u32 {
    index % count
}

/// `tail_ptr` of a CQ arm doorbell: `head % (count << 3)` (computed in 64
/// bits, so large counts do not overflow). `count` must be non-zero
/// ([`CqDoorbell::arm_at`](crate::CqDoorbell::arm_at) checks it).
#[inline]
pub const fn cq_arm_tail(head: u32, count: u32) -> u32 {
    (head as u64 % ((count as u64) << CQE_OWNER_BITS_U64)) as u32
}
const CQE_OWNER_BITS_U64: u64 = crate::CQE_OWNER_BITS as u64;

/// What the CQE at the consumer's head slot holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CqeState {
    /// Owner bits of the previous lap: nothing new.
    Empty,
    /// Owner bits of the current lap: a new CQE (issue a read barrier before
    /// reading its data).
    Ready,
    /// Neither: the producer lapped the consumer.
    Overflow,
}

/// Classifies the CQE in slot `head % count` from its owner bits, as
/// `gdma_poll_completion_queue` does: previous lap's bits -> `Empty`, this
/// lap's bits -> `Ready`, anything else -> `Overflow`. Only the low 3 bits
/// of `slot_owner` are used.
#[inline]
pub const fn cqe_state(slot_owner: u8, head: u32, count: u32) -> CqeState {
    cqe_state_lap(slot_owner, head / count)
}

/// [`cqe_state`] with the lap `head / count` precomputed (e.g. as
/// `head >> log2(count)` for power-of-two rings).
#[inline]
pub const fn cqe_state_lap(slot_owner: u8, lap: u32) -> CqeState {
    let owner = slot_owner as u32 & CQE_OWNER_MASK;
    if owner == (lap.wrapping_sub(1) & CQE_OWNER_MASK) {
        CqeState::Empty
    } else if owner == (lap & CQE_OWNER_MASK) {
        CqeState::Ready
    } else {
        CqeState::Overflow
    }
}

// ---------------------------------------------------------------------------
// MANA CQE header and type
// ---------------------------------------------------------------------------

/// MANA CQE types (`enum mana_cqe_type`). Conversion from raw values is
/// fail-closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum CqeType {
    /// `CQE_INVALID`.
    Invalid = 0,
    /// `CQE_RX_OKAY`: one packet in `ppi[0]`.
    RxOkay = 1,
    /// `CQE_RX_COALESCED_4`: up to four packets, ended by a zero `pkt_len`.
    RxCoalesced4 = 2,
    /// `CQE_RX_OBJECT_FENCE`.
    RxObjectFence = 3,
    /// `CQE_RX_TRUNCATED`.
    RxTruncated = 4,
    /// `CQE_TX_OKAY`.
    TxOkay = 32,
    /// `CQE_TX_SA_DROP`.
    TxSaDrop = 33,
    /// `CQE_TX_MTU_DROP`.
    TxMtuDrop = 34,
    /// `CQE_TX_INVALID_OOB`.
    TxInvalidOob = 35,
    /// `CQE_TX_INVALID_ETH_TYPE`.
    TxInvalidEthType = 36,
    /// `CQE_TX_HDR_PROCESSING_ERROR`.
    TxHdrProcessingError = 37,
    /// `CQE_TX_VF_DISABLED`.
    TxVfDisabled = 38,
    /// `CQE_TX_VPORT_IDX_OUT_OF_RANGE`.
    TxVportIdxOutOfRange = 39,
    /// `CQE_TX_VPORT_DISABLED`.
    TxVportDisabled = 40,
    /// `CQE_TX_VLAN_TAGGING_VIOLATION`.
    TxVlanTaggingViolation = 41,
}

impl CqeType {
    /// Every defined type, in numeric order.
    pub const ALL: [CqeType; 15] = [
        Self::Invalid,
        Self::RxOkay,
        Self::RxCoalesced4,
        Self::RxObjectFence,
        Self::RxTruncated,
        Self::TxOkay,
        Self::TxSaDrop,
        Self::TxMtuDrop,
        Self::TxInvalidOob,
        Self::TxInvalidEthType,
        Self::TxHdrProcessingError,
        Self::TxVfDisabled,
        Self::TxVportIdxOutOfRange,
        Self::TxVportDisabled,
        Self::TxVlanTaggingViolation,
    ];

    /// Hot-path conversion: `None` for unknown values.
    #[inline]
    pub const fn from_raw(v: u8) -> Option<Self> {
        Some(match v {
            0 => Self::Invalid,
            1 => Self::RxOkay,
            2 => Self::RxCoalesced4,
            3 => Self::RxObjectFence,
            4 => Self::RxTruncated,
            32 => Self::TxOkay,
            33 => Self::TxSaDrop,
            34 => Self::TxMtuDrop,
            35 => Self::TxInvalidOob,
            36 => Self::TxInvalidEthType,
            37 => Self::TxHdrProcessingError,
            38 => Self::TxVfDisabled,
            39 => Self::TxVportIdxOutOfRange,
            40 => Self::TxVportDisabled,
            41 => Self::TxVlanTaggingViolation,
            _ => return None,
        })
    }

    /// An RX completion type (1..=4).
    #[inline]
    pub const fn is_rx(self) -> bool {
        matches!(self as u8, 1..=4)
    }

    /// A TX completion type (32..=41).
    #[inline]
    pub const fn is_tx(self) -> bool {
        matches!(self as u8, 32..=41)
    }

    /// RX types whose packets the driver delivers (`RxOkay`, `RxCoalesced4`).
    #[inline]
    pub const fn is_rx_ok(self) -> bool {
        matches!(self, Self::RxOkay | Self::RxCoalesced4)
    }

    /// The C enumerator name.
    pub const fn c_name(self) -> &'static str {
        match self {
            Self::Invalid => "CQE_INVALID",
            Self::RxOkay => "CQE_RX_OKAY",
            Self::RxCoalesced4 => "CQE_RX_COALESCED_4",
            Self::RxObjectFence => "CQE_RX_OBJECT_FENCE",
            Self::RxTruncated => "CQE_RX_TRUNCATED",
            Self::TxOkay => "CQE_TX_OKAY",
            Self::TxSaDrop => "CQE_TX_SA_DROP",
            Self::TxMtuDrop => "CQE_TX_MTU_DROP",
            Self::TxInvalidOob => "CQE_TX_INVALID_OOB",
            Self::TxInvalidEthType => "CQE_TX_INVALID_ETH_TYPE",
            Self::TxHdrProcessingError => "CQE_TX_HDR_PROCESSING_ERROR",
            Self::TxVfDisabled => "CQE_TX_VF_DISABLED",
            Self::TxVportIdxOutOfRange => "CQE_TX_VPORT_IDX_OUT_OF_RANGE",
            Self::TxVportDisabled => "CQE_TX_VPORT_DISABLED",
            Self::TxVlanTaggingViolation => "CQE_TX_VLAN_TAGGING_VIOLATION",
        }
    }
}

impl TryFrom<u8> for CqeType {
    type Error = DecodeError;
    #[inline]
    fn try_from(v: u8) -> Result<Self, DecodeError> {
        Self::from_raw(v).ok_or(DecodeError::UnknownCqeType { value: v })
    }
}

impl From<CqeType> for u8 {
    fn from(t: CqeType) -> u8 {
        t as u8
    }
}

wire_type! {
    /// The MANA CQE header, the first dword of the CQE data (`mana_cqe_header`).
    pub struct CqeHeader: u32 as U32 {
        /// Raw [`CqeType`] (bits 0-5).
        #[bits(6)]
        pub cqe_type_raw: u8,
        /// Client type (bits 6-7); MANA completions use [`crate::MANA_CQE_COMPLETION`].
        #[bits(2)]
        pub client_type: u8,
        /// Vendor error code (bits 8-31).
        #[bits(24)]
        pub vendor_err: u32,
    }
}

impl CqeHeader {
    /// A header with the given type, `client_type = MANA_CQE_COMPLETION`
    /// and no vendor error.
    #[inline]
    pub const fn with_type(t: CqeType) -> Self {
        Self::new()
            .with_cqe_type_raw(t as u8)
            .with_client_type(crate::MANA_CQE_COMPLETION)
    }
    /// The CQE type (fail-closed).
    #[inline]
    pub fn cqe_type(&self) -> Result<CqeType, DecodeError> {
        CqeType::try_from(self.cqe_type_raw())
    }
}

impl WireType for CqeHeader {
    const NAME: &'static str = "mana_cqe_header";
    /// The type must be a known [`CqeType`]; `client_type` and `vendor_err`
    /// are data and accepted as is.
    fn validate(&self) -> Result<(), DecodeError> {
        self.cqe_type().map(|_| ())
    }
}

// ---------------------------------------------------------------------------
// RX completion OOB
// ---------------------------------------------------------------------------

/// NDIS hash type bits carried in [`RxCompFlags::rx_hashtype`].
pub mod ndis_hash {
    /// `NDIS_HASH_IPV4`.
    pub const IPV4: u16 = 1 << 0;
    /// `NDIS_HASH_TCP_IPV4`.
    pub const TCP_IPV4: u16 = 1 << 1;
    /// `NDIS_HASH_UDP_IPV4`.
    pub const UDP_IPV4: u16 = 1 << 2;
    /// `NDIS_HASH_IPV6`.
    pub const IPV6: u16 = 1 << 3;
    /// `NDIS_HASH_TCP_IPV6`.
    pub const TCP_IPV6: u16 = 1 << 4;
    /// `NDIS_HASH_UDP_IPV6`.
    pub const UDP_IPV6: u16 = 1 << 5;
    /// `NDIS_HASH_IPV6_EX`.
    pub const IPV6_EX: u16 = 1 << 6;
    /// `NDIS_HASH_TCP_IPV6_EX`.
    pub const TCP_IPV6_EX: u16 = 1 << 7;
    /// `NDIS_HASH_UDP_IPV6_EX`.
    pub const UDP_IPV6_EX: u16 = 1 << 8;
}

/// `MANA_HASH_L3` = IPV4 | IPV6 | IPV6_EX = 0x049.
pub const MANA_HASH_L3: u16 = ndis_hash::IPV4 | ndis_hash::IPV6 | ndis_hash::IPV6_EX;
/// `MANA_HASH_L4` = all TCP/UDP hash types = 0x1B6.
pub const MANA_HASH_L4: u16 = ndis_hash::TCP_IPV4
    | ndis_hash::UDP_IPV4
    | ndis_hash::TCP_IPV6
    | ndis_hash::UDP_IPV6
    | ndis_hash::TCP_IPV6_EX
    | ndis_hash::UDP_IPV6_EX;

wire_type! {
    /// The RX OOB flags dword (dword 1 of `mana_rxcomp_oob`).
    pub struct RxCompFlags: u32 as U32 {
        /// Stripped VLAN id (bits 0-11).
        #[bits(12)]
        pub rx_vlan_id: u16,
        /// A VLAN tag was present and stripped (bit 12).
        pub rx_vlantag_present: bool,
        /// Outer IP header checksum good (bit 13).
        pub rx_outer_iphdr_csum_succeed: bool,
        /// Outer IP header checksum bad (bit 14).
        pub rx_outer_iphdr_csum_fail: bool,
        /// Must be zero (bit 15).
        pub reserved1: bool,
        /// NDIS hash type bits (bits 16-24), see [`ndis_hash`].
        #[bits(9)]
        pub rx_hashtype: u16,
        /// IP header checksum good (bit 25).
        pub rx_iphdr_csum_succeed: bool,
        /// IP header checksum bad (bit 26).
        pub rx_iphdr_csum_fail: bool,
        /// TCP checksum good (bit 27).
        pub rx_tcp_csum_succeed: bool,
        /// TCP checksum bad (bit 28).
        pub rx_tcp_csum_fail: bool,
        /// UDP checksum good (bit 29).
        pub rx_udp_csum_succeed: bool,
        /// UDP checksum bad (bit 30).
        pub rx_udp_csum_fail: bool,
        /// Must be zero (bit 31).
        pub reserved2: bool,
    }
}

wire_type! {
    /// One per-packet info of an RX completion (`mana_rxcomp_perpkt_info`).
    #[derive(Debug, Default)]
    pub struct RxPacketInfo: 12 bytes {
        /// Packet length (bits 0-15 of dword 0); 0 ends a coalesced CQE.
        pub pkt_len: U16,
        /// Must be zero (bits 16-31 of dword 0).
        pub reserved1: U16,
        /// Must be zero (dword 1).
        pub reserved2: U32,
        /// Toeplitz hash (dword 2).
        pub pkt_hash: U32,
    }
}

impl RxPacketInfo {
    /// A packet info with the given length and hash.
    #[inline]
    pub const fn new(pkt_len: u16, pkt_hash: u32) -> Self {
        Self {
            pkt_len: U16::new(pkt_len),
            reserved1: U16::new(0),
            reserved2: U32::new(0),
            pkt_hash: U32::new(pkt_hash),
        }
    }
    /// Packet length.
    #[inline]
    pub const fn pkt_len(&self) -> u16 {
        self.pkt_len.get()
    }
    /// Packet hash.
    #[inline]
    pub const fn pkt_hash(&self) -> u32 {
        self.pkt_hash.get()
    }
}

wire_type! {
    /// The 60-byte RX completion OOB (`mana_rxcomp_oob`).
    #[derive(Debug, Default)]
    pub struct RxCompOob: CQE_DATA_SIZE bytes {
        /// CQE header.
        pub cqe_hdr: CqeHeader,
        /// VLAN, checksum and hash-type flags.
        pub flags: RxCompFlags,
        /// Per-packet infos.
        pub ppi: [RxPacketInfo; RX_OOB_NUM_PPI],
        /// RX WQE offset (`rx_wqe_offset`; DPDK `received_wqe_offset`).
        pub rx_wqe_offset: U32,
    }
}

const PPI_RESERVED1: [&str; RX_OOB_NUM_PPI] = [
    "ppi[0].reserved1",
    "ppi[1].reserved1",
    "ppi[2].reserved1",
    "ppi[3].reserved1",
];
const PPI_RESERVED2: [&str; RX_OOB_NUM_PPI] = [
    "ppi[0].reserved2",
    "ppi[1].reserved2",
    "ppi[2].reserved2",
    "ppi[3].reserved2",
];

impl RxCompOob {
    /// A single-packet `CQE_RX_OKAY` completion (ppi[1..] zeroed).
    pub fn single(flags: RxCompFlags, pkt_len: u16, pkt_hash: u32) -> Self {
        let mut o = Self {
            cqe_hdr: CqeHeader::with_type(CqeType::RxOkay),
            flags,
            ..Self::default()
        };
        o.ppi[0] = RxPacketInfo::new(pkt_len, pkt_hash);
        o
    }
    /// A completion for 1..=4 packets given as `(pkt_len, pkt_hash)`:
    /// `CQE_RX_OKAY` for one, `CQE_RX_COALESCED_4` for more, unused ppi
    /// zeroed. Fails on 0 or more than 4 packets, or a zero length (which
    /// would end the list early).
    pub fn packets(flags: RxCompFlags, pkts: &[(u16, u32)]) -> Result<Self, EncodeError> {
        if pkts.is_empty() || pkts.len() > RX_OOB_NUM_PPI {
            return Err(EncodeError::InvalidValue {
                what: Self::NAME,
                field: "ppi",
                value: pkts.len() as u64,
                expected: "1 to 4 packets",
            });
        }
        let t = if pkts.len() == 1 {
            CqeType::RxOkay
        } else {
            CqeType::RxCoalesced4
        };
        let mut o = Self {
            cqe_hdr: CqeHeader::with_type(t),
            flags,
            ..Self::default()
        };
        for (slot, &(len, hash)) in o.ppi.iter_mut().zip(pkts) {
            if len == 0 {
                return Err(EncodeError::InvalidValue {
                    what: Self::NAME,
                    field: "pkt_len",
                    value: 0,
                    expected: "a non-zero packet length",
                });
            }
            *slot = RxPacketInfo::new(len, hash);
        }
        Ok(o)
    }
    /// RX WQE offset.
    #[inline]
    pub const fn rx_wqe_offset(&self) -> u32 {
        self.rx_wqe_offset.get()
    }
    /// Borrows the OOB in a CQE's data bytes (no validation).
    #[inline]
    pub fn view(data: &[u8; CQE_DATA_SIZE]) -> &Self {
        zerocopy::transmute_ref!(data)
    }
    /// Number of packets: the ppi entries before the first zero length.
    #[inline]
    pub fn num_packets(&self) -> usize {
        self.ppi
            .iter()
            .position(|p| p.pkt_len() == 0)
            .unwrap_or(RX_OOB_NUM_PPI)
    }
    /// Whether the driver reports the RSS hash: DPDK requires `rx_hashtype`
    /// to equal `MANA_HASH_L3` or `MANA_HASH_L4` exactly.
    #[inline]
    pub fn dpdk_hash_valid(&self) -> bool {
        let h = self.flags.rx_hashtype();
        h == MANA_HASH_L3 || h == MANA_HASH_L4
    }
}

impl WireType for RxCompOob {
    const NAME: &'static str = "mana_rxcomp_oob";
    /// Requires an RX completion type (1..=4) and all reserved bits zero.
    fn validate(&self) -> Result<(), DecodeError> {
        let t = self.cqe_hdr.cqe_type()?;
        if !t.is_rx() {
            return Err(DecodeError::InvalidField {
                what: Self::NAME,
                field: "cqe_type",
                value: t as u64,
                expected: "an RX completion type (1..=4)",
            });
        }
        mbz(Self::NAME, "reserved1", self.flags.reserved1() as u64)?;
        mbz(Self::NAME, "reserved2", self.flags.reserved2() as u64)?;
        for (i, p) in self.ppi.iter().enumerate() {
            mbz(Self::NAME, PPI_RESERVED1[i], p.reserved1.get() as u64)?;
            mbz(Self::NAME, PPI_RESERVED2[i], p.reserved2.get() as u64)?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// TX completion OOB
// ---------------------------------------------------------------------------

wire_type! {
    /// Dword 2 of the TX completion OOB.
    pub struct TxCompOffsets: u32 as U32 {
        /// SGL offset (bits 0-4).
        #[bits(5)]
        pub tx_sgl_offset: u8,
        /// WQE offset (bits 5-31).
        #[bits(27)]
        pub tx_wqe_offset: u32,
    }
}

wire_type! {
    /// The 60-byte TX completion OOB (`mana_tx_comp_oob`).
    #[derive(Debug, Default)]
    pub struct TxCompOob: CQE_DATA_SIZE bytes {
        /// CQE header.
        pub cqe_hdr: CqeHeader,
        /// TX data offset.
        pub tx_data_offset: U32,
        /// SGL and WQE offsets.
        pub offsets: TxCompOffsets,
        /// Must be zero.
        pub reserved: [U32; 12],
    }
}

const TX_RESERVED: [&str; 12] = [
    "reserved[0]",
    "reserved[1]",
    "reserved[2]",
    "reserved[3]",
    "reserved[4]",
    "reserved[5]",
    "reserved[6]",
    "reserved[7]",
    "reserved[8]",
    "reserved[9]",
    "reserved[10]",
    "reserved[11]",
];

impl TxCompOob {
    /// A TX completion of the given type with zero offsets.
    pub fn with_type(t: CqeType) -> Self {
        Self {
            cqe_hdr: CqeHeader::with_type(t),
            ..Self::default()
        }
    }
    /// TX data offset.
    #[inline]
    pub const fn tx_data_offset(&self) -> u32 {
        self.tx_data_offset.get()
    }
    /// Borrows the OOB in a CQE's data bytes (no validation).
    #[inline]
    pub fn view(data: &[u8; CQE_DATA_SIZE]) -> &Self {
        zerocopy::transmute_ref!(data)
    }
}

impl WireType for TxCompOob {
    const NAME: &'static str = "mana_tx_comp_oob";
    /// Requires a TX completion type (32..=41) and `reserved` all zero.
    fn validate(&self) -> Result<(), DecodeError> {
        let t = self.cqe_hdr.cqe_type()?;
        if !t.is_tx() {
            return Err(DecodeError::InvalidField {
                what: Self::NAME,
                field: "cqe_type",
                value: t as u64,
                expected: "a TX completion type (32..=41)",
            });
        }
        for (i, r) in self.reserved.iter().enumerate() {
            mbz(Self::NAME, TX_RESERVED[i], r.get() as u64)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::IntoBytes;

    #[test]
    fn cqe_type_fail_closed() {
        let mut known = 0;
        for v in 0..=255u8 {
            match CqeType::try_from(v) {
                Ok(t) => {
                    known += 1;
                    assert_eq!(t as u8, v);
                    assert!(CqeType::ALL.contains(&t));
                    assert_eq!(t.is_rx(), (1..=4).contains(&v));
                    assert_eq!(t.is_tx(), (32..=41).contains(&v));
                }
                Err(e) => {
                    assert_eq!(e, DecodeError::UnknownCqeType { value: v });
                    assert!(!(0..=4).contains(&v) && !(32..=41).contains(&v));
                }
            }
        }
        assert_eq!(known, 15);
        assert_eq!(
            CqeType::TxVlanTaggingViolation.c_name(),
            "CQE_TX_VLAN_TAGGING_VIOLATION"
        );
        assert!(CqeType::RxCoalesced4.is_rx_ok() && !CqeType::RxTruncated.is_rx_ok());
    }

    #[test]
    fn hash_masks() {
        assert_eq!(MANA_HASH_L3, 0x049);
        assert_eq!(MANA_HASH_L4, 0x1b6);
    }

    #[test]
    fn golden_info() {
        let i = CqeInfo::try_new(0xabcdef, true, 5).unwrap();
        assert_eq!(i.as_bytes(), &[0xef, 0xcd, 0xab, 0xa1]);
        assert_eq!(CqeInfo::new().with_reserved(0xf).to_raw(), 0x1e00_0000);
        assert_eq!(
            CqeInfo::decode(&0x0200_0000u32.to_le_bytes())
                .unwrap_err()
                .field(),
            Some("reserved")
        );
        assert!(CqeInfo::try_new(0x100_0000, false, 0).is_err());
        assert!(CqeInfo::try_new(0, false, 8).is_err());
    }

    #[test]
    fn golden_header() {
        let h = CqeHeader::new()
            .with_cqe_type_raw(41)
            .with_client_type(3)
            .with_vendor_err(0x123456);
        assert_eq!(h.as_bytes(), &[0xe9, 0x56, 0x34, 0x12]);
        assert_eq!(h.cqe_type().unwrap(), CqeType::TxVlanTaggingViolation);
        assert_eq!(CqeHeader::with_type(CqeType::RxOkay).to_raw(), 0x41);
        let bad = CqeHeader::new().with_cqe_type_raw(5);
        assert_eq!(
            CqeHeader::decode(bad.as_bytes()).unwrap_err(),
            DecodeError::UnknownCqeType { value: 5 }
        );
    }

    fn all_flags() -> RxCompFlags {
        RxCompFlags::new()
            .with_rx_vlan_id(0xabc)
            .with_rx_vlantag_present(true)
            .with_rx_outer_iphdr_csum_succeed(true)
            .with_rx_outer_iphdr_csum_fail(true)
            .with_rx_hashtype(0x1b6)
            .with_rx_iphdr_csum_succeed(true)
            .with_rx_iphdr_csum_fail(true)
            .with_rx_tcp_csum_succeed(true)
            .with_rx_tcp_csum_fail(true)
            .with_rx_udp_csum_succeed(true)
            .with_rx_udp_csum_fail(true)
    }

    #[test]
    fn golden_rx_flags() {
        // 0x7e000000 | 0x1b6 << 16 | 0x7000 | 0xabc
        assert_eq!(all_flags().into_bits().get(), 0x7fb6_7abc);
        let b = |f: RxCompFlags| f.into_bits().get();
        let z = RxCompFlags::new();
        assert_eq!(b(z.with_rx_vlantag_present(true)), 1 << 12);
        assert_eq!(b(z.with_rx_outer_iphdr_csum_succeed(true)), 1 << 13);
        assert_eq!(b(z.with_rx_outer_iphdr_csum_fail(true)), 1 << 14);
        assert_eq!(b(z.with_reserved1(true)), 1 << 15);
        assert_eq!(b(z.with_rx_hashtype(1)), 1 << 16);
        assert_eq!(b(z.with_rx_iphdr_csum_succeed(true)), 1 << 25);
        assert_eq!(b(z.with_rx_iphdr_csum_fail(true)), 1 << 26);
        assert_eq!(b(z.with_rx_tcp_csum_succeed(true)), 1 << 27);
        assert_eq!(b(z.with_rx_tcp_csum_fail(true)), 1 << 28);
        assert_eq!(b(z.with_rx_udp_csum_succeed(true)), 1 << 29);
        assert_eq!(b(z.with_rx_udp_csum_fail(true)), 1 << 30);
        assert_eq!(b(z.with_reserved2(true)), 1 << 31);
    }

    #[test]
    fn golden_rx_oob() {
        let mut o = RxCompOob::single(all_flags(), 1514, 0xdead_beef);
        o.ppi[1] = RxPacketInfo::new(60, 0x0102_0304);
        o.rx_wqe_offset = U32::new(0x1122_3344);
        let mut want = [0u8; 60];
        want[0..4].copy_from_slice(&[0x41, 0, 0, 0]);
        want[4..8].copy_from_slice(&0x7fb6_7abcu32.to_le_bytes());
        want[8..10].copy_from_slice(&1514u16.to_le_bytes());
        want[16..20].copy_from_slice(&0xdead_beefu32.to_le_bytes());
        want[20] = 60;
        want[28..32].copy_from_slice(&[4, 3, 2, 1]);
        want[56..60].copy_from_slice(&[0x44, 0x33, 0x22, 0x11]);
        assert_eq!(o.as_bytes(), &want);
        let d = RxCompOob::decode(&want).unwrap();
        assert_eq!(d, o);
        assert_eq!(d.num_packets(), 2);
        assert!(!d.dpdk_hash_valid() || d.flags.rx_hashtype() == MANA_HASH_L4);
    }

    #[test]
    fn rx_packets_builder() {
        let f = RxCompFlags::new().with_rx_hashtype(MANA_HASH_L3);
        let one = RxCompOob::packets(f, &[(100, 7)]).unwrap();
        assert_eq!(one, RxCompOob::single(f, 100, 7));
        assert!(one.dpdk_hash_valid());
        let three = RxCompOob::packets(f, &[(1, 1), (2, 2), (3, 3)]).unwrap();
        assert_eq!(three.cqe_hdr.cqe_type().unwrap(), CqeType::RxCoalesced4);
        assert_eq!(three.num_packets(), 3);
        assert_eq!(three.ppi[3], RxPacketInfo::default());
        assert!(three.validate().is_ok());
        assert!(RxCompOob::packets(f, &[]).is_err());
        assert!(RxCompOob::packets(f, &[(1, 0); 5]).is_err());
        assert!(RxCompOob::packets(f, &[(1, 0), (0, 0)]).is_err());
    }

    #[test]
    fn rx_oob_rejections() {
        let ok = RxCompOob::single(RxCompFlags::new(), 64, 0);
        assert!(ok.validate().is_ok());
        let mut o = ok;
        o.flags.set_reserved1(true);
        assert_eq!(o.validate().unwrap_err().field(), Some("reserved1"));
        let mut o = ok;
        o.flags.set_reserved2(true);
        assert_eq!(o.validate().unwrap_err().field(), Some("reserved2"));
        for i in 0..4 {
            let mut o = ok;
            o.ppi[i].reserved1 = U16::new(0x8000);
            assert_eq!(o.validate().unwrap_err().field(), Some(PPI_RESERVED1[i]));
            let mut o = ok;
            o.ppi[i].reserved2 = U32::new(1);
            let e = o.validate().unwrap_err();
            assert_eq!(e.field(), Some(PPI_RESERVED2[i]));
            assert_eq!(
                e.to_string(),
                format!(
                    "mana_rxcomp_oob: reserved field `ppi[{i}].reserved2` must be zero, is 0x1"
                )
            );
        }
        let mut o = ok;
        o.cqe_hdr = CqeHeader::with_type(CqeType::TxOkay);
        assert_eq!(o.validate().unwrap_err().field(), Some("cqe_type"));
        o.cqe_hdr = CqeHeader::with_type(CqeType::Invalid);
        assert_eq!(o.validate().unwrap_err().field(), Some("cqe_type"));
        o.cqe_hdr = CqeHeader::new().with_cqe_type_raw(63);
        assert_eq!(
            o.validate().unwrap_err(),
            DecodeError::UnknownCqeType { value: 63 }
        );
        assert!(matches!(
            RxCompOob::decode(&[0u8; 59]),
            Err(DecodeError::TooShort {
                needed: 60,
                got: 59,
                ..
            })
        ));
    }

    #[test]
    fn golden_tx_oob() {
        let mut o = TxCompOob::with_type(CqeType::TxOkay);
        o.tx_data_offset = U32::new(0xa0b0_c0d0);
        o.offsets = TxCompOffsets::new()
            .with_tx_sgl_offset(0x1f)
            .with_tx_wqe_offset(0x7ff_ffff);
        let mut want = [0u8; 60];
        want[0] = 0x60; // type 32 | client_type 1 << 6
        want[4..8].copy_from_slice(&[0xd0, 0xc0, 0xb0, 0xa0]);
        want[8..12].copy_from_slice(&[0xff; 4]);
        assert_eq!(o.as_bytes(), &want);
        assert_eq!(TxCompOob::decode(&want).unwrap(), o);
        let o2 = TxCompOffsets::new()
            .with_tx_sgl_offset(3)
            .with_tx_wqe_offset(5);
        assert_eq!(o2.into_bits().get(), 3 | (5 << 5));
    }

    #[test]
    fn tx_oob_rejections() {
        let ok = TxCompOob::with_type(CqeType::TxMtuDrop);
        assert!(ok.validate().is_ok());
        for (i, name) in TX_RESERVED.iter().enumerate() {
            let mut o = ok;
            o.reserved[i] = U32::new(0x8000_0000);
            assert_eq!(o.validate().unwrap_err().field(), Some(*name));
        }
        let rx = TxCompOob::with_type(CqeType::RxOkay);
        assert_eq!(rx.validate().unwrap_err().field(), Some("cqe_type"));
    }

    #[test]
    fn golden_cqe() {
        let oob = TxCompOob::with_type(CqeType::TxOkay);
        let data: [u8; 60] = oob.as_bytes().try_into().unwrap();
        let c = Cqe::from_parts(&data, CqeInfo::try_new(0x42, true, 1).unwrap());
        assert_eq!(&c.as_bytes()[60..], &[0x42, 0, 0, 0x21]);
        assert_eq!(c.as_bytes()[0], 0x60);
        let d = Cqe::decode(c.as_bytes()).unwrap();
        assert!(d.validate_full().is_ok());
        assert_eq!(d.header().cqe_type().unwrap(), CqeType::TxOkay);
        assert_eq!(d.tx_oob(), &oob);
        // is_sq = 0 -> checked as RX and rejected.
        let c = Cqe::from_parts(&data, CqeInfo::try_new(0x42, false, 1).unwrap());
        assert_eq!(c.validate_full().unwrap_err().field(), Some("cqe_type"));
        let mut bytes = [0u8; 64];
        bytes[63] = 0x02; // info.reserved bit 25
        assert_eq!(Cqe::decode(&bytes).unwrap_err().field(), Some("reserved"));
    }

    #[test]
    fn owner_phase() {
        let count = 8;
        assert_eq!(cq_initial_index(count), 8);
        assert_eq!(owner_bits(8, count), 1);
        assert_eq!(owner_bits(15, count), 1);
        assert_eq!(owner_bits(16, count), 2);
        assert_eq!(owner_bits(64, count), 0);
        assert_eq!(cq_slot(17, count), 1);
        // Zeroed ring, consumer at its initial index: empty.
        assert_eq!(cqe_state(0, count, count), CqeState::Empty);
        assert_eq!(cqe_state(1, count, count), CqeState::Ready);
        assert_eq!(cqe_state(2, count, count), CqeState::Overflow);
        // Lap 8 -> owner 0 expected, previous 7.
        assert_eq!(cqe_state(0, 64, count), CqeState::Ready);
        assert_eq!(cqe_state(7, 64, count), CqeState::Empty);
        // Non-power-of-two count.
        assert_eq!(cqe_state(1, 192 + 191, 192), CqeState::Ready);
        assert_eq!(cqe_state(2, 384, 192), CqeState::Ready);
        assert_eq!(cq_arm_tail(1000, 64), 1000 % 512);
        assert_eq!(cq_arm_tail(u32::MAX, 1 << 30), u32::MAX);
    }

    /// Simulated producer/consumer: every CQE is seen once, in order, and a
    /// producer that laps the consumer is detected.
    #[test]
    fn owner_phase_simulation() {
        for count in [1u32, 2, 3, 8, 192] {
            let mut ring = vec![0u8; count as usize];
            let (mut p, mut c) = (cq_initial_index(count), cq_initial_index(count));
            for step in 0..(count * 20) {
                // Produce 0..=count entries without overflowing.
                let n = (step * 7 + 3) % (count + 1);
                let n = n.min(count - (p - c));
                for _ in 0..n {
                    ring[cq_slot(p, count) as usize] = owner_bits(p, count);
                    p += 1;
                }
                while cqe_state(ring[cq_slot(c, count) as usize], c, count) == CqeState::Ready {
                    c += 1;
                }
                assert_eq!(c, p, "count {count} step {step}");
            }
            // Producer laps the consumer by one entry.
            for _ in 0..=count {
                ring[cq_slot(p, count) as usize] = owner_bits(p, count);
                p += 1;
            }
            let s = cqe_state(ring[cq_slot(c, count) as usize], c, count);
            assert_eq!(s, CqeState::Overflow, "count {count}");
        }
    }
}

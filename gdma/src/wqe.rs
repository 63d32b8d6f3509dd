//! Work queue entries: the 8-byte header, SGEs, size rules, and
//! wrap-aware WQE writing (driver side) and parsing (device side).
//!
//! A WQE is `header (8) | inline OOB (8 or 24) | SGL (16 * max(1, n))`,
//! rounded up to 32 bytes. It starts on a 32-byte boundary at
//! `(head_bu * 32) & (ring_len - 1)`; header + OOB (at most 32 bytes) never
//! wrap, the SGL may continue at the start of the ring.

use zerocopy::{FromBytes, IntoBytes};

use crate::error::{check_bits, mbz};
use crate::le::{U32, U64};
use crate::{
    wire_type, DecodeError, EncodeError, WireType, INLINE_OOB_LARGE_SIZE, INLINE_OOB_SMALL_SIZE,
    MAX_RQE_SIZE, MAX_RX_WQE_SGES, MAX_SQE_SIZE, MAX_TX_WQE_SGES, SGE_SIZE, WQE_BU_SIZE,
    WQE_HEADER_SIZE,
};

wire_type! {
    /// The 8-byte WQE header (`struct gdma_wqe`; DPDK `gdma_wqe_dma_oob`).
    pub struct WqeHeader: u64 as U64 {
        /// Must be zero (dword0 bits 0-23).
        #[bits(24)]
        pub reserved: u32,
        /// `last_vbytes` (dword0 bits 24-31): in an LSO WQE the size of SGE 0,
        /// which holds exactly the packet headers (the kernel's
        /// `GDMA_WR_PAD_BY_SGE0`); 0 in every other WQE.
        #[bits(8)]
        pub last_vbytes: u8,
        /// Number of SGEs (dword1 bits 0-7). 0 is allowed: DPDK then writes one
        /// dummy SGE `{address: 1, mem_key: 0, size: 0}`.
        #[bits(8)]
        pub num_sge: u8,
        /// Inline OOB size in dwords (bits 8-10): 2 (8 bytes) or 6 (24 bytes).
        #[bits(3)]
        pub inline_oob_size_div4: u8,
        /// `client_oob_in_sgl` (bit 11): set in an LSO WQE (the kernel's
        /// `GDMA_WR_OOB_IN_SGL`, always together with `GDMA_WR_PAD_BY_SGE0`).
        /// Despite the name the TX OOB stays inline; SGE 0 carries the headers.
        pub client_oob_in_sgl: bool,
        /// Must be zero (bits 12-15; DPDK names bits 12/13 `consume_credit`/`fence`).
        #[bits(4)]
        pub reserved1: u8,
        /// Client data unit (bits 16-29): the LSO MSS (the kernel writes
        /// `gso_size`, send queues only); 0 in every other WQE.
        #[bits(14)]
        pub client_data_unit: u16,
        /// Must be zero (bits 30-31; DPDK names them `check_sn`/`sgl_direct`).
        #[bits(2)]
        pub reserved2: u8,
    }
}

impl WqeHeader {
    /// Inline OOB size in bytes (`inline_oob_size_div4 * 4`).
    #[inline]
    pub const fn inline_oob_size(&self) -> usize {
        self.inline_oob_size_div4() as usize * 4
    }

    /// Builds a header; fails if a value does not fit its field or the OOB
    /// size is not 8 or 24.
    pub fn try_new(
        num_sge: usize,
        inline_oob_size: usize,
        client_data_unit: u32,
    ) -> Result<Self, EncodeError> {
        let n = check_bits(Self::NAME, "num_sge", num_sge as u64, 8)? as u8;
        let cdu = check_bits(Self::NAME, "client_data_unit", client_data_unit as u64, 14)? as u16;
        if inline_oob_size != INLINE_OOB_SMALL_SIZE && inline_oob_size != INLINE_OOB_LARGE_SIZE {
            return Err(EncodeError::InvalidValue {
                what: Self::NAME,
                field: "inline_oob_size_div4",
                value: inline_oob_size as u64,
                expected: "an inline OOB slot of 8 or 24 bytes",
            });
        }
        Ok(Self::new()
            .with_num_sge(n)
            .with_inline_oob_size_div4((inline_oob_size / 4) as u8)
            .with_client_data_unit(cdu))
    }
}

impl WqeHeader {
    /// Builds the header of an LSO (TCP segmentation offload) send WQE the
    /// way the Linux driver does (`GDMA_WR_OOB_IN_SGL | GDMA_WR_PAD_BY_SGE0`):
    /// `client_oob_in_sgl = 1`, `last_vbytes = header_len` (the size of
    /// SGE 0, which holds exactly the L2+L3+L4 headers) and
    /// `client_data_unit = mss`. Fails unless `num_sge >= 2`,
    /// `1 <= mss <= 0x3fff` and `1 <= header_len <= 255`.
    pub fn try_new_lso(
        num_sge: usize,
        inline_oob_size: usize,
        mss: u32,
        header_len: u32,
    ) -> Result<Self, EncodeError> {
        if num_sge < 2 {
            return Err(EncodeError::InvalidValue {
                what: Self::NAME,
                field: "num_sge",
                value: num_sge as u64,
                expected: "at least 2 SGEs in an LSO WQE (headers, then payload)",
            });
        }
        if mss == 0 {
            return Err(EncodeError::InvalidValue {
                what: Self::NAME,
                field: "client_data_unit",
                value: 0,
                expected: "a non-zero MSS in an LSO WQE",
            });
        }
        if header_len == 0 {
            return Err(EncodeError::InvalidValue {
                what: Self::NAME,
                field: "last_vbytes",
                value: 0,
                expected: "the size of SGE 0 (the packet headers), 1..=255",
            });
        }
        let lv = check_bits(Self::NAME, "last_vbytes", header_len as u64, 8)? as u8;
        Ok(Self::try_new(num_sge, inline_oob_size, mss)?
            .with_client_oob_in_sgl(true)
            .with_last_vbytes(lv))
    }

    /// The LSO parameters if this is an LSO WQE header
    /// (`client_oob_in_sgl` set). Not validated; see [`read_wqe`].
    #[inline]
    pub const fn lso(&self) -> Option<Lso> {
        if self.client_oob_in_sgl() {
            Some(Lso {
                mss: self.client_data_unit(),
                header_len: self.last_vbytes(),
            })
        } else {
            None
        }
    }
}

/// The parameters of an LSO (TCP segmentation offload) send WQE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Lso {
    /// Maximum TCP payload per segment (`client_data_unit`).
    pub mss: u16,
    /// Size of the headers in SGE 0 (`last_vbytes`).
    pub header_len: u8,
}

impl WireType for WqeHeader {
    const NAME: &'static str = "gdma_wqe";
    fn validate(&self) -> Result<(), DecodeError> {
        mbz(Self::NAME, "reserved", self.reserved() as u64)?;
        mbz(Self::NAME, "reserved1", self.reserved1() as u64)?;
        mbz(Self::NAME, "reserved2", self.reserved2() as u64)?;
        let d = self.inline_oob_size_div4();
        if d != 2 && d != 6 {
            return Err(DecodeError::InvalidField {
                what: Self::NAME,
                field: "inline_oob_size_div4",
                value: d as u64,
                expected: "2 (8-byte OOB) or 6 (24-byte OOB)",
            });
        }
        Ok(())
    }
}

wire_type! {
    /// A 16-byte scatter-gather element (`struct gdma_sge`).
    ///
    /// `address` is the process virtual address for MANA MRs (registered with
    /// iova == VA), `mem_key` the MR's lkey.
    #[derive(Default)]
    pub struct Sge: SGE_SIZE bytes {
        /// Buffer address.
        pub address: U64,
        /// Memory key (lkey).
        pub mem_key: U32,
        /// Buffer size in bytes.
        pub size: U32,
    }
}

impl Sge {
    /// The placeholder DPDK writes for a WQE without SGEs.
    pub const DUMMY: Sge = Sge::new(1, 0, 0);

    /// Builds an SGE.
    #[inline]
    pub const fn new(address: u64, mem_key: u32, size: u32) -> Self {
        Self {
            address: U64::new(address),
            mem_key: U32::new(mem_key),
            size: U32::new(size),
        }
    }
    /// Buffer address.
    #[inline]
    pub const fn address(&self) -> u64 {
        self.address.get()
    }
    /// Memory key.
    #[inline]
    pub const fn mem_key(&self) -> u32 {
        self.mem_key.get()
    }
    /// Size in bytes.
    #[inline]
    pub const fn size(&self) -> u32 {
        self.size.get()
    }
    /// The SGE as the two 64-bit little-endian words it occupies in a WQE:
    /// the address, then memory key and size. A data path that posts many
    /// buffers with one key and size computes the second word once.
    #[inline]
    pub fn to_words(&self) -> [u64; 2] {
        let b = zerocopy::IntoBytes::as_bytes(self);
        [
            u64::from_le_bytes(b[0..8].try_into().unwrap()),
            u64::from_le_bytes(b[8..16].try_into().unwrap()),
        ]
    }
}

impl core::fmt::Debug for Sge {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Sge")
            .field("address", &format_args!("{:#x}", self.address()))
            .field("mem_key", &format_args!("{:#x}", self.mem_key()))
            .field("size", &self.size())
            .finish()
    }
}

impl WireType for Sge {
    const NAME: &'static str = "gdma_sge";
    fn validate(&self) -> Result<(), DecodeError> {
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Size rules
// ---------------------------------------------------------------------------

/// The inline OOB slot for an OOB of `inline_oob_size` bytes: 8 if it is at
/// most 8, else 24.
#[inline]
pub const fn inline_oob_slot_size(inline_oob_size: usize) -> usize {
    if inline_oob_size > INLINE_OOB_SMALL_SIZE {
        INLINE_OOB_LARGE_SIZE
    } else {
        INLINE_OOB_SMALL_SIZE
    }
}

/// WQE size in bytes: `align32(8 + slot(oob) + 16 * max(1, num_sge))`.
/// Unchecked; see [`WqeLayout::new`] for the limits.
#[inline]
pub const fn wqe_size(inline_oob_size: usize, num_sge: usize) -> usize {
    let n = if num_sge == 0 { 1 } else { num_sge };
    let raw = WQE_HEADER_SIZE + inline_oob_slot_size(inline_oob_size) + SGE_SIZE * n;
    (raw + WQE_BU_SIZE - 1) & !(WQE_BU_SIZE - 1)
}

/// WQE size in basic units (32 bytes).
#[inline]
pub const fn wqe_size_bu(inline_oob_size: usize, num_sge: usize) -> u32 {
    (wqe_size(inline_oob_size, num_sge) / WQE_BU_SIZE) as u32
}

/// Which kind of work queue a WQE is for (the limits differ).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WqType {
    /// Send queue: OOB up to 24 bytes, up to 30 SGEs, WQE up to 512 bytes.
    Sq,
    /// Receive queue: no OOB (an 8-byte zero slot), up to 15 SGEs, WQE up
    /// to 256 bytes.
    Rq,
}

impl WqType {
    /// Maximum WQE size in bytes.
    pub const fn max_wqe_size(self) -> usize {
        match self {
            Self::Sq => MAX_SQE_SIZE,
            Self::Rq => MAX_RQE_SIZE,
        }
    }
    /// Maximum SGEs per WQE.
    pub const fn max_sges(self) -> usize {
        match self {
            Self::Sq => MAX_TX_WQE_SGES,
            Self::Rq => MAX_RX_WQE_SGES,
        }
    }
    const fn name(self) -> &'static str {
        match self {
            Self::Sq => "SQ WQE",
            Self::Rq => "RQ WQE",
        }
    }
}

/// The byte layout of one WQE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WqeLayout {
    /// Inline OOB slot size: 8 or 24.
    pub oob_slot: usize,
    /// SGEs in the header (0 means one dummy SGE slot).
    pub num_sge: usize,
    /// Total size in bytes, a multiple of 32.
    pub size: usize,
}

impl WqeLayout {
    /// Computes and checks the layout of a WQE for `wq`: RQ WQEs must carry
    /// no inline OOB, SQ OOBs are at most 24 bytes, and the SGE count and
    /// total size must be within the queue's limits.
    pub fn new(wq: WqType, inline_oob_size: usize, num_sge: usize) -> Result<Self, EncodeError> {
        let what = wq.name();
        let max_oob = match wq {
            WqType::Sq => INLINE_OOB_LARGE_SIZE,
            WqType::Rq => 0,
        };
        if inline_oob_size > max_oob {
            return Err(EncodeError::InvalidValue {
                what,
                field: "inline_oob_size",
                value: inline_oob_size as u64,
                expected: "at most 24 bytes (SQ) or 0 (RQ)",
            });
        }
        if num_sge > wq.max_sges() {
            return Err(EncodeError::FieldOverflow {
                what,
                field: "num_sge",
                value: num_sge as u64,
                max: wq.max_sges() as u64,
            });
        }
        let l = Self::new_unchecked(inline_oob_size, num_sge);
        if l.size > wq.max_wqe_size() {
            return Err(EncodeError::InvalidValue {
                what,
                field: "wqe_size",
                value: l.size as u64,
                expected: "at most 512 bytes (SQ) or 256 bytes (RQ)",
            });
        }
        Ok(l)
    }

    /// The layout without limit checks.
    #[inline]
    pub const fn new_unchecked(inline_oob_size: usize, num_sge: usize) -> Self {
        Self {
            oob_slot: inline_oob_slot_size(inline_oob_size),
            num_sge,
            size: wqe_size(inline_oob_size, num_sge),
        }
    }

    /// Offset of the SGL from the WQE start (16 or 32).
    #[inline]
    pub const fn sgl_offset(&self) -> usize {
        WQE_HEADER_SIZE + self.oob_slot
    }

    /// Size in basic units.
    #[inline]
    pub const fn size_bu(&self) -> u32 {
        (self.size / WQE_BU_SIZE) as u32
    }
}

// ---------------------------------------------------------------------------
// Ring access
// ---------------------------------------------------------------------------

fn check_ring(len: usize) -> bool {
    len.is_power_of_two() && len >= WQE_BU_SIZE
}

/// Writes one WQE into a ring buffer at producer position `head_bu` (in
/// BUs, unmasked) and returns its size in BUs; the caller advances `head`
/// by that and checks free space beforehand.
///
/// Writes the header, the OOB zero-padded to its slot, the SGL (one dummy
/// SGE if `sges` is empty, as DPDK does) wrapping at the ring end, and
/// zeroes the padding up to the next BU so the ring holds no stale bytes.
/// `ring.len()` must be a power of two of at least 32 bytes and hold the WQE.
///
/// `client_data_unit` must be 0: a non-zero value is an LSO MSS, which the
/// device accepts only in an LSO WQE written by [`write_lso_wqe`].
pub fn write_wqe(
    ring: &mut [u8],
    head_bu: u32,
    wq: WqType,
    inline_oob: &[u8],
    sges: &[Sge],
    client_data_unit: u32,
) -> Result<u32, EncodeError> {
    let layout = WqeLayout::new(wq, inline_oob.len(), sges.len())?;
    let header = WqeHeader::try_new(sges.len(), layout.oob_slot, client_data_unit)?;
    if client_data_unit != 0 {
        return Err(EncodeError::InvalidValue {
            what: WqeHeader::NAME,
            field: "client_data_unit",
            value: client_data_unit as u64,
            expected: "0 outside an LSO WQE (see write_lso_wqe)",
        });
    }
    write_wqe_with_header(ring, head_bu, wq, layout, header, inline_oob, sges)
}

/// Writes an LSO (TCP segmentation offload) send WQE, as the Linux driver
/// posts a GSO packet: SGE 0 must hold exactly the L2+L3+L4 headers, the
/// payload follows in SGEs 1..n, `mss` is the maximum TCP payload of each
/// segment. The header is [`WqeHeader::try_new_lso`]`(sges.len(), oob, mss,
/// sges[0].size)`; everything else as [`write_wqe`]. The OOB stays inline
/// and must request the offloads (see the emulator's README for the full
/// contract: `is_outer_ipv4`/`is_outer_ipv6`, `comp_iphdr_csum`,
/// `comp_tcp_csum`, `trans_off`).
pub fn write_lso_wqe(
    ring: &mut [u8],
    head_bu: u32,
    inline_oob: &[u8],
    sges: &[Sge],
    mss: u32,
) -> Result<u32, EncodeError> {
    let layout = WqeLayout::new(WqType::Sq, inline_oob.len(), sges.len())?;
    let hdr_len = sges.first().map_or(0, |s| s.size());
    let header = WqeHeader::try_new_lso(sges.len(), layout.oob_slot, mss, hdr_len)?;
    write_wqe_with_header(ring, head_bu, WqType::Sq, layout, header, inline_oob, sges)
}

fn write_wqe_with_header(
    ring: &mut [u8],
    head_bu: u32,
    wq: WqType,
    layout: WqeLayout,
    header: WqeHeader,
    inline_oob: &[u8],
    sges: &[Sge],
) -> Result<u32, EncodeError> {
    let len = ring.len();
    if !check_ring(len) || len < layout.size {
        return Err(EncodeError::InvalidValue {
            what: wq.name(),
            field: "ring length",
            value: len as u64,
            expected: "a power of two holding at least one WQE",
        });
    }
    let start = (head_bu as usize).wrapping_mul(WQE_BU_SIZE) & (len - 1);

    // Header + OOB slot fit in the first BU, which never wraps.
    let first = &mut ring[start..start + layout.sgl_offset()];
    first[..WQE_HEADER_SIZE].copy_from_slice(header.as_bytes());
    let oob = &mut first[WQE_HEADER_SIZE..];
    oob[..inline_oob.len()].copy_from_slice(inline_oob);
    oob[inline_oob.len()..].fill(0);

    let mut pos = start + layout.sgl_offset();
    let dummy = [Sge::DUMMY];
    let sgl = if sges.is_empty() { &dummy[..] } else { sges };
    for sge in sgl {
        // SGEs are 16-byte aligned and the ring is a multiple of 32 bytes,
        // so an SGE never straddles the end.
        let p = pos & (len - 1);
        ring[p..p + SGE_SIZE].copy_from_slice(sge.as_bytes());
        pos += SGE_SIZE;
    }
    let end = start + layout.size;
    while pos < end {
        let p = pos & (len - 1);
        ring[p] = 0;
        pos += 1;
    }
    Ok(layout.size_bu())
}

/// A WQE parsed in place from a ring (device side).
#[derive(Debug, Clone, Copy)]
pub struct WqeView<'a> {
    ring: &'a [u8],
    start: usize,
    /// The validated header.
    pub header: WqeHeader,
    /// The layout derived from the header.
    pub layout: WqeLayout,
}

impl<'a> WqeView<'a> {
    /// The inline OOB slot (8 or 24 bytes, never wraps).
    pub fn inline_oob(&self) -> &'a [u8] {
        let o = self.start + WQE_HEADER_SIZE;
        &self.ring[o..o + self.layout.oob_slot]
    }

    /// Number of SGEs the header declares.
    pub fn num_sge(&self) -> usize {
        self.layout.num_sge
    }

    /// SGE `i` (`i < num_sge()`), read across the ring wrap.
    pub fn sge(&self, i: usize) -> Option<Sge> {
        if i >= self.layout.num_sge {
            return None;
        }
        let p = (self.start + self.layout.sgl_offset() + i * SGE_SIZE) & (self.ring.len() - 1);
        Sge::read_from_bytes(&self.ring[p..p + SGE_SIZE]).ok()
    }

    /// Iterator over the declared SGEs.
    pub fn sges(&self) -> impl Iterator<Item = Sge> + 'a {
        let this = *self;
        (0..this.layout.num_sge).filter_map(move |i| this.sge(i))
    }

    /// Size of this WQE in BUs (how far the consumer advances).
    pub fn size_bu(&self) -> u32 {
        self.layout.size_bu()
    }

    /// The LSO parameters of an LSO send WQE ([`read_wqe`] has checked
    /// them against the SGL).
    pub fn lso(&self) -> Option<Lso> {
        self.header.lso()
    }
}

/// Parses and validates the WQE at byte position `pos` (unmasked, as carried
/// by SQ/RQ doorbells) of a ring written by a driver.
///
/// Rejects: a ring whose length is not a power of two >= 32, a position not
/// on a BU boundary, an invalid header ([`WqeHeader::validate`]), a 24-byte
/// OOB or non-zero OOB bytes on an RQ, SGE counts or sizes beyond the
/// queue's limits, and LSO fields out of place:
///
/// * `client_oob_in_sgl` is accepted only on an SQ, as an LSO WQE: it needs
///   `client_data_unit` (the MSS) non-zero, at least 2 SGEs and
///   `last_vbytes` equal to the (non-zero) size of SGE 0;
/// * without `client_oob_in_sgl`, `client_data_unit` and `last_vbytes`
///   must be 0.
pub fn read_wqe(ring: &[u8], pos: u32, wq: WqType) -> Result<WqeView<'_>, DecodeError> {
    let what = wq.name();
    let len = ring.len();
    if !check_ring(len) {
        return Err(DecodeError::InvalidField {
            what,
            field: "ring length",
            value: len as u64,
            expected: "a power of two of at least 32 bytes",
        });
    }
    if pos & (WQE_BU_SIZE as u32 - 1) != 0 {
        return Err(DecodeError::InvalidField {
            what,
            field: "position",
            value: pos as u64,
            expected: "a multiple of 32 bytes",
        });
    }
    let start = pos as usize & (len - 1);
    let header = WqeHeader::decode(&ring[start..])?;
    if header.client_oob_in_sgl() {
        if wq == WqType::Rq {
            return Err(DecodeError::InvalidField {
                what: WqeHeader::NAME,
                field: "client_oob_in_sgl",
                value: 1,
                expected: "0 on a receive queue",
            });
        }
        if header.client_data_unit() == 0 {
            return Err(DecodeError::InvalidField {
                what: WqeHeader::NAME,
                field: "client_oob_in_sgl",
                value: 1,
                expected: "0 unless an LSO WQE (an MSS in client_data_unit)",
            });
        }
        if header.num_sge() < 2 {
            return Err(DecodeError::InvalidField {
                what: WqeHeader::NAME,
                field: "num_sge",
                value: header.num_sge() as u64,
                expected: "at least 2 SGEs in an LSO WQE",
            });
        }
    } else {
        if header.client_data_unit() != 0 {
            return Err(DecodeError::InvalidField {
                what: WqeHeader::NAME,
                field: "client_data_unit",
                value: header.client_data_unit() as u64,
                expected: "0 unless client_oob_in_sgl (LSO)",
            });
        }
        if header.last_vbytes() != 0 {
            return Err(DecodeError::InvalidField {
                what: WqeHeader::NAME,
                field: "last_vbytes",
                value: header.last_vbytes() as u64,
                expected: "0 unless client_oob_in_sgl (LSO)",
            });
        }
    }
    let layout = WqeLayout::new_unchecked(header.inline_oob_size(), header.num_sge() as usize);
    if layout.num_sge > wq.max_sges() {
        return Err(DecodeError::InvalidField {
            what: WqeHeader::NAME,
            field: "num_sge",
            value: layout.num_sge as u64,
            expected: "at most 30 (SQ) or 15 (RQ) SGEs",
        });
    }
    if layout.size > wq.max_wqe_size() || layout.size > len {
        return Err(DecodeError::InvalidField {
            what,
            field: "wqe_size",
            value: layout.size as u64,
            expected: "at most 512 bytes (SQ) or 256 bytes (RQ), within the ring",
        });
    }
    let view = WqeView {
        ring,
        start,
        header,
        layout,
    };
    if let Some(lso) = header.lso() {
        let sge0 = view.sge(0).map_or(0, |s| s.size());
        if lso.header_len == 0 || u32::from(lso.header_len) != sge0 {
            return Err(DecodeError::InvalidField {
                what: WqeHeader::NAME,
                field: "last_vbytes",
                value: lso.header_len as u64,
                expected: "the size of SGE 0 (the packet headers), non-zero",
            });
        }
    }
    if wq == WqType::Rq {
        if layout.oob_slot != INLINE_OOB_SMALL_SIZE {
            return Err(DecodeError::InvalidField {
                what: WqeHeader::NAME,
                field: "inline_oob_size_div4",
                value: header.inline_oob_size_div4() as u64,
                expected: "2 on a receive queue",
            });
        }
        let oob = view.inline_oob();
        if oob.iter().any(|&b| b != 0) {
            let v = u64::from_le_bytes(oob.try_into().unwrap_or([0xff; 8]));
            return Err(DecodeError::ReservedNonZero {
                what,
                field: "inline_oob",
                value: v,
            });
        }
    }
    Ok(view)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(inline_oob_slot_size(0), 8);
        assert_eq!(inline_oob_slot_size(8), 8);
        assert_eq!(inline_oob_slot_size(9), 24);
        assert_eq!(inline_oob_slot_size(24), 24);
        // The table of dpdk-mana-pmd.md section 6.3.
        assert_eq!(wqe_size(8, 1), 32);
        assert_eq!(wqe_size(8, 2), 64);
        assert_eq!(wqe_size(24, 1), 64);
        assert_eq!(wqe_size(0, 1), 32);
        assert_eq!(wqe_size(0, 0), 32);
        assert_eq!(wqe_size_bu(8, 2), 2);
        assert_eq!(wqe_size(8, 30), 512);
        assert_eq!(wqe_size(24, 30), 512);
        assert_eq!(wqe_size(0, 15), 256);
        assert_eq!(wqe_size(8, 3), 64);
        assert_eq!(wqe_size(24, 2), 64);
        assert_eq!(wqe_size(24, 3), 96);
    }

    #[test]
    fn an_sge_as_words_is_its_golden_bytes() {
        let s = Sge::new(0x1122_3344_5566_7788, 0x99aa_bbcc, 0x0000_05dc);
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&s.to_words()[0].to_le_bytes());
        bytes[8..].copy_from_slice(&s.to_words()[1].to_le_bytes());
        assert_eq!(
            bytes,
            [
                0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0xcc, 0xbb, 0xaa, 0x99, 0xdc, 0x05,
                0, 0
            ]
        );
        assert_eq!(s.to_words()[0], s.address(), "word 0 is the address");
    }

    #[test]
    fn layout_limits() {
        assert!(WqeLayout::new(WqType::Sq, 24, 30).is_ok());
        assert!(WqeLayout::new(WqType::Sq, 8, 31).is_err());
        assert!(WqeLayout::new(WqType::Sq, 25, 1).is_err());
        assert!(WqeLayout::new(WqType::Rq, 0, 15).is_ok());
        assert!(WqeLayout::new(WqType::Rq, 0, 16).is_err());
        assert!(WqeLayout::new(WqType::Rq, 8, 1).is_err());
        let l = WqeLayout::new(WqType::Sq, 24, 1).unwrap();
        assert_eq!((l.sgl_offset(), l.size_bu()), (32, 2));
    }

    #[test]
    fn golden_header() {
        let h = WqeHeader::try_new(3, 24, 0x3fff)
            .unwrap()
            .with_last_vbytes(0xa5);
        assert_eq!(h.as_bytes(), &[0, 0, 0, 0xa5, 0x03, 0x06, 0xff, 0x3f]);
        assert!(h.validate().is_ok());
        assert!(WqeHeader::try_new(256, 8, 0).is_err());
        assert!(WqeHeader::try_new(1, 8, 0x4000).is_err());
        assert!(WqeHeader::try_new(1, 16, 0).is_err());
    }

    #[test]
    fn header_reserved_rejected() {
        let ok = WqeHeader::try_new(1, 8, 0).unwrap();
        let cases = [
            (ok.with_reserved(1), "reserved"),
            (ok.with_reserved(0x80_0000), "reserved"),
            (ok.with_reserved1(1), "reserved1"),
            (ok.with_reserved1(8), "reserved1"),
            (ok.with_reserved2(1), "reserved2"),
            (ok.with_reserved2(2), "reserved2"),
            (ok.with_inline_oob_size_div4(0), "inline_oob_size_div4"),
            (ok.with_inline_oob_size_div4(4), "inline_oob_size_div4"),
        ];
        for (h, field) in cases {
            let e = WqeHeader::decode(h.as_bytes()).unwrap_err();
            assert_eq!(e.field(), Some(field), "{h:?}");
        }
        assert!(matches!(
            WqeHeader::decode(&[0u8; 7]),
            Err(DecodeError::TooShort {
                needed: 8,
                got: 7,
                ..
            })
        ));
    }

    #[test]
    fn golden_sge() {
        let s = Sge::new(0x1122_3344_5566_7788, 0x99aa_bbcc, 0xddee_ff00);
        assert_eq!(
            s.as_bytes(),
            &[
                0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0xcc, 0xbb, 0xaa, 0x99, 0x00, 0xff,
                0xee, 0xdd
            ]
        );
        assert_eq!(Sge::decode(s.as_bytes()).unwrap(), s);
    }

    #[test]
    fn golden_rx_wqe() {
        let mut ring = [0xeeu8; 64];
        let bu = write_wqe(
            &mut ring,
            1,
            WqType::Rq,
            &[],
            &[Sge::new(0x1000, 7, 2048)],
            0,
        )
        .unwrap();
        assert_eq!(bu, 1);
        assert_eq!(&ring[..32], &[0xee; 32]);
        let mut want = [0u8; 32];
        want[4] = 1;
        want[5] = 2;
        want[16..32].copy_from_slice(Sge::new(0x1000, 7, 2048).as_bytes());
        assert_eq!(&ring[32..], &want);
        let v = read_wqe(&ring, 32, WqType::Rq).unwrap();
        assert_eq!(v.sges().collect::<Vec<_>>(), [Sge::new(0x1000, 7, 2048)]);
    }

    #[test]
    fn tx_wqe_wraps_sgl() {
        // 4-BU ring; a 24-byte OOB + 3 SGEs = 8+24+48 = 80 -> 96 bytes (3 BU),
        // started at BU 3, so SGEs 1 and 2 and the padding wrap to offset 0.
        let mut ring = [0xeeu8; 128];
        let oob: [u8; 24] = core::array::from_fn(|i| i as u8 + 1);
        let sges = [Sge::new(1, 2, 3), Sge::new(4, 5, 6), Sge::new(7, 8, 9)];
        let bu = write_wqe(&mut ring, 7, WqType::Sq, &oob, &sges, 0).unwrap();
        assert_eq!(bu, 3);
        assert_eq!(
            &ring[96..104],
            WqeHeader::try_new(3, 24, 0).unwrap().as_bytes()
        );
        assert_eq!(&ring[104..128], &oob);
        assert_eq!(&ring[0..16], sges[0].as_bytes());
        assert_eq!(&ring[16..32], sges[1].as_bytes());
        assert_eq!(&ring[32..48], sges[2].as_bytes());
        assert_eq!(&ring[48..64], &[0u8; 16]);
        assert_eq!(&ring[64..96], &[0xeeu8; 32]);
        let v = read_wqe(&ring, 7 * 32, WqType::Sq).unwrap();
        assert_eq!(v.inline_oob(), &oob);
        assert_eq!(v.sges().collect::<Vec<_>>(), sges);
        assert_eq!(v.size_bu(), 3);
    }

    #[test]
    fn short_oob_padded_and_dummy_sge() {
        let mut ring = [0xeeu8; 64];
        write_wqe(&mut ring, 0, WqType::Sq, &[1, 2, 3], &[], 0).unwrap();
        assert_eq!(&ring[8..16], &[1, 2, 3, 0, 0, 0, 0, 0]);
        assert_eq!(&ring[16..32], Sge::DUMMY.as_bytes());
        let v = read_wqe(&ring, 0, WqType::Sq).unwrap();
        assert_eq!(v.num_sge(), 0);
        assert_eq!(v.sges().count(), 0);
        assert_eq!(v.size_bu(), 1);
    }

    #[test]
    fn read_wqe_rejections() {
        let mut ring = [0u8; 256];
        write_wqe(&mut ring, 0, WqType::Sq, &[0; 8], &[Sge::new(1, 1, 1)], 0).unwrap();
        assert!(read_wqe(&ring, 0, WqType::Sq).is_ok());
        assert_eq!(
            read_wqe(&ring, 16, WqType::Sq).unwrap_err().field(),
            Some("position")
        );
        assert_eq!(
            read_wqe(&ring[..96], 0, WqType::Sq).unwrap_err().field(),
            Some("ring length")
        );
        // Non-zero OOB on an RQ.
        ring[8] = 1;
        assert_eq!(
            read_wqe(&ring, 0, WqType::Rq).unwrap_err().field(),
            Some("inline_oob")
        );
        // client_oob_in_sgl
        ring[5] |= 0x08;
        assert_eq!(
            read_wqe(&ring, 0, WqType::Sq).unwrap_err().field(),
            Some("client_oob_in_sgl")
        );
        // Too many SGEs for an RQ.
        let mut ring = [0u8; 512];
        let sges = [Sge::new(1, 1, 1); 16];
        write_wqe(&mut ring, 0, WqType::Sq, &[], &sges, 0).unwrap();
        assert_eq!(
            read_wqe(&ring, 0, WqType::Rq).unwrap_err().field(),
            Some("num_sge")
        );
        // 24-byte OOB on an RQ.
        write_wqe(&mut ring, 0, WqType::Sq, &[0; 24], &sges[..1], 0).unwrap();
        assert_eq!(
            read_wqe(&ring, 0, WqType::Rq).unwrap_err().field(),
            Some("inline_oob_size_div4")
        );
        // A WQE larger than the ring.
        let mut small = [0u8; 64];
        small[..8].copy_from_slice(WqeHeader::try_new(5, 8, 0).unwrap().as_bytes());
        assert_eq!(
            read_wqe(&small, 0, WqType::Sq).unwrap_err().field(),
            Some("wqe_size")
        );
    }

    #[test]
    fn golden_lso_header() {
        // What the Linux driver writes for a GSO packet: 3 SGEs, short OOB,
        // MSS 1448, 54 bytes of headers in SGE 0.
        let h = WqeHeader::try_new_lso(3, 8, 1448, 54).unwrap();
        // dw0 = 54 << 24; dw1 = 1448 << 16 | 1 << 11 | 2 << 8 | 3
        assert_eq!(h.as_bytes(), &[0, 0, 0, 54, 0x03, 0x0a, 0xa8, 0x05]);
        assert!(h.validate().is_ok());
        assert_eq!(
            h.lso(),
            Some(Lso {
                mss: 1448,
                header_len: 54
            })
        );
        assert_eq!(WqeHeader::try_new(3, 8, 0).unwrap().lso(), None);
        let field = |r: Result<WqeHeader, EncodeError>| match r.unwrap_err() {
            EncodeError::InvalidValue { field, .. } | EncodeError::FieldOverflow { field, .. } => {
                field
            }
            e => panic!("{e:?}"),
        };
        assert_eq!(field(WqeHeader::try_new_lso(1, 8, 1448, 54)), "num_sge");
        assert_eq!(
            field(WqeHeader::try_new_lso(2, 8, 0, 54)),
            "client_data_unit"
        );
        assert_eq!(
            field(WqeHeader::try_new_lso(2, 8, 0x4000, 54)),
            "client_data_unit"
        );
        assert_eq!(field(WqeHeader::try_new_lso(2, 8, 1448, 0)), "last_vbytes");
        assert_eq!(
            field(WqeHeader::try_new_lso(2, 8, 1448, 256)),
            "last_vbytes"
        );
    }

    #[test]
    fn golden_lso_wqe() {
        let mut ring = [0xeeu8; 128];
        let oob = [0x3d, 1, 0, 0, 34, 0, 0, 0]; // any 8 bytes
        let sges = [
            Sge::new(0x1000, 7, 54),
            Sge::new(0x2000, 7, 4000),
            Sge::new(0x3000, 7, 96),
        ];
        let bu = write_lso_wqe(&mut ring, 1, &oob, &sges, 1448).unwrap();
        assert_eq!(bu, 2); // 8 + 8 + 48 = 64
        assert_eq!(&ring[..32], &[0xee; 32]);
        assert_eq!(&ring[32..40], &[0, 0, 0, 54, 0x03, 0x0a, 0xa8, 0x05]);
        assert_eq!(&ring[40..48], &oob);
        assert_eq!(&ring[48..64], sges[0].as_bytes());
        assert_eq!(&ring[80..96], sges[2].as_bytes());
        let v = read_wqe(&ring, 32, WqType::Sq).unwrap();
        assert_eq!(
            v.lso(),
            Some(Lso {
                mss: 1448,
                header_len: 54
            })
        );
        assert_eq!(v.sges().collect::<Vec<_>>(), sges);
        assert_eq!(v.inline_oob(), &oob);
        // Encoder refusals.
        assert!(write_lso_wqe(&mut ring, 0, &oob, &sges[..1], 1448).is_err());
        assert!(write_lso_wqe(&mut ring, 0, &oob, &sges, 0).is_err());
        let big = [Sge::new(0x1000, 7, 300), sges[1]];
        assert!(write_lso_wqe(&mut ring, 0, &oob, &big, 1448).is_err());
        // A non-LSO writer refuses an MSS.
        assert_eq!(
            match write_wqe(&mut ring, 0, WqType::Sq, &oob, &sges, 1448).unwrap_err() {
                EncodeError::InvalidValue { field, .. } => field,
                e => panic!("{e:?}"),
            },
            "client_data_unit"
        );
    }

    #[test]
    fn read_wqe_lso_rejections() {
        let oob = [0u8; 8];
        let sges = [Sge::new(0x1000, 7, 54), Sge::new(0x2000, 7, 4000)];
        let mut ring = [0u8; 128];
        let put = |ring: &mut [u8], h: WqeHeader| ring[..8].copy_from_slice(h.as_bytes());
        write_lso_wqe(&mut ring, 0, &oob, &sges, 1448).unwrap();
        let lso = WqeHeader::try_new_lso(2, 8, 1448, 54).unwrap();
        assert!(read_wqe(&ring, 0, WqType::Sq).is_ok());
        // On a receive queue.
        assert_eq!(
            read_wqe(&ring, 0, WqType::Rq).unwrap_err().field(),
            Some("client_oob_in_sgl")
        );
        // client_oob_in_sgl without an MSS.
        put(&mut ring, lso.with_client_data_unit(0));
        assert_eq!(
            read_wqe(&ring, 0, WqType::Sq).unwrap_err().field(),
            Some("client_oob_in_sgl")
        );
        // An MSS without client_oob_in_sgl.
        put(
            &mut ring,
            lso.with_client_oob_in_sgl(false).with_last_vbytes(0),
        );
        assert_eq!(
            read_wqe(&ring, 0, WqType::Sq).unwrap_err().field(),
            Some("client_data_unit")
        );
        // last_vbytes without client_oob_in_sgl.
        put(
            &mut ring,
            WqeHeader::try_new(2, 8, 0).unwrap().with_last_vbytes(54),
        );
        assert_eq!(
            read_wqe(&ring, 0, WqType::Sq).unwrap_err().field(),
            Some("last_vbytes")
        );
        // last_vbytes not the size of SGE 0.
        for lv in [0u8, 53, 55] {
            put(&mut ring, lso.with_last_vbytes(lv));
            assert_eq!(
                read_wqe(&ring, 0, WqType::Sq).unwrap_err().field(),
                Some("last_vbytes"),
                "{lv}"
            );
        }
        // Fewer than 2 SGEs.
        put(&mut ring, lso.with_num_sge(1));
        assert_eq!(
            read_wqe(&ring, 0, WqType::Sq).unwrap_err().field(),
            Some("num_sge")
        );
    }

    #[test]
    fn write_wqe_rejections() {
        let mut ring = [0u8; 96];
        assert!(write_wqe(&mut ring, 0, WqType::Sq, &[], &[], 0).is_err());
        let mut ring = [0u8; 32];
        assert!(write_wqe(&mut ring, 0, WqType::Sq, &[0; 24], &[], 0).is_err());
        assert!(write_wqe(&mut ring, 0, WqType::Rq, &[0; 1], &[], 0).is_err());
        let mut ring = [0u8; 1024];
        assert!(write_wqe(&mut ring, 0, WqType::Sq, &[], &[Sge::default(); 31], 0).is_err());
        assert!(write_wqe(&mut ring, 0, WqType::Sq, &[], &[Sge::default(); 30], 0x4000).is_err());
    }
}

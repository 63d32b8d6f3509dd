//! MANA TX inline OOBs: the 8-byte short OOB and the 16-byte long OOB that
//! follows it (kernel `mana_tx_short_oob` / `mana_tx_long_oob`; DPDK
//! `transmit_short_oob_v2` / `transmit_long_oob_v2`).

use zerocopy::{FromBytes, IntoBytes};

use crate::error::{check_bits, mbz};
use crate::le::{U128, U64};
use crate::{
    assert_size, vsq_frame, wire_type, DecodeError, EncodeError, WireType, INLINE_OOB_LARGE_SIZE,
    INLINE_OOB_SMALL_SIZE,
};

/// `pkt_fmt` of the short OOB (`enum mana_tx_pkt_format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum PacketFormat {
    /// Only the 8-byte short OOB is present.
    Short = 0,
    /// The 16-byte long OOB follows (24-byte inline OOB).
    Long = 1,
}

impl TryFrom<u8> for PacketFormat {
    type Error = DecodeError;
    fn try_from(v: u8) -> Result<Self, DecodeError> {
        match v {
            0 => Ok(Self::Short),
            1 => Ok(Self::Long),
            _ => Err(DecodeError::InvalidField {
                what: TxShortOob::NAME,
                field: "pkt_fmt",
                value: v as u64,
                expected: "0 (short) or 1 (long)",
            }),
        }
    }
}

wire_type! {
    /// The 8-byte short TX OOB.
    pub struct TxShortOob: u64 as U64 {
        /// [`PacketFormat`] (dw0 bits 0-1; DPDK `packet_format`).
        #[bits(2)]
        pub pkt_fmt: u8,
        /// Outer header is IPv4 (bit 2; DPDK `tx_is_outer_ipv4`).
        pub is_outer_ipv4: bool,
        /// Outer header is IPv6 (bit 3).
        pub is_outer_ipv6: bool,
        /// Compute the IPv4 header checksum (bit 4; DPDK `tx_compute_IP_header_checksum`).
        pub comp_iphdr_csum: bool,
        /// Compute the TCP checksum (bit 5).
        pub comp_tcp_csum: bool,
        /// Compute the UDP checksum (bit 6).
        pub comp_udp_csum: bool,
        /// No CQE for this WQE; the next CQE covers it (bit 7; kernel spells it
        /// `supress_txcqe_gen`, DPDK `suppress_tx_CQE_generation`).
        pub suppress_txcqe_gen: bool,
        /// The send queue's CQ id (bits 8-31; DPDK `VCQ_number`).
        #[bits(24)]
        pub vcq_num: u32,
        /// Transport header offset, `l2_len + l3_len` (dw1 bits 0-9; DPDK
        /// `tx_transport_header_offset`).
        #[bits(10)]
        pub trans_off: u16,
        /// `(sq_id >> 10) & 0x3fff` (bits 10-23; DPDK `VSQ_frame_num`).
        #[bits(14)]
        pub vsq_frame: u16,
        /// vPort offset (bits 24-31; DPDK `short_vport_offset`).
        #[bits(8)]
        pub short_vp_offset: u8,
    }
}
assert_size!(TxShortOob, INLINE_OOB_SMALL_SIZE);

impl TxShortOob {
    /// The per-queue part of every TX OOB: short format, `vcq_num = cq_id`,
    /// `vsq_frame = vsq_frame(sq_id)`, `short_vp_offset = vp_offset`.
    /// Fails if `cq_id` exceeds 24 bits or `vp_offset` 8 bits (use the long
    /// format's `long_vp_offset` for larger offsets).
    pub fn for_queue(cq_id: u32, sq_id: u32, vp_offset: u32) -> Result<Self, EncodeError> {
        let cq = check_bits(Self::NAME, "vcq_num", cq_id as u64, 24)? as u32;
        let vp = check_bits(Self::NAME, "short_vp_offset", vp_offset as u64, 8)? as u8;
        Ok(Self::new()
            .with_vcq_num(cq)
            .with_vsq_frame(vsq_frame(sq_id))
            .with_short_vp_offset(vp))
    }

    /// The packet format, if known.
    #[inline]
    pub fn packet_format(&self) -> Result<PacketFormat, DecodeError> {
        PacketFormat::try_from(self.pkt_fmt())
    }

    /// Sets the packet format.
    #[inline]
    pub const fn with_packet_format(self, f: PacketFormat) -> Self {
        self.with_pkt_fmt(f as u8)
    }
}

impl WireType for TxShortOob {
    const NAME: &'static str = "mana_tx_short_oob";
    fn validate(&self) -> Result<(), DecodeError> {
        PacketFormat::try_from(self.pkt_fmt()).map(|_| ())
    }
}

wire_type! {
    /// The 16-byte long TX OOB (follows the short OOB when `pkt_fmt` is long).
    pub struct TxLongOob: u128 as U128 {
        /// Encapsulated packet (dw0 bit 0; DPDK `tx_is_encapsulated_packet`).
        pub is_encap: bool,
        /// Inner header is IPv6 (bit 1).
        pub inner_is_ipv6: bool,
        /// Inner TCP options present (bit 2).
        pub inner_tcp_opt: bool,
        /// Insert an 802.1Q tag built from pcp/dei/vlan_id (bit 3; DPDK
        /// `inject_vlan_prior_tag`).
        pub inject_vlan_pri_tag: bool,
        /// Must be zero (bits 4-15).
        #[bits(12)]
        pub reserved1: u16,
        /// 802.1Q priority code point (bits 16-18).
        #[bits(3)]
        pub pcp: u8,
        /// 802.1Q drop eligible indicator (bit 19).
        pub dei: bool,
        /// 802.1Q VLAN id (bits 20-31).
        #[bits(12)]
        pub vlan_id: u16,
        /// Inner frame offset (dw1 bits 0-9).
        #[bits(10)]
        pub inner_frame_offset: u16,
        /// Inner IP header offset relative to the inner frame (bits 10-15).
        #[bits(6)]
        pub inner_ip_rel_offset: u8,
        /// vPort offset when it exceeds 255 (bits 16-27; DPDK `long_vport_offset`).
        #[bits(12)]
        pub long_vp_offset: u16,
        /// Must be zero (bits 28-31; DPDK `reserved3`).
        #[bits(4)]
        pub reserved2: u8,
        /// Must be zero (dw2; DPDK `reserved4`).
        #[bits(32)]
        pub reserved3: u32,
        /// Must be zero (dw3; DPDK `reserved5`).
        #[bits(32)]
        pub reserved4: u32,
    }
}

impl TxLongOob {
    /// Requests VLAN insertion of an 802.1Q TCI (`pcp = tci >> 13`,
    /// `dei = bit 12`, `vlan_id = tci & 0xfff`).
    #[inline]
    pub const fn with_vlan_tci(self, tci: u16) -> Self {
        self.with_inject_vlan_pri_tag(true)
            .with_pcp((tci >> 13) as u8)
            .with_dei(tci & 0x1000 != 0)
            .with_vlan_id(tci & 0xfff)
    }

    /// The 802.1Q TCI built from pcp/dei/vlan_id.
    #[inline]
    pub const fn vlan_tci(&self) -> u16 {
        ((self.pcp() as u16) << 13) | ((self.dei() as u16) << 12) | self.vlan_id()
    }
}

impl WireType for TxLongOob {
    const NAME: &'static str = "mana_tx_long_oob";
    fn validate(&self) -> Result<(), DecodeError> {
        mbz(Self::NAME, "reserved1", self.reserved1() as u64)?;
        mbz(Self::NAME, "reserved2", self.reserved2() as u64)?;
        mbz(Self::NAME, "reserved3", self.reserved3() as u64)?;
        mbz(Self::NAME, "reserved4", self.reserved4() as u64)
    }
}

wire_type! {
    /// The full 24-byte TX OOB (`struct mana_tx_oob`).
    #[derive(Debug, Default)]
    pub struct TxOob: INLINE_OOB_LARGE_SIZE bytes {
        /// Short part.
        pub s_oob: TxShortOob,
        /// Long part.
        pub l_oob: TxLongOob,
    }
}

impl WireType for TxOob {
    const NAME: &'static str = "mana_tx_oob";
    /// Checks both halves; the format/size pairing is checked by
    /// [`TxInlineOob::decode`].
    fn validate(&self) -> Result<(), DecodeError> {
        self.s_oob.validate()?;
        self.l_oob.validate()
    }
}

/// A TX inline OOB as found in an SQ WQE: short (8-byte slot) or long
/// (24-byte slot).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxInlineOob {
    /// Short format in an 8-byte slot (or in a 24-byte slot whose last 16
    /// bytes are zero).
    Short(TxShortOob),
    /// Long format in a 24-byte slot.
    Long(TxOob),
}

impl TxInlineOob {
    /// Decodes the inline OOB slot of an SQ WQE (see
    /// [`WqeView::inline_oob`](crate::WqeView::inline_oob)).
    ///
    /// `slot` must be 8 or 24 bytes. A long format needs the 24-byte slot;
    /// a short format in a 24-byte slot requires the remaining 16 bytes to
    /// be zero padding (field `l_oob`). Reserved fields must be zero.
    pub fn decode(slot: &[u8]) -> Result<Self, DecodeError> {
        if slot.len() != INLINE_OOB_SMALL_SIZE && slot.len() != INLINE_OOB_LARGE_SIZE {
            return Err(DecodeError::InvalidField {
                what: TxOob::NAME,
                field: "inline_oob_size",
                value: slot.len() as u64,
                expected: "8 or 24 bytes",
            });
        }
        let s = TxShortOob::decode(slot)?;
        match s.packet_format()? {
            PacketFormat::Long => {
                if slot.len() != INLINE_OOB_LARGE_SIZE {
                    return Err(DecodeError::InvalidField {
                        what: TxShortOob::NAME,
                        field: "pkt_fmt",
                        value: PacketFormat::Long as u64,
                        expected: "short format in an 8-byte OOB slot",
                    });
                }
                Ok(Self::Long(TxOob::decode(slot)?))
            }
            PacketFormat::Short => {
                if let Some(pad) = slot.get(INLINE_OOB_SMALL_SIZE..) {
                    if let Ok(l) = TxLongOob::read_from_bytes(pad) {
                        mbz(TxOob::NAME, "l_oob", (l.into_bits().get() != 0) as u64)?;
                    }
                }
                Ok(Self::Short(s))
            }
        }
    }

    /// The short part.
    pub const fn short(&self) -> &TxShortOob {
        match self {
            Self::Short(s) => s,
            Self::Long(o) => &o.s_oob,
        }
    }

    /// The long part, if the format is long.
    pub const fn long(&self) -> Option<&TxLongOob> {
        match self {
            Self::Short(_) => None,
            Self::Long(o) => Some(&o.l_oob),
        }
    }

    /// The bytes to place in the WQE (8 or 24).
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Self::Short(s) => s.as_bytes(),
            Self::Long(o) => o.as_bytes(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_short() -> TxShortOob {
        TxShortOob::new()
            .with_pkt_fmt(1)
            .with_is_outer_ipv4(true)
            .with_is_outer_ipv6(true)
            .with_comp_iphdr_csum(true)
            .with_comp_tcp_csum(true)
            .with_comp_udp_csum(true)
            .with_suppress_txcqe_gen(true)
            .with_vcq_num(0xabcdef)
            .with_trans_off(0x3ff)
            .with_vsq_frame(0x2345)
            .with_short_vp_offset(0x9a)
    }

    #[test]
    fn golden_short_all_fields() {
        let o = all_short();
        // dw0 = 0xabcdef << 8 | 0xfd ; dw1 = 0x9a << 24 | 0x2345 << 10 | 0x3ff
        assert_eq!(
            o.as_bytes(),
            &[0xfd, 0xef, 0xcd, 0xab, 0xff, 0x17, 0x8d, 0x9a]
        );
        assert_eq!(TxShortOob::decode(o.as_bytes()).unwrap(), o);
    }

    #[test]
    fn golden_short_single_fields() {
        let b = |o: TxShortOob| u64::from_le_bytes(o.as_bytes().try_into().unwrap());
        let z = TxShortOob::new();
        assert_eq!(b(z.with_pkt_fmt(1)), 1);
        assert_eq!(b(z.with_is_outer_ipv4(true)), 1 << 2);
        assert_eq!(b(z.with_is_outer_ipv6(true)), 1 << 3);
        assert_eq!(b(z.with_comp_iphdr_csum(true)), 1 << 4);
        assert_eq!(b(z.with_comp_tcp_csum(true)), 1 << 5);
        assert_eq!(b(z.with_comp_udp_csum(true)), 1 << 6);
        assert_eq!(b(z.with_suppress_txcqe_gen(true)), 1 << 7);
        assert_eq!(b(z.with_vcq_num(1)), 1 << 8);
        assert_eq!(b(z.with_trans_off(1)), 1 << 32);
        assert_eq!(b(z.with_vsq_frame(1)), 1 << 42);
        assert_eq!(b(z.with_short_vp_offset(1)), 1 << 56);
    }

    #[test]
    fn for_queue() {
        let o = TxShortOob::for_queue(0x12, 0x1_2c00, 7).unwrap();
        assert_eq!(
            (o.vcq_num(), o.vsq_frame(), o.short_vp_offset()),
            (0x12, 0x4b, 7)
        );
        assert_eq!(o.packet_format().unwrap(), PacketFormat::Short);
        assert!(TxShortOob::for_queue(0x100_0000, 0, 0).is_err());
        assert!(TxShortOob::for_queue(0, 0, 256).is_err());
    }

    #[test]
    fn short_unknown_format_rejected() {
        for f in [2u8, 3] {
            let o = TxShortOob::new().with_pkt_fmt(f);
            assert_eq!(
                TxShortOob::decode(o.as_bytes()).unwrap_err().field(),
                Some("pkt_fmt")
            );
        }
    }

    #[test]
    fn golden_long_all_fields() {
        let l = TxLongOob::new()
            .with_is_encap(true)
            .with_inner_is_ipv6(true)
            .with_inner_tcp_opt(true)
            .with_inject_vlan_pri_tag(true)
            .with_pcp(5)
            .with_dei(true)
            .with_vlan_id(0xabc)
            .with_inner_frame_offset(0x2aa)
            .with_inner_ip_rel_offset(0x15)
            .with_long_vp_offset(0x987);
        // dw0 = 0xabc << 20 | 1 << 19 | 5 << 16 | 0xf = 0xabcd000f
        // dw1 = 0x987 << 16 | 0x15 << 10 | 0x2aa = 0x098756aa
        assert_eq!(
            l.as_bytes(),
            &[0x0f, 0x00, 0xcd, 0xab, 0xaa, 0x56, 0x87, 0x09, 0, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(l.vlan_tci(), 0xbabc);
        assert_eq!(TxLongOob::new().with_vlan_tci(0xbabc).vlan_tci(), 0xbabc);
        assert_eq!(TxLongOob::decode(l.as_bytes()).unwrap(), l);
    }

    #[test]
    fn golden_full_oob() {
        let o = TxOob {
            s_oob: all_short(),
            l_oob: TxLongOob::new()
                .with_is_encap(true)
                .with_inject_vlan_pri_tag(true)
                .with_vlan_tci(0x2001)
                .with_inner_frame_offset(14)
                .with_inner_ip_rel_offset(4)
                .with_long_vp_offset(0x100),
        };
        assert_eq!(
            o.as_bytes(),
            &[
                0xfd, 0xef, 0xcd, 0xab, 0xff, 0x17, 0x8d, 0x9a, // short
                0x09, 0x00, 0x11, 0x00, 0x0e, 0x10, 0x00, 0x01, // long dw0, dw1
                0, 0, 0, 0, 0, 0, 0, 0, // reserved3, reserved4
            ]
        );
        assert_eq!(TxOob::decode(o.as_bytes()).unwrap(), o);
        assert_eq!(
            TxInlineOob::decode(o.as_bytes()).unwrap(),
            TxInlineOob::Long(o)
        );
    }

    #[test]
    fn long_reserved_rejected() {
        let z = TxLongOob::new();
        for (o, f) in [
            (z.with_reserved1(1), "reserved1"),
            (z.with_reserved1(0x800), "reserved1"),
            (z.with_reserved2(1), "reserved2"),
            (z.with_reserved2(8), "reserved2"),
            (z.with_reserved3(1), "reserved3"),
            (z.with_reserved3(0x8000_0000), "reserved3"),
            (z.with_reserved4(1), "reserved4"),
            (z.with_reserved4(0x8000_0000), "reserved4"),
        ] {
            let e = TxLongOob::decode(o.as_bytes()).unwrap_err();
            assert_eq!(e.field(), Some(f));
            assert!(e.to_string().contains(f), "{e}");
        }
    }

    #[test]
    fn inline_oob_decode() {
        let s = TxShortOob::for_queue(3, 0, 1).unwrap();
        assert_eq!(
            TxInlineOob::decode(s.as_bytes()).unwrap(),
            TxInlineOob::Short(s)
        );
        // Short format padded to 24 bytes.
        let mut slot = [0u8; 24];
        slot[..8].copy_from_slice(s.as_bytes());
        assert_eq!(TxInlineOob::decode(&slot).unwrap(), TxInlineOob::Short(s));
        slot[20] = 1;
        assert_eq!(
            TxInlineOob::decode(&slot).unwrap_err().field(),
            Some("l_oob")
        );
        // Long format.
        let full = TxOob {
            s_oob: s.with_packet_format(PacketFormat::Long),
            l_oob: TxLongOob::new().with_vlan_tci(100),
        };
        let d = TxInlineOob::decode(full.as_bytes()).unwrap();
        assert_eq!(d, TxInlineOob::Long(full));
        assert_eq!(d.long().unwrap().vlan_id(), 100);
        assert_eq!(d.as_bytes(), full.as_bytes());
        // Long format in an 8-byte slot.
        assert_eq!(
            TxInlineOob::decode(&full.as_bytes()[..8])
                .unwrap_err()
                .field(),
            Some("pkt_fmt")
        );
        // Bad slot sizes.
        assert!(TxInlineOob::decode(&[0; 16]).is_err());
        assert!(TxInlineOob::decode(&[0; 4]).is_err());
    }
}

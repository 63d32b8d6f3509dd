//! What a receive completion's flags dword says about its packets, as the
//! mbuf's `ol_flags` and `packet_type`: two table lookups instead of a test
//! per flag bit. The tables are built at compile time from the field
//! positions of the typed `gdma::RxCompFlags`; the tests compare them with
//! the rules written out bit by bit (`tests::reference`) for every
//! combination of the bits they read.

#![forbid(unsafe_code)]

use crate::ffi;
use gdma::{ndis_hash, RxCompFlags as F};

const fn raw(f: F) -> u32 {
    f.to_raw()
}

/// Single bits of the flags dword, from the typed definition.
const VLAN: u32 = raw(F::new().with_rx_vlantag_present(true));
const OUTER_IP_FAIL: u32 = raw(F::new().with_rx_outer_iphdr_csum_fail(true));
const IP_OK: u32 = raw(F::new().with_rx_iphdr_csum_succeed(true));
const IP_FAIL: u32 = raw(F::new().with_rx_iphdr_csum_fail(true));
const TCP_OK: u32 = raw(F::new().with_rx_tcp_csum_succeed(true));
const TCP_FAIL: u32 = raw(F::new().with_rx_tcp_csum_fail(true));
const UDP_OK: u32 = raw(F::new().with_rx_udp_csum_succeed(true));
const UDP_FAIL: u32 = raw(F::new().with_rx_udp_csum_fail(true));
/// The VLAN id field (its mask at bit 0: the table code takes it as is).
const VLAN_ID: u32 = raw(F::new().with_rx_vlan_id(0xfff));

/// The six checksum verdict bits are adjacent (IP, TCP, UDP, each OK then
/// FAIL); they index `CSUM` from `CSUM_SHIFT`.
const CSUM_SHIFT: u32 = IP_OK.trailing_zeros();
const CSUM_BITS: u32 = 6;
/// The 9-bit NDIS hash type indexes `HASH` from `HASH_SHIFT`.
const HASH_SHIFT: u32 = raw(F::new().with_rx_hashtype(1)).trailing_zeros();
const HASH_BITS: u32 = 9;

// What the flags reveal about the packet ("evidence"), combined over the
// two lookups and resolved into a packet type by `META`. The IP version
// comes from the hash type only: the IP-header verdict bits do not say
// which version they judged (the Linux driver requires
// `rx_iphdr_csum_succeed` before it trusts any L4 verdict, IPv6 included).
const EV_V4: u8 = 1;
const EV_V6: u8 = 2;
const EV_TCP: u8 = 4;
const EV_UDP: u8 = 8;
/// A hash type is present: the RSS hash is delivered.
const EV_HASHED: u8 = 16;
/// The device gave an IP-header verdict (good or bad).
const EV_IP_VERDICT: u8 = 32;
const EV_ALL: u8 = 63;

/// By checksum bits: the checksum `ol_flags` and the evidence they give.
static CSUM: [(u64, u8); 1 << CSUM_BITS] = build_csum();
/// By hash type: the evidence it gives.
static HASH: [u8; 1 << HASH_BITS] = build_hash();
/// By combined evidence: the `ol_flags` it adds and the packet type.
static META: [(u64, u32); EV_ALL as usize + 1] = build_meta();

const fn bit(v: u32, b: u32) -> bool {
    v & b != 0
}

const fn build_csum() -> [(u64, u8); 1 << CSUM_BITS] {
    let mut t = [(0u64, 0u8); 1 << CSUM_BITS];
    let mut i = 0;
    while i < t.len() {
        let f = (i as u32) << CSUM_SHIFT;
        let mut ol = 0u64;
        if bit(f, IP_OK) {
            ol |= ffi::RTE_MBUF_F_RX_IP_CKSUM_GOOD as u64;
        } else if bit(f, IP_FAIL) {
            ol |= ffi::RTE_MBUF_F_RX_IP_CKSUM_BAD as u64;
        }
        if bit(f, TCP_OK) || bit(f, UDP_OK) {
            ol |= ffi::RTE_MBUF_F_RX_L4_CKSUM_GOOD as u64;
        } else if bit(f, TCP_FAIL) || bit(f, UDP_FAIL) {
            ol |= ffi::RTE_MBUF_F_RX_L4_CKSUM_BAD as u64;
        }
        let mut ev = 0;
        if bit(f, IP_OK | IP_FAIL) {
            ev |= EV_IP_VERDICT;
        }
        if bit(f, TCP_OK | TCP_FAIL) {
            ev |= EV_TCP;
        }
        if bit(f, UDP_OK | UDP_FAIL) {
            ev |= EV_UDP;
        }
        t[i] = (ol, ev);
        i += 1;
    }
    t
}

const fn build_hash() -> [u8; 1 << HASH_BITS] {
    use ndis_hash::*;
    let mut t = [0u8; 1 << HASH_BITS];
    let mut h = 0;
    while h < t.len() {
        let x = h as u16;
        let mut ev = 0;
        if x != 0 {
            ev |= EV_HASHED;
        }
        if x & (IPV4 | TCP_IPV4 | UDP_IPV4) != 0 {
            ev |= EV_V4;
        }
        if x & (IPV6 | TCP_IPV6 | UDP_IPV6 | IPV6_EX | TCP_IPV6_EX | UDP_IPV6_EX) != 0 {
            ev |= EV_V6;
        }
        if x & (TCP_IPV4 | TCP_IPV6 | TCP_IPV6_EX) != 0 {
            ev |= EV_TCP;
        }
        if x & (UDP_IPV4 | UDP_IPV6 | UDP_IPV6_EX) != 0 {
            ev |= EV_UDP;
        }
        t[h] = ev;
        h += 1;
    }
    t
}

const fn build_meta() -> [(u64, u32); EV_ALL as usize + 1] {
    let mut t = [(0u64, 0u32); EV_ALL as usize + 1];
    let mut ev = 0;
    while ev < t.len() {
        let e = ev as u8;
        let mut pt = ffi::RTE_PTYPE_L2_ETHER;
        // IPv4 evidence wins over IPv6, TCP over UDP.
        if e & EV_V4 != 0 {
            pt |= ffi::RTE_PTYPE_L3_IPV4_EXT_UNKNOWN;
        } else if e & EV_V6 != 0 {
            pt |= ffi::RTE_PTYPE_L3_IPV6_EXT_UNKNOWN;
        }
        if e & EV_TCP != 0 {
            pt |= ffi::RTE_PTYPE_L4_TCP;
        } else if e & EV_UDP != 0 {
            pt |= ffi::RTE_PTYPE_L4_UDP;
        }
        let mut ol = if e & EV_HASHED != 0 {
            ffi::RTE_MBUF_F_RX_RSS_HASH as u64
        } else {
            0
        };
        if e & EV_V4 == 0 && e & (EV_V6 | EV_IP_VERDICT) == EV_V6 {
            ol |= IPV6_HEADER_OK;
        }
        t[ev] = (ol, pt);
        ev += 1;
    }
    t
}

// The three tables above, folded into one at compile time: the hash type
// and the checksum verdicts are adjacent (bits 16 to 30), so one lookup of
// a 16-bit entry gives the `ol_flags` and the packet type they imply
// (64 KiB, of which a receive path touches the few lines of the types it
// sees). An entry holds the `ol_flags` in its low `OL_BITS` bits and the
// L3 and L4 packet type bits (`PT_MASK`, shifted down by `PT_SHIFT`) above.
const IDX_SHIFT: u32 = HASH_SHIFT;
const IDX_BITS: u32 = HASH_BITS + CSUM_BITS;
const _: () = assert!(
    HASH_SHIFT + HASH_BITS == CSUM_SHIFT,
    "hash type, then verdicts"
);
const OL_BITS: u32 = 9;
const PT_SHIFT: u32 = 4;
const PT_MASK: u32 = (ffi::RTE_PTYPE_L3_MASK | ffi::RTE_PTYPE_L4_MASK) & 0x3f0;
/// The entry's bits that hold an L3 type.
const ENTRY_L3: u16 = ((ffi::RTE_PTYPE_L3_MASK & PT_MASK) >> PT_SHIFT << OL_BITS) as u16;

/// One entry more than the index reaches: the vector path looks entries
/// up with 32-bit gathers, and the last one's read takes two bytes after it.
static FOLDED: [u16; (1 << IDX_BITS) + 1] = build_folded();

const fn build_folded() -> [u16; (1 << IDX_BITS) + 1] {
    let mut t = [0u16; (1 << IDX_BITS) + 1];
    let mut i = 0;
    while i < 1 << IDX_BITS {
        let hash = i & ((1 << HASH_BITS) - 1);
        let csum = i >> HASH_BITS;
        let (csum_ol, csum_ev) = CSUM[csum];
        let (meta_ol, ptype) = META[((csum_ev | HASH[hash]) & EV_ALL) as usize];
        let ol = csum_ol | meta_ol;
        let pt = ptype & !ffi::RTE_PTYPE_L2_ETHER;
        // Every flag and type bit the tables give must fit its field.
        assert!(ol < 1 << OL_BITS && pt & !PT_MASK == 0);
        assert!(ptype & ffi::RTE_PTYPE_L2_MASK == ffi::RTE_PTYPE_L2_ETHER);
        t[i] = (ol as u16) | ((pt >> PT_SHIFT) << OL_BITS) as u16;
        i += 1;
    }
    t
}

/// What the vector receive path (`rxq::avx2`) needs to look four packets'
/// flags up at once in the folded table: the index is `(raw >> SHIFT) &
/// MASK`; an entry holds the `ol_flags` in its low `OL_BITS` bits and the
/// L3/L4 packet type, shifted down by `PT_SHIFT`, above them.
///
/// A packet whose hash type is 0 (`HASH_TYPE` bits of the index clear) has
/// no L3 type from its flags; its frame's EtherType gives it. The entry of
/// the same index with `IDX_IPV4` (or `IDX_IPV6`) set is then the scalar
/// path's result for an IPv4 (IPv6) frame plus `RSS_HASH`
/// (`tests::a_hash_type_bit_stands_for_the_ethertype`).
pub mod folded {
    use super::*;
    pub const SHIFT: u32 = IDX_SHIFT;
    pub const MASK: u32 = (1 << IDX_BITS) - 1;
    pub const HASH_TYPE: u32 = (1 << HASH_BITS) - 1;
    pub const IDX_IPV4: u32 = ndis_hash::IPV4 as u32;
    pub const IDX_IPV6: u32 = ndis_hash::IPV6 as u32;
    pub const OL_BITS: u32 = super::OL_BITS;
    pub const PT_SHIFT: u32 = super::PT_SHIFT;
    pub const L2_ETHER: u32 = ffi::RTE_PTYPE_L2_ETHER;
    pub const RSS_HASH: u32 = ffi::RTE_MBUF_F_RX_RSS_HASH;
    /// Flag bits that make a packet's metadata more than the entry gives
    /// (a stripped VLAN tag, a bad outer IP checksum): left to the scalar
    /// path.
    pub const TAG_BITS: u32 = VLAN | OUTER_IP_FAIL;
    /// The table, with one entry of padding at the end.
    pub fn table() -> &'static [u16; (1 << IDX_BITS) + 1] {
        &FOLDED
    }
}

/// The folded entry of flags `raw`.
#[inline(always)]
fn entry(raw: u32) -> u16 {
    FOLDED[((raw >> IDX_SHIFT) & ((1 << IDX_BITS) - 1)) as usize]
}

/// An entry's `ol_flags` and packet type.
#[inline(always)]
fn unfold(e: u16) -> (u64, u32) {
    let e = u32::from(e);
    (
        u64::from(e & ((1 << OL_BITS) - 1)),
        ((e >> OL_BITS) << PT_SHIFT) | ffi::RTE_PTYPE_L2_ETHER,
    )
}

/// The `ol_flags` (VLAN flags included: the device stripped the tag), the
/// packet type and the VLAN TCI (0 without a tag) of a packet whose
/// completion carries flags `raw` (the receive path uses [`packet_meta`]).
#[cfg(test)]
fn meta(raw: u32) -> (u64, u32, u16) {
    let (ol, ptype) = unfold(entry(raw));
    with_tag(raw, ol, ptype)
}

/// Adds the VLAN and outer-checksum flags of `raw` to `ol`.
#[inline(always)]
fn with_tag(raw: u32, ol: u64, ptype: u32) -> (u64, u32, u16) {
    if raw & (VLAN | OUTER_IP_FAIL) == 0 {
        return (ol, ptype, 0);
    }
    let (tag_ol, tci) = tagged(raw);
    (ol | tag_ol, ptype, tci)
}

/// The VLAN and outer-checksum part of `meta`, off the common path.
#[inline(always)]
fn tagged(raw: u32) -> (u64, u16) {
    let mut ol = 0;
    if raw & OUTER_IP_FAIL != 0 {
        ol |= ffi::RTE_MBUF_F_RX_OUTER_IP_CKSUM_BAD as u64;
    }
    if raw & VLAN == 0 {
        return (ol, 0);
    }
    ol |= (ffi::RTE_MBUF_F_RX_VLAN | ffi::RTE_MBUF_F_RX_VLAN_STRIPPED) as u64;
    (ol, (raw & VLAN_ID) as u16)
}

/// Whether the device stripped a VLAN tag.
#[inline(always)]
pub fn vlan_stripped(raw: u32) -> bool {
    raw & VLAN != 0
}

/// IPv6 has no header checksum: a header the device did not call bad is
/// reported good, as mlx5, i40e and ice do (what DTS's checksum suite
/// expects).
const IPV6_HEADER_OK: u64 = ffi::RTE_MBUF_F_RX_IP_CKSUM_GOOD as u64;

/// How far into a frame [`packet_meta`] reads: the Ethernet header, two
/// VLAN tags the device left in place, and the EtherType after them.
pub const FRAME_HEAD: usize = 22;

/// What the receive path fills in: [`meta`], with the L3 type from the
/// frame's EtherType when the flags do not give it (no RSS, or a hash type
/// that does not cover the packet). `be16(at)` reads the big-endian 16 bits
/// at byte `at` of the frame, `at + 2 <= FRAME_HEAD`; `len` is the frame's
/// length. The untagged IPv4 or IPv6 frame is the common case; tags and
/// other EtherTypes go out of line.
#[inline(always)]
pub fn packet_meta(raw: u32, len: u16, be16: impl Fn(usize) -> u16) -> (u64, u32, u16) {
    let e = entry(raw);
    let (ol, ptype) = unfold(e);
    if e & ENTRY_L3 != 0 || len < 14 {
        return with_tag(raw, ol, ptype);
    }
    let (ol, ptype) = match be16(12) {
        ETH_P_IP => (ol, ptype | ffi::RTE_PTYPE_L3_IPV4_EXT_UNKNOWN),
        ETH_P_IPV6 => ipv6(ol, ptype),
        et => behind_tags(ol, ptype, et, len, be16),
    };
    with_tag(raw, ol, ptype)
}

#[inline(always)]
fn ipv6(ol: u64, ptype: u32) -> (u64, u32) {
    let ol = if ol & IP_CKSUM_MASK == 0 {
        ol | IPV6_HEADER_OK
    } else {
        ol
    };
    (ol, ptype | ffi::RTE_PTYPE_L3_IPV6_EXT_UNKNOWN)
}

/// [`packet_meta`] for a frame whose first EtherType `et` is not IP: up to
/// two VLAN tags are skipped.
#[cold]
#[inline(never)]
fn behind_tags(
    ol: u64,
    ptype: u32,
    mut et: u16,
    len: u16,
    be16: impl Fn(usize) -> u16,
) -> (u64, u32) {
    let mut at = 12;
    while (et == ETH_P_8021Q || et == ETH_P_8021AD) && at + 4 + 2 <= FRAME_HEAD {
        at += 4;
        et = be16(at);
    }
    if usize::from(len) < at + 2 {
        return (ol, ptype);
    }
    match et {
        ETH_P_IP => (ol, ptype | ffi::RTE_PTYPE_L3_IPV4_EXT_UNKNOWN),
        ETH_P_IPV6 => ipv6(ol, ptype),
        _ => (ol, ptype),
    }
}

const ETH_P_IP: u16 = 0x0800;
const ETH_P_IPV6: u16 = 0x86dd;
const ETH_P_8021Q: u16 = 0x8100;
const ETH_P_8021AD: u16 = 0x88a8;
/// Both IP checksum flag bits (GOOD | BAD is DPDK's `..._NONE`).
const IP_CKSUM_MASK: u64 =
    (ffi::RTE_MBUF_F_RX_IP_CKSUM_GOOD | ffi::RTE_MBUF_F_RX_IP_CKSUM_BAD) as u64;

/// The packet types `meta` can report, for `dev_supported_ptypes_get`.
pub static PTYPES: [u32; 7] = [
    ffi::RTE_PTYPE_L2_ETHER,
    ffi::RTE_PTYPE_L3_IPV4_EXT_UNKNOWN,
    ffi::RTE_PTYPE_L3_IPV6_EXT_UNKNOWN,
    ffi::RTE_PTYPE_L4_TCP,
    ffi::RTE_PTYPE_L4_UDP,
    ffi::RTE_PTYPE_UNKNOWN,
    ffi::RTE_PTYPE_UNKNOWN,
];

#[cfg(test)]
mod tests {
    use super::*;

    /// The rules, flag by flag, through the typed accessors: what the
    /// tables must reproduce.
    fn reference(f: F) -> (u64, u32, u16) {
        let mut ol = 0u64;
        if f.rx_iphdr_csum_succeed() {
            ol |= ffi::RTE_MBUF_F_RX_IP_CKSUM_GOOD as u64;
        } else if f.rx_iphdr_csum_fail() {
            ol |= ffi::RTE_MBUF_F_RX_IP_CKSUM_BAD as u64;
        }
        if f.rx_outer_iphdr_csum_fail() {
            ol |= ffi::RTE_MBUF_F_RX_OUTER_IP_CKSUM_BAD as u64;
        }
        if f.rx_tcp_csum_succeed() || f.rx_udp_csum_succeed() {
            ol |= ffi::RTE_MBUF_F_RX_L4_CKSUM_GOOD as u64;
        } else if f.rx_tcp_csum_fail() || f.rx_udp_csum_fail() {
            ol |= ffi::RTE_MBUF_F_RX_L4_CKSUM_BAD as u64;
        }
        let h = f.rx_hashtype();
        if h != 0 {
            ol |= ffi::RTE_MBUF_F_RX_RSS_HASH as u64;
        }
        let vlan = f.rx_vlantag_present();
        if vlan {
            ol |= (ffi::RTE_MBUF_F_RX_VLAN | ffi::RTE_MBUF_F_RX_VLAN_STRIPPED) as u64;
        }
        let mut t = ffi::RTE_PTYPE_L2_ETHER;
        let v4 = h & (ndis_hash::IPV4 | ndis_hash::TCP_IPV4 | ndis_hash::UDP_IPV4) != 0;
        let v6 = h
            & (ndis_hash::IPV6
                | ndis_hash::TCP_IPV6
                | ndis_hash::UDP_IPV6
                | ndis_hash::IPV6_EX
                | ndis_hash::TCP_IPV6_EX
                | ndis_hash::UDP_IPV6_EX)
            != 0;
        if v4 {
            t |= ffi::RTE_PTYPE_L3_IPV4_EXT_UNKNOWN;
        } else if v6 {
            t |= ffi::RTE_PTYPE_L3_IPV6_EXT_UNKNOWN;
            if !f.rx_iphdr_csum_succeed() && !f.rx_iphdr_csum_fail() {
                ol |= ffi::RTE_MBUF_F_RX_IP_CKSUM_GOOD as u64;
            }
        }
        let tcp = f.rx_tcp_csum_succeed()
            || f.rx_tcp_csum_fail()
            || h & (ndis_hash::TCP_IPV4 | ndis_hash::TCP_IPV6 | ndis_hash::TCP_IPV6_EX) != 0;
        let udp = f.rx_udp_csum_succeed()
            || f.rx_udp_csum_fail()
            || h & (ndis_hash::UDP_IPV4 | ndis_hash::UDP_IPV6 | ndis_hash::UDP_IPV6_EX) != 0;
        if tcp {
            t |= ffi::RTE_PTYPE_L4_TCP;
        } else if udp {
            t |= ffi::RTE_PTYPE_L4_UDP;
        }
        (ol, t, if vlan { f.rx_vlan_id() } else { 0 })
    }

    /// Every combination of the bits the tables read (bits 12 to 30: VLAN
    /// present, outer IP verdicts, the reserved bit, hash type, checksum
    /// verdicts), under two VLAN ids.
    #[test]
    fn the_tables_agree_with_the_rules_for_every_flag_combination() {
        assert_eq!(CSUM_SHIFT + CSUM_BITS, 31, "checksum bits end at bit 30");
        assert_eq!(
            (IP_FAIL, TCP_OK, TCP_FAIL, UDP_OK, UDP_FAIL),
            (IP_OK << 1, IP_OK << 2, IP_OK << 3, IP_OK << 4, IP_OK << 5),
            "the six verdict bits are adjacent"
        );
        assert_eq!(HASH_SHIFT + HASH_BITS, CSUM_SHIFT);
        for hi in 0..1u32 << 19 {
            for id in [0u32, 0xabc] {
                let raw = (hi << 12) | id;
                let want = reference(F::from_raw(raw));
                assert_eq!(meta(raw), want, "flags {raw:#010x}");
                assert_eq!(vlan_stripped(raw), F::from_raw(raw).rx_vlantag_present());
            }
        }
    }

    /// What the vector path relies on (see [`folded`]): with a hash type
    /// the entry names an L3 type; without one, the entry with the IPv4
    /// (IPv6) hash bit set, less `RSS_HASH`, is what [`packet_meta`] gives
    /// an untagged IPv4 (IPv6) frame. Every index.
    #[test]
    fn a_hash_type_bit_stands_for_the_ethertype() {
        let rss = u64::from(folded::RSS_HASH);
        assert_eq!(folded::table()[1 << IDX_BITS], 0, "the padding entry");
        for i in 0..1u32 << IDX_BITS {
            let raw = i << IDX_SHIFT;
            let e = folded::table()[i as usize];
            assert_eq!(e, entry(raw));
            if i & folded::HASH_TYPE != 0 {
                assert!(e & ENTRY_L3 != 0, "flags {raw:#010x}: no L3 type");
                continue;
            }
            for (et, bit) in [(ETH_P_IP, folded::IDX_IPV4), (ETH_P_IPV6, folded::IDX_IPV6)] {
                let (ol, pt) = unfold(folded::table()[(i | bit) as usize]);
                assert!(ol & rss != 0);
                let want = packet_meta(raw, 60, |at| if at == 12 { et } else { 0 });
                assert_eq!(
                    (ol & !rss, pt, 0),
                    want,
                    "flags {raw:#010x} ethertype {et:#06x}"
                );
            }
        }
    }

    #[test]
    fn every_reported_packet_type_is_listed() {
        for (_, pt) in META.iter() {
            for layer in [
                pt & ffi::RTE_PTYPE_L2_MASK,
                pt & ffi::RTE_PTYPE_L3_MASK,
                pt & ffi::RTE_PTYPE_L4_MASK,
            ] {
                assert!(layer == 0 || PTYPES.contains(&layer), "{pt:#x}");
            }
        }
    }

    /// One packet of each kind, as the device flags it with and without
    /// RSS (hash type present or 0) and with the IP-header verdict bit set
    /// or not (whether the hardware sets it for IPv6 is not documented):
    /// the L3 type always comes from what says IPv4 or IPv6, never from
    /// the verdict bit, and an IPv6 header is reported good.
    #[test]
    fn every_packet_kind_gets_its_type_and_flags_with_and_without_rss() {
        const GOOD: u64 = ffi::RTE_MBUF_F_RX_IP_CKSUM_GOOD as u64;
        const L4_GOOD: u64 = ffi::RTE_MBUF_F_RX_L4_CKSUM_GOOD as u64;
        const RSS: u64 = ffi::RTE_MBUF_F_RX_RSS_HASH as u64;
        const V4: u32 = ffi::RTE_PTYPE_L3_IPV4_EXT_UNKNOWN;
        const V6: u32 = ffi::RTE_PTYPE_L3_IPV6_EXT_UNKNOWN;
        const TCP: u32 = ffi::RTE_PTYPE_L4_TCP;
        const UDP: u32 = ffi::RTE_PTYPE_L4_UDP;
        const ETH: u32 = ffi::RTE_PTYPE_L2_ETHER;
        // (ethertype, l4, hash type under RSS, packet type, L4 flag)
        let kinds: [(u16, &str, u16, u32, u64); 6] = [
            (
                ETH_P_IP,
                "tcp",
                ndis_hash::TCP_IPV4,
                ETH | V4 | TCP,
                L4_GOOD,
            ),
            (
                ETH_P_IP,
                "udp",
                ndis_hash::UDP_IPV4,
                ETH | V4 | UDP,
                L4_GOOD,
            ),
            (ETH_P_IP, "other", ndis_hash::IPV4, ETH | V4, 0),
            (
                ETH_P_IPV6,
                "tcp",
                ndis_hash::TCP_IPV6,
                ETH | V6 | TCP,
                L4_GOOD,
            ),
            (
                ETH_P_IPV6,
                "udp",
                ndis_hash::UDP_IPV6,
                ETH | V6 | UDP,
                L4_GOOD,
            ),
            (ETH_P_IPV6, "other", ndis_hash::IPV6, ETH | V6, 0),
        ];
        for (et, l4, hash, ptype, l4_ol) in kinds {
            for rss in [false, true] {
                for ip_bit in [false, true] {
                    let mut f = F::new()
                        .with_rx_iphdr_csum_succeed(ip_bit || et == ETH_P_IP)
                        .with_rx_tcp_csum_succeed(l4 == "tcp")
                        .with_rx_udp_csum_succeed(l4 == "udp");
                    if rss {
                        f = f.with_rx_hashtype(hash);
                    }
                    let mut head = [0u8; FRAME_HEAD];
                    head[12..14].copy_from_slice(&et.to_be_bytes());
                    let read = std::cell::Cell::new(false);
                    let (ol, pt, _) = packet_meta(f.to_raw(), 60, |at| {
                        read.set(true);
                        u16::from_be_bytes([head[at], head[at + 1]])
                    });
                    let read = read.get();
                    let what = format!("{et:#06x} {l4} rss {rss} ip bit {ip_bit}");
                    assert_eq!(pt, ptype, "{what}");
                    assert_eq!(ol, GOOD | l4_ol | if rss { RSS } else { 0 }, "{what}");
                    assert_eq!(
                        read, !rss,
                        "{what}: the frame is read only without a hash type"
                    );
                }
            }
        }
    }

    /// Behind VLAN tags the device left in the frame, in short frames and
    /// for other EtherTypes.
    #[test]
    fn the_ethertype_is_found_behind_tags_and_never_beyond_the_frame() {
        let frame = |tags: &[u16], et: u16| {
            let mut h = [0u8; FRAME_HEAD];
            let mut at = 12;
            for t in tags {
                h[at..at + 2].copy_from_slice(&t.to_be_bytes());
                at += 4;
            }
            h[at..at + 2].copy_from_slice(&et.to_be_bytes());
            h
        };
        let meta_of = |raw: u32, h: [u8; FRAME_HEAD], len: u16| {
            packet_meta(raw, len, |at| u16::from_be_bytes([h[at], h[at + 1]]))
        };
        let l3 = |h: [u8; FRAME_HEAD], len: u16| meta_of(0, h, len).1 & ffi::RTE_PTYPE_L3_MASK;
        let v6 = ffi::RTE_PTYPE_L3_IPV6_EXT_UNKNOWN;
        assert_eq!(l3(frame(&[ETH_P_8021Q], ETH_P_IPV6), 60), v6);
        assert_eq!(l3(frame(&[ETH_P_8021AD, ETH_P_8021Q], ETH_P_IPV6), 60), v6);
        assert_eq!(l3(frame(&[ETH_P_8021AD, ETH_P_8021Q], ETH_P_IPV6), 19), 0);
        assert_eq!(l3(frame(&[], ETH_P_IPV6), 13), 0);
        assert_eq!(l3(frame(&[], 0x0806), 60), 0, "ARP");
        let (ol, _, _) = meta_of(0, frame(&[], 0x0806), 60);
        assert_eq!(ol, 0, "no IP flags for ARP");
        // A bad IPv6 header verdict stays bad.
        let bad = F::new().with_rx_iphdr_csum_fail(true).to_raw();
        let (ol, pt, _) = meta_of(bad, frame(&[], ETH_P_IPV6), 60);
        assert_eq!(pt & ffi::RTE_PTYPE_L3_MASK, v6);
        assert_eq!(ol, ffi::RTE_MBUF_F_RX_IP_CKSUM_BAD as u64);
    }
}

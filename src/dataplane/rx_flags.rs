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
// two lookups and resolved into a packet type by `META`.
const EV_V4: u8 = 1;
const EV_V6: u8 = 2;
const EV_TCP: u8 = 4;
const EV_UDP: u8 = 8;
/// A hash type is present: the RSS hash is delivered.
const EV_HASHED: u8 = 16;

/// By checksum bits: the checksum `ol_flags` and the evidence they give.
static CSUM: [(u64, u8); 1 << CSUM_BITS] = build_csum();
/// By hash type: the evidence it gives.
static HASH: [u8; 1 << HASH_BITS] = build_hash();
/// By combined evidence: the `ol_flags` it adds and the packet type.
static META: [(u64, u32); 32] = build_meta();

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
            ev |= EV_V4;
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

const fn build_meta() -> [(u64, u32); 32] {
    let mut t = [(0u64, 0u32); 32];
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
        let ol = if e & EV_HASHED != 0 {
            ffi::RTE_MBUF_F_RX_RSS_HASH as u64
        } else {
            0
        };
        t[ev] = (ol, pt);
        ev += 1;
    }
    t
}

/// The `ol_flags` (VLAN flags included: the device stripped the tag), the
/// packet type and the VLAN TCI (0 without a tag) of a packet whose
/// completion carries flags `raw`.
#[inline(always)]
pub fn meta(raw: u32) -> (u64, u32, u16) {
    let (csum_ol, csum_ev) = CSUM[((raw >> CSUM_SHIFT) & ((1 << CSUM_BITS) - 1)) as usize];
    let hash_ev = HASH[((raw >> HASH_SHIFT) & ((1 << HASH_BITS) - 1)) as usize];
    let (meta_ol, ptype) = META[usize::from((csum_ev | hash_ev) & 31)];
    let ol = csum_ol | meta_ol;
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
        let v4 = f.rx_iphdr_csum_succeed()
            || f.rx_iphdr_csum_fail()
            || h & (ndis_hash::IPV4 | ndis_hash::TCP_IPV4 | ndis_hash::UDP_IPV4) != 0;
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
}

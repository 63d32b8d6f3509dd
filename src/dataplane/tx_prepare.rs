//! `tx_prepare`: checks each packet's offload requests against what the
//! device takes, and writes the pseudo-header checksum the device expects in
//! the L4 checksum field; and the TCP segmentation request both it and the
//! burst decode.

use super::txq::TxQueue;
use crate::ffi::consts;
use crate::ffi::{self, mbuf, rte_mbuf};
use std::ffi::{c_int, c_void};

/// A TCP segmentation request, as the device takes it.
#[derive(Clone, Copy)]
pub struct Tso {
    pub hdr_len: u8,
    pub mss: u16,
    pub trans_off: u16,
    /// The first segment holds payload after the headers: split it.
    pub split: bool,
}

impl Tso {
    /// The segmentation a `TX_TCP_SEG` mbuf asks for: `Ok(None)` when it
    /// carries no payload (a plain send does), `Err` when the device cannot
    /// take it.
    pub fn of(m: *mut rte_mbuf, ol: u64, tx_offload: u64) -> Result<Option<Tso>, ()> {
        let l2 = tx_offload & 0x7f;
        let l3 = (tx_offload >> 7) & 0x1ff;
        let l4 = (tx_offload >> 16) & 0xff;
        let mss = (tx_offload >> 24) & 0xffff;
        let hdr = l2 + l3 + l4;
        // SAFETY: a valid mbuf handed to tx_burst.
        let (first, pkt_len) =
            unsafe { (u64::from(mbuf::data_len(m)), u64::from(mbuf::pkt_len(m))) };
        let ip = ol & (ffi::RTE_MBUF_F_TX_IPV4 | ffi::RTE_MBUF_F_TX_IPV6) != 0;
        if !ip
            || l2 == 0
            || l3 == 0
            || l4 < 20
            || hdr > 255
            || first < hdr
            || mss == 0
            || mss > 0x3fff
        {
            return Err(());
        }
        if pkt_len == hdr {
            return Ok(None);
        }
        Ok(Some(Tso {
            hdr_len: hdr as u8,
            mss: mss as u16,
            trans_off: (l2 + l3) as u16,
            split: first > hdr,
        }))
    }

    /// Packets and bytes the device puts on the wire for a `pkt_len` send
    /// (saturating: `pkt_len` is the application's word, not checked
    /// against the segments).
    pub fn wire(&self, pkt_len: u32) -> (u32, u32) {
        let hdr = u32::from(self.hdr_len);
        let payload = pkt_len.saturating_sub(hdr).max(1);
        let segs = payload.div_ceil(u32::from(self.mss));
        (segs, pkt_len.saturating_add((segs - 1).saturating_mul(hdr)))
    }
}

/// `eth_tx_prep_t`: checks each packet's offload requests and writes the
/// pseudo-header checksum the device expects for L4 checksum offload.
///
/// # Safety
/// As [`tx_burst`].
pub unsafe extern "C" fn tx_prepare(q: *mut c_void, pkts: *mut *mut rte_mbuf, n: u16) -> u16 {
    // SAFETY: DPDK passes our queue and `n` valid mbufs.
    let (q, pkts) = unsafe {
        (
            &*(q as *const TxQueue),
            std::slice::from_raw_parts(pkts, usize::from(n)),
        )
    };
    // Locals: the header writes cannot alias them.
    let offloads = q.conf.offloads;
    let max_segs = max_segs(offloads);
    for (i, &m) in pkts.iter().enumerate() {
        // SAFETY: a valid mbuf.
        if let Err(e) = unsafe { prepare_one(offloads, max_segs, m) } {
            // SAFETY: sets this lcore's rte_errno.
            unsafe { ffi::mana_shim_set_errno(e) };
            return i as u16;
        }
    }
    n
}

/// The most segments a packet may have: a WQE's SGEs, unless the queue
/// takes multi-segment sends (it then links or linearises longer chains).
fn max_segs(offloads: u64) -> u16 {
    if offloads & consts::TX_OFFLOAD_MULTI_SEGS == 0 {
        gdma::MAX_TX_WQE_SGES as u16
    } else {
        u16::MAX
    }
}

const UNSUPPORTED_TX_FLAGS: u64 = ffi::RTE_MBUF_F_TX_UDP_SEG
    | ffi::RTE_MBUF_F_TX_TUNNEL_MASK
    | ffi::RTE_MBUF_F_TX_OUTER_IP_CKSUM
    | ffi::RTE_MBUF_F_TX_OUTER_IPV4
    | ffi::RTE_MBUF_F_TX_OUTER_IPV6;

/// A request the device does not take (`ENOTSUP`).
#[inline(always)]
fn unsupported(ol: u64) -> bool {
    ol & UNSUPPORTED_TX_FLAGS != 0
        || ol & ffi::RTE_MBUF_F_TX_L4_MASK == ffi::RTE_MBUF_F_TX_SCTP_CKSUM
}

/// The flags `prepare_one` acts on; a packet without any needs nothing.
const PREPARED: u64 = UNSUPPORTED_TX_FLAGS
    | ffi::RTE_MBUF_F_TX_L4_MASK
    | ffi::RTE_MBUF_F_TX_IP_CKSUM
    | ffi::RTE_MBUF_F_TX_TCP_SEG;

/// The common request (with or without the IP checksum): TCP or UDP
/// checksum over IPv4.
const TCP4: u64 = ffi::RTE_MBUF_F_TX_IPV4 | ffi::RTE_MBUF_F_TX_TCP_CKSUM;
const UDP4: u64 = ffi::RTE_MBUF_F_TX_IPV4 | ffi::RTE_MBUF_F_TX_UDP_CKSUM;

/// # Safety
/// `m` is a valid, writable mbuf.
#[inline(always)]
unsafe fn prepare_one(offloads: u64, max_segs: u16, m: *mut rte_mbuf) -> Result<(), c_int> {
    // SAFETY: the caller gives us a valid mbuf.
    let (ol, nb_segs) = unsafe { ((*m).ol_flags, mbuf::nb_segs(m)) };
    // The common request first: TCP or UDP checksum over IPv4 (with or
    // without the IP header checksum), none of the unsupported flags.
    const COMMON_MASK: u64 = UNSUPPORTED_TX_FLAGS
        | ffi::RTE_MBUF_F_TX_TCP_SEG
        | ffi::RTE_MBUF_F_TX_IPV6
        | ffi::RTE_MBUF_F_TX_IPV4
        | ffi::RTE_MBUF_F_TX_IP_CKSUM
        | ffi::RTE_MBUF_F_TX_L4_MASK;
    let kind = ol & COMMON_MASK;
    // The request of the csum engine and of most stacks first, with one
    // equality test (the header sizes and the IP checksum clearing are then
    // constants); the other three kinds of the common request behind a call
    // (a switch over all four costs the first an indirect jump).
    if kind == TCP4 | ffi::RTE_MBUF_F_TX_IP_CKSUM {
        // SAFETY: the caller's.
        return unsafe { prepare_ipv4::<20, 16, true>(nb_segs, max_segs, m) };
    }
    // SAFETY: the caller's.
    unsafe { prepare_other(offloads, kind, nb_segs, max_segs, m) }
}

/// `prepare_one` for everything but a TCP and IP checksum request over IPv4.
///
/// # Safety
/// `m` is a valid, writable mbuf.
#[inline(never)]
unsafe fn prepare_other(
    offloads: u64,
    kind: u64,
    nb_segs: u16,
    max_segs: u16,
    m: *mut rte_mbuf,
) -> Result<(), c_int> {
    const IP: u64 = ffi::RTE_MBUF_F_TX_IP_CKSUM;
    if kind == UDP4 | IP {
        // SAFETY: the caller's.
        return unsafe { prepare_ipv4::<8, 6, true>(nb_segs, max_segs, m) };
    }
    if kind == TCP4 {
        // SAFETY: the caller's.
        return unsafe { prepare_ipv4::<20, 16, false>(nb_segs, max_segs, m) };
    }
    if kind == UDP4 {
        // SAFETY: the caller's.
        return unsafe { prepare_ipv4::<8, 6, false>(nb_segs, max_segs, m) };
    }
    // SAFETY: the caller gives us a valid mbuf.
    let ol = unsafe { (*m).ol_flags };
    // The general path's order of errors: an unsupported request first.
    if nb_segs > max_segs && !unsupported(ol) {
        return Err(libc::EINVAL);
    }
    if ol & PREPARED == 0 {
        return Ok(());
    }
    // SAFETY: the caller's.
    unsafe { prepare_general(offloads, m) }
}

/// The common request: an L4 checksum (an `L4_HDR`-byte header with its
/// checksum field at `CSUM_AT`) over IPv4, with the IP header checksum if
/// `IP_CSUM`; every check of [`prepare_general`] for it, in the same order
/// of errors (all `EINVAL`).
///
/// # Safety
/// `m` is a valid, writable mbuf.
#[inline(always)]
unsafe fn prepare_ipv4<const L4_HDR: usize, const CSUM_AT: usize, const IP_CSUM: bool>(
    nb_segs: u16,
    max_segs: u16,
    m: *mut rte_mbuf,
) -> Result<(), c_int> {
    if nb_segs > max_segs {
        return Err(libc::EINVAL);
    }
    // SAFETY: the caller gives us a valid mbuf; its first segment's data
    // starts data_off bytes into its buffer.
    let (tx_offload, data_len, data) = unsafe {
        (
            mbuf::tx_offload(m),
            usize::from(mbuf::data_len(m)),
            ((*m).buf_addr as *mut u8).add(usize::from(mbuf::data_off(m))),
        )
    };
    let l2 = (tx_offload & 0x7f) as usize;
    let l3 = ((tx_offload >> 7) & 0x1ff) as usize;
    // The headers must sit in the first segment for the device to parse
    // them, and an IPv4 header holds at least 20 bytes.
    if l2 == 0 || l3 < 20 || l2 + l3 + L4_HDR > data_len {
        return Err(libc::EINVAL);
    }
    // SAFETY: the headers lie within the first segment of an mbuf the
    // caller lets us write (checked above: l2 + l3 + L4_HDR <= data_len):
    // the IPv4 header's fixed 20 bytes from `l2` (l3 >= 20) and the 2-byte
    // L4 checksum field at l2 + l3 + CSUM_AT <= l2 + l3 + L4_HDR - 2. The
    // byte arrays have alignment 1, so any address is fine.
    unsafe {
        let ip = data.add(l2);
        if IP_CSUM {
            (ip.add(10) as *mut [u8; 2]).write([0, 0]);
        }
        let phdr = super::csum::ipv4_pseudo_bytes(&*(ip as *const [u8; 20]));
        (ip.add(l3 + CSUM_AT) as *mut [u8; 2]).write(phdr);
    }
    Ok(())
}

/// `prepare_one` for everything but the common request: IPv6, TSO, IP
/// checksum alone, and the requests the device does not take.
///
/// # Safety
/// `m` is a valid, writable mbuf.
#[cold]
#[inline(never)]
unsafe fn prepare_general(offloads: u64, m: *mut rte_mbuf) -> Result<(), c_int> {
    // SAFETY: the caller gives us a valid mbuf; its first segment's data
    // starts data_off bytes into its buffer.
    let (ol, tx_offload, nb_segs, data_len, data) = unsafe {
        (
            (*m).ol_flags,
            mbuf::tx_offload(m),
            mbuf::nb_segs(m),
            usize::from(mbuf::data_len(m)),
            ((*m).buf_addr as *mut u8).add(usize::from(mbuf::data_off(m))),
        )
    };
    if unsupported(ol) {
        return Err(libc::ENOTSUP);
    }
    if u32::from(nb_segs) > gdma::MAX_TX_WQE_SGES as u32
        && offloads & consts::TX_OFFLOAD_MULTI_SEGS == 0
    {
        return Err(libc::EINVAL);
    }
    let tso = ol & ffi::RTE_MBUF_F_TX_TCP_SEG != 0;
    // Segmentation implies the TCP checksum (DPDK's rule).
    let l4 = if tso {
        ffi::RTE_MBUF_F_TX_TCP_CKSUM
    } else {
        ol & ffi::RTE_MBUF_F_TX_L4_MASK
    };
    let want_ip = ol & ffi::RTE_MBUF_F_TX_IP_CKSUM != 0;
    if l4 == 0 && !want_ip {
        return Ok(());
    }
    if tso && Tso::of(m, ol, tx_offload).is_err() {
        return Err(libc::EINVAL);
    }
    let l2 = (tx_offload & 0x7f) as usize;
    let l3 = ((tx_offload >> 7) & 0x1ff) as usize;
    let ipv4 = ol & ffi::RTE_MBUF_F_TX_IPV4 != 0;
    let ipv6 = ol & ffi::RTE_MBUF_F_TX_IPV6 != 0;
    if want_ip && !ipv4 {
        return Err(libc::EINVAL);
    }
    let l4_hdr = match l4 {
        ffi::RTE_MBUF_F_TX_TCP_CKSUM => 20,
        ffi::RTE_MBUF_F_TX_UDP_CKSUM => 8,
        _ => 0,
    };
    // The headers must sit in the first segment for the device to parse them.
    // An IP header shorter than its fixed part cannot be what the flags say.
    let l3_min = if ipv4 {
        20
    } else if ipv6 {
        40
    } else {
        1
    };
    if l2 == 0 || l3 < l3_min || l2 + l3 + l4_hdr > data_len || (l4 != 0 && !(ipv4 || ipv6)) {
        return Err(libc::EINVAL);
    }
    // SAFETY: the headers lie within the first segment (checked above).
    let hdr = unsafe { std::slice::from_raw_parts_mut(data, l2 + l3 + l4_hdr) };
    if want_ip || (tso && ipv4) {
        hdr[l2 + 10] = 0;
        hdr[l2 + 11] = 0;
    }
    if tso {
        // The device writes each segment's length: it wants 0 here, and a
        // pseudo-header sum without length (as the kernel driver sends).
        let at = if ipv4 { l2 + 2 } else { l2 + 4 };
        hdr[at..at + 2].fill(0);
    }
    if l4 != 0 {
        let phdr = if ipv4 {
            super::csum::ipv4_pseudo(&hdr[l2..l2 + l3])
        } else {
            super::csum::ipv6_pseudo(&hdr[l2..l2 + l3])
        };
        let at = l2 + l3 + if l4_hdr == 20 { 16 } else { 6 };
        hdr[at..at + 2].copy_from_slice(&phdr.to_be_bytes());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A TCP/IPv4 frame (Ethernet 14, IP 20, TCP 20, 10 bytes of payload)
    /// in a buffer, and an mbuf over it asking for `ol` with L2/L3 lengths
    /// `l2`/`l3`.
    fn frame(buf: &mut [u8; 128], m: &mut rte_mbuf, ol: u64, l2: u64, l3: u64) {
        buf.fill(0);
        let ip = &mut buf[14..34];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&50u16.to_be_bytes());
        ip[9] = 6;
        ip[10..12].copy_from_slice(&[0xde, 0xad]);
        ip[12..16].copy_from_slice(&[192, 168, 0, 1]);
        ip[16..20].copy_from_slice(&[192, 168, 0, 199]);
        buf[34 + 16..34 + 18].copy_from_slice(&[0xbe, 0xef]);
        *m = rte_mbuf::default();
        m.buf_addr = buf.as_mut_ptr().cast();
        m.ol_flags = ol;
        let p: *mut rte_mbuf = m;
        // SAFETY: `p` is a live mbuf on the stack.
        unsafe {
            mbuf::set_data_off(p, 0);
            mbuf::set_nb_segs(p, 1);
            mbuf::set_data_len(p, 64);
            mbuf::set_pkt_len(p, 64);
            mbuf::set_tx_offload(p, l2 | (l3 << 7));
        }
    }

    const TCP4: u64 =
        ffi::RTE_MBUF_F_TX_IPV4 | ffi::RTE_MBUF_F_TX_IP_CKSUM | ffi::RTE_MBUF_F_TX_TCP_CKSUM;

    #[test]
    fn tcp_over_ipv4_gets_the_pseudo_header_and_a_zero_ip_checksum() {
        let (mut buf, mut m) = ([0u8; 128], rte_mbuf::default());
        frame(&mut buf, &mut m, TCP4, 14, 20);
        // SAFETY: a valid mbuf over `buf`.
        assert_eq!(unsafe { prepare_one(0, max_segs(0), &mut m) }, Ok(()));
        assert_eq!(&buf[24..26], &[0, 0], "IP checksum field cleared");
        // c0a8 + 0001 + c0a8 + 00c7 + 0006 + 001e (30 bytes of TCP) = 0x1823c
        assert_eq!(&buf[50..52], &[0x82, 0x3d], "pseudo-header sum");
    }

    #[test]
    fn an_ip_header_shorter_than_20_bytes_is_refused_not_read_past() {
        let (mut buf, mut m) = ([0u8; 128], rte_mbuf::default());
        for ol in [
            TCP4,
            ffi::RTE_MBUF_F_TX_IPV4 | ffi::RTE_MBUF_F_TX_IP_CKSUM,
            ffi::RTE_MBUF_F_TX_IPV6 | ffi::RTE_MBUF_F_TX_TCP_CKSUM,
        ] {
            for l3 in [1, 5, 19] {
                frame(&mut buf, &mut m, ol, 14, l3);
                // SAFETY: a valid mbuf over `buf`.
                let r = unsafe { prepare_one(0, max_segs(0), &mut m) };
                assert_eq!(r, Err(libc::EINVAL), "{ol:#x} {l3}");
            }
        }
    }

    #[test]
    fn a_packet_without_offload_requests_is_left_alone() {
        let (mut buf, mut m) = ([0u8; 128], rte_mbuf::default());
        frame(&mut buf, &mut m, 0, 14, 20);
        let before = buf;
        // SAFETY: a valid mbuf over `buf`.
        assert_eq!(unsafe { prepare_one(0, max_segs(0), &mut m) }, Ok(()));
        assert_eq!(buf, before);
    }

    /// The fast paths of `prepare_one` (the common request and the cheap
    /// refusals before the general path) against `prepare_general` alone,
    /// over random requests, header lengths, segment counts, first-segment
    /// lengths and header bytes: the same result (and errno) and the same
    /// bytes written.
    #[test]
    fn the_fast_paths_equal_the_general_path() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        // Flags a request may carry; the common ones drawn most often.
        let flags = [
            ffi::RTE_MBUF_F_TX_IPV4,
            ffi::RTE_MBUF_F_TX_IPV6,
            ffi::RTE_MBUF_F_TX_IP_CKSUM,
            ffi::RTE_MBUF_F_TX_TCP_CKSUM,
            ffi::RTE_MBUF_F_TX_UDP_CKSUM,
            ffi::RTE_MBUF_F_TX_SCTP_CKSUM,
            ffi::RTE_MBUF_F_TX_TCP_SEG,
            ffi::RTE_MBUF_F_TX_UDP_SEG,
            ffi::RTE_MBUF_F_TX_VLAN,
            ffi::RTE_MBUF_F_TX_OUTER_IPV4,
            ffi::RTE_MBUF_F_TX_OUTER_IP_CKSUM,
            ffi::RTE_MBUF_F_TX_TUNNEL_VXLAN,
        ];
        let common = [TCP4, UDP4];
        let (mut seen_ok, mut seen) = (0, std::collections::BTreeMap::new());
        for i in 0..200_000u32 {
            let r = next();
            let mut ol = if r % 3 != 0 {
                common[(r >> 2) as usize % 2]
                    | if r & 0x10 != 0 {
                        ffi::RTE_MBUF_F_TX_IP_CKSUM
                    } else {
                        0
                    }
            } else {
                0
            };
            // Now and then a few more (or other) flags.
            if r % 5 == 0 || ol == 0 {
                for _ in 0..(r >> 8) % 4 {
                    ol |= flags[(next() % flags.len() as u64) as usize];
                }
            }
            let r = next();
            let l2 = [0, 14, 18, 1, 127][(r % 5) as usize];
            let l3 = [0, 19, 20, 24, 40, 60, 511, (r >> 8) % 64][((r >> 4) % 8) as usize];
            let l4 = [0, 8, 20, 32][((r >> 12) % 4) as usize];
            let mss = [0, 1460, 0x4000][((r >> 16) % 3) as usize];
            let data_len = [64, 128, 34, 54, 42, (r >> 20) % 200][((r >> 28) % 6) as usize];
            let nb_segs = [1, 1, 30, 31][((r >> 32) % 4) as usize];
            let offloads = if r >> 40 & 1 != 0 {
                consts::TX_OFFLOAD_MULTI_SEGS
            } else {
                0
            };
            let data_off = ((r >> 44) % 32) as u16;
            let mut bytes = [0u8; 256];
            for b in bytes.iter_mut() {
                *b = next() as u8;
            }
            let mut results = Vec::new();
            for general in [false, true] {
                let mut buf = bytes;
                let mut m = rte_mbuf {
                    buf_addr: buf.as_mut_ptr().cast(),
                    ol_flags: ol,
                    ..Default::default()
                };
                let p: *mut rte_mbuf = &mut m;
                // SAFETY: `p` is a live mbuf on the stack over `buf`, whose
                // 256 bytes hold data_off (< 32) + data_len (< 200).
                let res = unsafe {
                    mbuf::set_data_off(p, data_off);
                    mbuf::set_nb_segs(p, nb_segs);
                    mbuf::set_data_len(p, data_len as u16);
                    mbuf::set_pkt_len(p, data_len as u32 + 100 * u32::from(i % 2 == 0));
                    mbuf::set_tx_offload(p, l2 | (l3 << 7) | (l4 << 16) | (mss << 24));
                    if general {
                        prepare_general(offloads, p)
                    } else {
                        prepare_one(offloads, max_segs(offloads), p)
                    }
                };
                results.push((res, buf));
            }
            let ((fast, fast_buf), (slow, slow_buf)) = (results[0], results[1]);
            let what = format!(
                "ol {ol:#x} l2 {l2} l3 {l3} l4 {l4} mss {mss} data_len {data_len} \
                 segs {nb_segs} offloads {offloads:#x}"
            );
            assert_eq!(fast, slow, "{what}");
            assert!(fast_buf == slow_buf, "{what}");
            seen_ok +=
                u32::from(fast.is_ok() && common.contains(&(ol & !ffi::RTE_MBUF_F_TX_IP_CKSUM)));
            *seen.entry(fast).or_insert(0u32) += 1;
        }
        // Every outcome was drawn, the common request taken many times.
        assert!(seen_ok > 10_000, "{seen_ok} common requests prepared");
        for r in [Ok(()), Err(libc::EINVAL), Err(libc::ENOTSUP)] {
            assert!(seen.get(&r).copied().unwrap_or(0) > 1000, "{r:?}: {seen:?}");
        }
    }
}

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

    /// Packets and bytes the device puts on the wire for a `pkt_len` send.
    pub fn wire(&self, pkt_len: u32) -> (u32, u32) {
        let hdr = u32::from(self.hdr_len);
        let payload = pkt_len.saturating_sub(hdr).max(1);
        let segs = payload.div_ceil(u32::from(self.mss));
        (segs, pkt_len + (segs - 1) * hdr)
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
    for (i, &m) in pkts.iter().enumerate() {
        // SAFETY: a valid mbuf.
        if let Err(e) = unsafe { prepare_one(q, m) } {
            // SAFETY: sets this lcore's rte_errno.
            unsafe { ffi::mana_shim_set_errno(e) };
            return i as u16;
        }
    }
    n
}

const UNSUPPORTED_TX_FLAGS: u64 = ffi::RTE_MBUF_F_TX_UDP_SEG
    | ffi::RTE_MBUF_F_TX_TUNNEL_MASK
    | ffi::RTE_MBUF_F_TX_OUTER_IP_CKSUM
    | ffi::RTE_MBUF_F_TX_OUTER_IPV4
    | ffi::RTE_MBUF_F_TX_OUTER_IPV6;

/// # Safety
/// `m` is a valid, writable mbuf.
unsafe fn prepare_one(q: &TxQueue, m: *mut rte_mbuf) -> Result<(), c_int> {
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
    if ol & UNSUPPORTED_TX_FLAGS != 0
        || ol & ffi::RTE_MBUF_F_TX_L4_MASK == ffi::RTE_MBUF_F_TX_SCTP_CKSUM
    {
        return Err(libc::ENOTSUP);
    }
    if u32::from(nb_segs) > gdma::MAX_TX_WQE_SGES as u32
        && q.conf.offloads & consts::TX_OFFLOAD_MULTI_SEGS == 0
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
    if l2 == 0 || l3 == 0 || l2 + l3 + l4_hdr > data_len || (l4 != 0 && !(ipv4 || ipv6)) {
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

//! Field access for `struct rte_mbuf`, the same on every DPDK release.
//!
//! DPDK 24.07 replaced the mbuf's zero-size markers (`rearm_data`,
//! `rx_descriptor_fields1`) by anonymous unions around the fields they
//! marked, so bindgen's paths to `data_off`, `nb_segs`, `port`,
//! `packet_type`, `pkt_len`, `data_len`, `vlan_tci` and `hash` changed
//! (`cfg(dpdk_mbuf_unions)`, detected by `build.rs` from the headers). The
//! data path reads and writes those fields only through this module. Fields
//! that are plain members in every release (`buf_addr`, `ol_flags`, `pool`,
//! `next`) are used directly. `layout_tests` checks every path here against
//! the C compiler's `offsetof`.

use super::sys::rte_mbuf;

/// Defines, for each field, a getter, a setter and a raw field pointer
/// (`<name>_ptr`, for the layout test), choosing the bindgen path the
/// headers call for.
macro_rules! fields {
    ($(
        $(#[$doc:meta])*
        $get:ident, $set:ident, $ptr:ident: $ty:ty =
            [$($old:tt)+] / [$($new:tt)+];
    )*) => {$(
        /// Pointer to the field of `m`, computed without reading it.
        ///
        /// # Safety
        /// `m` points into an allocation of at least `size_of::<rte_mbuf>()`
        /// bytes (only its address is used).
        #[inline(always)]
        pub unsafe fn $ptr(m: *mut rte_mbuf) -> *mut $ty {
            // SAFETY: the caller guarantees `m` spans a whole rte_mbuf, so
            // the field's address is in bounds; nothing is read.
            unsafe {
                #[cfg(not(dpdk_mbuf_unions))]
                let p = core::ptr::addr_of_mut!((*m).$($old)+);
                #[cfg(dpdk_mbuf_unions)]
                let p = core::ptr::addr_of_mut!((*m).$($new)+);
                p
            }
        }

        $(#[$doc])*
        ///
        /// # Safety
        /// `m` is a valid, initialized mbuf.
        #[inline(always)]
        pub unsafe fn $get(m: *const rte_mbuf) -> $ty {
            // SAFETY: `m` is valid (caller); every bit pattern of the
            // field's integer type is a value.
            unsafe { $ptr(m as *mut rte_mbuf).read() }
        }

        $(#[$doc])*
        ///
        /// # Safety
        /// `m` is a valid mbuf the caller may write.
        #[inline(always)]
        pub unsafe fn $set(m: *mut rte_mbuf, v: $ty) {
            // SAFETY: `m` is valid and writable (caller).
            unsafe { $ptr(m).write(v) }
        }
    )*};
}

fields! {
    /// Offset of the packet data from `buf_addr`.
    data_off, set_data_off, data_off_ptr: u16 =
        [data_off] / [__bindgen_anon_1.__bindgen_anon_1.data_off];
    /// Reference count (`rte_mbuf_refcnt_*` in DPDK; the driver writes it
    /// only as part of the rearm word of a buffer fresh from the pool).
    refcnt, set_refcnt, refcnt_ptr: u16 =
        [refcnt] / [__bindgen_anon_1.__bindgen_anon_1.refcnt];
    /// Segments in the chain starting here.
    nb_segs, set_nb_segs, nb_segs_ptr: u16 =
        [nb_segs] / [__bindgen_anon_1.__bindgen_anon_1.nb_segs];
    /// Input port.
    port, set_port, port_ptr: u16 =
        [port] / [__bindgen_anon_1.__bindgen_anon_1.port];
    /// `RTE_PTYPE_*` classification.
    packet_type, set_packet_type, packet_type_ptr: u32 =
        [__bindgen_anon_1.packet_type] / [__bindgen_anon_2.__bindgen_anon_1.__bindgen_anon_1.packet_type];
    /// Packet length over all segments.
    pkt_len, set_pkt_len, pkt_len_ptr: u32 =
        [pkt_len] / [__bindgen_anon_2.__bindgen_anon_1.pkt_len];
    /// Length of the buffer at `buf_addr` (headroom included).
    buf_len, set_buf_len, buf_len_ptr: u16 =
        [buf_len] / [__bindgen_anon_2.__bindgen_anon_1.buf_len];
    /// Data length of this segment.
    data_len, set_data_len, data_len_ptr: u16 =
        [data_len] / [__bindgen_anon_2.__bindgen_anon_1.data_len];
    /// VLAN TCI (stripped on RX, to insert on TX).
    vlan_tci, set_vlan_tci, vlan_tci_ptr: u16 =
        [vlan_tci] / [__bindgen_anon_2.__bindgen_anon_1.vlan_tci];
    /// RSS hash (`hash.rss`).
    rss_hash, set_rss_hash, rss_hash_ptr: u32 =
        [__bindgen_anon_2.hash.rss] / [__bindgen_anon_2.__bindgen_anon_1.__bindgen_anon_2.hash.rss];
    /// The TX offload lengths word (`l2_len`, `l3_len`, `l4_len`, `tso_segsz`, ...).
    tx_offload, set_tx_offload, tx_offload_ptr: u64 =
        [__bindgen_anon_3.tx_offload] / [__bindgen_anon_3.tx_offload];
}

/// The "rearm" word: `data_off`, `refcnt`, `nb_segs` and `port`, the four
/// 16-bit fields at the 8-byte aligned offset DPDK marks `rearm_data` (a
/// marker before 24.07, a union since). A receive refill writes them with
/// one store instead of `rte_pktmbuf_reset`, as DPDK's vector PMDs do.
/// `layout_tests` checks the four fields are adjacent, in this order, at
/// an 8-byte aligned offset.
///
/// # Safety
/// As the `*_ptr` accessors: `m` spans a whole `rte_mbuf`.
#[inline(always)]
pub unsafe fn rearm_ptr(m: *mut rte_mbuf) -> *mut u64 {
    // SAFETY: the caller's; `data_off` starts the 8-byte word (layout test).
    unsafe { data_off_ptr(m) as *mut u64 }
}

/// The rearm word that gives a buffer `data_off`, a reference count of 1,
/// one segment and input port `port`, built through the typed setters.
pub fn rearm_word(data_off: u16, port: u16) -> u64 {
    let mut m = rte_mbuf::default();
    let p: *mut rte_mbuf = &mut m;
    // SAFETY: `p` is a live, zeroed mbuf on the stack; the word lies inside.
    unsafe {
        set_data_off(p, data_off);
        set_refcnt(p, 1);
        set_nb_segs(p, 1);
        set_port(p, port);
        rearm_ptr(p).read()
    }
}

/// Writes the rearm word of `m` (see [`rearm_word`]).
///
/// # Safety
/// `m` is a valid mbuf the caller owns and may write.
#[inline(always)]
pub unsafe fn set_rearm(m: *mut rte_mbuf, word: u64) {
    // SAFETY: `m` is valid and ours (caller); the word is 8-byte aligned
    // inside it (layout test).
    unsafe { rearm_ptr(m).write(word) }
}

/// The big-endian 16 bits at byte `at` of the data of `m` (from
/// `buf_addr + data_off`).
///
/// # Safety
/// `m` is a valid mbuf whose buffer holds at least `at + 2` bytes after
/// `data_off` (what they contain beyond the packet is not looked at here).
#[inline(always)]
pub unsafe fn data_be16(m: *const rte_mbuf, at: usize) -> u16 {
    // SAFETY: `m` is valid and its buffer spans `data_off + at + 2` bytes
    // (caller); an unaligned read of plain bytes.
    unsafe {
        let p = ((*m).buf_addr as *const u8).add(usize::from(data_off(m)) + at);
        u16::from_be((p as *const u16).read_unaligned())
    }
}

/// The big-endian 16 bits at byte `at` of a receive buffer's data as the
/// device wrote it: from `buf_addr + RTE_PKTMBUF_HEADROOM`, where the
/// receive path posts every buffer (and sets `data_off` to), so the read
/// does not wait for `data_off`.
///
/// # Safety
/// `m` is a valid mbuf whose buffer holds at least `at + 2` bytes after the
/// headroom.
#[inline(always)]
pub unsafe fn posted_be16(m: *const rte_mbuf, at: usize) -> u16 {
    // SAFETY: `m` is valid and its buffer spans `HEADROOM + at + 2` bytes
    // (caller); an unaligned read of plain bytes.
    unsafe {
        let p = ((*m).buf_addr as *const u8).add(super::RTE_PKTMBUF_HEADROOM as usize + at);
        u16::from_be((p as *const u16).read_unaligned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_set_together_read_back_unchanged() {
        let mut m = rte_mbuf::default();
        let p: *mut rte_mbuf = &mut m;
        // SAFETY: `p` is a live, zeroed mbuf on the stack.
        unsafe {
            set_data_off(p, 128);
            set_nb_segs(p, 3);
            set_port(p, 7);
            set_packet_type(p, 0x0291);
            set_pkt_len(p, 9000);
            set_data_len(p, 1500);
            set_vlan_tci(p, 0x0123);
            set_rss_hash(p, 0xdead_beef);
            set_tx_offload(p, 14 | (20 << 7));
            assert_eq!(data_off(p), 128);
            assert_eq!(nb_segs(p), 3);
            assert_eq!(port(p), 7);
            assert_eq!(packet_type(p), 0x0291);
            assert_eq!(pkt_len(p), 9000);
            assert_eq!(data_len(p), 1500);
            assert_eq!(vlan_tci(p), 0x0123);
            assert_eq!(rss_hash(p), 0xdead_beef);
            assert_eq!(tx_offload(p), 14 | (20 << 7));
        }
    }

    #[test]
    fn the_rearm_word_sets_the_four_fields_and_nothing_else() {
        let base = |m: *mut rte_mbuf| m as usize;
        let mut m = rte_mbuf::default();
        let p: *mut rte_mbuf = &mut m;
        // SAFETY: `p` is a live, zeroed mbuf on the stack.
        unsafe {
            let at = rearm_ptr(p) as usize - base(p);
            assert_eq!(at % 8, 0, "the rearm word is 8-byte aligned");
            assert_eq!(refcnt_ptr(p) as usize - base(p), at + 2);
            assert_eq!(nb_segs_ptr(p) as usize - base(p), at + 4);
            assert_eq!(port_ptr(p) as usize - base(p), at + 6);
            set_pkt_len(p, 77);
            (*p).ol_flags = 5;
            set_rearm(p, rearm_word(128, 3));
            assert_eq!(
                (data_off(p), refcnt(p), nb_segs(p), port(p)),
                (128, 1, 1, 3)
            );
            assert_eq!((pkt_len(p), (*p).ol_flags), (77, 5), "neighbours untouched");
        }
    }
}

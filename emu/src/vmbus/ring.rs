//! The host's side of a channel's ring buffers.
//!
//! A channel's ring memory holds two rings: the first half carries packets
//! from the guest to the host, the second from the host to the guest (DPDK
//! maps `txbr` at the start and `rxbr` at the middle). Each ring starts with
//! a page of control words, then the data area:
//!
//! | offset | word |
//! |---|---|
//! | 0 | write index (byte offset into the data area, owned by the writer) |
//! | 4 | read index (owned by the reader) |
//! | 8 | interrupt mask (set by the reader: "do not signal me") |
//! | 12 | pending send size (set by a blocked writer: "signal me when this fits") |
//! | 64 | feature bits (bit 0: the pending-send-size protocol) |
//!
//! A packet is written at the write index (wrapping at the end of the data
//! area), followed by an 8-byte trailer holding the packet's start offset
//! in its upper 32 bits; then the write index moves on. A writer never fills
//! the ring completely (`avail <= total` is "full"), so equal indices mean
//! empty.

use super::chanpkt::{Header, HEADER_LEN};
use super::shm::SharedMem;
use std::sync::atomic::Ordering;
use zerocopy::FromBytes;

const WINDEX: usize = 0;
const RINDEX: usize = 4;
const IMASK: usize = 8;
const PENDING_SEND: usize = 12;
const FEATURES: usize = 64;
/// Feature bit: the pending-send-size protocol.
pub const FEAT_PENDING_SEND_SZ: u32 = 1;
const CTRL: usize = 4096;
const TRAILER: usize = 8;

/// Why the host could not take a packet from the guest's ring.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    /// The guest's indices or lengths make no sense; the channel is unusable.
    Corrupt(String),
}

/// Why the host could not give a packet to the guest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteError {
    /// Not enough room now; this many bytes are needed.
    Full(usize),
    /// The guest's read index lies outside the ring.
    Corrupt(String),
}

/// One direction: control page at `base`, data area after it.
struct Dir<'a> {
    mem: &'a SharedMem,
    base: usize,
    size: usize,
}

impl Dir<'_> {
    fn data(&self) -> usize {
        self.base + CTRL
    }

    fn load(&self, word: usize) -> u32 {
        self.mem.word(self.base + word).load(Ordering::Acquire)
    }

    fn store(&self, word: usize, v: u32) {
        self.mem.word(self.base + word).store(v, Ordering::Release)
    }

    fn copy_out(&self, off: usize, out: &mut [u8]) {
        let r = self.mem.region();
        let first = out.len().min(self.size - off);
        r.read(self.data() + off, &mut out[..first]);
        if first < out.len() {
            r.read(self.data(), &mut out[first..]);
        }
    }

    fn copy_in(&self, off: usize, data: &[u8]) -> usize {
        let r = self.mem.region();
        let first = data.len().min(self.size - off);
        r.write(self.data() + off, &data[..first]);
        if first < data.len() {
            r.write(self.data(), &data[first..]);
        }
        (off + data.len()) % self.size
    }

    /// Bytes between the read and the write index.
    fn used(&self, windex: usize, rindex: usize) -> usize {
        if windex >= rindex {
            windex - rindex
        } else {
            self.size - (rindex - windex)
        }
    }
}

/// A channel's two rings in one block of shared memory.
pub struct RingPair {
    mem: SharedMem,
    half: usize,
}

impl RingPair {
    /// Rings of `size_each` bytes per direction (control page included).
    pub fn new(name: &std::ffi::CStr, size_each: usize) -> std::io::Result<RingPair> {
        // Page multiples in practice (the guest maps them); tests use small
        // data areas.
        assert!(size_each > CTRL && size_each.is_multiple_of(8));
        let mem = SharedMem::new(name, (2 * size_each).next_multiple_of(4096))?;
        let rp = RingPair {
            mem,
            half: size_each,
        };
        // As the kernel's ring setup does: both rings offer the
        // pending-send-size protocol.
        rp.guest_to_host().store(FEATURES, FEAT_PENDING_SEND_SZ);
        rp.host_to_guest().store(FEATURES, FEAT_PENDING_SEND_SZ);
        Ok(rp)
    }

    pub fn mem(&self) -> &SharedMem {
        &self.mem
    }

    fn guest_to_host(&self) -> Dir<'_> {
        Dir {
            mem: &self.mem,
            base: 0,
            size: self.half - CTRL,
        }
    }

    fn host_to_guest(&self) -> Dir<'_> {
        Dir {
            mem: &self.mem,
            base: self.half,
            size: self.half - CTRL,
        }
    }

    /// Data bytes per direction.
    pub fn data_size(&self) -> usize {
        self.half - CTRL
    }

    /// Takes the next packet the guest wrote (descriptor included, trailer
    /// dropped), or `None` when the ring is empty.
    pub fn read(&self) -> Result<Option<Vec<u8>>, ReadError> {
        let d = self.guest_to_host();
        let windex = d.load(WINDEX) as usize;
        let rindex = d.load(RINDEX) as usize;
        if windex >= d.size
            || rindex >= d.size
            || !windex.is_multiple_of(8)
            || !rindex.is_multiple_of(8)
        {
            return Err(ReadError::Corrupt(format!(
                "indices write {windex} read {rindex} outside the {}-byte ring or unaligned",
                d.size
            )));
        }
        let used = d.used(windex, rindex);
        if used == 0 {
            return Ok(None);
        }
        if used < HEADER_LEN + TRAILER {
            return Err(ReadError::Corrupt(format!(
                "{used} bytes in the ring, less than a packet"
            )));
        }
        let mut h = [0u8; HEADER_LEN];
        d.copy_out(rindex, &mut h);
        let hdr = Header::read_from_bytes(&h).expect("16 bytes");
        let len = usize::from(hdr.tlen.get()) * 8;
        if len < HEADER_LEN || len + TRAILER > used {
            return Err(ReadError::Corrupt(format!(
                "packet of {len} bytes with {used} bytes in the ring"
            )));
        }
        let mut pkt = vec![0u8; len];
        d.copy_out(rindex, &mut pkt);
        d.store(RINDEX, ((rindex + len + TRAILER) % d.size) as u32);
        Ok(Some(pkt))
    }

    /// Does the guest want to be signalled (its receive ring not masked)?
    pub fn guest_wants_interrupts(&self) -> bool {
        self.host_to_guest().load(IMASK) == 0
    }

    /// Masks or unmasks the host's own notifications (the guest reads this
    /// before signalling; Hyper-V sets it while it drains the ring).
    pub fn set_host_imask(&self, masked: bool) {
        self.guest_to_host().store(IMASK, u32::from(masked));
    }

    /// Masks the guest's receive ring, as `uio_hv_generic` does on open.
    pub fn mask_guest(&self, masked: bool) {
        self.host_to_guest().store(IMASK, u32::from(masked));
    }

    /// Writes one packet (already padded to 8 bytes) for the guest. Returns
    /// `Ok(true)` when the ring was empty before (the guest needs a signal
    /// if it listens), `Full(needed)` when it does not fit now; then the
    /// guest's pending-send-size word asks it to signal once `needed` bytes
    /// are free.
    pub fn write(&self, pkt: &[u8]) -> Result<bool, WriteError> {
        assert!(pkt.len().is_multiple_of(8) && pkt.len() >= HEADER_LEN);
        let d = self.host_to_guest();
        let windex = d.load(WINDEX) as usize;
        let rindex = d.load(RINDEX) as usize;
        if windex >= d.size || rindex >= d.size || !rindex.is_multiple_of(8) {
            return Err(WriteError::Corrupt(format!(
                "indices write {windex} read {rindex} outside the {}-byte ring or unaligned",
                d.size
            )));
        }
        let total = pkt.len() + TRAILER;
        let avail = d.size - d.used(windex, rindex);
        if avail <= total {
            d.store(PENDING_SEND, total as u32);
            return Err(WriteError::Full(total));
        }
        let mut w = d.copy_in(windex, pkt);
        w = d.copy_in(w, &((windex as u64) << 32).to_le_bytes());
        // The packet is in place before the guest can see the new index.
        d.store(WINDEX, w as u32);
        if d.load(PENDING_SEND) != 0 {
            d.store(PENDING_SEND, 0);
        }
        Ok(windex == rindex)
    }

    /// Is there nothing for the guest to read?
    pub fn guest_ring_empty(&self) -> bool {
        let d = self.host_to_guest();
        d.load(WINDEX) == d.load(RINDEX)
    }

    /// Indices of both rings (write, read), for diagnostics.
    pub fn indices(&self) -> [(u32, u32); 2] {
        let a = self.guest_to_host();
        let b = self.host_to_guest();
        [
            (a.load(WINDEX), a.load(RINDEX)),
            (b.load(WINDEX), b.load(RINDEX)),
        ]
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::vmbus::chanpkt;

    /// Writes into the guest-to-host ring as DPDK's `vmbus_txbr_write` does.
    pub(crate) fn guest_send(rp: &RingPair, pkt: &[u8]) -> bool {
        let d = rp.guest_to_host();
        let windex = d.load(WINDEX) as usize;
        let rindex = d.load(RINDEX) as usize;
        let total = pkt.len() + 8;
        if d.size - d.used(windex, rindex) <= total {
            return false;
        }
        let w = d.copy_in(windex, pkt);
        let w = d.copy_in(w, &((windex as u64) << 32).to_le_bytes());
        d.store(WINDEX, w as u32);
        true
    }

    /// Reads from the host-to-guest ring as DPDK's `vmbus_rxbr_read` does.
    pub(crate) fn guest_recv(rp: &RingPair) -> Option<Vec<u8>> {
        let d = rp.host_to_guest();
        let windex = d.load(WINDEX) as usize;
        let rindex = d.load(RINDEX) as usize;
        if windex == rindex {
            return None;
        }
        let mut h = [0u8; 16];
        d.copy_out(rindex, &mut h);
        let len = usize::from(u16::from_le_bytes([h[4], h[5]])) * 8;
        let mut p = vec![0u8; len];
        d.copy_out(rindex, &mut p);
        let mut t = [0u8; 8];
        d.copy_out((rindex + len) % d.size, &mut t);
        assert_eq!(u64::from_le_bytes(t) >> 32, rindex as u64, "trailer");
        d.store(RINDEX, ((rindex + len + 8) % d.size) as u32);
        Some(p)
    }

    #[test]
    fn packets_wrap_and_keep_order_both_ways() {
        let rp = RingPair::new(c"t", 4096 + 256).unwrap();
        assert_eq!(rp.data_size(), 256);
        for round in 0..40u8 {
            let p = chanpkt::inband(0, u64::from(round), &[round; 20]);
            assert_eq!(p.len(), 40);
            assert!(guest_send(&rp, &p));
            assert_eq!(rp.read().unwrap().unwrap(), p);
            assert_eq!(rp.read().unwrap(), None);
            let empty_before = rp.write(&p).unwrap();
            assert!(empty_before);
            assert_eq!(guest_recv(&rp).unwrap(), p);
        }
        // 256 data bytes hold five 48-byte entries (never completely full).
        let p = chanpkt::inband(0, 1, &[0; 24]);
        for i in 0..5 {
            assert_eq!(rp.write(&p), Ok(i == 0), "entry {i}");
        }
        assert_eq!(rp.write(&p), Err(WriteError::Full(48)));
        assert_eq!(rp.host_to_guest().load(PENDING_SEND), 48);
        guest_recv(&rp).unwrap();
        assert_eq!(rp.write(&p), Ok(false));
        assert_eq!(rp.host_to_guest().load(PENDING_SEND), 0);
    }

    #[test]
    fn corrupt_indices_and_lengths_are_refused() {
        let rp = RingPair::new(c"t", 8192).unwrap();
        rp.guest_to_host().store(WINDEX, 5000);
        assert!(matches!(rp.read(), Err(ReadError::Corrupt(_))));
        rp.guest_to_host().store(WINDEX, 16);
        assert!(matches!(rp.read(), Err(ReadError::Corrupt(_))));
        // A descriptor claiming more than was written.
        let mut p = chanpkt::inband(0, 0, &[0; 8]);
        p[4] = 200;
        rp.guest_to_host().store(WINDEX, 0);
        assert!(guest_send(&rp, &p));
        assert!(matches!(rp.read(), Err(ReadError::Corrupt(_))));
    }

    #[test]
    fn features_offer_pending_send_size() {
        let rp = RingPair::new(c"t", 8192).unwrap();
        assert_eq!(rp.host_to_guest().load(FEATURES), FEAT_PENDING_SEND_SZ);
        assert_eq!(rp.guest_to_host().load(FEATURES), FEAT_PENDING_SEND_SZ);
        assert!(rp.guest_wants_interrupts());
        rp.mask_guest(true);
        assert!(!rp.guest_wants_interrupts());
    }
}

//! Queue memory in guest pages, and the producer side of the entry queues
//! the device writes (CQs and EQs): slot, owner bits, arming.
//!
//! A queue's memory is a list of 4 KiB guest pages (the pages of its DMA
//! region, or the single page the SMC names for an HWC queue), not
//! necessarily contiguous. Entries (16-byte EQEs, 64-byte CQEs) never cross
//! a page; a WQE's SGL may wrap from the end of the ring to its start.

use crate::memory::{GuestMemory, Window};

pub const PAGE: usize = 4096;

/// A ring buffer made of guest pages.
#[derive(Clone, Debug)]
pub struct Ring {
    pages: Vec<Window>,
}

impl Ring {
    /// The ring over `gpas` (page-aligned guest-physical addresses), or the
    /// first address that is not backed by guest memory.
    pub fn new(mem: &GuestMemory, gpas: &[u64]) -> Result<Ring, u64> {
        let mut pages = Vec::with_capacity(gpas.len());
        for &a in gpas {
            if a % PAGE as u64 != 0 {
                return Err(a);
            }
            pages.push(mem.window(a, PAGE).ok_or(a)?);
        }
        Ok(Ring { pages })
    }

    pub fn len(&self) -> usize {
        self.pages.len() * PAGE
    }

    pub fn is_empty(&self) -> bool {
        self.pages.is_empty()
    }

    /// Copies `out.len()` bytes starting at ring offset `off`, wrapping at
    /// the end of the ring.
    pub fn read_wrapping(&self, off: usize, out: &mut [u8]) {
        let mut off = off % self.len();
        let mut done = 0;
        while done < out.len() {
            let (p, o) = (off / PAGE, off % PAGE);
            let n = (PAGE - o).min(out.len() - done);
            self.pages[p].read(o, &mut out[done..done + n]);
            done += n;
            off = (off + n) % self.len();
        }
    }

    /// Writes one entry (a CQE or EQE of `body.len() + 4` bytes) at `off`
    /// with its owner-carrying last dword stored last.
    pub fn write_entry(&self, off: usize, body: &[u8], last: u32) {
        let (p, o) = (off / PAGE, off % PAGE);
        self.pages[p].write_entry(o, body, last);
    }

    /// The guest-physical address of ring offset `off`.
    pub fn gpa(&self, off: usize) -> u64 {
        self.pages[off / PAGE].gpa() + (off % PAGE) as u64
    }
}

/// The producer state of an entry queue (CQ or EQ): `prod` counts entries
/// written, starting at `count` so the first lap carries owner value 1.
#[derive(Clone, Debug)]
pub struct Producer {
    pub ring: Ring,
    pub entry_size: usize,
    pub count: u32,
    pub prod: u64,
    /// Whether the next entry should notify (EQE for a CQ, interrupt for an
    /// EQ). Cleared by the notification, set again by an arming doorbell.
    pub armed: bool,
}

/// Owner bits are three bits wide for CQEs and EQEs.
const OWNER_MASK: u64 = 7;

impl Producer {
    pub fn new(ring: Ring, entry_size: usize, armed: bool) -> Producer {
        let count = (ring.len() / entry_size) as u32;
        Producer {
            ring,
            entry_size,
            count,
            prod: u64::from(count),
            armed,
        }
    }

    /// Writes the next entry; returns whether it should notify (the queue
    /// was armed, and is disarmed by this entry).
    pub fn push(&mut self, body: &[u8], last_without_owner: u32, owner_shift: u32) -> bool {
        assert_eq!(body.len() + 4, self.entry_size);
        let count = u64::from(self.count);
        let slot = (self.prod % count) as usize;
        let owner = ((self.prod / count) & OWNER_MASK) as u32;
        self.ring.write_entry(
            slot * self.entry_size,
            body,
            last_without_owner | owner << owner_shift,
        );
        self.prod += 1;
        std::mem::take(&mut self.armed)
    }

    /// An arming doorbell with the driver's consumer index `tail` (modulo
    /// `count << 3`). Returns whether to notify now: entries the driver has
    /// not consumed are already waiting. `Err` if `tail` is more than a
    /// ring ahead or behind (an overflow): not armed.
    pub fn arm(&mut self, tail: u32) -> Result<bool, u64> {
        let m = u64::from(self.count) << 3;
        let diff = (self.prod % m + m - u64::from(tail) % m) % m;
        if diff == 0 {
            self.armed = true;
            Ok(false)
        } else if diff <= u64::from(self.count) {
            self.armed = false;
            Ok(true)
        } else {
            Err(diff)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;
    use std::io::Write;

    pub(crate) fn guest(len: usize) -> GuestMemory {
        // SAFETY: memfd_create with a static NUL-terminated name.
        let fd = unsafe { libc::memfd_create(c"ring".as_ptr(), 0) };
        // SAFETY: the descriptor was just created and is ours.
        let mut f = unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        f.write_all(&vec![0u8; len]).unwrap();
        let gm = GuestMemory::default();
        gm.map(0, len as u64, &f, 0).unwrap();
        gm
    }

    #[test]
    fn ring_pages_wrap_and_scatter() {
        let gm = guest(4 * PAGE);
        // Two pages out of order.
        let r = Ring::new(&gm, &[3 * PAGE as u64, PAGE as u64]).unwrap();
        assert_eq!(r.len(), 2 * PAGE);
        gm.window(4 * PAGE as u64 - 4, 4).unwrap().write(0, b"abcd");
        gm.window(PAGE as u64, 4).unwrap().write(0, b"efgh");
        let mut b = [0u8; 8];
        r.read_wrapping(PAGE - 4, &mut b);
        assert_eq!(&b, b"abcdefgh");
        gm.window(3 * PAGE as u64, 2).unwrap().write(0, b"ij");
        r.read_wrapping(2 * PAGE - 4, &mut b[..6]);
        assert_eq!(&b[..6], b"\0\0\0\0ij");
        assert_eq!(r.gpa(PAGE + 8), PAGE as u64 + 8);
        assert!(Ring::new(&gm, &[5 * PAGE as u64]).is_err());
        assert!(Ring::new(&gm, &[8]).is_err());
    }

    #[test]
    fn producer_owner_bits_and_arming() {
        let gm = guest(PAGE);
        let ring = Ring::new(&gm, &[0]).unwrap();
        let mut p = Producer::new(ring, 16, true);
        assert_eq!(p.count, 256);
        assert!(p.push(&[0; 12], 0x81, 29));
        assert!(!p.push(&[0; 12], 0x81, 29));
        let w = gm.window(0, 32).unwrap();
        assert_eq!(w.read_u32(12), 0x81 | 1 << 29);
        // The driver consumed one of two (head 257): entries wait, notify now.
        assert_eq!(p.arm(257), Ok(true));
        assert!(!p.armed);
        // Consumed both: armed for the next.
        assert_eq!(p.arm(258), Ok(false));
        assert!(p.armed);
        // A tail far away is an overflow.
        assert!(p.arm(258 + 1000).is_err());
        // Lap two carries owner 2.
        for _ in 0..254 {
            p.push(&[0; 12], 0, 29);
        }
        p.push(&[0; 12], 0, 29);
        assert_eq!(w.read_u32(12) >> 29, 2);
    }
}

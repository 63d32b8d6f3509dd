//! The receive buffer's sections: the host writes each RNDIS message it
//! sends into free sections and names the first one as the transfer-page
//! packet's transaction id; the guest's acknowledgement frees them.
//! (DPDK's netvsc indexes its per-section bookkeeping with that id, so it
//! must stay below the section count.)

use std::collections::BTreeMap;

pub struct Sections {
    free: Vec<bool>,
    /// First section of each outstanding message -> its section count.
    busy: BTreeMap<u32, u32>,
    cursor: usize,
    pub slot_size: u32,
}

impl Sections {
    pub fn new(count: u32, slot_size: u32) -> Sections {
        Sections {
            free: vec![true; count as usize],
            busy: BTreeMap::new(),
            cursor: 0,
            slot_size,
        }
    }

    pub fn count(&self) -> u32 {
        self.free.len() as u32
    }

    pub fn outstanding(&self) -> usize {
        self.busy.len()
    }

    /// Reserves contiguous sections for `bytes`; returns the first.
    pub fn alloc(&mut self, bytes: usize) -> Option<u32> {
        let n = bytes.div_ceil(self.slot_size as usize).max(1);
        let total = self.free.len();
        if n > total {
            return None;
        }
        let mut start = self.cursor;
        let mut scanned = 0;
        while scanned < total {
            if start + n > total {
                scanned += total - start;
                start = 0;
                continue;
            }
            match self.free[start..start + n].iter().position(|f| !f) {
                None => {
                    self.free[start..start + n]
                        .iter_mut()
                        .for_each(|f| *f = false);
                    self.busy.insert(start as u32, n as u32);
                    self.cursor = (start + n) % total;
                    return Some(start as u32);
                }
                Some(busy_at) => {
                    scanned += busy_at + 1;
                    start += busy_at + 1;
                }
            }
        }
        None
    }

    /// Frees the message starting at `first`; false if none is outstanding.
    pub fn release(&mut self, first: u32) -> bool {
        match self.busy.remove(&first) {
            Some(n) => {
                let s = first as usize;
                self.free[s..s + n as usize]
                    .iter_mut()
                    .for_each(|f| *f = true);
                true
            }
            None => false,
        }
    }

    /// Forgets every outstanding message (the guest disconnected the buffer).
    pub fn reset(&mut self) {
        self.free.iter_mut().for_each(|f| *f = true);
        self.busy.clear();
        self.cursor = 0;
    }

    pub fn offset(&self, first: u32) -> usize {
        first as usize * self.slot_size as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocates_contiguously_and_wraps() {
        let mut s = Sections::new(8, 100);
        assert_eq!(s.alloc(250), Some(0)); // 3 sections
        assert_eq!(s.alloc(100), Some(3));
        assert_eq!(s.alloc(400), Some(4)); // 4 sections, up to the end
        assert_eq!(s.alloc(1), None);
        assert!(s.release(3));
        assert!(!s.release(3));
        assert_eq!(s.alloc(150), None, "one free section, two wanted");
        assert_eq!(s.alloc(10), Some(3));
        assert!(s.release(0));
        assert_eq!(s.alloc(200), Some(0));
        assert_eq!(s.outstanding(), 3);
        s.reset();
        assert_eq!(s.alloc(800), Some(0));
        assert_eq!(s.alloc(900), None);
    }
}

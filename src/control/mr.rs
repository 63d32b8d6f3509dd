//! Memory registration. The device checks every SGE against a registered
//! region (lkey), so each mbuf's buffer must lie in one.
//!
//! At start the driver registers the memory of every mempool in the process
//! (and of mempools created later, through the mempool event callback), so
//! the data path normally only looks up a small per-queue cache. A miss (an
//! external buffer, a pool created before the callback) takes the port's
//! registry lock once and registers the buffer's pages.

use crate::ffi;
use crate::hw::verbs::{Mr, Pd};
use ::log::{debug, warn};
use std::ffi::c_void;

/// A registered range as the data path sees it.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Region {
    pub start: usize,
    pub end: usize,
    pub lkey: u32,
}

impl Region {
    #[inline(always)]
    fn covers(&self, addr: usize, len: usize) -> bool {
        addr >= self.start && addr.wrapping_add(len) <= self.end
    }
}

/// Per-queue lookup cache, most recently used first. Lives in the queue
/// (shared memory), so lkeys are the same in every process.
#[repr(C)]
pub struct Cache {
    entries: [Region; Cache::SIZE],
    len: u32,
}

impl Cache {
    pub const SIZE: usize = 8;

    pub const fn new() -> Cache {
        Cache {
            entries: [Region {
                start: 0,
                end: 0,
                lkey: 0,
            }; Cache::SIZE],
            len: 0,
        }
    }

    #[inline(always)]
    pub fn lookup(&mut self, addr: usize, len: usize) -> Option<u32> {
        let n = self.len as usize;
        if n > 0 && self.entries[0].covers(addr, len) {
            return Some(self.entries[0].lkey);
        }
        for i in 1..n.min(Self::SIZE) {
            if self.entries[i].covers(addr, len) {
                let hit = self.entries[i];
                self.entries.copy_within(0..i, 1);
                self.entries[0] = hit;
                return Some(hit.lkey);
            }
        }
        None
    }

    /// The lkey covering `[addr, addr + len)`: cached, else registered with
    /// the port (in the primary process) and cached.
    #[inline(always)]
    pub fn lkey(&mut self, port_id: u16, addr: usize, len: usize) -> Option<u32> {
        if let Some(k) = self.lookup(addr, len) {
            return Some(k);
        }
        let r = crate::control::queues::register_memory(port_id, addr, len)?;
        self.insert(r);
        Some(r.lkey)
    }

    /// Forgets every entry (the registrations are gone with the device).
    pub fn clear(&mut self) {
        self.len = 0;
    }

    pub fn insert(&mut self, r: Region) {
        let n = (self.len as usize).min(Self::SIZE - 1);
        self.entries.copy_within(0..n, 1);
        self.entries[0] = r;
        self.len = (n + 1) as u32;
    }
}

impl Default for Cache {
    fn default() -> Self {
        Self::new()
    }
}

/// Page-aligned `[start, end)` around `[addr, addr + len)`.
fn page_span(addr: usize, len: usize) -> (usize, usize) {
    let page = ffi::compat::page_size().max(4096);
    let start = addr & !(page - 1);
    let end = (addr + len).div_ceil(page) * page;
    (start, end)
}

struct Entry {
    region: Region,
    _mr: Mr,
}

/// All registrations of a port (process-local, primary). Sorted by start.
pub struct Registry {
    pd: Option<*mut ffi::ibv_pd>,
    max_mr_size: u64,
    entries: Vec<Entry>,
    pub failures: u64,
}

// SAFETY: the PD pointer is only used under the registry's mutex.
unsafe impl Send for Registry {}

impl Registry {
    pub const fn new() -> Registry {
        Registry {
            pd: None,
            max_mr_size: 0,
            entries: Vec::new(),
            failures: 0,
        }
    }

    /// Attaches the device's PD; registrations made from now on use it.
    pub fn attach(&mut self, pd: &Pd, max_mr_size: u64) {
        self.pd = Some(pd.as_ptr());
        self.max_mr_size = max_mr_size;
    }

    /// Deregisters everything and forgets the PD (before the PD is freed).
    pub fn detach(&mut self) {
        self.entries.clear();
        self.pd = None;
    }

    pub fn find(&self, addr: usize, len: usize) -> Option<Region> {
        let i = self.entries.partition_point(|e| e.region.start <= addr);
        let e = self.entries.get(i.checked_sub(1)?)?;
        e.region.covers(addr, len).then_some(e.region)
    }

    /// Registers the pages around `[addr, addr + len)` unless covered.
    pub fn register(&mut self, addr: usize, len: usize) -> Option<Region> {
        if let Some(r) = self.find(addr, len) {
            return Some(r);
        }
        let pd = self.pd?;
        let (start, end) = page_span(addr, len);
        if self.max_mr_size != 0 && (end - start) as u64 > self.max_mr_size {
            warn!(
                "memory chunk {start:#x}+{:#x} exceeds the device's max MR size {:#x}",
                end - start,
                self.max_mr_size
            );
            self.failures += 1;
            return None;
        }
        // SAFETY: `pd` is the attached, live PD (detach clears it first).
        match unsafe { Mr::register_raw(pd, start as *mut c_void, end - start) } {
            Ok(mr) => {
                let region = Region {
                    start,
                    end,
                    lkey: mr.lkey(),
                };
                let i = self.entries.partition_point(|e| e.region.start <= start);
                self.entries.insert(i, Entry { region, _mr: mr });
                debug!("registered {start:#x}..{end:#x} lkey {:#x}", region.lkey);
                Some(region)
            }
            Err(e) => {
                self.failures += 1;
                warn!(
                    "cannot register memory {start:#x}..{end:#x}: {e}; packets in it are dropped"
                );
                None
            }
        }
    }

    /// Registers every memory chunk of a mempool.
    pub fn register_mempool(&mut self, mp: *mut ffi::rte_mempool) -> bool {
        let mut chunks: Vec<(usize, usize)> = Vec::new();
        unsafe extern "C" fn chunk(
            _mp: *mut ffi::rte_mempool,
            opaque: *mut c_void,
            memhdr: *mut ffi::rte_mempool_memhdr,
            _idx: u32,
        ) {
            // SAFETY: `opaque` is the Vec passed below; memhdr is valid in the callback.
            unsafe {
                let v = &mut *(opaque as *mut Vec<(usize, usize)>);
                v.push(((*memhdr).addr as usize, (*memhdr).len));
            }
        }
        // SAFETY: iterates the pool's chunks synchronously.
        unsafe { ffi::rte_mempool_mem_iter(mp, Some(chunk), &mut chunks as *mut _ as *mut c_void) };
        chunks
            .into_iter()
            .all(|(addr, len)| self.register(addr, len).is_some())
    }
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_keeps_the_most_recent_region_first_and_evicts_the_oldest() {
        let mut c = Cache::new();
        assert_eq!(c.lookup(100, 10), None);
        for i in 0..10usize {
            c.insert(Region {
                start: i * 1000,
                end: i * 1000 + 1000,
                lkey: i as u32,
            });
        }
        assert_eq!(c.lookup(9500, 100), Some(9));
        assert_eq!(c.lookup(2500, 100), Some(2));
        assert_eq!(c.entries[0].lkey, 2);
        assert_eq!(c.lookup(500, 10), None, "evicted");
        assert_eq!(c.lookup(2990, 20), None, "crosses the region end");
    }

    #[test]
    fn page_spans_cover_the_buffer() {
        let (s, e) = page_span(4097, 10);
        assert_eq!((s, e), (4096, 8192));
        let (s, e) = page_span(4096, 4096);
        assert_eq!((s, e), (4096, 8192));
    }
}

//! A port's memory registrations ([`Registry`]): the regions registered on
//! its device's PD, sorted by start, that the data path's cache misses and
//! `mr`'s registration of every mempool fill.

use crate::dataplane::mr_cache::Region;
use crate::ffi;
use crate::hw::verbs::{Mr, Pd};
use ::log::{debug, warn};
use std::ffi::c_void;

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
    fn page_spans_cover_the_buffer() {
        let (s, e) = page_span(4097, 10);
        assert_eq!((s, e), (4096, 8192));
        let (s, e) = page_span(4096, 4096);
        assert_eq!((s, e), (4096, 8192));
    }
}

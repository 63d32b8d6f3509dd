//! The per-queue memory-region cache. The device checks every SGE against
//! a registered region (lkey); control registers every mempool's memory at
//! start, so a burst normally only looks its buffers up here. On a miss (an
//! external buffer, a pool created later) the cache asks the registration
//! hook control installed ([`set_register_hook`]): the data path does not
//! know how registration works, in which process, or under which lock.

#![forbid(unsafe_code)]

use std::sync::OnceLock;

/// Registers memory covering `[addr, addr + len)` for port `port_id`.
pub type RegisterFn = fn(port_id: u16, addr: usize, len: usize) -> Option<Region>;

static REGISTER: OnceLock<RegisterFn> = OnceLock::new();

/// Control installs how a cache miss is served (once per process).
pub fn set_register_hook(f: RegisterFn) {
    let _ = REGISTER.set(f);
}

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
    pub fn covers(&self, addr: usize, len: usize) -> bool {
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

    /// The lkey covering `[addr, addr + len)`: cached, else registered
    /// through the hook control installed, and cached.
    #[inline(always)]
    pub fn lkey(&mut self, port_id: u16, addr: usize, len: usize) -> Option<u32> {
        if let Some(k) = self.lookup(addr, len) {
            return Some(k);
        }
        let register = *REGISTER.get()?;
        let r = register(port_id, addr, len)?;
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
}

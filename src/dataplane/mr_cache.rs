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
    /// A region that covers nothing.
    pub const NONE: Region = Region {
        start: usize::MAX,
        end: 0,
        lkey: 0,
    };

    #[inline(always)]
    pub fn covers(&self, addr: usize, len: usize) -> bool {
        addr >= self.start && addr.checked_add(len).is_some_and(|e| e <= self.end)
    }
}

/// A region prepared for checking buffers of one length: `addr` (with
/// `len` bytes) lies inside iff `addr - start <= span`, one subtraction and
/// one compare per buffer.
#[derive(Clone, Copy, Debug)]
pub struct FixedLen {
    start: usize,
    span: usize,
    pub lkey: u32,
}

impl FixedLen {
    #[inline(always)]
    pub fn covers(&self, addr: usize) -> bool {
        addr.wrapping_sub(self.start) <= self.span
    }
}

impl Region {
    /// The check of `len`-byte buffers against this region. A region
    /// smaller than `len` (or [`Region::NONE`]) covers only the address
    /// `usize::MAX`, where no buffer of one byte or more can start.
    pub fn fixed_len(&self, len: usize) -> FixedLen {
        match self.end.checked_sub(len) {
            Some(last) if last >= self.start => FixedLen {
                start: self.start,
                span: last - self.start,
                lkey: self.lkey,
            },
            _ => FixedLen {
                start: usize::MAX,
                span: 0,
                lkey: 0,
            },
        }
    }
}

/// A region prepared for checking buffers of any length: two compares per
/// buffer, none of them an overflow check.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    start: usize,
    size: usize,
    pub lkey: u32,
}

impl Bounds {
    /// The region's first address and size, for a check of its own (the
    /// transmit path's vector step) that must equal [`Bounds::covers`].
    #[inline(always)]
    pub fn parts(&self) -> (usize, usize) {
        (self.start, self.size)
    }

    #[inline(always)]
    pub fn covers(&self, addr: usize, len: usize) -> bool {
        let off = addr.wrapping_sub(self.start);
        off <= self.size && len <= self.size - off
    }
}

impl Region {
    /// The check of buffers against this region ([`Region::NONE`] covers
    /// nothing: only `usize::MAX` with length 0).
    pub fn bounds(&self) -> Bounds {
        match self.end.checked_sub(self.start) {
            Some(size) => Bounds {
                start: self.start,
                size,
                lkey: self.lkey,
            },
            None => Bounds {
                start: usize::MAX,
                size: 0,
                lkey: 0,
            },
        }
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

    /// The most recently used region ([`Region::NONE`] if none): a burst
    /// checks its buffers against it and searches the cache only on a miss.
    #[inline(always)]
    pub fn first(&self) -> Region {
        if self.len > 0 {
            self.entries[0]
        } else {
            Region::NONE
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
        assert_eq!(c.first().lkey, 2, "the last hit comes first");
    }

    #[test]
    fn a_fixed_length_check_agrees_with_covers() {
        let regions = [
            Region {
                start: 0x1000,
                end: 0x3000,
                lkey: 7,
            },
            Region {
                start: 0x1000,
                end: 0x1040,
                lkey: 7,
            },
            Region {
                start: 0x1000,
                end: 0x103f,
                lkey: 7,
            },
            Region {
                start: usize::MAX - 0x100,
                end: usize::MAX,
                lkey: 7,
            },
            Region::NONE,
        ];
        for r in regions {
            for len in [1usize, 64, 0x2000] {
                let f = r.fixed_len(len);
                let probes = [
                    0,
                    0xfff,
                    0x1000,
                    0x1001,
                    0x2fc0,
                    0x2fc1,
                    0x3000,
                    r.start,
                    r.end,
                    r.end.wrapping_sub(len),
                    r.end.wrapping_sub(len).wrapping_add(1),
                    usize::MAX - 1,
                    usize::MAX,
                ];
                for addr in probes {
                    if addr == usize::MAX {
                        continue; // no buffer of `len` >= 1 bytes starts there
                    }
                    assert_eq!(f.covers(addr), r.covers(addr, len), "{r:?} {addr:#x}+{len}");
                }
            }
        }
    }

    #[test]
    fn bounds_agree_with_covers() {
        let regions = [
            Region {
                start: 0x1000,
                end: 0x3000,
                lkey: 7,
            },
            Region {
                start: 0x1000,
                end: 0x1001,
                lkey: 7,
            },
            Region {
                start: usize::MAX - 0x100,
                end: usize::MAX,
                lkey: 7,
            },
            Region {
                start: 0,
                end: usize::MAX,
                lkey: 7,
            },
            Region::NONE,
        ];
        for r in regions {
            let b = r.bounds();
            for len in [0usize, 1, 64, 0x1fff, 0x2000, 0x2001, usize::MAX] {
                let probes = [
                    0,
                    0xfff,
                    0x1000,
                    0x1001,
                    0x2fff,
                    0x3000,
                    r.start,
                    r.end,
                    r.end.wrapping_sub(len),
                    r.end.wrapping_sub(len).wrapping_add(1),
                    usize::MAX - 1,
                ];
                for addr in probes {
                    if addr == usize::MAX && len == 0 {
                        continue; // the one point Region::NONE's bounds hold
                    }
                    assert_eq!(
                        b.covers(addr, len),
                        r.covers(addr, len),
                        "{r:?} {addr:#x}+{len}"
                    );
                }
            }
        }
    }

    #[test]
    fn an_empty_cache_offers_a_region_that_covers_nothing() {
        let c = Cache::new();
        for (addr, len) in [(0, 0), (0, 1), (usize::MAX, 0), (12345, 64)] {
            assert!(!c.first().covers(addr, len));
        }
    }
}

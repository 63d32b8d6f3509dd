//! What every process reads of a port: the block in `dev_private` (DPDK
//! shared memory). The primary writes it; secondaries answer read-only
//! queries (device info, firmware version, RSS key, hash types and
//! redirection table) from it, as the primary does, with no IPC.

use crate::control::state::limits::Limits;
use crate::control::state::rss_conf::{Rss, RETA_SIZE};
use crate::ffi;
use std::sync::atomic::{fence, AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering};

const FW_LEN: usize = 64;

#[repr(C)]
pub struct Shared {
    pub limits: Limits,
    fw: [AtomicU8; FW_LEN],
    rss: SharedRss,
}

/// A copy of the port's RSS configuration behind a sequence lock: the
/// primary writes it under its control lock, any process reads it.
#[repr(C)]
struct SharedRss {
    /// Odd while the primary writes.
    seq: AtomicU32,
    key: [AtomicU8; 40],
    hf: AtomicU64,
    reta: [AtomicU16; RETA_SIZE],
}

impl Shared {
    /// The block of a port of ours (any process).
    pub fn of(data: &ffi::rte_eth_dev_data) -> &Shared {
        // SAFETY: the primary points dev_private at a `Shared` before the
        // port is published, and ethdev frees it only when the port is
        // released; all its fields are atomics or written before publishing.
        unsafe { &*(data.dev_private as *const Shared) }
    }

    /// Initialises a block in fresh, zeroed shared memory.
    pub fn init(at: *mut Shared, limits: Limits) {
        // SAFETY: the caller passes zeroed memory for one `Shared` (all-zero
        // bytes are valid for every field), not yet visible to any process.
        unsafe {
            std::ptr::addr_of_mut!((*at).limits).write(limits);
        }
    }

    pub fn set_fw_version(&self, v: &str) {
        let bytes = v.as_bytes();
        let n = bytes.len().min(FW_LEN - 1);
        for (i, slot) in self.fw.iter().enumerate() {
            slot.store(if i < n { bytes[i] } else { 0 }, Ordering::Relaxed);
        }
    }

    pub fn fw_version(&self) -> String {
        let b: Vec<u8> = self
            .fw
            .iter()
            .map(|a| a.load(Ordering::Relaxed))
            .take_while(|&b| b != 0)
            .collect();
        String::from_utf8_lossy(&b).into_owned()
    }

    /// Primary, under the control lock: publishes the RSS configuration.
    pub fn set_rss(&self, rss: &Rss) {
        let r = &self.rss;
        let s = r.seq.load(Ordering::Relaxed);
        r.seq.store(s.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        for (a, &b) in r.key.iter().zip(&rss.key) {
            a.store(b, Ordering::Relaxed);
        }
        r.hf.store(rss.hf, Ordering::Relaxed);
        for (a, &q) in r.reta.iter().zip(&rss.reta) {
            a.store(q, Ordering::Relaxed);
        }
        r.seq.store(s.wrapping_add(2), Ordering::Release);
    }

    /// A consistent copy of the RSS configuration.
    pub fn rss(&self) -> Rss {
        let r = &self.rss;
        loop {
            let s0 = r.seq.load(Ordering::Acquire);
            let mut out = Rss::new();
            for (b, a) in out.key.iter_mut().zip(&r.key) {
                *b = a.load(Ordering::Relaxed);
            }
            out.hf = r.hf.load(Ordering::Relaxed);
            for (q, a) in out.reta.iter_mut().zip(&r.reta) {
                *q = a.load(Ordering::Relaxed);
            }
            fence(Ordering::Acquire);
            if s0.is_multiple_of(2) && r.seq.load(Ordering::Relaxed) == s0 {
                return out;
            }
            std::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block() -> Box<Shared> {
        // SAFETY: zeroed memory is a valid `Shared` (atomics and integers).
        let b: Box<Shared> = unsafe { Box::new(std::mem::zeroed()) };
        b
    }

    #[test]
    fn rss_and_firmware_round_trip() {
        let s = block();
        let mut rss = Rss::new();
        rss.key[3] = 0x77;
        rss.hf = 0xa38c;
        rss.reta[63] = 5;
        s.set_rss(&rss);
        let got = s.rss();
        assert_eq!((got.key, got.hf, got.reta), (rss.key, rss.hf, rss.reta));
        s.set_fw_version(&"x".repeat(100));
        assert_eq!(s.fw_version().len(), FW_LEN - 1);
        s.set_fw_version("1.2 net_mana-rs 0.1.0");
        assert_eq!(s.fw_version(), "1.2 net_mana-rs 0.1.0");
    }

    #[test]
    fn readers_never_see_a_half_written_configuration() {
        let s: &'static Shared = Box::leak(block());
        let mut a = Rss::new();
        a.reta = [1; RETA_SIZE];
        a.hf = 1;
        let mut b = Rss::new();
        b.reta = [2; RETA_SIZE];
        b.hf = 2;
        s.set_rss(&a);
        let w = std::thread::spawn(move || {
            for i in 0..20_000 {
                s.set_rss(if i % 2 == 0 { &b } else { &a });
            }
        });
        for _ in 0..20_000 {
            let r = s.rss();
            assert!(r.reta.iter().all(|&q| u64::from(q) == r.hf), "torn read");
        }
        w.join().unwrap();
    }
}

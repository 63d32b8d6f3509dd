//! A port's reset state: where the hand-off between the interrupt thread,
//! the recovery thread and `dev_close` stands (`handoff`), and what the
//! recovery watches. The recovery itself is `reset`.

use crate::control::handoff::{Handoff, Phase};
use crate::ffi;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How long a reset may keep the device away before recovery gives up.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the PCI function may stay away during a recovery before it
/// counts as hot removed: an FPGA reconfiguration removes it and rescans
/// the bus 10 s later (Linux's `FPGA_RECONFIG` handler); DPDK's C driver
/// waits 15 s too. EAL's removal event ends the wait at once.
const DEFAULT_REMOVAL_GRACE: Duration = Duration::from_secs(15);

/// A port's reset state: the hand-off, plus what the recovery watches.
pub struct Reset {
    pub handoff: Handoff,
    /// EAL reported the PCI function removed.
    pub removed: AtomicBool,
    pub timeout: Duration,
    pub removal_grace: Duration,
}

fn env_ms(name: &str, default: Duration) -> Duration {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .map(Duration::from_millis)
        .unwrap_or(default)
}

impl Reset {
    pub fn new() -> Reset {
        Reset {
            handoff: Handoff::new(),
            removed: AtomicBool::new(false),
            timeout: env_ms("NET_MANA_RESET_TIMEOUT_MS", DEFAULT_TIMEOUT),
            removal_grace: env_ms("NET_MANA_REMOVAL_GRACE_MS", DEFAULT_REMOVAL_GRACE),
        }
    }

    pub fn phase(&self) -> Phase {
        self.handoff.phase()
    }

    pub fn mark_removed(&self) {
        self.removed.store(true, Ordering::Release);
    }

    /// For `dev_close`: cancels a recovery in progress (see `Handoff`).
    pub fn cancel_and_wait(&self) {
        // SAFETY: FFI query.
        let on_intr = unsafe { ffi::rte_thread_is_intr() } != 0;
        self.handoff.cancel_and_wait(on_intr);
    }
}

impl Default for Reset {
    fn default() -> Self {
        Self::new()
    }
}

//! The per-queue burst gate: lets the control path stop new bursts and wait
//! for the ones in flight, at the cost of one uncontended atomic exchange
//! per burst.
//!
//! Two flags, each written by one side only: `busy` by the queue's data-path
//! thread, `blocked` by the control path. Both sides publish their own flag
//! with a sequentially consistent operation and then read the other's
//! (Dekker), so either the burst sees `blocked` and backs out, or the
//! control path sees `busy` and waits for the burst to leave.

#[cfg(loom)]
use loom::sync::atomic::{AtomicBool, AtomicU32, Ordering};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

#[repr(C)]
pub struct Gate {
    busy: AtomicU32,
    blocked: AtomicBool,
}

/// Proof that a burst is inside the gate; leaving is a plain release store
/// on every return path, because it happens on drop.
pub struct Pass<'a>(&'a AtomicU32);

impl Drop for Pass<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        self.0.store(0, Ordering::Release);
    }
}

impl Gate {
    /// A gate that starts blocked: queues open it when they are started.
    #[cfg(not(loom))]
    pub const fn new() -> Gate {
        Gate {
            busy: AtomicU32::new(0),
            blocked: AtomicBool::new(true),
        }
    }

    #[cfg(loom)]
    pub fn new() -> Gate {
        Gate {
            busy: AtomicU32::new(0),
            blocked: AtomicBool::new(true),
        }
    }

    /// Enters the gate, or `None` if the control path has blocked it.
    #[inline(always)]
    pub fn enter(&self) -> Option<Pass<'_>> {
        self.busy.swap(1, Ordering::SeqCst);
        if self.blocked.load(Ordering::SeqCst) {
            self.busy.store(0, Ordering::Release);
            return None;
        }
        Some(Pass(&self.busy))
    }

    /// Blocks new bursts and waits until none is inside. `relax` runs
    /// between polls of a burst still in flight.
    pub fn close(&self, mut relax: impl FnMut()) {
        self.blocked.store(true, Ordering::SeqCst);
        while self.busy.load(Ordering::SeqCst) != 0 {
            relax();
        }
    }

    /// Lets bursts in again. The caller made the queue usable before this.
    pub fn open(&self) {
        self.blocked.store(false, Ordering::SeqCst);
    }
}

#[cfg(not(loom))]
impl Default for Gate {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_closed_gate_refuses_bursts_and_an_open_one_admits_them() {
        let g = Gate::new();
        assert!(g.enter().is_none(), "new gates start closed");
        g.open();
        {
            let _p = g.enter().expect("open gate admits");
            assert_eq!(g.busy.load(Ordering::SeqCst), 1);
        }
        assert_eq!(g.busy.load(Ordering::SeqCst), 0, "leaving clears busy");
        g.close(|| {});
        assert!(g.enter().is_none());
        assert_eq!(
            g.busy.load(Ordering::SeqCst),
            0,
            "a refused burst leaves no trace"
        );
    }

    #[test]
    fn close_waits_for_the_burst_in_flight() {
        use std::sync::Arc;
        let g = Arc::new(Gate::new());
        g.open();
        let pass = g.enter().unwrap();
        let g2 = g.clone();
        let t = std::thread::spawn(move || {
            let mut polls = 0u32;
            g2.close(|| {
                polls += 1;
                std::thread::yield_now();
            });
            polls
        });
        std::thread::sleep(std::time::Duration::from_millis(50));
        drop(pass);
        assert!(t.join().unwrap() > 0, "close had to wait");
        assert!(g.enter().is_none());
    }
}

/// Exhaustive interleavings (run with `RUSTFLAGS="--cfg loom" cargo test
/// --release --lib gate::loom`): a burst never runs after `close` returned,
/// and `close` never waits on an idle queue forever.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::atomic::AtomicUsize;
    use loom::sync::Arc;
    use loom::thread;

    #[test]
    fn no_burst_runs_on_a_torn_down_queue() {
        loom::model(|| {
            let gate = Arc::new(Gate::new());
            gate.open();
            // 1 while the queue's resources exist; the teardown sets 0.
            let alive = Arc::new(AtomicUsize::new(1));
            let (g, a) = (gate.clone(), alive.clone());
            let burst = thread::spawn(move || {
                for _ in 0..2 {
                    if let Some(_p) = g.enter() {
                        assert_eq!(a.load(Ordering::SeqCst), 1, "burst on a torn-down queue");
                    }
                }
            });
            gate.close(thread::yield_now);
            alive.store(0, Ordering::SeqCst);
            burst.join().unwrap();
        });
    }

    #[test]
    fn reopened_gates_admit_bursts_again() {
        loom::model(|| {
            let gate = Arc::new(Gate::new());
            gate.open();
            let g = gate.clone();
            let t = thread::spawn(move || g.enter().is_some());
            gate.close(thread::yield_now);
            gate.open();
            t.join().unwrap();
            assert!(gate.enter().is_some());
        });
    }
}

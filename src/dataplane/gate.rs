//! The per-queue burst gate: lets the control path stop new bursts and wait
//! for the ones in flight, at the cost of one uncontended atomic operation
//! per burst.
//!
//! `state` holds BUSY while a burst is inside and BLOCKED while the control
//! path keeps bursts out; the two are never set together. A burst enters with
//! a compare-exchange 0 -> BUSY and leaves with a plain release store of 0.
//! The control path closes with a compare-exchange 0 -> BLOCKED, so it can
//! only succeed between bursts, and the leaving store can never wipe BLOCKED.
//! `closing` (a plain load for the burst) makes bursts stop entering while
//! the control path waits, so a busy queue cannot starve it.

#[cfg(loom)]
use loom::sync::atomic::{AtomicBool, AtomicU32, Ordering};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

const BUSY: u32 = 1;
const BLOCKED: u32 = 2;

#[repr(C)]
pub struct Gate {
    state: AtomicU32,
    closing: AtomicBool,
}

/// Proof that a burst is inside the gate; leaving happens on drop, so
/// every return path of a burst leaves.
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
            state: AtomicU32::new(BLOCKED),
            closing: AtomicBool::new(false),
        }
    }

    #[cfg(loom)]
    pub fn new() -> Gate {
        Gate {
            state: AtomicU32::new(BLOCKED),
            closing: AtomicBool::new(false),
        }
    }

    /// Enters the gate, or `None` if the control path has blocked it.
    #[inline(always)]
    pub fn enter(&self) -> Option<Pass<'_>> {
        if self.closing.load(Ordering::Relaxed) {
            return None;
        }
        self.state
            .compare_exchange(0, BUSY, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| Pass(&self.state))
    }

    /// Blocks new bursts and waits until none is inside. `relax` runs
    /// between polls of a burst still in flight.
    pub fn close(&self, mut relax: impl FnMut()) {
        self.closing.store(true, Ordering::Relaxed);
        loop {
            match self
                .state
                .compare_exchange(0, BLOCKED, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => break,
                Err(s) if s & BLOCKED != 0 => break,
                Err(_) => relax(),
            }
        }
    }

    /// True once `close` has returned and until `open`: no burst is inside,
    /// and none can enter.
    pub fn is_closed(&self) -> bool {
        self.state.load(Ordering::Acquire) & BLOCKED != 0
    }

    /// Lets bursts in again. Only the control path calls it, on a closed gate.
    pub fn open(&self) {
        self.closing.store(false, Ordering::Relaxed);
        self.state.store(0, Ordering::Release);
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
            assert_eq!(g.state.load(Ordering::SeqCst), BUSY);
        }
        assert_eq!(g.state.load(Ordering::SeqCst), 0, "leaving clears busy");
        g.close(|| {});
        assert!(g.enter().is_none());
        assert_eq!(
            g.state.load(Ordering::SeqCst),
            BLOCKED,
            "a refused burst leaves no trace"
        );
        g.close(|| panic!("closing a closed gate waits for nothing"));
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
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;
    use loom::thread;

    /// Exhaustive up to three preemptions, as loom recommends.
    fn model(f: impl Fn() + Sync + Send + 'static) {
        let mut b = loom::model::Builder::new();
        b.preemption_bound = Some(3);
        b.max_branches = 100_000;
        b.check(f);
    }

    #[test]
    fn no_burst_runs_on_a_torn_down_queue() {
        model(|| {
            let gate = Arc::new(Gate::new());
            gate.open();
            // The queue's resources: plain memory, so loom flags any access
            // by a burst that is not ordered before the teardown's write.
            let ring = Arc::new(UnsafeCell::new(1u32));
            let (g, r) = (gate.clone(), ring.clone());
            let burst = thread::spawn(move || {
                for _ in 0..2 {
                    if let Some(_p) = g.enter() {
                        // SAFETY: loom checks this access for races.
                        let v = r.with(|p| unsafe { *p });
                        assert_eq!(v, 1, "burst on a torn-down queue");
                    }
                }
            });
            gate.close(thread::yield_now);
            // Teardown: nothing may touch the ring concurrently.
            // SAFETY: loom checks this access for races.
            ring.with_mut(|p| unsafe { *p = 0 });
            burst.join().unwrap();
        });
    }

    #[test]
    fn closing_an_idle_gate_never_waits() {
        model(|| {
            let gate = Gate::new();
            gate.open();
            gate.close(|| panic!("waited on an idle queue"));
            assert!(gate.enter().is_none());
        });
    }

    #[test]
    fn reopened_gates_admit_bursts_again() {
        model(|| {
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

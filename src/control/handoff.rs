//! The recovery hand-off between the EAL interrupt thread (which notices the
//! reset and starts recovery), the recovery thread, and `dev_close` on any
//! thread (which cancels it). Kept apart from the verbs work so loom can
//! check every interleaving: close never waits forever, never misses the
//! recovery thread, and never joins the thread it runs on.

#![forbid(unsafe_code)]

#[cfg(loom)]
use loom::sync::{Condvar, Mutex, MutexGuard};
#[cfg(loom)]
use loom::thread::{self, JoinHandle, ThreadId};
#[cfg(not(loom))]
use std::sync::{Condvar, Mutex, MutexGuard};
#[cfg(not(loom))]
use std::thread::{self, JoinHandle, ThreadId};

use std::time::Duration;

/// The thread builder matching `JoinHandle` (loom's under `--cfg loom`).
pub use thread::Builder as ThreadBuilder;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Active,
    Recovering,
    /// Recovery failed or the function was removed: only stop/close work.
    Failed,
    /// The port was closed (a recovery in progress was cancelled).
    Closed,
}

struct State {
    phase: Phase,
    cancel: bool,
    /// The device reset again while recovering: the recovery starts over.
    again: bool,
    /// The recovery thread switched to Active and has yet to emit
    /// RECOVERY_SUCCESS: a reset now must wait for that event to be out.
    announcing: bool,
    /// A reset arrived while announcing: the recovery thread takes it on
    /// after the event, so the application sees RECOVERING, SUCCESS in turn.
    deferred: bool,
    /// The interrupt thread has decided (started a thread, or not) since
    /// the last `begin`: a closer waits for this, never for a thread that
    /// no one will start.
    decided: bool,
    thread: Option<(JoinHandle<()>, ThreadId)>,
}

pub struct Handoff {
    state: Mutex<State>,
    changed: Condvar,
}

/// What `begin` decided.
#[derive(Debug, PartialEq, Eq)]
pub enum Begin {
    /// A new recovery: emit ERR_RECOVERING and start its thread.
    Recover,
    /// The recovery thread is announcing the last recovery's success; it
    /// recovers from this reset after that (nothing to emit or start here).
    Deferred,
    /// Nothing to do: a recovery runs (and starts over), failed, or the port
    /// is closed.
    Ignore,
}

/// What `start` did.
pub enum Start {
    Started,
    /// `dev_close` ran meanwhile (from the ERR_RECOVERING callback).
    Cancelled,
    Failed(std::io::Error),
}

impl Handoff {
    pub fn new() -> Handoff {
        Handoff {
            state: Mutex::new(State {
                phase: Phase::Active,
                cancel: false,
                again: false,
                announcing: false,
                deferred: false,
                decided: true,
                thread: None,
            }),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn phase(&self) -> Phase {
        self.lock().phase
    }

    pub fn set_phase(&self, phase: Phase) {
        self.lock().phase = phase;
        self.changed.notify_all();
    }

    pub fn cancelled(&self) -> bool {
        self.lock().cancel
    }

    /// Interrupt thread: Active -> Recovering, and what to do about it.
    pub fn begin(&self) -> Begin {
        let mut st = self.lock();
        match st.phase {
            Phase::Active if st.announcing => {
                st.phase = Phase::Recovering;
                st.deferred = true;
                return Begin::Deferred;
            }
            Phase::Active => {}
            Phase::Recovering => {
                st.again = true;
                return Begin::Ignore;
            }
            Phase::Failed | Phase::Closed => return Begin::Ignore,
        }
        st.phase = Phase::Recovering;
        st.cancel = false;
        st.again = false;
        st.decided = false;
        Begin::Recover
    }

    /// Recovery thread, on tearing the old device down: resets it reported
    /// before are moot.
    pub fn forget_again(&self) {
        self.lock().again = false;
    }

    /// Recovery thread, rebuilt: Recovering -> Active, unless the device
    /// reset again meanwhile (false: recover again). Atomic with `begin`, so
    /// a reset is never lost between the two. The thread then emits
    /// RECOVERY_SUCCESS and calls [`Handoff::announced`].
    pub fn activate(&self) -> bool {
        let mut st = self.lock();
        if st.again {
            st.again = false;
            return false;
        }
        st.phase = Phase::Active;
        st.announcing = true;
        drop(st);
        self.changed.notify_all();
        true
    }

    /// Recovery thread, after emitting RECOVERY_SUCCESS: true if a reset
    /// arrived meanwhile (the phase is Recovering again: emit ERR_RECOVERING
    /// and recover), false if the port stays active or was closed.
    pub fn announced(&self) -> bool {
        let mut st = self.lock();
        st.announcing = false;
        std::mem::replace(&mut st.deferred, false) && !st.cancel
    }

    /// Interrupt thread, after emitting ERR_RECOVERING: starts the recovery
    /// thread unless the port was closed meanwhile.
    pub fn start(&self, spawn: impl FnOnce() -> std::io::Result<JoinHandle<()>>) -> Start {
        let mut st = self.lock();
        st.decided = true;
        if st.cancel {
            drop(st);
            self.changed.notify_all();
            return Start::Cancelled;
        }
        let started = spawn();
        let out = match started {
            Ok(h) => {
                let id = h.thread().id();
                st.thread = Some((h, id));
                Start::Started
            }
            Err(e) => {
                st.phase = Phase::Failed;
                Start::Failed(e)
            }
        };
        drop(st);
        self.changed.notify_all();
        out
    }

    /// For `dev_close`: stops a recovery in progress and waits for its
    /// thread, unless called on that thread (closing from its own event
    /// callback), or on the interrupt thread before the thread was started
    /// (`start` then sees the cancel and starts none).
    pub fn cancel_and_wait(&self, on_intr_thread: bool) {
        let me = thread::current().id();
        let mut st = self.lock();
        st.cancel = true;
        loop {
            match st.thread.take() {
                Some((h, id)) if id != me => {
                    drop(st);
                    let _ = h.join();
                    st = self.lock();
                }
                Some(t) => {
                    st.thread = Some(t);
                    break;
                }
                None if !st.decided && !on_intr_thread => {
                    // The interrupt thread is about to start or skip it.
                    st = self
                        .changed
                        .wait_timeout(st, Duration::from_millis(100))
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
                None => break,
            }
        }
        st.phase = Phase::Closed;
        drop(st);
        self.changed.notify_all();
    }
}

#[cfg(not(loom))]
impl Default for Handoff {
    fn default() -> Self {
        Self::new()
    }
}

/// Every interleaving of: the interrupt thread noticing a reset, emitting
/// ERR_RECOVERING and starting the recovery thread; the recovery thread
/// finishing; and an application closing the port — from another thread,
/// from the ERR_RECOVERING callback, or from the recovery thread's own
/// event callback. Run with `RUSTFLAGS="--cfg loom" cargo test --release
/// --lib handoff::`.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::atomic::{AtomicBool, Ordering};
    use loom::sync::{Arc, Mutex};

    /// Where the application closes the port.
    #[derive(Clone, Copy, PartialEq)]
    enum CloseFrom {
        OtherThread,
        ErrRecoveringCallback,
        RecoverySuccessCallback,
    }

    fn scenario(close_from: CloseFrom) {
        let mut b = loom::model::Builder::new();
        b.preemption_bound = Some(3);
        b.check(move || {
            let h = Arc::new(Handoff::new());
            // True while the recovery thread may touch the device.
            let recovering = Arc::new(AtomicBool::new(false));
            let (h1, r1) = (h.clone(), recovering.clone());
            let intr = thread::spawn(move || {
                if h1.begin() != Begin::Recover {
                    // Closed first: a closed port starts no recovery.
                    assert!(close_from == CloseFrom::OtherThread);
                    return;
                }
                if close_from == CloseFrom::ErrRecoveringCallback {
                    h1.cancel_and_wait(true);
                }
                let (h2, r2) = (h1.clone(), r1.clone());
                let started = h1.start(move || {
                    Ok(thread::spawn(move || {
                        r2.store(true, Ordering::SeqCst);
                        if !h2.cancelled() {
                            h2.set_phase(Phase::Active);
                        }
                        r2.store(false, Ordering::SeqCst);
                        if close_from == CloseFrom::RecoverySuccessCallback {
                            h2.cancel_and_wait(false);
                        }
                    }))
                });
                if close_from == CloseFrom::ErrRecoveringCallback {
                    assert!(matches!(started, Start::Cancelled));
                }
            });
            if close_from == CloseFrom::OtherThread {
                h.cancel_and_wait(false);
                // Once close returns, recovery no longer runs.
                assert!(!recovering.load(Ordering::SeqCst));
                assert_eq!(h.phase(), Phase::Closed);
            }
            intr.join().unwrap();
            if close_from != CloseFrom::OtherThread {
                // The port ends closed without anyone waiting forever.
                let t0 = h.lock();
                let recovery = t0.thread.is_some();
                drop(t0);
                if recovery {
                    // Reap the recovery thread as the process would at exit.
                    let (jh, _) = h.lock().thread.take().unwrap();
                    jh.join().unwrap();
                }
                assert_eq!(h.phase(), Phase::Closed);
            }
        });
    }

    /// A reset reported while the recovery thread switches to Active and
    /// announces it: whatever the interleaving, the events alternate
    /// RECOVERING, SUCCESS and end with SUCCESS, and the reset is not lost
    /// (two recoveries' worth of successes at most, one at least after it).
    #[test]
    fn a_reset_while_success_is_announced_keeps_the_events_in_turn() {
        let mut b = loom::model::Builder::new();
        b.preemption_bound = Some(3);
        b.check(|| {
            let h = Arc::new(Handoff::new());
            assert_eq!(h.begin(), Begin::Recover);
            let events = Arc::new(Mutex::new(vec!["R"]));
            let (h1, e1) = (h.clone(), events.clone());
            // The recovery thread of the first reset.
            let recovery = thread::spawn(move || loop {
                if !h1.activate() {
                    continue;
                }
                e1.lock().unwrap().push("S");
                if !h1.announced() {
                    break;
                }
                e1.lock().unwrap().push("R");
            });
            // The interrupt thread reports a second reset.
            match h.begin() {
                Begin::Recover => {
                    events.lock().unwrap().push("R");
                    // Its own recovery thread, run inline.
                    while !h.activate() {}
                    events.lock().unwrap().push("S");
                    assert!(!h.announced());
                }
                Begin::Deferred | Begin::Ignore => {}
            }
            recovery.join().unwrap();
            let ev = events.lock().unwrap().clone();
            assert!(ev.len() >= 2 && ev.len() % 2 == 0, "{ev:?}");
            for (i, e) in ev.iter().enumerate() {
                assert_eq!(*e, if i % 2 == 0 { "R" } else { "S" }, "{ev:?}");
            }
            assert_eq!(h.phase(), Phase::Active);
        });
    }

    #[test]
    fn close_from_another_thread_waits_for_recovery_and_never_hangs() {
        scenario(CloseFrom::OtherThread);
    }

    #[test]
    fn close_from_the_err_recovering_callback_cancels_the_start() {
        scenario(CloseFrom::ErrRecoveringCallback);
    }

    #[test]
    fn close_from_the_recovery_threads_own_callback_does_not_join_itself() {
        scenario(CloseFrom::RecoverySuccessCallback);
    }
}

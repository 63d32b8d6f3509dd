//! The [`Emulator`] handle and the device thread: one pass of the device
//! ([`State::step`]: doorbells, TX, backends, RX, delayed CQEs, timers)
//! under the state lock, then a short spin and a wait on the wake eventfd.

#![forbid(unsafe_code)]

use super::{Counters, Fault, Res, State, Trigger, WqKind};
use crate::backend::Backend;
use crate::config::{BenchMode, Config};
use crate::doorbell::DbRing;
use crate::fd::{self, eventfd, write_fd};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub(crate) struct Shared {
    pub cfg: Config,
    pub st: Mutex<State>,
    pub wake: OwnedFd,
    pub stop: AtomicBool,
    pub loops: AtomicU64,
    pub(super) thread: Mutex<Option<JoinHandle<()>>>,
}

/// One emulated MANA device set (all adapters of a configuration) with its
/// device thread.
pub struct Emulator {
    pub(crate) sh: Arc<Shared>,
}

impl Emulator {
    pub fn new(mut cfg: Config) -> io::Result<Emulator> {
        cfg.normalize()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let ring = DbRing::new();
        let wake = eventfd()?;
        let st = State::new(&cfg, ring, wake.as_raw_fd())?;
        let sh = Arc::new(Shared {
            cfg,
            st: Mutex::new(st),
            wake,
            stop: AtomicBool::new(false),
            loops: AtomicU64::new(0),
            thread: Mutex::new(None),
        });
        let sh2 = sh.clone();
        let h = std::thread::Builder::new()
            .name("mana-emu-dev".into())
            .spawn(move || device_thread(sh2))?;
        *sh.thread.lock().unwrap() = Some(h);
        Ok(Emulator { sh })
    }

    pub fn config(&self) -> &Config {
        &self.sh.cfg
    }

    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.sh.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wakes the device thread (after a direct doorbell or an injection).
    pub fn kick(&self) {
        write_fd(self.sh.wake.as_raw_fd(), &1u64.to_ne_bytes());
    }

    /// Number of device-thread iterations so far.
    pub fn loops(&self) -> u64 {
        self.sh.loops.load(Ordering::Relaxed)
    }

    /// Waits until the device thread has completed two more iterations,
    /// i.e. everything rung or injected before the call has been processed.
    pub fn settle(&self) {
        let start = self.loops();
        let t0 = Instant::now();
        while self.loops() < start + 2 && t0.elapsed() < Duration::from_secs(5) {
            self.kick();
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// The counters (port MTUs as the `mtu` files say now).
    pub fn counters(&self) -> Counters {
        let mut st = self.lock();
        st.refresh_mtu(true);
        st.counters()
    }

    pub fn schedule(&self, fault: Fault, trigger: Trigger) -> Res<()> {
        let mut st = self.lock();
        let r = st.schedule(fault, trigger);
        drop(st);
        self.kick();
        r
    }

    /// Writes the counters as JSON to `options.counters_dump`, if set.
    pub fn dump_counters(&self) {
        if let Some(p) = &self.sh.cfg.options.counters_dump {
            let c = self.counters();
            if let Ok(s) = serde_json::to_string_pretty(&c) {
                let _ = std::fs::write(p, s);
            }
        }
    }

    pub fn stop(&self) {
        self.sh.stop.store(true, Ordering::Relaxed);
        self.kick();
        if let Some(h) = self.sh.thread.lock().unwrap().take() {
            let _ = h.join();
        }
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        self.stop();
    }
}

impl State {
    /// One pass of the device: doorbells, TX, backends, RX, timers.
    pub fn step(&mut self) -> bool {
        if self.saturating() {
            return self.step_saturated();
        }
        let mut did = self.drain_doorbells();
        // MTU writes made before these doorbells (or before frames now
        // waiting) apply to them.
        let rx_waiting = self.ports.iter().any(|p| !p.backlog.is_empty());
        self.refresh_mtu(did || rx_waiting);
        let sqs: Vec<u32> = self
            .wqs
            .iter()
            .filter(|(_, w)| w.kind == WqKind::Sq && w.active && w.dev_off != w.db_tail)
            .map(|(h, _)| *h)
            .collect();
        let mut out = Vec::new();
        for s in sqs {
            did |= self.process_sq(s, &mut out);
        }
        for (port, f) in out {
            self.deliver(port, f);
        }
        for (port, f) in self.vswitch.take_to_wire() {
            did = true;
            self.deliver(port, f);
        }
        did |= self.poll_backends();
        for p in 0..self.ports.len() {
            if !self.ports[p].backlog.is_empty() {
                did |= self.process_rx(p);
            }
        }
        did |= self.flush_delayed();
        did |= self.run_timers();
        did
    }

    /// One pass of the device in the benchmark mode: doorbells, the
    /// saturated queues, then what the full pass does besides, less often
    /// looked at (MTU files on their timer only, backends).
    fn step_saturated(&mut self) -> bool {
        let mut did = self.drain_doorbells();
        self.refresh_mtu(false);
        let sqs: Vec<u32> = self
            .wqs
            .iter()
            .filter(|(_, w)| w.kind == WqKind::Sq && w.active && w.dev_off != w.db_tail)
            .map(|(h, _)| *h)
            .collect();
        for s in sqs {
            did |= self.saturate_sq(s);
        }
        did |= self.saturate_rx();
        did |= self.poll_backends();
        for p in 0..self.ports.len() {
            if !self.ports[p].backlog.is_empty() {
                did |= self.process_rx(p);
            }
        }
        did |= self.flush_delayed();
        did |= self.run_timers();
        did
    }

    /// The benchmark mode keeps queues saturated (see `saturate`).
    fn saturating(&self) -> bool {
        self.opts.bench == BenchMode::Saturate
    }

    fn has_poll_contexts(&self) -> bool {
        self.ctxs.values().any(|c| c.trap.is_none() && !c.dead) || !self.ctxs.is_empty()
    }

    fn pending_work(&self) -> bool {
        self.cqs.values().any(|c| !c.delayed.is_empty())
            || !self.faults.is_empty()
            || self.adapters.iter().any(|a| a.back_at.is_some())
            || self.ports.iter().any(|p| {
                !p.backlog.is_empty()
                    || matches!(&p.backend, Backend::Pcap { rx, .. } if !rx.is_empty())
            })
    }
}

fn device_thread(sh: Arc<Shared>) {
    let mut idle_rounds = 0u32;
    while !sh.stop.load(Ordering::Relaxed) {
        let (did, pending, poll_mode, saturating) = {
            let mut st = sh.st.lock().unwrap_or_else(|e| e.into_inner());
            let did = st.step();
            if !did {
                st.flush_backends();
            }
            let saturating = st.saturating() && !st.ctxs.is_empty();
            (did, st.pending_work(), st.has_poll_contexts(), saturating)
        };
        sh.loops.fetch_add(1, Ordering::Relaxed);
        if did {
            idle_rounds = 0;
            continue;
        }
        idle_rounds = idle_rounds.saturating_add(1);
        // Spin briefly, then block on the eventfd. Memfd pages (poll mode
        // and secondaries) and backends are sampled at least every 200 us
        // while contexts exist, else every 5 ms.
        if idle_rounds < 64 {
            std::hint::spin_loop();
            continue;
        }
        // Saturating: never sleep while a driver runs (a 200 us nap would
        // let its queues run dry), nor yield (on a busy machine a yield
        // gives the core away for a whole time slice).
        if saturating {
            std::hint::spin_loop();
            continue;
        }
        let timeout_ms = if pending || poll_mode { 0 } else { 5 };
        let wake = sh.wake.as_raw_fd();
        let revents = if timeout_ms == 0 {
            let r = fd::poll_in(wake, 0);
            if r == 0 {
                std::thread::sleep(Duration::from_micros(200));
            }
            r
        } else {
            fd::poll_in(wake, timeout_ms)
        };
        if revents & libc::POLLIN != 0 {
            fd::drain_eventfd(wake);
        }
    }
    let mut st = sh.st.lock().unwrap_or_else(|e| e.into_inner());
    st.flush_backends();
}

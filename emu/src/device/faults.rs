//! Injected faults (service reset, hot remove, link and kernel-netdev
//! changes, TX pause, CQE delay and corruption, a lying device, allocation
//! failures), the triggers that schedule them, and the timers that bring an
//! adapter back after a reset.

#![forbid(unsafe_code)]

use super::{Errno, Res, State, EBUSY, EINVAL, EIO, ENODEV, ENOMEM};
use crate::fd::write_fd;
use serde::{Deserialize, Serialize};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "fault", rename_all = "snake_case")]
pub enum Fault {
    /// Service reset: DEVICE_FATAL on every context, device gone for
    /// `down_ms` (default: options.reset_down_ms), then back (optionally
    /// under a new IB device name).
    Reset {
        pci: String,
        #[serde(default)]
        down_ms: Option<u64>,
        #[serde(default)]
        new_name: Option<String>,
    },
    /// Ends a service reset's down time now: the device comes back as if
    /// its `down_ms` had run out. A test that must act while a recovery is
    /// under way resets with a long `down_ms` and ends it with this once
    /// it has acted, whatever the machine's load.
    ResetEnd {
        pci: String,
    },
    /// PCI hot remove: gone for good, sysfs directories deleted.
    HotRemove {
        pci: String,
    },
    /// PCI hot add of a removed function: back with its configuration
    /// (sysfs directories, IB device), a new generation.
    HotAdd {
        pci: String,
    },
    LinkDown {
        mac: String,
    },
    LinkUp {
        mac: String,
    },
    /// Stop / resume consuming a port's send queues (flow-control XOFF).
    TxPause {
        mac: String,
    },
    TxResume {
        mac: String,
    },
    /// The next `count` CQEs are written `ms` milliseconds late.
    CqeDelay {
        ms: u64,
        count: u32,
    },
    /// The next `count` CQEs carry a garbled type and reserved bits.
    CqeCorrupt {
        count: u32,
    },
    /// A device that lies: each CQE lies with probability
    /// `per_million`/10^6, in one of `kinds` (all if empty; see
    /// `LieKind`), picked by a PRNG seeded with `seed`. Stops after `count`
    /// lies or `ms` milliseconds, whichever comes first, or at `LieStop`.
    Lie {
        seed: u64,
        per_million: u32,
        #[serde(default)]
        kinds: Vec<super::LieKind>,
        #[serde(default)]
        count: Option<u64>,
        #[serde(default)]
        ms: Option<u64>,
    },
    /// The device tells the truth again.
    LieStop,
    /// The next `count` create / reg_mr calls fail with ENOMEM.
    AllocFail {
        count: u32,
    },
    /// The kernel netdev of a port goes up / down (RAW QP creation EBUSY).
    KernelIf {
        mac: String,
        up: bool,
    },
    /// The port's kernel netdev reports another link: its sysfs `speed`
    /// (Mbit/s, -1 unknown) and `carrier`, each where given. The device's
    /// own link (`LinkDown`/`LinkUp`) is not touched.
    NetdevLink {
        mac: String,
        #[serde(default)]
        speed_mbps: Option<i64>,
        #[serde(default)]
        carrier: Option<bool>,
    },
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    #[default]
    Now,
    /// After this many milliseconds.
    AfterMs(u64),
    /// Once the device has moved this many more packets (TX + RX, all ports).
    AfterPackets(u64),
    /// Inside the n-th object creation from now (PD, MR, CQ, WQ, indirection
    /// table or QP), before it is carried out: a reset or removal then fails
    /// that call with EIO, as a device dying under a driver's setup would.
    AtCreate(u64),
    /// Right after the n-th receive-queue doorbell from now that the device
    /// accepts (a driver posting receive buffers, as it does once its queues
    /// exist): a reset then lands after a driver's queue setup succeeded and
    /// before it resumes traffic.
    AtRqDoorbell(u64),
}

pub(super) struct Scheduled {
    pub(super) fault: Fault,
    pub(super) due: Due,
}

/// When a scheduled fault fires.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Due {
    At(Instant),
    /// When `packets_moved` reaches this.
    Packets(u64),
    /// At this value of `creates`.
    Create(u64),
    /// At this value of `rq_doorbells`.
    RqDoorbell(u64),
}

impl State {
    /// Every accepted receive-queue doorbell passes here: fires the faults
    /// due at it.
    pub(super) fn rq_doorbell_taken(&mut self) {
        self.rq_doorbells += 1;
        let n = self.rq_doorbells;
        let mut due = Vec::new();
        self.faults.retain(|f| {
            let hit = f.due == Due::RqDoorbell(n);
            if hit {
                due.push(f.fault.clone());
            }
            !hit
        });
        for f in due {
            let _ = self.apply_fault(f);
        }
    }

    /// Every object creation passes here: fires the faults due at it, then
    /// takes a pending allocation failure.
    pub(super) fn take_alloc_fail(&mut self) -> Res<()> {
        self.creates += 1;
        let n = self.creates;
        let mut due = Vec::new();
        self.faults.retain(|f| {
            let hit = f.due == Due::Create(n);
            if hit {
                due.push(f.fault.clone());
            }
            !hit
        });
        for f in due {
            let kills = matches!(f, Fault::Reset { .. } | Fault::HotRemove { .. });
            let _ = self.apply_fault(f);
            if kills {
                return Err(EIO);
            }
        }
        if self.alloc_fail > 0 {
            self.alloc_fail -= 1;
            return Err(ENOMEM);
        }
        Ok(())
    }

    pub fn schedule(&mut self, fault: Fault, trigger: Trigger) -> Res<()> {
        self.validate_fault(&fault)?;
        let due = match trigger {
            Trigger::Now => return self.apply_fault(fault),
            Trigger::AfterMs(ms) => Due::At(Instant::now() + Duration::from_millis(ms)),
            Trigger::AfterPackets(n) => Due::Packets(self.packets_moved + n),
            Trigger::AtCreate(n) => Due::Create(self.creates + n.max(1)),
            Trigger::AtRqDoorbell(n) => Due::RqDoorbell(self.rq_doorbells + n.max(1)),
        };
        self.faults.push(Scheduled { fault, due });
        Ok(())
    }

    fn validate_fault(&self, f: &Fault) -> Res<()> {
        match f {
            Fault::Reset { pci, .. }
            | Fault::ResetEnd { pci }
            | Fault::HotRemove { pci }
            | Fault::HotAdd { pci } => self.adapter_by_pci(pci).map(|_| ()),
            Fault::LinkDown { mac }
            | Fault::LinkUp { mac }
            | Fault::TxPause { mac }
            | Fault::TxResume { mac }
            | Fault::KernelIf { mac, .. }
            | Fault::NetdevLink { mac, .. } => self.port_by_mac(mac).map(|_| ()),
            _ => Ok(()),
        }
    }

    fn fatal_contexts(&mut self, adapter: usize) {
        // struct ib_uverbs_async_event_desc { u64 element; u32 event_type; u32 reserved; }
        let mut ev = [0u8; 16];
        ev[8..12].copy_from_slice(&(crate::ffi::IBV_EVENT_DEVICE_FATAL).to_le_bytes());
        for c in self
            .ctxs
            .values_mut()
            .filter(|c| c.adapter == adapter && !c.dead)
        {
            c.dead = true;
            write_fd(c.async_w.as_raw_fd(), &ev);
        }
        // Hardware objects are gone: queues stop, CQs receive nothing more.
        let dead: Vec<u32> = self
            .ctxs
            .iter()
            .filter(|(_, c)| c.adapter == adapter)
            .map(|(h, _)| *h)
            .collect();
        for w in self.wqs.values_mut().filter(|w| dead.contains(&w.ctx)) {
            w.active = false;
        }
        for p in self.adapters[adapter].ports.clone() {
            let port = &mut self.ports[p];
            port.rss = None;
            let n = port.backlog.len() as u64;
            port.backlog.clear();
            port.counters.drop("reset", n);
        }
    }

    fn port_event(&mut self, port: usize, event: u32) {
        let adapter = self.ports[port].adapter;
        let num = self.ports[port].index as u64 + 1;
        let mut ev = [0u8; 16];
        ev[0..8].copy_from_slice(&num.to_le_bytes());
        ev[8..12].copy_from_slice(&event.to_le_bytes());
        for c in self
            .ctxs
            .values()
            .filter(|c| c.adapter == adapter && !c.dead)
        {
            write_fd(c.async_w.as_raw_fd(), &ev);
        }
    }

    fn apply_fault(&mut self, f: Fault) -> Res<()> {
        match f {
            Fault::Reset {
                pci,
                down_ms,
                new_name,
            } => {
                let a = self.adapter_by_pci(&pci)?;
                if self.adapters[a].removed {
                    return Err(ENODEV);
                }
                self.fatal_contexts(a);
                let root = self.opts.sysfs_root.clone();
                let ad = &mut self.adapters[a];
                ad.present = false;
                for name in ad.ib_names() {
                    crate::sysfs::remove_ib(&root, &ad.pci, &name);
                }
                ad.back_at = Some(
                    Instant::now()
                        + Duration::from_millis(down_ms.unwrap_or(self.opts.reset_down_ms)),
                );
                ad.next_name = new_name
                    .or_else(|| self.adapter_cfgs[ad.cfg_index].ib_name_after_reset.clone());
            }
            Fault::ResetEnd { pci } => {
                let a = self.adapter_by_pci(&pci)?;
                let ad = &mut self.adapters[a];
                // Not in a reset (never reset, back already, or removed).
                if ad.back_at.is_none() {
                    return Err(EINVAL);
                }
                ad.back_at = Some(Instant::now());
            }
            Fault::HotRemove { pci } => {
                let a = self.adapter_by_pci(&pci)?;
                self.fatal_contexts(a);
                let root = self.opts.sysfs_root.clone();
                let ad = &mut self.adapters[a];
                ad.present = false;
                ad.removed = true;
                ad.back_at = None;
                for name in ad.ib_names() {
                    crate::sysfs::remove_ib(&root, &ad.pci, &name);
                }
                crate::sysfs::remove_pci(&root, &ad.pci);
                let pci = ad.pci.clone();
                self.vswitch.pci_event(&pci, crate::vmbus::VfEvent::Removed);
                crate::uevent::pci_event("remove", &pci);
            }
            Fault::HotAdd { pci } => {
                let a = self.adapter_by_pci(&pci)?;
                if !self.adapters[a].removed {
                    return Err(EBUSY);
                }
                let ad = &mut self.adapters[a];
                ad.removed = false;
                ad.present = true;
                ad.generation += 1;
                let acfg = &self.adapter_cfgs[ad.cfg_index];
                let ups: Vec<bool> = ad
                    .ports
                    .iter()
                    .map(|&p| self.ports[p].kernel_if_up)
                    .collect();
                let _ = crate::sysfs::ensure_pci(&self.opts.sysfs_root, acfg, &ups);
                for name in ad.ib_names() {
                    let _ = crate::sysfs::ensure_ib(&self.opts.sysfs_root, acfg, &name);
                }
                let pci = ad.pci.clone();
                crate::uevent::pci_event("add", &pci);
                self.vswitch.pci_event(&pci, crate::vmbus::VfEvent::Added);
            }
            Fault::LinkDown { mac } => {
                let p = self.port_by_mac(&mac)?;
                self.ports[p].link_up = false;
                self.port_event(p, crate::ffi::IBV_EVENT_PORT_ERR);
            }
            Fault::LinkUp { mac } => {
                let p = self.port_by_mac(&mac)?;
                self.ports[p].link_up = true;
                self.port_event(p, crate::ffi::IBV_EVENT_PORT_ACTIVE);
            }
            Fault::TxPause { mac } => {
                let p = self.port_by_mac(&mac)?;
                self.ports[p].tx_paused = true;
            }
            Fault::TxResume { mac } => {
                let p = self.port_by_mac(&mac)?;
                self.ports[p].tx_paused = false;
            }
            Fault::CqeDelay { ms, count } => {
                self.cqe_delay = Some((Duration::from_millis(ms), count))
            }
            Fault::CqeCorrupt { count } => self.cqe_corrupt = count,
            Fault::Lie {
                seed,
                per_million,
                kinds,
                count,
                ms,
            } => self.liar = Some(super::lies::Liar::new(seed, per_million, &kinds, count, ms)),
            Fault::LieStop => self.liar = None,
            Fault::AllocFail { count } => self.alloc_fail = count,
            Fault::KernelIf { mac, up } => {
                let p = self.port_by_mac(&mac)?;
                self.ports[p].kernel_if_up = up;
                let a = self.ports[p].adapter;
                let idx = self.ports[p].index;
                let cfg_index = self.adapters[a].cfg_index;
                let _ = crate::sysfs::set_if_state(
                    &self.opts.sysfs_root,
                    &self.adapter_cfgs[cfg_index],
                    idx,
                    up,
                );
            }
            Fault::NetdevLink {
                mac,
                speed_mbps,
                carrier,
            } => {
                let p = self.port_by_mac(&mac)?;
                let (a, idx) = (self.ports[p].adapter, self.ports[p].index);
                let cfg_index = self.adapters[a].cfg_index;
                crate::sysfs::set_netdev_link(
                    &self.opts.sysfs_root,
                    &self.adapter_cfgs[cfg_index],
                    idx,
                    speed_mbps,
                    carrier,
                )
                .map_err(|e| e.raw_os_error().map_or(EIO, Errno))?;
            }
        }
        Ok(())
    }

    pub(super) fn run_timers(&mut self) -> bool {
        let now = Instant::now();
        let mut did = false;
        for (i, a) in self.adapters.iter_mut().enumerate() {
            if let Some(t) = a.back_at {
                if now >= t {
                    a.back_at = None;
                    a.present = true;
                    a.generation += 1;
                    if let Some(n) = a.next_name.take() {
                        a.ib_name = n;
                    }
                    let acfg = &self.adapter_cfgs[a.cfg_index];
                    let ups: Vec<bool> = a
                        .ports
                        .iter()
                        .map(|&p| self.ports[p].kernel_if_up)
                        .collect();
                    let _ = crate::sysfs::ensure_pci(&self.opts.sysfs_root, acfg, &ups);
                    for name in a.ib_names() {
                        let _ = crate::sysfs::ensure_ib(&self.opts.sysfs_root, acfg, &name);
                    }
                    let _ = i;
                    did = true;
                }
            }
        }
        let moved = self.packets_moved;
        let mut due = Vec::new();
        self.faults.retain_mut(|s| {
            let hit = match s.due {
                Due::At(t) => now >= t,
                Due::Packets(n) => moved >= n,
                Due::Create(_) | Due::RqDoorbell(_) => false,
            };
            if hit {
                due.push(s.fault.clone());
            }
            !hit
        });
        for f in due {
            let _ = self.apply_fault(f);
            did = true;
        }
        did
    }
}

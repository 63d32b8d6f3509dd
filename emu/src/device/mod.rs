//! The MANA device model: verbs objects, hardware queues, the device
//! thread, packet movement between ports, faults and counters.
//!
//! The model is safe Rust (`#![forbid(unsafe_code)]` in every module but
//! `mr`, which turns a registration into a [`Region`]); driver memory is
//! reached only through `dma`, and file descriptors through
//! `crate::fd`. All state sits behind one mutex. The device thread holds
//! it while it touches queue memory, so a `destroy_*` that has taken the
//! lock and removed the queue is guaranteed the device never touches the
//! buffer again (the quiesce the brief asks for) before the buffer is freed.
//!
//! The modules follow the hardware's blocks:
//!
//! | Module | Block |
//! |---|---|
//! | `objects` | verbs objects and the control path: PDs, WQ/CQ/QP/indirection-table creation and destruction, queue buffer sizes |
//! | `context` | device contexts: open/close, their doorbell pages, the adapters a context may see |
//! | `mr` | memory registration and the SGE check against a queue's MRs |
//! | `doorbells` | doorbell stores (trapped or sampled from memfd pages) decoded into queue tails and CQ arms |
//! | `dma` | every read and write of driver memory: WQEs, SGEs, CQEs, doorbell pages |
//! | `cq` | completion queues: CQE posting, owner bits, delayed CQEs, arming and completion channels |
//! | `tx` | send queues: WQE validation, checksum offloads, TSO, VLAN insert, drops |
//! | `rx` | receive queues: WQE consumption, checksum verdicts, VLAN strip, coalescing |
//! | `rss` | RSS: Toeplitz hash and RQ selection |
//! | `ports` | the ports' wire side: backends, backlogs, capture, MTU |
//! | `counters` | device, port and queue counters |
//! | `faults` | injected faults, their triggers and timers |
//! | `hw` | objects a PCI function's control path creates directly (queues on DMA rings, guest-physical memory keys, vPort steering, EQ events) |
//! | `saturate` | the benchmark mode (`options.bench = "saturate"`): queues completed by ring bookkeeping and an RX template |
//! | `thread` | the [`Emulator`] handle and the device thread that runs [`State::step`] |

#![deny(unsafe_code)] // forbidden in every child but `mr`

mod context;
mod counters;
mod cq;
mod dma;
mod doorbells;
mod faults;
mod hw;
mod lies;
mod mr;
mod objects;
mod ports;
mod rss;
mod rx;
mod saturate;
mod thread;
mod tx;

pub use context::{Ctx, CtxInfo, Listed};
pub use counters::{
    AdapterState, Counters, CqState, DeviceCounters, DeviceState, PortCounters, PortReport,
    QueueCounters, QueueReport, WqState,
};
pub use faults::{Fault, Trigger};
pub use hw::{hw_ctx, is_hw_ctx, VportRx};
pub use lies::LieKind;
pub use objects::{
    align_hw_size, cq_buffer_size, rq_buffer_size, sq_buffer_size, wqe_size, Adapter, HashConf,
    Port, RawQpInfo, WqKind,
};
pub use saturate::{template_frame, TEMPLATE_LEN};
pub use thread::Emulator;
pub(crate) use thread::Shared;

use crate::backend::Backend;
use crate::config::{parse_mac, Config, Limits, Options};
use crate::doorbell::DbRing;
use crate::mtuwatch::MtuWatch;
use context::ClosedPage;
use faults::Scheduled;
use mr::Mr;
use objects::{Channel, Cq, IndTable, Pd, Qp, Wq};
use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

#[cfg(doc)]
use crate::mem::Region;

/// A positive errno value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Errno(pub i32);

pub type Res<T> = Result<T, Errno>;

const EINVAL: Errno = Errno(libc::EINVAL);
const EIO: Errno = Errno(libc::EIO);
const ENOENT: Errno = Errno(libc::ENOENT);
const EBUSY: Errno = Errno(libc::EBUSY);
const ENOMEM: Errno = Errno(libc::ENOMEM);
const ENODEV: Errno = Errno(libc::ENODEV);

/// The whole device: adapters, ports, every verbs object and queue, and the
/// fault and doorbell bookkeeping. Lives behind [`Emulator::lock`].
pub struct State {
    opts: Options,
    adapter_cfgs: Vec<crate::config::AdapterConfig>,
    pub limits: Limits,
    pub adapters: Vec<Adapter>,
    pub ports: Vec<Port>,
    next_handle: u32,
    next_qid: u32,
    next_lkey: u32,
    pub ctxs: BTreeMap<u32, Ctx>,
    pds: BTreeMap<u32, Pd>,
    mrs: BTreeMap<u32, Mr>,
    cqs: BTreeMap<u32, Cq>,
    wqs: BTreeMap<u32, Wq>,
    tables: BTreeMap<u32, IndTable>,
    qps: BTreeMap<u32, Qp>,
    channels: BTreeMap<u32, Channel>,
    pub counters: DeviceCounters,
    retired: Vec<QueueReport>,
    /// Older retired reports summed per kind and port.
    retired_folded: Vec<QueueReport>,
    faults: Vec<Scheduled>,
    alloc_fail: u32,
    /// Receive-queue doorbells accepted so far (for `Trigger::AtRqDoorbell`).
    pub(super) rq_doorbells: u64,
    /// Object creations so far (for `Trigger::AtCreate`).
    creates: u64,
    cqe_delay: Option<(Duration, u32)>,
    cqe_corrupt: u32,
    /// `Fault::Lie` while it lasts.
    liar: Option<lies::Liar>,
    packets_moved: u64,
    trap_slots: BTreeMap<u32, u32>,
    closed_pages: VecDeque<ClosedPage>,
    ring: &'static DbRing,
    wake_fd: RawFd,
    mtu_watch: MtuWatch,
    /// Synthetic NICs sharing the ports' wires (`crate::vmbus`).
    vswitch: crate::vmbus::Vswitch,
    /// (EQ, CQ id) of completion events hardware CQs raised, for the
    /// device that owns the EQs to post (see `hw`).
    eq_events: Vec<(u32, u32)>,
    /// (EQ, undefined EQE type) of the events a lying hardware CQ's device
    /// is to post (`LieKind::UnknownEvent` on a CQ that reports to an EQ).
    eq_lies: Vec<(u32, u8)>,
    /// The benchmark mode's state (`saturate`).
    saturator: saturate::Saturator,
}

impl Drop for State {
    /// The device is gone (its wake fd closes): its trapped pages, live or
    /// closed, stop reporting to it. Later stores to them are dropped.
    fn drop(&mut self) {
        let traps = self
            .ctxs
            .values()
            .filter_map(|c| c.trap.as_ref())
            .chain(self.closed_pages.iter().filter_map(|p| p.trap.as_ref()));
        for t in traps {
            t.detach(self.ring);
        }
    }
}

impl State {
    /// The device as configured (`cfg` normalized), before any context:
    /// ports with their backends open, MTUs read from their netdevs.
    fn new(cfg: &Config, ring: &'static DbRing, wake_fd: RawFd) -> io::Result<State> {
        let netdev_dirs = cfg
            .adapters
            .iter()
            .flat_map(|a| {
                a.ports
                    .iter()
                    .enumerate()
                    .map(|(pi, _)| crate::sysfs::netdev_dir(&cfg.options.sysfs_root, a, pi))
            })
            .collect();
        Self::build(cfg, ring, wake_fd, netdev_dirs)
    }

    /// The device as configured; `netdev_dirs` are the ports' netdev
    /// directories whose `mtu` files the ports follow.
    fn build(
        cfg: &Config,
        ring: &'static DbRing,
        wake_fd: RawFd,
        netdev_dirs: Vec<std::path::PathBuf>,
    ) -> io::Result<State> {
        let mut adapters = Vec::new();
        let mut ports = Vec::new();
        let mut macs = Vec::new();
        for a in &cfg.adapters {
            for p in &a.ports {
                macs.push(p.mac.clone());
            }
        }
        for (ai, a) in cfg.adapters.iter().enumerate() {
            let mut pidx = Vec::new();
            for (pi, p) in a.ports.iter().enumerate() {
                let backend = Backend::open(&p.backend, |m| macs.iter().position(|x| x == m))?;
                let gi = ports.len();
                pidx.push(gi);
                ports.push(Port {
                    adapter: ai,
                    index: pi,
                    mac: parse_mac(&p.mac)
                        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?,
                    mtu: p.mtu,
                    kernel_if_up: p.kernel_if_up,
                    lossless: p.lossless_rx,
                    mac_filter: p.mac_filter,
                    link_up: true,
                    tx_paused: false,
                    vp_offset: 0x20 + gi as u8,
                    backend,
                    backlog: VecDeque::new(),
                    rss: None,
                    counters: PortCounters::default(),
                    capture: None,
                });
            }
            adapters.push(Adapter {
                pci: a.pci.clone(),
                ports: pidx,
                present: true,
                removed: false,
                generation: 1,
                ib_name: a.ib_name.clone().unwrap_or_else(|| format!("mana_{ai}")),
                rnic_name: a.rnic_name.clone(),
                back_at: None,
                next_name: None,
                cfg_index: ai,
            });
        }
        let mut st = State {
            mtu_watch: MtuWatch::new(netdev_dirs),
            opts: cfg.options.clone(),
            adapter_cfgs: cfg.adapters.clone(),
            limits: cfg.limits.clone(),
            adapters,
            ports,
            next_handle: 1,
            next_qid: cfg.options.queue_id_base,
            next_lkey: 0x100,
            ctxs: BTreeMap::new(),
            pds: BTreeMap::new(),
            mrs: BTreeMap::new(),
            cqs: BTreeMap::new(),
            wqs: BTreeMap::new(),
            tables: BTreeMap::new(),
            qps: BTreeMap::new(),
            channels: BTreeMap::new(),
            counters: DeviceCounters::default(),
            retired: Vec::new(),
            retired_folded: Vec::new(),
            faults: Vec::new(),
            alloc_fail: 0,
            creates: 0,
            rq_doorbells: 0,
            cqe_delay: None,
            cqe_corrupt: 0,
            liar: None,
            packets_moved: 0,
            trap_slots: BTreeMap::new(),
            closed_pages: VecDeque::new(),
            ring,
            wake_fd,
            vswitch: crate::vmbus::Vswitch::default(),
            eq_events: Vec::new(),
            eq_lies: Vec::new(),
            saturator: saturate::Saturator::default(),
        };
        let macs: Vec<[u8; 6]> = st.ports.iter().map(|p| p.mac).collect();
        st.vswitch = crate::vmbus::Vswitch::new(cfg, &macs, wake_fd)?;
        // The ports start with what their netdev's file says.
        st.refresh_mtu(true);
        Ok(st)
    }

    /// The VMBus host of the synthetic NICs (`[[netvsc]]`), if any.
    pub fn vmbus(&self) -> Option<std::sync::Arc<crate::vmbus::VmbusHost>> {
        self.vswitch.host()
    }

    fn handle(&mut self) -> u32 {
        let h = self.next_handle;
        self.next_handle += 1;
        h
    }

    fn qid(&mut self) -> u32 {
        let q = self.next_qid;
        self.next_qid += 1;
        q
    }
}

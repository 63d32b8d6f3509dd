//! The MANA device model: verbs objects, hardware queues, the device
//! thread, packet movement between ports, faults and counters.
//!
//! Everything here is safe Rust; raw memory goes through [`Region`].
//! All state sits behind one mutex. The device thread holds it while it
//! touches queue memory, so a `destroy_*` that has taken the lock and
//! removed the queue is guaranteed the device never touches the buffer
//! again (the quiesce the brief asks for) before the buffer is freed.

use crate::backend::{self, Backend};
use crate::config::{parse_mac, Config, DoorbellMode, Limits, Options, RdmaCoreLimits};
use crate::doorbell::{DbRing, TrapPage, PAGE};
use crate::mem::Region;
use crate::mtuwatch::MtuWatch;
use crate::pkt;
use crate::wire::{self, vendor_err as ve, RxFlags, RxPpi, TxOob, WqeHeader};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

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

const RX_BACKLOG_MAX: usize = 65536;
const TX_BUDGET: usize = 256;
/// Largest frame a TX WQE may gather (an LSO send: 64 KiB + headers).
const MAX_TX_GATHER: u64 = 65536 + 256;

// ---------------------------------------------------------------------------
// Counters
// ---------------------------------------------------------------------------

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct QueueCounters {
    pub packets: u64,
    pub bytes: u64,
    pub wqes: u64,
    pub cqes: u64,
    pub errors: u64,
    pub doorbells: u64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct PortCounters {
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub rx_packets: u64,
    pub rx_bytes: u64,
    /// Drops by reason: no_rx_buffer, no_rx_queue, rx_truncated, bad_lkey,
    /// out_of_mr, mtu, malformed_wqe, vport, link_down, reset, ...
    pub drops: BTreeMap<String, u64>,
}

impl PortCounters {
    fn drop(&mut self, reason: &str, n: u64) {
        *self.drops.entry(reason.to_string()).or_default() += n;
    }
    pub fn drops(&self, reason: &str) -> u64 {
        self.drops.get(reason).copied().unwrap_or(0)
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct QueueReport {
    pub kind: String,
    pub id: u32,
    pub port: String,
    pub live: bool,
    pub counters: QueueCounters,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct DeviceCounters {
    pub doorbells: u64,
    pub bad_doorbells: u64,
    pub discarded_doorbells: u64,
    pub cq_arms: u64,
    pub cq_events: u64,
    pub cqe_overflow_warnings: u64,
    /// Trapped stores dropped because the doorbell ring stayed full.
    pub doorbell_ring_drops: u64,
    /// Port MTU changes taken from the sysfs `mtu` files.
    #[serde(default)]
    pub mtu_changes: u64,
    /// Reads of an `mtu` file that did not hold a valid MTU (68..=9000);
    /// the port kept its MTU.
    #[serde(default)]
    pub mtu_file_invalid: u64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct PortReport {
    pub mac: String,
    pub pci: String,
    pub port: u32,
    pub link_up: bool,
    /// The MTU the port enforces (from its netdev's sysfs `mtu` file).
    #[serde(default)]
    pub mtu: u32,
    pub counters: PortCounters,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Counters {
    pub device: DeviceCounters,
    pub ports: Vec<PortReport>,
    pub queues: Vec<QueueReport>,
}

impl Counters {
    pub fn port(&self, mac: &str) -> Option<&PortCounters> {
        self.ports
            .iter()
            .find(|p| p.mac.eq_ignore_ascii_case(mac))
            .map(|p| &p.counters)
    }
}

// ---------------------------------------------------------------------------
// Faults
// ---------------------------------------------------------------------------

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
    /// PCI hot remove: gone for good, sysfs directories deleted.
    HotRemove {
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
    /// The next `count` create / reg_mr calls fail with ENOMEM.
    AllocFail {
        count: u32,
    },
    /// The kernel netdev of a port goes up / down (RAW QP creation EBUSY).
    KernelIf {
        mac: String,
        up: bool,
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
}

struct Scheduled {
    fault: Fault,
    due: Due,
}

/// When a scheduled fault fires.
#[derive(Clone, Copy, PartialEq)]
enum Due {
    At(Instant),
    /// When `packets_moved` reaches this.
    Packets(u64),
    /// At this value of `creates`.
    Create(u64),
}

// ---------------------------------------------------------------------------
// Objects
// ---------------------------------------------------------------------------

pub struct Adapter {
    pub pci: String,
    pub ports: Vec<usize>,
    pub present: bool,
    pub removed: bool,
    pub generation: u64,
    pub ib_name: String,
    back_at: Option<Instant>,
    next_name: Option<String>,
    cfg_index: usize,
}

pub struct Port {
    pub adapter: usize,
    pub index: usize,
    pub mac: [u8; 6],
    pub mtu: u32,
    pub kernel_if_up: bool,
    pub lossless: bool,
    pub mac_filter: bool,
    pub link_up: bool,
    pub tx_paused: bool,
    pub vp_offset: u8,
    backend: Backend,
    backlog: VecDeque<Vec<u8>>,
    rss: Option<Rss>,
    pub counters: PortCounters,
    capture: Option<Vec<Vec<u8>>>,
}

struct Rss {
    qp: u32,
    enabled: bool,
    key: [u8; 40],
    fields: u64,
    table: [u32; 64],
    default_rq: u32,
}

pub struct Ctx {
    pub adapter: usize,
    pub generation: u64,
    pub dead: bool,
    pub memfd: OwnedFd,
    shm: Region,
    pub trap: Option<TrapPage>,
    last: [u64; 3],
    async_w: OwnedFd,
    pub async_r: OwnedFd,
}

/// The doorbell page of a closed context, as other mappings may still see
/// it: its memfd page (a DPDK secondary's mapping, or the primary's in poll
/// mode) and its trapped page. Stores to either are discarded doorbells.
struct ClosedPage {
    shm: Region,
    last: [u64; 3],
    trap: Option<TrapPage>,
}

/// Closed contexts whose memfd page is still sampled (and whose trapped
/// page is detached when the device goes away); older ones are forgotten
/// (their stores are still ignored, but no longer counted).
const CLOSED_PAGES_KEPT: usize = 256;

struct Pd {
    ctx: u32,
    parent_of: Option<u32>,
    port: Option<usize>,
}

struct Mr {
    pd: u32,
    region: Region,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum WqKind {
    Sq,
    Rq,
}

struct Wq {
    ctx: u32,
    pd: u32,
    kind: WqKind,
    port: Option<usize>,
    hw_id: Option<u32>,
    buf: Region,
    count: u32,
    cq: u32,
    dev_off: u32,
    db_tail: u32,
    active: bool,
    counters: QueueCounters,
}

struct PendingCqe {
    due: Instant,
    slot_off: usize,
    data: [u8; 60],
    info: u32,
}

struct Cq {
    ctx: u32,
    hw_id: Option<u32>,
    buf: Region,
    count: u32,
    prod: u64,
    armed: bool,
    channel: Option<u32>,
    user: usize,
    bound: Option<u32>,
    delayed: VecDeque<PendingCqe>,
    counters: QueueCounters,
}

struct IndTable {
    ctx: u32,
    wqs: Vec<u32>,
    log_size: u32,
}

enum QpKind {
    Raw { sq: u32 },
    Rss { table: u32, port: usize },
}

struct Qp {
    ctx: u32,
    kind: QpKind,
}

struct Channel {
    w: OwnedFd,
    r: OwnedFd,
}

/// What `open_context` hands to the verbs layer.
pub struct CtxInfo {
    pub handle: u32,
    pub cmd_fd: RawFd,
    pub async_fd: RawFd,
    pub db_page: usize,
    pub num_ports: u32,
}

/// What a RAW (send) QP creation returns (`mana_ib_create_qp_resp`).
#[derive(Clone, Copy, Debug)]
pub struct RawQpInfo {
    pub qp: u32,
    pub sq: u32,
    pub sq_id: u32,
    pub cq_id: u32,
    pub tx_vp_offset: u32,
}

/// The RSS hash configuration of an RSS QP.
#[derive(Clone, Debug)]
pub struct HashConf {
    pub key: Vec<u8>,
    pub fields: u64,
    pub toeplitz: bool,
}

/// A parsed WQE: header, inline OOB bytes, SGL.
type ParsedWqe = (WqeHeader, Vec<u8>, Vec<wire::Sge>);

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
    faults: Vec<Scheduled>,
    alloc_fail: u32,
    /// Object creations so far (for `Trigger::AtCreate`).
    creates: u64,
    cqe_delay: Option<(Duration, u32)>,
    cqe_corrupt: u32,
    packets_moved: u64,
    trap_slots: BTreeMap<u32, u32>,
    closed_pages: VecDeque<ClosedPage>,
    ring: &'static DbRing,
    wake_fd: RawFd,
    mtu_watch: MtuWatch,
}

pub(crate) struct Shared {
    pub cfg: Config,
    pub st: Mutex<State>,
    pub wake: OwnedFd,
    pub stop: AtomicBool,
    pub loops: AtomicU64,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// One emulated MANA device set (all adapters of a configuration) with its
/// device thread.
pub struct Emulator {
    pub(crate) sh: Arc<Shared>,
}

fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: plain eventfd(2).
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fresh fd we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: fds is a valid 2-int array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fresh fds we own.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn write_fd(fd: RawFd, data: &[u8]) -> bool {
    // SAFETY: writing from a valid buffer.
    unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) == data.len() as isize }
}

/// A memfd-backed doorbell page, mapped shared for the device side.
fn memfd_page() -> io::Result<(OwnedFd, Region)> {
    // SAFETY: memfd_create with a static name.
    let fd = unsafe { libc::memfd_create(c"mana-db".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fresh fd we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: sizing our own memfd.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), PAGE as libc::off_t) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: shared mapping of a page-sized memfd.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            PAGE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the mapping is never unmapped (contexts keep it for the
    // process lifetime: a secondary may still hold the fd).
    Ok((fd, unsafe { Region::new(p as usize, PAGE) }))
}

/// `align_hw_size` of libmana v44: align to 4 KiB, then next power of two.
pub fn align_hw_size(size: usize) -> usize {
    size.div_ceil(PAGE)
        .max(1)
        .saturating_mul(PAGE)
        .next_power_of_two()
}

/// `get_wqe_size(sge)` of libmana: ALIGN(16*sge + 8 + 8, 32).
pub fn wqe_size(sge: u32) -> usize {
    ((sge as usize) * 16 + 16).div_ceil(32) * 32
}

pub fn cq_buffer_size(cqe: u32) -> usize {
    align_hw_size(((cqe as usize) * 64).next_power_of_two())
}
pub fn sq_buffer_size(max_send_wr: u32, max_send_sge: u32) -> usize {
    align_hw_size(max_send_wr as usize * wqe_size(max_send_sge))
}
pub fn rq_buffer_size(max_wr: u32, max_sge: u32) -> usize {
    align_hw_size(max_wr as usize * wqe_size(max_sge))
}

impl Emulator {
    pub fn new(mut cfg: Config) -> io::Result<Emulator> {
        cfg.normalize()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let ring = DbRing::new();
        let wake = eventfd()?;
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
                back_at: None,
                next_name: None,
                cfg_index: ai,
            });
        }
        let netdev_dirs = ports
            .iter()
            .map(|p: &Port| {
                crate::sysfs::netdev_dir(&cfg.options.sysfs_root, &cfg.adapters[p.adapter], p.index)
            })
            .collect();
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
            faults: Vec::new(),
            alloc_fail: 0,
            creates: 0,
            cqe_delay: None,
            cqe_corrupt: 0,
            packets_moved: 0,
            trap_slots: BTreeMap::new(),
            closed_pages: VecDeque::new(),
            ring,
            wake_fd: wake.as_raw_fd(),
        };
        // The ports start with what their netdev's file says.
        st.refresh_mtu(true);
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

// ---------------------------------------------------------------------------
// Control path (verbs objects)
// ---------------------------------------------------------------------------

impl State {
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

    fn ctx_alive(&self, ctx: u32) -> Res<&Ctx> {
        let c = self.ctxs.get(&ctx).ok_or(EINVAL)?;
        if c.dead {
            return Err(EIO);
        }
        Ok(c)
    }

    /// Every object creation passes here: fires the faults due at it, then
    /// takes a pending allocation failure.
    fn take_alloc_fail(&mut self) -> Res<()> {
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

    /// Adapters currently listed by `ibv_get_device_list`:
    /// (adapter index, generation, IB name, PCI address, number of ports).
    pub fn visible(&self) -> Vec<(usize, u64, String, String, u32)> {
        self.adapters
            .iter()
            .enumerate()
            .filter(|(_, a)| a.present && !a.removed)
            .map(|(i, a)| {
                (
                    i,
                    a.generation,
                    a.ib_name.clone(),
                    a.pci.clone(),
                    a.ports.len() as u32,
                )
            })
            .collect()
    }

    pub fn ibdev_path(&self, adapter: usize) -> std::path::PathBuf {
        crate::sysfs::ib_dir(&self.opts.sysfs_root, &self.adapters[adapter].ib_name)
    }

    pub fn open_context(&mut self, adapter: usize, generation: u64) -> Res<CtxInfo> {
        let a = self.adapters.get(adapter).ok_or(ENODEV)?;
        if !a.present || a.removed || a.generation != generation {
            return Err(ENODEV);
        }
        let num_ports = a.ports.len() as u32;
        let (memfd, shm) = memfd_page().map_err(|_| ENOMEM)?;
        let (async_r, async_w) = pipe().map_err(|_| ENOMEM)?;
        let trap = if self.opts.doorbell_mode == DoorbellMode::Trap {
            Some(TrapPage::new(self.ring, self.wake_fd).map_err(|_| ENOMEM)?)
        } else {
            None
        };
        let handle = self.handle();
        let db_page = trap.as_ref().map_or(shm.addr(), |t| t.addr);
        if let Some(t) = &trap {
            self.trap_slots.insert(t.slot, handle);
            // Its slot was reused (all slots taken): the page is live again.
            for p in &mut self.closed_pages {
                if p.trap.as_ref().is_some_and(|o| o.slot == t.slot) {
                    p.trap = None;
                }
            }
        }
        let info = CtxInfo {
            handle,
            cmd_fd: memfd.as_raw_fd(),
            async_fd: async_r.as_raw_fd(),
            db_page,
            num_ports,
        };
        self.ctxs.insert(
            handle,
            Ctx {
                adapter,
                generation,
                dead: false,
                memfd,
                shm,
                trap,
                last: [0; 3],
                async_w,
                async_r,
            },
        );
        Ok(info)
    }

    /// Closes a context, releasing every object still attached to it (as
    /// the kernel does when the uverbs file is closed). Buffers are not
    /// freed: like rdma-core, the application owns leaked queue memory.
    pub fn close_context(&mut self, ctx: u32) {
        let Some(mut c) = self.ctxs.remove(&ctx) else {
            return;
        };
        // The kernel zaps every mapping of the doorbell page when the
        // uverbs file goes (and at a reset): stores through any mapping
        // left over (another process's, or a stale pointer) must not reach
        // a later context. Its pages are never reused for a new context
        // (fresh memfd per context, fresh trapped page while slots last);
        // they are kept watched so such stores count as discarded.
        if let Some(t) = &c.trap {
            t.close();
            self.trap_slots.remove(&t.slot);
        }
        if self.closed_pages.len() >= CLOSED_PAGES_KEPT {
            if let Some(old) = self.closed_pages.pop_front() {
                if let Some(t) = old.trap {
                    t.detach(self.ring);
                }
            }
        }
        self.closed_pages.push_back(ClosedPage {
            shm: c.shm,
            last: c.last,
            trap: c.trap.take(),
        });
        let qps: Vec<u32> = self
            .qps
            .iter()
            .filter(|(_, q)| q.ctx == ctx)
            .map(|(h, _)| *h)
            .collect();
        for q in qps {
            let _ = self.destroy_qp(q);
        }
        let ts: Vec<u32> = self
            .tables
            .iter()
            .filter(|(_, t)| t.ctx == ctx)
            .map(|(h, _)| *h)
            .collect();
        for t in ts {
            self.tables.remove(&t);
        }
        let ws: Vec<u32> = self
            .wqs
            .iter()
            .filter(|(_, w)| w.ctx == ctx)
            .map(|(h, _)| *h)
            .collect();
        for w in ws {
            self.retire_wq(w);
        }
        let cs: Vec<u32> = self
            .cqs
            .iter()
            .filter(|(_, c)| c.ctx == ctx)
            .map(|(h, _)| *h)
            .collect();
        for c in cs {
            self.retire_cq(c);
        }
        let pds: Vec<u32> = self
            .pds
            .iter()
            .filter(|(_, p)| p.ctx == ctx)
            .map(|(h, _)| *h)
            .collect();
        self.mrs.retain(|_, m| !pds.contains(&m.pd));
        for p in pds {
            self.pds.remove(&p);
        }
        // c's fds close here; the memfd page stays mapped (see memfd_page).
    }

    pub fn alloc_pd(&mut self, ctx: u32) -> Res<u32> {
        self.ctx_alive(ctx)?;
        self.take_alloc_fail()?;
        let h = self.handle();
        self.pds.insert(
            h,
            Pd {
                ctx,
                parent_of: None,
                port: None,
            },
        );
        Ok(h)
    }

    /// `pd_context` carries the 1-based IB port (DPDK `mana_probe_port`).
    pub fn alloc_parent_domain(&mut self, ctx: u32, pd: u32, port: u32) -> Res<u32> {
        let c = self.ctx_alive(ctx)?;
        let adapter = c.adapter;
        let p = self.pds.get(&pd).ok_or(EINVAL)?;
        if p.ctx != ctx || p.parent_of.is_some() {
            return Err(EINVAL);
        }
        let ports = &self.adapters[adapter].ports;
        let gport = if port >= 1 && (port as usize) <= ports.len() {
            Some(ports[port as usize - 1])
        } else {
            None
        };
        let h = self.handle();
        self.pds.insert(
            h,
            Pd {
                ctx,
                parent_of: Some(pd),
                port: gport,
            },
        );
        Ok(h)
    }

    pub fn dealloc_pd(&mut self, pd: u32) -> Res<()> {
        if !self.pds.contains_key(&pd) {
            return Err(EINVAL);
        }
        let in_use = self.pds.values().any(|p| p.parent_of == Some(pd))
            || self.mrs.values().any(|m| m.pd == pd)
            || self.wqs.values().any(|w| w.pd == pd);
        if in_use {
            return Err(EBUSY);
        }
        self.pds.remove(&pd);
        Ok(())
    }

    fn base_pd(&self, pd: u32) -> u32 {
        self.pds.get(&pd).and_then(|p| p.parent_of).unwrap_or(pd)
    }

    /// # Contract
    /// `[addr, addr+len)` must be memory of this process that stays mapped
    /// until `dereg_mr` (as for real hardware DMA).
    pub fn reg_mr(&mut self, pd: u32, addr: usize, len: usize) -> Res<u32> {
        let p = self.pds.get(&pd).ok_or(EINVAL)?;
        let ctx = p.ctx;
        self.ctx_alive(ctx)?;
        if len == 0 || len as u64 > self.limits.max_mr_size || addr.checked_add(len).is_none() {
            return Err(EINVAL);
        }
        if self.mrs.len() >= self.limits.max_mr as usize {
            return Err(ENOMEM);
        }
        self.take_alloc_fail()?;
        let lkey = self.next_lkey;
        self.next_lkey += 1;
        // SAFETY: per this function's contract.
        let region = unsafe { Region::new(addr, len) };
        self.mrs.insert(lkey, Mr { pd, region });
        Ok(lkey)
    }

    pub fn dereg_mr(&mut self, lkey: u32) -> Res<()> {
        self.mrs.remove(&lkey).map(|_| ()).ok_or(EINVAL)
    }

    fn queue_limit(&self) -> u32 {
        match self.opts.rdma_core {
            RdmaCoreLimits::V44 => 256,
            RdmaCoreLimits::Modern => self.limits.max_qp_wr,
        }
    }

    /// Checks done by libmana / the kernel before a CQ buffer is allocated.
    pub fn check_cq(&self, ctx: u32, cqe: u32) -> Res<()> {
        self.ctx_alive(ctx)?;
        if cqe == 0 || cqe > self.queue_limit() || cqe > self.limits.max_cqe {
            return Err(EINVAL);
        }
        Ok(())
    }

    pub fn create_cq(
        &mut self,
        ctx: u32,
        cqe: u32,
        buf: Region,
        channel: Option<u32>,
        user: usize,
    ) -> Res<u32> {
        self.check_cq(ctx, cqe)?;
        self.take_alloc_fail()?;
        if buf.len() < cqe as usize * 64 {
            return Err(EINVAL);
        }
        if let Some(ch) = channel {
            if !self.channels.contains_key(&ch) {
                return Err(EINVAL);
            }
        }
        let h = self.handle();
        self.cqs.insert(
            h,
            Cq {
                ctx,
                hw_id: None,
                buf,
                count: cqe,
                prod: u64::from(cqe),
                armed: false,
                channel,
                user,
                bound: None,
                delayed: VecDeque::new(),
                counters: QueueCounters::default(),
            },
        );
        Ok(h)
    }

    pub fn destroy_cq(&mut self, cq: u32) -> Res<Region> {
        let c = self.cqs.get(&cq).ok_or(EINVAL)?;
        if let Some(w) = c.bound {
            if self.wqs.contains_key(&w) {
                return Err(EBUSY);
            }
        }
        Ok(self.retire_cq(cq).expect("present"))
    }

    fn retire_cq(&mut self, cq: u32) -> Option<Region> {
        let c = self.cqs.remove(&cq)?;
        self.retired.push(QueueReport {
            kind: "cq".into(),
            id: c.hw_id.unwrap_or(0),
            port: String::new(),
            live: false,
            counters: c.counters,
        });
        Some(c.buf)
    }

    pub fn check_wq(&self, ctx: u32, pd: u32, max_wr: u32, max_sge: u32) -> Res<()> {
        self.ctx_alive(ctx)?;
        if !self.pds.contains_key(&pd) {
            return Err(EINVAL);
        }
        if max_wr == 0 || max_wr > self.queue_limit() || max_wr > self.limits.max_qp_wr {
            return Err(EINVAL);
        }
        if max_sge == 0
            || max_sge > self.limits.max_sge
            || wqe_size(max_sge) > wire::MAX_RX_WQE as usize
        {
            return Err(EINVAL);
        }
        Ok(())
    }

    pub fn create_wq(
        &mut self,
        ctx: u32,
        pd: u32,
        cq: u32,
        max_wr: u32,
        max_sge: u32,
        buf: Region,
    ) -> Res<u32> {
        self.check_wq(ctx, pd, max_wr, max_sge)?;
        self.take_alloc_fail()?;
        let c = self.cqs.get(&cq).ok_or(EINVAL)?;
        if c.ctx != ctx || c.bound.is_some() {
            return Err(EINVAL);
        }
        let port = self.pds.get(&pd).and_then(|p| p.port);
        let h = self.handle();
        self.cqs.get_mut(&cq).unwrap().bound = Some(h);
        self.wqs.insert(
            h,
            Wq {
                ctx,
                pd,
                kind: WqKind::Rq,
                port,
                hw_id: None,
                buf,
                count: max_wr,
                cq,
                dev_off: 0,
                db_tail: 0,
                active: false,
                counters: QueueCounters::default(),
            },
        );
        Ok(h)
    }

    pub fn destroy_wq(&mut self, wq: u32) -> Res<Region> {
        if !self.wqs.contains_key(&wq) {
            return Err(EINVAL);
        }
        if self.tables.values().any(|t| t.wqs.contains(&wq)) {
            return Err(EBUSY);
        }
        Ok(self.retire_wq(wq).expect("present"))
    }

    fn retire_wq(&mut self, wq: u32) -> Option<Region> {
        let w = self.wqs.remove(&wq)?;
        if let Some(c) = self.cqs.get_mut(&w.cq) {
            if c.bound == Some(wq) {
                c.bound = None;
            }
        }
        let port = w
            .port
            .map(|p| crate::config::format_mac(&self.ports[p].mac))
            .unwrap_or_default();
        self.retired.push(QueueReport {
            kind: if w.kind == WqKind::Sq { "sq" } else { "rq" }.into(),
            id: w.hw_id.unwrap_or(0),
            port,
            live: false,
            counters: w.counters,
        });
        Some(w.buf)
    }

    pub fn create_ind_table(&mut self, ctx: u32, wqs: Vec<u32>, log_size: u32) -> Res<u32> {
        self.ctx_alive(ctx)?;
        self.take_alloc_fail()?;
        if (1usize << log_size) > wire::INDIRECTION_TABLE_SIZE || wqs.len() != 1 << log_size {
            return Err(EINVAL);
        }
        for w in &wqs {
            match self.wqs.get(w) {
                Some(q) if q.ctx == ctx && q.kind == WqKind::Rq => {}
                _ => return Err(EINVAL),
            }
        }
        let h = self.handle();
        self.tables.insert(h, IndTable { ctx, wqs, log_size });
        Ok(h)
    }

    pub fn destroy_ind_table(&mut self, t: u32) -> Res<()> {
        if self
            .qps
            .values()
            .any(|q| matches!(q.kind, QpKind::Rss { table, .. } if table == t))
        {
            return Err(EBUSY);
        }
        self.tables.remove(&t).map(|_| ()).ok_or(EINVAL)
    }

    fn parent_port(&self, pd: u32) -> Res<usize> {
        let p = self.pds.get(&pd).ok_or(EINVAL)?;
        if p.parent_of.is_none() {
            return Err(EINVAL); // "Create RAW QP should use parent domain"
        }
        p.port.ok_or(EINVAL)
    }

    pub fn check_raw_qp(&self, ctx: u32, pd: u32, max_send_wr: u32, max_send_sge: u32) -> Res<()> {
        self.ctx_alive(ctx)?;
        self.parent_port(pd)?;
        if max_send_wr == 0
            || max_send_wr > self.queue_limit()
            || max_send_wr > self.limits.max_qp_wr
        {
            return Err(EINVAL);
        }
        // Kernel: max_send_sge > MAX_TX_WQE_SGL_ENTRIES (30); libmana v44:
        // get_wqe_size(sge) > 512.
        if max_send_sge == 0
            || max_send_sge > 30
            || wqe_size(max_send_sge) > wire::MAX_TX_WQE as usize
        {
            return Err(EINVAL);
        }
        Ok(())
    }

    pub fn create_raw_qp(
        &mut self,
        ctx: u32,
        pd: u32,
        send_cq: u32,
        max_send_wr: u32,
        max_send_sge: u32,
        buf: Region,
    ) -> Res<RawQpInfo> {
        self.check_raw_qp(ctx, pd, max_send_wr, max_send_sge)?;
        let port = self.parent_port(pd)?;
        let c = self.cqs.get(&send_cq).ok_or(EINVAL)?;
        if c.ctx != ctx || c.bound.is_some() {
            return Err(EINVAL);
        }
        if self.ports[port].kernel_if_up {
            return Err(EBUSY); // manadv(7): port in use by the kernel
        }
        self.take_alloc_fail()?;
        let sq = self.handle();
        let sq_id = self.qid();
        let cq_id = self.qid();
        let cqm = self.cqs.get_mut(&send_cq).unwrap();
        cqm.bound = Some(sq);
        cqm.hw_id = Some(cq_id);
        self.wqs.insert(
            sq,
            Wq {
                ctx,
                pd,
                kind: WqKind::Sq,
                port: Some(port),
                hw_id: Some(sq_id),
                buf,
                count: max_send_wr,
                cq: send_cq,
                dev_off: 0,
                db_tail: 0,
                active: true,
                counters: QueueCounters::default(),
            },
        );
        let qp = self.handle();
        self.qps.insert(
            qp,
            Qp {
                ctx,
                kind: QpKind::Raw { sq },
            },
        );
        Ok(RawQpInfo {
            qp,
            sq,
            sq_id,
            cq_id,
            tx_vp_offset: u32::from(self.ports[port].vp_offset),
        })
    }

    pub fn create_rss_qp(&mut self, ctx: u32, pd: u32, table: u32, hash: &HashConf) -> Res<u32> {
        self.ctx_alive(ctx)?;
        let port = self.parent_port(pd)?;
        if !hash.toeplitz || hash.key.len() != wire::HASH_KEY_SIZE {
            return Err(EINVAL);
        }
        let t = self.tables.get(&table).ok_or(EINVAL)?;
        if t.ctx != ctx {
            return Err(EINVAL);
        }
        let wqs = t.wqs.clone();
        let log_size = t.log_size;
        if self.ports[port].kernel_if_up {
            return Err(EBUSY);
        }
        self.take_alloc_fail()?;
        for w in &wqs {
            if self.wqs[w].active {
                return Err(EBUSY);
            }
        }
        for w in &wqs {
            let wq_id = self.qid();
            let cq_id = self.qid();
            let cqh = self.wqs[w].cq;
            let q = self.wqs.get_mut(w).unwrap();
            q.hw_id = Some(wq_id);
            q.active = true;
            q.port = Some(port);
            q.dev_off = 0;
            q.db_tail = 0;
            if let Some(c) = self.cqs.get_mut(&cqh) {
                c.hw_id = Some(cq_id);
            }
        }
        let qp = self.handle();
        let mut tab = [0u32; 64];
        for (i, e) in tab.iter_mut().enumerate() {
            *e = wqs[i % wqs.len()];
        }
        let mut key = [0u8; 40];
        key.copy_from_slice(&hash.key);
        self.ports[port].rss = Some(Rss {
            qp,
            enabled: log_size != 0,
            key,
            fields: hash.fields,
            table: tab,
            default_rq: *wqs.last().unwrap(),
        });
        self.qps.insert(
            qp,
            Qp {
                ctx,
                kind: QpKind::Rss { table, port },
            },
        );
        Ok(qp)
    }

    /// Destroys a QP. A RAW QP returns its SQ buffer (to free); an RSS QP
    /// tears down the hardware RQs (they go dead before destroy_wq).
    pub fn destroy_qp(&mut self, qp: u32) -> Res<Option<Region>> {
        let q = self.qps.remove(&qp).ok_or(EINVAL)?;
        match q.kind {
            QpKind::Raw { sq } => Ok(self.retire_wq(sq)),
            QpKind::Rss { table, port } => {
                if let Some(t) = self.tables.get(&table) {
                    for w in t.wqs.clone() {
                        if let Some(q) = self.wqs.get_mut(&w) {
                            q.active = false;
                        }
                    }
                }
                if self.ports[port].rss.as_ref().is_some_and(|r| r.qp == qp) {
                    self.ports[port].rss = None;
                }
                Ok(None)
            }
        }
    }

    pub fn create_channel(&mut self) -> Res<(u32, RawFd)> {
        let (r, w) = pipe().map_err(|_| ENOMEM)?;
        let h = self.handle();
        let fd = r.as_raw_fd();
        self.channels.insert(h, Channel { w, r });
        Ok((h, fd))
    }

    pub fn destroy_channel(&mut self, ch: u32) -> Res<()> {
        if self.cqs.values().any(|c| c.channel == Some(ch)) {
            return Err(EBUSY);
        }
        self.channels
            .remove(&ch)
            .map(|c| drop((c.r, c.w)))
            .ok_or(EINVAL)
    }

    /// (buffer, count, hw id or 0 before the QP exists) of a CQ.
    pub fn cq_info(&self, cq: u32) -> Option<(Region, u32, u32)> {
        self.cqs
            .get(&cq)
            .map(|c| (c.buf, c.count, c.hw_id.unwrap_or(0)))
    }

    /// (buffer, count, hw id or 0) of a WQ / SQ.
    pub fn wq_info(&self, wq: u32) -> Option<(Region, u32, u32)> {
        self.wqs
            .get(&wq)
            .map(|w| (w.buf, w.count, w.hw_id.unwrap_or(0)))
    }

    pub fn ctx_db_page(&self, ctx: u32) -> Option<usize> {
        self.ctxs
            .get(&ctx)
            .map(|c| c.trap.as_ref().map_or(c.shm.addr(), |t| t.addr))
    }

    /// Attaches a completion channel to a CQ; `user` is what an event
    /// carries (the `ibv_cq` pointer in the verbs layer).
    pub fn set_cq_channel(&mut self, cq: u32, ch: u32, user: usize) -> Res<()> {
        if !self.channels.contains_key(&ch) {
            return Err(EINVAL);
        }
        let c = self.cqs.get_mut(&cq).ok_or(EINVAL)?;
        c.channel = Some(ch);
        c.user = user;
        Ok(())
    }

    /// Arms a CQ directly (the `ibv_req_notify_cq` path): the next CQE
    /// signals the channel.
    pub fn arm_cq(&mut self, cq: u32) -> Res<()> {
        let c = self.cqs.get_mut(&cq).ok_or(EINVAL)?;
        c.armed = true;
        self.counters.cq_arms += 1;
        Ok(())
    }

    // -----------------------------------------------------------------------
    // Faults
    // -----------------------------------------------------------------------

    pub fn schedule(&mut self, fault: Fault, trigger: Trigger) -> Res<()> {
        self.validate_fault(&fault)?;
        let due = match trigger {
            Trigger::Now => return self.apply_fault(fault),
            Trigger::AfterMs(ms) => Due::At(Instant::now() + Duration::from_millis(ms)),
            Trigger::AfterPackets(n) => Due::Packets(self.packets_moved + n),
            Trigger::AtCreate(n) => Due::Create(self.creates + n.max(1)),
        };
        self.faults.push(Scheduled { fault, due });
        Ok(())
    }

    fn adapter_by_pci(&self, pci: &str) -> Res<usize> {
        let pci = crate::config::normalize_pci(pci).map_err(|_| EINVAL)?;
        self.adapters
            .iter()
            .position(|a| a.pci == pci)
            .ok_or(ENOENT)
    }

    fn port_by_mac(&self, mac: &str) -> Res<usize> {
        let m = parse_mac(mac).map_err(|_| EINVAL)?;
        self.ports.iter().position(|p| p.mac == m).ok_or(ENOENT)
    }

    fn validate_fault(&self, f: &Fault) -> Res<()> {
        match f {
            Fault::Reset { pci, .. } | Fault::HotRemove { pci } => {
                self.adapter_by_pci(pci).map(|_| ())
            }
            Fault::LinkDown { mac }
            | Fault::LinkUp { mac }
            | Fault::TxPause { mac }
            | Fault::TxResume { mac }
            | Fault::KernelIf { mac, .. } => self.port_by_mac(mac).map(|_| ()),
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
                crate::sysfs::remove_ib(&root, &ad.ib_name);
                ad.back_at = Some(
                    Instant::now()
                        + Duration::from_millis(down_ms.unwrap_or(self.opts.reset_down_ms)),
                );
                ad.next_name = new_name
                    .or_else(|| self.adapter_cfgs[ad.cfg_index].ib_name_after_reset.clone());
            }
            Fault::HotRemove { pci } => {
                let a = self.adapter_by_pci(&pci)?;
                self.fatal_contexts(a);
                let root = self.opts.sysfs_root.clone();
                let ad = &mut self.adapters[a];
                ad.present = false;
                ad.removed = true;
                ad.back_at = None;
                crate::sysfs::remove_ib(&root, &ad.ib_name);
                crate::sysfs::remove_pci(&root, &ad.pci);
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
        }
        Ok(())
    }

    fn run_timers(&mut self) -> bool {
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
                    let _ = crate::sysfs::ensure_ib(&self.opts.sysfs_root, acfg, &a.ib_name);
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
                Due::Create(_) => false,
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

    // -----------------------------------------------------------------------
    // Data path
    // -----------------------------------------------------------------------

    /// One doorbell store at `offset` of context `ctx`'s page.
    pub fn doorbell(&mut self, ctx: u32, offset: usize, value: u64) {
        let Some(c) = self.ctxs.get(&ctx) else {
            self.counters.discarded_doorbells += 1;
            return;
        };
        if c.dead {
            self.counters.discarded_doorbells += 1;
            return;
        }
        self.counters.doorbells += 1;
        let id = (value & 0xff_ffff) as u32;
        match offset {
            wire::DB_SQ | wire::DB_RQ => {
                let kind = if offset == wire::DB_SQ {
                    WqKind::Sq
                } else {
                    WqKind::Rq
                };
                let tail = (value >> 32) as u32;
                let Some(w) = self
                    .wqs
                    .values_mut()
                    .find(|w| w.ctx == ctx && w.kind == kind && w.hw_id == Some(id) && w.active)
                else {
                    self.counters.bad_doorbells += 1;
                    return;
                };
                let delta = tail.wrapping_sub(w.db_tail);
                let fill = tail.wrapping_sub(w.dev_off);
                if delta % wire::BU != 0 || fill as usize > w.buf.len() {
                    self.counters.bad_doorbells += 1;
                    return;
                }
                w.counters.doorbells += 1;
                w.db_tail = tail;
            }
            wire::DB_CQ => {
                let tail = (value >> 32) & 0x7fff_ffff;
                let arm = value >> 63 != 0;
                let Some(cqh) = self
                    .cqs
                    .iter()
                    .find(|(_, c)| c.ctx == ctx && c.hw_id == Some(id))
                    .map(|(h, _)| *h)
                else {
                    self.counters.bad_doorbells += 1;
                    return;
                };
                if arm {
                    self.counters.cq_arms += 1;
                    let c = self.cqs.get_mut(&cqh).unwrap();
                    let m = u64::from(c.count) << 3;
                    let diff = ((c.prod % m) + m - (tail % m)) % m;
                    if diff == 0 {
                        c.armed = true;
                    } else if diff <= u64::from(c.count) {
                        c.armed = true;
                        self.signal_cq(cqh);
                    } else {
                        self.counters.cqe_overflow_warnings += 1;
                    }
                }
            }
            _ => self.counters.bad_doorbells += 1,
        }
    }

    fn signal_cq(&mut self, cqh: u32) {
        let Some(c) = self.cqs.get_mut(&cqh) else {
            return;
        };
        if !c.armed {
            return;
        }
        c.armed = false;
        if let Some(ch) = c.channel.and_then(|ch| self.channels.get(&ch)) {
            write_fd(ch.w.as_raw_fd(), &(c.user as u64).to_le_bytes());
            self.counters.cq_events += 1;
        }
    }

    fn post_cqe(&mut self, cqh: u32, mut data: [u8; 60], wq_num: u32, is_sq: bool) {
        let Some(c) = self.cqs.get_mut(&cqh) else {
            return;
        };
        let count = u64::from(c.count);
        let slot = (c.prod % count) as usize;
        let owner = ((c.prod / count) & wire::OWNER_MASK) as u32;
        let mut info = wire::cqe_info(wq_num, is_sq, owner);
        if self.cqe_corrupt > 0 {
            self.cqe_corrupt -= 1;
            // Garble: an undefined CQE type, vendor bits and the reserved
            // bits of cqe_info (owner bits stay valid so the driver sees it).
            data[0] = (data[0] & 0xc0) | 0x3f;
            data[3] = 0xa5;
            info |= 0xf << 25;
        }
        c.prod += 1;
        c.counters.cqes += 1;
        let pending = PendingCqe {
            due: Instant::now(),
            slot_off: slot * 64,
            data,
            info,
        };
        let delay = match &mut self.cqe_delay {
            Some((d, n)) if *n > 0 => {
                *n -= 1;
                Some(*d)
            }
            _ => None,
        };
        if let Some(d) = delay {
            c.delayed.push_back(PendingCqe {
                due: Instant::now() + d,
                ..pending
            });
        } else if !c.delayed.is_empty() {
            c.delayed.push_back(pending);
        } else {
            c.buf
                .write_cqe(pending.slot_off, &pending.data, pending.info);
            self.signal_cq(cqh);
        }
    }

    fn flush_delayed(&mut self) -> bool {
        let now = Instant::now();
        let mut fired = Vec::new();
        for (h, c) in self.cqs.iter_mut() {
            while let Some(p) = c.delayed.front() {
                if p.due > now {
                    break;
                }
                let p = c.delayed.pop_front().unwrap();
                c.buf.write_cqe(p.slot_off, &p.data, p.info);
                fired.push(*h);
            }
        }
        let any = !fired.is_empty();
        for h in fired {
            self.signal_cq(h);
        }
        any
    }

    fn drain_doorbells(&mut self) -> bool {
        let mut did = false;
        while let Some(w) = self.ring.pop() {
            did = true;
            match self.trap_slots.get(&w.slot) {
                Some(&ctx) => {
                    if w.width != 8 {
                        self.counters.bad_doorbells += 1; // short doorbells (RTE_ARCH_32) unsupported
                        continue;
                    }
                    self.doorbell(ctx, w.offset as usize, w.value)
                }
                None => self.counters.discarded_doorbells += 1,
            }
        }
        // Poll the memfd pages (poll mode, and secondaries in trap mode).
        // Those of dead contexts too: what is stored there is discarded.
        let ctxs: Vec<(u32, [u64; 3])> = self
            .ctxs
            .iter()
            .map(|(h, c)| {
                (
                    *h,
                    [
                        c.shm.read_u64(wire::DB_SQ),
                        c.shm.read_u64(wire::DB_RQ),
                        c.shm.read_u64(wire::DB_CQ),
                    ],
                )
            })
            .collect();
        for (h, vals) in ctxs {
            for (i, off) in [wire::DB_SQ, wire::DB_RQ, wire::DB_CQ]
                .into_iter()
                .enumerate()
            {
                let last = self.ctxs[&h].last[i];
                if vals[i] != last {
                    self.ctxs.get_mut(&h).unwrap().last[i] = vals[i];
                    self.doorbell(h, off, vals[i]);
                    did = true;
                }
            }
        }
        // Closed contexts' memfd pages: whatever changed was a doorbell
        // rung through a mapping that outlived its context.
        let mut stale = 0;
        for p in &mut self.closed_pages {
            for (i, off) in [wire::DB_SQ, wire::DB_RQ, wire::DB_CQ]
                .into_iter()
                .enumerate()
            {
                let v = p.shm.read_u64(off);
                if v != p.last[i] {
                    p.last[i] = v;
                    stale += 1;
                }
            }
        }
        if stale > 0 {
            self.counters.discarded_doorbells += stale;
            did = true;
        }
        did
    }

    fn mr_lookup(&self, base_pd: u32, sge: &wire::Sge) -> Result<Region, u32> {
        let mr = self.mrs.get(&sge.mem_key).ok_or(ve::BAD_LKEY)?;
        if self.base_pd(mr.pd) != base_pd {
            return Err(ve::BAD_LKEY);
        }
        if !mr.region.contains(sge.address, u64::from(sge.size)) {
            return Err(ve::OUT_OF_MR);
        }
        Ok(mr.region)
    }

    /// Parses the WQE at the queue's device offset. Returns the header, the
    /// inline OOB bytes and the SGL, or a vendor error code and how many
    /// bytes to skip.
    ///
    /// `client_oob_in_sgl` is accepted on send queues only (LSO WQEs; the
    /// LSO rules are checked by `build_tx`).
    fn read_wqe(w: &Wq, max: u32) -> Result<ParsedWqe, (u32, u32)> {
        let avail = w.db_tail.wrapping_sub(w.dev_off);
        let size = w.buf.len();
        let ring_off = (w.dev_off as usize) & (size - 1);
        let h = WqeHeader::decode(w.buf.read_u64(ring_off));
        let oob = h.oob_bytes();
        let bytes = h.wqe_bytes();
        if bytes > avail {
            return Err((ve::WQE_PAST_TAIL, avail));
        }
        if h.num_sge == 0
            || (oob != 8 && oob != 24)
            || (h.client_oob_in_sgl && w.kind != WqKind::Sq)
            || bytes > max
            || ring_off + 8 + oob > size
        {
            return Err((ve::BAD_WQE_HEADER, bytes));
        }
        let mut ob = vec![0u8; oob];
        w.buf.read(ring_off + 8, &mut ob);
        let mut sgl = vec![0u8; 16 * usize::from(h.num_sge)];
        w.buf.read_wrapping(ring_off + 8 + oob, &mut sgl);
        let sges = sgl
            .chunks_exact(16)
            .map(|c| wire::Sge::decode(c.try_into().unwrap()))
            .collect();
        Ok((h, ob, sges))
    }

    fn process_sq(&mut self, wqh: u32, out: &mut Vec<(usize, Vec<u8>)>) -> bool {
        let mut did = false;
        for _ in 0..TX_BUDGET {
            let w = &self.wqs[&wqh];
            if !w.active || w.dev_off == w.db_tail {
                break;
            }
            let port = w.port.expect("SQ has a port");
            if self.ports[port].tx_paused {
                break;
            }
            did = true;
            let off = w.dev_off;
            let ring_off = (off as usize) & (w.buf.len() - 1);
            let sq_id = w.hw_id.unwrap_or(0);
            let cqh = w.cq;
            let base_pd = self.base_pd(w.pd);
            let parsed = Self::read_wqe(w, wire::MAX_TX_WQE);
            let (advance, result) = match parsed {
                Err((code, skip)) => (skip, Err((wire::CQE_TX_INVALID_OOB, code, "malformed_wqe"))),
                Ok((h, oob, sges)) => (
                    h.wqe_bytes(),
                    self.build_tx(wqh, port, base_pd, &h, &oob, &sges),
                ),
            };
            let w = self.wqs.get_mut(&wqh).unwrap();
            w.dev_off = w.dev_off.wrapping_add(advance);
            w.counters.wqes += 1;
            let cq_id = self.cqs.get(&cqh).and_then(|c| c.hw_id).unwrap_or(0);
            let _ = cq_id;
            match result {
                Ok((frames, suppress)) => {
                    let link = self.ports[port].link_up;
                    let mut n = 0u64;
                    let mut bytes = 0u64;
                    for f in frames {
                        if !link {
                            self.ports[port].counters.drop("link_down", 1);
                            continue;
                        }
                        n += 1;
                        bytes += f.len() as u64;
                        out.push((port, f));
                    }
                    let w = self.wqs.get_mut(&wqh).unwrap();
                    w.counters.packets += n;
                    w.counters.bytes += bytes;
                    let pc = &mut self.ports[port].counters;
                    pc.tx_packets += n;
                    pc.tx_bytes += bytes;
                    self.packets_moved += n;
                    if !suppress {
                        self.post_cqe(
                            cqh,
                            wire::tx_comp(wire::CQE_TX_OKAY, 0, ring_off as u32),
                            sq_id,
                            true,
                        );
                    }
                }
                Err((cqe_type, code, reason)) => {
                    self.wqs.get_mut(&wqh).unwrap().counters.errors += 1;
                    self.ports[port].counters.drop(reason, 1);
                    // One CQE for every failed WQE, suppressed or not.
                    self.post_cqe(
                        cqh,
                        wire::tx_comp(cqe_type, code, ring_off as u32),
                        sq_id,
                        true,
                    );
                }
            }
        }
        did
    }

    /// Validates one TX WQE and builds the frames it sends.
    #[allow(clippy::type_complexity)]
    fn build_tx(
        &self,
        wqh: u32,
        port: usize,
        base_pd: u32,
        h: &WqeHeader,
        oob: &[u8],
        sges: &[wire::Sge],
    ) -> Result<(Vec<Vec<u8>>, bool), (u32, u32, &'static str)> {
        let w = &self.wqs[&wqh];
        let o = TxOob::decode(oob);
        let long = oob.len() == 24;
        if o.pkt_fmt > 1 || (o.pkt_fmt == 1) != long {
            return Err((wire::CQE_TX_INVALID_OOB, ve::BAD_OOB, "malformed_wqe"));
        }
        let cq_id = self
            .cqs
            .get(&w.cq)
            .and_then(|c| c.hw_id)
            .unwrap_or(u32::MAX);
        if o.vcq_num != cq_id {
            return Err((wire::CQE_TX_INVALID_OOB, ve::BAD_CQ_NUM, "malformed_wqe"));
        }
        let sq_id = w.hw_id.unwrap_or(0);
        if u32::from(o.vsq_frame) != (sq_id >> 10) & 0x3fff {
            return Err((wire::CQE_TX_INVALID_OOB, ve::BAD_SQ_FRAME, "malformed_wqe"));
        }
        if o.short_vp_offset != self.ports[port].vp_offset {
            return Err((wire::CQE_TX_VPORT_IDX_OUT_OF_RANGE, ve::BAD_VPORT, "vport"));
        }
        // An LSO send (TSO), encoded as the Linux driver does: the WQE
        // header's client_oob_in_sgl + client_data_unit (MSS) + last_vbytes
        // (size of SGE 0, exactly the headers), at least 2 SGEs.
        let mss = usize::from(h.client_data_unit);
        let lso = h.client_oob_in_sgl;
        if lso && mss == 0 {
            return Err((wire::CQE_TX_INVALID_OOB, ve::LSO_NO_MSS, "lso"));
        }
        if !lso && mss != 0 {
            return Err((wire::CQE_TX_INVALID_OOB, ve::MSS_WITHOUT_LSO, "lso"));
        }
        if lso && (sges.len() < 2 || u32::from(h.last_vbytes) != sges[0].size) {
            return Err((wire::CQE_TX_INVALID_OOB, ve::LSO_BAD_SGL, "lso"));
        }
        // Larger than any LSO send (64 KiB of payload plus headers): refuse
        // before gathering, whatever the driver put in the SGE sizes.
        let total: u64 = sges.iter().map(|s| u64::from(s.size)).sum();
        if total > MAX_TX_GATHER {
            return Err((wire::CQE_TX_MTU_DROP, ve::MTU, "mtu"));
        }
        let mut frame = Vec::with_capacity(total as usize);
        for s in sges {
            match self.mr_lookup(base_pd, s) {
                Ok(r) => {
                    let start = frame.len();
                    frame.resize(start + s.size as usize, 0);
                    r.read(s.address as usize - r.addr(), &mut frame[start..]);
                }
                Err(code) => {
                    let reason = if code == ve::BAD_LKEY {
                        "bad_lkey"
                    } else {
                        "out_of_mr"
                    };
                    return Err((wire::CQE_TX_HDR_PROCESSING_ERROR, code, reason));
                }
            }
        }
        let mtu = self.ports[port].mtu as usize;
        let mut frames = if lso {
            let hlen = sges[0].size as usize;
            let hl = pkt::parse_lso_headers(&frame[..hlen]).map_err(|e| {
                let code = match e {
                    pkt::LsoHeaderError::NotHeaders => ve::LSO_BAD_HEADER,
                    pkt::LsoHeaderError::NotTcp => ve::LSO_NOT_TCP,
                };
                (wire::CQE_TX_HDR_PROCESSING_ERROR, code, "lso")
            })?;
            // The OOB asks for what segmentation implies, as the kernel
            // fills it: outer IP version, IP (v4) and TCP checksums, the
            // transport offset.
            if o.is_outer_ipv4 != hl.ipv4
                || o.is_outer_ipv6 == hl.ipv4
                || (hl.ipv4 && !o.comp_iphdr_csum)
                || !o.comp_tcp_csum
                || o.comp_udp_csum
                || usize::from(o.trans_off) != hl.l4
            {
                return Err((wire::CQE_TX_INVALID_OOB, ve::LSO_BAD_OOB, "lso"));
            }
            let payload = frame.len() - hlen;
            if payload == 0 {
                return Err((wire::CQE_TX_INVALID_OOB, ve::LSO_BAD_SGL, "lso"));
            }
            let (_, largest) = pkt::lso_shape(&hl, payload, mss);
            let limit = mtu + pkt::ETH_HLEN + if hl.vlan { 4 } else { 0 };
            if largest > limit {
                return Err((wire::CQE_TX_MTU_DROP, ve::MTU, "mtu"));
            }
            pkt::lso_segment(&frame[..hlen], &hl, &frame[hlen..], mss)
        } else {
            if frame.len() < pkt::ETH_HLEN {
                return Err((wire::CQE_TX_INVALID_ETH_TYPE, ve::RUNT, "malformed_wqe"));
            }
            // Checksum offloads (the frame is untagged here: DPDK inserts
            // VLAN through the long OOB).
            let lay = pkt::parse(&frame).ok_or((
                wire::CQE_TX_HDR_PROCESSING_ERROR,
                ve::RUNT,
                "malformed_wqe",
            ))?;
            if o.comp_iphdr_csum && lay.ipv4 {
                pkt::fill_ipv4_csum(&mut frame, lay.l3);
            }
            if o.comp_tcp_csum || o.comp_udp_csum {
                let proto = if o.comp_tcp_csum {
                    pkt::IPPROTO_TCP
                } else {
                    pkt::IPPROTO_UDP
                };
                // TCP: the driver gives the transport offset; UDP: DPDK does
                // not set it (tx.c), so the device parses the headers.
                let l4 = if o.comp_tcp_csum && o.trans_off != 0 {
                    Some(usize::from(o.trans_off))
                } else {
                    lay.l4
                };
                let end = if lay.ip_end != 0 {
                    lay.ip_end
                } else {
                    frame.len()
                };
                match l4 {
                    Some(l4) if l4 + if proto == pkt::IPPROTO_TCP { 20 } else { 8 } <= end => {
                        pkt::fill_l4_csum_offload(&mut frame, l4, end, proto)
                    }
                    _ => {
                        return Err((
                            wire::CQE_TX_HDR_PROCESSING_ERROR,
                            ve::BAD_L4_OFFSET,
                            "malformed_wqe",
                        ))
                    }
                }
            }
            let limit = mtu + pkt::ETH_HLEN + if lay.vlan.is_some() { 4 } else { 0 };
            if frame.len() > limit {
                return Err((wire::CQE_TX_MTU_DROP, ve::MTU, "mtu"));
            }
            vec![frame]
        };
        if long && o.inject_vlan {
            for f in frames.iter_mut() {
                *f = pkt::vlan_insert(f, o.pcp, o.dei, o.vlan_id);
            }
        }
        Ok((frames, o.suppress_txcqe))
    }

    fn deliver(&mut self, port: usize, frame: Vec<u8>) {
        let p = &mut self.ports[port];
        if let Some(cap) = &mut p.capture {
            cap.push(frame.clone());
        }
        match &mut p.backend {
            Backend::Loopback => self.enqueue_rx(port, frame),
            Backend::Pair(peer) => {
                let peer = *peer;
                self.enqueue_rx(peer, frame)
            }
            Backend::Sink => {}
            Backend::Pcap { tx, .. } => {
                if let Some(w) = tx {
                    let _ = backend::pcap_write(w, &frame);
                }
            }
            Backend::AfPacket(fd) => {
                if !backend::af_packet_send(fd, &frame) {
                    p.counters.drop("backend_tx", 1);
                }
            }
        }
    }

    fn enqueue_rx(&mut self, port: usize, frame: Vec<u8>) {
        let p = &mut self.ports[port];
        if !p.link_up {
            p.counters.drop("link_down", 1);
        } else if p.mac_filter && frame.len() >= 6 && frame[0] & 1 == 0 && frame[..6] != p.mac {
            p.counters.drop("mac_filter", 1);
        } else if p.backlog.len() >= RX_BACKLOG_MAX {
            p.counters.drop("rx_backlog", 1);
        } else {
            p.backlog.push_back(frame);
        }
    }

    /// Injects a frame as if it arrived on the wire of `port`.
    pub fn inject_rx(&mut self, port: usize, frame: Vec<u8>) {
        self.enqueue_rx(port, frame);
    }

    pub fn set_capture(&mut self, port: usize, on: bool) {
        self.ports[port].capture = if on { Some(Vec::new()) } else { None };
    }

    pub fn take_capture(&mut self, port: usize) -> Vec<Vec<u8>> {
        self.ports[port]
            .capture
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    fn poll_backends(&mut self) -> bool {
        let mut did = false;
        let mut buf = vec![0u8; 65536];
        for i in 0..self.ports.len() {
            let rx_ready = self.ports[i].rss.is_some();
            let backlog_empty = self.ports[i].backlog.is_empty();
            let mut got = Vec::new();
            match &mut self.ports[i].backend {
                Backend::AfPacket(fd) => {
                    while got.len() < 256 {
                        match backend::af_packet_recv(fd, &mut buf) {
                            Some(n) => got.push(buf[..n].to_vec()),
                            None => break,
                        }
                    }
                }
                // Fed once RX is configured, without outrunning a lossless
                // port's backlog.
                Backend::Pcap { rx, .. } if rx_ready && backlog_empty => {
                    while got.len() < 64 {
                        match rx.pop_front() {
                            Some(f) => got.push(f),
                            None => break,
                        }
                    }
                }
                _ => {}
            }
            for f in got {
                did = true;
                self.enqueue_rx(i, f);
            }
        }
        did
    }

    fn select_rq(&self, port: usize, frame: &[u8]) -> Option<(u32, u32, u32)> {
        let rss = self.ports[port].rss.as_ref()?;
        // A one-entry indirection table configures the vPort without RSS
        // (`rss_enable = log_ind_tbl_size != 0`, kernel
        // mana_ib_cfg_vport_steering): everything goes to the default RQ
        // and no hash is reported. (Whether the NIC still computes one then
        // is not documented; reporting none is the conservative choice.)
        if !rss.enabled {
            return Some((rss.default_rq, 0, 0));
        }
        let (hash, htype) = rss_hash(rss, frame);
        let rq = if htype != 0 {
            rss.table[(hash & 63) as usize]
        } else {
            rss.default_rq
        };
        Some((rq, hash, htype))
    }

    fn rq_has_wqe(&self, rq: u32) -> bool {
        self.wqs
            .get(&rq)
            .is_some_and(|w| w.active && w.dev_off != w.db_tail)
    }

    /// Moves received frames of one port into its RQs.
    fn process_rx(&mut self, port: usize) -> bool {
        let mut did = false;
        let coalesce = self.opts.rx_coalesce;
        // Completions gathered per RQ for coalescing: (rq, flags, ppis, first wqe offset).
        let mut batch: Vec<(u32, RxFlags, Vec<RxPpi>, u32)> = Vec::new();
        while let Some(frame) = self.ports[port].backlog.front() {
            // Frames longer than the port's MTU allows (plus the Ethernet
            // header and one 802.1Q tag if present) are not received.
            let tagged = frame.len() >= 14 && frame[12..14] == pkt::ETH_P_8021Q.to_be_bytes();
            let limit = self.ports[port].mtu as usize + pkt::ETH_HLEN + if tagged { 4 } else { 0 };
            if frame.len() > limit {
                self.ports[port].backlog.pop_front();
                self.ports[port].counters.drop("rx_mtu", 1);
                did = true;
                continue;
            }
            let sel = self.select_rq(port, frame);
            let Some((rq, hash, htype)) = sel else {
                let f = self.ports[port].backlog.pop_front().unwrap();
                let _ = f;
                self.ports[port].counters.drop("no_rx_queue", 1);
                did = true;
                continue;
            };
            if !self.rq_has_wqe(rq) {
                if self.ports[port].lossless && self.wqs.get(&rq).is_some_and(|w| w.active) {
                    break;
                }
                self.ports[port].backlog.pop_front();
                self.ports[port].counters.drop("no_rx_buffer", 1);
                did = true;
                continue;
            }
            let mut frame = self.ports[port].backlog.pop_front().unwrap();
            did = true;
            let mut flags = RxFlags {
                hashtype: htype as u16,
                ..Default::default()
            };
            if let Some(tci) = pkt::vlan_strip(&mut frame) {
                flags.vlan_present = true;
                flags.vlan_id = tci & 0xfff;
            }
            if let Some(l) = pkt::parse(&frame) {
                if l.ipv4 {
                    let ok = pkt::ipv4_csum_ok(&frame, l.l3);
                    flags.ip_ok = ok;
                    flags.ip_fail = !ok;
                }
                if let Some(ok) = pkt::l4_csum_ok(&frame, &l) {
                    if l.proto == pkt::IPPROTO_TCP {
                        flags.tcp_ok = ok;
                        flags.tcp_fail = !ok;
                    } else {
                        flags.udp_ok = ok;
                        flags.udp_fail = !ok;
                    }
                }
            }
            let w = &self.wqs[&rq];
            let base_pd = self.base_pd(w.pd);
            let ring_off = (w.dev_off as usize) & (w.buf.len() - 1);
            let rq_id = w.hw_id.unwrap_or(0);
            let cqh = w.cq;
            let parsed = Self::read_wqe(w, wire::MAX_RX_WQE);
            let (advance, outcome) = match parsed {
                Err((code, skip)) => (skip, Err((code, "malformed_wqe"))),
                Ok((h, _, sges)) => {
                    let mut r = Ok(());
                    let mut regions = Vec::new();
                    for s in &sges {
                        match self.mr_lookup(base_pd, s) {
                            Ok(reg) => regions.push((reg, *s)),
                            Err(code) => {
                                r = Err((
                                    code,
                                    if code == ve::BAD_LKEY {
                                        "bad_lkey"
                                    } else {
                                        "out_of_mr"
                                    },
                                ));
                                break;
                            }
                        }
                    }
                    (h.wqe_bytes(), r.map(|_| regions))
                }
            };
            let w = self.wqs.get_mut(&rq).unwrap();
            w.dev_off = w.dev_off.wrapping_add(advance);
            w.counters.wqes += 1;
            match outcome {
                Ok(regions) => {
                    let cap: usize = regions.iter().map(|(_, s)| s.size as usize).sum();
                    let mut off = 0;
                    for (reg, s) in &regions {
                        if off >= frame.len() {
                            break;
                        }
                        let n = (s.size as usize).min(frame.len() - off);
                        reg.write(s.address as usize - reg.addr(), &frame[off..off + n]);
                        off += n;
                    }
                    if frame.len() > cap {
                        w.counters.errors += 1;
                        self.ports[port].counters.drop("rx_truncated", 1);
                        let ppi = [RxPpi {
                            pkt_len: cap.min(0xffff) as u16,
                            pkt_hash: hash,
                        }];
                        self.post_cqe(
                            cqh,
                            wire::rx_comp(wire::CQE_RX_TRUNCATED, 0, &flags, &ppi, ring_off as u32),
                            rq_id,
                            false,
                        );
                        continue;
                    }
                    w.counters.packets += 1;
                    w.counters.bytes += frame.len() as u64;
                    let pc = &mut self.ports[port].counters;
                    pc.rx_packets += 1;
                    pc.rx_bytes += frame.len() as u64;
                    self.packets_moved += 1;
                    let ppi = RxPpi {
                        pkt_len: frame.len() as u16,
                        pkt_hash: hash,
                    };
                    if coalesce {
                        if let Some(b) = batch
                            .iter_mut()
                            .find(|b| b.0 == rq && b.1 == flags && b.2.len() < 4)
                        {
                            b.2.push(ppi);
                        } else {
                            if let Some(pos) = batch.iter().position(|b| b.0 == rq) {
                                let b = batch.remove(pos);
                                self.post_rx_batch(b);
                            }
                            batch.push((rq, flags, vec![ppi], ring_off as u32));
                        }
                    } else {
                        self.post_cqe(
                            cqh,
                            wire::rx_comp(wire::CQE_RX_OKAY, 0, &flags, &[ppi], ring_off as u32),
                            rq_id,
                            false,
                        );
                    }
                }
                Err((code, reason)) => {
                    w.counters.errors += 1;
                    self.ports[port].counters.drop(reason, 1);
                    self.post_cqe(
                        cqh,
                        wire::rx_comp(
                            wire::CQE_RX_TRUNCATED,
                            code,
                            &RxFlags::default(),
                            &[],
                            ring_off as u32,
                        ),
                        rq_id,
                        false,
                    );
                }
            }
        }
        for b in batch {
            self.post_rx_batch(b);
        }
        did
    }

    fn post_rx_batch(&mut self, b: (u32, RxFlags, Vec<RxPpi>, u32)) {
        let (rq, flags, ppis, off) = b;
        let Some(w) = self.wqs.get(&rq) else { return };
        let (cqh, rq_id) = (w.cq, w.hw_id.unwrap_or(0));
        let ty = if ppis.len() > 1 {
            wire::CQE_RX_COALESCED_4
        } else {
            wire::CQE_RX_OKAY
        };
        self.post_cqe(cqh, wire::rx_comp(ty, 0, &flags, &ppis, off), rq_id, false);
    }

    /// One pass of the device: doorbells, TX, backends, RX, timers.
    pub fn step(&mut self) -> bool {
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

    pub fn counters(&self) -> Counters {
        let mut queues: Vec<QueueReport> = self.retired.clone();
        for w in self.wqs.values() {
            queues.push(QueueReport {
                kind: if w.kind == WqKind::Sq { "sq" } else { "rq" }.into(),
                id: w.hw_id.unwrap_or(0),
                port: w
                    .port
                    .map(|p| crate::config::format_mac(&self.ports[p].mac))
                    .unwrap_or_default(),
                live: true,
                counters: w.counters.clone(),
            });
        }
        for c in self.cqs.values() {
            queues.push(QueueReport {
                kind: "cq".into(),
                id: c.hw_id.unwrap_or(0),
                port: String::new(),
                live: true,
                counters: c.counters.clone(),
            });
        }
        let mut device = self.counters.clone();
        device.doorbell_ring_drops = self.ring.dropped.load(Ordering::Relaxed);
        Counters {
            device,
            ports: self
                .ports
                .iter()
                .map(|p| PortReport {
                    mac: crate::config::format_mac(&p.mac),
                    pci: self.adapters[p.adapter].pci.clone(),
                    port: p.index as u32 + 1,
                    link_up: p.link_up,
                    mtu: p.mtu,
                    counters: p.counters.clone(),
                })
                .collect(),
            queues,
        }
    }

    /// Takes the ports' MTUs from their netdevs' sysfs `mtu` files, if
    /// changed (see [`crate::mtuwatch`]). `urgent`: look now rather than at
    /// most every few milliseconds.
    pub fn refresh_mtu(&mut self, urgent: bool) {
        for i in self.mtu_watch.poll(urgent) {
            let Ok(s) = std::fs::read_to_string(self.mtu_watch.file(i)) else {
                continue; // gone (hot remove) or not yet created
            };
            match crate::sysfs::parse_mtu(&s) {
                Some(m) if m != self.ports[i].mtu => {
                    self.ports[i].mtu = m;
                    self.counters.mtu_changes += 1;
                }
                Some(_) => {}
                // A truncate seen before the write that follows it, or
                // garbage: keep the MTU. Counted only when inotify tells
                // of the change (polling would count it every time).
                None if s.is_empty() => {}
                None => {
                    if self.mtu_watch.has_inotify() {
                        self.counters.mtu_file_invalid += 1;
                    }
                }
            }
        }
    }

    pub fn port_index(&self, mac: &str) -> Option<usize> {
        self.port_by_mac(mac).ok()
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

    fn flush_backends(&mut self) {
        for p in &mut self.ports {
            p.backend.flush();
        }
    }
}

/// RSS: Toeplitz over the configured fields. Returns (hash, NDIS hash type).
fn rss_hash(rss: &Rss, f: &[u8]) -> (u32, u32) {
    use crate::ffi::*;
    let Some(l) = pkt::parse(f) else {
        return (0, 0);
    };
    let fl = rss.fields;
    let mut input = Vec::with_capacity(36);
    let ip = l.l3;
    let (src_ip, dst_ip, htype_l3, tcp_t, udp_t) = if l.ipv4 {
        (
            (fl & u64::from(IBV_RX_HASH_SRC_IPV4) != 0).then(|| &f[ip + 12..ip + 16]),
            (fl & u64::from(IBV_RX_HASH_DST_IPV4) != 0).then(|| &f[ip + 16..ip + 20]),
            wire::NDIS_HASH_IPV4,
            wire::NDIS_HASH_TCP_IPV4,
            wire::NDIS_HASH_UDP_IPV4,
        )
    } else if l.ipv6 {
        (
            (fl & u64::from(IBV_RX_HASH_SRC_IPV6) != 0).then(|| &f[ip + 8..ip + 24]),
            (fl & u64::from(IBV_RX_HASH_DST_IPV6) != 0).then(|| &f[ip + 24..ip + 40]),
            wire::NDIS_HASH_IPV6,
            wire::NDIS_HASH_TCP_IPV6,
            wire::NDIS_HASH_UDP_IPV6,
        )
    } else {
        return (0, 0);
    };
    if src_ip.is_none() && dst_ip.is_none() {
        return (0, 0);
    }
    if let Some(s) = src_ip {
        input.extend_from_slice(s);
    }
    if let Some(d) = dst_ip {
        input.extend_from_slice(d);
    }
    let mut htype = htype_l3;
    if let Some(l4) = l.l4 {
        let (sp, dp, t) = match l.proto {
            pkt::IPPROTO_TCP => (IBV_RX_HASH_SRC_PORT_TCP, IBV_RX_HASH_DST_PORT_TCP, tcp_t),
            pkt::IPPROTO_UDP => (IBV_RX_HASH_SRC_PORT_UDP, IBV_RX_HASH_DST_PORT_UDP, udp_t),
            _ => (0, 0, 0),
        };
        let use_sp = sp != 0 && fl & u64::from(sp) != 0;
        let use_dp = dp != 0 && fl & u64::from(dp) != 0;
        if (use_sp || use_dp) && l.l4_len >= 4 {
            if use_sp {
                input.extend_from_slice(&f[l4..l4 + 2]);
            }
            if use_dp {
                input.extend_from_slice(&f[l4 + 2..l4 + 4]);
            }
            htype = t;
        }
    }
    (pkt::toeplitz(&rss.key, &input), htype)
}

fn device_thread(sh: Arc<Shared>) {
    let mut idle_rounds = 0u32;
    while !sh.stop.load(Ordering::Relaxed) {
        let (did, pending, poll_mode) = {
            let mut st = sh.st.lock().unwrap_or_else(|e| e.into_inner());
            let did = st.step();
            if !did {
                st.flush_backends();
            }
            (did, st.pending_work(), st.has_poll_contexts())
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
        let timeout_ms = if pending || poll_mode { 0 } else { 5 };
        let mut pfd = libc::pollfd {
            fd: sh.wake.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        if timeout_ms == 0 {
            // SAFETY: plain nanosleep-free poll with a 0 timeout, then a short sleep.
            unsafe { libc::poll(&mut pfd, 1, 0) };
            if pfd.revents == 0 {
                std::thread::sleep(Duration::from_micros(200));
            }
        } else {
            // SAFETY: poll on one valid fd.
            unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
        }
        if pfd.revents & libc::POLLIN != 0 {
            let mut b = [0u8; 8];
            // SAFETY: reading the eventfd counter into an 8-byte buffer.
            unsafe { libc::read(sh.wake.as_raw_fd(), b.as_mut_ptr().cast(), 8) };
        }
    }
    let mut st = sh.st.lock().unwrap_or_else(|e| e.into_inner());
    st.flush_backends();
}

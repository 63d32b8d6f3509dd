//! A driver-like Rust API over the device model, for tests without DPDK.
//!
//! It drives queues the way a MANA PMD does: queue memory it allocates,
//! WQEs written with the `gdma` crate's encoder (`gdma::write_wqe`), 64-bit
//! doorbell stores to the context's doorbell page (trapped in trap mode,
//! exactly like the driver's `rte_write64`), and CQ polling with the
//! owner-bit phase starting at `count`.
//!
//! ```no_run
//! use mana_emu::testing::*;
//! let dev = TestDevice::new("doc", mana_emu::Config::default_single());
//! let ctx = dev.open();
//! let mut tx = ctx.tx_queue(1, 64).unwrap();
//! tx.post(&[0u8; 60]);
//! tx.ring();
//! let cqes = tx.cq.wait(1);
//! ```

use crate::config::Config;
use crate::device::{Counters, Emulator, Errno, Fault, HashConf, Trigger};
use crate::mem::Region;
use crate::wire::{self, Cqe, TxOob};
use std::cell::Cell;
use std::os::fd::RawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
/// The deadline of the helpers' waits: only a hang reaches it (a loaded
/// machine stretches every wait).
const HANG: Duration = Duration::from_secs(120);

use std::time::{Duration, Instant};

/// Page-aligned, zeroed memory a test hands to the device.
pub struct DmaBuf {
    ptr: *mut u8,
    len: usize,
}

impl DmaBuf {
    pub fn new(len: usize) -> DmaBuf {
        let layout = std::alloc::Layout::from_size_align(len.max(1), 4096).unwrap();
        // SAFETY: non-zero size, valid layout.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        assert!(!ptr.is_null(), "allocation failed");
        DmaBuf { ptr, len }
    }
    pub fn addr(&self) -> usize {
        self.ptr as usize
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The device's view. The buffer must outlive every device object
    /// using it; the queue types below destroy their device objects first.
    pub fn region(&self) -> Region {
        // SAFETY: the allocation is live for `self`'s lifetime and the
        // owners in this module tear down device objects before dropping it.
        unsafe { Region::new(self.addr(), self.len) }
    }
    pub fn write(&self, off: usize, data: &[u8]) {
        self.region().write(off, data)
    }
    pub fn read(&self, off: usize, len: usize) -> Vec<u8> {
        let mut v = vec![0u8; len];
        self.region().read(off, &mut v);
        v
    }
    /// A mutable byte view (for `gdma::write_wqe`).
    ///
    /// # Safety
    /// The device must not be reading the bytes being written (true for a
    /// ring position past the last doorbell).
    pub unsafe fn slice_mut(&mut self) -> &mut [u8] {
        // SAFETY: `ptr` is a live, zero-initialised allocation of `len`
        // bytes owned by `self` (freed only in Drop), and `&mut self` keeps
        // it exclusively borrowed for the slice's lifetime on this side.
        // The device thread may read it meanwhile, but the caller promises
        // (see # Safety) it reads none of the bytes written through the
        // slice, so no byte is written and read concurrently.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for DmaBuf {
    fn drop(&mut self) {
        let layout = std::alloc::Layout::from_size_align(self.len.max(1), 4096).unwrap();
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.ptr, layout) }
    }
}

/// An emulator with its own sysfs root, for one test.
pub struct TestDevice {
    pub emu: Emulator,
    pub dir: PathBuf,
}

impl TestDevice {
    pub fn new(name: &str, mut cfg: Config) -> TestDevice {
        let dir = std::env::temp_dir().join(format!("mana-emu-t-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        cfg.options.sysfs_root = dir.join("sys");
        cfg.options.run_dir = dir.join("run");
        cfg.normalize().expect("valid configuration");
        crate::sysfs::create_all(&cfg).expect("sysfs");
        let emu = Emulator::new(cfg).expect("emulator");
        TestDevice { emu, dir }
    }

    pub fn config(&self) -> &Config {
        self.emu.config()
    }

    /// Opens a context on adapter 0 (as `ibv_open_device`).
    pub fn open(&self) -> Ctx<'_> {
        self.try_open(0).expect("open context")
    }

    pub fn try_open(&self, adapter: usize) -> Result<Ctx<'_>, Errno> {
        let (info, pd, pool, lkey) = {
            let mut st = self.emu.lock();
            let gen = st.adapters.get(adapter).map(|a| a.generation).unwrap_or(0);
            let info = st.open_context(adapter, gen, false)?;
            let pd = st.alloc_pd(info.handle)?;
            let pool = DmaBuf::new(8 << 20);
            let lkey = st.reg_mr(pd, pool.addr(), pool.len())?;
            (info, pd, pool, lkey)
        };
        Ok(Ctx {
            dev: self,
            handle: info.handle,
            db_page: info.db_page,
            cmd_fd: info.cmd_fd,
            async_fd: info.async_fd,
            pd,
            pool,
            lkey,
            next: Cell::new(0),
            closed: Cell::new(false),
        })
    }

    pub fn counters(&self) -> Counters {
        self.emu.counters()
    }

    pub fn port_index(&self, mac: &str) -> usize {
        self.emu.lock().port_index(mac).expect("port")
    }

    /// The kernel netdev `mtu` file of port `mac`, by the path a PMD
    /// writes: `<ibdev_path>/device/net/<ifname>/mtu`.
    pub fn mtu_file(&self, mac: &str) -> PathBuf {
        let st = self.emu.lock();
        let p = st.port_index(mac).expect("port");
        let port = &st.ports[p];
        let ifname = self.config().adapters[port.adapter].ports[port.index]
            .ifname
            .clone()
            .unwrap_or_else(|| format!("eth{}", port.index));
        st.ibdev_path(port.adapter)
            .join("device/net")
            .join(ifname)
            .join("mtu")
    }

    /// A frame arriving on the wire of port `mac`.
    pub fn inject(&self, mac: &str, frame: Vec<u8>) {
        let p = self.port_index(mac);
        self.emu.lock().inject_rx(p, frame);
        self.emu.kick();
    }

    /// Several frames arriving back to back (one device pass sees them all).
    pub fn inject_batch(&self, mac: &str, frames: Vec<Vec<u8>>) {
        let p = self.port_index(mac);
        let mut st = self.emu.lock();
        for f in frames {
            st.inject_rx(p, f);
        }
        drop(st);
        self.emu.kick();
    }

    /// Start recording what port `mac` transmits.
    pub fn capture(&self, mac: &str) {
        let p = self.port_index(mac);
        self.emu.lock().set_capture(p, true);
    }

    pub fn take_capture(&self, mac: &str) -> Vec<Vec<u8>> {
        let p = self.port_index(mac);
        self.emu.lock().take_capture(p)
    }

    pub fn fault(&self, f: Fault) -> Result<(), Errno> {
        self.emu.schedule(f, Trigger::Now)
    }

    pub fn schedule(&self, f: Fault, t: Trigger) -> Result<(), Errno> {
        self.emu.schedule(f, t)
    }

    /// Waits until everything rung or injected so far has been processed.
    pub fn settle(&self) {
        self.emu.settle()
    }

    /// Polls `pred` on the counters until it holds (5 s max).
    pub fn wait_counters(&self, pred: impl Fn(&Counters) -> bool) -> Counters {
        let t0 = Instant::now();
        loop {
            let c = self.counters();
            if pred(&c) {
                return c;
            }
            assert!(t0.elapsed() < HANG, "counters never matched: {c:?}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

impl Drop for TestDevice {
    fn drop(&mut self) {
        self.emu.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// An open context with a PD and an 8 MiB registered packet pool.
pub struct Ctx<'d> {
    pub dev: &'d TestDevice,
    pub handle: u32,
    pub db_page: usize,
    pub cmd_fd: RawFd,
    pub async_fd: RawFd,
    pub pd: u32,
    pub pool: DmaBuf,
    pub lkey: u32,
    next: Cell<usize>,
    closed: Cell<bool>,
}

impl<'d> Ctx<'d> {
    pub fn parent_domain(&self, port: u32) -> Result<u32, Errno> {
        self.dev
            .emu
            .lock()
            .alloc_parent_domain(self.handle, self.pd, port)
    }

    /// Copies `data` into the packet pool; returns its address.
    pub fn alloc_pkt(&self, data: &[u8]) -> u64 {
        let a = self.alloc(data.len().max(1));
        self.pool.write(a - self.pool.addr(), data);
        a as u64
    }

    /// Reserves `len` bytes of the pool (64-byte aligned, wrapping).
    pub fn alloc(&self, len: usize) -> usize {
        let len = len.div_ceil(64) * 64;
        let mut off = self.next.get();
        if off + len > self.pool.len() {
            off = 0;
        }
        self.next.set(off + len);
        self.pool.addr() + off
    }

    pub fn read_pool(&self, addr: u64, len: usize) -> Vec<u8> {
        self.pool.read(addr as usize - self.pool.addr(), len)
    }

    /// One 64-bit doorbell store to this context's page, as a driver does
    /// it (`rte_write64`): in trap mode the store faults and is emulated.
    pub fn ring(&self, offset: usize, value: u64) {
        std::sync::atomic::fence(Ordering::Release);
        // SAFETY: db_page is this context's doorbell page (PROT_NONE in
        // trap mode, where the SIGSEGV handler emulates the store; a shared
        // memfd page in poll mode); offset is a register within it.
        unsafe { std::ptr::write_volatile((self.db_page + offset) as *mut u64, value) };
    }

    /// The next async event `(event_type, element)`, if any.
    pub fn async_event(&self) -> Option<(u32, u64)> {
        // SAFETY: fcntl/read on our own pipe fd.
        unsafe {
            let fl = libc::fcntl(self.async_fd, libc::F_GETFL);
            libc::fcntl(self.async_fd, libc::F_SETFL, fl | libc::O_NONBLOCK);
            let mut b = [0u8; 16];
            let n = libc::read(self.async_fd, b.as_mut_ptr().cast(), 16);
            if n != 16 {
                return None;
            }
            Some((
                u32::from_le_bytes(b[8..12].try_into().unwrap()),
                u64::from_le_bytes(b[0..8].try_into().unwrap()),
            ))
        }
    }

    fn new_cq(&self, depth: u32) -> Result<Cq, Errno> {
        let buf = DmaBuf::new(crate::device::cq_buffer_size(depth));
        let h = self
            .dev
            .emu
            .lock()
            .create_cq(self.handle, depth, buf.region(), None, 0)?;
        Ok(Cq {
            buf,
            handle: h,
            count: depth,
            head: depth,
            id: 0,
        })
    }

    /// A RAW send QP on port `port` (1-based) with `depth` entries.
    pub fn tx_queue(&self, port: u32, depth: u32) -> Result<TxQueue<'_, 'd>, Errno> {
        self.tx_queue_sge(port, depth, 15)
    }

    pub fn tx_queue_sge(
        &self,
        port: u32,
        depth: u32,
        max_sge: u32,
    ) -> Result<TxQueue<'_, 'd>, Errno> {
        let ppd = self.parent_domain(port)?;
        let mut cq = self.new_cq(depth)?;
        let sq = DmaBuf::new(crate::device::sq_buffer_size(depth, max_sge));
        let r = self.dev.emu.lock().create_raw_qp(
            self.handle,
            ppd,
            cq.handle,
            depth,
            max_sge,
            sq.region(),
        );
        let info = match r {
            Ok(i) => i,
            Err(e) => {
                let _ = self.dev.emu.lock().destroy_cq(cq.handle);
                return Err(e);
            }
        };
        cq.id = info.cq_id;
        Ok(TxQueue {
            ctx: self,
            qp: info.qp,
            sq,
            sq_id: info.sq_id,
            cq,
            vp_offset: info.tx_vp_offset as u8,
            head_bu: 0,
            live: true,
        })
    }

    /// `n` RQs (power of two) with `depth` entries behind one RSS QP on
    /// `port`, hashing `fields` (IBV_RX_HASH_*) with `key`.
    pub fn rx_queues(
        &self,
        port: u32,
        n: usize,
        depth: u32,
        fields: u64,
        key: &[u8; 40],
    ) -> Result<RxSet<'_, 'd>, Errno> {
        let ppd = self.parent_domain(port)?;
        let mut queues = Vec::new();
        for _ in 0..n {
            let cq = self.new_cq(depth)?;
            let rq = DmaBuf::new(crate::device::rq_buffer_size(depth, 1));
            let wq = self.dev.emu.lock().create_wq(
                self.handle,
                ppd,
                cq.handle,
                depth,
                1,
                rq.region(),
            )?;
            queues.push(RxQueue {
                wq,
                rq,
                rq_id: 0,
                cq,
                head_bu: 0,
                posted: Vec::new(),
                consumed: 0,
            });
        }
        let log = n.trailing_zeros();
        let wqs: Vec<u32> = queues.iter().map(|q| q.wq).collect();
        let table = self
            .dev
            .emu
            .lock()
            .create_ind_table(self.handle, wqs, log)?;
        let hash = HashConf {
            key: key.to_vec(),
            fields,
            toeplitz: true,
        };
        let qp = self
            .dev
            .emu
            .lock()
            .create_rss_qp(self.handle, ppd, table, &hash)?;
        {
            let st = self.dev.emu.lock();
            for q in &mut queues {
                q.rq_id = st.wq_info(q.wq).unwrap().2;
                q.cq.id = st.cq_info(q.cq.handle).unwrap().2;
            }
        }
        Ok(RxSet {
            ctx: self,
            qp,
            table,
            queues,
            live: true,
        })
    }

    /// `ibv_close_device`.
    pub fn close(&self) {
        if !self.closed.replace(true) {
            self.dev.emu.lock().close_context(self.handle);
        }
    }
}

impl Drop for Ctx<'_> {
    fn drop(&mut self) {
        self.close();
    }
}

/// A completion queue as the driver sees it.
pub struct Cq {
    pub buf: DmaBuf,
    pub handle: u32,
    pub count: u32,
    /// Consumer index; starts at `count` (owner bits 1 on the first lap).
    pub head: u32,
    pub id: u32,
}

impl Cq {
    /// Polls new CQEs (DPDK's `gdma_poll_completion_queue`). Panics on an
    /// owner-bit overflow.
    pub fn poll(&mut self) -> Vec<Cqe> {
        let mut out = Vec::new();
        loop {
            let slot = (self.head % self.count) as usize;
            // SAFETY: in bounds (slot < count, buffer >= count*64) and aligned.
            let info = unsafe { &*((self.buf.addr() + slot * 64 + 60) as *const AtomicU32) }
                .load(Ordering::Acquire);
            let owner = info >> 29;
            let new = (self.head / self.count) & 7;
            let old = (self.head / self.count).wrapping_sub(1) & 7;
            if owner == old {
                break;
            }
            assert_eq!(owner, new, "CQ overflow at head {}", self.head);
            let mut b = [0u8; 64];
            self.buf.region().read(slot * 64, &mut b);
            out.push(Cqe::decode(&b));
            self.head = self.head.wrapping_add(1);
        }
        out
    }

    /// Polls until `n` CQEs arrived (5 s max).
    pub fn wait(&mut self, n: usize) -> Vec<Cqe> {
        let t0 = Instant::now();
        let mut v = Vec::new();
        while v.len() < n {
            v.extend(self.poll());
            assert!(t0.elapsed() < HANG, "only {} of {n} CQEs", v.len());
            std::thread::yield_now();
        }
        v
    }
}

/// Splits a complete, valid TCP frame into what a driver posts for an LSO
/// send, as the Linux driver leaves the headers: IPv4 total length and
/// header checksum 0 (IPv6 payload length 0), TCP checksum = the folded,
/// uncomplemented pseudo-header sum with length 0. Returns the headers
/// (SGE 0), their layout, and the payload.
pub fn linux_lso_split(frame: &[u8]) -> (Vec<u8>, crate::pkt::LsoHeaders, Vec<u8>) {
    let l = crate::pkt::parse(frame).expect("a parsable frame");
    let l4 = l.l4.expect("TCP");
    let hlen = l4 + usize::from(frame[l4 + 12] >> 4) * 4;
    let mut h = frame[..hlen].to_vec();
    if l.ipv4 {
        h[l.l3 + 2..l.l3 + 4].fill(0);
        h[l.l3 + 10..l.l3 + 12].fill(0);
    } else {
        h[l.l3 + 4..l.l3 + 6].fill(0);
    }
    let hl = crate::pkt::parse_lso_headers(&h).expect("LSO headers");
    let p = crate::pkt::lso_tcp_prefill(&h, &hl);
    h[l4 + 16..l4 + 18].copy_from_slice(&p.to_be_bytes());
    (h, hl, frame[hlen..l.ip_end].to_vec())
}

pub struct TxQueue<'c, 'd> {
    pub ctx: &'c Ctx<'d>,
    pub qp: u32,
    pub sq: DmaBuf,
    pub sq_id: u32,
    pub cq: Cq,
    pub vp_offset: u8,
    /// Producer position in BUs (unmasked).
    pub head_bu: u32,
    live: bool,
}

impl TxQueue<'_, '_> {
    /// The short OOB a correct driver writes for this queue.
    pub fn oob(&self) -> TxOob {
        TxOob {
            vcq_num: self.cq.id,
            vsq_frame: ((self.sq_id >> 10) & 0x3fff) as u16,
            short_vp_offset: self.vp_offset,
            ..Default::default()
        }
    }

    /// Writes a WQE with the given inline OOB bytes and SGEs; returns its
    /// byte offset in the ring.
    pub fn post_raw(&mut self, oob: &[u8], sges: &[gdma::Sge], client_data_unit: u32) -> u32 {
        let off = (self.head_bu * 32) & (self.sq.len() as u32 - 1);
        // SAFETY: the ring position past the last doorbell is not read by
        // the device.
        let ring = unsafe { self.sq.slice_mut() };
        let bu = gdma::write_wqe(
            ring,
            self.head_bu,
            gdma::WqType::Sq,
            oob,
            sges,
            client_data_unit,
        )
        .expect("write_wqe");
        self.head_bu = self.head_bu.wrapping_add(bu);
        off
    }

    /// Writes a WQE laid out for `oob` and `sges` (as `post_raw` with no
    /// MSS), then replaces its 8-byte header with `header` verbatim, for
    /// tests of malformed headers. Returns its byte offset in the ring.
    pub fn post_with_header(
        &mut self,
        header: gdma::WqeHeader,
        oob: &[u8],
        sges: &[gdma::Sge],
    ) -> u32 {
        let off = self.post_raw(oob, sges, 0);
        self.sq.write(off as usize, &header.to_raw().to_le_bytes());
        off
    }

    /// Posts an LSO send the way the Linux driver does
    /// (`gdma::write_lso_wqe`): `headers` (copied to the pool) in SGE 0,
    /// then one SGE per `payload` chunk, MSS `mss`. Returns the WQE's byte
    /// offset in the ring.
    pub fn post_lso(
        &mut self,
        headers: &[u8],
        payload: &[&[u8]],
        oob: &TxOob,
        long: bool,
        mss: u32,
    ) -> u32 {
        let mut sges = vec![gdma::Sge::new(
            self.ctx.alloc_pkt(headers),
            self.ctx.lkey,
            headers.len() as u32,
        )];
        for p in payload {
            sges.push(gdma::Sge::new(
                self.ctx.alloc_pkt(p),
                self.ctx.lkey,
                p.len() as u32,
            ));
        }
        let off = (self.head_bu * 32) & (self.sq.len() as u32 - 1);
        // SAFETY: the ring position past the last doorbell is not read by
        // the device.
        let ring = unsafe { self.sq.slice_mut() };
        let bu = gdma::write_lso_wqe(ring, self.head_bu, &oob.encode(long), &sges, mss)
            .expect("write_lso_wqe");
        self.head_bu = self.head_bu.wrapping_add(bu);
        off
    }

    /// The OOB of an LSO send as the Linux driver fills it for the headers
    /// `hl`: outer IP version, `comp_iphdr_csum`, `comp_tcp_csum`,
    /// `trans_off`.
    pub fn lso_oob(&self, hl: &crate::pkt::LsoHeaders) -> TxOob {
        TxOob {
            is_outer_ipv4: hl.ipv4,
            is_outer_ipv6: !hl.ipv4,
            comp_iphdr_csum: true,
            comp_tcp_csum: true,
            trans_off: hl.l4 as u16,
            ..self.oob()
        }
    }

    /// Posts `frame` (copied to the pool) with `oob`.
    pub fn post_with(
        &mut self,
        frame: &[u8],
        oob: &TxOob,
        long: bool,
        client_data_unit: u32,
    ) -> u32 {
        let a = self.ctx.alloc_pkt(frame);
        let sge = gdma::Sge::new(a, self.ctx.lkey, frame.len() as u32);
        let bytes = oob.encode(long);
        self.post_raw(&bytes, &[sge], client_data_unit)
    }

    /// Posts `frame` with the default OOB (CQE requested).
    pub fn post(&mut self, frame: &[u8]) -> u32 {
        let o = self.oob();
        self.post_with(frame, &o, false, 0)
    }

    /// Rings the SQ doorbell with the absolute byte tail.
    pub fn ring(&self) {
        let v = gdma::SqDoorbell::for_head_bu(self.sq_id, self.head_bu)
            .expect("doorbell")
            .to_raw();
        self.ctx.ring(wire::DB_SQ, v);
    }

    pub fn destroy(&mut self) -> Result<(), Errno> {
        if self.live {
            let mut st = self.ctx.dev.emu.lock();
            st.destroy_qp(self.qp)?;
            st.destroy_cq(self.cq.handle)?;
            self.live = false;
        }
        Ok(())
    }
}

impl Drop for TxQueue<'_, '_> {
    fn drop(&mut self) {
        let _ = self.destroy();
    }
}

pub struct RxQueue {
    pub wq: u32,
    pub rq: DmaBuf,
    pub rq_id: u32,
    pub cq: Cq,
    pub head_bu: u32,
    /// (address, size) of every posted buffer, in posting order.
    pub posted: Vec<(u64, u32)>,
    pub consumed: usize,
}

pub struct RxSet<'c, 'd> {
    pub ctx: &'c Ctx<'d>,
    pub qp: u32,
    pub table: u32,
    pub queues: Vec<RxQueue>,
    live: bool,
}

/// One received packet: its CQE, packet index within the CQE, and data.
#[derive(Debug, Clone)]
pub struct RxPacket {
    pub cqe: Cqe,
    pub index: usize,
    pub data: Vec<u8>,
}

impl RxSet<'_, '_> {
    /// Posts `n` receive buffers of `size` bytes on queue `q`.
    pub fn post(&mut self, q: usize, n: usize, size: u32) {
        for _ in 0..n {
            let a = self.ctx.alloc(size as usize) as u64;
            self.post_sges(q, &[gdma::Sge::new(a, self.ctx.lkey, size)]);
        }
    }

    /// Posts one RX WQE with explicit SGEs (no inline OOB).
    pub fn post_sges(&mut self, q: usize, sges: &[gdma::Sge]) {
        let rq = &mut self.queues[q];
        // SAFETY: beyond the last doorbell: not read by the device.
        let ring = unsafe { rq.rq.slice_mut() };
        let bu =
            gdma::write_wqe(ring, rq.head_bu, gdma::WqType::Rq, &[], sges, 0).expect("write_wqe");
        rq.head_bu = rq.head_bu.wrapping_add(bu);
        rq.posted.push((sges[0].address(), sges[0].size()));
    }

    pub fn ring(&self, q: usize) {
        let rq = &self.queues[q];
        let v = gdma::RqDoorbell::for_head_bu(rq.rq_id, rq.head_bu)
            .expect("doorbell")
            .to_raw();
        self.ctx.ring(wire::DB_RQ, v);
    }

    /// Polls queue `q`: each packet consumes one posted buffer in order.
    pub fn poll(&mut self, q: usize) -> Vec<RxPacket> {
        let cqes = self.queues[q].cq.poll();
        self.expand(q, cqes)
    }

    fn expand(&mut self, q: usize, cqes: Vec<Cqe>) -> Vec<RxPacket> {
        let mut out = Vec::new();
        for c in cqes {
            let n = if c.cqe_type == wire::CQE_RX_COALESCED_4 || c.cqe_type == wire::CQE_RX_OKAY {
                (0..4)
                    .take_while(|&k| c.rx_ppi(k).pkt_len != 0)
                    .count()
                    .max(1)
            } else {
                1
            };
            for k in 0..n {
                let rq = &mut self.queues[q];
                let (a, _) = rq.posted[rq.consumed];
                rq.consumed += 1;
                let len = c.rx_ppi(k).pkt_len as usize;
                let data = self.ctx.read_pool(a, len);
                out.push(RxPacket {
                    cqe: c,
                    index: k,
                    data,
                });
            }
        }
        out
    }

    /// Polls queue `q` until `n` packets arrived (5 s max).
    pub fn wait(&mut self, q: usize, n: usize) -> Vec<RxPacket> {
        let t0 = Instant::now();
        let mut v = Vec::new();
        while v.len() < n {
            v.extend(self.poll(q));
            assert!(
                t0.elapsed() < HANG,
                "only {} of {n} packets on queue {q}",
                v.len()
            );
            std::thread::yield_now();
        }
        v
    }

    pub fn destroy(&mut self) -> Result<(), Errno> {
        if self.live {
            let mut st = self.ctx.dev.emu.lock();
            st.destroy_qp(self.qp)?;
            st.destroy_ind_table(self.table)?;
            for q in &self.queues {
                st.destroy_wq(q.wq)?;
                st.destroy_cq(q.cq.handle)?;
            }
            self.live = false;
        }
        Ok(())
    }
}

impl Drop for RxSet<'_, '_> {
    fn drop(&mut self) {
        let _ = self.destroy();
    }
}

/// `IBV_RX_HASH_*` field masks.
pub mod fields {
    use crate::ffi::*;
    pub const IPV4: u64 = (IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_IPV4) as u64;
    pub const IPV6: u64 = (IBV_RX_HASH_SRC_IPV6 | IBV_RX_HASH_DST_IPV6) as u64;
    pub const TCP: u64 = (IBV_RX_HASH_SRC_PORT_TCP | IBV_RX_HASH_DST_PORT_TCP) as u64;
    pub const UDP: u64 = (IBV_RX_HASH_SRC_PORT_UDP | IBV_RX_HASH_DST_PORT_UDP) as u64;
}

/// DPDK's default Toeplitz key (`mana_rss_hash_key_default`).
pub const DPDK_RSS_KEY: [u8; 40] = gdma::DPDK_MANA_DEFAULT_RSS_KEY;

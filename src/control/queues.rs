//! Starting and stopping a port's queues. Starting is split in three so the
//! reset path can make its verbs calls without holding the control lock:
//! a [`Plan`] copied from the configuration (under the lock), [`build`] of
//! the verbs objects (no lock), and [`attach`] of their rings to the queues
//! (under the lock).

use crate::control::mr::Region;
use crate::control::port::{Device, Port};
use crate::control::rss::Rss;
use crate::dataplane::rxq::{RxHw, RxQueue};
use crate::dataplane::txq::{TxHw, TxQueue};
use crate::ethdev::Ctrl;
use crate::ffi;
use crate::ffi::consts::MQ_RX_RSS_FLAG;
use crate::hw::verbs::{self, CompChannel, Cq, IndTable, Qp, VerbsError, Wq};
use std::ffi::{c_int, c_uint, c_void};

/// A failure to start: what failed (for the log) and the negative errno.
pub type StartError = (String, c_int);

/// Verbs objects of one started receive queue; field order is drop order.
struct RxVerbs {
    wq: Wq,
    cq: Cq,
    channel: Option<CompChannel>,
}

/// Verbs objects of one started send queue, held for their `Drop`.
struct TxVerbs {
    _qp: Qp,
    _cq: Cq,
}

/// Verbs objects of a started port. Drop order: the RSS QP (which takes the
/// hardware receive queues with it), its table, the WQs/CQs, the send QPs.
pub struct Running {
    rss: Option<(Qp, IndTable)>,
    rx: Vec<RxVerbs>,
    tx: Vec<TxVerbs>,
}

impl Running {
    pub fn rx_channel(&self, i: usize) -> Option<&CompChannel> {
        self.rx.get(i)?.channel.as_ref()
    }
}

/// What the queues need from the configuration, copied under the lock.
pub struct Plan {
    rx: Vec<(u16, c_int)>,
    tx: Vec<(u16, c_int)>,
    rx_intr: bool,
    key: [u8; 40],
    fields: u64,
    order: Vec<u16>,
    max_sge: u32,
    /// The configuration generation the plan was made from.
    pub generation: u64,
}

pub fn rxq_ptr(d: &ffi::rte_eth_dev_data, i: usize) -> *mut RxQueue {
    // SAFETY: rx_queues has nb_rx_queues entries (ethdev allocates them).
    unsafe { *d.rx_queues.add(i) as *mut RxQueue }
}

pub fn txq_ptr(d: &ffi::rte_eth_dev_data, i: usize) -> *mut TxQueue {
    // SAFETY: as above.
    unsafe { *d.tx_queues.add(i) as *mut TxQueue }
}

fn verr(what: String) -> impl FnOnce(VerbsError) -> StartError {
    move |e| (format!("{what}: {e}"), e.neg())
}

impl Plan {
    pub fn new(p: &Port, ctrl: &Ctrl) -> Result<Plan, StartError> {
        let d = p.data();
        let mut rx = Vec::new();
        for i in 0..usize::from(d.nb_rx_queues) {
            let q = rxq_ptr(d, i);
            if q.is_null() {
                return Err((format!("rx queue {i} is not set up"), -libc::EINVAL));
            }
            // SAFETY: a set-up queue, stable under the ctrl lock.
            let q = unsafe { &*q };
            rx.push((q.nb_desc(), q.socket));
        }
        let mut tx = Vec::new();
        for i in 0..usize::from(d.nb_tx_queues) {
            let q = txq_ptr(d, i);
            if q.is_null() {
                return Err((format!("tx queue {i} is not set up"), -libc::EINVAL));
            }
            // SAFETY: as above.
            let q = unsafe { &*q };
            tx.push((q.nb_desc(), q.socket));
        }
        let order = Rss::queue_order(&ctrl.rss.reta, rx.len()).map_err(|m| (m, -libc::EINVAL))?;
        let rss_on = d.dev_conf.rxmode.mq_mode & MQ_RX_RSS_FLAG != 0;
        Ok(Plan {
            rx,
            tx,
            rx_intr: d.dev_conf.intr_conf.rxq() != 0,
            key: ctrl.rss.key,
            fields: if rss_on { ctrl.rss.verbs_fields() } else { 0 },
            order,
            max_sge: u32::from(p.limits.max_send_sge),
            generation: ctrl.generation,
        })
    }
}

/// Verbs objects built from a plan, with the ring addresses to attach.
pub struct Built {
    running: Running,
    tx_hw: Vec<TxHw>,
    rx_hw: Vec<RxHw>,
}

// SAFETY: the raw ring pointers are only dereferenced by `attach`, under the
// control lock, while `running` keeps the rings alive.
unsafe impl Send for Built {}

/// The buffer allocator libmana uses for queue rings: zeroed, page-aligned
/// DPDK memory on the queue's socket (so secondaries see it too).
unsafe extern "C" fn verbs_alloc(size: usize, socket: *mut c_void) -> *mut c_void {
    // SAFETY: plain allocation.
    unsafe {
        let align = ffi::compat::page_size().max(4096) as c_uint;
        ffi::rte_zmalloc_socket(c"mana_ring".as_ptr(), size, align, socket as isize as c_int)
    }
}

unsafe extern "C" fn verbs_free(ptr: *mut c_void, _socket: *mut c_void) {
    // SAFETY: frees what verbs_alloc returned.
    unsafe { ffi::rte_free(ptr) };
}

/// Zeroed memory on `socket` for a queue `Q` and its `n` descriptors `D`:
/// both or neither.
pub fn alloc_queue_mem<Q, D>(
    name: &std::ffi::CStr,
    n: u16,
    socket: c_int,
) -> Option<(*mut Q, *mut D)> {
    // SAFETY: plain allocations; both results are checked.
    unsafe {
        let q = ffi::rte_zmalloc_socket(name.as_ptr(), std::mem::size_of::<Q>(), 64, socket);
        let d = ffi::rte_zmalloc_socket(
            name.as_ptr(),
            std::mem::size_of::<D>() * usize::from(n),
            64,
            socket,
        );
        if q.is_null() || d.is_null() {
            ffi::rte_free(q);
            ffi::rte_free(d);
            return None;
        }
        Some((q as *mut Q, d as *mut D))
    }
}

/// Drops and frees what [`alloc_queue_mem`] gave.
///
/// # Safety
/// `q` holds an initialised `Q`; neither is used afterwards.
pub unsafe fn free_queue_mem<Q, D>(q: *mut Q, desc: *mut D) {
    // SAFETY: per the contract.
    unsafe {
        std::ptr::drop_in_place(q);
        ffi::rte_free(desc as *mut c_void);
        ffi::rte_free(q as *mut c_void);
    }
}

pub fn allocators(socket: c_int) -> ffi::manadv_ctx_allocators {
    ffi::manadv_ctx_allocators {
        alloc: Some(verbs_alloc),
        free: Some(verbs_free),
        data: socket as isize as *mut c_void,
    }
}

/// Creates every verbs queue of the plan on `dev`. Nothing is attached: on
/// failure, dropping what was built destroys it.
pub fn build(p: &Port, dev: &Device, plan: &Plan) -> Result<Built, StartError> {
    let ctx = &dev.ctx;
    let mut running = Running {
        rss: None,
        rx: Vec::with_capacity(plan.rx.len()),
        tx: Vec::with_capacity(plan.tx.len()),
    };
    let mut tx_hw = Vec::with_capacity(plan.tx.len());
    for (i, &(nb, socket)) in plan.tx.iter().enumerate() {
        ctx.set_allocators(allocators(socket))
            .map_err(verr(format!("tx queue {i}")))?;
        let nb = u32::from(nb);
        let cq = Cq::create(ctx, nb, None, 0).map_err(verr(format!("tx queue {i} CQ")))?;
        let qp = match Qp::create_raw_sq(&dev.parent, &cq, nb, plan.max_sge) {
            Ok(qp) => qp,
            Err(e) if e.errno == libc::EBUSY => {
                let n = &p.netdev;
                return Err((
                    format!(
                        "tx queue {i}: the kernel still uses port {} ({}): run 'ip link set {} down' before starting DPDK",
                        n.mac, n.ifname, n.ifname
                    ),
                    e.neg(),
                ));
            }
            Err(e) => return Err(verr(format!("tx queue {i} QP"))(e)),
        };
        let (dv_qp, dv_cq) = verbs::init_sq(&qp, &cq).map_err(verr(format!("tx queue {i}")))?;
        tx_hw.push(TxHw {
            sq_buf: dv_qp.sq_buf as *mut u8,
            sq_size: dv_qp.sq_size,
            sq_id: dv_qp.sq_id,
            cq_buf: dv_cq.buf as *mut u8,
            cq_count: dv_cq.count,
            cq_id: dv_cq.cq_id,
            vp_offset: dv_qp.tx_vp_offset,
            db_page: dv_qp.db_page as *mut u8,
            max_sge: plan.max_sge,
        });
        running.tx.push(TxVerbs { _qp: qp, _cq: cq });
    }
    for (i, &(nb, socket)) in plan.rx.iter().enumerate() {
        ctx.set_allocators(allocators(socket))
            .map_err(verr(format!("rx queue {i}")))?;
        let channel = match plan.rx_intr {
            true => Some(CompChannel::create(ctx).map_err(verr(format!("rx queue {i} channel")))?),
            false => None,
        };
        let nb = u32::from(nb);
        let cq = Cq::create(ctx, nb, channel.as_ref(), i as i32)
            .map_err(verr(format!("rx queue {i} CQ")))?;
        let wq =
            Wq::create_rq(ctx, &dev.parent, &cq, nb).map_err(verr(format!("rx queue {i} WQ")))?;
        running.rx.push(RxVerbs { wq, cq, channel });
    }
    let wqs: Vec<&Wq> = plan
        .order
        .iter()
        .map(|&q| &running.rx[usize::from(q)].wq)
        .collect();
    let table = IndTable::create(ctx, &wqs).map_err(verr("receive indirection table".into()))?;
    let qp = Qp::create_rss(ctx, &dev.parent, &table, &plan.key, plan.fields)
        .map_err(verr("receive RSS QP".into()))?;
    running.rss = Some((qp, table));
    // Queue ids exist only once the RSS QP does.
    let mut rx_hw = Vec::with_capacity(plan.rx.len());
    for (i, v) in running.rx.iter().enumerate() {
        let (dv_wq, dv_cq) = verbs::init_rq(&v.wq, &v.cq).map_err(verr(format!("rx queue {i}")))?;
        rx_hw.push(RxHw {
            rq_buf: dv_wq.buf as *mut u8,
            rq_size: dv_wq.size,
            rq_id: dv_wq.wq_id,
            cq_buf: dv_cq.buf as *mut u8,
            cq_count: dv_cq.count,
            cq_id: dv_cq.cq_id,
            db_page: dv_wq.db_page as *mut u8,
        });
    }
    Ok(Built {
        running,
        tx_hw,
        rx_hw,
    })
}

/// Attaches built rings to the queues, posts receive buffers, points the rx
/// interrupt vectors at the new channels and keeps the verbs objects in
/// `ctrl`. Gates stay closed; the caller opens them. On failure the verbs
/// objects are destroyed before the posted buffers are freed, so the device
/// writes into none of them, and nothing stays attached.
pub fn attach(p: &Port, ctrl: &mut Ctrl, built: Built) -> Result<(), StartError> {
    let d = p.data();
    let Built {
        running,
        tx_hw,
        rx_hw,
    } = built;
    // Every queue of a context shares its doorbell page.
    if let Some(page) = tx_hw
        .first()
        .map(|h| h.db_page)
        .or(rx_hw.first().map(|h| h.db_page))
    {
        crate::control::mp::set_doorbell_page(p.port_id, page);
    }
    for (i, hw) in tx_hw.iter().enumerate() {
        // SAFETY: the queue exists (plan generation checked by the caller),
        // its gate is closed, and `running` keeps the rings alive until detach.
        unsafe { (*txq_ptr(d, i)).attach(hw) };
    }
    for (i, hw) in rx_hw.iter().enumerate() {
        // SAFETY: as above.
        let q = unsafe { &mut *rxq_ptr(d, i) };
        // SAFETY: as above.
        if let Err(e) = unsafe { q.attach(hw) } {
            let msg = format!(
                "rx queue {i}: its mempool cannot fill {} buffers",
                q.nb_desc()
            );
            drop(running);
            detach_all(d);
            return Err((msg, e));
        }
    }
    if !running.rx.is_empty() && running.rx[0].channel.is_some() {
        let fds: Vec<c_int> = running
            .rx
            .iter()
            .filter_map(|v| v.channel.as_ref().map(|c| c.fd()))
            .collect();
        if let Err(e) = crate::control::intr::enable_rx_vectors(p, &fds) {
            drop(running);
            detach_all(d);
            return Err((String::from("rx interrupt vectors"), e));
        }
    }
    ctrl.running = Some(running);
    Ok(())
}

/// Registers every mempool's memory on the device's PD, so the data path
/// only ever looks up its per-queue cache.
pub fn register_all_pools(p: &Port, dev: &Device) {
    let mut reg = p.mr.lock().unwrap_or_else(|e| e.into_inner());
    reg.attach(&dev.pd, p.limits.max_mr_size);
    // SAFETY: walks the process's mempools synchronously.
    unsafe { ffi::rte_mempool_walk(Some(register_pool), &mut *reg as *mut _ as *mut c_void) };
}

unsafe extern "C" fn register_pool(mp: *mut ffi::rte_mempool, arg: *mut c_void) {
    // SAFETY: `arg` is the registry passed by `register_all_pools`.
    let reg = unsafe { &mut *(arg as *mut crate::control::mr::Registry) };
    reg.register_mempool(mp);
}

/// Finds or creates a registration covering `[addr, addr + len)` on the
/// port's device (the data path's slow path on a cache miss).
pub fn register_memory(port_id: u16, addr: usize, len: usize) -> Option<Region> {
    // SAFETY: FFI query.
    if unsafe { ffi::rte_eal_process_type() } != ffi::RTE_PROC_PRIMARY {
        return crate::control::mp::register_remote(port_id, addr, len);
    }
    // SAFETY: the queue's port id names one of our live ethdevs, whose
    // process_private is a Port while the port exists.
    let p = unsafe {
        let dev =
            (&raw mut ffi::rte_eth_devices as *mut ffi::rte_eth_dev).add(usize::from(port_id));
        (*dev).process_private as *const Port
    };
    if p.is_null() {
        return None;
    }
    // SAFETY: as above.
    let mut reg = unsafe { &*p }.mr.lock().unwrap_or_else(|e| e.into_inner());
    reg.register(addr, len)
}

/// Closes every queue's gate, waiting for bursts in flight.
pub fn close_gates(d: &ffi::rte_eth_dev_data) {
    for i in 0..usize::from(d.nb_rx_queues) {
        let q = rxq_ptr(d, i);
        if !q.is_null() {
            // SAFETY: queues are freed only under the ctrl lock, after this.
            unsafe { (*q).gate.close(std::hint::spin_loop) };
        }
    }
    for i in 0..usize::from(d.nb_tx_queues) {
        let q = txq_ptr(d, i);
        if !q.is_null() {
            // SAFETY: as above.
            unsafe { (*q).gate.close(std::hint::spin_loop) };
        }
    }
}

pub fn open_gates(d: &ffi::rte_eth_dev_data) {
    let started = ffi::RTE_ETH_QUEUE_STATE_STARTED as u8;
    for i in 0..usize::from(d.nb_rx_queues) {
        if d.rx_queue_state[i] == started {
            // SAFETY: all queues exist once the port started.
            unsafe { (*rxq_ptr(d, i)).gate.open() };
        }
    }
    for i in 0..usize::from(d.nb_tx_queues) {
        if d.tx_queue_state[i] == started {
            // SAFETY: as above.
            unsafe { (*txq_ptr(d, i)).gate.open() };
        }
    }
}

/// Waits (bounded) for the device to complete sends in flight, so their
/// mbufs are freed as sent rather than discarded.
pub fn drain_tx(d: &ffi::rte_eth_dev_data) {
    for i in 0..usize::from(d.nb_tx_queues) {
        let q = txq_ptr(d, i);
        if !q.is_null() {
            // SAFETY: the gates are closed, so we are the only user.
            drain_txq(unsafe { &mut *q });
        }
    }
}

/// Settles every tx queue's counts before they are read (see
/// [`TxQueue::settle`]).
pub fn settle_tx(d: &ffi::rte_eth_dev_data) {
    for i in 0..usize::from(d.nb_tx_queues) {
        let q = txq_ptr(d, i);
        if !q.is_null() {
            // SAFETY: set-up queues are freed only by queue release or close,
            // which ethdev does not run concurrently with reading the
            // statistics of the same port.
            unsafe { TxQueue::settle(q) };
        }
    }
}

/// [`drain_tx`] for one queue whose gate is closed.
pub fn drain_txq(q: &mut TxQueue) {
    for _ in 0..1000 {
        q.reap();
        if q.in_flight() == 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_micros(100));
    }
}

/// Frees every mbuf still posted or in flight and forgets the rings; the
/// hardware queues must be gone (or dead). Returns the sends discarded.
pub fn detach_all(d: &ffi::rte_eth_dev_data) -> u32 {
    for i in 0..usize::from(d.nb_rx_queues) {
        let q = rxq_ptr(d, i);
        if !q.is_null() {
            // SAFETY: gates are closed; no burst runs.
            unsafe { (*q).detach() };
        }
    }
    let mut lost = 0;
    for i in 0..usize::from(d.nb_tx_queues) {
        let q = txq_ptr(d, i);
        if !q.is_null() {
            // SAFETY: as above.
            lost += unsafe { (*q).detach() };
        }
    }
    lost
}

/// The deepest queue libmana accepts: rdma-core 44 caps CQs, SQs and RQs at
/// 256 entries, newer versions at the device limit. Tried once per device
/// with a throw-away CQ, so `dev_infos_get` reports what `dev_start` takes.
pub fn probe_max_desc(p: &Port, dev: &Device) -> u16 {
    let max = p.limits.max_desc;
    let pow2 = if max.is_power_of_two() {
        max
    } else {
        (max / 2).next_power_of_two()
    };
    if pow2 <= 256 || dev.ctx.set_allocators(allocators(p.numa)).is_err() {
        return pow2;
    }
    match Cq::create(&dev.ctx, u32::from(pow2), None, 0) {
        Ok(_) => pow2,
        Err(e) => {
            ::log::info!(
                "{}: queues limited to 256 descriptors ({e}; the rdma-core 44 limit)",
                p.name
            );
            256
        }
    }
}

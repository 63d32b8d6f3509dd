//! A port's queues as control code holds them, and starting and stopping
//! them on the device.
//!
//! The queues a port has set up are kept in its control state
//! ([`QueueSet`]), so they are reachable only under the control lock: the
//! rule "a queue stays allocated while the control lock is held" is the
//! borrow of the lock's guard. The driver's own threads (interrupts,
//! recovery) use these sets, never ethdev's queue arrays, which ethdev may
//! reallocate in `rte_eth_dev_configure` without any driver lock. Ethdev
//! ops that read queues in any process go through
//! [`EthQueues`](crate::control::state::queue_sets::EthQueues).
//!
//! Starting is split in three so the reset path can make its verbs calls
//! without holding the control lock: a [`Plan`] copied from the
//! configuration (under the lock), [`build`] of the verbs objects (no lock),
//! and [`attach`] of their rings to the queues (under the lock).

use crate::control::error::{Error, Result};
use crate::control::port::{Ctrl, Device, Port};
use crate::control::state::queue_sets::{Kind, QueueSet, Running, RxVerbs, TxVerbs};
use crate::control::state::rss_conf::Rss;
use crate::dataplane::queue::{ControlToken, DataQueue};
use crate::dataplane::rxq::{RxHw, RxQueue};
use crate::dataplane::txq::{TxHw, TxQueue};
use crate::ffi;
use crate::ffi::consts::MQ_RX_RSS_FLAG;
use crate::hw::verbs::{self, CompChannel, Cq, IndTable, Qp, Wq};
use ::log::info;
use std::ffi::{c_int, c_uint, c_void};

/// What the queues need from the configuration, copied under the lock.
pub struct Plan {
    rx: Vec<(u16, c_int)>,
    tx: Vec<(u16, c_int)>,
    rx_intr: bool,
    key: [u8; 40],
    fields: u64,
    order: Vec<u16>,
    max_sge: u32,
    /// Buffers per WQE of each receive queue.
    rx_segs: Vec<u32>,
    /// The SGEs a receive WQE may carry on this device.
    max_rx_sge: u32,
    /// The configuration generation the plan was made from.
    pub generation: u64,
}

impl Plan {
    pub fn new(p: &Port, ctrl: &Ctrl) -> Result<Plan> {
        let d = p.data();
        fn sizes<Q: Kind>(set: &QueueSet<Q>) -> Result<Vec<(u16, c_int)>> {
            Ok(set
                .complete()?
                .iter()
                .map(|q| (q.nb_desc(), q.socket()))
                .collect())
        }
        let (rx, tx) = (sizes(&ctrl.rx)?, sizes(&ctrl.tx)?);
        let rx_segs = ctrl.rx.complete()?.iter().map(|q| q.conf.segs).collect();
        let order = Rss::queue_order(&ctrl.rss.reta, rx.len()).map_err(Error::invalid)?;
        let rss_on = d.dev_conf.rxmode.mq_mode & MQ_RX_RSS_FLAG != 0;
        Ok(Plan {
            rx,
            tx,
            rx_intr: d.dev_conf.intr_conf.rxq() != 0,
            key: ctrl.rss.key,
            fields: if rss_on { ctrl.rss.verbs_fields() } else { 0 },
            order,
            max_sge: u32::from(p.limits.max_send_sge),
            rx_segs,
            max_rx_sge: crate::control::scatter::max_sges(p.limits.max_send_sge),
            generation: ctrl.generation,
        })
    }
}

/// Verbs objects built from a plan, with the ring addresses to attach.
pub struct Built {
    running: Running,
    tx_hw: Vec<TxHw>,
    rx_hw: Vec<RxHw>,
    db_page: *mut u8,
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

pub fn allocators(socket: c_int) -> ffi::manadv_ctx_allocators {
    ffi::manadv_ctx_allocators {
        alloc: Some(verbs_alloc),
        free: Some(verbs_free),
        data: socket as isize as *mut c_void,
    }
}

/// The port's netdev is up now: the kernel owns the vPort. A raw QP then
/// fails with EBUSY (later kernels, the LD_PRELOAD emulator) or ENODEV (the
/// 6.12 `mana_ib` turns any vPort configuration failure into it; seen in
/// the guest tier's `dpdk-iface-up`), so ENODEV means "interface up" only
/// if the interface is up.
fn kernel_owns(p: &Port) -> bool {
    crate::hw::sysfs::port_netdev(&p.ib.ibdev_path, p.ib_port).is_some_and(|n| n.up)
}

/// Creates every verbs queue of the plan on `dev`. Nothing is attached: on
/// failure, dropping what was built destroys it.
pub fn build(p: &Port, dev: &Device, plan: &Plan) -> Result<Built> {
    let ctx = &dev.ctx;
    let mut running = Running {
        rss: None,
        rx: Vec::with_capacity(plan.rx.len()),
        tx: Vec::with_capacity(plan.tx.len()),
    };
    let mut tx_hw = Vec::with_capacity(plan.tx.len());
    // Every queue of a context rings the same doorbell page.
    let mut db_page = std::ptr::null_mut();
    for (i, &(nb, socket)) in plan.tx.iter().enumerate() {
        let at = |what: &str| format!("tx queue {i}{what}");
        ctx.set_allocators(allocators(socket))
            .map_err(|e| Error::from(e).context(at("")))?;
        let nb = u32::from(nb);
        let cq = Cq::create(ctx, nb, None, 0).map_err(|e| Error::from(e).context(at(" CQ")))?;
        let qp = match Qp::create_raw_sq(&dev.parent, &cq, nb, plan.max_sge) {
            Ok(qp) => qp,
            Err(e) if e.errno == libc::EBUSY || (e.errno == libc::ENODEV && kernel_owns(p)) => {
                let n = &p.netdev;
                return Err(Error::new(
                    libc::EBUSY,
                    format!(
                        "tx queue {i}: the kernel still uses port {} ({}): run 'ip link set {} down' before starting DPDK",
                        n.mac, n.ifname, n.ifname
                    ),
                ));
            }
            Err(e) => return Err(Error::from(e).context(at(" QP"))),
        };
        let (dv_qp, dv_cq) =
            verbs::init_sq(&qp, &cq).map_err(|e| Error::from(e).context(at("")))?;
        tx_hw.push(TxHw {
            sq_buf: dv_qp.sq_buf as *mut u8,
            sq_size: dv_qp.sq_size,
            sq_id: dv_qp.sq_id,
            cq_buf: dv_cq.buf as *mut u8,
            cq_count: dv_cq.count,
            cq_id: dv_cq.cq_id,
            vp_offset: dv_qp.tx_vp_offset,
            max_sge: plan.max_sge,
        });
        db_page = dv_qp.db_page as *mut u8;
        running.tx.push(TxVerbs { _qp: qp, _cq: cq });
    }
    for (i, &(nb, socket)) in plan.rx.iter().enumerate() {
        let at = |what: &str| format!("rx queue {i}{what}");
        ctx.set_allocators(allocators(socket))
            .map_err(|e| Error::from(e).context(at("")))?;
        let channel = match plan.rx_intr {
            true => {
                Some(CompChannel::create(ctx).map_err(|e| Error::from(e).context(at(" channel")))?)
            }
            false => None,
        };
        let nb = u32::from(nb);
        let cq = Cq::create(ctx, nb, channel.as_ref(), i as i32)
            .map_err(|e| Error::from(e).context(at(" CQ")))?;
        let wq = Wq::create_rq(ctx, &dev.parent, &cq, nb, plan.rx_segs[i], plan.max_rx_sge)
            .map_err(|e| Error::from(e).context(at(" WQ")))?;
        running.rx.push(RxVerbs { wq, cq, channel });
    }
    let wqs: Vec<&Wq> = plan
        .order
        .iter()
        .map(|&q| &running.rx[usize::from(q)].wq)
        .collect();
    let table = IndTable::create(ctx, &wqs)
        .map_err(|e| Error::from(e).context("receive indirection table"))?;
    let qp = Qp::create_rss(ctx, &dev.parent, &table, &plan.key, plan.fields)
        .map_err(|e| Error::from(e).context("receive RSS QP"))?;
    running.rss = Some((qp, table));
    // Queue ids exist only once the RSS QP does.
    let mut rx_hw = Vec::with_capacity(plan.rx.len());
    for (i, v) in running.rx.iter().enumerate() {
        let (dv_wq, dv_cq) = verbs::init_rq(&v.wq, &v.cq)
            .map_err(|e| Error::from(e).context(format!("rx queue {i}")))?;
        rx_hw.push(RxHw {
            rq_buf: dv_wq.buf as *mut u8,
            rq_size: dv_wq.size,
            rq_id: dv_wq.wq_id,
            cq_buf: dv_cq.buf as *mut u8,
            cq_count: dv_cq.count,
            cq_id: dv_cq.cq_id,
        });
        db_page = dv_wq.db_page as *mut u8;
    }
    Ok(Built {
        running,
        tx_hw,
        rx_hw,
        db_page,
    })
}

/// Attaches built rings to the queues, posts receive buffers, points the rx
/// interrupt vectors at the new channels and keeps the verbs objects in
/// `ctrl`. Gates stay closed; the caller opens them. On failure the verbs
/// objects are destroyed before the posted buffers are freed, so the device
/// writes into none of them, and nothing stays attached.
pub fn attach(p: &Port, ctrl: &mut Ctrl, built: Built) -> Result<()> {
    let Built {
        running,
        tx_hw,
        rx_hw,
        db_page,
    } = built;
    if !db_page.is_null() {
        crate::hw::doorbell::set_page(p.port_id, db_page);
    }
    let Ctrl { rx, tx, token, .. } = ctrl;
    for (i, hw) in tx_hw.iter().enumerate() {
        let st = tx.get(i).and_then(|q| Some((q, q.state_mut(token)?)));
        let Some((q, st)) = st else {
            unreachable!("tx queue {i} was planned, set up and stopped");
        };
        // SAFETY: `running` keeps the rings alive until `detach_all`, which
        // runs before it is dropped.
        unsafe { q.attach(st, hw) };
    }
    for (i, hw) in rx_hw.iter().enumerate() {
        let Some(q) = rx.get(i) else {
            unreachable!("rx queue {i} was planned and set up");
        };
        let Some(st) = q.state_mut(token) else {
            unreachable!("rx queue {i} is stopped while attached");
        };
        // SAFETY: `running` keeps the rings alive until `detach_all`, which
        // runs before it is dropped.
        if let Err(e) = unsafe { q.attach(st, hw) } {
            let nb = q.nb_desc();
            drop(running);
            detach_all(ctrl);
            return Err(Error::new(
                -e,
                format!("rx queue {i}: its mempool cannot fill {nb} buffers"),
            ));
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
            detach_all(ctrl);
            return Err(Error::new(-e, "rx interrupt vectors"));
        }
    }
    ctrl.running = Some(running);
    Ok(())
}

/// Closes every queue's gate, waiting for bursts in flight.
///
/// The walk goes over the control state's queue sets, under the control
/// lock (`ctrl` borrows its guard), never over ethdev's queue arrays: an
/// application may call `rte_eth_dev_configure` on a stopped port meanwhile,
/// which releases queues (our release ops, which wait for the lock), changes
/// the queue counts and, when the configuration fails, frees those arrays
/// (with no driver lock). A test can hold the walk
/// halfway (`hold::point("gate_walk")`) to run that race.
pub fn close_gates(ctrl: &Ctrl) {
    for (_, q) in ctrl.rx.iter() {
        q.gate().close(std::hint::spin_loop);
    }
    crate::control::hold::point("gate_walk");
    for (_, q) in ctrl.tx.iter() {
        q.gate().close(std::hint::spin_loop);
    }
}

/// Opens the gates of the queues whose ethdev state says started.
pub fn open_gates(ctrl: &Ctrl, d: &mut ffi::rte_eth_dev_data) {
    let started = ffi::RTE_ETH_QUEUE_STATE_STARTED as u8;
    for (i, q) in ctrl.rx.iter() {
        if RxQueue::states(d)[i] == started {
            q.gate().open();
        }
    }
    for (i, q) in ctrl.tx.iter() {
        if TxQueue::states(d)[i] == started {
            q.gate().open();
        }
    }
}

/// Waits (bounded) for the device to complete the sends in flight of every
/// tx queue, so their mbufs are freed as sent rather than discarded. The
/// gates are closed.
pub fn drain_tx(ctrl: &mut Ctrl) {
    let Ctrl { tx, token, .. } = ctrl;
    for (_, q) in tx.iter() {
        drain_txq(q, token);
    }
}

/// [`drain_tx`] for one queue whose gate is closed.
pub fn drain_txq(q: &TxQueue, token: &mut ControlToken) {
    for _ in 0..1000 {
        let Some(st) = q.state_mut(token) else {
            return;
        };
        q.reap(st);
        if st.in_flight() == 0 {
            return;
        }
        std::thread::sleep(std::time::Duration::from_micros(100));
    }
}

/// Before a reset tears the rings down (they still exist, the gates are
/// closed): takes in what the device completed before it died. Sends whose
/// completions are in the ring went out and count as sent; packets
/// delivered that no burst has taken count as lost to the reset (each rx
/// queue's `lost_to_reset`). Returns the packets lost.
pub fn settle_before_teardown(ctrl: &mut Ctrl) -> u64 {
    let Ctrl { rx, tx, token, .. } = ctrl;
    for (_, q) in tx.iter() {
        if let Some(st) = q.state_mut(token) {
            q.reap(st);
        }
    }
    let mut n = 0;
    for (_, q) in rx.iter() {
        if let Some(st) = q.state_mut(token) {
            n += q.count_unpolled(st);
        }
    }
    n
}

/// Frees every mbuf still posted or in flight and forgets the rings; the
/// hardware queues must be gone (or dead) and the gates closed. Returns the
/// sends discarded.
pub fn detach_all(ctrl: &mut Ctrl) -> u32 {
    let Ctrl { rx, tx, token, .. } = ctrl;
    for (_, q) in rx.iter() {
        if let Some(st) = q.state_mut(token) {
            q.detach(st);
        }
    }
    let mut lost = 0;
    for (_, q) in tx.iter() {
        if let Some(st) = q.state_mut(token) {
            lost += q.detach(st);
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
            info!(
                "{}: queues limited to 256 descriptors ({e}; the rdma-core 44 limit)",
                p.name
            );
            256
        }
    }
}

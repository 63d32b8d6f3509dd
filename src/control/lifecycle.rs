//! The life of a port as the application drives it: configure, queue
//! setup and release, start, per-queue start/stop, stop, close, and what
//! follows the port state (link status, queue states, MTU, VLAN strip).
//! The ethdev ops are thin wrappers over these.

use crate::control::error::{Error, Result};
use crate::control::handoff::Phase;
use crate::control::link::{self, Tell};
use crate::control::port::{install_bursts, Ctrl, Port};
use crate::control::queues::{self, Plan};
use crate::control::scatter::{self, frame_len};
use crate::control::state::limits::MIN_DESC;
use crate::control::state::queue_sets::{Kind, QueueSet};
use crate::control::state::rss_conf::RETA_SIZE;
use crate::dataplane::rxq::{RxConf, RxPath, RxPathWish, RxQueue, MIN_BUF_LEN};
use crate::dataplane::txq::{TxConf, TxPath, TxPathWish, TxQueue};
use crate::ffi;
use crate::ffi::consts::*;
use ::log::{debug, info, warn};
use std::ffi::c_int;

/// Refuses control operations while a reset is being recovered from, or
/// after recovery failed (the port must then be closed).
pub fn refuse_if_resetting(p: &Port) -> Result<()> {
    match p.reset.phase() {
        Phase::Active => Ok(()),
        Phase::Recovering => Err(Error::retry_later(
            "recovering from a device reset; retry after RTE_ETH_EVENT_RECOVERY_SUCCESS",
        )),
        Phase::Failed | Phase::Closed => Err(Error::new(
            libc::ENODEV,
            "the device is gone; close the port",
        )),
    }
}

/// `dev_configure`: ethdev has stored the configuration and sized the queue
/// arrays; check what MANA cannot do, take the RSS settings.
pub fn configure(p: &Port) -> Result<()> {
    refuse_if_resetting(p)?;
    let d = p.data();
    let conf = &d.dev_conf;
    let (nb_rx, nb_tx) = (d.nb_rx_queues, d.nb_tx_queues);
    if nb_rx == 0 || nb_tx == 0 {
        return Err(Error::invalid(
            "configure needs at least one receive and one transmit queue",
        ));
    }
    if !nb_rx.is_power_of_two() || usize::from(nb_rx) > RETA_SIZE {
        return Err(Error::invalid(format!(
            "{nb_rx} receive queues: MANA spreads traffic over a power-of-two number of receive queues, at most {RETA_SIZE}"
        )));
    }
    let mq = conf.rxmode.mq_mode;
    if mq != ffi::RTE_ETH_MQ_RX_NONE && mq != ffi::RTE_ETH_MQ_RX_RSS {
        return Err(Error::invalid(format!(
            "rx mq_mode {mq} is not supported; use none or RSS"
        )));
    }
    if conf.txmode.mq_mode != ffi::RTE_ETH_MQ_TX_NONE {
        return Err(Error::invalid(format!(
            "tx mq_mode {} is not supported",
            conf.txmode.mq_mode
        )));
    }
    if conf.lpbk_mode != 0 {
        return Err(Error::invalid(format!(
            "lpbk_mode {} refused: MANA has no loopback mode and Azure does not send a port's frames back to it; configure lpbk_mode 0",
            conf.lpbk_mode
        )));
    }
    let rss_on = mq & MQ_RX_RSS_FLAG != 0;
    let mut ctrl = p.ctrl.lock();
    if rss_on {
        ctrl.rss.take_conf(&conf.rx_adv_conf.rss_conf)?;
        // SAFETY: the port's data, written under the control lock inside
        // the configure op (ethdev reads offloads only after it returns).
        unsafe { (*p.data_ptr()).dev_conf.rxmode.offloads |= RX_OFFLOAD_RSS_HASH };
    }
    ctrl.rss.spread(nb_rx);
    ctrl.rx.configure(nb_rx);
    ctrl.tx.configure(nb_tx);
    p.shared().set_rss(&ctrl.rss);
    Ok(())
}

fn check_desc(p: &Port, nb_desc: u16) -> Result<()> {
    let max = p.shared().limits.max_desc;
    if !nb_desc.is_power_of_two() || nb_desc < MIN_DESC || nb_desc > max {
        return Err(Error::invalid(format!(
            "{nb_desc} descriptors: MANA queues take a power of two from {MIN_DESC} to {max}"
        )));
    }
    Ok(())
}

/// `rx_queue_setup`: replaces queue `qid` with a new one.
pub fn setup_rx(
    p: &Port,
    qid: u16,
    nb_desc: u16,
    socket: c_int,
    conf: &ffi::rte_eth_rxconf,
    mp: *mut ffi::rte_mempool,
) -> Result<()> {
    let at = |e: Error| e.context(format!("rx queue {qid}"));
    let mut ctrl = p.ctrl.lock();
    refuse_if_resetting(p)?;
    check_desc(p, nb_desc)?;
    if conf.rx_nseg != 0 || conf.rx_nmempool != 0 {
        return Err(at(Error::invalid(
            "buffer split and multiple mempools are not supported",
        )));
    }
    let d = p.data();
    // SAFETY: a mempool from the application (ethdev checked it is not null).
    let room = u32::from(unsafe { ffi::mana_shim_pktmbuf_data_room_size(mp) });
    let buf_len = room.saturating_sub(ffi::RTE_PKTMBUF_HEADROOM);
    if buf_len < MIN_BUF_LEN {
        return Err(at(Error::invalid(format!(
            "mbufs hold {buf_len} bytes after the headroom, fewer than a {MIN_BUF_LEN}-byte minimum frame: use a larger mbuf data room"
        ))));
    }
    let offloads = conf.offloads | d.dev_conf.rxmode.offloads;
    let max_sges = scatter::max_sges(p.shared().limits.max_send_sge);
    let asked = offloads & RX_OFFLOAD_SCATTER != 0;
    let segs =
        scatter::segments(buf_len, d.mtu, asked, max_sges).map_err(|e| at(Error::invalid(e)))?;
    if segs > 1 && !asked {
        info!(
            "{}: rx queue {qid}: MTU {} frames ({} bytes) do not fit one {buf_len}-byte mbuf: \
             each is received into up to {segs} chained mbufs (scattered Rx)",
            p.name,
            d.mtu,
            frame_len(d.mtu)
        );
    }
    let path = p
        .rx_path
        .map_or_else(RxPathWish::from_env, Ok)
        .and_then(|wish| RxPath::choose(wish, segs))
        .map_err(|e| at(Error::invalid(e)))?;
    debug!("{}: rx queue {qid}: {path:?} receive path", p.name);
    ctrl.rx.release(d, qid);
    ctrl.generation += 1;
    let q = RxQueue::alloc(
        RxConf {
            port_id: p.port_id,
            queue_id: qid,
            socket,
            nb_desc,
            buf_len,
            segs,
            mp,
            conf: *conf,
            path,
        },
        if segs > 1 {
            offloads | RX_OFFLOAD_SCATTER
        } else {
            offloads
        },
    )
    .ok_or_else(|| {
        at(Error::new(
            libc::ENOMEM,
            format!("out of memory on socket {socket}"),
        ))
    })?;
    ctrl.rx.install(d, qid, q);
    Ok(())
}

/// `tx_queue_setup`: replaces queue `qid` with a new one.
pub fn setup_tx(
    p: &Port,
    qid: u16,
    nb_desc: u16,
    socket: c_int,
    conf: &ffi::rte_eth_txconf,
) -> Result<()> {
    let at = |e: Error| e.context(format!("tx queue {qid}"));
    let mut ctrl = p.ctrl.lock();
    refuse_if_resetting(p)?;
    check_desc(p, nb_desc)?;
    let d = p.data();
    let offloads = conf.offloads | d.dev_conf.txmode.offloads;
    let path = p
        .tx_path
        .map_or_else(TxPathWish::from_env, Ok)
        .and_then(|wish| TxPath::choose(wish, offloads))
        .map_err(|e| at(Error::invalid(e)))?;
    debug!("{}: tx queue {qid}: {path:?} transmit path", p.name);
    ctrl.tx.release(d, qid);
    ctrl.generation += 1;
    let q = TxQueue::alloc(TxConf {
        port_id: p.port_id,
        queue_id: qid,
        socket,
        nb_desc,
        offloads,
        conf: *conf,
        path,
    })
    .ok_or_else(|| {
        at(Error::new(
            libc::ENOMEM,
            format!("out of memory on socket {socket}"),
        ))
    })?;
    ctrl.tx.install(d, qid, q);
    Ok(())
}

/// `rx_queue_release` (ethdev calls it on a stopped port).
pub fn release_rx(p: &Port, qid: u16) {
    let mut ctrl = p.ctrl.lock();
    ctrl.generation += 1;
    if ctrl.rx.release(p.data(), qid) {
        debug!("{}: rx queue {qid} released", p.name);
    }
}

/// `tx_queue_release` (ethdev calls it on a stopped port).
pub fn release_tx(p: &Port, qid: u16) {
    let mut ctrl = p.ctrl.lock();
    ctrl.generation += 1;
    if ctrl.tx.release(p.data(), qid) {
        debug!("{}: tx queue {qid} released", p.name);
    }
}

/// `dev_start`: builds the queues on the device and lets traffic in.
pub fn start(p: &Port) -> Result<()> {
    // The phase is checked under the lock: a reset begins under it too.
    let mut ctrl = p.ctrl.lock();
    refuse_if_resetting(p)?;
    if ctrl.started {
        return Ok(());
    }
    start_locked(p, &mut ctrl).map_err(|e| e.context("start failed"))?;
    ctrl.started = true;
    // SAFETY: our live ethdev; the queues are attached.
    unsafe { install_bursts(p.eth_dev, true) };
    publish_queue_states(p, &ctrl, true);
    link::set_started(p, true, Tell::Later);
    link::watch(p);
    // SAFETY: the port's data, under the control lock.
    queues::open_gates(&ctrl, unsafe { &mut *p.data_ptr() });
    info!(
        "{}: started with {} rx / {} tx queues",
        p.name,
        ctrl.rx.configured(),
        ctrl.tx.configured()
    );
    drop(ctrl);
    crate::control::mp::announce_start(p.port_id, &p.name);
    Ok(())
}

/// Builds and attaches the queues on the current device.
fn start_locked(p: &Port, ctrl: &mut Ctrl) -> Result<()> {
    let plan = Plan::new(p, ctrl)?;
    crate::control::mtu::apply(p)?;
    let dev = ctrl
        .dev
        .as_ref()
        .ok_or_else(|| Error::new(libc::ENODEV, "the device is gone"))?;
    crate::control::mr::register_all_pools(p, dev);
    let built = queues::build(p, dev, &plan)?;
    queues::attach(p, ctrl, built)
}

/// `dev_stop`. Whatever the reset phase, queues that are up come down; a
/// recovery that has yet to rebuild sees `started` false and leaves them.
pub fn stop(p: &Port) {
    let mut ctrl = p.ctrl.lock();
    if ctrl.running.is_some() {
        stop_locked(p, &mut ctrl);
    }
    ctrl.started = false;
    // SAFETY: our live ethdev.
    unsafe { install_bursts(p.eth_dev, false) };
    publish_queue_states(p, &ctrl, false);
    link::unwatch(p);
    drop(ctrl);
    link::set_started(p, false, Tell::Now);
}

/// Stops the data path and destroys the queues' verbs objects.
pub fn stop_locked(p: &Port, ctrl: &mut Ctrl) {
    // SAFETY: our live ethdev.
    unsafe { install_bursts(p.eth_dev, false) };
    queues::close_gates(ctrl);
    queues::drain_tx(ctrl);
    crate::control::intr::disable_rx_vectors(p);
    drop(ctrl.running.take());
    let lost = queues::detach_all(ctrl);
    if lost > 0 {
        warn!(
            "{}: {lost} packets queued for sending were discarded at stop",
            p.name
        );
    }
}

/// `dev_close` in the primary: cancels a recovery, stops, frees the queues
/// and the device. The caller frees the port's private state after.
pub fn close(p: &Port) {
    // Cancels a recovery in progress and waits for its thread (unless this
    // is that thread, or the interrupt thread that has yet to start it).
    p.reset.cancel_and_wait();
    link::cancel(p);
    let device = {
        let mut ctrl = p.ctrl.lock();
        if ctrl.running.is_some() {
            stop_locked(p, &mut ctrl);
        }
        ctrl.started = false;
        let d = p.data();
        ctrl.rx.release_all(d);
        ctrl.tx.release_all(d);
        ctrl.dev.take()
    };
    crate::control::device::close_device(p, device);
    info!("{}: closed", p.name);
}

/// Writes the link status into the port's shared data, where every process
/// reads it: up while the port is started and not recovering from a reset,
/// with what its kernel netdev says of carrier and speed (`control::link`).
pub fn publish_link(p: &Port) -> c_int {
    link::refresh(p, p.reset.phase() == Phase::Active)
}

/// Queue states follow the port state; a queue set up with
/// deferred start stays stopped until `rte_eth_dev_*_queue_start`.
fn publish_queue_states(p: &Port, ctrl: &Ctrl, up: bool) {
    fn set<Q: Kind>(d: *mut ffi::rte_eth_dev_data, set: &QueueSet<Q>, up: bool) {
        for (i, q) in set.iter() {
            let started = up && !q.deferred_start();
            // SAFETY: the port's data under the control lock; the state
            // array has RTE_MAX_QUEUES_PER_PORT entries and `i` is a queue id.
            unsafe { Q::states(&mut *d)[i] = queue_state(started) };
        }
    }
    set(p.data_ptr(), &ctrl.rx, up);
    set(p.data_ptr(), &ctrl.tx, up);
}

fn queue_state(started: bool) -> u8 {
    if started {
        ffi::RTE_ETH_QUEUE_STATE_STARTED as u8
    } else {
        ffi::RTE_ETH_QUEUE_STATE_STOPPED as u8
    }
}

/// Starts or stops one receive queue of a started port. A stopped queue's
/// bursts return 0; it keeps its posted buffers (what lands in them is
/// delivered after the restart; beyond them the device drops).
pub fn set_rx_running(p: &Port, qid: u16, run: bool) -> Result<()> {
    let ctrl = p.ctrl.lock();
    refuse_if_resetting(p)?;
    toggle(p, &ctrl.rx, ctrl.started, qid, run, |_| {})
}

/// Starts or stops one transmit queue of a started port; stopping first
/// completes the sends in flight.
pub fn set_tx_running(p: &Port, qid: u16, run: bool) -> Result<()> {
    let mut ctrl = p.ctrl.lock();
    refuse_if_resetting(p)?;
    let Ctrl {
        tx, token, started, ..
    } = &mut *ctrl;
    toggle(p, tx, *started, qid, run, |q| queues::drain_txq(q, token))
}

/// What rx and tx queue start/stop share; `stopped` runs once the gate is
/// closed.
fn toggle<Q: Kind>(
    p: &Port,
    set: &QueueSet<Q>,
    started: bool,
    qid: u16,
    run: bool,
    stopped: impl FnOnce(&Q),
) -> Result<()> {
    let q = set
        .get(usize::from(qid))
        .filter(|_| started)
        .ok_or_else(|| {
            Error::invalid(format!(
                "{} queue {qid}: the port is not started or has no such queue",
                Q::KIND
            ))
        })?;
    if run {
        q.gate().open();
    } else {
        q.gate().close(std::hint::spin_loop);
        stopped(q);
    }
    // SAFETY: the port's data under the control lock; `qid` is a queue id.
    unsafe { Q::states(&mut *p.data_ptr())[usize::from(qid)] = queue_state(run) };
    info!(
        "{}: {} queue {qid} {}",
        p.name,
        Q::KIND,
        if run { "started" } else { "stopped" }
    );
    Ok(())
}

/// `mtu_set`: the vPort MTU belongs to the kernel's mana netdev; its sysfs
/// file sets it. Every receive queue's buffers must hold the frames.
pub fn set_mtu(p: &Port, mtu: u16) -> Result<()> {
    // Held so the queues checked below stay as they are.
    let ctrl = p.ctrl.lock();
    refuse_if_resetting(p)?;
    let frame = frame_len(mtu);
    if let Some((i, q)) = ctrl.rx.iter().find(|(_, q)| q.conf.max_pkt_len() < frame) {
        return Err(Error::invalid(scatter::too_long(mtu, i, &q.conf)));
    }
    crate::control::mtu::write(p, mtu)
}

/// VLAN strip on every receive queue (`None`) or one, at once, while the
/// port runs.
pub fn set_vlan_strip(p: &Port, queue: Option<u16>, on: bool) -> Result<()> {
    let ctrl = p.ctrl.lock();
    match queue {
        None => {
            for (_, q) in ctrl.rx.iter() {
                q.set_vlan_strip(on);
            }
            info!(
                "{}: VLAN strip {} on every rx queue",
                p.name,
                if on { "on" } else { "off" }
            );
        }
        Some(qid) => ctrl
            .rx
            .get(usize::from(qid))
            .ok_or_else(|| Error::invalid(format!("rx queue {qid} is not set up")))?
            .set_vlan_strip(on),
    }
    Ok(())
}

//! The `eth_dev_ops` of a MANA port: configuration, queue setup, start and
//! stop (creating and destroying the verbs queues), stats, RSS, MTU, link,
//! and device events.

mod xstats;

use crate::control::port::{Device, Port};
use crate::control::queues::{self, rxq_ptr, txq_ptr, Plan, Running, StartError};
use crate::control::reset::Phase;
use crate::control::rss::{Rss, RETA_SIZE, RSS_OFFLOADS};
use crate::control::shared::Shared;
use crate::dataplane::rxq::{self, RxQueue};
use crate::dataplane::txq::{self, TxQueue};
use crate::ffi::compat::{self, QueueStats};
use crate::ffi::consts::*;
use crate::ffi::{self, rte_eth_dev};
use ::log::{error, info, warn};
use std::ffi::{c_int, c_uint, c_void};
use std::ptr;

/// RX offloads the device implements.
pub const RX_OFFLOADS: u64 = RX_OFFLOAD_CHECKSUM | RX_OFFLOAD_RSS_HASH | RX_OFFLOAD_VLAN_STRIP;
/// TX offloads the device implements.
pub const TX_OFFLOADS: u64 = TX_OFFLOAD_MULTI_SEGS
    | TX_OFFLOAD_IPV4_CKSUM
    | TX_OFFLOAD_TCP_CKSUM
    | TX_OFFLOAD_UDP_CKSUM
    | TX_OFFLOAD_VLAN_INSERT
    | TX_OFFLOAD_TCP_TSO
    | TX_OFFLOAD_MBUF_FAST_FREE;
pub const MIN_DESC: u16 = 64;
pub const MIN_MTU: u16 = 68;
pub const MAX_MTU: u16 = 9000;
/// Ethernet header plus one VLAN tag on top of the MTU.
const L2_OVERHEAD: u32 = 14 + 4;

/// Control state of a port, under `Port::ctrl`.
pub struct Ctrl {
    /// The verbs device; `None` while a reset replaces it.
    pub dev: Option<Device>,
    pub rss: Rss,
    /// The application wants the port started (kept across resets).
    pub started: bool,
    pub running: Option<Running>,
    /// Bumped by every queue setup or release, so the reset path can tell
    /// whether the queues it planned for are still the same.
    pub generation: u64,
}

impl Ctrl {
    pub fn new(dev: Device) -> Ctrl {
        Ctrl {
            dev: Some(dev),
            rss: Rss::new(),
            started: false,
            running: None,
            generation: 0,
        }
    }
}

fn data(dev: *mut rte_eth_dev) -> &'static mut ffi::rte_eth_dev_data {
    // SAFETY: ops are called with a live ethdev whose data outlives the call.
    unsafe { &mut *(*dev).data }
}

fn port<'a>(dev: *mut rte_eth_dev) -> &'a Port {
    // SAFETY: our ops only run on ethdevs created by port::create.
    unsafe { Port::of(dev) }
}

const fn neg(e: c_int) -> c_int {
    -e
}

/// Burst functions while the port is stopped.
unsafe extern "C" fn burst_stopped(_q: *mut c_void, _p: *mut *mut ffi::rte_mbuf, _n: u16) -> u16 {
    0
}

/// # Safety
/// `dev` is a live ethdev of this driver.
pub unsafe fn set_burst_stopped(dev: *mut rte_eth_dev) {
    // SAFETY: per the contract.
    unsafe {
        (*dev).rx_pkt_burst = Some(burst_stopped);
        (*dev).tx_pkt_burst = Some(burst_stopped);
        (*dev).tx_pkt_prepare = None;
    }
}

pub unsafe fn set_burst_running(dev: *mut rte_eth_dev) {
    // SAFETY: a live ethdev of ours; netvsc and failsafe read these fields directly.
    unsafe {
        (*dev).rx_pkt_burst = Some(rxq::rx_burst);
        (*dev).tx_pkt_burst = Some(txq::tx_burst);
        (*dev).tx_pkt_prepare = Some(txq::tx_prepare);
        (*dev).rx_queue_count = compat::rx_queue_count_op!(rxq::rx_queue_count);
        (*dev).rx_descriptor_status = Some(rxq::rx_descriptor_status);
        (*dev).tx_descriptor_status = Some(txq::tx_descriptor_status);
    }
}

// ---------------------------------------------------------------------------
// Ops.

unsafe extern "C" fn dev_configure(dev: *mut rte_eth_dev) -> c_int {
    let p = port(dev);
    let d = data(dev);
    let conf = &mut d.dev_conf;
    let (nb_rx, nb_tx) = (d.nb_rx_queues, d.nb_tx_queues);
    if let Err(e) = refuse_if_resetting(p) {
        return e;
    }
    if nb_rx == 0 || nb_tx == 0 {
        error!(
            "{}: configure needs at least one receive and one transmit queue",
            p.name
        );
        return neg(libc::EINVAL);
    }
    if !nb_rx.is_power_of_two() || usize::from(nb_rx) > RETA_SIZE {
        error!(
            "{}: {nb_rx} receive queues: MANA spreads traffic over a power-of-two number of receive queues, at most {RETA_SIZE}",
            p.name
        );
        return neg(libc::EINVAL);
    }
    let mq = conf.rxmode.mq_mode;
    if mq != ffi::RTE_ETH_MQ_RX_NONE && mq != ffi::RTE_ETH_MQ_RX_RSS {
        error!(
            "{}: rx mq_mode {mq} is not supported; use none or RSS",
            p.name
        );
        return neg(libc::EINVAL);
    }
    if conf.txmode.mq_mode != ffi::RTE_ETH_MQ_TX_NONE {
        error!(
            "{}: tx mq_mode {} is not supported",
            p.name, conf.txmode.mq_mode
        );
        return neg(libc::EINVAL);
    }
    if conf.lpbk_mode != 0 {
        error!(
            "{}: lpbk_mode {} refused: MANA has no loopback mode and Azure does not send a port's frames back to it; configure lpbk_mode 0",
            p.name, conf.lpbk_mode
        );
        return neg(libc::EINVAL);
    }
    if conf.intr_conf.lsc() != 0 {
        error!(
            "{}: link status interrupts are not supported (the link follows the port state)",
            p.name
        );
        return neg(libc::EINVAL);
    }
    if mq & MQ_RX_RSS_FLAG != 0 {
        conf.rxmode.offloads |= RX_OFFLOAD_RSS_HASH;
    }
    let mut ctrl = p.ctrl.lock().unwrap_or_else(|e| e.into_inner());
    let rss_conf = conf.rx_adv_conf.rss_conf;
    if mq & MQ_RX_RSS_FLAG != 0 {
        if let Err(e) = take_rss_key(p, &mut ctrl.rss, &rss_conf) {
            return e;
        }
        if rss_conf.rss_hf != 0 {
            ctrl.rss.hf = rss_conf.rss_hf & RSS_OFFLOADS;
        }
    }
    for (i, e) in ctrl.rss.reta.iter_mut().enumerate() {
        *e = (i % usize::from(nb_rx)) as u16;
    }
    Shared::of(d).set_rss(&ctrl.rss);
    0
}

unsafe extern "C" fn dev_infos_get(
    dev: *mut rte_eth_dev,
    info: *mut ffi::rte_eth_dev_info,
) -> c_int {
    // SAFETY: ethdev passes a zeroed info struct.
    let info = unsafe { &mut *info };
    let lim = Shared::of(data(dev)).limits;
    let max_desc = lim.max_desc;
    info.min_mtu = MIN_MTU;
    info.max_mtu = MAX_MTU;
    info.min_rx_bufsize = 1024;
    info.max_rx_pktlen = u32::from(MAX_MTU) + L2_OVERHEAD;
    info.max_rx_queues = lim.max_queues.min(RETA_SIZE as u16);
    info.max_tx_queues = lim.max_queues;
    info.max_mac_addrs = 1;
    info.max_vfs = 0;
    info.rx_offload_capa = RX_OFFLOADS;
    info.tx_offload_capa = TX_OFFLOADS;
    info.reta_size = RETA_SIZE as u16;
    info.hash_key_size = 40;
    info.flow_type_rss_offloads = RSS_OFFLOADS;
    info.default_rxconf.rx_free_thresh = 32;
    info.default_rxconf.rx_drop_en = 1;
    info.default_txconf.tx_free_thresh = 32;
    info.rx_desc_lim = ffi::rte_eth_desc_lim {
        nb_max: max_desc,
        nb_min: MIN_DESC,
        nb_align: MIN_DESC,
        nb_seg_max: 1,
        nb_mtu_seg_max: 1,
    };
    info.tx_desc_lim = ffi::rte_eth_desc_lim {
        nb_max: max_desc,
        nb_min: MIN_DESC,
        nb_align: MIN_DESC,
        nb_seg_max: lim.max_send_sge,
        nb_mtu_seg_max: lim.max_send_sge,
    };
    info.speed_capa = LINK_SPEED_100G;
    info.default_rxportconf.burst_size = 32;
    info.default_rxportconf.ring_size = 256.min(max_desc);
    info.default_rxportconf.nb_queues = 1;
    info.default_txportconf = info.default_rxportconf;
    info.err_handle_mode = crate::control::reset::ERR_HANDLE_MODE;
    0
}

/// What rx and tx queue setup share: the checks, releasing the queue the
/// slot held, and storing the new one (`alloc` makes it, or says why not).
#[allow(clippy::too_many_arguments)]
fn setup_queue(
    dev: *mut rte_eth_dev,
    kind: &str,
    qid: u16,
    nb_desc: u16,
    slots: *mut *mut c_void,
    release: fn(&mut ffi::rte_eth_dev_data, u16),
    alloc: impl FnOnce(&ffi::rte_eth_dev_data) -> Result<*mut c_void, (c_int, String)>,
) -> c_int {
    let p = port(dev);
    let d = data(dev);
    let mut ctrl = p.ctrl.lock().unwrap_or_else(|e| e.into_inner());
    if let Err(e) = refuse_if_resetting(p) {
        return e;
    }
    if let Err(e) = check_desc(p, nb_desc) {
        return e;
    }
    release(d, qid);
    ctrl.generation += 1;
    match alloc(d) {
        Ok(q) => {
            // SAFETY: qid < the queue count (checked by ethdev).
            unsafe { *slots.add(usize::from(qid)) = q };
            0
        }
        Err((errno, why)) => {
            error!("{}: {kind} queue {qid}: {why}", p.name);
            neg(errno)
        }
    }
}

unsafe extern "C" fn rx_queue_setup(
    dev: *mut rte_eth_dev,
    qid: u16,
    nb_desc: u16,
    socket: c_uint,
    conf: *const ffi::rte_eth_rxconf,
    mp: *mut ffi::rte_mempool,
) -> c_int {
    // SAFETY: ethdev passes a valid conf (its default if the app gave none).
    let conf = unsafe { &*conf };
    let slots = data(dev).rx_queues;
    setup_queue(dev, "rx", qid, nb_desc, slots, release_rxq, |d| {
        if conf.rx_nseg != 0 || conf.rx_nmempool != 0 {
            return Err((
                libc::EINVAL,
                "buffer split and multiple mempools are not supported".into(),
            ));
        }
        // SAFETY: a mempool from the application.
        let room = u32::from(unsafe { ffi::mana_shim_pktmbuf_data_room_size(mp) });
        let buf = room.saturating_sub(ffi::RTE_PKTMBUF_HEADROOM);
        let frame = u32::from(d.mtu) + L2_OVERHEAD;
        if buf < frame {
            let why = format!(
                "mbufs hold {buf} bytes but MTU {} frames need {frame}; MANA receives \
                     each packet into one buffer (no scatter): use a larger mbuf data room",
                d.mtu
            );
            return Err((libc::EINVAL, why));
        }
        let offloads = conf.offloads | d.dev_conf.rxmode.offloads;
        RxQueue::alloc(d.port_id, qid, nb_desc, socket as c_int, conf, mp, offloads)
            .map(|q| q as *mut c_void)
            .ok_or_else(|| (libc::ENOMEM, format!("out of memory on socket {socket}")))
    })
}

unsafe extern "C" fn tx_queue_setup(
    dev: *mut rte_eth_dev,
    qid: u16,
    nb_desc: u16,
    socket: c_uint,
    conf: *const ffi::rte_eth_txconf,
) -> c_int {
    // SAFETY: ethdev passes a valid conf.
    let conf = unsafe { &*conf };
    let slots = data(dev).tx_queues;
    setup_queue(dev, "tx", qid, nb_desc, slots, release_txq, |d| {
        let offloads = conf.offloads | d.dev_conf.txmode.offloads;
        TxQueue::alloc(d.port_id, qid, nb_desc, socket as c_int, conf, offloads)
            .map(|q| q as *mut c_void)
            .ok_or_else(|| (libc::ENOMEM, format!("out of memory on socket {socket}")))
    })
}

fn check_desc(p: &Port, nb_desc: u16) -> Result<(), c_int> {
    let max = Shared::of(p.data()).limits.max_desc;
    if !nb_desc.is_power_of_two() || nb_desc < MIN_DESC || nb_desc > max {
        error!(
            "{}: {nb_desc} descriptors: MANA queues take a power of two from {MIN_DESC} to {max}",
            p.name
        );
        return Err(neg(libc::EINVAL));
    }
    Ok(())
}

fn release_rxq(d: &mut ffi::rte_eth_dev_data, qid: u16) {
    let q = rxq_ptr(d, usize::from(qid));
    if !q.is_null() {
        // SAFETY: queues are released only while the port is stopped.
        unsafe {
            RxQueue::free(q);
            *d.rx_queues.add(usize::from(qid)) = ptr::null_mut();
        }
    }
}

fn release_txq(d: &mut ffi::rte_eth_dev_data, qid: u16) {
    let q = txq_ptr(d, usize::from(qid));
    if !q.is_null() {
        // SAFETY: as above.
        unsafe {
            TxQueue::free(q);
            *d.tx_queues.add(usize::from(qid)) = ptr::null_mut();
        }
    }
}

unsafe extern "C" fn rx_queue_release(dev: *mut rte_eth_dev, qid: u16) {
    let mut ctrl = port(dev).ctrl.lock().unwrap_or_else(|e| e.into_inner());
    ctrl.generation += 1;
    release_rxq(data(dev), qid);
}

unsafe extern "C" fn tx_queue_release(dev: *mut rte_eth_dev, qid: u16) {
    let mut ctrl = port(dev).ctrl.lock().unwrap_or_else(|e| e.into_inner());
    ctrl.generation += 1;
    release_txq(data(dev), qid);
}

/// Refuses control operations while a reset is being recovered from, or
/// after recovery failed (the port must then be closed).
fn refuse_if_resetting(p: &Port) -> Result<(), c_int> {
    match p.reset.phase() {
        Phase::Active => Ok(()),
        Phase::Recovering => {
            warn!(
                "{}: recovering from a device reset; retry after RTE_ETH_EVENT_RECOVERY_SUCCESS",
                p.name
            );
            Err(neg(libc::EBUSY))
        }
        Phase::Failed | Phase::Closed => {
            error!("{}: the device is gone; close the port", p.name);
            Err(neg(libc::ENODEV))
        }
    }
}

/// Copies the application's RSS key, if it gave one; it must be 40 bytes.
fn take_rss_key(p: &Port, rss: &mut Rss, conf: &ffi::rte_eth_rss_conf) -> Result<(), c_int> {
    if conf.rss_key.is_null() {
        return Ok(());
    }
    if conf.rss_key_len != 40 {
        error!(
            "{}: RSS key length {} is not 40 bytes",
            p.name, conf.rss_key_len
        );
        return Err(neg(libc::EINVAL));
    }
    // SAFETY: a non-null key the application says is 40 bytes long.
    let key = unsafe { std::slice::from_raw_parts(conf.rss_key, 40) };
    rss.key.copy_from_slice(key);
    Ok(())
}

unsafe extern "C" fn dev_start(dev: *mut rte_eth_dev) -> c_int {
    let p = port(dev);
    // The phase is checked under the lock: a reset begins under it too.
    let mut ctrl = p.ctrl.lock().unwrap_or_else(|e| e.into_inner());
    if let Err(e) = refuse_if_resetting(p) {
        return e;
    }
    if ctrl.started {
        return 0;
    }
    if let Err((msg, err)) = start_locked(p, &mut ctrl) {
        error!("{}: start failed: {msg}", p.name);
        return err;
    }
    ctrl.started = true;
    // SAFETY: a live ethdev of ours; the queues are attached.
    unsafe { set_burst_running(dev) };
    set_link_and_states(dev, true);
    queues::open_gates(p.data());
    let d = p.data();
    info!(
        "{}: started with {} rx / {} tx queues",
        p.name, d.nb_rx_queues, d.nb_tx_queues
    );
    0
}

/// Builds and attaches the queues on the current device.
fn start_locked(p: &Port, ctrl: &mut Ctrl) -> Result<(), StartError> {
    let plan = Plan::new(p, ctrl)?;
    let dev = ctrl
        .dev
        .as_ref()
        .ok_or_else(|| (String::from("the device is gone"), neg(libc::ENODEV)))?;
    queues::register_all_pools(p, dev);
    let built = queues::build(p, dev, &plan)?;
    queues::attach(p, ctrl, built)
}

/// Link status and queue states follow the port state; a queue set up with
/// deferred start stays stopped until `rte_eth_dev_*_queue_start`.
pub fn set_link_and_states(dev: *mut rte_eth_dev, up: bool) {
    // SAFETY: a live ethdev of ours.
    unsafe { ffi::mana_shim_linkstatus_set(dev, &link(up)) };
    let d = data(dev);
    let state = |deferred: u8| {
        if up && deferred == 0 {
            ffi::RTE_ETH_QUEUE_STATE_STARTED as u8
        } else {
            ffi::RTE_ETH_QUEUE_STATE_STOPPED as u8
        }
    };
    for i in 0..usize::from(d.nb_rx_queues) {
        // SAFETY: a started port has all its queues.
        let deferred = up && unsafe { (*queues::rxq_ptr(d, i)).st.conf.rx_deferred_start } != 0;
        d.rx_queue_state[i] = state(deferred as u8);
    }
    for i in 0..usize::from(d.nb_tx_queues) {
        // SAFETY: as above.
        let deferred = up && unsafe { (*queues::txq_ptr(d, i)).st.conf.tx_deferred_start } != 0;
        d.tx_queue_state[i] = state(deferred as u8);
    }
}

/// Starts or stops one queue of a started port. A stopped queue's bursts
/// return 0; a stopped tx queue first completes the sends in flight, a
/// stopped rx queue keeps its posted buffers (what lands in them is
/// delivered after the restart; beyond them the device drops).
fn set_queue_running(dev: *mut rte_eth_dev, rx: bool, qid: u16, run: bool) -> c_int {
    let p = port(dev);
    let d = data(dev);
    let ctrl = p.ctrl.lock().unwrap_or_else(|e| e.into_inner());
    if let Err(e) = refuse_if_resetting(p) {
        return e;
    }
    let kind = if rx { "rx" } else { "tx" };
    let nb = if rx { d.nb_rx_queues } else { d.nb_tx_queues };
    if !ctrl.started || qid >= nb {
        error!(
            "{}: {kind} queue {qid}: the port is not started or has no such queue",
            p.name
        );
        return neg(libc::EINVAL);
    }
    let i = usize::from(qid);
    // SAFETY: a started port has all its queues; they are freed only under
    // the control lock we hold.
    let gate = unsafe {
        if rx {
            &(*queues::rxq_ptr(d, i)).gate
        } else {
            &(*queues::txq_ptr(d, i)).gate
        }
    };
    if run {
        gate.open();
    } else {
        gate.close(std::hint::spin_loop);
        if !rx {
            // SAFETY: the gate is closed: no burst uses the queue.
            queues::drain_txq(unsafe { &mut *queues::txq_ptr(d, i) });
        }
    }
    let state = if run {
        ffi::RTE_ETH_QUEUE_STATE_STARTED
    } else {
        ffi::RTE_ETH_QUEUE_STATE_STOPPED
    } as u8;
    if rx {
        d.rx_queue_state[i] = state;
    } else {
        d.tx_queue_state[i] = state;
    }
    info!(
        "{}: {kind} queue {qid} {}",
        p.name,
        if run { "started" } else { "stopped" }
    );
    0
}

unsafe extern "C" fn rx_queue_start(dev: *mut rte_eth_dev, qid: u16) -> c_int {
    set_queue_running(dev, true, qid, true)
}

unsafe extern "C" fn rx_queue_stop(dev: *mut rte_eth_dev, qid: u16) -> c_int {
    set_queue_running(dev, true, qid, false)
}

unsafe extern "C" fn tx_queue_start(dev: *mut rte_eth_dev, qid: u16) -> c_int {
    set_queue_running(dev, false, qid, true)
}

unsafe extern "C" fn tx_queue_stop(dev: *mut rte_eth_dev, qid: u16) -> c_int {
    set_queue_running(dev, false, qid, false)
}

unsafe extern "C" fn dev_stop(dev: *mut rte_eth_dev) -> c_int {
    let p = port(dev);
    let mut ctrl = p.ctrl.lock().unwrap_or_else(|e| e.into_inner());
    // Whatever the reset phase, queues that are up come down; a recovery
    // that has yet to rebuild sees `started` false and leaves them down.
    if ctrl.running.is_some() {
        stop_locked(p, &mut ctrl, dev);
    }
    ctrl.started = false;
    // SAFETY: a live ethdev of ours.
    unsafe { set_burst_stopped(dev) };
    set_link_and_states(dev, false);
    0
}

/// Stops the data path and destroys the queues' verbs objects.
pub fn stop_locked(p: &Port, ctrl: &mut Ctrl, dev: *mut rte_eth_dev) {
    // SAFETY: a live ethdev of ours.
    unsafe { set_burst_stopped(dev) };
    let d = p.data();
    queues::close_gates(d);
    queues::drain_tx(d);
    crate::control::intr::disable_rx_vectors(p);
    drop(ctrl.running.take());
    let lost = queues::detach_all(d);
    if lost > 0 {
        warn!(
            "{}: {lost} packets queued for sending were discarded at stop",
            p.name
        );
    }
}

unsafe extern "C" fn dev_close(dev: *mut rte_eth_dev) -> c_int {
    // SAFETY: FFI query.
    if unsafe { ffi::rte_eal_process_type() } != ffi::RTE_PROC_PRIMARY {
        return 0;
    }
    let p = port(dev);
    // Cancels a recovery in progress and waits for its thread (unless this
    // is that thread, or the interrupt thread that has yet to start it).
    p.reset.cancel_and_wait();
    let device = {
        let mut ctrl = p.ctrl.lock().unwrap_or_else(|e| e.into_inner());
        if ctrl.running.is_some() {
            stop_locked(p, &mut ctrl, dev);
        }
        ctrl.started = false;
        let d = data(dev);
        for i in 0..d.nb_rx_queues {
            release_rxq(d, i);
        }
        for i in 0..d.nb_tx_queues {
            release_txq(d, i);
        }
        ctrl.dev.take()
    };
    crate::control::reset::close_device(p, device);
    info!("{}: closed", p.name);
    // SAFETY: ethdev releases the port after this returns.
    unsafe { crate::control::port::free_private(dev) };
    0
}

fn link(up: bool) -> ffi::rte_eth_link {
    let speed = if up { SPEED_NUM_100G } else { 0 };
    // Full duplex, fixed (RTE_ETH_LINK_FULL_DUPLEX, RTE_ETH_LINK_FIXED).
    ffi::compat::eth_link(speed, true, false, up)
}

unsafe extern "C" fn link_update(dev: *mut rte_eth_dev, _wait: c_int) -> c_int {
    publish_link(dev)
}

/// Writes the link status into the port's shared data, where every process
/// reads it. MANA has no carrier state of its own: the link is up while the
/// port is started and not recovering from a reset.
pub fn publish_link(dev: *mut rte_eth_dev) -> c_int {
    let up = data(dev).dev_started() != 0 && port(dev).reset.phase() == Phase::Active;
    // SAFETY: a live ethdev of ours.
    unsafe { ffi::mana_shim_linkstatus_set(dev, &link(up)) }
}

unsafe extern "C" fn promiscuous_enable(dev: *mut rte_eth_dev) -> c_int {
    warn!(
        "{}: promiscuous mode is not available: Azure delivers only frames addressed to the port's MAC",
        port(dev).name
    );
    neg(libc::ENOTSUP)
}

unsafe extern "C" fn allmulticast_enable(dev: *mut rte_eth_dev) -> c_int {
    warn!(
        "{}: all-multicast mode is not available: Azure virtual networks carry no multicast",
        port(dev).name
    );
    neg(libc::ENOTSUP)
}

/// Azure assigns each port its MAC; setting that same MAC (as bonding and
/// failsafe do) succeeds, any other is refused.
unsafe extern "C" fn mac_addr_set(dev: *mut rte_eth_dev, mac: *mut ffi::rte_ether_addr) -> c_int {
    let d = data(dev);
    // SAFETY: ethdev passes a valid address; mac_addrs holds the port's.
    let (want, have) = unsafe { ((*mac).addr_bytes, (*d.mac_addrs).addr_bytes) };
    if want == have {
        return 0;
    }
    error!(
        "{}: cannot change the MAC to {}: Azure fixes each port's MAC ({})",
        port(dev).name,
        crate::hw::mac::MacAddr(want),
        crate::hw::mac::MacAddr(have)
    );
    neg(libc::ENOTSUP)
}

/// Disabling a mode the device never enters succeeds.
unsafe extern "C" fn mode_disable(_dev: *mut rte_eth_dev) -> c_int {
    0
}

unsafe extern "C" fn mtu_set(dev: *mut rte_eth_dev, mtu: u16) -> c_int {
    let p = port(dev);
    let d = data(dev);
    // Held so the queues checked below stay as they are.
    let _ctrl = p.ctrl.lock().unwrap_or_else(|e| e.into_inner());
    if let Err(e) = refuse_if_resetting(p) {
        return e;
    }
    let frame = u32::from(mtu) + L2_OVERHEAD;
    for i in 0..usize::from(d.nb_rx_queues) {
        let q = rxq_ptr(d, i);
        // SAFETY: set-up queues stay allocated under the ctrl lock.
        if !q.is_null() && unsafe { (*q).buf_len() } < frame {
            error!(
                "{}: MTU {mtu} needs {frame}-byte receive buffers; rx queue {i} has {} (no scatter): set up the queues with larger mbufs first",
                p.name,
                // SAFETY: as above.
                unsafe { (*q).buf_len() }
            );
            return neg(libc::EINVAL);
        }
    }
    // The vPort MTU belongs to the kernel's mana netdev; sysfs sets it.
    let path =
        p.ib.ibdev_path
            .join("device/net")
            .join(&p.netdev.ifname)
            .join("mtu");
    if let Err(e) = std::fs::write(&path, format!("{mtu}\n")) {
        error!(
            "{}: cannot set MTU {mtu} through {}: {e} (needs CAP_NET_ADMIN)",
            p.name,
            path.display()
        );
        return -(e.raw_os_error().unwrap_or(libc::EIO));
    }
    0
}

/// `stats_get` (adapted to this DPDK's signature by `compat::stats_get_op`).
fn stats_get(dev: *mut rte_eth_dev, s: &mut ffi::rte_eth_stats, qs: &mut QueueStats) -> c_int {
    let d = data(dev);
    queues::settle_tx(d);
    let nq = ffi::RTE_ETHDEV_QUEUE_STAT_CNTRS as usize;
    for i in 0..usize::from(d.nb_rx_queues) {
        let q = rxq_ptr(d, i);
        if q.is_null() {
            continue;
        }
        // SAFETY: counters are atomics, read while the data path runs.
        let st = unsafe { &(*q).st.stats };
        let (pk, by) = (st.packets.get(), st.bytes.get());
        s.ipackets += pk;
        s.ibytes += by;
        s.ierrors += st.errors.get();
        s.rx_nombuf += st.nombuf.get();
        if i < nq {
            qs.ipackets[i] = pk;
            qs.ibytes[i] = by;
            qs.errors[i] = st.errors.get();
        }
    }
    for i in 0..usize::from(d.nb_tx_queues) {
        let q = txq_ptr(d, i);
        if q.is_null() {
            continue;
        }
        // SAFETY: as above.
        let st = unsafe { &(*q).st.stats };
        let (pk, by) = (st.packets.get(), st.bytes.get());
        s.opackets += pk;
        s.obytes += by;
        s.oerrors += st.errors.get();
        if i < nq {
            qs.opackets[i] = pk;
            qs.obytes[i] = by;
        }
    }
    0
}

unsafe extern "C" fn stats_reset(dev: *mut rte_eth_dev) -> c_int {
    crate::ethdev::xstats::reset(data(dev));
    0
}

unsafe extern "C" fn rxq_info_get(
    dev: *mut rte_eth_dev,
    qid: u16,
    info: *mut ffi::rte_eth_rxq_info,
) {
    let d = data(dev);
    let q = rxq_ptr(d, usize::from(qid));
    if q.is_null() {
        return;
    }
    // SAFETY: a set-up queue and ethdev's out-struct.
    unsafe {
        let (q, info) = (&*q, &mut *info);
        info.mp = q.mp;
        info.conf = q.conf;
        info.conf.offloads = q.offloads();
        info.nb_desc = q.nb_desc();
        info.rx_buf_size = q.buf_len().min(u32::from(u16::MAX)) as u16;
        info.scattered_rx = 0;
        info.queue_state = d.rx_queue_state[usize::from(qid)];
    }
}

unsafe extern "C" fn txq_info_get(
    dev: *mut rte_eth_dev,
    qid: u16,
    info: *mut ffi::rte_eth_txq_info,
) {
    let d = data(dev);
    let q = txq_ptr(d, usize::from(qid));
    if q.is_null() {
        return;
    }
    // SAFETY: as above.
    unsafe {
        let (q, info) = (&*q, &mut *info);
        info.conf = q.conf;
        info.conf.offloads = q.offloads;
        info.nb_desc = q.nb_desc();
        info.queue_state = d.tx_queue_state[usize::from(qid)];
    }
}

fn write_mode(mode: *mut ffi::rte_eth_burst_mode, text: &str) -> c_int {
    // SAFETY: ethdev passes a zeroed 1024-byte info buffer.
    let info = unsafe { &mut (*mode).info };
    let max = info.len() - 1;
    for (dst, b) in info.iter_mut().zip(text.bytes().take(max)) {
        *dst = b as std::ffi::c_char;
    }
    0
}

unsafe extern "C" fn rx_burst_mode_get(
    _dev: *mut rte_eth_dev,
    _q: u16,
    mode: *mut ffi::rte_eth_burst_mode,
) -> c_int {
    write_mode(mode, "Scalar, single and coalesced CQEs, bulk refill")
}

unsafe extern "C" fn tx_burst_mode_get(
    _dev: *mut rte_eth_dev,
    _q: u16,
    mode: *mut ffi::rte_eth_burst_mode,
) -> c_int {
    write_mode(mode, "Scalar, CQE suppression, one doorbell per burst")
}

unsafe extern "C" fn fw_version_get(
    dev: *mut rte_eth_dev,
    out: *mut std::ffi::c_char,
    size: usize,
) -> c_int {
    let text = Shared::of(data(dev)).fw_version();
    let needed = text.len() + 1;
    if size < needed {
        return needed as c_int;
    }
    // SAFETY: `out` has `size >= needed` bytes.
    unsafe {
        ptr::copy_nonoverlapping(text.as_ptr(), out as *mut u8, text.len());
        *out.add(text.len()) = 0;
    }
    0
}

/// The packet types the RX path reports, without the terminator (which
/// follows them in `PTYPES`, for releases before 24.03).
fn supported_ptypes(_dev: *mut rte_eth_dev) -> &'static [u32] {
    let n = rxq::PTYPES
        .iter()
        .position(|&p| p == ffi::RTE_PTYPE_UNKNOWN)
        .unwrap_or(rxq::PTYPES.len());
    &rxq::PTYPES[..n]
}

unsafe extern "C" fn rss_hash_update(
    dev: *mut rte_eth_dev,
    conf: *mut ffi::rte_eth_rss_conf,
) -> c_int {
    let p = port(dev);
    let mut ctrl = p.ctrl.lock().unwrap_or_else(|e| e.into_inner());
    if let Err(e) = refuse_if_resetting(p) {
        return e;
    }
    if ctrl.started {
        error!(
            "{}: stop the port before changing its RSS configuration",
            p.name
        );
        return neg(libc::EBUSY);
    }
    // SAFETY: ethdev passes a valid conf.
    let conf = unsafe { &*conf };
    if conf.rss_hf & !RSS_OFFLOADS != 0 {
        error!(
            "{}: RSS types {:#x} are not supported",
            p.name,
            conf.rss_hf & !RSS_OFFLOADS
        );
        return neg(libc::EINVAL);
    }
    if let Err(e) = take_rss_key(p, &mut ctrl.rss, conf) {
        return e;
    }
    ctrl.rss.hf = conf.rss_hf;
    Shared::of(p.data()).set_rss(&ctrl.rss);
    0
}

unsafe extern "C" fn rss_hash_conf_get(
    dev: *mut rte_eth_dev,
    conf: *mut ffi::rte_eth_rss_conf,
) -> c_int {
    let rss = Shared::of(data(dev)).rss();
    // SAFETY: ethdev passes a valid conf; the key buffer, if any, holds rss_key_len bytes.
    unsafe {
        let conf = &mut *conf;
        if !conf.rss_key.is_null() && conf.rss_key_len >= 40 {
            ptr::copy_nonoverlapping(rss.key.as_ptr(), conf.rss_key, 40);
        }
        conf.rss_key_len = 40;
        conf.rss_hf = rss.hf;
    }
    0
}

unsafe extern "C" fn reta_update(
    dev: *mut rte_eth_dev,
    conf: *mut ffi::rte_eth_rss_reta_entry64,
    size: u16,
) -> c_int {
    let p = port(dev);
    let d = data(dev);
    let mut ctrl = p.ctrl.lock().unwrap_or_else(|e| e.into_inner());
    if let Err(e) = refuse_if_resetting(p) {
        return e;
    }
    if ctrl.started {
        error!(
            "{}: stop the port before changing its RSS redirection table",
            p.name
        );
        return neg(libc::EBUSY);
    }
    if usize::from(size) != RETA_SIZE {
        error!(
            "{}: the redirection table has {RETA_SIZE} entries, not {size}",
            p.name
        );
        return neg(libc::EINVAL);
    }
    // SAFETY: one 64-entry group for a 64-entry table.
    let group = unsafe { &*conf };
    let mut reta = ctrl.rss.reta;
    for (i, e) in reta.iter_mut().enumerate() {
        if group.mask & (1 << i) != 0 {
            *e = group.reta[i];
        }
    }
    if let Err(m) = Rss::queue_order(&reta, usize::from(d.nb_rx_queues)) {
        error!("{}: redirection table rejected: {m}", p.name);
        return neg(libc::EINVAL);
    }
    ctrl.rss.reta = reta;
    Shared::of(d).set_rss(&ctrl.rss);
    0
}

unsafe extern "C" fn reta_query(
    dev: *mut rte_eth_dev,
    conf: *mut ffi::rte_eth_rss_reta_entry64,
    size: u16,
) -> c_int {
    if usize::from(size) != RETA_SIZE {
        return neg(libc::EINVAL);
    }
    let rss = Shared::of(data(dev)).rss();
    // SAFETY: one 64-entry group for a 64-entry table (size checked).
    let group = unsafe { &mut *conf };
    for i in 0..RETA_SIZE {
        if group.mask & (1 << i) != 0 {
            group.reta[i] = rss.reta[i];
        }
    }
    0
}

/// `vlan_offload_set`: ethdev has updated `rxmode.offloads`; VLAN strip
/// follows it on every receive queue, at once, while the port runs.
unsafe extern "C" fn vlan_offload_set(dev: *mut rte_eth_dev, mask: c_int) -> c_int {
    let p = port(dev);
    let d = data(dev);
    if mask as u32 & ffi::RTE_ETH_VLAN_STRIP_MASK == 0 {
        return 0;
    }
    let on = d.dev_conf.rxmode.offloads & RX_OFFLOAD_VLAN_STRIP != 0;
    // Queues are freed only under the control lock.
    let _ctrl = p.ctrl.lock().unwrap_or_else(|e| e.into_inner());
    for i in 0..usize::from(d.nb_rx_queues) {
        let q = rxq_ptr(d, i);
        if !q.is_null() {
            // SAFETY: a set-up queue stays allocated while we hold the
            // control lock; the flag is an atomic the burst reads.
            unsafe { (*q).set_vlan_strip(on) };
        }
    }
    info!(
        "{}: VLAN strip {} on every rx queue",
        p.name,
        if on { "on" } else { "off" }
    );
    0
}

/// `vlan_strip_queue_set`: VLAN strip of one receive queue.
unsafe extern "C" fn vlan_strip_queue_set(dev: *mut rte_eth_dev, qid: u16, on: c_int) {
    let p = port(dev);
    let d = data(dev);
    let _ctrl = p.ctrl.lock().unwrap_or_else(|e| e.into_inner());
    let q = if qid < d.nb_rx_queues {
        rxq_ptr(d, usize::from(qid))
    } else {
        ptr::null_mut()
    };
    if q.is_null() {
        error!("{}: rx queue {qid} is not set up", p.name);
        return;
    }
    // SAFETY: as in vlan_offload_set.
    unsafe { (*q).set_vlan_strip(on != 0) };
}

unsafe extern "C" fn tx_done_cleanup(q: *mut c_void, free_cnt: u32) -> c_int {
    // SAFETY: ethdev passes one of our tx queues.
    unsafe { txq::tx_done_cleanup(q, free_cnt) }
}

/// The primary keeps the shared link status current (see
/// [`publish_link`]); a secondary reads it as it is.
unsafe extern "C" fn secondary_link_update(_dev: *mut rte_eth_dev, _wait: c_int) -> c_int {
    0
}

unsafe extern "C" fn secondary_close(dev: *mut rte_eth_dev) -> c_int {
    crate::control::mp::detach_secondary(data(dev).port_id);
    0
}

/// What a secondary process may do: the data path, and reading the port.
pub static SECONDARY_OPS: ffi::eth_dev_ops = {
    // SAFETY: every member is an Option of a function pointer; zero is None.
    let mut o: ffi::eth_dev_ops = unsafe { std::mem::zeroed() };
    o.dev_close = Some(secondary_close);
    o.link_update = Some(secondary_link_update);
    o.stats_get = compat::stats_get_op!(stats_get);
    o.stats_reset = Some(stats_reset);
    o.xstats_get = Some(crate::ethdev::xstats::xstats_get);
    o.xstats_get_names = Some(crate::ethdev::xstats::xstats_get_names);
    o.xstats_reset = Some(stats_reset);
    o.dev_infos_get = Some(dev_infos_get);
    o.rxq_info_get = Some(rxq_info_get);
    o.txq_info_get = Some(txq_info_get);
    o.rx_burst_mode_get = Some(rx_burst_mode_get);
    o.tx_burst_mode_get = Some(tx_burst_mode_get);
    o.dev_supported_ptypes_get = compat::ptypes_get_op!(supported_ptypes);
    o.tx_done_cleanup = Some(tx_done_cleanup);
    o.fw_version_get = Some(fw_version_get);
    o.rss_hash_conf_get = Some(rss_hash_conf_get);
    o.reta_query = Some(reta_query);
    o
};

pub static OPS: ffi::eth_dev_ops = {
    // SAFETY: every member is an Option of a function pointer; zero is None.
    let mut o: ffi::eth_dev_ops = unsafe { std::mem::zeroed() };
    o.dev_configure = Some(dev_configure);
    o.dev_start = Some(dev_start);
    o.dev_stop = Some(dev_stop);
    o.dev_close = Some(dev_close);
    o.link_update = Some(link_update);
    o.promiscuous_enable = Some(promiscuous_enable);
    o.promiscuous_disable = Some(mode_disable);
    o.allmulticast_enable = Some(allmulticast_enable);
    o.allmulticast_disable = Some(mode_disable);
    o.mac_addr_set = Some(mac_addr_set);
    o.mtu_set = Some(mtu_set);
    o.stats_get = compat::stats_get_op!(stats_get);
    o.stats_reset = Some(stats_reset);
    o.xstats_get = Some(crate::ethdev::xstats::xstats_get);
    o.xstats_get_names = Some(crate::ethdev::xstats::xstats_get_names);
    o.xstats_reset = Some(stats_reset);
    o.dev_infos_get = Some(dev_infos_get);
    o.rxq_info_get = Some(rxq_info_get);
    o.txq_info_get = Some(txq_info_get);
    o.rx_burst_mode_get = Some(rx_burst_mode_get);
    o.tx_burst_mode_get = Some(tx_burst_mode_get);
    o.fw_version_get = Some(fw_version_get);
    o.dev_supported_ptypes_get = compat::ptypes_get_op!(supported_ptypes);
    o.rx_queue_setup = Some(rx_queue_setup);
    o.rx_queue_release = Some(rx_queue_release);
    o.tx_queue_setup = Some(tx_queue_setup);
    o.tx_queue_release = Some(tx_queue_release);
    o.rx_queue_start = Some(rx_queue_start);
    o.rx_queue_stop = Some(rx_queue_stop);
    o.tx_queue_start = Some(tx_queue_start);
    o.tx_queue_stop = Some(tx_queue_stop);
    o.rx_queue_intr_enable = Some(crate::control::intr::rx_queue_intr_enable);
    o.rx_queue_intr_disable = Some(crate::control::intr::rx_queue_intr_disable);
    o.tx_done_cleanup = Some(tx_done_cleanup);
    o.rss_hash_update = Some(rss_hash_update);
    o.rss_hash_conf_get = Some(rss_hash_conf_get);
    o.reta_update = Some(reta_update);
    o.reta_query = Some(reta_query);
    o.vlan_offload_set = Some(vlan_offload_set);
    o.vlan_strip_queue_set = Some(vlan_strip_queue_set);
    o
};

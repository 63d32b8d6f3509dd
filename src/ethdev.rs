//! The `eth_dev_ops` of a MANA port: configuration, queue setup, start and
//! stop (creating and destroying the verbs queues), stats, RSS, MTU, link,
//! and device events.

use crate::consts::*;
use crate::ffi::{self, rte_eth_dev};
use crate::mr::Region;
use crate::port::{Device, Port};
use crate::rxq::{self, RxHw, RxQueue};
use crate::txq::{self, TxHw, TxQueue};
use crate::verbs::{self, CompChannel, Cq, IndTable, Qp, VerbsError, Wq};
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
    | TX_OFFLOAD_MBUF_FAST_FREE;
pub const RSS_OFFLOADS: u64 = RSS_IPV4
    | RSS_FRAG_IPV4
    | RSS_NONFRAG_IPV4_TCP
    | RSS_NONFRAG_IPV4_UDP
    | RSS_NONFRAG_IPV4_OTHER
    | RSS_IPV6
    | RSS_FRAG_IPV6
    | RSS_NONFRAG_IPV6_TCP
    | RSS_NONFRAG_IPV6_UDP;
pub const RETA_SIZE: usize = 64;
pub const MIN_DESC: u16 = 64;
pub const MIN_MTU: u16 = 68;
pub const MAX_MTU: u16 = 9000;
/// Ethernet header plus one VLAN tag on top of the MTU.
const L2_OVERHEAD: u32 = 14 + 4;

/// The RSS configuration a port keeps across stop/start and resets.
#[derive(Clone)]
pub struct Rss {
    pub key: [u8; 40],
    pub hf: u64,
    /// The queue each of the 64 hardware entries sends to.
    pub reta: [u16; RETA_SIZE],
}

impl Rss {
    fn new() -> Rss {
        Rss {
            key: gdma::DPDK_MANA_DEFAULT_RSS_KEY,
            hf: RSS_IPV4
                | RSS_NONFRAG_IPV4_TCP
                | RSS_NONFRAG_IPV4_UDP
                | RSS_IPV6
                | RSS_NONFRAG_IPV6_TCP
                | RSS_NONFRAG_IPV6_UDP,
            reta: [0; RETA_SIZE],
        }
    }

    /// libibverbs hash fields for DPDK RSS types.
    fn verbs_fields(&self) -> u64 {
        let v4 = (ffi::IBV_RX_HASH_SRC_IPV4 | ffi::IBV_RX_HASH_DST_IPV4) as u64;
        let v6 = (ffi::IBV_RX_HASH_SRC_IPV6 | ffi::IBV_RX_HASH_DST_IPV6) as u64;
        let tcp = (ffi::IBV_RX_HASH_SRC_PORT_TCP | ffi::IBV_RX_HASH_DST_PORT_TCP) as u64;
        let udp = (ffi::IBV_RX_HASH_SRC_PORT_UDP | ffi::IBV_RX_HASH_DST_PORT_UDP) as u64;
        let hf = self.hf;
        let mut f = 0;
        if hf
            & (RSS_IPV4
                | RSS_FRAG_IPV4
                | RSS_NONFRAG_IPV4_OTHER
                | RSS_NONFRAG_IPV4_TCP
                | RSS_NONFRAG_IPV4_UDP)
            != 0
        {
            f |= v4;
        }
        if hf & (RSS_IPV6 | RSS_FRAG_IPV6 | RSS_NONFRAG_IPV6_TCP | RSS_NONFRAG_IPV6_UDP) != 0 {
            f |= v6;
        }
        if hf & (RSS_NONFRAG_IPV4_TCP | RSS_NONFRAG_IPV6_TCP) != 0 {
            f |= tcp;
        }
        if hf & (RSS_NONFRAG_IPV4_UDP | RSS_NONFRAG_IPV6_UDP) != 0 {
            f |= udp;
        }
        f
    }

    /// The device repeats its list of receive queues over the 64 entries,
    /// so a table must repeat with period `n` and name each queue once per
    /// period; returns that list.
    pub fn queue_order(reta: &[u16; RETA_SIZE], n: usize) -> Result<Vec<u16>, String> {
        let order: Vec<u16> = reta[..n.min(RETA_SIZE)].to_vec();
        let mut seen = vec![false; n];
        for &q in &order {
            if usize::from(q) >= n || std::mem::replace(&mut seen[usize::from(q)], true) {
                return Err(format!(
                    "entries 0..{n} must name each of the {n} receive queues exactly once (got {order:?})"
                ));
            }
        }
        if let Some(i) = (n..RETA_SIZE).find(|&i| reta[i] != reta[i % n]) {
            return Err(format!(
                "MANA repeats the queue list every {n} entries: entry {i} must equal entry {} ({}), not {}",
                i % n,
                reta[i % n],
                reta[i]
            ));
        }
        Ok(order)
    }
}

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
struct Running {
    rss: Option<(Qp, IndTable)>,
    rx: Vec<RxVerbs>,
    tx: Vec<TxVerbs>,
}

/// Control state of a port, under `Port::ctrl`.
pub struct Ctrl {
    pub dev: Option<Device>,
    pub rss: Rss,
    pub started: bool,
    running: Option<Running>,
    /// Largest descriptor count libmana accepts (256 with rdma-core 44).
    pub max_desc: Option<u16>,
}

impl Ctrl {
    pub fn rx_channel(&self, i: usize) -> Option<&CompChannel> {
        self.running.as_ref()?.rx.get(i)?.channel.as_ref()
    }

    pub fn new(dev: Device) -> Ctrl {
        Ctrl {
            dev: Some(dev),
            rss: Rss::new(),
            started: false,
            running: None,
            max_desc: None,
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

fn rxq_ptr(d: &ffi::rte_eth_dev_data, i: usize) -> *mut RxQueue {
    // SAFETY: rx_queues has nb_rx_queues entries (ethdev allocates them).
    unsafe { *d.rx_queues.add(i) as *mut RxQueue }
}

fn txq_ptr(d: &ffi::rte_eth_dev_data, i: usize) -> *mut TxQueue {
    // SAFETY: as above.
    unsafe { *d.tx_queues.add(i) as *mut TxQueue }
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

unsafe fn set_burst_running(dev: *mut rte_eth_dev) {
    // SAFETY: a live ethdev of ours; netvsc and failsafe read these fields directly.
    unsafe {
        (*dev).rx_pkt_burst = Some(rxq::rx_burst);
        (*dev).tx_pkt_burst = Some(txq::tx_burst);
        (*dev).tx_pkt_prepare = Some(txq::tx_prepare);
        (*dev).rx_queue_count = Some(rxq::rx_queue_count);
        (*dev).rx_descriptor_status = Some(rxq::rx_descriptor_status);
        (*dev).tx_descriptor_status = Some(txq::tx_descriptor_status);
    }
}

// ---------------------------------------------------------------------------
// Memory registration on behalf of the data path.

/// Finds or creates a registration covering `[addr, addr + len)` on the
/// port's device (the data path's slow path on a cache miss).
pub fn register_memory(port_id: u16, addr: usize, len: usize) -> Option<Region> {
    // SAFETY: the queue's port id names one of our live ethdevs, whose
    // process_private is a Port while the port exists.
    let dev = unsafe {
        (&raw mut ffi::rte_eth_devices as *mut ffi::rte_eth_dev).add(usize::from(port_id))
    };
    // SAFETY: as above.
    let p = unsafe { (*dev).process_private as *const Port };
    if p.is_null() {
        return None;
    }
    // SAFETY: as above.
    let mut reg = unsafe { &*p }.mr.lock().unwrap_or_else(|e| e.into_inner());
    reg.register(addr, len)
}

/// Registers every mempool in the process (callback of `rte_mempool_walk`).
unsafe extern "C" fn register_pool(mp: *mut ffi::rte_mempool, arg: *mut c_void) {
    // SAFETY: `arg` is the registry passed by `register_all_pools`.
    let reg = unsafe { &mut *(arg as *mut crate::mr::Registry) };
    reg.register_mempool(mp);
}

// ---------------------------------------------------------------------------
// Ops.

unsafe extern "C" fn dev_configure(dev: *mut rte_eth_dev) -> c_int {
    let p = port(dev);
    let d = data(dev);
    let conf = &mut d.dev_conf;
    let (nb_rx, nb_tx) = (d.nb_rx_queues, d.nb_tx_queues);
    let ctrl = p.ctrl.lock().unwrap_or_else(|e| e.into_inner());
    if ctrl.dev.is_none() {
        return neg(libc::EBUSY);
    }
    drop(ctrl);
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
        error!("{}: loopback mode is not supported", p.name);
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
        if !rss_conf.rss_key.is_null() {
            if rss_conf.rss_key_len != 40 {
                error!(
                    "{}: RSS key length {} is not 40 bytes",
                    p.name, rss_conf.rss_key_len
                );
                return neg(libc::EINVAL);
            }
            // SAFETY: the application's 40-byte key.
            ctrl.rss
                .key
                .copy_from_slice(unsafe { std::slice::from_raw_parts(rss_conf.rss_key, 40) });
        }
        if rss_conf.rss_hf != 0 {
            ctrl.rss.hf = rss_conf.rss_hf & RSS_OFFLOADS;
        }
    }
    for (i, e) in ctrl.rss.reta.iter_mut().enumerate() {
        *e = (i % usize::from(nb_rx)) as u16;
    }
    0
}

unsafe extern "C" fn dev_infos_get(
    dev: *mut rte_eth_dev,
    info: *mut ffi::rte_eth_dev_info,
) -> c_int {
    let p = port(dev);
    // SAFETY: ethdev passes a zeroed info struct.
    let info = unsafe { &mut *info };
    let lim = p.limits;
    let max_desc = {
        let ctrl = p.ctrl.lock().unwrap_or_else(|e| e.into_inner());
        ctrl.max_desc.unwrap_or(lim.max_desc)
    };
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
    info.err_handle_mode = crate::reset::ERR_HANDLE_MODE;
    0
}

unsafe extern "C" fn rx_queue_setup(
    dev: *mut rte_eth_dev,
    qid: u16,
    nb_desc: u16,
    socket: c_uint,
    conf: *const ffi::rte_eth_rxconf,
    mp: *mut ffi::rte_mempool,
) -> c_int {
    let p = port(dev);
    let d = data(dev);
    let ctrl = p.ctrl.lock().unwrap_or_else(|e| e.into_inner());
    if ctrl.dev.is_none() {
        return neg(libc::EBUSY);
    }
    if let Err(e) = check_desc(p, &ctrl, nb_desc) {
        return e;
    }
    // SAFETY: ethdev passes a valid conf (its default if the app gave none).
    let conf = unsafe { &*conf };
    if conf.rx_deferred_start != 0 {
        error!(
            "{}: rx queue {qid}: deferred start is not supported",
            p.name
        );
        return neg(libc::EINVAL);
    }
    if conf.rx_nseg != 0 || conf.rx_nmempool != 0 {
        error!(
            "{}: rx queue {qid}: buffer split and multiple mempools are not supported",
            p.name
        );
        return neg(libc::EINVAL);
    }
    // SAFETY: a mempool from the application.
    let room = u32::from(unsafe { ffi::mana_shim_pktmbuf_data_room_size(mp) });
    let buf = room.saturating_sub(ffi::RTE_PKTMBUF_HEADROOM);
    let frame = u32::from(d.mtu) + L2_OVERHEAD;
    if buf < frame {
        error!(
            "{}: rx queue {qid}: mbufs hold {buf} bytes but MTU {} frames need {frame}; MANA receives each packet into one buffer (no scatter): use a larger mbuf data room",
            p.name, d.mtu
        );
        return neg(libc::EINVAL);
    }
    release_rxq(d, qid);
    let offloads = conf.offloads | d.dev_conf.rxmode.offloads;
    let socket = socket as c_int;
    match RxQueue::alloc(d.port_id, qid, nb_desc, socket, conf, mp, offloads) {
        Some(q) => {
            // SAFETY: qid < nb_rx_queues (checked by ethdev).
            unsafe { *d.rx_queues.add(usize::from(qid)) = q as *mut c_void };
            0
        }
        None => {
            error!(
                "{}: rx queue {qid}: out of memory on socket {socket}",
                p.name
            );
            neg(libc::ENOMEM)
        }
    }
}

unsafe extern "C" fn tx_queue_setup(
    dev: *mut rte_eth_dev,
    qid: u16,
    nb_desc: u16,
    socket: c_uint,
    conf: *const ffi::rte_eth_txconf,
) -> c_int {
    let p = port(dev);
    let d = data(dev);
    let ctrl = p.ctrl.lock().unwrap_or_else(|e| e.into_inner());
    if ctrl.dev.is_none() {
        return neg(libc::EBUSY);
    }
    if let Err(e) = check_desc(p, &ctrl, nb_desc) {
        return e;
    }
    // SAFETY: ethdev passes a valid conf.
    let conf = unsafe { &*conf };
    if conf.tx_deferred_start != 0 {
        error!(
            "{}: tx queue {qid}: deferred start is not supported",
            p.name
        );
        return neg(libc::EINVAL);
    }
    release_txq(d, qid);
    let offloads = conf.offloads | d.dev_conf.txmode.offloads;
    let socket = socket as c_int;
    match TxQueue::alloc(d.port_id, qid, nb_desc, socket, conf, offloads) {
        Some(q) => {
            // SAFETY: qid < nb_tx_queues (checked by ethdev).
            unsafe { *d.tx_queues.add(usize::from(qid)) = q as *mut c_void };
            0
        }
        None => {
            error!(
                "{}: tx queue {qid}: out of memory on socket {socket}",
                p.name
            );
            neg(libc::ENOMEM)
        }
    }
}

fn check_desc(p: &Port, ctrl: &Ctrl, nb_desc: u16) -> Result<(), c_int> {
    let max = ctrl.max_desc.unwrap_or(p.limits.max_desc);
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
    let _ctrl = port(dev).ctrl.lock().unwrap_or_else(|e| e.into_inner());
    release_rxq(data(dev), qid);
}

unsafe extern "C" fn tx_queue_release(dev: *mut rte_eth_dev, qid: u16) {
    let _ctrl = port(dev).ctrl.lock().unwrap_or_else(|e| e.into_inner());
    release_txq(data(dev), qid);
}

/// The buffer allocator libmana uses for queue rings: zeroed, page-aligned
/// DPDK memory on the queue's socket (so secondaries see it too).
unsafe extern "C" fn verbs_alloc(size: usize, socket: *mut c_void) -> *mut c_void {
    // SAFETY: plain allocation.
    unsafe {
        let align = ffi::rte_mem_page_size().max(4096) as c_uint;
        ffi::rte_zmalloc_socket(c"mana_ring".as_ptr(), size, align, socket as isize as c_int)
    }
}

unsafe extern "C" fn verbs_free(ptr: *mut c_void, _socket: *mut c_void) {
    // SAFETY: frees what verbs_alloc returned.
    unsafe { ffi::rte_free(ptr) };
}

fn allocators(socket: c_int) -> ffi::manadv_ctx_allocators {
    ffi::manadv_ctx_allocators {
        alloc: Some(verbs_alloc),
        free: Some(verbs_free),
        data: socket as isize as *mut c_void,
    }
}

/// Creates the verbs queues and attaches the rings; on failure everything
/// created so far is destroyed (by drop) and the error says what failed.
fn start_queues(p: &Port, ctrl: &mut Ctrl) -> Result<(), (String, c_int)> {
    let d = p.data();
    let dev = ctrl
        .dev
        .as_ref()
        .ok_or((String::from("device is gone"), neg(libc::ENODEV)))?;
    let (nb_rx, nb_tx) = (usize::from(d.nb_rx_queues), usize::from(d.nb_tx_queues));
    let verr = |what: String| move |e: VerbsError| (format!("{what}: {e}"), e.neg());
    for i in 0..nb_rx {
        if rxq_ptr(d, i).is_null() {
            return Err((format!("rx queue {i} is not set up"), neg(libc::EINVAL)));
        }
    }
    for i in 0..nb_tx {
        if txq_ptr(d, i).is_null() {
            return Err((format!("tx queue {i} is not set up"), neg(libc::EINVAL)));
        }
    }
    {
        let mut reg = p.mr.lock().unwrap_or_else(|e| e.into_inner());
        reg.attach(&dev.pd, p.limits.max_mr_size);
        // SAFETY: walks the process's mempools synchronously.
        unsafe { ffi::rte_mempool_walk(Some(register_pool), &mut *reg as *mut _ as *mut c_void) };
    }
    let mut running = Running {
        rss: None,
        rx: Vec::with_capacity(nb_rx),
        tx: Vec::with_capacity(nb_tx),
    };
    let ctx = &dev.ctx;
    for i in 0..nb_tx {
        // SAFETY: set up above and not used by any burst while stopped.
        let q = unsafe { &mut *txq_ptr(d, i) };
        ctx.set_allocators(allocators(q.socket))
            .map_err(verr(format!("tx queue {i}")))?;
        let nb = u32::from(q.nb_desc());
        let cq = Cq::create(ctx, nb, None, 0).map_err(verr(format!("tx queue {i} CQ")))?;
        let qp = match Qp::create_raw_sq(&dev.parent, &cq, nb, u32::from(p.limits.max_send_sge)) {
            Ok(qp) => qp,
            Err(e) if e.errno == libc::EBUSY => {
                return Err((
                    format!(
                        "tx queue {i}: the kernel still uses port {} ({}): run 'ip link set {} down' before starting DPDK",
                        p.netdev.mac, p.netdev.ifname, p.netdev.ifname
                    ),
                    e.neg(),
                ));
            }
            Err(e) => return Err(verr(format!("tx queue {i} QP"))(e)),
        };
        let (dv_qp, dv_cq) = verbs::init_sq(&qp, &cq).map_err(verr(format!("tx queue {i}")))?;
        // SAFETY: the rings live until the verbs objects are destroyed,
        // which happens only after the queue is detached.
        unsafe {
            q.attach(&TxHw {
                sq_buf: dv_qp.sq_buf as *mut u8,
                sq_size: dv_qp.sq_size,
                sq_id: dv_qp.sq_id,
                cq_buf: dv_cq.buf as *mut u8,
                cq_count: dv_cq.count,
                cq_id: dv_cq.cq_id,
                vp_offset: dv_qp.tx_vp_offset,
                db_page: dv_qp.db_page as *mut u8,
                max_sge: u32::from(p.limits.max_send_sge),
            })
        };
        running.tx.push(TxVerbs { _qp: qp, _cq: cq });
    }
    let rx_intr = d.dev_conf.intr_conf.rxq() != 0;
    for i in 0..nb_rx {
        // SAFETY: as above.
        let q = unsafe { &*rxq_ptr(d, i) };
        ctx.set_allocators(allocators(q.socket))
            .map_err(verr(format!("rx queue {i}")))?;
        let channel = if rx_intr {
            Some(CompChannel::create(ctx).map_err(verr(format!("rx queue {i} channel")))?)
        } else {
            None
        };
        let nb = u32::from(q.nb_desc());
        let cq = Cq::create(ctx, nb, channel.as_ref(), i as i32)
            .map_err(verr(format!("rx queue {i} CQ")))?;
        let wq =
            Wq::create_rq(ctx, &dev.parent, &cq, nb).map_err(verr(format!("rx queue {i} WQ")))?;
        running.rx.push(RxVerbs { wq, cq, channel });
    }
    let order = Rss::queue_order(&ctrl.rss.reta, nb_rx).map_err(|m| (m, neg(libc::EINVAL)))?;
    let wqs: Vec<&Wq> = order
        .iter()
        .map(|&q| &running.rx[usize::from(q)].wq)
        .collect();
    let table = IndTable::create(ctx, &wqs).map_err(verr("receive indirection table".into()))?;
    let fields = if d.dev_conf.rxmode.mq_mode & MQ_RX_RSS_FLAG != 0 {
        ctrl.rss.verbs_fields()
    } else {
        0
    };
    let qp = Qp::create_rss(ctx, &dev.parent, &table, &ctrl.rss.key, fields)
        .map_err(verr("receive RSS QP".into()))?;
    running.rss = Some((qp, table));
    for (i, v) in running.rx.iter().enumerate() {
        // SAFETY: as above.
        let q = unsafe { &mut *rxq_ptr(d, i) };
        let (dv_wq, dv_cq) = verbs::init_rq(&v.wq, &v.cq).map_err(verr(format!("rx queue {i}")))?;
        // SAFETY: as for the send queues.
        let attached = unsafe {
            q.attach(&RxHw {
                rq_buf: dv_wq.buf as *mut u8,
                rq_size: dv_wq.size,
                rq_id: dv_wq.wq_id,
                cq_buf: dv_cq.buf as *mut u8,
                cq_count: dv_cq.count,
                cq_id: dv_cq.cq_id,
                db_page: dv_wq.db_page as *mut u8,
            })
        };
        if let Err(e) = attached {
            for j in 0..i {
                // SAFETY: attached above.
                unsafe { (*rxq_ptr(d, j)).detach() };
            }
            detach_tx(d);
            return Err((
                format!(
                    "rx queue {i}: its mempool cannot fill {} buffers",
                    q.nb_desc()
                ),
                e,
            ));
        }
    }
    if rx_intr {
        let fds: Vec<c_int> = running
            .rx
            .iter()
            .filter_map(|v| v.channel.as_ref().map(|c| c.fd()))
            .collect();
        crate::intr::enable_rx_vectors(p, &fds)
            .map_err(|e| (String::from("rx interrupt vectors"), e))?;
    }
    ctrl.running = Some(running);
    Ok(())
}

/// The deepest queue libmana accepts: rdma-core 44 caps CQs, SQs and RQs at
/// 256 entries, newer versions at the device limit. Tried once per port with
/// a throw-away CQ, so `dev_infos_get` reports what `dev_start` will accept.
pub fn probe_max_desc(p: &Port, ctrl: &Ctrl) -> u16 {
    let max = p.limits.max_desc;
    let Some(dev) = ctrl.dev.as_ref() else {
        return max;
    };
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
                "{}: queues limited to 256 descriptors ({e}; rdma-core 44 limit)",
                p.name
            );
            256
        }
    }
}

fn detach_tx(d: &ffi::rte_eth_dev_data) {
    for i in 0..usize::from(d.nb_tx_queues) {
        let q = txq_ptr(d, i);
        if !q.is_null() {
            // SAFETY: the gate is closed, no burst runs.
            unsafe { (*q).detach() };
        }
    }
}

/// Closes every queue's gate, waiting for bursts in flight.
pub fn close_gates(d: &ffi::rte_eth_dev_data) {
    for i in 0..usize::from(d.nb_rx_queues) {
        let q = rxq_ptr(d, i);
        if !q.is_null() {
            // SAFETY: the queue stays allocated while the ctrl lock is held.
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

fn open_gates(d: &ffi::rte_eth_dev_data) {
    for i in 0..usize::from(d.nb_rx_queues) {
        // SAFETY: all queues exist once the port started.
        unsafe { (*rxq_ptr(d, i)).gate.open() };
    }
    for i in 0..usize::from(d.nb_tx_queues) {
        // SAFETY: as above.
        unsafe { (*txq_ptr(d, i)).gate.open() };
    }
}

/// Waits (bounded) for the device to complete sends in flight, so their
/// mbufs are counted and freed as sent rather than discarded.
fn drain_tx(d: &ffi::rte_eth_dev_data) {
    for i in 0..usize::from(d.nb_tx_queues) {
        let q = txq_ptr(d, i);
        if q.is_null() {
            continue;
        }
        // SAFETY: the gate is closed, so we are the only user.
        let q = unsafe { &mut *q };
        for _ in 0..1000 {
            q.reap();
            if q.in_flight() == 0 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
    }
}

/// Tears down the started queues: gates closed, sends drained, verbs objects
/// destroyed, then the buffers still posted or in flight freed.
pub fn stop_queues(p: &Port, ctrl: &mut Ctrl, drain: bool) {
    let d = p.data();
    close_gates(d);
    if drain {
        drain_tx(d);
    }
    crate::intr::disable_rx_vectors(p);
    let running = ctrl.running.take();
    drop(running);
    let mut lost = 0;
    for i in 0..usize::from(d.nb_rx_queues) {
        let q = rxq_ptr(d, i);
        if !q.is_null() {
            // SAFETY: hardware queues are gone; no burst runs.
            unsafe { (*q).detach() };
        }
    }
    for i in 0..usize::from(d.nb_tx_queues) {
        let q = txq_ptr(d, i);
        if !q.is_null() {
            // SAFETY: as above.
            lost += unsafe { (*q).detach() };
        }
    }
    if lost > 0 {
        warn!(
            "{}: {lost} packets queued for sending were discarded at stop",
            p.name
        );
    }
}

unsafe extern "C" fn dev_start(dev: *mut rte_eth_dev) -> c_int {
    let p = port(dev);
    let mut ctrl = p.ctrl.lock().unwrap_or_else(|e| e.into_inner());
    if ctrl.dev.is_none() {
        return neg(libc::EBUSY);
    }
    if ctrl.started {
        return 0;
    }
    if let Err((msg, err)) = start_queues(p, &mut ctrl) {
        error!("{}: start failed: {msg}", p.name);
        ctrl.running = None;
        return err;
    }
    ctrl.started = true;
    let d = p.data();
    // SAFETY: a live ethdev of ours; the queues are attached.
    unsafe { set_burst_running(dev) };
    open_gates(d);
    let link = link(true);
    // SAFETY: a live ethdev.
    unsafe { ffi::mana_shim_linkstatus_set(dev, &link) };
    let dm = data(dev);
    for i in 0..usize::from(dm.nb_rx_queues) {
        dm.rx_queue_state[i] = ffi::RTE_ETH_QUEUE_STATE_STARTED as u8;
    }
    for i in 0..usize::from(dm.nb_tx_queues) {
        dm.tx_queue_state[i] = ffi::RTE_ETH_QUEUE_STATE_STARTED as u8;
    }
    info!(
        "{}: started with {} rx / {} tx queues",
        p.name, dm.nb_rx_queues, dm.nb_tx_queues
    );
    0
}

unsafe extern "C" fn dev_stop(dev: *mut rte_eth_dev) -> c_int {
    let p = port(dev);
    let mut ctrl = p.ctrl.lock().unwrap_or_else(|e| e.into_inner());
    stop_locked(p, &mut ctrl, dev);
    0
}

fn stop_locked(p: &Port, ctrl: &mut Ctrl, dev: *mut rte_eth_dev) {
    if !ctrl.started {
        return;
    }
    // SAFETY: a live ethdev of ours.
    unsafe { set_burst_stopped(dev) };
    stop_queues(p, ctrl, true);
    ctrl.started = false;
    // SAFETY: as above.
    unsafe { ffi::mana_shim_linkstatus_set(dev, &link(false)) };
    let d = data(dev);
    for i in 0..usize::from(d.nb_rx_queues) {
        d.rx_queue_state[i] = ffi::RTE_ETH_QUEUE_STATE_STOPPED as u8;
    }
    for i in 0..usize::from(d.nb_tx_queues) {
        d.tx_queue_state[i] = ffi::RTE_ETH_QUEUE_STATE_STOPPED as u8;
    }
}

unsafe extern "C" fn dev_close(dev: *mut rte_eth_dev) -> c_int {
    // SAFETY: FFI query.
    if unsafe { ffi::rte_eal_process_type() } != ffi::RTE_PROC_PRIMARY {
        return 0;
    }
    let p = port(dev);
    {
        let mut ctrl = p.ctrl.lock().unwrap_or_else(|e| e.into_inner());
        stop_locked(p, &mut ctrl, dev);
        let d = data(dev);
        for i in 0..d.nb_rx_queues {
            release_rxq(d, i);
        }
        for i in 0..d.nb_tx_queues {
            release_txq(d, i);
        }
        p.mr.lock().unwrap_or_else(|e| e.into_inner()).detach();
        ctrl.dev = None;
    }
    info!("{}: closed", p.name);
    // SAFETY: ethdev releases the port after this returns.
    unsafe { crate::port::free_private(dev) };
    0
}

fn link(up: bool) -> ffi::rte_eth_link {
    let mut l = ffi::rte_eth_link {
        link_speed: if up { SPEED_NUM_100G } else { 0 },
        ..Default::default()
    };
    l.set_link_duplex(ffi::RTE_ETH_LINK_FULL_DUPLEX as u16);
    l.set_link_autoneg(ffi::RTE_ETH_LINK_FIXED as u16);
    l.set_link_status(up as u16);
    l
}

unsafe extern "C" fn link_update(dev: *mut rte_eth_dev, _wait: c_int) -> c_int {
    // MANA has no carrier state of its own: the link is up while started.
    let up = data(dev).dev_started() != 0;
    // SAFETY: a live ethdev.
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

/// Disabling a mode the device never enters succeeds.
unsafe extern "C" fn mode_disable(_dev: *mut rte_eth_dev) -> c_int {
    0
}

unsafe extern "C" fn mtu_set(dev: *mut rte_eth_dev, mtu: u16) -> c_int {
    let p = port(dev);
    let d = data(dev);
    let ctrl = p.ctrl.lock().unwrap_or_else(|e| e.into_inner());
    if ctrl.dev.is_none() {
        return neg(libc::EBUSY);
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

unsafe extern "C" fn stats_get(dev: *mut rte_eth_dev, s: *mut ffi::rte_eth_stats) -> c_int {
    let d = data(dev);
    // SAFETY: ethdev passes a zeroed stats struct.
    let s = unsafe { &mut *s };
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
            s.q_ipackets[i] = pk;
            s.q_ibytes[i] = by;
            s.q_errors[i] = st.errors.get();
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
            s.q_opackets[i] = pk;
            s.q_obytes[i] = by;
        }
    }
    0
}

unsafe extern "C" fn stats_reset(dev: *mut rte_eth_dev) -> c_int {
    crate::xstats::reset(data(dev));
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
        info.conf.offloads = q.offloads;
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
    let p = port(dev);
    let ctrl = p.ctrl.lock().unwrap_or_else(|e| e.into_inner());
    let fw = match ctrl.dev.as_ref().map(|d| d.ctx.query_device_ex()) {
        Some(Ok(a)) => {
            // SAFETY: fw_ver is a NUL-terminated array.
            let v = unsafe { std::ffi::CStr::from_ptr(a.orig_attr.fw_ver.as_ptr()) };
            v.to_string_lossy().into_owned()
        }
        _ => String::from("unknown"),
    };
    let text = format!("{fw} net_mana-rs {}", env!("CARGO_PKG_VERSION"));
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

unsafe extern "C" fn supported_ptypes(_dev: *mut rte_eth_dev) -> *const u32 {
    rxq::PTYPES.as_ptr()
}

unsafe extern "C" fn rss_hash_update(
    dev: *mut rte_eth_dev,
    conf: *mut ffi::rte_eth_rss_conf,
) -> c_int {
    let p = port(dev);
    let mut ctrl = p.ctrl.lock().unwrap_or_else(|e| e.into_inner());
    if ctrl.dev.is_none() {
        return neg(libc::EBUSY);
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
    if !conf.rss_key.is_null() {
        if conf.rss_key_len != 40 {
            error!(
                "{}: RSS key length {} is not 40 bytes",
                p.name, conf.rss_key_len
            );
            return neg(libc::EINVAL);
        }
        // SAFETY: a 40-byte key from the application.
        ctrl.rss
            .key
            .copy_from_slice(unsafe { std::slice::from_raw_parts(conf.rss_key, 40) });
    }
    ctrl.rss.hf = conf.rss_hf;
    0
}

unsafe extern "C" fn rss_hash_conf_get(
    dev: *mut rte_eth_dev,
    conf: *mut ffi::rte_eth_rss_conf,
) -> c_int {
    let ctrl = port(dev).ctrl.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: ethdev passes a valid conf; the key buffer, if any, holds rss_key_len bytes.
    unsafe {
        let conf = &mut *conf;
        if !conf.rss_key.is_null() && conf.rss_key_len >= 40 {
            ptr::copy_nonoverlapping(ctrl.rss.key.as_ptr(), conf.rss_key, 40);
        }
        conf.rss_key_len = 40;
        conf.rss_hf = ctrl.rss.hf;
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
    if ctrl.dev.is_none() {
        return neg(libc::EBUSY);
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
    let ctrl = port(dev).ctrl.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: one 64-entry group.
    let group = unsafe { &mut *conf };
    for i in 0..RETA_SIZE {
        if group.mask & (1 << i) != 0 {
            group.reta[i] = ctrl.rss.reta[i];
        }
    }
    0
}

unsafe extern "C" fn tx_done_cleanup(q: *mut c_void, free_cnt: u32) -> c_int {
    // SAFETY: ethdev passes one of our tx queues.
    unsafe { txq::tx_done_cleanup(q, free_cnt) }
}

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
    o.mtu_set = Some(mtu_set);
    o.stats_get = Some(stats_get);
    o.stats_reset = Some(stats_reset);
    o.xstats_get = Some(crate::xstats::xstats_get);
    o.xstats_get_names = Some(crate::xstats::xstats_get_names);
    o.xstats_reset = Some(stats_reset);
    o.dev_infos_get = Some(dev_infos_get);
    o.rxq_info_get = Some(rxq_info_get);
    o.txq_info_get = Some(txq_info_get);
    o.rx_burst_mode_get = Some(rx_burst_mode_get);
    o.tx_burst_mode_get = Some(tx_burst_mode_get);
    o.fw_version_get = Some(fw_version_get);
    o.dev_supported_ptypes_get = Some(supported_ptypes);
    o.rx_queue_setup = Some(rx_queue_setup);
    o.rx_queue_release = Some(rx_queue_release);
    o.tx_queue_setup = Some(tx_queue_setup);
    o.tx_queue_release = Some(tx_queue_release);
    o.rx_queue_intr_enable = Some(crate::intr::rx_queue_intr_enable);
    o.rx_queue_intr_disable = Some(crate::intr::rx_queue_intr_disable);
    o.tx_done_cleanup = Some(tx_done_cleanup);
    o.rss_hash_update = Some(rss_hash_update);
    o.rss_hash_conf_get = Some(rss_hash_conf_get);
    o.reta_update = Some(reta_update);
    o.reta_query = Some(reta_query);
    o
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reta_must_repeat_a_permutation_of_the_queues() {
        let mut reta = [0u16; RETA_SIZE];
        for (i, e) in reta.iter_mut().enumerate() {
            *e = [2, 0, 3, 1][i % 4];
        }
        assert_eq!(Rss::queue_order(&reta, 4).unwrap(), vec![2, 0, 3, 1]);
        reta[9] = 2;
        let e = Rss::queue_order(&reta, 4).unwrap_err();
        assert_eq!(
            e,
            "MANA repeats the queue list every 4 entries: entry 9 must equal entry 1 (0), not 2"
        );
        reta[9] = 0;
        reta[1] = 2;
        reta[5] = 2;
        assert!(Rss::queue_order(&reta, 4)
            .unwrap_err()
            .contains("exactly once"));
    }

    #[test]
    fn rss_types_map_to_verbs_hash_fields() {
        let mut r = Rss::new();
        r.hf = RSS_IPV6;
        assert_eq!(
            r.verbs_fields(),
            (ffi::IBV_RX_HASH_SRC_IPV6 | ffi::IBV_RX_HASH_DST_IPV6) as u64,
            "both IPv6 addresses, unlike the C driver"
        );
        r.hf = RSS_NONFRAG_IPV4_UDP;
        assert_eq!(r.verbs_fields(), 0x1 | 0x2 | 0x40 | 0x80);
    }
}

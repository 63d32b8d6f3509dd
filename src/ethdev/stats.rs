//! Basic and extended statistics, read from the queues' counters in any
//! process. In the primary, tx queues settle first (see `TxQueue::settle`),
//! so sends the device dropped are counted as errors, not as sent.

use super::data;
use crate::control::state::queue_sets::EthQueues;
use crate::dataplane::queue::DataQueue;
use crate::dataplane::rxq::RxQueue;
use crate::dataplane::stats::Counter;
use crate::dataplane::txq::TxQueue;
use crate::ffi::compat::QueueStats;
use crate::ffi::{self, rte_eth_dev};
use std::ffi::{c_int, c_uint};

type RxField = fn(&RxQueue) -> &Counter;
type TxField = fn(&TxQueue) -> &Counter;

const RX: &[(&str, RxField)] = &[
    ("packets", |q| &q.stats.packets),
    ("bytes", |q| &q.stats.bytes),
    ("errors", |q| &q.stats.errors),
    ("mbuf_allocation_errors", |q| &q.stats.nombuf),
    ("truncated_drops", |q| &q.stats.truncated),
    ("unexpected_completions", |q| &q.stats.cqe_unexpected),
    ("cq_overflows", |q| &q.stats.cq_overflow),
    ("stale_completions", |q| &q.stats.cqe_stale),
    ("wrong_queue_completions", |q| &q.stats.cqe_wrong_queue),
    ("bad_wqe_completions", |q| &q.stats.cqe_bad_wqe),
    ("bad_length_drops", |q| &q.stats.bad_length),
    ("missed_completions", |q| &q.stats.missed),
    ("vlan_reinsert_errors", |q| &q.stats.vlan_reinsert_failed),
    ("lost_to_reset", |q| &q.stats.lost_to_reset),
];

const TX: &[(&str, TxField)] = &[
    ("packets", |q| &q.stats.packets),
    ("bytes", |q| &q.stats.bytes),
    ("errors", |q| &q.stats.errors),
    ("no_memory_region_drops", |q| &q.stats.drops[0]),
    ("too_many_segments_drops", |q| &q.stats.drops[1]),
    ("bad_tso_drops", |q| &q.stats.drops[2]),
    ("linearized_packets", |q| &q.stats.linearized),
    ("sa_drop_completions", |q| &q.stats.cqe_errors[1]),
    ("mtu_drop_completions", |q| &q.stats.cqe_errors[2]),
    ("invalid_oob_completions", |q| &q.stats.cqe_errors[3]),
    ("invalid_eth_type_completions", |q| &q.stats.cqe_errors[4]),
    ("header_error_completions", |q| &q.stats.cqe_errors[5]),
    ("vf_disabled_completions", |q| &q.stats.cqe_errors[6]),
    ("vport_range_completions", |q| &q.stats.cqe_errors[7]),
    ("vport_disabled_completions", |q| &q.stats.cqe_errors[8]),
    ("vlan_violation_completions", |q| &q.stats.cqe_errors[9]),
    ("unexpected_completions", |q| &q.stats.cqe_unexpected),
    ("cq_overflows", |q| &q.stats.cq_overflow),
    ("stale_completions", |q| &q.stats.cqe_stale),
    ("wrong_queue_completions", |q| &q.stats.cqe_wrong_queue),
    ("bad_wqe_completions", |q| &q.stats.cqe_bad_wqe),
    ("missed_completions", |q| &q.stats.missed),
];

/// The port's queues inside one of its ethdev ops.
fn queues<'d>(dev: *mut rte_eth_dev) -> EthQueues<'d> {
    // SAFETY: called from our stats ops, inside which ethdev keeps the
    // queues and their arrays.
    unsafe { EthQueues::of(data(dev)) }
}

/// Reaps what the device completed on every tx queue not in a burst, in
/// the primary only. Reaping frees mbufs: a secondary would put them in
/// its own lcore's mempool cache, which the primary's thread of the same
/// lcore id uses unlocked, and through its own table of mempool handlers,
/// which in another program (`dpdk-proc-info` beside testpmd) may name
/// other handlers. A secondary's read shows a failed send as sent until
/// the next burst or primary read takes in its completion.
fn settle(q: &EthQueues<'_>) {
    if !crate::control::mp::is_primary() {
        return;
    }
    for (_, t) in q.iter::<TxQueue>() {
        t.settle();
    }
}

/// `stats_get` (adapted to this DPDK's signature by `compat::stats_get_op`).
pub fn stats_get(dev: *mut rte_eth_dev, s: &mut ffi::rte_eth_stats, qs: &mut QueueStats) -> c_int {
    let q = queues(dev);
    settle(&q);
    let nq = ffi::RTE_ETHDEV_QUEUE_STAT_CNTRS as usize;
    for (i, r) in q.iter::<RxQueue>() {
        let st = &r.stats;
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
    for (i, t) in q.iter::<TxQueue>() {
        let st = &t.stats;
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

/// Zeroes every queue counter (`stats_reset` and `xstats_reset`).
pub unsafe extern "C" fn stats_reset(dev: *mut rte_eth_dev) -> c_int {
    let q = queues(dev);
    for (_, r) in q.iter::<RxQueue>() {
        RX.iter().for_each(|(_, f)| f(r).reset());
    }
    for (_, t) in q.iter::<TxQueue>() {
        TX.iter().for_each(|(_, f)| f(t).reset());
    }
    // SAFETY: DPDK calls this op with a live ethdev whose data outlives it.
    let port_id = unsafe { (*(*dev).data).port_id };
    if let Some(p) = crate::control::port::Port::lookup(port_id) {
        p.unknown_events
            .store(0, std::sync::atomic::Ordering::Relaxed);
    }
    0
}

/// Every (name, value) pair, in a stable order (every queue the port is
/// configured with, 0 for one not set up).
fn collect(dev: *mut rte_eth_dev) -> Vec<(String, u64)> {
    let q = queues(dev);
    settle(&q);
    let d = data(dev);
    let mut out = Vec::new();
    for i in 0..usize::from(d.nb_rx_queues) {
        let r = q.get::<RxQueue>(i);
        for (name, f) in RX {
            out.push((format!("rx_q{i}_{name}"), r.map_or(0, |r| f(r).get())));
        }
    }
    for i in 0..usize::from(d.nb_tx_queues) {
        let t = q.get::<TxQueue>(i);
        for (name, f) in TX {
            out.push((format!("tx_q{i}_{name}"), t.map_or(0, |t| f(t).get())));
        }
    }
    // Counted by the primary's event handler; 0 in a secondary.
    let unknown = crate::control::port::Port::lookup(d.port_id).map_or(0, |p| {
        p.unknown_events.load(std::sync::atomic::Ordering::Relaxed)
    });
    out.push(("unknown_device_events".into(), unknown));
    state(dev, &q, &mut out);
    out
}

/// Gauges of the port's state, after the counters: what explains traffic
/// that stopped (a gate left closed, the stopped burst functions left
/// installed, a ring whose positions no longer move). A queue's
/// positions are read inside its gate, between bursts; while the gate is
/// closed (or a burst holds it) they read `u64::MAX`.
fn state(dev: *mut rte_eth_dev, q: &EthQueues<'_>, out: &mut Vec<(String, u64)>) {
    use crate::dataplane::queue::RingView;
    let d = data(dev);
    fn push(out: &mut Vec<(String, u64)>, dir: &str, i: usize, open: bool, v: Option<RingView>) {
        let pos = |f: fn(&RingView) -> u32| v.as_ref().map_or(u64::MAX, |v| u64::from(f(v)));
        out.push((format!("{dir}_q{i}_gate_open"), u64::from(open)));
        out.push((format!("{dir}_q{i}_wq_producer"), pos(|v| v.wq_producer)));
        out.push((format!("{dir}_q{i}_wq_consumer"), pos(|v| v.wq_consumer)));
        out.push((format!("{dir}_q{i}_cq_head"), pos(|v| v.cq_head)));
        out.push((format!("{dir}_q{i}_held"), pos(|v| v.held)));
    }
    for i in 0..usize::from(d.nb_rx_queues) {
        let r = q.get::<RxQueue>(i);
        let open = r.is_some_and(|r| !r.gate().is_closed());
        push(out, "rx", i, open, r.and_then(RxQueue::view));
    }
    for i in 0..usize::from(d.nb_tx_queues) {
        let t = q.get::<TxQueue>(i);
        let open = t.is_some_and(|t| !t.gate().is_closed());
        push(out, "tx", i, open, t.and_then(TxQueue::view));
    }
    // SAFETY: a live ethdev of ours inside one of its ops.
    let (rx, tx) = unsafe { ((*dev).rx_pkt_burst, (*dev).tx_pkt_burst) };
    let running = rx.map(|f| f as *const () as usize)
        == Some(crate::dataplane::rxq::rx_burst as *const () as usize)
        && tx.map(|f| f as *const () as usize)
            == Some(crate::dataplane::txq::tx_burst as *const () as usize);
    out.push(("bursts_running".into(), u64::from(running)));
    out.push(("dev_started".into(), u64::from(d.dev_started())));
    // Active 0, Recovering 1, Failed 2, Closed 3; u64::MAX in a secondary.
    let phase = crate::control::port::Port::lookup(d.port_id).map_or(u64::MAX, |p| {
        use crate::control::handoff::Phase;
        match p.reset.phase() {
            Phase::Active => 0,
            Phase::Recovering => 1,
            Phase::Failed => 2,
            Phase::Closed => 3,
        }
    });
    out.push(("reset_phase".into(), phase));
}

pub unsafe extern "C" fn xstats_get(
    dev: *mut rte_eth_dev,
    out: *mut ffi::rte_eth_xstat,
    n: c_uint,
) -> c_int {
    let all = collect(dev);
    if out.is_null() || (n as usize) < all.len() {
        return all.len() as c_int;
    }
    for (i, (_, v)) in all.iter().enumerate() {
        // SAFETY: `out` has room for `n >= all.len()` entries.
        unsafe {
            *out.add(i) = ffi::rte_eth_xstat {
                id: i as u64,
                value: *v,
            }
        };
    }
    all.len() as c_int
}

pub unsafe extern "C" fn xstats_get_names(
    dev: *mut rte_eth_dev,
    out: *mut ffi::rte_eth_xstat_name,
    n: c_uint,
) -> c_int {
    let all = collect(dev);
    if out.is_null() || (n as usize) < all.len() {
        return all.len() as c_int;
    }
    for (i, (name, _)) in all.iter().enumerate() {
        // SAFETY: `out` has room for `n >= all.len()` names of 64 bytes.
        let dst = unsafe { &mut (*out.add(i)).name };
        dst.fill(0);
        let max = dst.len() - 1;
        for (d, b) in dst.iter_mut().zip(name.bytes().take(max)) {
            *d = b as std::ffi::c_char;
        }
    }
    all.len() as c_int
}

//! Extended statistics: per-queue counters and the drop and error causes
//! the basic stats fold together.

use crate::dataplane::rxq::RxQueue;
use crate::dataplane::stats::Counter;
use crate::dataplane::txq::TxQueue;
use crate::ffi;
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
    ("vlan_reinsert_errors", |q| &q.stats.vlan_reinsert_failed),
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
];

fn queues<T: 'static>(
    arr: *mut *mut std::ffi::c_void,
    n: u16,
) -> impl Iterator<Item = (usize, Option<&'static T>)> {
    (0..usize::from(n)).map(move |i| {
        // SAFETY: ethdev's queue arrays have `n` entries; set-up queues are ours.
        let q = unsafe { *arr.add(i) } as *const T;
        // SAFETY: a non-null entry is a live queue of ours.
        (i, (!q.is_null()).then(|| unsafe { &*q }))
    })
}

/// Every (name, value) pair, in a stable order.
fn collect(d: &ffi::rte_eth_dev_data) -> Vec<(String, u64)> {
    crate::control::queues::settle_tx(d);
    let mut out = Vec::new();
    for (i, q) in queues::<RxQueue>(d.rx_queues, d.nb_rx_queues) {
        for (name, f) in RX {
            out.push((format!("rx_q{i}_{name}"), q.map_or(0, |q| f(q).get())));
        }
    }
    for (i, q) in queues::<TxQueue>(d.tx_queues, d.nb_tx_queues) {
        for (name, f) in TX {
            out.push((format!("tx_q{i}_{name}"), q.map_or(0, |q| f(q).get())));
        }
    }
    out
}

/// Zeroes every queue counter (`stats_reset` and `xstats_reset`).
pub fn reset(d: &ffi::rte_eth_dev_data) {
    for (_, q) in queues::<RxQueue>(d.rx_queues, d.nb_rx_queues) {
        for (_, f) in RX {
            if let Some(q) = q {
                f(q).reset();
            }
        }
    }
    for (_, q) in queues::<TxQueue>(d.tx_queues, d.nb_tx_queues) {
        for (_, f) in TX {
            if let Some(q) = q {
                f(q).reset();
            }
        }
    }
}

pub unsafe extern "C" fn xstats_get(
    dev: *mut ffi::rte_eth_dev,
    out: *mut ffi::rte_eth_xstat,
    n: c_uint,
) -> c_int {
    // SAFETY: a live ethdev of ours.
    let all = collect(unsafe { &*(*dev).data });
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
    dev: *mut ffi::rte_eth_dev,
    out: *mut ffi::rte_eth_xstat_name,
    n: c_uint,
) -> c_int {
    // SAFETY: a live ethdev of ours.
    let all = collect(unsafe { &*(*dev).data });
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

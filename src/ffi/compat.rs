//! What differs between the DPDK releases the driver builds against, kept
//! in one place. `build.rs` detects each difference from the headers and
//! sets a `cfg`; the rest of the driver uses the version-neutral items here.
//!
//! | cfg | since | what changes |
//! |---|---|---|
//! | `dpdk_ptypes_count` | 24.03 | `dev_supported_ptypes_get` also returns the list's length |
//! | `dpdk_queue_stats` | 25.11 | `stats_get` writes per-queue counters to `struct eth_queue_stats` (maybe NULL), not `rte_eth_stats.q_*` |
//! | `dpdk_rx_queue_count_int` | 25.11 | `rx_queue_count` returns `int` |
//! | `dpdk_link_union` | 24.07, 23.11.x | `rte_eth_link` is a union with `val64` |
//! | `dpdk_logtype_pmd` | until 24.03 | `RTE_LOGTYPE_PMD` exists |
//! | `dpdk_mbuf_unions` | 24.07 | mbuf fields in anonymous unions: see [`super::mbuf`] |
//!
//! The op adapters are macros so that the ops stay defined where they are
//! (`ethdev.rs`, `rxq.rs`) with one signature, and this module needs nothing
//! above the FFI layer.

use super::sys;
use core::ffi::c_int;

/// The page size DPDK's memory uses (`rte_mem_page_size()` on Linux, whose
/// header no DPDK install ships): the system page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as usize
    } else {
        4096
    }
}

/// The log type for messages logged before (or without) our own log types,
/// as DPDK's `RTE_LOG_REGISTER` falls back: `PMD` where it exists.
#[cfg(dpdk_logtype_pmd)]
pub const FALLBACK_LOGTYPE: c_int = sys::RTE_LOGTYPE_PMD as c_int;
#[cfg(not(dpdk_logtype_pmd))]
pub const FALLBACK_LOGTYPE: c_int = sys::RTE_LOGTYPE_EAL as c_int;

/// A `struct rte_eth_link`.
pub fn eth_link(speed: u32, full_duplex: bool, autoneg: bool, up: bool) -> sys::rte_eth_link {
    let mut l = sys::rte_eth_link::default();
    #[cfg(dpdk_link_union)]
    // SAFETY: the union is zeroed; writing the struct arm's fields is the
    // C code's own way of building it (val64 is only for atomic copies).
    let f = unsafe { &mut l.__bindgen_anon_1.__bindgen_anon_1 };
    #[cfg(not(dpdk_link_union))]
    let f = &mut l;
    f.link_speed = speed;
    f.set_link_duplex(u16::from(full_duplex));
    f.set_link_autoneg(u16::from(autoneg));
    f.set_link_status(u16::from(up));
    l
}

/// The fields of an `rte_eth_link`.
pub fn link_fields(l: &sys::rte_eth_link) -> (u32, bool, bool, bool) {
    #[cfg(dpdk_link_union)]
    // SAFETY: every bit pattern of the union's 64 bits is a valid struct.
    let f = unsafe { &l.__bindgen_anon_1.__bindgen_anon_1 };
    #[cfg(not(dpdk_link_union))]
    let f = l;
    (
        f.link_speed,
        f.link_duplex() != 0,
        f.link_autoneg() != 0,
        f.link_status() != 0,
    )
}

/// A PCI driver object with the given members and every other one zero
/// (the bus's list links, which 26.07 moved out of `rte_pci_driver`, and
/// the `bus` back-pointer `rte_driver` gained in 26.07, both set by
/// `rte_pci_register`).
pub const fn pci_driver(
    name: &'static core::ffi::CStr,
    probe: sys::rte_pci_probe_t,
    remove: sys::rte_pci_remove_t,
    id_table: *const sys::rte_pci_id,
    drv_flags: u32,
) -> sys::rte_pci_driver {
    // SAFETY: rte_pci_driver holds pointers, optional function pointers and
    // integers, for all of which all-zero bytes are a valid value (null,
    // None, 0).
    let mut d: sys::rte_pci_driver = unsafe { core::mem::zeroed() };
    d.driver.name = name.as_ptr();
    d.probe = probe;
    d.remove = remove;
    d.id_table = id_table;
    d.drv_flags = drv_flags;
    d
}

const NQ: usize = sys::RTE_ETHDEV_QUEUE_STAT_CNTRS as usize;

/// Per-queue counters of `stats_get`, for the first
/// `RTE_ETHDEV_QUEUE_STAT_CNTRS` queues; [`stats_get_op!`] copies them to
/// wherever this DPDK wants them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueStats {
    pub ipackets: [u64; NQ],
    pub opackets: [u64; NQ],
    pub ibytes: [u64; NQ],
    pub obytes: [u64; NQ],
    pub errors: [u64; NQ],
}

impl Default for QueueStats {
    fn default() -> Self {
        QueueStats {
            ipackets: [0; NQ],
            opackets: [0; NQ],
            ibytes: [0; NQ],
            obytes: [0; NQ],
            errors: [0; NQ],
        }
    }
}

impl QueueStats {
    /// Writes the counters into the `q_*` arrays of `s` (a
    /// `struct rte_eth_stats` before 25.11, a `struct eth_queue_stats` from
    /// 25.11 on: the same five arrays).
    #[doc(hidden)]
    pub fn store_into(&self, q: &mut impl QueueArrays) {
        let (ip, op, ib, ob, er) = q.arrays();
        *ip = self.ipackets;
        *op = self.opackets;
        *ib = self.ibytes;
        *ob = self.obytes;
        *er = self.errors;
    }
}

/// The struct holding DPDK's per-queue counter arrays.
#[doc(hidden)]
pub trait QueueArrays {
    #[allow(clippy::type_complexity)]
    fn arrays(
        &mut self,
    ) -> (
        &mut [u64; NQ],
        &mut [u64; NQ],
        &mut [u64; NQ],
        &mut [u64; NQ],
        &mut [u64; NQ],
    );
}

macro_rules! queue_arrays {
    ($t:ty) => {
        impl QueueArrays for $t {
            fn arrays(
                &mut self,
            ) -> (
                &mut [u64; NQ],
                &mut [u64; NQ],
                &mut [u64; NQ],
                &mut [u64; NQ],
                &mut [u64; NQ],
            ) {
                (
                    &mut self.q_ipackets,
                    &mut self.q_opackets,
                    &mut self.q_ibytes,
                    &mut self.q_obytes,
                    &mut self.q_errors,
                )
            }
        }
    };
}
#[cfg(dpdk_queue_stats)]
queue_arrays!(sys::eth_queue_stats);
#[cfg(not(dpdk_queue_stats))]
queue_arrays!(sys::rte_eth_stats);

/// The `stats_get` op from
/// `unsafe fn(dev: *mut rte_eth_dev, s: &mut rte_eth_stats, q: &mut QueueStats) -> c_int`.
macro_rules! stats_get_op {
    ($f:path) => {{
        #[cfg(dpdk_queue_stats)]
        unsafe extern "C" fn op(
            dev: *mut $crate::ffi::rte_eth_dev,
            s: *mut $crate::ffi::rte_eth_stats,
            qs: *mut $crate::ffi::eth_queue_stats,
        ) -> ::core::ffi::c_int {
            let mut q = $crate::ffi::compat::QueueStats::default();
            // SAFETY: ethdev passes a zeroed stats struct, and a zeroed
            // queue stats struct or NULL when the caller wants none.
            unsafe {
                let r = $f(dev, &mut *s, &mut q);
                if let Some(qs) = qs.as_mut() {
                    q.store_into(qs);
                }
                r
            }
        }
        #[cfg(not(dpdk_queue_stats))]
        unsafe extern "C" fn op(
            dev: *mut $crate::ffi::rte_eth_dev,
            s: *mut $crate::ffi::rte_eth_stats,
        ) -> ::core::ffi::c_int {
            let mut q = $crate::ffi::compat::QueueStats::default();
            // SAFETY: ethdev passes a zeroed stats struct; the per-queue
            // arrays are written after `$f` let go of it.
            unsafe {
                let r = $f(dev, &mut *s, &mut q);
                q.store_into(&mut *s);
                r
            }
        }
        Some(op)
    }};
}
pub(crate) use stats_get_op;

/// The `dev_supported_ptypes_get` op from `fn(dev) -> &'static [u32]` (the
/// list without its `RTE_PTYPE_UNKNOWN` terminator, which must follow it in
/// memory for releases before 24.03: pass a slice of a terminated array).
macro_rules! ptypes_get_op {
    ($f:path) => {{
        #[cfg(dpdk_ptypes_count)]
        unsafe extern "C" fn op(dev: *mut $crate::ffi::rte_eth_dev, n: *mut usize) -> *const u32 {
            let list: &'static [u32] = $f(dev);
            // SAFETY: ethdev passes a valid count to fill.
            unsafe { *n = list.len() };
            list.as_ptr()
        }
        #[cfg(not(dpdk_ptypes_count))]
        unsafe extern "C" fn op(dev: *mut $crate::ffi::rte_eth_dev) -> *const u32 {
            let list: &'static [u32] = $f(dev);
            list.as_ptr()
        }
        Some(op)
    }};
}
pub(crate) use ptypes_get_op;

/// The fast-path `rx_queue_count` from `unsafe extern "C" fn(*mut c_void) -> u32`.
macro_rules! rx_queue_count_op {
    ($f:path) => {{
        #[cfg(dpdk_rx_queue_count_int)]
        unsafe extern "C" fn op(q: *mut ::core::ffi::c_void) -> ::core::ffi::c_int {
            // SAFETY: forwards DPDK's queue pointer unchanged.
            let n: u32 = unsafe { $f(q) };
            n.min(::core::ffi::c_int::MAX as u32) as ::core::ffi::c_int
        }
        #[cfg(not(dpdk_rx_queue_count_int))]
        let op = $f;
        Some(op)
    }};
}
pub(crate) use rx_queue_count_op;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_is_read_back_as_built() {
        for (speed, fd, an, up) in [(100_000, true, false, true), (0, false, true, false)] {
            assert_eq!(
                link_fields(&eth_link(speed, fd, an, up)),
                (speed, fd, an, up)
            );
        }
    }

    #[test]
    fn queue_counters_land_in_the_queue_arrays() {
        let mut q = QueueStats::default();
        q.ipackets[0] = 1;
        q.ibytes[1] = 2;
        q.opackets[2] = 3;
        q.obytes[3] = 4;
        q.errors[NQ - 1] = 5;
        #[cfg(dpdk_queue_stats)]
        let mut s = sys::eth_queue_stats::default();
        #[cfg(not(dpdk_queue_stats))]
        let mut s = sys::rte_eth_stats::default();
        q.store_into(&mut s);
        assert_eq!(
            (
                s.q_ipackets[0],
                s.q_ibytes[1],
                s.q_opackets[2],
                s.q_obytes[3],
                s.q_errors[NQ - 1]
            ),
            (1, 2, 3, 4, 5)
        );
        assert_eq!(s.q_ipackets[1..], [0; NQ - 1]);
    }

    #[test]
    fn the_page_size_is_the_systems() {
        // SAFETY: sysconf has no preconditions.
        let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        assert_eq!(page_size() as i64, n as i64);
        assert!(page_size().is_power_of_two());
    }
}

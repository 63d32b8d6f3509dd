//! What the receive and transmit queues have in common, for the control
//! code that sets them up and tears them down: their memory, their gate,
//! and the rule for touching the state a burst owns from outside a burst.
//!
//! A queue lives in DPDK shared memory (so secondary processes run its
//! bursts) and holds plain data. Its burst state sits in an `UnsafeCell`
//! and is reached two ways only: by the burst holding the gate's pass, or
//! by control code holding the port's [`ControlToken`] while the gate is
//! closed. Everything else about a queue (its configuration, counters,
//! offloads) is read through shared references at any time.

use super::gate::Gate;
use crate::ffi;
use std::ffi::{c_int, c_void, CStr};
use std::ptr::NonNull;

/// Proof of being the one control path of a port: it lives in the port's
/// control state, so a `&mut ControlToken` exists only under the control
/// lock, and there is one per port.
pub struct ControlToken(());

impl ControlToken {
    /// # Safety
    /// At most one token per port, reachable only under its control lock.
    pub unsafe fn new() -> ControlToken {
        ControlToken(())
    }
}

/// Where a queue's rings stand, read between two bursts (for explaining a
/// stall): positions in bytes, as the doorbells announce them, so they
/// compare with what the device reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingView {
    /// What the driver has posted (the last doorbell's tail).
    pub wq_producer: u32,
    /// What the driver has seen completed.
    pub wq_consumer: u32,
    /// Completions taken from the CQ so far (its consumer index).
    pub cq_head: u32,
    /// Buffers posted (rx) or sends in flight (tx).
    pub held: u32,
}

/// A receive or transmit queue, as control code handles it.
pub trait DataQueue {
    const KIND: &'static str;
    fn gate(&self) -> &Gate;
    fn nb_desc(&self) -> u16;
    fn socket(&self) -> c_int;
    /// Set up with deferred start: stays stopped when the port starts.
    fn deferred_start(&self) -> bool;
    /// Drops every buffer the queue holds and frees its memory.
    ///
    /// # Safety
    /// `q` came from the queue's `alloc`, its gate is closed and it is not
    /// used afterwards.
    unsafe fn free(q: NonNull<Self>);
}

/// Zeroed memory on `socket` for a queue `Q` and its `n` descriptors `D`:
/// both or neither.
pub fn alloc_queue_mem<Q, D>(name: &CStr, n: usize, socket: c_int) -> Option<(*mut Q, *mut D)> {
    // SAFETY: plain allocations; both results are checked.
    unsafe {
        let q = ffi::rte_zmalloc_socket(name.as_ptr(), std::mem::size_of::<Q>(), 64, socket);
        let d = ffi::rte_zmalloc_socket(name.as_ptr(), std::mem::size_of::<D>() * n, 64, socket);
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
/// `q` holds an initialised `Q` and `desc` is its descriptor array; neither
/// is used afterwards.
pub unsafe fn free_queue_mem<Q, D>(q: *mut Q, desc: *mut D) {
    // SAFETY: `q` is initialised and ours (caller), so it may be dropped in
    // place; both blocks came from rte_zmalloc_socket.
    unsafe {
        std::ptr::drop_in_place(q);
        ffi::rte_free(desc as *mut c_void);
        ffi::rte_free(q as *mut c_void);
    }
}

//! Memory registration. The device checks every SGE against a registered
//! region (lkey), so each mbuf's buffer must lie in one.
//!
//! At start the driver registers the memory of every mempool in the process
//! (and of mempools created later, through the mempool event callback), so
//! the data path normally only looks up a small per-queue cache. A miss (an
//! external buffer, a pool created before the callback) takes the port's
//! registry lock once and registers the buffer's pages.

use crate::control::port::{Device, Port};
use crate::control::state::mr_registry::Registry;
use crate::ffi;
use std::ffi::c_void;

/// Registers every mempool's memory on the device's PD, so the data path
/// only ever looks up its per-queue cache.
pub fn register_all_pools(p: &Port, dev: &Device) {
    let mut reg = p.mr.lock();
    reg.attach(&dev.pd, p.limits.max_mr_size);
    // SAFETY: walks the process's mempools synchronously; the callback
    // gets the registry we hold locked.
    unsafe {
        ffi::rte_mempool_walk(
            Some(register_pool),
            &mut *reg as *mut Registry as *mut c_void,
        )
    };
}

unsafe extern "C" fn register_pool(mp: *mut ffi::rte_mempool, arg: *mut c_void) {
    // SAFETY: `arg` is the locked registry `register_all_pools` passed, for
    // the duration of the walk.
    let reg = unsafe { &mut *(arg as *mut Registry) };
    reg.register_mempool(mp);
}

//! Completion channels and CQs (rdma-core `providers/mana/cq.c`): CQ
//! buffers from the manadv allocator (or mmap with `rdma_core = "modern"`),
//! CQ events on the channel fd, and the `poll_cq` / `req_notify_cq` ops.

use super::context::ectx;
use super::errno_null;
use super::manadv::{alloc_buf, free_buf};
use crate::config::RdmaCoreLimits;
use crate::device::{Errno, Res, Shared};
use crate::ffi::*;
use crate::mem::Region;
use std::ffi::{c_int, c_void};
use std::mem::zeroed;
use std::ptr::{null, null_mut};
use std::sync::Arc;

#[repr(C)]
pub(super) struct EmuCq {
    pub(super) cq: ibv_cq,
    pub(super) handle: u32,
    pub(super) internal: bool,
}

#[repr(C)]
struct EmuChannel {
    pub(super) ch: ibv_comp_channel,
    pub(super) handle: u32,
    pub(super) sh: Arc<Shared>,
}

fn mmap_buf(size: usize) -> Res<Region> {
    // SAFETY: anonymous private mapping.
    let p = unsafe {
        libc::mmap(
            null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(Errno(libc::ENOMEM));
    }
    // SAFETY: fresh mapping of `size` bytes, unmapped only in destroy_cq.
    Ok(unsafe { Region::new(p as usize, size) })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_create_comp_channel(
    context: *mut ibv_context,
) -> *mut ibv_comp_channel {
    // SAFETY: a context from ibv_open_device.
    let c = unsafe { ectx(context) };
    let (h, fd) = match c.sh.st.lock().unwrap().create_channel() {
        Ok(x) => x,
        Err(e) => return errno_null(e),
    };
    Box::into_raw(Box::new(EmuChannel {
        ch: ibv_comp_channel {
            context,
            fd,
            refcnt: 0,
        },
        handle: h,
        sh: c.sh.clone(),
    }))
    .cast()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_comp_channel(channel: *mut ibv_comp_channel) -> c_int {
    // SAFETY: a channel from ibv_create_comp_channel.
    let ch = unsafe { &*(channel as *mut EmuChannel) };
    if ch.ch.refcnt != 0 {
        return libc::EBUSY;
    }
    match ch.sh.st.lock().unwrap().destroy_channel(ch.handle) {
        Ok(()) => {
            // SAFETY: reclaiming our Box.
            drop(unsafe { Box::from_raw(channel as *mut EmuChannel) });
            0
        }
        Err(e) => e.0,
    }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_create_cq(
    context: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    comp_vector: c_int,
) -> *mut ibv_cq {
    // SAFETY: a context from ibv_open_device.
    let c = unsafe { ectx(context) };
    if comp_vector < 0 || comp_vector >= c.vctx.context.num_comp_vectors || cqe <= 0 {
        return errno_null(Errno(libc::EINVAL));
    }
    let cqe = cqe as u32;
    if let Err(e) = c.sh.st.lock().unwrap().check_cq(c.handle, cqe) {
        return errno_null(e);
    }
    let size = crate::device::cq_buffer_size(cqe);
    let modern = c.sh.cfg.options.rdma_core() == RdmaCoreLimits::Modern;
    let has_alloc = c.alloc.lock().unwrap().is_some();
    let (buf, internal) = if has_alloc {
        match alloc_buf(c, size) {
            Ok(b) => (b, false),
            Err(e) => return errno_null(e),
        }
    } else if modern {
        match mmap_buf(size) {
            Ok(b) => (b, true),
            Err(e) => return errno_null(e),
        }
    } else {
        // libmana v44: "Allocating core buffers for CQ is not supported".
        return errno_null(Errno(libc::EINVAL));
    };
    let ch_handle = if channel.is_null() {
        None
    } else {
        // SAFETY: a channel from ibv_create_comp_channel.
        Some(unsafe { (*(channel as *mut EmuChannel)).handle })
    };
    // SAFETY: plain data; initialised like verbs_init_cq.
    let mut cq: ibv_cq = unsafe { zeroed() };
    cq.context = context;
    cq.channel = channel;
    cq.cq_context = cq_context;
    cq.cqe = cqe as c_int;
    let b = Box::into_raw(Box::new(EmuCq {
        cq,
        handle: 0,
        internal,
    }));
    let r =
        c.sh.st
            .lock()
            .unwrap()
            .create_cq(c.handle, cqe, buf, ch_handle, b as usize);
    match r {
        Ok(h) => {
            // SAFETY: b is our fresh allocation.
            unsafe {
                (*b).handle = h;
                (*b).cq.handle = h;
                libc::pthread_mutex_init(
                    &mut (*b).cq.mutex as *mut _ as *mut libc::pthread_mutex_t,
                    null(),
                );
                libc::pthread_cond_init(
                    &mut (*b).cq.cond as *mut _ as *mut libc::pthread_cond_t,
                    null(),
                );
                if !channel.is_null() {
                    (*channel).refcnt += 1;
                }
            }
            b.cast()
        }
        Err(e) => {
            // SAFETY: reclaiming our Box; freeing the buffer we allocated.
            drop(unsafe { Box::from_raw(b) });
            if internal {
                // SAFETY: our own mapping.
                unsafe { libc::munmap(buf.addr() as *mut c_void, buf.len()) };
            } else {
                free_buf(c, buf);
            }
            errno_null(e)
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_cq(cq: *mut ibv_cq) -> c_int {
    // SAFETY: a CQ from ibv_create_cq.
    let q = unsafe { &*(cq as *mut EmuCq) };
    // SAFETY: its context is open.
    let c = unsafe { ectx(q.cq.context) };
    let r = c.sh.st.lock().unwrap().destroy_cq(q.handle);
    match r {
        Ok(buf) => {
            // The device lock was taken and the CQ removed: the device
            // thread will not touch `buf` again.
            if q.internal {
                // SAFETY: our own mapping.
                unsafe { libc::munmap(buf.addr() as *mut c_void, buf.len()) };
            } else {
                free_buf(c, buf);
            }
            if !q.cq.channel.is_null() {
                // SAFETY: the channel outlives its CQs.
                unsafe { (*q.cq.channel).refcnt -= 1 };
            }
            // SAFETY: reclaiming our Box.
            drop(unsafe { Box::from_raw(cq as *mut EmuCq) });
            0
        }
        Err(e) => e.0,
    }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_get_cq_event(
    channel: *mut ibv_comp_channel,
    cq: *mut *mut ibv_cq,
    cq_context: *mut *mut c_void,
) -> c_int {
    let mut b = [0u8; 8];
    // SAFETY: reading the channel fd (ours) into an 8-byte buffer.
    let n = unsafe { libc::read((*channel).fd, b.as_mut_ptr().cast(), 8) };
    if n != 8 {
        return -1; // errno from read (EAGAIN on a non-blocking fd)
    }
    let p = u64::from_le_bytes(b) as usize as *mut ibv_cq;
    // SAFETY: the device writes the ibv_cq pointer of a live CQ.
    unsafe {
        *cq = p;
        *cq_context = (*p).cq_context;
    }
    0
}

#[no_mangle]
pub unsafe extern "C" fn ibv_ack_cq_events(cq: *mut ibv_cq, nevents: u32) {
    // SAFETY: a CQ from ibv_create_cq.
    unsafe {
        let m = &mut (*cq).mutex as *mut _ as *mut libc::pthread_mutex_t;
        libc::pthread_mutex_lock(m);
        (*cq).comp_events_completed += nevents;
        libc::pthread_mutex_unlock(m);
    }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_resize_cq(_cq: *mut ibv_cq, _cqe: c_int) -> c_int {
    libc::EOPNOTSUPP
}

/// libmana v44 returns a positive EOPNOTSUPP from poll_cq: the data path
/// is the driver's own.
pub(super) unsafe extern "C" fn op_poll_cq(_cq: *mut ibv_cq, _n: c_int, _wc: *mut ibv_wc) -> c_int {
    libc::EOPNOTSUPP
}

/// Arms the CQ: the next CQE posts an event on its completion channel.
pub(super) unsafe extern "C" fn op_req_notify_cq(cq: *mut ibv_cq, _solicited_only: c_int) -> c_int {
    // SAFETY: our CQ.
    let q = unsafe { &*(cq as *mut EmuCq) };
    // SAFETY: its context is open.
    let c = unsafe { ectx(q.cq.context) };
    let r = c.sh.st.lock().unwrap().arm_cq(q.handle);
    match r {
        Ok(()) => 0,
        Err(e) => e.0,
    }
}

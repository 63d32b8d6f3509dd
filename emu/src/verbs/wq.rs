//! Receive WQs and RSS indirection tables (rdma-core
//! `providers/mana/wq.c`), reached through the `verbs_context` slots.

use super::context::{ectx, EmuPd};
use super::cq::EmuCq;
use super::errno_null;
use super::manadv::{alloc_buf, free_buf};
use crate::device::Errno;
use crate::ffi::*;
use std::ffi::c_int;
use std::mem::zeroed;

#[repr(C)]
pub(super) struct EmuWq {
    pub(super) wq: ibv_wq,
    pub(super) handle: u32,
}

#[repr(C)]
pub(super) struct EmuInd {
    pub(super) t: ibv_rwq_ind_table,
    pub(super) handle: u32,
}

pub(super) unsafe extern "C" fn slot_create_wq(
    context: *mut ibv_context,
    a: *mut ibv_wq_init_attr,
) -> *mut ibv_wq {
    // SAFETY: a context from ibv_open_device; caller-provided attr.
    let (c, a) = unsafe { (ectx(context), &*a) };
    if a.wq_type != IBV_WQT_RQ || a.pd.is_null() || a.cq.is_null() {
        return errno_null(Errno(libc::EINVAL));
    }
    // SAFETY: PD and CQ objects of ours.
    let (pd, cq) = unsafe { (&*(a.pd as *mut EmuPd), &*(a.cq as *mut EmuCq)) };
    if let Err(e) =
        c.sh.st
            .lock()
            .unwrap()
            .check_wq(c.handle, pd.handle, a.max_wr, a.max_sge)
    {
        return errno_null(e);
    }
    let buf = match alloc_buf(c, crate::device::rq_buffer_size(a.max_wr, a.max_sge)) {
        Ok(b) => b,
        Err(e) => return errno_null(e),
    };
    let r =
        c.sh.st
            .lock()
            .unwrap()
            .create_wq(c.handle, pd.handle, cq.handle, a.max_wr, a.max_sge, buf);
    match r {
        Ok(h) => {
            // SAFETY: plain data; the inline wrapper fills wq_context/mutex/cond.
            let mut wq: ibv_wq = unsafe { zeroed() };
            wq.context = context;
            wq.pd = a.pd;
            wq.cq = a.cq;
            wq.wq_num = h;
            wq.handle = h;
            wq.state = IBV_WQS_RDY;
            wq.wq_type = IBV_WQT_RQ;
            Box::into_raw(Box::new(EmuWq { wq, handle: h })).cast()
        }
        Err(e) => {
            free_buf(c, buf);
            errno_null(e)
        }
    }
}

pub(super) unsafe extern "C" fn slot_destroy_wq(wq: *mut ibv_wq) -> c_int {
    // SAFETY: a WQ from create_wq.
    let w = unsafe { &*(wq as *mut EmuWq) };
    // SAFETY: its context is open.
    let c = unsafe { ectx(w.wq.context) };
    let r = c.sh.st.lock().unwrap().destroy_wq(w.handle);
    match r {
        Ok(buf) => {
            free_buf(c, buf);
            // SAFETY: reclaiming our Box.
            drop(unsafe { Box::from_raw(wq as *mut EmuWq) });
            0
        }
        Err(e) => e.0,
    }
}

pub(super) unsafe extern "C" fn slot_modify_wq(_wq: *mut ibv_wq, _attr: *mut ibv_wq_attr) -> c_int {
    libc::EOPNOTSUPP
}

pub(super) unsafe extern "C" fn slot_create_rwq_ind_table(
    context: *mut ibv_context,
    a: *mut ibv_rwq_ind_table_init_attr,
) -> *mut ibv_rwq_ind_table {
    // SAFETY: a context from ibv_open_device; caller-provided attr.
    let (c, a) = unsafe { (ectx(context), &*a) };
    if a.log_ind_tbl_size > 6 || a.ind_tbl.is_null() {
        return errno_null(Errno(libc::EINVAL));
    }
    let n = 1usize << a.log_ind_tbl_size;
    let mut wqs = Vec::with_capacity(n);
    for i in 0..n {
        // SAFETY: the caller's table has 2^log entries of our WQs.
        let w = unsafe { *a.ind_tbl.add(i) };
        if w.is_null() {
            return errno_null(Errno(libc::EINVAL));
        }
        // SAFETY: a WQ from create_wq.
        wqs.push(unsafe { (*(w as *mut EmuWq)).handle });
    }
    let r =
        c.sh.st
            .lock()
            .unwrap()
            .create_ind_table(c.handle, wqs, a.log_ind_tbl_size);
    match r {
        Ok(h) => Box::into_raw(Box::new(EmuInd {
            t: ibv_rwq_ind_table {
                context,
                ind_tbl_handle: h as c_int,
                ind_tbl_num: h as c_int,
                comp_mask: 0,
            },
            handle: h,
        }))
        .cast(),
        Err(e) => errno_null(e),
    }
}

pub(super) unsafe extern "C" fn slot_destroy_rwq_ind_table(t: *mut ibv_rwq_ind_table) -> c_int {
    // SAFETY: a table from create_rwq_ind_table.
    let it = unsafe { &*(t as *mut EmuInd) };
    // SAFETY: its context is open.
    let c = unsafe { ectx(it.t.context) };
    match c.sh.st.lock().unwrap().destroy_ind_table(it.handle) {
        Ok(()) => {
            // SAFETY: reclaiming our Box.
            drop(unsafe { Box::from_raw(t as *mut EmuInd) });
            0
        }
        Err(e) => e.0,
    }
}

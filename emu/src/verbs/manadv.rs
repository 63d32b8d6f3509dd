//! The manadv extensions (rdma-core `providers/mana/manadv.c`): the
//! application's queue-buffer allocators, and `manadv_init_obj`, which
//! hands a PMD the queue buffers, ids and doorbell page.

use super::context::{ectx, EmuContext};
use super::cq::EmuCq;
use super::qp::EmuQp;
use super::wq::EmuWq;
use crate::device::{Errno, Res};
use crate::ffi::*;
use crate::mem::Region;
use std::ffi::{c_int, c_void};

#[no_mangle]
pub unsafe extern "C" fn manadv_set_context_attr(
    ibv_ctx: *mut ibv_context,
    type_: manadv_set_ctx_attr_type,
    attr: *mut c_void,
) -> c_int {
    // SAFETY: a context from ibv_open_device.
    let c = unsafe { ectx(ibv_ctx) };
    if type_ != MANADV_CTX_ATTR_BUF_ALLOCATORS {
        eprintln!("mana-emu: Unsupported context type {type_}");
        return libc::EOPNOTSUPP;
    }
    // SAFETY: the caller passes a struct manadv_ctx_allocators (copied by value).
    let a = unsafe { *(attr as *const manadv_ctx_allocators) };
    *c.alloc.lock().unwrap() = Some(a);
    0
}

/// Allocates a queue buffer through the context's current allocator.
pub(super) fn alloc_buf(c: &EmuContext, size: usize) -> Res<Region> {
    let a = (*c.alloc.lock().unwrap()).ok_or(Errno(libc::EINVAL))?;
    let f = a.alloc.ok_or(Errno(libc::EINVAL))?;
    // SAFETY: calling the application's allocator as manadv documents.
    let p = unsafe { f(size, a.data) };
    if p.is_null() {
        return Err(Errno(libc::ENOMEM));
    }
    // SAFETY: the allocator returned `size` bytes owned by us until `free`.
    Ok(unsafe { Region::new(p as usize, size) })
}

/// Frees through the allocator current *at destroy time* (as libmana does).
pub(super) fn free_buf(c: &EmuContext, r: Region) {
    if let Some(a) = *c.alloc.lock().unwrap() {
        if let Some(f) = a.free {
            // SAFETY: returning a buffer obtained from this allocator family.
            unsafe { f(r.addr() as *mut c_void, a.data) };
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn manadv_init_obj(obj: *mut manadv_obj, obj_type: u64) -> c_int {
    let all = u64::from(MANADV_OBJ_QP | MANADV_OBJ_CQ | MANADV_OBJ_RWQ);
    if obj_type & !all != 0 {
        return libc::EINVAL;
    }
    // SAFETY: caller-provided manadv_obj with valid in/out pointers for
    // each requested type.
    let o = unsafe { &mut *obj };
    if obj_type & u64::from(MANADV_OBJ_QP) != 0 {
        // SAFETY: our QP.
        let q = unsafe { &*(o.qp.in_ as *mut EmuQp) };
        // SAFETY: its context is open.
        let c = unsafe { ectx(q.qp.context) };
        let st = c.sh.st.lock().unwrap();
        let Some((buf, count, id)) = q.sq.and_then(|s| st.wq_info(s)) else {
            return libc::EINVAL;
        };
        // SAFETY: caller-provided out struct.
        let out = unsafe { &mut *o.qp.out };
        out.sq_buf = buf.addr() as *mut c_void;
        out.sq_count = count;
        out.sq_size = buf.len() as u32;
        out.sq_id = id;
        out.tx_vp_offset = q.tx_vp_offset;
        out.db_page = st.ctx_db_page(c.handle).unwrap_or(0) as *mut c_void;
    }
    if obj_type & u64::from(MANADV_OBJ_CQ) != 0 {
        // SAFETY: our CQ.
        let q = unsafe { &*(o.cq.in_ as *mut EmuCq) };
        // SAFETY: its context is open.
        let c = unsafe { ectx(q.cq.context) };
        let st = c.sh.st.lock().unwrap();
        let Some((buf, count, id)) = st.cq_info(q.handle) else {
            return libc::EINVAL;
        };
        // SAFETY: caller-provided out struct.
        let out = unsafe { &mut *o.cq.out };
        out.buf = buf.addr() as *mut c_void;
        out.count = count;
        out.cq_id = id;
    }
    if obj_type & u64::from(MANADV_OBJ_RWQ) != 0 {
        // SAFETY: our WQ.
        let w = unsafe { &*(o.rwq.in_ as *mut EmuWq) };
        // SAFETY: its context is open.
        let c = unsafe { ectx(w.wq.context) };
        let st = c.sh.st.lock().unwrap();
        let Some((buf, count, id)) = st.wq_info(w.handle) else {
            return libc::EINVAL;
        };
        // SAFETY: caller-provided out struct.
        let out = unsafe { &mut *o.rwq.out };
        out.buf = buf.addr() as *mut c_void;
        out.count = count;
        out.size = buf.len() as u32;
        out.wq_id = id;
        out.db_page = st.ctx_db_page(c.handle).unwrap_or(0) as *mut c_void;
    }
    0
}

//! QPs (rdma-core `providers/mana/qp.c`): the RAW send QP on a parent
//! domain (`ibv_create_qp`) and the RSS receive QP (`create_qp_ex` slot);
//! the `post_*` ops, which MANA leaves to the PMD (`wr.c`).

use super::context::{ectx, EmuPd};
use super::cq::EmuCq;
use super::manadv::{alloc_buf, free_buf};
use super::wq::EmuInd;
use super::{errno_null, verbose};
use crate::device::{Errno, HashConf};
use crate::ffi::*;
use std::ffi::{c_int, c_void};
use std::mem::zeroed;
use std::ptr::{null, null_mut};

#[repr(C)]
pub(super) struct EmuQp {
    pub(super) qp: ibv_qp,
    pub(super) handle: u32,
    pub(super) sq: Option<u32>,
    pub(super) tx_vp_offset: u32,
}

fn new_qp(
    context: *mut ibv_context,
    a_qp_context: *mut c_void,
    pd: *mut ibv_pd,
    send_cq: *mut ibv_cq,
    recv_cq: *mut ibv_cq,
    h: u32,
) -> ibv_qp {
    // SAFETY: plain data.
    let mut qp: ibv_qp = unsafe { zeroed() };
    qp.context = context;
    qp.qp_context = a_qp_context;
    qp.pd = pd;
    qp.send_cq = send_cq;
    qp.recv_cq = recv_cq;
    qp.handle = h;
    qp.qp_num = h;
    qp.state = IBV_QPS_RESET;
    qp.qp_type = IBV_QPT_RAW_PACKET;
    qp
}

unsafe fn init_qp_sync(qp: *mut EmuQp) {
    // SAFETY: qp is our fresh allocation.
    unsafe {
        libc::pthread_mutex_init(
            &mut (*qp).qp.mutex as *mut _ as *mut libc::pthread_mutex_t,
            null(),
        );
        libc::pthread_cond_init(
            &mut (*qp).qp.cond as *mut _ as *mut libc::pthread_cond_t,
            null(),
        );
    }
}

/// RAW_PACKET send QP on a parent domain (`mana_create_qp_raw`).
#[no_mangle]
pub unsafe extern "C" fn ibv_create_qp(pd: *mut ibv_pd, a: *mut ibv_qp_init_attr) -> *mut ibv_qp {
    // SAFETY: our PD; caller-provided attr.
    let (p, a) = unsafe { (&*(pd as *mut EmuPd), &*a) };
    let context = p.pd.context;
    // SAFETY: the PD's context is open.
    let c = unsafe { ectx(context) };
    if a.qp_type != IBV_QPT_RAW_PACKET || a.send_cq.is_null() {
        return errno_null(Errno(libc::EINVAL));
    }
    // SAFETY: our CQ.
    let send_cq = unsafe { &*(a.send_cq as *mut EmuCq) };
    let (wr, sge) = (a.cap.max_send_wr, a.cap.max_send_sge);
    if let Err(e) =
        c.sh.st
            .lock()
            .unwrap()
            .check_raw_qp(c.handle, p.handle, wr, sge)
    {
        return errno_null(e);
    }
    let buf = match alloc_buf(c, crate::device::sq_buffer_size(wr, sge)) {
        Ok(b) => b,
        Err(e) => return errno_null(e),
    };
    let r =
        c.sh.st
            .lock()
            .unwrap()
            .create_raw_qp(c.handle, p.handle, send_cq.handle, wr, sge, buf);
    match r {
        Ok(info) => {
            let qp = new_qp(context, a.qp_context, pd, a.send_cq, a.recv_cq, info.qp);
            let b = Box::into_raw(Box::new(EmuQp {
                qp,
                handle: info.qp,
                sq: Some(info.sq),
                tx_vp_offset: info.tx_vp_offset,
            }));
            // SAFETY: fresh allocation.
            unsafe { init_qp_sync(b) };
            if verbose(&c.sh) {
                eprintln!(
                    "mana-emu: raw qp sq_id {:#x} cq_id {:#x} vp {}",
                    info.sq_id, info.cq_id, info.tx_vp_offset
                );
            }
            b.cast()
        }
        Err(e) => {
            free_buf(c, buf);
            errno_null(e)
        }
    }
}

/// `ibv_create_qp_ex` slot: RAW_PACKET RSS receive QP (`mana_create_qp_ex_raw`).
pub(super) unsafe extern "C" fn slot_create_qp_ex(
    context: *mut ibv_context,
    a: *mut ibv_qp_init_attr_ex,
) -> *mut ibv_qp {
    // SAFETY: a context from ibv_open_device; caller-provided attr.
    let (c, a) = unsafe { (ectx(context), &*a) };
    if a.qp_type != IBV_QPT_RAW_PACKET {
        return errno_null(Errno(libc::EINVAL));
    }
    let need = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_RX_HASH | IBV_QP_INIT_ATTR_IND_TABLE;
    if a.comp_mask & need != need || a.pd.is_null() || a.rwq_ind_tbl.is_null() {
        // A send QP through create_qp_ex: only with exactly comp_mask == PD,
        // which the inline wrapper already routes to ibv_create_qp.
        return errno_null(Errno(libc::EINVAL));
    }
    let h = &a.rx_hash_conf;
    if h.rx_hash_key_len as usize != crate::wire::HASH_KEY_SIZE || h.rx_hash_key.is_null() {
        return errno_null(Errno(libc::EINVAL));
    }
    // SAFETY: 40 key bytes provided by the caller.
    let key = unsafe { std::slice::from_raw_parts(h.rx_hash_key, 40) }.to_vec();
    let hash = HashConf {
        key,
        fields: h.rx_hash_fields_mask,
        toeplitz: u32::from(h.rx_hash_function) == IBV_RX_HASH_FUNC_TOEPLITZ,
    };
    // SAFETY: our PD and table.
    let (pd, t) = unsafe { (&*(a.pd as *mut EmuPd), &*(a.rwq_ind_tbl as *mut EmuInd)) };
    let r =
        c.sh.st
            .lock()
            .unwrap()
            .create_rss_qp(c.handle, pd.handle, t.handle, &hash);
    match r {
        Ok(qh) => {
            let qp = new_qp(context, a.qp_context, a.pd, null_mut(), null_mut(), qh);
            let b = Box::into_raw(Box::new(EmuQp {
                qp,
                handle: qh,
                sq: None,
                tx_vp_offset: 0,
            }));
            // SAFETY: fresh allocation.
            unsafe { init_qp_sync(b) };
            b.cast()
        }
        Err(e) => errno_null(e),
    }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_qp(qp: *mut ibv_qp) -> c_int {
    // SAFETY: a QP from ibv_create_qp(_ex).
    let q = unsafe { &*(qp as *mut EmuQp) };
    // SAFETY: its context is open.
    let c = unsafe { ectx(q.qp.context) };
    let r = c.sh.st.lock().unwrap().destroy_qp(q.handle);
    match r {
        Ok(buf) => {
            if let Some(b) = buf {
                free_buf(c, b);
            }
            // SAFETY: reclaiming our Box.
            drop(unsafe { Box::from_raw(qp as *mut EmuQp) });
            0
        }
        Err(e) => e.0,
    }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_modify_qp(
    _qp: *mut ibv_qp,
    _attr: *mut ibv_qp_attr,
    _mask: c_int,
) -> c_int {
    libc::EOPNOTSUPP
}

pub(super) unsafe extern "C" fn op_post_send(
    _qp: *mut ibv_qp,
    _wr: *mut ibv_send_wr,
    bad: *mut *mut ibv_send_wr,
) -> c_int {
    if !bad.is_null() {
        // SAFETY: caller-provided out pointer.
        unsafe { *bad = _wr };
    }
    libc::EOPNOTSUPP
}

pub(super) unsafe extern "C" fn op_post_recv(
    _qp: *mut ibv_qp,
    _wr: *mut ibv_recv_wr,
    bad: *mut *mut ibv_recv_wr,
) -> c_int {
    if !bad.is_null() {
        // SAFETY: caller-provided out pointer.
        unsafe { *bad = _wr };
    }
    libc::EOPNOTSUPP
}

pub(super) unsafe extern "C" fn op_post_srq_recv(
    _srq: *mut ibv_srq,
    _wr: *mut ibv_recv_wr,
    bad: *mut *mut ibv_recv_wr,
) -> c_int {
    if !bad.is_null() {
        // SAFETY: caller-provided out pointer.
        unsafe { *bad = _wr };
    }
    libc::EOPNOTSUPP
}

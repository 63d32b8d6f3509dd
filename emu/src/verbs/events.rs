//! Async events (read from the context's async fd, written by the device
//! on a reset, removal or link change) and libibverbs' `*_str` helpers.

use crate::ffi::*;
use std::ffi::{c_char, c_int, CStr};
use std::mem::zeroed;

#[no_mangle]
pub unsafe extern "C" fn ibv_get_async_event(
    context: *mut ibv_context,
    event: *mut ibv_async_event,
) -> c_int {
    let mut b = [0u8; 16];
    // SAFETY: reading our async fd into a 16-byte buffer.
    let n = unsafe { libc::read((*context).async_fd, b.as_mut_ptr().cast(), 16) };
    if n != 16 {
        return -1; // EAGAIN on a non-blocking fd: DPDK loops until non-zero
    }
    let element = u64::from_le_bytes(b[0..8].try_into().unwrap());
    let ty = u32::from_le_bytes(b[8..12].try_into().unwrap());
    // SAFETY: caller-provided out struct; plain data.
    unsafe {
        *event = zeroed();
        (*event).event_type = ty;
        (*event).element.port_num = element as c_int;
    }
    0
}

#[no_mangle]
pub unsafe extern "C" fn ibv_ack_async_event(_event: *mut ibv_async_event) {}

#[no_mangle]
pub unsafe extern "C" fn ibv_event_type_str(event: ibv_event_type) -> *const c_char {
    let s: &CStr = match event {
        IBV_EVENT_CQ_ERR => c"CQ error",
        IBV_EVENT_QP_FATAL => c"local work queue catastrophic error",
        IBV_EVENT_QP_REQ_ERR => c"invalid request local work queue error",
        IBV_EVENT_QP_ACCESS_ERR => c"local access violation work queue error",
        IBV_EVENT_COMM_EST => c"communication established",
        IBV_EVENT_SQ_DRAINED => c"send queue drained",
        IBV_EVENT_PATH_MIG => c"path migrated",
        IBV_EVENT_PATH_MIG_ERR => c"path migration request error",
        IBV_EVENT_DEVICE_FATAL => c"local catastrophic error",
        IBV_EVENT_PORT_ACTIVE => c"port active",
        IBV_EVENT_PORT_ERR => c"port error",
        IBV_EVENT_LID_CHANGE => c"LID change",
        IBV_EVENT_PKEY_CHANGE => c"P_Key change",
        IBV_EVENT_SM_CHANGE => c"SM change",
        IBV_EVENT_SRQ_ERR => c"SRQ catastrophic error",
        IBV_EVENT_SRQ_LIMIT_REACHED => c"SRQ limit reached",
        IBV_EVENT_QP_LAST_WQE_REACHED => c"last WQE reached",
        IBV_EVENT_CLIENT_REREGISTER => c"client reregistration",
        IBV_EVENT_GID_CHANGE => c"GID table change",
        IBV_EVENT_WQ_FATAL => c"WQ fatal",
        _ => c"unknown",
    };
    s.as_ptr()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_port_state_str(state: ibv_port_state) -> *const c_char {
    let s: &CStr = match state {
        IBV_PORT_NOP => c"PORT_NOP",
        IBV_PORT_DOWN => c"PORT_DOWN",
        IBV_PORT_INIT => c"PORT_INIT",
        IBV_PORT_ARMED => c"PORT_ARMED",
        IBV_PORT_ACTIVE => c"PORT_ACTIVE",
        IBV_PORT_ACTIVE_DEFER => c"PORT_ACTIVE_DEFER",
        _ => c"invalid state",
    };
    s.as_ptr()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_node_type_str(node_type: ibv_node_type) -> *const c_char {
    let s: &CStr = if node_type == IBV_NODE_CA {
        c"InfiniBand channel adapter"
    } else {
        c"unknown"
    };
    s.as_ptr()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_wc_status_str(status: ibv_wc_status) -> *const c_char {
    let s: &CStr = if status == IBV_WC_SUCCESS {
        c"success"
    } else {
        c"general error"
    };
    s.as_ptr()
}

//! Contexts, device and port queries, PDs and MRs: what rdma-core's
//! `providers/mana/mana.c` implements (and the libibverbs entry points
//! that reach it).

use super::cq::{op_poll_cq, op_req_notify_cq};
use super::devices::EmuDevice;
use super::qp::{op_post_recv, op_post_send, op_post_srq_recv, slot_create_qp_ex};
use super::wq::{
    slot_create_rwq_ind_table, slot_create_wq, slot_destroy_rwq_ind_table, slot_destroy_wq,
    slot_modify_wq,
};
use super::{cstr_of, errno_null, fill_name, verbose};
use crate::device::{Errno, Shared};
use crate::ffi::*;
use std::ffi::{c_int, c_void};
use std::mem::{offset_of, size_of, zeroed};
use std::ptr::null;
use std::sync::{Arc, Mutex};

#[repr(C)]
pub struct EmuContext {
    pub vctx: verbs_context,
    pub(super) sh: Arc<Shared>,
    pub handle: u32,
    pub(super) alloc: Mutex<Option<manadv_ctx_allocators>>,
}

#[repr(C)]
pub(super) struct EmuPd {
    pub(super) pd: ibv_pd,
    pub(super) handle: u32,
}

#[repr(C)]
struct EmuMr {
    pub(super) mr: ibv_mr,
}

/// # Safety
/// `ctx` must be a context returned by [`ibv_open_device`].
pub(super) unsafe fn ectx<'a>(ctx: *mut ibv_context) -> &'a EmuContext {
    // SAFETY: `ctx` came from `ibv_open_device` (this function's
    // requirement), which returns `&mut (*p).vctx.context` for `p`, a leaked
    // `Box<EmuContext>` freed only by `ibv_close_device`. EmuContext is
    // `repr(C)` with `vctx` first, so stepping back by the offset of
    // `context` within `verbs_context` gives `p`, live and properly aligned.
    unsafe { &*((ctx as *mut u8).sub(offset_of!(verbs_context, context)) as *const EmuContext) }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_open_device(device: *mut ibv_device) -> *mut ibv_context {
    if device.is_null() {
        return errno_null(Errno(libc::EINVAL));
    }
    // SAFETY: a device from a list the caller holds (its reference keeps
    // the device allocated).
    let d = unsafe { &*(device as *mut EmuDevice) };
    let info = {
        let mut st = d.sh.st.lock().unwrap();
        match st.open_context(d.adapter, d.generation, d.rnic) {
            Ok(i) => i,
            Err(e) => return errno_null(e),
        }
    };
    // SAFETY: `device` is live (from a list the caller holds); the
    // context's reference, dropped by ibv_close_device.
    unsafe { super::devices::device_get(device) };
    // SAFETY: verbs_context is plain data; all-zero is its initial state.
    let mut vctx: verbs_context = unsafe { zeroed() };
    vctx.sz = size_of::<verbs_context>();
    vctx.alloc_parent_domain = Some(slot_alloc_parent_domain);
    vctx.destroy_rwq_ind_table = Some(slot_destroy_rwq_ind_table);
    vctx.create_rwq_ind_table = Some(slot_create_rwq_ind_table);
    vctx.destroy_wq = Some(slot_destroy_wq);
    vctx.modify_wq = Some(slot_modify_wq);
    vctx.create_wq = Some(slot_create_wq);
    vctx.query_device_ex = Some(slot_query_device_ex);
    vctx.create_qp_ex = Some(slot_create_qp_ex);
    vctx.query_port = Some(slot_query_port);
    let c = &mut vctx.context;
    c.device = device;
    c.cmd_fd = info.cmd_fd;
    c.async_fd = info.async_fd;
    c.num_comp_vectors = d.sh.cfg.limits.max_qp as c_int;
    c.abi_compat = usize::MAX as *mut c_void;
    c.ops.poll_cq = Some(op_poll_cq);
    c.ops.req_notify_cq = Some(op_req_notify_cq);
    c.ops.post_send = Some(op_post_send);
    c.ops.post_recv = Some(op_post_recv);
    c.ops.post_srq_recv = Some(op_post_srq_recv);
    let b = Box::new(EmuContext {
        vctx,
        sh: d.sh.clone(),
        handle: info.handle,
        alloc: Mutex::new(None),
    });
    let p = Box::into_raw(b);
    // SAFETY: p is a fresh, exclusively owned allocation.
    unsafe {
        libc::pthread_mutex_init(
            &mut (*p).vctx.context.mutex as *mut _ as *mut libc::pthread_mutex_t,
            null(),
        )
    };
    if verbose(&d.sh) {
        eprintln!(
            "mana-emu: open {} ctx {}",
            cstr_of(&d.dev.name),
            info.handle
        );
    }
    // SAFETY: p is valid.
    unsafe { &mut (*p).vctx.context }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_close_device(context: *mut ibv_context) -> c_int {
    if context.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: a context from ibv_open_device.
    let c = unsafe { ectx(context) };
    c.sh.st.lock().unwrap().close_context(c.handle);
    let device = c.vctx.context.device;
    let p = c as *const EmuContext as *mut EmuContext;
    // SAFETY: reclaiming the Box leaked in ibv_open_device; the caller must
    // not use the context afterwards.
    drop(unsafe { Box::from_raw(p) });
    // SAFETY: the reference ibv_open_device took for this context; the
    // context is gone, so nothing uses the device through it.
    unsafe { super::devices::device_put(device) };
    0
}

/// The modified EUI-64 of a MAC, as a number (most significant byte first).
fn eui64(mac: &[u8; 6]) -> u64 {
    u64::from_be_bytes([
        mac[0] ^ 2,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ])
}

/// `vendor_part_id` of 7.x's RNIC IB device: the GDMA device type of the
/// RDMA function (`GDMA_DEVICE_MANA_IB`).
const RNIC_PART_ID: u32 = 3;

fn fill_device_attr(sh: &Shared, adapter: usize, rnic: bool, a: &mut ibv_device_attr) {
    let l = &sh.cfg.limits;
    // As mana_ib fills them (read with ibv_devinfo in the guest tier): no
    // firmware version, no system image GUID, the node GUID is the EUI-64
    // of the first port's MAC, pages of 4 KiB to 2 MiB.
    fill_name(&mut a.fw_ver, "");
    a.node_guid = sh
        .st
        .lock()
        .unwrap()
        .adapter_mac(adapter)
        .map_or(0, |m| eui64(&m).to_be());
    a.sys_image_guid = 0;
    a.max_mr_size = l.max_mr_size();
    a.page_size_cap = 0x3f_f000;
    a.vendor_id = l.vendor_id;
    a.vendor_part_id = if rnic { RNIC_PART_ID } else { l.vendor_part_id };
    a.hw_ver = 0;
    a.max_qp = l.max_qp as c_int;
    a.max_qp_wr = l.max_qp_wr as c_int;
    a.device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN;
    a.max_sge = l.max_sge as c_int;
    a.max_sge_rd = l.max_sge as c_int;
    a.max_cq = l.max_cq as c_int;
    a.max_cqe = l.max_cqe as c_int;
    a.max_mr = l.max_mr as c_int;
    a.max_pd = l.max_pd as c_int;
    a.atomic_cap = IBV_ATOMIC_NONE;
    a.max_ah = i32::MAX;
    a.max_pkeys = 1;
    a.local_ca_ack_delay = 16;
    // 7.x's RNIC has one port; the Ethernet device one per vPort.
    a.phys_port_cnt = if rnic {
        1
    } else {
        sh.cfg.adapters[adapter].ports.len() as u8
    };
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_device(
    context: *mut ibv_context,
    attr: *mut ibv_device_attr,
) -> c_int {
    // SAFETY: a context from ibv_open_device.
    let c = unsafe { ectx(context) };
    let (adapter, rnic) = match c.sh.st.lock().unwrap().ctxs.get(&c.handle) {
        Some(x) if !x.dead => (x.adapter, x.rnic),
        _ => return libc::EIO,
    };
    // SAFETY: ibv_device_attr is plain data.
    let mut a: ibv_device_attr = unsafe { zeroed() };
    fill_device_attr(&c.sh, adapter, rnic, &mut a);
    // SAFETY: caller-provided out struct.
    unsafe { *attr = a };
    0
}

unsafe extern "C" fn slot_query_device_ex(
    context: *mut ibv_context,
    input: *const ibv_query_device_ex_input,
    attr: *mut ibv_device_attr_ex,
    attr_size: usize,
) -> c_int {
    // SAFETY: caller-provided input (may be NULL).
    if !input.is_null() && unsafe { (*input).comp_mask } != 0 {
        return libc::EINVAL;
    }
    // SAFETY: a context from ibv_open_device.
    let c = unsafe { ectx(context) };
    let (adapter, rnic) = match c.sh.st.lock().unwrap().ctxs.get(&c.handle) {
        Some(x) if !x.dead => (x.adapter, x.rnic),
        _ => return libc::EIO,
    };
    // SAFETY: plain data.
    let mut a: ibv_device_attr_ex = unsafe { zeroed() };
    fill_device_attr(&c.sh, adapter, rnic, &mut a.orig_attr);
    // Raw packet QPs are the Ethernet device's (DPDK's).
    a.raw_packet_caps = if rnic {
        0
    } else {
        c.sh.cfg.limits.raw_packet_caps
    };
    a.phys_port_cnt_ex = u32::from(a.orig_attr.phys_port_cnt);
    let n = attr_size.min(size_of::<ibv_device_attr_ex>());
    // SAFETY: copying at most attr_size bytes into the caller's struct.
    unsafe {
        std::ptr::copy_nonoverlapping(
            (&a as *const ibv_device_attr_ex).cast::<u8>(),
            attr.cast::<u8>(),
            n,
        )
    };
    0
}

fn fill_port_attr(c: &EmuContext, port: u8, p: &mut ibv_port_attr) -> c_int {
    let mut st = c.sh.st.lock().unwrap();
    // active_mtu follows the netdev MTU, as mana_ib reports it.
    st.refresh_mtu(true);
    let Some(x) = st.ctxs.get(&c.handle) else {
        return libc::EINVAL;
    };
    let ports = &st.adapters[x.adapter].ports;
    if port == 0 || port as usize > ports.len() {
        return libc::EINVAL;
    }
    let gp = &st.ports[ports[port as usize - 1]];
    // SAFETY: plain data.
    *p = unsafe { zeroed() };
    p.state = if gp.link_up && !x.dead {
        IBV_PORT_ACTIVE
    } else {
        IBV_PORT_DOWN
    };
    p.phys_state = if gp.link_up { 5 } else { 3 };
    p.max_mtu = IBV_MTU_4096;
    p.active_mtu = match gp.mtu {
        0..=255 => IBV_MTU_256,
        256..=511 => IBV_MTU_256,
        512..=1023 => IBV_MTU_512,
        1024..=2047 => IBV_MTU_1024,
        2048..=4095 => IBV_MTU_2048,
        _ => IBV_MTU_4096,
    };
    p.active_width = 2; // 4X
    p.active_speed = 32; // EDR
    p.pkey_tbl_len = 1;
    p.gid_tbl_len = if port == 1 { 16 } else { 0 };
    p.link_layer = IBV_LINK_LAYER_ETHERNET as u8;
    0
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_port(
    context: *mut ibv_context,
    port_num: u8,
    port_attr: *mut ibv_port_attr,
) -> c_int {
    // SAFETY: a context from ibv_open_device; caller-provided out struct.
    unsafe { fill_port_attr(ectx(context), port_num, &mut *port_attr) }
}

unsafe extern "C" fn slot_query_port(
    context: *mut ibv_context,
    port_num: u8,
    port_attr: *mut ibv_port_attr,
    len: usize,
) -> c_int {
    // SAFETY: plain data.
    let mut p: ibv_port_attr = unsafe { zeroed() };
    // SAFETY: a context from ibv_open_device.
    let r = fill_port_attr(unsafe { ectx(context) }, port_num, &mut p);
    if r == 0 {
        let n = len.min(size_of::<ibv_port_attr>());
        // SAFETY: at most `len` bytes into the caller's struct.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (&p as *const ibv_port_attr).cast::<u8>(),
                port_attr.cast::<u8>(),
                n,
            )
        };
    }
    r
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_gid(
    _context: *mut ibv_context,
    _port: u8,
    _index: c_int,
    gid: *mut ibv_gid,
) -> c_int {
    // mana_ib_query_gid: "This version doesn't return GID properties".
    // SAFETY: caller-provided out union.
    unsafe { *gid = zeroed() };
    0
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_pkey(
    _context: *mut ibv_context,
    _port: u8,
    index: c_int,
    pkey: *mut u16,
) -> c_int {
    if index != 0 {
        return libc::EINVAL;
    }
    // SAFETY: caller-provided out value.
    unsafe { *pkey = 0xffffu16.to_be() };
    0
}

// PDs (and parent domains) and MRs.

#[no_mangle]
pub unsafe extern "C" fn ibv_alloc_pd(context: *mut ibv_context) -> *mut ibv_pd {
    // SAFETY: a context from ibv_open_device.
    let c = unsafe { ectx(context) };
    let h = match c.sh.st.lock().unwrap().alloc_pd(c.handle) {
        Ok(h) => h,
        Err(e) => return errno_null(e),
    };
    Box::into_raw(Box::new(EmuPd {
        pd: ibv_pd { context, handle: h },
        handle: h,
    }))
    .cast()
}

unsafe extern "C" fn slot_alloc_parent_domain(
    context: *mut ibv_context,
    attr: *mut ibv_parent_domain_init_attr,
) -> *mut ibv_pd {
    // SAFETY: a context from ibv_open_device; caller-provided attr.
    let (c, a) = unsafe { (ectx(context), &*attr) };
    // libmana v44 accepts only IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT.
    if a.comp_mask != IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT || a.pd.is_null() || !a.td.is_null() {
        return errno_null(Errno(libc::EINVAL));
    }
    // SAFETY: a.pd is a PD from ibv_alloc_pd.
    let pd = unsafe { &*(a.pd as *mut EmuPd) };
    let port = a.pd_context as usize as u32;
    let h = match c
        .sh
        .st
        .lock()
        .unwrap()
        .alloc_parent_domain(c.handle, pd.handle, port)
    {
        Ok(h) => h,
        Err(e) => return errno_null(e),
    };
    Box::into_raw(Box::new(EmuPd {
        pd: ibv_pd { context, handle: h },
        handle: h,
    }))
    .cast()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_dealloc_pd(pd: *mut ibv_pd) -> c_int {
    // SAFETY: a PD from ibv_alloc_pd / alloc_parent_domain.
    let p = unsafe { &*(pd as *mut EmuPd) };
    // SAFETY: libibverbs requires every PD to be deallocated before its
    // context is closed, so `p.pd.context` is still an open context from
    // ibv_open_device.
    let c = unsafe { ectx(p.pd.context) };
    match c.sh.st.lock().unwrap().dealloc_pd(p.handle) {
        Ok(()) => {
            // SAFETY: reclaiming our Box.
            drop(unsafe { Box::from_raw(pd as *mut EmuPd) });
            0
        }
        Err(e) => e.0,
    }
}

/// # Safety
/// `pd` must be a PD from `ibv_alloc_pd` or the parent-domain slot whose
/// context is open, and `[addr, addr + length)` must stay mapped until
/// `ibv_dereg_mr` (the verbs API's registration rule).
unsafe fn reg_mr_common(pd: *mut ibv_pd, addr: *mut c_void, length: usize) -> *mut ibv_mr {
    // SAFETY: a PD from ibv_alloc_pd.
    let p = unsafe { &*(pd as *mut EmuPd) };
    // SAFETY: its context is open.
    let c = unsafe { ectx(p.pd.context) };
    let lkey = match c
        .sh
        .st
        .lock()
        .unwrap()
        .reg_mr(p.handle, addr as usize, length)
    {
        Ok(k) => k,
        Err(e) => return errno_null(e),
    };
    Box::into_raw(Box::new(EmuMr {
        mr: ibv_mr {
            context: p.pd.context,
            pd,
            addr,
            length,
            handle: lkey,
            lkey,
            rkey: lkey,
        },
    }))
    .cast()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    _access: c_int,
) -> *mut ibv_mr {
    // SAFETY: `reg_mr_common` asks what `ibv_reg_mr`'s own caller must
    // provide under the verbs API: a PD of ours with an open context and a
    // range mapped until `ibv_dereg_mr`; both arguments pass unchanged.
    unsafe { reg_mr_common(pd, addr, length) }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr_iova(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_int,
) -> *mut ibv_mr {
    // SGE addresses are process virtual addresses: only iova == addr works.
    if iova != addr as u64 {
        return errno_null(Errno(libc::EINVAL));
    }
    // SAFETY: `ibv_reg_mr` has the same requirements on `pd` and the range
    // as this function (verbs API); they pass unchanged, and with
    // `iova == addr` the registration means the same thing.
    unsafe { ibv_reg_mr(pd, addr, length, access) }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr_iova2(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: u32,
) -> *mut ibv_mr {
    // SAFETY: `ibv_reg_mr_iova` has the same requirements on `pd` and the
    // range as this function (verbs API); they pass unchanged, and the
    // access flags are the same bits in a signed int.
    unsafe { ibv_reg_mr_iova(pd, addr, length, iova, access as c_int) }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_dereg_mr(mr: *mut ibv_mr) -> c_int {
    // SAFETY: an MR from ibv_reg_mr.
    let m = unsafe { &*(mr as *mut EmuMr) };
    // SAFETY: its context is open.
    let c = unsafe { ectx(m.mr.context) };
    match c.sh.st.lock().unwrap().dereg_mr(m.mr.lkey) {
        Ok(()) => {
            // SAFETY: reclaiming our Box.
            drop(unsafe { Box::from_raw(mr as *mut EmuMr) });
            0
        }
        Err(e) => e.0,
    }
}

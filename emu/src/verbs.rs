//! The verbs seam: the `ibv_*` and `manadv_*` entry points a MANA PMD calls,
//! exported unversioned from `libmana_emu.so` (LD_PRELOAD), plus the
//! `verbs_context` dispatch slots the `static inline` wrappers of
//! `<infiniband/verbs.h>` use and the `ibv_context.ops` stubs.
//!
//! Struct layouts come from bindgen over the installed headers (`ffi`). The
//! objects handed out are `#[repr(C)]` wrappers whose first field is the
//! libibverbs struct, so a pointer the driver passes back is converted to
//! the wrapper by a cast.
//!
//! Behaviour follows rdma-core 44 `providers/mana` (external allocators
//! mandatory, ids only after QP creation, 256-entry limits) unless the
//! configuration selects `rdma_core = "modern"`.

#![allow(clippy::missing_safety_doc)]

use crate::config::{Config, RdmaCoreLimits};
use crate::device::{Emulator, Errno, HashConf, Res, Shared};
use crate::ffi::*;
use crate::mem::Region;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::mem::{offset_of, size_of, zeroed};
use std::ptr::{null, null_mut};
use std::sync::{Arc, Mutex, OnceLock};

// ---------------------------------------------------------------------------
// The process-wide emulator
// ---------------------------------------------------------------------------

static GLOBAL: OnceLock<Result<Emulator, String>> = OnceLock::new();

/// The emulator behind the exported verbs (from `MANA_EMU_CONFIG`).
pub fn global() -> Option<&'static Emulator> {
    let r = GLOBAL.get_or_init(|| {
        let cfg = Config::from_env()?;
        crate::sysfs::create_all(&cfg).map_err(|e| format!("sysfs: {e}"))?;
        let emu = Emulator::new(cfg).map_err(|e| e.to_string())?;
        if emu.config().options.control_socket {
            if let Err(e) = crate::control::serve(&emu) {
                eprintln!("mana-emu: control socket: {e}");
            }
        }
        // SAFETY: registering a plain extern "C" fn with atexit.
        unsafe { libc::atexit(at_exit) };
        Ok(emu)
    });
    match r {
        Ok(e) => Some(e),
        Err(msg) => {
            static ONCE: std::sync::Once = std::sync::Once::new();
            ONCE.call_once(|| eprintln!("mana-emu: {msg}"));
            None
        }
    }
}

extern "C" fn at_exit() {
    if let Some(Ok(e)) = GLOBAL.get() {
        e.dump_counters();
    }
}

/// Run from the preload library's ELF constructor: with `MANA_EMU_CONFIG`
/// set, the fake PCI tree must exist before EAL scans the bus (which
/// happens before any verbs call).
pub fn preload_init() {
    if std::env::var_os("MANA_EMU_CONFIG").is_some()
        && std::env::var_os("MANA_EMU_NO_CTOR").is_none()
    {
        if let Ok(c) = Config::from_env() {
            if let Err(e) = crate::sysfs::create_all(&c) {
                eprintln!(
                    "mana-emu: creating sysfs tree under {}: {e}",
                    c.options.sysfs_root.display()
                );
            }
        }
    }
}

fn set_errno(e: i32) {
    // SAFETY: __errno_location returns this thread's errno slot.
    unsafe { *libc::__errno_location() = e };
}

fn errno_null<T>(e: Errno) -> *mut T {
    set_errno(e.0);
    null_mut()
}

fn verbose(sh: &Shared) -> bool {
    sh.cfg.options.verbose
}

// ---------------------------------------------------------------------------
// Object wrappers
// ---------------------------------------------------------------------------

#[repr(C)]
pub struct EmuDevice {
    pub dev: ibv_device,
    sh: Arc<Shared>,
    adapter: usize,
    generation: u64,
    guid: u64,
}

#[repr(C)]
pub struct EmuContext {
    pub vctx: verbs_context,
    sh: Arc<Shared>,
    pub handle: u32,
    alloc: Mutex<Option<manadv_ctx_allocators>>,
}

#[repr(C)]
struct EmuPd {
    pd: ibv_pd,
    handle: u32,
}

#[repr(C)]
struct EmuMr {
    mr: ibv_mr,
}

#[repr(C)]
struct EmuCq {
    cq: ibv_cq,
    handle: u32,
    internal: bool,
}

#[repr(C)]
struct EmuWq {
    wq: ibv_wq,
    handle: u32,
}

#[repr(C)]
struct EmuInd {
    t: ibv_rwq_ind_table,
    handle: u32,
}

#[repr(C)]
struct EmuQp {
    qp: ibv_qp,
    handle: u32,
    sq: Option<u32>,
    tx_vp_offset: u32,
}

#[repr(C)]
struct EmuChannel {
    ch: ibv_comp_channel,
    handle: u32,
    sh: Arc<Shared>,
}

static DEVICES: Mutex<Vec<usize>> = Mutex::new(Vec::new());

/// # Safety
/// `ctx` must be a context returned by [`ibv_open_device`].
unsafe fn ectx<'a>(ctx: *mut ibv_context) -> &'a EmuContext {
    // SAFETY: per the contract, `ctx` is the `context` field (the last
    // member) of the verbs_context at the start of an EmuContext.
    unsafe { &*((ctx as *mut u8).sub(offset_of!(verbs_context, context)) as *const EmuContext) }
}

fn fill_name(dst: &mut [c_char], s: &str) {
    for (i, b) in s.bytes().take(dst.len() - 1).enumerate() {
        dst[i] = b as c_char;
    }
    dst[s.len().min(dst.len() - 1)] = 0;
}

fn cstr_of(a: &[c_char]) -> String {
    // SAFETY: the arrays are NUL-terminated by `fill_name`.
    unsafe { CStr::from_ptr(a.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

// ---------------------------------------------------------------------------
// Devices
// ---------------------------------------------------------------------------

/// Device list of a given emulator (the exported function uses the global one).
pub fn device_list_of(emu: &Emulator) -> Vec<*mut ibv_device> {
    let st = emu.lock();
    let vis = st.visible();
    let root = emu.config().options.sysfs_root.clone();
    for (ai, _, name, _, _) in &vis {
        let a = &emu.config().adapters[*ai];
        if !crate::sysfs::pci_dir(&root, &a.pci).join("uevent").exists()
            || !crate::sysfs::ib_dir(&root, name).exists()
        {
            let _ = crate::sysfs::ensure_pci(&root, a, &[]);
            let _ = crate::sysfs::ensure_ib(&root, a, name);
        }
    }
    let mut cache = DEVICES.lock().unwrap();
    let mut out = Vec::new();
    for (ai, gen, name, pci, _) in vis {
        let found = cache.iter().copied().find(|&p| {
            // SAFETY: DEVICES holds leaked, never-freed EmuDevice pointers.
            let d = unsafe { &*(p as *const EmuDevice) };
            Arc::ptr_eq(&d.sh, &emu.sh) && d.adapter == ai && d.generation == gen
        });
        let p = match found {
            Some(p) => p,
            None => {
                let idx = cache.len();
                // SAFETY: ibv_device is plain data; zero is a valid start.
                let mut dev: ibv_device = unsafe { zeroed() };
                dev.node_type = IBV_NODE_CA;
                dev.transport_type = IBV_TRANSPORT_IB;
                fill_name(&mut dev.name, &name);
                fill_name(&mut dev.dev_name, &format!("uverbs{idx}"));
                fill_name(
                    &mut dev.dev_path,
                    &root
                        .join(format!("class/infiniband_verbs/uverbs{idx}"))
                        .to_string_lossy(),
                );
                fill_name(
                    &mut dev.ibdev_path,
                    &root.join("class/infiniband").join(&name).to_string_lossy(),
                );
                let guid = 0x000d_3aff_fe00_0000u64 | (ai as u64) << 8 | gen;
                let _ = pci;
                let b = Box::new(EmuDevice {
                    dev,
                    sh: emu.sh.clone(),
                    adapter: ai,
                    generation: gen,
                    guid,
                });
                let p = Box::into_raw(b) as usize;
                cache.push(p);
                p
            }
        };
        out.push(p as *mut ibv_device);
    }
    out
}

#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_list(num_devices: *mut c_int) -> *mut *mut ibv_device {
    let Some(emu) = global() else {
        set_errno(libc::ENOSYS);
        return null_mut();
    };
    let list = device_list_of(emu);
    // SAFETY: calloc of (n+1) pointers; freed by ibv_free_device_list.
    let arr = unsafe { libc::calloc(list.len() + 1, size_of::<*mut ibv_device>()) }
        as *mut *mut ibv_device;
    if arr.is_null() {
        return errno_null(Errno(libc::ENOMEM));
    }
    for (i, d) in list.iter().enumerate() {
        // SAFETY: in bounds of the calloc'd array.
        unsafe { *arr.add(i) = *d };
    }
    if !num_devices.is_null() {
        // SAFETY: caller-provided out pointer.
        unsafe { *num_devices = list.len() as c_int };
    }
    arr
}

#[no_mangle]
pub unsafe extern "C" fn ibv_free_device_list(list: *mut *mut ibv_device) {
    // SAFETY: list came from ibv_get_device_list's calloc.
    unsafe { libc::free(list.cast()) };
}

/// Called by the `ibv_get_device_list` inline wrapper of verbs.h.
#[no_mangle]
pub unsafe extern "C" fn ibv_static_providers(_unused: *mut c_void) {}

#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_name(device: *mut ibv_device) -> *const c_char {
    // SAFETY: a device from our list.
    unsafe { (*device).name.as_ptr() }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_guid(device: *mut ibv_device) -> u64 {
    // SAFETY: a device from our list.
    unsafe { (*(device as *mut EmuDevice)).guid.to_be() }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_index(device: *mut ibv_device) -> c_int {
    // SAFETY: a device from our list.
    unsafe { (*(device as *mut EmuDevice)).adapter as c_int }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_open_device(device: *mut ibv_device) -> *mut ibv_context {
    if device.is_null() {
        return errno_null(Errno(libc::EINVAL));
    }
    // SAFETY: a device from our list (never freed).
    let d = unsafe { &*(device as *mut EmuDevice) };
    let info = {
        let mut st = d.sh.st.lock().unwrap();
        match st.open_context(d.adapter, d.generation) {
            Ok(i) => i,
            Err(e) => return errno_null(e),
        }
    };
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
    let p = c as *const EmuContext as *mut EmuContext;
    // SAFETY: reclaiming the Box leaked in ibv_open_device; the caller must
    // not use the context afterwards.
    drop(unsafe { Box::from_raw(p) });
    0
}

fn fill_device_attr(sh: &Shared, adapter: usize, a: &mut ibv_device_attr) {
    let l = &sh.cfg.limits;
    fill_name(&mut a.fw_ver, "0.1.0-emu");
    a.node_guid = (0x000d_3aff_fe00_0000u64 | (adapter as u64) << 8).to_be();
    a.sys_image_guid = a.node_guid;
    a.max_mr_size = l.max_mr_size;
    a.page_size_cap = 0x1000 | 0x20_0000;
    a.vendor_id = 0x1414;
    a.vendor_part_id = 2; // GDMA_DEVICE_MANA
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
    a.phys_port_cnt = sh.cfg.adapters[adapter].ports.len() as u8;
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_device(
    context: *mut ibv_context,
    attr: *mut ibv_device_attr,
) -> c_int {
    // SAFETY: a context from ibv_open_device.
    let c = unsafe { ectx(context) };
    let adapter = match c.sh.st.lock().unwrap().ctxs.get(&c.handle) {
        Some(x) if !x.dead => x.adapter,
        _ => return libc::EIO,
    };
    // SAFETY: ibv_device_attr is plain data.
    let mut a: ibv_device_attr = unsafe { zeroed() };
    fill_device_attr(&c.sh, adapter, &mut a);
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
    let adapter = match c.sh.st.lock().unwrap().ctxs.get(&c.handle) {
        Some(x) if !x.dead => x.adapter,
        _ => return libc::EIO,
    };
    // SAFETY: plain data.
    let mut a: ibv_device_attr_ex = unsafe { zeroed() };
    fill_device_attr(&c.sh, adapter, &mut a.orig_attr);
    a.raw_packet_caps = IBV_RAW_PACKET_CAP_IP_CSUM;
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

// ---------------------------------------------------------------------------
// PDs and MRs
// ---------------------------------------------------------------------------

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
    // SAFETY: its context is still open (libibverbs contract).
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
    // SAFETY: forwarded contract.
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
    // SAFETY: forwarded contract.
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
    // SAFETY: forwarded contract.
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

// ---------------------------------------------------------------------------
// Allocators (manadv)
// ---------------------------------------------------------------------------

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
fn alloc_buf(c: &EmuContext, size: usize) -> Res<Region> {
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
fn free_buf(c: &EmuContext, r: Region) {
    if let Some(a) = *c.alloc.lock().unwrap() {
        if let Some(f) = a.free {
            // SAFETY: returning a buffer obtained from this allocator family.
            unsafe { f(r.addr() as *mut c_void, a.data) };
        }
    }
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

// ---------------------------------------------------------------------------
// Completion channels and CQs
// ---------------------------------------------------------------------------

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
    let modern = c.sh.cfg.options.rdma_core == RdmaCoreLimits::Modern;
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

// ---------------------------------------------------------------------------
// WQs, indirection tables
// ---------------------------------------------------------------------------

unsafe extern "C" fn slot_create_wq(
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

unsafe extern "C" fn slot_destroy_wq(wq: *mut ibv_wq) -> c_int {
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

unsafe extern "C" fn slot_modify_wq(_wq: *mut ibv_wq, _attr: *mut ibv_wq_attr) -> c_int {
    libc::EOPNOTSUPP
}

unsafe extern "C" fn slot_create_rwq_ind_table(
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

unsafe extern "C" fn slot_destroy_rwq_ind_table(t: *mut ibv_rwq_ind_table) -> c_int {
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

// ---------------------------------------------------------------------------
// QPs
// ---------------------------------------------------------------------------

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
unsafe extern "C" fn slot_create_qp_ex(
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

// ---------------------------------------------------------------------------
// ibv_context.ops stubs
// ---------------------------------------------------------------------------

/// libmana v44 returns a positive EOPNOTSUPP from poll_cq: the data path
/// is the driver's own.
unsafe extern "C" fn op_poll_cq(_cq: *mut ibv_cq, _n: c_int, _wc: *mut ibv_wc) -> c_int {
    libc::EOPNOTSUPP
}

/// Arms the CQ: the next CQE posts an event on its completion channel.
unsafe extern "C" fn op_req_notify_cq(cq: *mut ibv_cq, _solicited_only: c_int) -> c_int {
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

unsafe extern "C" fn op_post_send(
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

unsafe extern "C" fn op_post_recv(
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

unsafe extern "C" fn op_post_srq_recv(
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

// ---------------------------------------------------------------------------
// Async events
// ---------------------------------------------------------------------------

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

#[no_mangle]
pub unsafe extern "C" fn ibv_fork_init() -> c_int {
    0
}

#[no_mangle]
pub unsafe extern "C" fn ibv_is_fork_initialized() -> c_int {
    0 // IBV_FORK_DISABLED
}

#[no_mangle]
pub unsafe extern "C" fn ibv_dontfork_range(_base: *mut c_void, _size: usize) -> c_int {
    0
}

#[no_mangle]
pub unsafe extern "C" fn ibv_dofork_range(_base: *mut c_void, _size: usize) -> c_int {
    0
}

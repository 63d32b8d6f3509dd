//! The device list (`ibv_get_device_list` and friends): one `ibv_device`
//! per present adapter and generation, the fake sysfs entries repaired on
//! the way. As in libibverbs, a device is reference counted: the list of
//! present devices holds one reference, every list handed out and every
//! open context one more; a device that went away (a reset brings the
//! adapter back as a new generation) is freed with its last reference, so
//! a process living through resets does not keep one per reset.

use super::global::global;
use super::{errno_null, fill_name, set_errno};
use crate::device::{Emulator, Errno, Shared};
use crate::ffi::*;
use std::ffi::{c_char, c_int, c_void};
use std::mem::{size_of, zeroed};
use std::ptr::null_mut;
use std::sync::atomic::{fence, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

#[repr(C)]
pub struct EmuDevice {
    pub dev: ibv_device,
    pub(super) sh: Arc<Shared>,
    pub(super) adapter: usize,
    pub(super) generation: u64,
    /// The function's RNIC (7.x), not its Ethernet IB device.
    pub(super) rnic: bool,
    pub(super) guid: u64,
    /// References: `DEVICES` while present, each list, each open context.
    refs: AtomicUsize,
}

/// The present devices of every emulator (`EmuDevice` pointers from
/// `Box::into_raw`), each holding one reference.
static DEVICES: Mutex<Vec<usize>> = Mutex::new(Vec::new());
/// `EmuDevice`s allocated and not yet freed, in every emulator.
static LIVE: AtomicUsize = AtomicUsize::new(0);
/// Devices created so far: the next `uverbs<N>` name.
static CREATED: AtomicUsize = AtomicUsize::new(0);

/// How many `ibv_device`s are allocated now: a soak must keep this flat.
pub fn live_devices() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// Takes a reference to a device.
///
/// # Safety
/// `dev` is a live device: from a list or context the caller holds.
pub(super) unsafe fn device_get(dev: *mut ibv_device) {
    // SAFETY: live per the caller; `dev` is the first field of a repr(C)
    // `EmuDevice`, so the cast points at the whole device.
    let d = unsafe { &*(dev as *const EmuDevice) };
    d.refs.fetch_add(1, Ordering::Relaxed);
}

/// Drops a reference to a device, freeing it with the last one.
///
/// # Safety
/// The caller owns one reference to `dev` (taken by `device_list_of`,
/// `device_get` or the creation) and does not use `dev` through it again.
pub(super) unsafe fn device_put(dev: *mut ibv_device) {
    let p = dev as *mut EmuDevice;
    // SAFETY: live until this reference is dropped (the caller owns it).
    if unsafe { &*p }.refs.fetch_sub(1, Ordering::Release) != 1 {
        return;
    }
    // Every other owner's use happened before its decrement.
    fence(Ordering::Acquire);
    LIVE.fetch_sub(1, Ordering::Relaxed);
    // SAFETY: the last reference: nothing points at it any more, and it was
    // allocated by `Box::into_raw` in `device_list_of`.
    drop(unsafe { Box::from_raw(p) });
}

/// Device list of a given emulator (the exported function uses the global
/// one), each device with a reference taken for the caller: hand the list to
/// `ibv_free_device_list` (as `ibv_get_device_list` does) or the devices
/// are never freed.
pub fn device_list_of(emu: &Emulator) -> Vec<*mut ibv_device> {
    let st = emu.lock();
    let vis = st.visible();
    let root = emu.config().options.sysfs_root.clone();
    for l in &vis {
        let a = &emu.config().adapters[l.adapter];
        if !crate::sysfs::pci_dir(&root, &a.pci).join("uevent").exists()
            || !crate::sysfs::ib_dir(&root, &l.name).exists()
        {
            let _ = crate::sysfs::ensure_pci(&root, a, &[]);
            let _ = crate::sysfs::ensure_ib(&root, a, &l.name);
        }
    }
    let mut cache = DEVICES.lock().unwrap();
    let listed: Vec<(usize, u64, bool)> = vis
        .iter()
        .map(|l| (l.adapter, l.generation, l.rnic))
        .collect();
    let mut out = Vec::new();
    for l in vis {
        let (ai, gen, name) = (l.adapter, l.generation, l.name);
        let found = cache.iter().copied().find(|&p| {
            // SAFETY: DEVICES holds live EmuDevice pointers (its reference).
            let d = unsafe { &*(p as *const EmuDevice) };
            Arc::ptr_eq(&d.sh, &emu.sh)
                && d.adapter == ai
                && d.generation == gen
                && d.rnic == l.rnic
        });
        let p = match found {
            Some(p) => p,
            None => {
                let idx = CREATED.fetch_add(1, Ordering::Relaxed);
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
                let guid =
                    0x000d_3aff_fe00_0000u64 | u64::from(l.rnic) << 16 | (ai as u64) << 8 | gen;
                let b = Box::new(EmuDevice {
                    dev,
                    sh: emu.sh.clone(),
                    adapter: ai,
                    generation: gen,
                    rnic: l.rnic,
                    guid,
                    refs: AtomicUsize::new(1),
                });
                LIVE.fetch_add(1, Ordering::Relaxed);
                let p = Box::into_raw(b) as usize;
                cache.push(p);
                p
            }
        };
        // SAFETY: present, so live (DEVICES' reference); this one is the list's.
        unsafe { device_get(p as *mut ibv_device) };
        out.push(p as *mut ibv_device);
    }
    // This emulator's devices no longer present (reset, removed) are off
    // the list: drop its reference.
    cache.retain(|&p| {
        // SAFETY: DEVICES holds live EmuDevice pointers (its reference).
        let d = unsafe { &*(p as *const EmuDevice) };
        let present =
            !Arc::ptr_eq(&d.sh, &emu.sh) || listed.contains(&(d.adapter, d.generation, d.rnic));
        if !present {
            // SAFETY: DEVICES' own reference, dropped with the entry.
            unsafe { device_put(p as *mut ibv_device) };
        }
        present
    });
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
        for d in list {
            // SAFETY: the reference device_list_of took for this list.
            unsafe { device_put(d) };
        }
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
    if list.is_null() {
        return;
    }
    let mut i = 0;
    loop {
        // SAFETY: list came from ibv_get_device_list: device pointers up to
        // its NULL terminator.
        let d = unsafe { *list.add(i) };
        if d.is_null() {
            break;
        }
        // SAFETY: the list's reference, taken by device_list_of.
        unsafe { device_put(d) };
        i += 1;
    }
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
    let d = unsafe { &*(device as *mut EmuDevice) };
    // Distinct for the RNIC beside an adapter's Ethernet device.
    (d.adapter + if d.rnic { 0x100 } else { 0 }) as c_int
}

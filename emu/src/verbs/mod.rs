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
//! configuration selects `rdma_core = "modern"`. The modules follow that
//! provider's files:
//!
//! | Module | rdma-core | Entry points |
//! |---|---|---|
//! | `context` | `mana.c` | open/close device, query device/port/gid/pkey, PDs and parent domains, MRs |
//! | `cq` | `cq.c` | completion channels, CQs, CQ events, `poll_cq` / `req_notify_cq` ops |
//! | `wq` | `wq.c` | RQs (`create_wq` slot), indirection tables |
//! | `qp` | `qp.c`, `wr.c` | RAW send QPs, RSS receive QPs, `post_*` ops |
//! | `manadv` | `manadv.c` | buffer allocators, `manadv_init_obj` |
//! | `devices` | libibverbs `device.c` | device list, names, GUIDs |
//! | `events` | libibverbs | async events, `*_str` helpers |
//! | `fork` | libibverbs | fork-support stubs |
//! | `global` | — | the process-wide emulator and the preload constructor's work |

#![allow(clippy::missing_safety_doc)]

mod context;
mod cq;
mod devices;
mod events;
mod fork;
mod global;
mod manadv;
mod qp;
mod wq;

pub use context::*;
pub use cq::*;
pub use devices::*;
pub use events::*;
pub use fork::*;
pub use global::*;
pub use manadv::*;
pub use qp::*;

use crate::device::{Errno, Shared};
use std::ffi::{c_char, CStr};
use std::ptr::null_mut;

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

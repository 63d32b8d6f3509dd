//! libibverbs' fork-support calls: nothing to protect (no kernel-pinned
//! memory), so they succeed and report fork support as disabled.

use std::ffi::{c_int, c_void};

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

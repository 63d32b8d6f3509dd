//! A port's interrupt handle and the state of its async-event handler's
//! registration; `intr` registers, removes and serves it.

use crate::ffi;
use parking_lot::{Condvar, Mutex, MutexGuard};
use std::ffi::c_int;

const INSTANCE_F_SHARED: u32 = 1;

/// The port's interrupt handle: async events of the current device context,
/// plus the rx queue vectors. The handle outlives resets (applications keep
/// pointers to it); only its fd and registration change.
pub struct Intr {
    pub handle: *mut ffi::rte_intr_handle,
    state: Mutex<Registration>,
    /// Signalled when a deferred unregistration has run.
    pub released: Condvar,
}

#[derive(Default)]
pub struct Registration {
    /// The callback is registered (its argument holds a port reference).
    pub registered: bool,
    /// A deferred unregistration has not run yet.
    pub pending: bool,
    /// Free the handle once the deferred unregistration ran (port closed).
    pub free_on_release: bool,
}

// SAFETY: the handle is only used through EAL's intr API, which is
// thread-safe; the registration state is behind a mutex.
unsafe impl Send for Intr {}
// SAFETY: shared use goes through EAL's thread-safe API and the mutex.
unsafe impl Sync for Intr {}

impl Intr {
    pub fn new() -> Result<Intr, c_int> {
        // SAFETY: plain allocation; checked.
        let handle = unsafe { ffi::rte_intr_instance_alloc(INSTANCE_F_SHARED) };
        if handle.is_null() {
            return Err(-libc::ENOMEM);
        }
        Ok(Intr {
            handle,
            state: Mutex::new(Registration::default()),
            released: Condvar::new(),
        })
    }

    pub fn handle(&self) -> *mut ffi::rte_intr_handle {
        self.handle
    }

    pub fn lock(&self) -> MutexGuard<'_, Registration> {
        self.state.lock()
    }
}

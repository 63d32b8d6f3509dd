//! `libmana_emu.so`: the LD_PRELOAD library (a cdylib over the `mana_emu`
//! rlib). It exports the `ibv_*` / `manadv_*` entry points of
//! [`mana_emu::verbs`] and runs its ELF constructor (fake sysfs tree).
//!
//! Built as a cdylib *example* target so that the workspace's
//! `panic = "abort"` dev profile and the unwind-based test harness can both
//! link the `mana_emu` rlib (a lib target that is also a cdylib forces one
//! panic strategy on every build of it).

pub use mana_emu::verbs::*;

// open/fopen/opendir/access/mmap/ioctl/socket/bind for the emulated VMBus
// device (paths DPDK hard-codes); see mana_emu::vmbus::interpose.
mana_emu::export_libc_hooks!();

/// ELF constructor: create / validate the fake sysfs trees before EAL's
/// PCI scan.
#[used]
#[link_section = ".init_array"]
static CTOR: extern "C" fn() = ctor;

extern "C" fn ctor() {
    mana_emu::verbs::preload_init();
}

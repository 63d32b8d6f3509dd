//! The guest harness: a busybox initramfs with the kernel's modules, QEMU
//! (from the cached trixie chroot) with the device attached, and the
//! control channel (a virtio console).

pub mod console;
pub mod dpdk;
pub mod initramfs;
pub mod lying;
pub mod peer;
pub mod preflight;
pub mod rdma;
pub mod reset_loop;
pub mod scenarios;
pub mod stack;
pub mod vm;

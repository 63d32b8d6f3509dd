//! The device as the driver reaches it: libibverbs/libmana objects, the
//! rings in memory, the doorbell page, and the sysfs files that describe
//! the PCI function and its ports.

pub mod doorbell;
pub mod mac;
pub mod ring;
pub mod sysfs;
pub mod verbs;

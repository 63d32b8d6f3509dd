//! The driver's MAC type, at the path its devargs parser names it by
//! (`crate::hw::mac`).

#[path = "../../../src/hw/mac.rs"]
#[allow(dead_code)]
pub mod mac;

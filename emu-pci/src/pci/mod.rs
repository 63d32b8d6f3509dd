//! The PCI side of the function: configuration space and BAR sizes.

pub mod config;

/// BAR0: the GDMA register block, the SMC window and the doorbell pages.
pub const BAR0_SIZE: u64 = 0x8_0000;
/// BAR2: the MSI-X table and PBA (QEMU emulates both).
pub const BAR2_SIZE: u64 = 0x4000;
/// MSI-X vectors: one for the HWC plus one per queue (the kernel asks for
/// `num_online_cpus() + 1`, at most 65).
pub const MSIX_VECTORS: usize = 64;
/// Offset of the MSI-X table in BAR2.
pub const MSIX_TABLE_OFFSET: usize = 0;
/// Offset of the MSI-X PBA in BAR2.
pub const MSIX_PBA_OFFSET: usize = 0x2000;

//! The PCI function as a whole: configuration space, guest memory, MSI-X,
//! and the GDMA device behind BAR0. Every field sits behind one mutex (see
//! [`crate::vfio`]); the vfio-user thread calls in for region accesses,
//! DMA maps and interrupt setup.

use crate::gdma::{DmaRegion, Eq, Hwc, IdPool, Registration};
use crate::interrupts::Interrupts;
use crate::ledger::Ledger;
use crate::memory::GuestMemory;
use crate::pci::config::ConfigSpace;
use crate::pci::MSIX_VECTORS;
use std::collections::BTreeMap;

/// What the device reports about itself.
#[derive(Clone, Debug)]
pub struct DeviceConfig {
    /// The vPort's MAC address.
    pub mac: [u8; 6],
    /// Largest frame payload the adapter carries (`adapter_mtu` minus the
    /// Ethernet header is the netdev's max MTU).
    pub adapter_mtu: u16,
    /// Send and receive queues per vPort.
    pub max_queues: u32,
    /// Entries of the vPort's RSS indirection table.
    pub indirection_entries: u32,
}

impl Default for DeviceConfig {
    fn default() -> Self {
        DeviceConfig {
            mac: [0x00, 0x15, 0x5d, 0x4e, 0x00, 0x01],
            adapter_mtu: 9014,
            max_queues: 16,
            indirection_entries: 64,
        }
    }
}

pub struct Device {
    pub cfg: DeviceConfig,
    pub config: ConfigSpace,
    pub mem: GuestMemory,
    pub irqs: Interrupts,
    /// The SMC window's 32 bytes.
    pub(crate) smc: [u8; gdma::SMC_APERTURE_SIZE],
    /// Low halves of doorbells written as two 32-bit stores, by BAR offset.
    pub(crate) split_db: BTreeMap<usize, u32>,
    pub hwc: Option<Hwc>,
    /// Event queues by id (the HWC's included).
    pub eqs: BTreeMap<u32, Eq>,
    pub regions: BTreeMap<u64, DmaRegion>,
    pub(crate) next_region: u64,
    pub(crate) eq_ids: IdPool,
    pub(crate) cq_ids: IdPool,
    pub(crate) wq_ids: IdPool,
    /// Registered GDMA devices by `gdma_dev_id` value.
    pub registered: BTreeMap<u32, Registration>,
    pub ledger: Ledger,
    /// Device-side problems seen (bad doorbells, malformed WQEs), counted.
    pub errors: BTreeMap<String, u64>,
}

impl Device {
    pub fn new(cfg: DeviceConfig) -> Device {
        Device {
            cfg,
            config: ConfigSpace::new(),
            mem: GuestMemory::default(),
            irqs: Interrupts::new(MSIX_VECTORS),
            smc: [0; gdma::SMC_APERTURE_SIZE],
            split_db: BTreeMap::new(),
            hwc: None,
            eqs: BTreeMap::new(),
            regions: BTreeMap::new(),
            next_region: 1,
            eq_ids: IdPool::new(0, crate::gdma::MAX_EQS),
            cq_ids: IdPool::new(0, crate::gdma::MAX_CQS),
            wq_ids: IdPool::new(0, crate::gdma::MAX_WQS),
            registered: BTreeMap::new(),
            ledger: Ledger::default(),
            errors: BTreeMap::new(),
        }
    }

    /// Counts and logs a device-side problem.
    pub(crate) fn error(&mut self, kind: &str, detail: std::fmt::Arguments<'_>) {
        *self.errors.entry(kind.to_string()).or_insert(0) += 1;
        log::warn!("{kind}: {detail}");
    }

    /// A function-level reset: every object gone, the HWC down, the SMC
    /// window back to the driver. Guest memory maps and interrupt eventfds
    /// belong to the VMM and stay.
    pub fn reset(&mut self) {
        let cfg = self.cfg.clone();
        let mem = std::mem::take(&mut self.mem);
        let irqs = std::mem::replace(&mut self.irqs, Interrupts::new(0));
        let ledger = std::mem::take(&mut self.ledger);
        *self = Device::new(cfg);
        self.mem = mem;
        self.irqs = irqs;
        self.ledger = ledger;
    }
}

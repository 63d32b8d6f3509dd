//! The GDMA device behind BAR0: the register block, the shared-memory
//! channel that establishes the hardware channel (HWC), the doorbell pages,
//! event queues with their MSI-X vectors, DMA regions, and the control
//! requests the HWC carries.
//!
//! | Module | Block |
//! |---|---|
//! | `bar0` | BAR0 layout, register reads, doorbell decoding |
//! | `smc` | the shared-memory channel: establish / destroy the HWC |
//! | `hwc` | the HWC's queues: requests in, responses out |
//! | `eq` | event queues: EQEs, arming, interrupts |
//! | `ring` | queue memory in guest pages, entry producers (owner bits) |
//! | `regions` | DMA regions (the page lists queues are made of) |
//! | `requests` | request dispatch and the GDMA-layer requests |

pub mod bar0;
pub mod eq;
pub mod hwc;
pub mod regions;
pub mod requests;
pub mod ring;
pub mod smc;

pub use eq::Eq;
pub use hwc::Hwc;
pub use regions::DmaRegion;

use std::collections::BTreeSet;

/// Queue ids the device hands out, per kind.
pub const MAX_EQS: u32 = 64;
pub const MAX_CQS: u32 = 256;
/// SQs and RQs share one id space. Ids stay below 1024: the kernel leaves
/// the TX OOB's `vsq_frame` (SQ id bits 10-23) at zero.
pub const MAX_WQS: u32 = 256;
/// Doorbell pages in BAR0.
pub const DB_PAGES: u32 = 64;

/// The doorbell page of the HWC, and of the MANA Ethernet device.
pub const HWC_DB_PAGE: u32 = 0;
pub const MANA_DB_PAGE: u32 = 1;

/// The lowest free ids of a range.
#[derive(Clone, Debug)]
pub struct IdPool {
    base: u32,
    end: u32,
    used: BTreeSet<u32>,
}

impl IdPool {
    pub fn new(base: u32, end: u32) -> Self {
        IdPool {
            base,
            end,
            used: BTreeSet::new(),
        }
    }
    pub fn alloc(&mut self) -> Option<u32> {
        let id = (self.base..self.end).find(|i| !self.used.contains(i))?;
        self.used.insert(id);
        Some(id)
    }
    /// Marks `id` used (an object that survives a reset of the others).
    pub fn reserve(&mut self, id: u32) {
        self.used.insert(id);
    }
    pub fn free(&mut self, id: u32) {
        self.used.remove(&id);
    }
    pub fn in_use(&self) -> usize {
        self.used.len()
    }
}

/// A registered GDMA device (`GDMA_REGISTER_DEVICE`): its protection
/// domain, memory key for guest-physical SGEs and doorbell page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Registration {
    pub pdid: u32,
    pub gpa_mkey: u32,
    pub db_page: u32,
}

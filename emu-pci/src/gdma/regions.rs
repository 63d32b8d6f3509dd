//! DMA regions: the guest pages a queue (or, for RDMA, a memory region) is
//! made of, registered by `GDMA_CREATE_DMA_REGION` (and
//! `GDMA_DMA_REGION_ADD_PAGES` when the list does not fit one request).
//! Creating a queue from a region hands the region to the queue: the
//! kernel forgets the handle then, and the region goes with the queue.

use super::ring::{Ring, PAGE};
use crate::device::Device;
use gdma::control::status;

pub struct DmaRegion {
    pub length: u64,
    /// Offset of the first byte in the first page.
    pub offset_in_page: u32,
    /// Size of the pages: 4 KiB for the kernel's queues, up to 2 MiB for
    /// user memory (`mana_ib` picks the largest the layout allows).
    pub page_size: u64,
    /// Pages the region has, and those listed so far (guest-physical).
    pub page_count: u32,
    pub pages: Vec<u64>,
    /// The queue that took the region over, if any (e.g. "EQ 3").
    pub owner: Option<String>,
}

impl DmaRegion {
    pub fn complete(&self) -> bool {
        self.pages.len() == self.page_count as usize
    }

    /// The region's memory as 4 KiB pages.
    pub fn pages_4k(&self) -> Vec<u64> {
        let per = self.page_size / PAGE as u64;
        self.pages
            .iter()
            .flat_map(|p| (0..per).map(move |i| p + i * PAGE as u64))
            .collect()
    }
}

impl Device {
    pub(crate) fn new_region(&mut self, r: DmaRegion) -> u64 {
        let h = self.next_region;
        self.next_region += 1;
        self.regions.insert(h, r);
        h
    }

    /// Takes region `handle` over as the memory of a queue of `size` bytes
    /// named `owner`: the region must exist, be complete and unowned, start
    /// at a page boundary and be exactly `size` bytes (a power of two of at
    /// least one page). Returns its pages as a ring, or a failure status and
    /// the reason.
    pub(crate) fn take_region(
        &mut self,
        handle: u64,
        size: u64,
        owner: String,
    ) -> Result<Ring, (u32, String)> {
        let r = self.regions.get(&handle).ok_or((
            status::NOT_FOUND,
            format!("DMA region {handle:#x} does not exist"),
        ))?;
        let bad = |why: String| Err((status::INVALID_PARAMETER, why));
        if let Some(o) = &r.owner {
            return Err((
                status::DEVICE_BUSY,
                format!("DMA region {handle:#x} already belongs to {o}"),
            ));
        }
        if !r.complete() {
            return bad(format!(
                "DMA region {handle:#x} has {} of its {} pages",
                r.pages.len(),
                r.page_count
            ));
        }
        if r.offset_in_page != 0 || r.length != size {
            return bad(format!(
                "queue of {size} bytes on DMA region {handle:#x} of {} bytes at page offset {}",
                r.length, r.offset_in_page
            ));
        }
        if !size.is_power_of_two() || size < PAGE as u64 {
            return bad(format!(
                "queue size {size} is not a power of two of at least 4096"
            ));
        }
        let ring = Ring::new(&self.mem, &r.pages_4k()).map_err(|gpa| {
            (
                status::INVALID_PARAMETER,
                format!("DMA region {handle:#x}: page {gpa:#x} is not guest memory"),
            )
        })?;
        self.regions.get_mut(&handle).unwrap().owner = Some(owner);
        Ok(ring)
    }

    /// Drops the region of a destroyed queue.
    pub(crate) fn release_region(&mut self, handle: Option<u64>) {
        if let Some(h) = handle {
            self.regions.remove(&h);
        }
    }
}

//! The doorbell page each port's queues ring, per process: the primary
//! rings through libmana's mapping of its device context, a secondary
//! through its own mapping of the primary's uverbs fd. Control code keeps
//! the table current (`set_page`); the data path only reads it (`ring`).
//!
//! Doorbell values are built from the `gdma` crate's typed definitions:
//! the queue's id part once when its rings are attached, the producer part
//! per burst, each from a typed setter, so the per-packet cost stays one OR.

use crate::ffi;
use gdma::{CqDoorbell, RqDoorbell, SqDoorbell};
use std::sync::atomic::{AtomicPtr, Ordering};

static PAGES: [AtomicPtr<u8>; ffi::RTE_MAX_ETHPORTS as usize] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; ffi::RTE_MAX_ETHPORTS as usize];

/// The page `port_id`'s data path rings in this process (null: none yet).
#[inline(always)]
pub fn page(port_id: u16) -> *mut u8 {
    PAGES[usize::from(port_id)].load(Ordering::Relaxed)
}

/// Publishes `page` as `port_id`'s doorbell page; returns the previous one.
/// Callers swap pages only while every gate of the port is closed.
pub fn set_page(port_id: u16, page: *mut u8) -> *mut u8 {
    PAGES[usize::from(port_id)].swap(page, Ordering::AcqRel)
}

/// `tail_ptr = 1` in the SQ and RQ doorbells, from the typed definitions
/// at compile time: a multiple of it sets the whole 32-bit field (a shift,
/// where the typed setter is a call per burst).
const TAIL_ONE: u64 = SqDoorbell::new().with_tail_ptr(1).to_raw();
const _: () = assert!(RqDoorbell::new().with_tail_ptr(1).to_raw() == TAIL_ONE);
const _: () = assert!(
    SqDoorbell::new().with_tail_ptr(u32::MAX).to_raw() == u32::MAX as u64 * TAIL_ONE,
    "the tail is the top 32 bits"
);

/// Which doorbell register of the page, with the queue's id part of its
/// value, built once per queue from the typed definition.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub struct Doorbell {
    offset: u32,
    id_bits: u64,
}

impl Doorbell {
    /// The send queue doorbell of queue `id` (24 bits; a MANA queue id).
    pub fn sq(id: u32) -> Doorbell {
        Doorbell {
            offset: SqDoorbell::OFFSET as u32,
            id_bits: SqDoorbell::new().with_id(id & 0xff_ffff).to_raw(),
        }
    }

    /// The receive queue doorbell of queue `id` (`wqe_cnt` written as 0).
    pub fn rq(id: u32) -> Doorbell {
        Doorbell {
            offset: RqDoorbell::OFFSET as u32,
            id_bits: RqDoorbell::new().with_id(id & 0xff_ffff).to_raw(),
        }
    }

    /// The value announcing producer byte offset `tail` (same field in the
    /// SQ and RQ doorbells: bits 32-63).
    #[inline(always)]
    pub fn value(&self, tail: u32) -> u64 {
        self.id_bits | (u64::from(tail) * TAIL_ONE)
    }

    /// Rings it for `port_id` with producer byte offset `tail`.
    #[inline(always)]
    pub fn ring(&self, port_id: u16, tail: u32) {
        ring(port_id, self.offset as usize, self.value(tail));
    }
}

/// Arms completion queue `id` at consumer index `head` of `count` entries:
/// the device signals the completion channel on the next completion.
pub fn arm_cq(port_id: u16, id: u32, head: u32, count: u32) {
    // The id comes from the device (24 bits) and count is the ring's size;
    // a value that does not encode is a driver bug, not a device state.
    if let Ok(db) = CqDoorbell::arm_at(id & 0xff_ffff, head, count) {
        ring(port_id, CqDoorbell::OFFSET, db.to_raw());
    }
}

/// Writes a 64-bit doorbell of `port_id` at `offset` in this process's
/// doorbell page, after making the ring stores visible to the device.
#[inline(always)]
fn ring(port_id: u16, offset: usize, value: u64) {
    let page = page(port_id);
    // The doorbell page is write-combining: order the ring stores first.
    #[cfg(target_arch = "x86_64")]
    // SAFETY: sfence has no preconditions.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
    #[cfg(not(target_arch = "x86_64"))]
    std::sync::atomic::fence(Ordering::Release);
    // SAFETY: the page is this process's mapping of the doorbell page of the
    // context owning the queue: control sets it before any gate of the port
    // opens and swaps it only with every gate closed, so a burst (the only
    // caller, inside its gate) sees a mapped page; `offset` is one of the
    // 8-byte-aligned registers inside the 4 KiB page.
    unsafe { std::ptr::write_volatile(page.add(offset) as *mut u64, value.to_le()) };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The per-burst OR equals the doorbell built whole from the typed
    /// definition, for ids and tails over their whole range.
    #[test]
    fn split_doorbell_values_equal_the_typed_ones() {
        let ids = [0, 1, 0x12_3456, 0xff_ffff];
        let tails = [0, 32, 0x8000_0000, 0xffff_ffe0, 0xffff_ffff];
        for id in ids {
            for tail in tails {
                let sq = SqDoorbell::try_new(id, tail).unwrap().to_raw();
                assert_eq!(Doorbell::sq(id).value(tail), sq);
                let rq = RqDoorbell::new().with_id(id).with_tail_ptr(tail).to_raw();
                assert_eq!(Doorbell::rq(id).value(tail), rq);
            }
        }
        assert_eq!(Doorbell::sq(5).offset as usize, gdma::DOORBELL_OFFSET_SQ);
        assert_eq!(Doorbell::rq(5).offset as usize, gdma::DOORBELL_OFFSET_RQ);
    }
}

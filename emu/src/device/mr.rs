//! Memory registration: the MRs a PD owns, and the check of every SGE
//! against the registered memory of the queue's PD before the device
//! touches it.
//!
//! The one module of the device model with an `unsafe` block: registering
//! is where a driver's address range becomes a [`Region`] the device may
//! read and write. A memory key can also stand for a whole [`DmaSpace`]
//! (a PCI function's guest-physical key, see `hw`): its SGEs are
//! translated there, page by page.

#![allow(unsafe_code)]

use super::{Res, State, EINVAL, ENOMEM};
use crate::mem::{DmaSpace, Region};
use crate::wire::{self, vendor_err as ve};
use std::sync::Arc;

pub(super) struct Mr {
    pub(super) pd: u32,
    pub(super) mem: MrMem,
}

/// What a memory key covers.
pub(super) enum MrMem {
    /// A registered range of the driver's memory.
    Region(Region),
    /// Every mapped address of a space (guest-physical memory).
    Space(Arc<dyn DmaSpace>),
}

impl State {
    pub(super) fn base_pd(&self, pd: u32) -> u32 {
        self.pds.get(&pd).and_then(|p| p.parent_of).unwrap_or(pd)
    }

    /// # Contract
    /// `[addr, addr+len)` must be memory of this process that stays mapped
    /// until `dereg_mr` (as for real hardware DMA).
    pub fn reg_mr(&mut self, pd: u32, addr: usize, len: usize) -> Res<u32> {
        let p = self.pds.get(&pd).ok_or(EINVAL)?;
        let ctx = p.ctx;
        self.ctx_alive(ctx)?;
        if len == 0 || len as u64 > self.limits.max_mr_size() || addr.checked_add(len).is_none() {
            return Err(EINVAL);
        }
        if self.mrs.len() >= self.limits.max_mr as usize {
            return Err(ENOMEM);
        }
        self.take_alloc_fail()?;
        let lkey = self.next_lkey;
        self.next_lkey += 1;
        // SAFETY: `Region::new` needs the range mapped and writable while
        // the region is used. An MR's region is used only under the state
        // lock (`mr_lookup` in a device pass), and `dereg_mr` and
        // `close_context` remove it under that lock, so every use falls
        // between this registration and its end. The range is mapped for
        // that span because registering promises it, as DMA to real
        // hardware does: the verbs layer passes `ibv_reg_mr`'s range, which
        // the verbs API requires to stay mapped until `ibv_dereg_mr`, and
        // `testing::Ctx` registers a pool it owns and drops only after
        // closing its context. This method stays safe to keep its API; a
        // caller breaking the contract above is not caught here.
        let region = unsafe { Region::new(addr, len) };
        self.mrs.insert(
            lkey,
            Mr {
                pd,
                mem: MrMem::Region(region),
            },
        );
        Ok(lkey)
    }

    pub fn dereg_mr(&mut self, lkey: u32) -> Res<()> {
        self.mrs.remove(&lkey).map(|_| ()).ok_or(EINVAL)
    }

    /// The regions an SGE names, in order, after checking its key belongs
    /// to the queue's PD and its range to the key's memory.
    pub(super) fn mr_lookup(&self, base_pd: u32, sge: &wire::Sge) -> Result<Vec<Region>, u32> {
        let mr = self.mrs.get(&sge.mem_key).ok_or(ve::BAD_LKEY)?;
        if self.base_pd(mr.pd) != base_pd {
            return Err(ve::BAD_LKEY);
        }
        match &mr.mem {
            MrMem::Region(r) => {
                if !r.contains(sge.address, u64::from(sge.size)) {
                    return Err(ve::OUT_OF_MR);
                }
                let off = sge.address as usize - r.addr();
                Ok(vec![r.sub(off, sge.size as usize).expect("contained")])
            }
            MrMem::Space(s) => s
                .translate(sge.address, sge.size as usize)
                .ok_or(ve::OUT_OF_MR),
        }
    }
}

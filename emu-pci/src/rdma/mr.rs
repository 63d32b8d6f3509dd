//! Protection domains and memory regions for user memory
//! (`GDMA_CREATE_PD`, `GDMA_CREATE_MR` of type GVA): an MR takes over the
//! DMA region `mana_ib` built from the pinned user pages and maps the
//! process's virtual addresses onto them. Both are the PCI function's
//! objects (`mana_ib` sends these requests with no device id).

use crate::device::Device;
use crate::gdma::requests::{fail, gdma_general_resp, invalid, v1, Handled};
use crate::memory::GuestMemory;
use gdma::control::*;
use gdma::le::{U32, U64};
use gdma::WireType;
use mana_emu::mem::{DmaSpace, Region};
use std::sync::Arc;
use zerocopy::FromZeros;

/// A protection domain.
#[derive(Clone, Debug)]
pub struct Pd {
    pub id: u32,
    /// `GDMA_PD_FLAG_ALLOW_GPA_MR`: a kernel consumer's PD, which may hold
    /// guest-physical MRs.
    pub allow_gpa_mr: bool,
}

/// A guest-physical MR (`GDMA_MR_TYPE_GPA`): the key of a kernel
/// consumer's local DMA (7.x `ib_alloc_pd` asks one of every kernel PD).
#[derive(Clone, Debug)]
pub struct GpaMr {
    pub pd: u64,
    pub lkey: u32,
}

/// A memory region: virtual addresses `[iova, iova + length)` on the
/// pages of the DMA region it took over.
#[derive(Clone)]
pub struct Mr {
    pub pd: u64,
    pub lkey: u32,
    pub region: u64,
    pub access: u32,
    pub space: Arc<MrSpace>,
}

impl std::fmt::Debug for Mr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "MR lkey {:#x} on PD {:#x}: {:#x}+{:#x}",
            self.lkey, self.pd, self.space.iova, self.space.length
        )
    }
}

/// The address translation of an MR: a process's virtual addresses onto
/// guest-physical pages.
pub struct MrSpace {
    pub iova: u64,
    pub length: u64,
    offset: u64,
    page_size: u64,
    pages: Vec<u64>,
    mem: GuestMemory,
}

impl MrSpace {
    /// The guest-physical pieces of `[addr, addr + len)`, or `None` if any
    /// byte lies outside the MR.
    pub fn gpa_pieces(&self, addr: u64, len: u64) -> Option<Vec<(u64, u64)>> {
        let end = addr.checked_add(len)?;
        if addr < self.iova || end > self.iova + self.length {
            return None;
        }
        let mut rel = addr - self.iova + self.offset;
        let mut left = len;
        let mut out = Vec::new();
        while left > 0 {
            let page = *self.pages.get((rel / self.page_size) as usize)?;
            let within = rel % self.page_size;
            let n = left.min(self.page_size - within);
            match out.last_mut() {
                // Physically contiguous pages make one piece.
                Some((gpa, l)) if *gpa + *l == page + within => *l += n,
                _ => out.push((page + within, n)),
            }
            rel += n;
            left -= n;
        }
        Some(out)
    }
}

impl DmaSpace for MrSpace {
    fn translate(&self, addr: u64, len: usize) -> Option<Vec<Region>> {
        let mut regions = Vec::new();
        for (gpa, n) in self.gpa_pieces(addr, len as u64)? {
            regions.extend(self.mem.translate(gpa, n as usize)?);
        }
        Some(regions)
    }
}

impl Device {
    pub(crate) fn create_pd(&mut self, msg: &[u8]) -> Handled {
        let r = CreatePdReq::decode(msg).map_err(invalid)?;
        let flags = r.flags.get();
        if flags & !GDMA_PD_FLAG_ALLOW_GPA_MR != 0 {
            return Err(fail(
                status::NOT_SUPPORTED,
                format!("PD flags {flags:#x}: only GDMA_PD_FLAG_ALLOW_GPA_MR ({GDMA_PD_FLAG_ALLOW_GPA_MR})"),
            ));
        }
        let allow_gpa_mr = flags & GDMA_PD_FLAG_ALLOW_GPA_MR != 0;
        if self.rdma.pds.len() >= super::CAP_MAX_PD as usize {
            return Err(fail(
                status::INSUFFICIENT_RESOURCES,
                format!("{} PDs exist", super::CAP_MAX_PD),
            ));
        }
        // PD numbers after those of the HWC and the two functions.
        let id = (super::RDMA_PDID + 1..)
            .find(|i| self.rdma.pds.values().all(|p| p.id != *i))
            .unwrap();
        let h = self.rdma.next_handle;
        self.rdma.next_handle += 1;
        self.rdma.pds.insert(h, Pd { id, allow_gpa_mr });
        log::info!(
            "PD {id} (handle {h:#x}) created{}",
            if allow_gpa_mr {
                ", guest-physical MRs allowed"
            } else {
                ""
            }
        );
        let mut resp = CreatePdResp::new_zeroed();
        resp.pd_handle = U64::new(h);
        resp.pd_id = U32::new(id);
        v1(&resp)
    }

    pub(crate) fn destroy_pd(&mut self, msg: &[u8]) -> Handled {
        let r = DestroyPdReq::decode(msg).map_err(invalid)?;
        let h = r.pd_handle.get();
        if !self.rdma.pds.contains_key(&h) {
            return Err(fail(status::NOT_FOUND, format!("PD {h:#x} does not exist")));
        }
        if let Some(k) = self
            .rdma
            .mrs
            .values()
            .find(|m| m.pd == h)
            .map(|m| m.lkey)
            .or_else(|| {
                self.rdma
                    .gpa_mrs
                    .values()
                    .find(|m| m.pd == h)
                    .map(|m| m.lkey)
            })
        {
            return Err(fail(
                status::DEVICE_BUSY,
                format!("PD {h:#x} still has MR {k:#x}"),
            ));
        }
        if let Some((qh, _)) = self.rdma.qps.iter().find(|(_, q)| q.pd == h) {
            return Err(fail(
                status::DEVICE_BUSY,
                format!("PD {h:#x} still has QP {qh:#x}"),
            ));
        }
        if let Some(u) = self.vport.user.as_ref().filter(|u| u.pd_handle == h) {
            if let Some(o) = self.wq_objs.values().find(|o| o.page == u.db_page) {
                return Err(fail(
                    status::DEVICE_BUSY,
                    format!("PD {h:#x} still has the vPort's queue {}", o.wq_id),
                ));
            }
            self.unbind_user_vport();
        }
        let pd = self.rdma.pds.remove(&h).unwrap();
        log::info!("PD {} (handle {h:#x}) destroyed", pd.id);
        v1(&gdma_general_resp())
    }

    pub(crate) fn create_mr(&mut self, msg: &[u8]) -> Handled {
        let r = CreateMrReq::decode(msg).map_err(invalid)?;
        let pd = r.pd_handle.get();
        let Some(allow_gpa_mr) = self.rdma.pds.get(&pd).map(|p| p.allow_gpa_mr) else {
            return Err(fail(
                status::NOT_FOUND,
                format!("PD {pd:#x} does not exist"),
            ));
        };
        if r.mr_type.get() == GDMA_MR_TYPE_GPA {
            return self.create_gpa_mr(pd, allow_gpa_mr, &r);
        }
        if r.mr_type.get() != GDMA_MR_TYPE_GVA {
            return Err(fail(
                status::NOT_SUPPORTED,
                format!(
                    "MR type {}: only GPA ({GDMA_MR_TYPE_GPA}) and GVA ({GDMA_MR_TYPE_GVA})",
                    r.mr_type.get()
                ),
            ));
        }
        let access = r.access_flags.get();
        if access & !GDMA_ACCESS_FLAGS_VALID != 0 {
            return Err(fail(
                status::INVALID_PARAMETER,
                format!("access flags {access:#x}"),
            ));
        }
        if self.mr_count() >= super::CAP_MAX_MR as usize {
            return Err(fail(
                status::INSUFFICIENT_RESOURCES,
                format!("{} MRs exist", super::CAP_MAX_MR),
            ));
        }
        let rh = r.dma_region_handle.get();
        let reg = self.regions.get(&rh).ok_or_else(|| {
            fail(
                status::NOT_FOUND,
                format!("DMA region {rh:#x} does not exist"),
            )
        })?;
        if let Some(o) = &reg.owner {
            return Err(fail(
                status::DEVICE_BUSY,
                format!("DMA region {rh:#x} already belongs to {o}"),
            ));
        }
        if !reg.complete() {
            return Err(fail(
                status::INVALID_PARAMETER,
                format!(
                    "DMA region {rh:#x} has {} of its {} pages",
                    reg.pages.len(),
                    reg.page_count
                ),
            ));
        }
        let iova = r.virtual_address.get();
        if iova.checked_add(reg.length).is_none() {
            return Err(fail(
                status::INVALID_PARAMETER,
                format!("{:#x} bytes at {iova:#x} wrap around", reg.length),
            ));
        }
        let space = Arc::new(MrSpace {
            iova,
            length: reg.length,
            offset: u64::from(reg.offset_in_page),
            page_size: reg.page_size,
            pages: reg.pages.clone(),
            mem: self.mem.clone(),
        });
        if space.translate(iova, reg.length as usize).is_none() {
            return Err(fail(
                status::INVALID_PARAMETER,
                format!("DMA region {rh:#x} has pages outside guest memory"),
            ));
        }
        let lkey = self.free_lkey();
        let h = self.rdma.next_handle;
        self.rdma.next_handle += 1;
        self.regions.get_mut(&rh).unwrap().owner = Some(format!("MR {lkey:#x}"));
        // A PD the vPort is bound to: the key is usable at once.
        if let Some(u) = self.vport.user.as_ref().filter(|u| u.pd_handle == pd) {
            let _ = self.net.hw_register_space(u.model_pd, lkey, space.clone());
        }
        log::info!(
            "MR {lkey:#x} (handle {h:#x}): {:#x} bytes at {iova:#x}, {} pages of {} bytes",
            space.length,
            space.pages.len(),
            space.page_size
        );
        self.rdma.mrs.insert(
            h,
            Mr {
                pd,
                lkey,
                region: rh,
                access,
                space,
            },
        );
        let mut resp = CreateMrResp::new_zeroed();
        resp.mr_handle = U64::new(h);
        resp.lkey = U32::new(lkey);
        resp.rkey = U32::new(lkey);
        v1(&resp)
    }

    pub(crate) fn destroy_mr(&mut self, msg: &[u8]) -> Handled {
        let r = DestroyMrReq::decode(msg).map_err(invalid)?;
        let h = r.mr_handle.get();
        if let Some(m) = self.rdma.gpa_mrs.remove(&h) {
            log::info!("GPA MR {:#x} (handle {h:#x}) destroyed", m.lkey);
            return v1(&gdma_general_resp());
        }
        let Some(mr) = self.rdma.mrs.remove(&h) else {
            return Err(fail(status::NOT_FOUND, format!("MR {h:#x} does not exist")));
        };
        // The region went to the MR and goes with it.
        self.release_region(Some(mr.region));
        if self
            .vport
            .user
            .as_ref()
            .is_some_and(|u| u.pd_handle == mr.pd)
        {
            let _ = self.net.hw_unregister_space(mr.lkey);
        }
        log::info!("MR {:#x} (handle {h:#x}) destroyed", mr.lkey);
        v1(&gdma_general_resp())
    }

    fn mr_count(&self) -> usize {
        self.rdma.mrs.len() + self.rdma.gpa_mrs.len()
    }

    /// The lowest MR key no MR holds.
    fn free_lkey(&self) -> u32 {
        (0x1_0000..)
            .find(|k| {
                self.rdma.mrs.values().all(|m| m.lkey != *k)
                    && self.rdma.gpa_mrs.values().all(|m| m.lkey != *k)
            })
            .unwrap()
    }

    /// `GDMA_CREATE_MR` of type GPA: on a PD created with
    /// `GDMA_PD_FLAG_ALLOW_GPA_MR` only, and naming nothing but its PD.
    fn create_gpa_mr(&mut self, pd: u64, allowed: bool, r: &CreateMrReq) -> Handled {
        if !allowed {
            return Err(fail(
                status::INVALID_PARAMETER,
                format!(
                    "GPA MR on PD {pd:#x}, which was created without GDMA_PD_FLAG_ALLOW_GPA_MR"
                ),
            ));
        }
        if r.dma_region_handle.get() != 0
            || r.virtual_address.get() != 0
            || r.access_flags.get() != 0
        {
            return Err(fail(
                status::INVALID_PARAMETER,
                format!(
                    "GPA MR with DMA region {:#x}, VA {:#x}, access {:#x}: a GPA MR has none",
                    r.dma_region_handle.get(),
                    r.virtual_address.get(),
                    r.access_flags.get()
                ),
            ));
        }
        if self.mr_count() >= super::CAP_MAX_MR as usize {
            return Err(fail(
                status::INSUFFICIENT_RESOURCES,
                format!("{} MRs exist", super::CAP_MAX_MR),
            ));
        }
        let lkey = self.free_lkey();
        let h = self.rdma.next_handle;
        self.rdma.next_handle += 1;
        self.rdma.gpa_mrs.insert(h, GpaMr { pd, lkey });
        log::info!("GPA MR {lkey:#x} (handle {h:#x}) on PD {pd:#x}");
        let mut resp = CreateMrResp::new_zeroed();
        resp.mr_handle = U64::new(h);
        resp.lkey = U32::new(lkey);
        resp.rkey = U32::new(lkey);
        v1(&resp)
    }

    /// The MR whose key is `lkey`.
    pub fn mr_by_key(&self, lkey: u32) -> Option<&Mr> {
        self.rdma.mrs.values().find(|m| m.lkey == lkey)
    }
}

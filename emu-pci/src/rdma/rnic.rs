//! The adapter's own queues, which 7.x `mana_ib` creates for kernel
//! consumers of its RNIC device (`mana_0`): at registration the RDMA core's
//! `ib_mad` opens the RoCE port with a PD (`GDMA_PD_FLAG_ALLOW_GPA_MR`), a
//! guest-physical MR, CQs (`MANA_IB_CREATE_CQ`) and the GSI QP
//! (`MANA_IB_CREATE_UD_QP`), moves the QP to RTS (`MANA_IB_SET_QP_STATE`),
//! posts receive buffers and arms its CQs.
//!
//! The device holds these objects and accepts their doorbells, but carries
//! no RoCE traffic: nothing reaches a GSI QP on this function (no peer
//! speaks RoCE to it), so no WQE is ever completed. Sends posted to a UD SQ
//! are counted and not transmitted.

use super::{Adapter, RDMA_DB_PAGE};
use crate::device::{Device, QueueKind};
use crate::gdma::requests::{fail, gdma_general_resp, invalid, v1, Failure, Handled};
use crate::gdma::ring::Ring;
use gdma::control::*;
use gdma::le::{U32, U64};
use gdma::WireType;
use zerocopy::FromZeros;

/// A CQ of the adapter.
#[derive(Clone, Debug)]
pub struct RnicCq {
    pub id: u32,
    /// The RDMA device's EQ its completion events would go to.
    pub eq: u32,
    pub db_page: u32,
    pub region: u64,
    /// Its memory (never written: nothing completes).
    pub ring: Ring,
    /// Doorbells (arming) received.
    pub doorbells: u64,
}

/// A UD or GSI QP of the adapter.
#[derive(Clone, Debug)]
pub struct UdQp {
    /// `IB_QPT_GSI` or `IB_QPT_UD`.
    pub qp_type: u32,
    pub pd: u64,
    pub send_cq: u64,
    pub recv_cq: u64,
    /// Send and receive queue ids (the kernel's QP number is the RQ's).
    pub sq: u32,
    pub rq: u32,
    pub regions: [u64; 2],
    pub rings: [Ring; 2],
    pub db_page: u32,
    /// `enum ib_qp_state` of the last `MANA_IB_SET_QP_STATE`.
    pub state: u32,
    /// Doorbells received on the SQ (sends not carried) and the RQ.
    pub sq_doorbells: u64,
    pub rq_doorbells: u64,
}

impl UdQp {
    fn describe(&self, h: u64) -> String {
        format!(
            "{} QP {h:#x} (SQ {}, RQ {})",
            if self.qp_type == IB_QPT_GSI {
                "GSI"
            } else {
                "UD"
            },
            self.sq,
            self.rq
        )
    }
}

impl Device {
    /// The adapter `handle` of a request addressed to the RDMA device.
    fn rnic_adapter(&mut self, hdr: &ReqHdr, handle: u64) -> Result<&mut Adapter, Failure> {
        self.adapter_mut(hdr, handle)
    }

    /// A doorbell page the adapter's queues may be rung through: the RDMA
    /// device's own or one a user context holds.
    fn rnic_db_page(&self, page: u32) -> Result<(), Failure> {
        if page == RDMA_DB_PAGE || self.rdma.db_pages.contains(&page) {
            Ok(())
        } else {
            Err(fail(
                status::INVALID_PARAMETER,
                format!(
                    "doorbell page {page} is neither the RDMA device's ({RDMA_DB_PAGE}) nor allocated"
                ),
            ))
        }
    }

    /// Takes a whole DMA region over as the memory of `owner`.
    fn take_whole_region(&mut self, handle: u64, owner: String) -> Result<Ring, Failure> {
        let len = self.regions.get(&handle).map(|r| r.length).ok_or_else(|| {
            fail(
                status::NOT_FOUND,
                format!("DMA region {handle:#x} does not exist"),
            )
        })?;
        self.take_region(handle, len, owner)
            .map_err(|(s, why)| fail(s, why))
    }

    pub(crate) fn create_rnic_cq(&mut self, hdr: &ReqHdr, msg: &[u8]) -> Handled {
        let r = CreateCqReq::decode(msg).map_err(invalid)?;
        self.rnic_adapter(hdr, r.adapter.get())?;
        let eq = r.eq_id.get();
        match self.eqs.get(&eq) {
            Some(q) if q.owner == hdr.dev_id => {}
            Some(_) => {
                return Err(fail(
                    status::INVALID_PARAMETER,
                    format!("EQ {eq} is not the RDMA device's"),
                ))
            }
            None => return Err(fail(status::NOT_FOUND, format!("EQ {eq} does not exist"))),
        }
        let page = r.doorbell_page.get();
        self.rnic_db_page(page)?;
        if self.rdma.cqs.len() >= super::CAP_MAX_CQ as usize {
            return Err(fail(
                status::INSUFFICIENT_RESOURCES,
                format!("{} CQs exist", super::CAP_MAX_CQ),
            ));
        }
        let id = self
            .cq_ids
            .alloc()
            .ok_or_else(|| fail(status::INSUFFICIENT_RESOURCES, "no CQ id left"))?;
        let region = r.gdma_region.get();
        let ring = match self.take_whole_region(region, format!("RNIC CQ {id}")) {
            Ok(ring) => ring,
            Err(e) => {
                self.cq_ids.free(id);
                return Err(e);
            }
        };
        self.revive_queue(page, QueueKind::Cq, id);
        let h = self.rdma.next_handle;
        self.rdma.next_handle += 1;
        log::info!(
            "RNIC CQ {id} (handle {h:#x}): {} bytes, events to EQ {eq}, doorbell page {page}",
            ring.len()
        );
        self.rdma.cqs.insert(
            h,
            RnicCq {
                id,
                eq,
                db_page: page,
                region,
                ring,
                doorbells: 0,
            },
        );
        let mut resp = CreateCqResp::new_zeroed();
        resp.cq_handle = U64::new(h);
        resp.cq_id = U32::new(id);
        v1(&resp)
    }

    pub(crate) fn destroy_rnic_cq(&mut self, hdr: &ReqHdr, msg: &[u8]) -> Handled {
        let r = DestroyCqReq::decode(msg).map_err(invalid)?;
        self.rnic_adapter(hdr, r.adapter.get())?;
        let h = r.cq_handle.get();
        if !self.rdma.cqs.contains_key(&h) {
            return Err(fail(status::NOT_FOUND, format!("CQ {h:#x} does not exist")));
        }
        if let Some((qh, q)) = self
            .rdma
            .qps
            .iter()
            .find(|(_, q)| q.send_cq == h || q.recv_cq == h)
        {
            return Err(fail(
                status::DEVICE_BUSY,
                format!("CQ {h:#x} still serves {}", q.describe(*qh)),
            ));
        }
        let cq = self.rdma.cqs.remove(&h).unwrap();
        self.drop_rnic_cq(&cq);
        log::info!(
            "RNIC CQ {} (handle {h:#x}) destroyed ({} doorbells)",
            cq.id,
            cq.doorbells
        );
        v1(&gdma_general_resp())
    }

    fn drop_rnic_cq(&mut self, cq: &RnicCq) {
        self.cq_ids.free(cq.id);
        self.retire_queue(cq.db_page, QueueKind::Cq, cq.id);
        // The region went to the CQ and goes with it.
        self.release_region(Some(cq.region));
    }

    pub(crate) fn create_ud_qp(&mut self, hdr: &ReqHdr, msg: &[u8]) -> Handled {
        let r = CreateUdQpReq::decode(msg).map_err(invalid)?;
        self.rnic_adapter(hdr, r.adapter.get())?;
        let pd = r.pd_handle.get();
        if !self.rdma.pds.contains_key(&pd) {
            return Err(fail(
                status::NOT_FOUND,
                format!("PD {pd:#x} does not exist"),
            ));
        }
        let (scq, rcq) = (r.send_cq_handle.get(), r.recv_cq_handle.get());
        for h in [scq, rcq] {
            if !self.rdma.cqs.contains_key(&h) {
                return Err(fail(status::NOT_FOUND, format!("CQ {h:#x} does not exist")));
            }
        }
        let page = r.doorbell_page.get();
        self.rnic_db_page(page)?;
        if self.rdma.qps.len() >= super::CAP_MAX_QP as usize {
            return Err(fail(
                status::INSUFFICIENT_RESOURCES,
                format!("{} QPs exist", super::CAP_MAX_QP),
            ));
        }
        let regions = [r.dma_region[0].get(), r.dma_region[1].get()];
        if regions[0] == regions[1] {
            return Err(fail(
                status::INVALID_PARAMETER,
                format!("SQ and RQ on the same DMA region {:#x}", regions[0]),
            ));
        }
        let Some(sq) = self.wq_ids.alloc() else {
            return Err(fail(status::INSUFFICIENT_RESOURCES, "no WQ id left"));
        };
        let Some(rq) = self.wq_ids.alloc() else {
            self.wq_ids.free(sq);
            return Err(fail(status::INSUFFICIENT_RESOURCES, "no WQ id left"));
        };
        let sring = match self.take_whole_region(regions[0], format!("UD SQ {sq}")) {
            Ok(x) => x,
            Err(e) => {
                self.wq_ids.free(sq);
                self.wq_ids.free(rq);
                return Err(e);
            }
        };
        let rring = match self.take_whole_region(regions[1], format!("UD RQ {rq}")) {
            Ok(x) => x,
            Err(e) => {
                self.regions.get_mut(&regions[0]).unwrap().owner = None;
                self.wq_ids.free(sq);
                self.wq_ids.free(rq);
                return Err(e);
            }
        };
        self.revive_queue(page, QueueKind::Sq, sq);
        self.revive_queue(page, QueueKind::Rq, rq);
        let h = self.rdma.next_handle;
        self.rdma.next_handle += 1;
        let qp = UdQp {
            qp_type: r.qp_type.get(),
            pd,
            send_cq: scq,
            recv_cq: rcq,
            sq,
            rq,
            regions,
            rings: [sring, rring],
            db_page: page,
            state: 0,
            sq_doorbells: 0,
            rq_doorbells: 0,
        };
        log::info!(
            "{} created: {} + {} bytes, {} send / {} receive WRs, doorbell page {page}",
            qp.describe(h),
            qp.rings[0].len(),
            qp.rings[1].len(),
            r.max_send_wr.get(),
            r.max_recv_wr.get()
        );
        self.rdma.qps.insert(h, qp);
        let mut resp = CreateUdQpResp::new_zeroed();
        resp.qp_handle = U64::new(h);
        resp.queue_ids = [U32::new(sq), U32::new(rq)];
        v1(&resp)
    }

    pub(crate) fn destroy_ud_qp(&mut self, hdr: &ReqHdr, msg: &[u8]) -> Handled {
        let r = DestroyUdQpReq::decode(msg).map_err(invalid)?;
        self.rnic_adapter(hdr, r.adapter.get())?;
        let h = r.qp_handle.get();
        let Some(qp) = self.rdma.qps.remove(&h) else {
            return Err(fail(status::NOT_FOUND, format!("QP {h:#x} does not exist")));
        };
        self.drop_ud_qp(&qp);
        log::info!(
            "{} destroyed ({} SQ and {} RQ doorbells)",
            qp.describe(h),
            qp.sq_doorbells,
            qp.rq_doorbells
        );
        v1(&gdma_general_resp())
    }

    fn drop_ud_qp(&mut self, qp: &UdQp) {
        for (kind, id) in [(QueueKind::Sq, qp.sq), (QueueKind::Rq, qp.rq)] {
            self.wq_ids.free(id);
            self.retire_queue(qp.db_page, kind, id);
        }
        for r in qp.regions {
            self.release_region(Some(r));
        }
    }

    pub(crate) fn set_qp_state(&mut self, hdr: &ReqHdr, msg: &[u8]) -> Handled {
        let r = SetQpStateReq::decode(msg).map_err(invalid)?;
        self.rnic_adapter(hdr, r.adapter.get())?;
        let h = r.qp_handle.get();
        let Some(qp) = self.rdma.qps.get_mut(&h) else {
            return Err(fail(status::NOT_FOUND, format!("QP {h:#x} does not exist")));
        };
        // IB_QP_STATE: the only attribute the device acts on; UD and GSI
        // QPs carry their addresses in each WQE.
        if r.attr_mask.get() & 1 != 0 {
            qp.state = r.qp_state.get();
        }
        log::info!(
            "QP {h:#x}: state {} (attr_mask {:#x}, qkey {:#x})",
            qp.state,
            r.attr_mask.get(),
            r.qkey.get()
        );
        v1(&gdma_general_resp())
    }

    /// A doorbell for one of the adapter's queues: counted; `false` if no
    /// adapter queue has that id on that page.
    pub(crate) fn rnic_doorbell(&mut self, page: u32, db: &gdma::Doorbell) -> bool {
        let id = db.id();
        match db {
            gdma::Doorbell::Cq(_) => {
                match self
                    .rdma
                    .cqs
                    .values_mut()
                    .find(|c| c.db_page == page && c.id == id)
                {
                    Some(c) => c.doorbells += 1,
                    None => return false,
                }
            }
            gdma::Doorbell::Sq(_) => {
                match self
                    .rdma
                    .qps
                    .values_mut()
                    .find(|q| q.db_page == page && q.sq == id)
                {
                    Some(q) => {
                        q.sq_doorbells += 1;
                        log::info!("UD SQ {id}: send not carried (no RoCE on this function)");
                    }
                    None => return false,
                }
            }
            gdma::Doorbell::Rq(_) => {
                match self
                    .rdma
                    .qps
                    .values_mut()
                    .find(|q| q.db_page == page && q.rq == id)
                {
                    Some(q) => q.rq_doorbells += 1,
                    None => return false,
                }
            }
            gdma::Doorbell::Eq(_) => return false,
        }
        true
    }

    /// Drops the adapter's queues (its destruction by deregistration or a
    /// reset); returns what was alive.
    pub(crate) fn rnic_drop_queues(&mut self) -> Vec<String> {
        let mut leaked = Vec::new();
        for (h, qp) in std::mem::take(&mut self.rdma.qps) {
            self.drop_ud_qp(&qp);
            leaked.push(qp.describe(h));
        }
        for (h, cq) in std::mem::take(&mut self.rdma.cqs) {
            self.drop_rnic_cq(&cq);
            leaked.push(format!("RNIC CQ {} (handle {h:#x})", cq.id));
        }
        leaked
    }
}

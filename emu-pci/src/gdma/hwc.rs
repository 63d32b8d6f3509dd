//! The hardware channel: four one-page queues the SMC names (EQ, CQ, RQ,
//! SQ). The driver posts a request on the SQ (a 24-byte `hwc_tx_oob` and
//! one SGE naming the message) and rings; the device answers into the next
//! buffer the driver posted on the RQ, completes both WQEs on the CQ (SQ
//! first), and the CQ, if armed, raises a completion event on the EQ.
//! Responses wait in the device while the RQ has no buffer.

use super::eq::Eq;
use super::ring::{Producer, Ring, PAGE};
use super::{Registration, HWC_DB_PAGE, MAX_CQS};
use crate::device::{Device, QueueKind};
use gdma::control::{DevId, GDMA_DEVICE_HWC, HWC_MAX_REQUEST_SIZE, HWC_MAX_RESPONSE_SIZE};
use gdma::{
    CqeInfo, EqeType, HwcInitData, HwcInitEqIdDb, HwcInitTypeData, HwcRxOob, HwcTxOob,
    SmcEstablishHwc, WireType, WqType,
};
use std::collections::VecDeque;
use zerocopy::{FromZeros, IntoBytes};

/// The HWC's protection domain and memory key for its message buffers.
pub const HWC_PDID: u32 = 1;
pub const HWC_GPA_MKEY: u32 = 0x100;
/// Queue depth the device reports (`HWC_INIT_DATA_QUEUE_DEPTH`): the
/// bootstrap depth the kernel uses.
const HWC_QUEUE_DEPTH: u32 = 1;

/// A work queue the device consumes: `off` is its consumer position and
/// `tail` the producer position the driver rang (both byte counts, never
/// reduced modulo the ring).
pub struct HwcWq {
    pub id: u32,
    pub ring: Ring,
    pub off: u32,
    pub tail: u32,
}

pub struct HwcCq {
    pub id: u32,
    pub producer: Producer,
}

pub struct Hwc {
    pub eq: u32,
    pub cq: HwcCq,
    pub rq: HwcWq,
    pub sq: HwcWq,
    /// Responses waiting for a receive buffer.
    pub pending: VecDeque<Vec<u8>>,
    /// The device raised `GDMA_EQE_HWC_RESET_REQUEST`: from then on it
    /// takes requests off the SQ and answers none, as the hardware does
    /// (the kernel's `mana_serv_reset` stops waiting: "HWC is not
    /// responding"). Answering would race the kernel's zero timeout: a
    /// late answer fails the caller anyway, and the kernel reuses the
    /// request buffer for its next request before the device reads it.
    pub reset_requested: bool,
}

fn one_page(dev: &Device, what: &str, gpa: u64) -> Result<Ring, String> {
    Ring::new(&dev.mem, &[gpa]).map_err(|a| format!("HWC {what} at {a:#x} is not guest memory"))
}

impl Hwc {
    pub(crate) fn create(dev: &mut Device, req: &SmcEstablishHwc) -> Result<Hwc, String> {
        let eq_ring = one_page(dev, "EQ", req.eq_addr)?;
        let cq_ring = one_page(dev, "CQ", req.cq_addr)?;
        let rq_ring = one_page(dev, "RQ", req.rq_addr)?;
        let sq_ring = one_page(dev, "SQ", req.sq_addr)?;
        if usize::from(req.eq_msix_index) >= dev.irqs.count() {
            return Err(format!(
                "EQ MSI-X vector {} of {}",
                req.eq_msix_index,
                dev.irqs.count()
            ));
        }
        let eq = dev.eq_ids.alloc().ok_or("no EQ id left")?;
        let cq = dev.cq_ids.alloc().ok_or("no CQ id left")?;
        let rq = dev.wq_ids.alloc().ok_or("no WQ id left")?;
        let sq = dev.wq_ids.alloc().ok_or("no WQ id left")?;
        dev.revive_queue(HWC_DB_PAGE, QueueKind::Eq, eq);
        dev.revive_queue(HWC_DB_PAGE, QueueKind::Cq, cq);
        dev.revive_queue(HWC_DB_PAGE, QueueKind::Rq, rq);
        dev.revive_queue(HWC_DB_PAGE, QueueKind::Sq, sq);
        dev.eqs.insert(
            eq,
            Eq {
                id: eq,
                owner: DevId::new(GDMA_DEVICE_HWC, 0),
                producer: Producer::new(eq_ring, gdma::EQE_SIZE, true),
                msix: req.eq_msix_index,
                db_page: HWC_DB_PAGE,
                region: None,
                events: 0,
                interrupts: 0,
            },
        );
        dev.registered.insert(
            DevId::new(GDMA_DEVICE_HWC, 0).as_u32(),
            Registration {
                pdid: HWC_PDID,
                gpa_mkey: HWC_GPA_MKEY,
                db_page: HWC_DB_PAGE,
            },
        );
        Ok(Hwc {
            eq,
            // Nothing arms the HWC's CQ before its first completion.
            cq: HwcCq {
                id: cq,
                producer: Producer::new(cq_ring, gdma::CQE_SIZE, true),
            },
            rq: HwcWq {
                id: rq,
                ring: rq_ring,
                off: 0,
                tail: 0,
            },
            sq: HwcWq {
                id: sq,
                ring: sq_ring,
                off: 0,
                tail: 0,
            },
            pending: VecDeque::new(),
            reset_requested: false,
        })
    }

    /// Marks the HWC's ids used again (after the other objects were reset).
    pub(crate) fn reserve_ids(&self, dev: &mut Device) {
        dev.eq_ids.reserve(self.eq);
        dev.cq_ids.reserve(self.cq.id);
        dev.wq_ids.reserve(self.rq.id);
        dev.wq_ids.reserve(self.sq.id);
    }

    pub(crate) fn release(self, dev: &mut Device) {
        // The driver's interrupt handler may still re-arm the CQ and EQ
        // after the teardown (it rings after completing the last request).
        dev.retire_queue(HWC_DB_PAGE, QueueKind::Eq, self.eq);
        dev.retire_queue(HWC_DB_PAGE, QueueKind::Cq, self.cq.id);
        dev.retire_queue(HWC_DB_PAGE, QueueKind::Rq, self.rq.id);
        dev.retire_queue(HWC_DB_PAGE, QueueKind::Sq, self.sq.id);
        dev.eqs.remove(&self.eq);
        dev.eq_ids.free(self.eq);
        dev.cq_ids.free(self.cq.id);
        dev.wq_ids.free(self.rq.id);
        dev.wq_ids.free(self.sq.id);
        dev.registered
            .remove(&DevId::new(GDMA_DEVICE_HWC, 0).as_u32());
    }
}

impl Device {
    /// The HWC's parameters, as EQEs, after a successful establish.
    pub(crate) fn announce_hwc(&mut self) {
        let h = self.hwc.as_ref().expect("just established");
        let (eq, cq, rq, sq) = (h.eq, h.cq.id, h.rq.id, h.sq.id);
        let id_db = HwcInitEqIdDb::new()
            .with_eq_id(eq as u16)
            .with_doorbell(HWC_DB_PAGE as u16)
            .into_bits();
        self.post_eqe(eq, EqeType::GDMA_EQE_HWC_INIT_EQ_ID_DB, id_db);
        use HwcInitData::*;
        for (ty, v) in [
            (HWC_INIT_DATA_CQID, cq),
            (HWC_INIT_DATA_RQID, rq),
            (HWC_INIT_DATA_SQID, sq),
            (HWC_INIT_DATA_QUEUE_DEPTH, HWC_QUEUE_DEPTH),
            (HWC_INIT_DATA_MAX_REQUEST, HWC_MAX_REQUEST_SIZE),
            (HWC_INIT_DATA_MAX_RESPONSE, HWC_MAX_RESPONSE_SIZE),
            (HWC_INIT_DATA_MAX_NUM_CQS, MAX_CQS),
            (HWC_INIT_DATA_PDID, HWC_PDID),
            (HWC_INIT_DATA_GPA_MKEY, HWC_GPA_MKEY),
        ] {
            let d = HwcInitTypeData::try_new(ty, v).expect("values fit 24 bits");
            self.post_eqe(eq, EqeType::GDMA_EQE_HWC_INIT_DATA, d.into_bits());
        }
        self.post_eqe(eq, EqeType::GDMA_EQE_HWC_INIT_DONE, 0);
    }

    /// Whether `(page, kind id)` names one of the HWC's queues.
    pub(crate) fn hwc_sq(&self, page: u32, id: u32) -> bool {
        page == HWC_DB_PAGE && self.hwc.as_ref().is_some_and(|h| h.sq.id == id)
    }
    pub(crate) fn hwc_rq(&self, page: u32, id: u32) -> bool {
        page == HWC_DB_PAGE && self.hwc.as_ref().is_some_and(|h| h.rq.id == id)
    }
    pub(crate) fn hwc_cq(&self, page: u32, id: u32) -> bool {
        page == HWC_DB_PAGE && self.hwc.as_ref().is_some_and(|h| h.cq.id == id)
    }

    /// The driver rang the HWC's SQ: take every request up to `tail`.
    pub(crate) fn hwc_sq_doorbell(&mut self, tail: u32) {
        self.hwc.as_mut().unwrap().sq.tail = tail;
        loop {
            let h = self.hwc.as_ref().unwrap();
            if h.sq.off == h.sq.tail {
                break;
            }
            let off = h.sq.off;
            let mut page = vec![0u8; PAGE];
            h.sq.ring.read_wrapping(0, &mut page);
            let parsed = gdma::read_wqe(&page, off, WqType::Sq)
                .map_err(|e| e.to_string())
                .and_then(|w| {
                    let oob = HwcTxOob::decode(w.inline_oob()).map_err(|e| e.to_string())?;
                    let sges: Vec<_> = w.sges().collect();
                    Ok((w.size_bu(), oob, sges))
                });
            let (size_bu, _oob, sges) = match parsed {
                Ok(p) => p,
                Err(e) => {
                    // Without a valid WQE the device cannot tell how far to
                    // go; it stops taking requests until the next doorbell.
                    self.error(
                        "hwc",
                        format_args!("SQ WQE at {off:#x}: {e}; request dropped"),
                    );
                    let h = self.hwc.as_mut().unwrap();
                    h.sq.off = h.sq.tail;
                    break;
                }
            };
            self.hwc.as_mut().unwrap().sq.off = off.wrapping_add(size_bu * 32);
            let msg = match self.hwc_message(&sges) {
                Ok(m) => m,
                Err(e) => {
                    self.error(
                        "hwc",
                        format_args!("SQ WQE at {off:#x}: {e}; request dropped"),
                    );
                    continue;
                }
            };
            let sq_id = self.hwc.as_ref().unwrap().sq.id;
            if self.hwc.as_ref().unwrap().reset_requested {
                let name = gdma::control::ReqHdr::decode(&msg)
                    .map(|h| crate::ledger::request_name(h.req.msg_type.get()))
                    .unwrap_or_else(|_| "malformed request".into());
                log::debug!("{name} during the service reset: taken, not answered");
                self.ledger.unanswered_in_reset(&name);
                self.hwc_complete(sq_id, true, off, 0);
                continue;
            }
            let resp = self.handle_request(&msg);
            self.hwc_complete(sq_id, true, off, 0);
            self.hwc.as_mut().unwrap().pending.push_back(resp);
            self.hwc_deliver();
        }
    }

    /// The request bytes a WQE's SGL names: one SGE with the HWC's memory
    /// key, inside guest memory, at most the maximum request size.
    fn hwc_message(&self, sges: &[gdma::Sge]) -> Result<Vec<u8>, String> {
        let [sge] = sges else {
            return Err(format!("{} SGEs, the HWC takes one", sges.len()));
        };
        if sge.mem_key.get() != HWC_GPA_MKEY {
            return Err(format!(
                "memory key {:#x}, the HWC's is {HWC_GPA_MKEY:#x}",
                sge.mem_key.get()
            ));
        }
        let (addr, size) = (sge.address.get(), sge.size.get() as usize);
        if size > HWC_MAX_REQUEST_SIZE as usize {
            return Err(format!(
                "{size}-byte request, at most {HWC_MAX_REQUEST_SIZE}"
            ));
        }
        let w = self
            .mem
            .window(addr, size)
            .ok_or_else(|| format!("request buffer {addr:#x}+{size} is not guest memory"))?;
        let mut msg = vec![0u8; size];
        w.read(0, &mut msg);
        Ok(msg)
    }

    /// The driver rang the HWC's RQ (posted receive buffers).
    pub(crate) fn hwc_rq_doorbell(&mut self, tail: u32) {
        self.hwc.as_mut().unwrap().rq.tail = tail;
        self.hwc_deliver();
    }

    /// Writes waiting responses into posted receive buffers.
    fn hwc_deliver(&mut self) {
        loop {
            let h = self.hwc.as_mut().unwrap();
            if h.pending.is_empty() || h.rq.off == h.rq.tail {
                return;
            }
            let off = h.rq.off;
            let mut page = vec![0u8; PAGE];
            h.rq.ring.read_wrapping(0, &mut page);
            let sge = gdma::read_wqe(&page, off, WqType::Rq)
                .map_err(|e| e.to_string())
                .and_then(|w| {
                    let s: Vec<_> = w.sges().collect();
                    match s[..] {
                        [s] => Ok((w.size_bu(), s)),
                        _ => Err(format!("{} SGEs, the HWC takes one", s.len())),
                    }
                });
            let (size_bu, sge) = match sge {
                Ok(x) => x,
                Err(e) => {
                    self.error(
                        "hwc",
                        format_args!("RQ WQE at {off:#x}: {e}; receive buffers ignored"),
                    );
                    let h = self.hwc.as_mut().unwrap();
                    h.rq.off = h.rq.tail;
                    return;
                }
            };
            h.rq.off = off.wrapping_add(size_bu * 32);
            let resp = h.pending.pop_front().unwrap();
            let rq_id = h.rq.id;
            let (addr, size) = (sge.address.get(), sge.size.get() as usize);
            let fits = sge.mem_key.get() == HWC_GPA_MKEY && resp.len() <= size;
            match self.mem.window(addr, resp.len()).filter(|_| fits) {
                Some(w) => {
                    w.write(0, &resp);
                    self.ledger.responses += 1;
                    self.hwc_complete(rq_id, false, off, resp.len() as u32);
                }
                None => {
                    self.error(
                        "hwc",
                        format_args!(
                            "RQ buffer {addr:#x}+{size} (key {:#x}) cannot take a {}-byte response; dropped",
                            sge.mem_key.get(),
                            resp.len()
                        ),
                    );
                }
            }
        }
    }

    /// A CQE on the HWC's CQ for the WQE at `off` of queue `wq`, and the
    /// completion event if the CQ is armed.
    fn hwc_complete(&mut self, wq: u32, is_sq: bool, off: u32, len: u32) {
        let h = self.hwc.as_mut().unwrap();
        let ring_len = if is_sq {
            h.sq.ring.len()
        } else {
            h.rq.ring.len()
        } as u32;
        let mut oob = HwcRxOob::new_zeroed();
        oob.dw0 = oob.dw0.with_som(true).with_eom(true);
        oob.wqe_offset = (off % ring_len).into();
        oob.tx_oob_data_size = len.into();
        let mut body = [0u8; gdma::CQE_DATA_SIZE];
        body[..32].copy_from_slice(oob.as_bytes());
        let info = CqeInfo::try_new(wq, is_sq, 0).expect("HWC ids fit 24 bits");
        let (cq, eq) = (h.cq.id, h.eq);
        if h.cq.producer.push(&body, info.to_raw(), 29) {
            self.post_eqe(eq, EqeType::GDMA_EQE_COMPLETION, cq);
        }
    }

    /// A CQ doorbell for the HWC's CQ.
    pub(crate) fn hwc_cq_doorbell(&mut self, tail: u32, arm: bool) {
        if !arm {
            return;
        }
        let h = self.hwc.as_mut().unwrap();
        let (cq, eq) = (h.cq.id, h.eq);
        match h.cq.producer.arm(tail) {
            Ok(true) => self.post_eqe(eq, EqeType::GDMA_EQE_COMPLETION, cq),
            Ok(false) => {}
            Err(d) => self.error(
                "hwc",
                format_args!("CQ doorbell tail {tail}: {d} entries off (overflow)"),
            ),
        }
    }
}

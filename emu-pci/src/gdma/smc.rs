//! The shared-memory channel: the driver writes eight dwords, the last one
//! a request header; the device acts and writes a response header back
//! (direction 1, status, window owned by the driver again). Requests are
//! handled inside the write, so the driver never sees the window busy.

use super::hwc::Hwc;
use crate::device::Device;
use gdma::{
    SmcEstablishHwc, SmcHeader, WireType, SMC_HEADER_OFFSET, SMC_MSG_TYPE_DESTROY_HWC,
    SMC_MSG_TYPE_ESTABLISH_HWC,
};

/// SMC status for a refused request (the kernel only tests for non-zero).
const SMC_STATUS_FAILED: u8 = 1;

impl Device {
    pub(crate) fn smc_write(&mut self, off: usize, data: &[u8]) {
        self.smc[off..off + data.len()].copy_from_slice(data);
        if off + data.len() > SMC_HEADER_OFFSET {
            self.smc_request();
        }
    }

    fn smc_request(&mut self) {
        let raw = u32::from_le_bytes(self.smc[SMC_HEADER_OFFSET..].try_into().unwrap());
        let hdr = match SmcHeader::decode(&raw.to_le_bytes()) {
            Ok(h) => h,
            Err(e) => {
                self.error(
                    "smc",
                    format_args!("request header {raw:#010x} refused: {e}"),
                );
                let h = SmcHeader::from_raw(raw);
                self.smc_respond(h, SMC_STATUS_FAILED);
                return;
            }
        };
        if hdr.reset_vf() {
            log::info!("SMC request with reset_vf: resetting the function first");
            self.reset_objects("an SMC request with reset_vf");
        }
        let status = match hdr.msg_type() {
            SMC_MSG_TYPE_ESTABLISH_HWC => match self.establish_hwc() {
                Ok(()) => 0,
                Err(why) => {
                    self.error("smc", format_args!("ESTABLISH_HWC refused: {why}"));
                    SMC_STATUS_FAILED
                }
            },
            SMC_MSG_TYPE_DESTROY_HWC => {
                self.destroy_hwc();
                0
            }
            _ => unreachable!("SmcHeader::decode accepts only the two types"),
        };
        self.smc_respond(hdr, status);
        if status == 0 && hdr.msg_type() == SMC_MSG_TYPE_ESTABLISH_HWC {
            self.announce_hwc();
        }
    }

    fn smc_respond(&mut self, req: SmcHeader, status: u8) {
        let r = SmcHeader::response_to(req, status);
        self.smc[SMC_HEADER_OFFSET..].copy_from_slice(&r.to_raw().to_le_bytes());
    }

    fn establish_hwc(&mut self) -> Result<(), String> {
        if self.hwc.is_some() {
            return Err("the HWC is already established".into());
        }
        let req = SmcEstablishHwc::decode(&self.smc).map_err(|e| e.to_string())?;
        let hwc = Hwc::create(self, &req)?;
        log::info!(
            "HWC established: EQ {} (MSI-X {}), CQ {}, RQ {}, SQ {}",
            hwc.eq,
            req.eq_msix_index,
            hwc.cq.id,
            hwc.rq.id,
            hwc.sq.id
        );
        self.hwc = Some(hwc);
        self.ledger.hwc_established += 1;
        Ok(())
    }

    fn destroy_hwc(&mut self) {
        let Some(hwc) = self.hwc.take() else {
            log::warn!("DESTROY_HWC without an HWC: nothing to do");
            return;
        };
        if !hwc.pending.is_empty() {
            self.error(
                "hwc",
                format_args!(
                    "{} responses never delivered (no receive buffer)",
                    hwc.pending.len()
                ),
            );
        }
        let in_reset = hwc.reset_requested;
        hwc.release(self);
        if in_reset {
            // What the driver could not destroy unanswered goes with the
            // reset, as on the hardware: not the driver's leak.
            let taken = self.take_objects();
            if !taken.is_empty() {
                log::info!(
                    "service reset: {} objects the driver could not destroy unanswered go with it: {}",
                    taken.len(),
                    taken.join(", ")
                );
            }
            self.ledger.taken_by_reset.extend(taken);
        } else {
            self.reset_objects("HWC teardown");
        }
        self.ledger.hwc_destroyed += 1;
        log::info!("HWC destroyed");
    }

    /// Destroys every object the driver left (recording each as leaked):
    /// what the function holds when its HWC goes away or it is reset.
    pub(crate) fn reset_objects(&mut self, when: &str) {
        for l in self.take_objects() {
            log::warn!("{when}: {l} was still alive; destroyed by the device");
            self.ledger.leaked.push(l);
        }
    }

    /// Destroys every object but the HWC's; describes each.
    fn take_objects(&mut self) -> Vec<String> {
        let mut leaked = Vec::new();
        for (id, eq) in std::mem::take(&mut self.eqs) {
            leaked.push(format!("EQ {id} (owner {:#x})", eq.owner.as_u32()));
            self.retire_queue(eq.db_page, crate::device::QueueKind::Eq, id);
        }
        for (h, r) in std::mem::take(&mut self.regions) {
            leaked.push(format!(
                "DMA region {h:#x} ({} bytes{})",
                r.length,
                r.owner.map(|o| format!(", of {o}")).unwrap_or_default()
            ));
        }
        for (dev, _) in std::mem::take(&mut self.registered) {
            if dev != gdma::control::DevId::new(gdma::control::GDMA_DEVICE_HWC, 0).as_u32() {
                leaked.push(format!("registration of device {dev:#x}"));
            }
        }
        leaked.extend(self.mana_reset());
        leaked.extend(self.rdma_reset());
        self.eq_ids = super::IdPool::new(0, super::MAX_EQS);
        self.cq_ids = super::IdPool::new(0, super::MAX_CQS);
        self.wq_ids = super::IdPool::new(0, super::MAX_WQS);
        if let Some(hwc) = self.hwc.take() {
            // The HWC's own objects stay while it is up.
            hwc.reserve_ids(self);
            self.hwc = Some(hwc);
        }
        leaked
    }
}

//! Event queues: the device posts 16-byte EQEs (a CQ's completion, a test
//! event, the HWC's setup parameters) and raises the EQ's MSI-X vector when
//! the EQ is armed. An EQ starts armed (the kernel expects the test event
//! of a new EQ to interrupt before it ever rang the EQ); an interrupt
//! disarms it, and the driver re-arms it with an EQ doorbell carrying its
//! consumer index, which interrupts again at once if entries wait.

use super::ring::Producer;
use crate::device::{Device, QueueKind};
use gdma::control::DevId;
use gdma::{EqeInfo, EqeType};
use zerocopy::IntoBytes;

pub struct Eq {
    pub id: u32,
    /// The GDMA device that owns it (HWC or MANA).
    pub owner: DevId,
    pub producer: Producer,
    pub msix: u16,
    pub db_page: u32,
    /// The DMA region the EQ was created from (None for the HWC's, which
    /// the SMC names page by page).
    pub region: Option<u64>,
    /// EQEs posted, interrupts raised.
    pub events: u64,
    pub interrupts: u64,
}

/// Bit position of the owner bits in an EQE's info dword.
const EQE_OWNER_SHIFT: u32 = 29;

impl Device {
    /// Posts an EQE of type `ty` with `details[0] = detail` (and zeros
    /// after) to EQ `eq`, interrupting if armed.
    pub(crate) fn post_eqe(&mut self, eq: u32, ty: EqeType, detail: u32) {
        let info = EqeInfo::try_new(ty, 0).expect("owner 0 fits");
        let raw_info = u32::from_le_bytes(info.as_bytes().try_into().unwrap());
        self.post_raw_eqe(eq, raw_info, detail, format_args!("{ty:?}"));
    }

    /// Posts an EQE of a type no driver knows (`raw_type`, a lying
    /// device's: `mana_emu`'s `LieKind::UnknownEvent` on a data CQ) to EQ
    /// `eq`, interrupting if armed.
    pub(crate) fn post_unknown_eqe(&mut self, eq: u32, raw_type: u8, detail: u32) {
        debug_assert!(EqeType::from_raw(raw_type).is_none());
        let raw_info = u32::from(raw_type);
        self.post_raw_eqe(eq, raw_info, detail, format_args!("type {raw_type}"));
    }

    /// Posts an EQE whose info dword is `raw_info` (owner bits zero: the
    /// producer sets them).
    fn post_raw_eqe(&mut self, eq: u32, raw_info: u32, detail: u32, what: std::fmt::Arguments) {
        let Some(q) = self.eqs.get_mut(&eq) else {
            self.error(
                "eq",
                format_args!("event {what} for EQ {eq}, which does not exist"),
            );
            return;
        };
        let mut body = [0u8; 12];
        body[..4].copy_from_slice(&detail.to_le_bytes());
        q.events += 1;
        if q.producer.push(&body, raw_info, EQE_OWNER_SHIFT) {
            q.interrupts += 1;
            let v = usize::from(q.msix);
            if !self.irqs.raise(v) {
                log::warn!("EQ {eq}: MSI-X vector {v} has no eventfd; interrupt lost");
            }
        }
    }

    /// Asks the driver for a service reset, as the hardware does before
    /// servicing: `GDMA_EQE_HWC_RESET_REQUEST` on the HWC's EQ. The device
    /// keeps answering while the driver suspends (it tears its objects
    /// down and the HWC through the SMC) and resumes (a new HWC), so what
    /// the driver does is all the reset there is. Fails if no HWC exists.
    pub fn service_reset(&mut self) -> Result<(), String> {
        let eq = self
            .hwc
            .as_ref()
            .map(|h| h.eq)
            .ok_or("no HWC: the driver is not bound")?;
        log::info!("service reset requested: GDMA_EQE_HWC_RESET_REQUEST on EQ {eq}; the HWC answers no more requests until it is torn down");
        self.hwc.as_mut().expect("checked above").reset_requested = true;
        self.quiesce_vport_rx();
        self.post_eqe(eq, EqeType::GDMA_EQE_HWC_RESET_REQUEST, 0);
        Ok(())
    }

    pub(crate) fn eq_doorbell(&mut self, page: u32, id: u16, tail: u32, arm: bool) {
        let id = u32::from(id);
        let Some(q) = self.eqs.get_mut(&id) else {
            self.unknown_queue_doorbell(
                page,
                QueueKind::Eq,
                id,
                format_args!("EQ doorbell on page {page} for EQ {id}, which does not exist"),
            );
            return;
        };
        if q.db_page != page {
            let own = q.db_page;
            self.error(
                "doorbell",
                format_args!("EQ {id} rung on doorbell page {page}, it belongs to page {own}"),
            );
            return;
        }
        if !arm {
            return;
        }
        match q.producer.arm(tail) {
            Ok(true) => {
                q.interrupts += 1;
                let v = usize::from(q.msix);
                self.irqs.raise(v);
            }
            Ok(false) => {}
            Err(diff) => self.error(
                "eq",
                format_args!(
                    "EQ {id}: doorbell tail {tail} is {diff} entries from the producer (overflow)"
                ),
            ),
        }
    }
}

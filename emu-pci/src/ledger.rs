//! What the device was asked and what it answered, and which objects it
//! holds: the record the tests check after a driver unloads ("every object
//! destroyed, no request unanswered").

use gdma::control::RequestCode;
use serde::Serialize;
use std::collections::BTreeMap;

/// Counts per request name.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Ledger {
    /// Requests taken off the HWC send queue, by name.
    pub received: BTreeMap<String, u64>,
    /// Answered with status 0.
    pub succeeded: BTreeMap<String, u64>,
    /// Answered with a failure status (including the unimplemented ones).
    pub failed: BTreeMap<String, u64>,
    /// Requests the device does not implement (also counted in `failed`).
    pub unimplemented: BTreeMap<String, u64>,
    /// Responses written into the driver's receive buffers.
    pub responses: u64,
    /// Objects the driver left behind when it tore down what owned them
    /// (the device destroyed them itself), by description.
    pub leaked: Vec<String>,
    /// HWC establish / destroy handshakes completed.
    pub hwc_established: u64,
    pub hwc_destroyed: u64,
    /// Requests taken off the SQ after the device raised a service reset
    /// and left unanswered (the hardware no longer answers then), by name.
    pub unanswered_in_reset: BTreeMap<String, u64>,
    /// Objects still alive when the HWC of a service reset went away: the
    /// reset took them (the driver could not destroy them unanswered).
    pub taken_by_reset: Vec<String>,
    /// EQEs of undefined type the lying device posted, by EQ (what the
    /// shared model's `LieKind::UnknownEvent` becomes on a CQ reporting to
    /// an EQ; the model's `counters().device.lies` has the rest).
    pub lie_eqes: BTreeMap<u32, u64>,
}

/// The log name of a raw request code.
pub fn request_name(code: u32) -> String {
    match RequestCode::from_raw(code) {
        Some(c) => c.name().to_string(),
        None => format!("unknown request {code:#x}"),
    }
}

fn bump(m: &mut BTreeMap<String, u64>, k: &str) {
    *m.entry(k.to_string()).or_insert(0) += 1;
}

impl Ledger {
    pub fn received(&mut self, name: &str) {
        bump(&mut self.received, name);
    }
    pub fn unanswered_in_reset(&mut self, name: &str) {
        bump(&mut self.unanswered_in_reset, name);
    }
    pub fn answered(&mut self, name: &str, status: u32, unimplemented: bool) {
        if status == 0 {
            bump(&mut self.succeeded, name);
        } else {
            bump(&mut self.failed, name);
        }
        if unimplemented {
            bump(&mut self.unimplemented, name);
        }
    }
    /// Requests received minus answers given (responses still held by the
    /// device, waiting for a receive buffer).
    pub fn unanswered(&self) -> u64 {
        let r: u64 = self.received.values().sum();
        r - self.responses.min(r)
    }
}

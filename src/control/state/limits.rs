//! What a port takes: the bounds the driver sets (queue depth, MTU, the
//! frame beyond the MTU) and the device's own limits, as ethdev carries them.

#![forbid(unsafe_code)]

use crate::ffi;

pub const MIN_DESC: u16 = 64;
pub const MIN_MTU: u16 = 68;
pub const MAX_MTU: u16 = 9000;
/// Ethernet header plus one VLAN tag on top of the MTU.
pub const L2_OVERHEAD: u32 = 14 + 4;

/// Device limits from `ibv_query_device_ex`, clamped to what ethdev can
/// carry. A copy sits in the shared block (`dev_private`) for every process,
/// with `max_desc` lowered to what libmana accepts.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct Limits {
    pub max_queues: u16,
    pub max_desc: u16,
    pub max_send_sge: u16,
    pub max_mr_size: u64,
}

impl Limits {
    pub fn from_attr(attr: &ffi::ibv_device_attr_ex) -> Limits {
        let a = &attr.orig_attr;
        let clamp = |v: i32| v.clamp(0, i32::from(u16::MAX)) as u16;
        Limits {
            max_queues: clamp(a.max_qp).min(ffi::RTE_MAX_QUEUES_PER_PORT as u16),
            max_desc: clamp(a.max_qp_wr.min(a.max_cqe)),
            // The uverbs attribute is min(send, recv); MANA sends up to 30.
            max_send_sge: clamp(a.max_sge).min(gdma::MAX_TX_WQE_SGES as u16),
            max_mr_size: a.max_mr_size,
        }
    }
}

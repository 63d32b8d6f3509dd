//! The port and its control state: creation and removal, queue
//! construction on the device, memory registration, interrupts, device
//! reset recovery, and multi-process support.

pub mod device;
pub mod error;
pub mod handoff;
pub mod hold;
pub mod intr;
pub mod lifecycle;
pub mod link;
pub mod mp;
pub mod mr;
pub mod mtu;
pub mod plug;
pub mod port;
pub mod queues;
pub mod reset;
pub mod rss;
pub mod scatter;
pub mod state;

//! What a port last published as its link, for link status change events
//! (`link`).

use parking_lot::Mutex;
use std::sync::atomic::AtomicBool;

/// What a port last published, and whether its netdev is being polled.
#[derive(Default)]
pub struct LinkState {
    /// Publications in order: the poll re-publishes the last port state
    /// given, never an older one.
    pub last: Mutex<Published>,
    pub polling: AtomicBool,
}

#[derive(Default)]
pub struct Published {
    /// What the port state says (started and not recovering).
    pub state_up: bool,
    /// Started, as `dev_start` and `dev_stop` last said (ethdev's
    /// `dev_started` changes only after they return).
    pub started: bool,
    /// A change is waiting for its event on the EAL alarm.
    pub pending: bool,
    /// The link written into the port's data: status and Mbit/s (down, as
    /// ethdev starts it, before the first).
    pub link: (bool, u32),
}

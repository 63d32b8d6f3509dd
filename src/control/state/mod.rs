//! The port's state, at the bottom of `control/`: the types `Port` and its
//! control state are made of, with the small methods that touch only their
//! own fields. Nothing here names `Port` or a behaviour module; the
//! behaviours (lifecycle, queues, reset, ...) sit above `port` and reach
//! these through it.

pub mod doorbell_share;
pub mod intr_handle;
pub mod limits;
pub mod link_state;
pub mod mr_registry;
pub mod queue_sets;
pub mod reset_state;
pub mod rss_conf;
pub mod shared;

//! An emulated Hyper-V synthetic NIC on VMBus, for DPDK's unmodified
//! `vmbus` bus and `net_netvsc` PMD, with the MANA port as its VF.
//!
//! On Azure, DPDK drives the synthetic NIC through `uio_hv_generic`, and
//! the host associates the MANA VF with it; netvsc takes the VF's ethdev
//! port (same MAC), switches the data path to it, and falls back to the
//! synthetic path when the VF goes away. This module is the host of that
//! arrangement, in the DPDK process:
//!
//! * [`sysfs`]: the `/sys/bus/vmbus/devices/<uuid>` tree and its uio maps.
//! * [`interpose`]: what the preload library's libc hooks do with the paths
//!   DPDK hard-codes (`/sys/bus/vmbus`, `/sys/bus/pci/devices/<bdf>`,
//!   `/dev/uioN`), the uio maps' `mmap`, and `SIOCGIFHWADDR`.
//! * [`ring`], [`chanpkt`]: VMBus ring buffers and channel packets.
//! * [`nvsp`], [`rndis`]: the NetVSP and RNDIS protocols.
//! * [`netvsp`]: one NIC's host side (buffers, channels, protocol, data
//!   path, VF association); [`host`]: the thread serving all NICs.
//! * [`vswitch`]: the vPort the NIC shares with its VF: which door a frame
//!   from the wire takes, and the synthetic NIC's frames onto the wire.
//! * [`datapath`]: offloads and receive info; [`sections`]: the receive
//!   buffer's sections; [`guest`]: reading guest pages by IOVA; [`shm`]:
//!   the shared memory; [`secondary`]: a DPDK secondary process reaching
//!   the host of its primary.

pub mod chanpkt;
pub mod config;
pub mod datapath;
pub mod guest;
pub mod host;
pub mod interpose;
pub mod netvsp;
pub mod nvsp;
pub mod ring;
pub mod rndis;
pub mod secondary;
pub mod sections;
pub mod shm;
pub mod sysfs;
pub mod vswitch;

pub use config::{normalize, NetvscConfig};
pub use host::VmbusHost;
pub use vswitch::{VfEvent, Vswitch};

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What one channel moved on the synthetic path.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ChannelReport {
    pub relid: u32,
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Times the guest signalled the host (monitor or interrupt page).
    pub guest_signals: u64,
}

/// A synthetic NIC's state and counters (the host's view).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct NetvscReport {
    pub uuid: String,
    pub mac: String,
    /// Negotiated NVSP version (0 before the guest's init).
    pub nvs_version: u32,
    pub ndis_version: String,
    pub rndis_initialized: bool,
    pub packet_filter: u32,
    pub rss_enabled: bool,
    /// "vf" or "synthetic": where the guest asked the host to send its
    /// traffic.
    pub datapath: String,
    /// Frames the host put into the guest's receive buffer.
    pub rx_packets: u64,
    pub rx_bytes: u64,
    /// Frames the guest sent on the synthetic path (onto the wire).
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Frames from the wire the switch gave the VF while the guest had the
    /// synthetic NIC.
    pub frames_to_vf: u64,
    pub channels: Vec<ChannelReport>,
    /// VF association messages sent: VF allocated / VF revoked.
    pub vf_assoc_allocated: u64,
    pub vf_assoc_revoked: u64,
    /// The guest's data path switches.
    pub datapath_to_vf: u64,
    pub datapath_to_synthetic: u64,
    /// Guest messages by name (NVSP types, `query_<oid>`, `set_<oid>`).
    pub messages: BTreeMap<String, u64>,
    pub drops: BTreeMap<String, u64>,
    /// Host writes that found a guest ring full (retried later).
    pub ring_full: u64,
    /// Times received frames waited for the guest to return sections.
    pub rx_buffer_waits: u64,
    /// Receive-buffer messages the guest has not acknowledged yet.
    pub rx_sections_outstanding: u64,
    /// The last protocol errors.
    pub errors: Vec<String>,
    /// Set when a ring became unusable (the NIC stopped).
    pub broken: Option<String>,
}

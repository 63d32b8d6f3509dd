//! Counters: per queue, per port (with drops by reason) and for the whole
//! device, and the report the control socket and tests read.

#![forbid(unsafe_code)]

use super::{State, WqKind};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct QueueCounters {
    pub packets: u64,
    pub bytes: u64,
    pub wqes: u64,
    pub cqes: u64,
    pub errors: u64,
    pub doorbells: u64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct PortCounters {
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub rx_packets: u64,
    pub rx_bytes: u64,
    /// Drops by reason: no_rx_buffer, no_rx_queue, rx_truncated, bad_lkey,
    /// out_of_mr, mtu, malformed_wqe, vport, link_down, reset,
    /// backend_rx_overflow (the host socket of an AF_PACKET port),
    /// vnet_broadcast and vnet_multicast (what an Azure virtual network does
    /// not carry), mac_filter, ...
    pub drops: BTreeMap<String, u64>,
}

impl PortCounters {
    pub(super) fn drop(&mut self, reason: &str, n: u64) {
        *self.drops.entry(reason.to_string()).or_default() += n;
    }
    pub fn drops(&self, reason: &str) -> u64 {
        self.drops.get(reason).copied().unwrap_or(0)
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct QueueReport {
    pub kind: String,
    pub id: u32,
    pub port: String,
    pub live: bool,
    pub counters: QueueCounters,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct DeviceCounters {
    pub doorbells: u64,
    pub bad_doorbells: u64,
    pub discarded_doorbells: u64,
    pub cq_arms: u64,
    pub cq_events: u64,
    pub cqe_overflow_warnings: u64,
    /// Trapped stores dropped because the doorbell ring stayed full.
    pub doorbell_ring_drops: u64,
    /// Port MTU changes taken from the sysfs `mtu` files.
    #[serde(default)]
    pub mtu_changes: u64,
    /// Reads of an `mtu` file that did not hold a valid MTU (68..=9000);
    /// the port kept its MTU.
    #[serde(default)]
    pub mtu_file_invalid: u64,
    /// What `Fault::Lie` did, by kind: owner_stale, owner_ahead,
    /// unknown_type, bad_length, wrong_queue, wqe_outside, wqe_misaligned,
    /// duplicate, drop, unknown_event.
    #[serde(default)]
    pub lies: BTreeMap<String, u64>,
    /// Benchmark mode (`options.bench = "saturate"`): TX WQEs completed by
    /// ring bookkeeping, RX WQEs completed with the template frame, and
    /// template frames written (once per buffer address).
    #[serde(default)]
    pub bench_tx_wqes: u64,
    #[serde(default)]
    pub bench_rx_wqes: u64,
    #[serde(default)]
    pub bench_template_writes: u64,
}

impl DeviceCounters {
    /// How many lies of this kind were told.
    pub fn lies(&self, what: &str) -> u64 {
        self.lies.get(what).copied().unwrap_or(0)
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct PortReport {
    pub mac: String,
    pub pci: String,
    pub port: u32,
    pub link_up: bool,
    /// The MTU the port enforces (from its netdev's sysfs `mtu` file).
    #[serde(default)]
    pub mtu: u32,
    pub counters: PortCounters,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Counters {
    pub device: DeviceCounters,
    pub ports: Vec<PortReport>,
    pub queues: Vec<QueueReport>,
    /// Synthetic NICs sharing the ports' wires (`crate::vmbus`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub netvsc: Vec<crate::vmbus::NetvscReport>,
}

impl Counters {
    pub fn port(&self, mac: &str) -> Option<&PortCounters> {
        self.ports
            .iter()
            .find(|p| p.mac.eq_ignore_ascii_case(mac))
            .map(|p| &p.counters)
    }
}

impl State {
    pub fn counters(&self) -> Counters {
        let mut queues: Vec<QueueReport> = self.retired_folded.clone();
        queues.extend(self.retired.iter().cloned());
        for w in self.wqs.values() {
            queues.push(QueueReport {
                kind: if w.kind == WqKind::Sq { "sq" } else { "rq" }.into(),
                id: w.hw_id.unwrap_or(0),
                port: w
                    .port
                    .map(|p| crate::config::format_mac(&self.ports[p].mac))
                    .unwrap_or_default(),
                live: true,
                counters: w.counters.clone(),
            });
        }
        for c in self.cqs.values() {
            queues.push(QueueReport {
                kind: "cq".into(),
                id: c.hw_id.unwrap_or(0),
                port: String::new(),
                live: true,
                counters: c.counters.clone(),
            });
        }
        let mut device = self.counters.clone();
        device.doorbell_ring_drops = self.ring.dropped.load(Ordering::Relaxed);
        Counters {
            device,
            ports: self
                .ports
                .iter()
                .map(|p| PortReport {
                    mac: crate::config::format_mac(&p.mac),
                    pci: self.adapters[p.adapter].pci.clone(),
                    port: p.index as u32 + 1,
                    link_up: p.link_up,
                    mtu: p.mtu,
                    counters: p.counters.clone(),
                })
                .collect(),
            queues,
            netvsc: self.vswitch.reports(),
        }
    }
}

/// A live work queue as the device sees it: where it has consumed to
/// (`head`, its byte offset) and what the last accepted doorbell announced
/// (`tail`). A queue whose tail is ahead of its head has work the device
/// has not taken; an RQ whose head equals its tail has no buffer to
/// deliver into.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct WqState {
    pub kind: String,
    pub id: u32,
    pub port: String,
    pub ctx: u32,
    pub ctx_dead: bool,
    pub active: bool,
    pub ring_bytes: u32,
    pub head: u32,
    pub tail: u32,
    pub doorbells: u64,
    pub packets: u64,
}

/// A live completion queue: how many CQEs the device wrote, whether it is
/// armed, and completions held back by a `CqeDelay` fault.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct CqState {
    pub id: u32,
    pub ctx: u32,
    pub written: u64,
    pub entries: u32,
    pub armed: bool,
    pub delayed: u32,
}

/// An adapter's presence: a reset keeps it away until `back_in_ms`; a hot
/// remove until a hot add.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct AdapterState {
    pub pci: String,
    pub present: bool,
    pub removed: bool,
    pub generation: u64,
    pub back_in_ms: Option<u64>,
    pub live_contexts: u32,
    pub dead_contexts: u32,
}

/// What the device holds now, for explaining a stall: its adapters, live
/// queues with heads and tails, and the doorbell ring between the driver's
/// trapped stores and the device thread.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct DeviceState {
    pub adapters: Vec<AdapterState>,
    pub wqs: Vec<WqState>,
    pub cqs: Vec<CqState>,
    /// Trapped doorbell stores waiting for the device thread.
    pub doorbell_ring_pending: u64,
    pub doorbell_ring_drops: u64,
    /// Device thread passes so far (a stalled device thread stops it).
    pub device_loops: u64,
    pub scheduled_faults: u32,
}

impl State {
    pub fn device_state(&self, device_loops: u64) -> DeviceState {
        let now = std::time::Instant::now();
        let port_mac = |p: Option<usize>| {
            p.map(|p| crate::config::format_mac(&self.ports[p].mac))
                .unwrap_or_default()
        };
        let ctx_dead = |c: u32| self.ctxs.get(&c).is_none_or(|c| c.dead);
        DeviceState {
            adapters: self
                .adapters
                .iter()
                .enumerate()
                .map(|(i, a)| AdapterState {
                    pci: a.pci.clone(),
                    present: a.present,
                    removed: a.removed,
                    generation: a.generation,
                    back_in_ms: a
                        .back_at
                        .map(|t| t.saturating_duration_since(now).as_millis() as u64),
                    live_contexts: self
                        .ctxs
                        .values()
                        .filter(|c| c.adapter == i && !c.dead)
                        .count() as u32,
                    dead_contexts: self
                        .ctxs
                        .values()
                        .filter(|c| c.adapter == i && c.dead)
                        .count() as u32,
                })
                .collect(),
            wqs: self
                .wqs
                .values()
                .map(|w| WqState {
                    kind: if w.kind == WqKind::Sq { "sq" } else { "rq" }.into(),
                    id: w.hw_id.unwrap_or(0),
                    port: port_mac(w.port),
                    ctx: w.ctx,
                    ctx_dead: ctx_dead(w.ctx),
                    active: w.active,
                    ring_bytes: w.buf.len() as u32,
                    head: w.dev_off,
                    tail: w.db_tail,
                    doorbells: w.counters.doorbells,
                    packets: w.counters.packets,
                })
                .collect(),
            cqs: self
                .cqs
                .values()
                .map(|c| CqState {
                    id: c.hw_id.unwrap_or(0),
                    ctx: c.ctx,
                    written: c.prod,
                    entries: c.count,
                    armed: c.armed,
                    delayed: c.delayed.len() as u32,
                })
                .collect(),
            doorbell_ring_pending: self.ring.pending(),
            doorbell_ring_drops: self.ring.dropped.load(Ordering::Relaxed),
            device_loops,
            scheduled_faults: self.faults.len() as u32,
        }
    }
}

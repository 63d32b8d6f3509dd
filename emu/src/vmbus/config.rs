//! Configuration of the synthetic NICs (`[[netvsc]]` in the emulator's TOML).
//!
//! ```toml
//! [[netvsc]]
//! mac = "00:0d:3a:00:00:0a"   # the MANA port whose wire (and MAC) it shares
//! # uuid = "…"               # VMBus device instance id (default: from the MAC)
//! # max_queues = 8           # channels offered (RSS capability)
//! # vf = true                # associate the MANA port's adapter as the VF
//! # vf_add_delay_ms = 1500   # hot add: PCI device first, association after
//! # vf_revoke_on_remove = false
//! ```

use crate::config::{parse_mac, AdapterConfig};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct NetvscConfig {
    /// The MAC of the synthetic NIC: the MANA port with this MAC is its VF
    /// and its wire (as on Azure, where both share one vPort).
    pub mac: String,
    /// VMBus device instance id (`device_id`, the sysfs directory name).
    #[serde(default)]
    pub uuid: Option<String>,
    /// Channels the host offers (primary plus sub-channels), reported as
    /// the RSS receive-ring count.
    #[serde(default = "default_max_queues")]
    pub max_queues: u32,
    /// Relid of the primary channel; sub-channels follow it.
    #[serde(default)]
    pub relid: Option<u32>,
    /// Bytes per ring direction (uio_hv_generic: 2 MiB).
    #[serde(default = "default_ring_size")]
    pub ring_size: usize,
    /// Associate the MANA port's adapter with this NIC as its VF.
    #[serde(default = "default_true")]
    pub vf: bool,
    /// After the VF's PCI function is hot-added, how long until the host
    /// sends the VF association (the guest first sees the PCI device).
    #[serde(default = "default_vf_add_delay_ms")]
    pub vf_add_delay_ms: u64,
    /// Send "VF not allocated" when the VF's PCI function is hot-removed.
    /// Off by default: the guest then learns of the removal from the PCI
    /// device alone (`RTE_ETH_EVENT_INTR_RMV` from the VF's driver).
    #[serde(default)]
    pub vf_revoke_on_remove: bool,
    /// Link speed reported to the guest, in Mbit/s.
    #[serde(default = "default_speed")]
    pub link_speed_mbps: u32,
}

fn default_max_queues() -> u32 {
    8
}
fn default_ring_size() -> usize {
    2 << 20
}
fn default_true() -> bool {
    true
}
fn default_vf_add_delay_ms() -> u64 {
    1500
}
fn default_speed() -> u32 {
    100_000
}

/// The NIC's index among the VMBus devices: its uio number, and the base of
/// its default relid and monitor id.
pub fn default_relid(index: usize) -> u32 {
    14 + 16 * index as u32
}

fn check_uuid(s: &str) -> Result<(), String> {
    let groups: Vec<&str> = s.split('-').collect();
    let lens = [8, 4, 4, 4, 12];
    if groups.len() != 5
        || groups
            .iter()
            .zip(lens)
            .any(|(g, l)| g.len() != l || !g.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        return Err(format!(
            "netvsc uuid {s:?} is not a UUID (8-4-4-4-12 hex digits)"
        ));
    }
    Ok(())
}

/// Validates the `[[netvsc]]` entries against the adapters: each MAC must
/// be a configured port's; fills defaults (UUID, relid).
pub fn normalize(nics: &mut [NetvscConfig], adapters: &[AdapterConfig]) -> Result<(), String> {
    let mut seen = std::collections::HashSet::new();
    for (i, n) in nics.iter_mut().enumerate() {
        let m = parse_mac(&n.mac)?;
        n.mac = n.mac.to_ascii_lowercase();
        if !adapters
            .iter()
            .any(|a| a.ports.iter().any(|p| p.mac == n.mac))
        {
            return Err(format!(
                "netvsc {}: no MANA port with this MAC (the synthetic NIC shares its VF port's wire)",
                n.mac
            ));
        }
        if !seen.insert(n.mac.clone()) {
            return Err(format!("netvsc {}: two synthetic NICs with one MAC", n.mac));
        }
        let uuid = n.uuid.take().unwrap_or_else(|| {
            format!(
                "{:08x}-5eed-4e7c-9a00-{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}",
                0xf861_5100u32 + i as u32,
                m[0],
                m[1],
                m[2],
                m[3],
                m[4],
                m[5]
            )
        });
        check_uuid(&uuid)?;
        n.uuid = Some(uuid.to_ascii_lowercase());
        if !(1..=64).contains(&n.max_queues) {
            return Err(format!(
                "netvsc {}: max_queues {} out of 1..=64",
                n.mac, n.max_queues
            ));
        }
        let relid = *n.relid.get_or_insert(default_relid(i));
        if relid == 0 || relid + n.max_queues > 0xffff {
            return Err(format!("netvsc {}: relid {relid} out of range", n.mac));
        }
        if n.ring_size < 8192 || !n.ring_size.is_multiple_of(4096) || n.ring_size > 64 << 20 {
            return Err(format!(
                "netvsc {}: ring_size {} is not a multiple of 4096 in 8 KiB..=64 MiB",
                n.mac, n.ring_size
            ));
        }
    }
    Ok(())
}

impl NetvscConfig {
    pub fn uuid(&self) -> &str {
        self.uuid.as_deref().expect("normalized")
    }

    pub fn relid(&self) -> u32 {
        self.relid.expect("normalized")
    }
}

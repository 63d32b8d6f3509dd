//! Emulator configuration (`MANA_EMU_CONFIG=<file.toml>`).
//!
//! ```toml
//! [options]
//! doorbell_mode = "trap"        # or "poll"
//! rx_coalesce = false           # CQE_RX_COALESCED_4 completions
//! rdma_core = "v44"             # or "modern": provider-side queue limits
//!                               # (or let [limits] profile choose)
//! sysfs_root = "/tmp/mana-emu/sys"
//! run_dir = "/tmp/mana-emu/run" # control sockets
//! counters_dump = "/tmp/mana-emu/counters.json"
//! bench = "saturate"            # benchmark mode (default "off")
//!
//! [limits]
//! profile = "linux-7+rdma-core-65"  # a measured stack; fields below override it
//!
//! [[adapter]]
//! pci = "7870:00:00.0"
//! numa_node = 0
//! ib_name = "mana_0"
//!
//! [[adapter.port]]
//! mac = "00:0d:3a:00:00:01"
//! ifname = "eth1"
//! backend = { kind = "pair", peer = "00:0d:3a:00:00:02" }
//! ```

#![forbid(unsafe_code)]

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum DoorbellMode {
    /// PROT_NONE page, every store trapped by a SIGSEGV handler (exact).
    #[default]
    Trap,
    /// Plain shared memory sampled by the device thread (DPDK secondaries).
    Poll,
}

/// The device's benchmark mode (`options.bench`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum BenchMode {
    /// The device model as documented: every WQE parsed, every frame moved.
    #[default]
    Off,
    /// Keeps the driver's queues saturated at a few nanoseconds per packet:
    /// TX WQEs completed by ring bookkeeping (frames never read), every
    /// posted RX buffer completed with a template frame. See
    /// `device::saturate`.
    Saturate,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum RdmaCoreLimits {
    /// rdma-core 44 (Debian bookworm): CQ/SQ/RQ <= 256 entries.
    #[default]
    V44,
    /// rdma-core >= 49: no provider-side limits.
    Modern,
}

/// The kernel generations whose `mana_ib` the guest tier ran (`emu-pci`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelGen {
    /// 6.12 (Debian trixie): one IB device per function (`mana_N`), no
    /// vendor/part ids or raw packet caps, ENODEV for a busy vPort,
    /// `max_qp` from the adapter's caps.
    Linux612,
    /// 7.x (trixie-backports 7.3, sid 7.2): the Ethernet IB device
    /// (`manae_N`) beside the RNIC (`mana_N`), Microsoft's ids, EBUSY,
    /// `max_qp` from `GDMA_QUERY_MAX_RESOURCES` (half the device's WQs).
    Linux7,
}

/// `[limits] profile`: a kernel generation and an rdma-core version as the
/// guest tier measured them together (`emu-pci/README.md`, "fidelity
/// record"), spelled `linux-<6.12|7>+rdma-core-<44|56|65>`. It sets the
/// defaults of every `[limits]` field and `options.rdma_core`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Profile {
    pub kernel: KernelGen,
    /// The rdma-core release (44, 56 or 65).
    pub rdma_core: u32,
}

impl Profile {
    /// The CQ depth rule of this rdma-core's libmana: 44 refuses CQs deeper
    /// than 256 entries, 56.1 and 65 take the device's `max_cqe`.
    pub fn rdma_core_limits(&self) -> RdmaCoreLimits {
        if self.rdma_core < 49 {
            RdmaCoreLimits::V44
        } else {
            RdmaCoreLimits::Modern
        }
    }

    pub fn limits(&self) -> Limits {
        let mut l = Limits {
            profile: Some(*self),
            ..Limits::default()
        };
        match self.kernel {
            KernelGen::Linux612 => {
                l.vendor_id = 0;
                l.vendor_part_id = 0;
                l.raw_packet_caps = 0;
                l.vport_busy_errno = libc::ENODEV;
                l.max_qp = 64;
                l.ib_devices = 1;
            }
            KernelGen::Linux7 => {
                l.max_qp = 128;
                l.ib_devices = 2;
            }
        }
        l
    }
}

impl TryFrom<String> for Profile {
    type Error = String;
    fn try_from(s: String) -> Result<Profile, String> {
        let bad = || {
            format!(
                "unknown limits profile {s:?}: linux-<6.12|7>+rdma-core-<44|56|65>, e.g. \"linux-7+rdma-core-65\""
            )
        };
        let (k, r) = s.split_once('+').ok_or_else(bad)?;
        let kernel = match k {
            "linux-6.12" => KernelGen::Linux612,
            "linux-7" => KernelGen::Linux7,
            _ => return Err(bad()),
        };
        let rdma_core = match r {
            "rdma-core-44" => 44,
            "rdma-core-56" => 56,
            "rdma-core-65" => 65,
            _ => return Err(bad()),
        };
        Ok(Profile { kernel, rdma_core })
    }
}

impl From<Profile> for String {
    fn from(p: Profile) -> String {
        let k = match p.kernel {
            KernelGen::Linux612 => "6.12",
            KernelGen::Linux7 => "7",
        };
        format!("linux-{k}+rdma-core-{}", p.rdma_core)
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Options {
    pub doorbell_mode: DoorbellMode,
    pub rx_coalesce: bool,
    /// None: `[limits] profile`'s, else v44 ([`Options::rdma_core`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rdma_core: Option<RdmaCoreLimits>,
    pub sysfs_root: PathBuf,
    pub run_dir: PathBuf,
    pub counters_dump: Option<PathBuf>,
    /// Start the control socket in `run_dir` when the device thread starts.
    pub control_socket: bool,
    /// First hardware queue id; ids >= 1024 exercise the vsq_frame bits.
    pub queue_id_base: u32,
    /// How long a reset keeps the device out of `ibv_get_device_list`.
    pub reset_down_ms: u64,
    /// Log verbs calls and device errors to stderr.
    pub verbose: bool,
    /// Benchmark mode: `saturate` replaces the ports' traffic with
    /// saturated queues (see [`BenchMode`]).
    pub bench: BenchMode,
}

impl Options {
    /// libmana's queue depth rule: the one configured, the limits
    /// profile's (set by [`Config::normalize`]), else rdma-core 44's.
    pub fn rdma_core(&self) -> RdmaCoreLimits {
        self.rdma_core.unwrap_or_default()
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            doorbell_mode: DoorbellMode::Trap,
            rx_coalesce: false,
            rdma_core: None,
            sysfs_root: PathBuf::from("/tmp/mana-emu/sys"),
            run_dir: PathBuf::from("/tmp/mana-emu/run"),
            counters_dump: None,
            control_socket: true,
            queue_id_base: 0x403,
            reset_down_ms: 2000,
            verbose: false,
            bench: BenchMode::Off,
        }
    }
}

/// Device attributes reported by `ibv_query_device(_ex)`, and what else
/// differs between kernels: by default those of a current `mana_ib` with
/// one IB device per function; a `profile` sets a measured stack's, which
/// the fields given beside it override.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(try_from = "LimitsSpec")]
pub struct Limits {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<Profile>,
    pub max_qp: u32,
    pub max_qp_wr: u32,
    pub max_cqe: u32,
    pub max_cq: u32,
    pub max_sge: u32,
    pub max_mr: u32,
    /// None: U64_MAX, what mana_ib reports whatever the adapter says (a
    /// TOML integer stops at i64::MAX).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_mr_size: Option<u64>,
    pub max_pd: u32,
    /// Identification the kernel fills in: later kernels (the sources
    /// shared/reference/verbs-emulation.md read) report
    /// Microsoft's vendor id, the GDMA device type as the part id and
    /// `IBV_RAW_PACKET_CAP_IP_CSUM` for the Ethernet function; the 6.12
    /// `mana_ib` (Debian trixie, issue 14's guest) leaves all three 0, and
    /// DPDK skips the part/caps checks when the part id is 0.
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub raw_packet_caps: u32,
    /// The errno of a raw QP refused because the kernel's netdev holds the
    /// vPort: EBUSY (16) from later kernels, which pass `mana_cfg_vport`'s
    /// error on; ENODEV (19) from 6.12's `mana_ib`, which turns any vPort
    /// configuration failure into it (seen in the guest tier).
    pub vport_busy_errno: i32,
    /// IB devices per PCI function: 1 (up to 6.12: the Ethernet one, named
    /// `ib_name`) or 2 (7.x: also the RNIC, `rnic_name`, whose
    /// `vendor_part_id` is 3 and which has no raw packet caps).
    pub ib_devices: u8,
    /// With two devices, list the RNIC first. 7.x registers the Ethernet
    /// device first (`mana_probe` adds the "eth" auxiliary device before
    /// `mana_rdma_probe` adds "rdma"), and libibverbs lists by registration
    /// index, so false is the kernel's order; true is the other one, which a
    /// driver must handle too (sysfs directories list them in hash order).
    pub rnic_listed_first: bool,
}

/// `[limits]` as written: a profile and the fields that override it.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
struct LimitsSpec {
    profile: Option<Profile>,
    max_qp: Option<u32>,
    max_qp_wr: Option<u32>,
    max_cqe: Option<u32>,
    max_cq: Option<u32>,
    max_sge: Option<u32>,
    max_mr: Option<u32>,
    max_mr_size: Option<u64>,
    max_pd: Option<u32>,
    vendor_id: Option<u32>,
    vendor_part_id: Option<u32>,
    raw_packet_caps: Option<u32>,
    vport_busy_errno: Option<i32>,
    ib_devices: Option<u8>,
    rnic_listed_first: Option<bool>,
}

impl TryFrom<LimitsSpec> for Limits {
    type Error = String;
    fn try_from(s: LimitsSpec) -> Result<Limits, String> {
        let mut l = s.profile.map_or_else(Limits::default, |p| p.limits());
        macro_rules! set {
            ($($f:ident),*) => { $( if let Some(v) = s.$f { l.$f = v; } )* };
        }
        set!(
            max_qp,
            max_qp_wr,
            max_cqe,
            max_cq,
            max_sge,
            max_mr,
            max_pd,
            vendor_id,
            vendor_part_id,
            raw_packet_caps,
            vport_busy_errno,
            ib_devices,
            rnic_listed_first
        );
        if s.max_mr_size.is_some() {
            l.max_mr_size = s.max_mr_size;
        }
        if !(1..=2).contains(&l.ib_devices) {
            return Err(format!(
                "ib_devices = {}: a MANA function has 1 (up to 6.12) or 2 (7.x) IB devices",
                l.ib_devices
            ));
        }
        Ok(l)
    }
}

impl Limits {
    pub fn max_mr_size(&self) -> u64 {
        self.max_mr_size.unwrap_or(u64::MAX)
    }
}

impl Default for Limits {
    fn default() -> Self {
        // max_qp_wr = min(max_requester_sq_size / 512, rq_size / 256) with
        // 1 MiB queues = 2048 (mana_ib_gd_query_adapter_caps); max_cqe =
        // max_qp_wr; uverbs max_sge = min(send 30, recv 15).
        Limits {
            profile: None,
            max_qp: 64,
            max_qp_wr: 2048,
            max_cqe: 2048,
            max_cq: 64,
            max_sge: 15,
            max_mr: 4096,
            max_mr_size: None,
            max_pd: 64,
            vendor_id: 0x1414,
            vendor_part_id: 2,
            raw_packet_caps: 4,
            vport_busy_errno: libc::EBUSY,
            ib_devices: 1,
            rnic_listed_first: false,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum BackendConfig {
    /// Frames sent on this port are received on the same port.
    #[default]
    Loopback,
    /// Frames sent are counted and dropped; nothing is received.
    Sink,
    /// Wired to another emulated port (by MAC) of the same process.
    Pair { peer: String },
    /// Frames sent are appended to `tx`; frames of `rx` are received.
    Pcap {
        #[serde(default)]
        rx: Option<PathBuf>,
        #[serde(default)]
        tx: Option<PathBuf>,
    },
    /// An AF_PACKET socket on a Linux interface (e.g. one end of a veth).
    AfPacket { ifname: String },
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortConfig {
    pub mac: String,
    #[serde(default)]
    pub ifname: Option<String>,
    #[serde(default)]
    pub backend: BackendConfig,
    #[serde(default = "default_mtu")]
    pub mtu: u32,
    /// The kernel netdev of this port is up: RAW QP creation fails
    /// (`limits.vport_busy_errno`).
    #[serde(default)]
    pub kernel_if_up: bool,
    /// Hold received frames while no RX buffer is posted (instead of
    /// dropping them like the hardware does).
    #[serde(default)]
    pub lossless_rx: bool,
    /// Receive only unicast frames for the port's MAC, as an Azure vPort
    /// does (the host steers frames to a vPort by its MAC). Off by default:
    /// unicast for any MAC is accepted, so that testpmd's forwarding
    /// topologies (pair, loopback, txonly's peer MACs) work unchanged.
    /// Broadcast and multicast are never delivered, whatever this says.
    #[serde(default)]
    pub mac_filter: bool,
    /// What the netdev's sysfs `speed` file says, in Mbit/s; -1 (the
    /// default) is Linux's "unknown", as a down interface or an older
    /// kernel's `mana` reports. Changed at run time by `Fault::NetdevLink`.
    #[serde(default = "default_speed")]
    pub link_speed_mbps: i64,
}

fn default_mtu() -> u32 {
    1500
}

fn default_speed() -> i64 {
    -1
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdapterConfig {
    pub pci: String,
    #[serde(default)]
    pub numa_node: i32,
    #[serde(default)]
    pub ib_name: Option<String>,
    /// IB device name after a service reset (newer kernels: `manae_%d`).
    #[serde(default)]
    pub ib_name_after_reset: Option<String>,
    /// The RNIC's IB device name where the function has two
    /// (`limits.ib_devices = 2`; default `mana_<n>`, the Ethernet one then
    /// defaulting to `manae_<n>`, as 7.x names them).
    #[serde(default)]
    pub rnic_name: Option<String>,
    #[serde(default = "default_subsys_vendor")]
    pub subsystem_vendor: u16,
    #[serde(default = "default_subsys_device")]
    pub subsystem_device: u16,
    #[serde(rename = "port", default)]
    pub ports: Vec<PortConfig>,
}

fn default_subsys_vendor() -> u16 {
    0x1414
}
fn default_subsys_device() -> u16 {
    0x0001
}

#[derive(Clone, Debug, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub options: Options,
    #[serde(default)]
    pub limits: Limits,
    #[serde(rename = "adapter", default)]
    pub adapters: Vec<AdapterConfig>,
    /// Synthetic NICs on VMBus whose VF is a MANA port (`crate::vmbus`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub netvsc: Vec<crate::vmbus::NetvscConfig>,
}

impl Config {
    pub fn parse(text: &str) -> Result<Config, String> {
        let mut c: Config = toml::from_str(text).map_err(|e| e.to_string())?;
        c.normalize()?;
        Ok(c)
    }

    pub fn load(path: &Path) -> Result<Config, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// From `MANA_EMU_CONFIG`, or the built-in single-port loopback device.
    pub fn from_env() -> Result<Config, String> {
        match std::env::var_os("MANA_EMU_CONFIG") {
            Some(p) => Self::load(Path::new(&p)),
            None => {
                let mut c = Config::default_single();
                c.normalize()?;
                Ok(c)
            }
        }
    }

    /// One adapter at 7870:00:00.0 with one loopback port.
    pub fn default_single() -> Config {
        Config {
            adapters: vec![AdapterConfig {
                pci: "7870:00:00.0".into(),
                numa_node: 0,
                ib_name: Some("mana_0".into()),
                ib_name_after_reset: None,
                rnic_name: None,
                subsystem_vendor: default_subsys_vendor(),
                subsystem_device: default_subsys_device(),
                ports: vec![PortConfig {
                    mac: "00:0d:3a:00:00:01".into(),
                    ifname: Some("eth1".into()),
                    backend: BackendConfig::Loopback,
                    mtu: 1500,
                    kernel_if_up: false,
                    lossless_rx: false,
                    mac_filter: false,
                    link_speed_mbps: -1,
                }],
            }],
            ..Default::default()
        }
    }

    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("config serializes")
    }

    /// Canonical PCI addresses, lower-case MACs, default IB / interface
    /// names; validates. Idempotent; `parse`/`load` call it.
    pub fn normalize(&mut self) -> Result<(), String> {
        let mut seen = std::collections::HashSet::new();
        let mut ifidx = 1;
        let two = self.limits.ib_devices == 2;
        for (ai, a) in self.adapters.iter_mut().enumerate() {
            a.pci = normalize_pci(&a.pci)?;
            if a.ib_name.is_none() {
                // 7.x: "manae_%d" for the Ethernet device, "mana_%d" for the
                // RNIC (mana_ib_probe); before, "mana_%d" for the only one.
                let prefix = if two { "manae" } else { "mana" };
                a.ib_name = Some(format!("{prefix}_{ai}"));
            }
            if two && a.rnic_name.is_none() {
                a.rnic_name = Some(format!("mana_{ai}"));
            }
            if !two && a.rnic_name.is_some() {
                return Err(format!(
                    "adapter {}: rnic_name needs limits.ib_devices = 2",
                    a.pci
                ));
            }
            if a.rnic_name.is_some() && a.rnic_name == a.ib_name {
                return Err(format!(
                    "adapter {}: the RNIC and the Ethernet IB device are both named {}",
                    a.pci,
                    a.ib_name.as_deref().unwrap_or_default()
                ));
            }
            if a.ports.is_empty() {
                return Err(format!("adapter {}: no ports", a.pci));
            }
            for p in a.ports.iter_mut() {
                parse_mac(&p.mac)?;
                p.mac = p.mac.to_ascii_lowercase();
                if !seen.insert(p.mac.clone()) {
                    return Err(format!("duplicate MAC {}", p.mac));
                }
                if p.ifname.is_none() {
                    p.ifname = Some(format!("eth{ifidx}"));
                }
                ifidx += 1;
                if !(68..=9000).contains(&p.mtu) {
                    return Err(format!("port {}: mtu {} out of 68..=9000", p.mac, p.mtu));
                }
            }
        }
        for a in &self.adapters {
            for p in &a.ports {
                if let BackendConfig::Pair { peer } = &p.backend {
                    if !seen.contains(&peer.to_ascii_lowercase()) {
                        return Err(format!("port {}: pair peer {} not configured", p.mac, peer));
                    }
                }
            }
        }
        if let Some(p) = self.limits.profile {
            match self.options.rdma_core {
                Some(r) if r != p.rdma_core_limits() => {
                    return Err(format!(
                        "options.rdma_core = {r:?} contradicts limits.profile {}",
                        String::from(p)
                    ))
                }
                _ => self.options.rdma_core = Some(p.rdma_core_limits()),
            }
        }
        crate::vmbus::normalize(&mut self.netvsc, &self.adapters)?;
        if self.options.queue_id_base == 0 || self.options.queue_id_base > 0xff_0000 {
            return Err("queue_id_base must be in 1..=0xff0000".into());
        }
        Ok(())
    }

    pub fn pci_devices_dir(&self) -> PathBuf {
        self.options.sysfs_root.join("bus/pci/devices")
    }
}

pub fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6 {
        return Err(format!("bad MAC {s}"));
    }
    let mut m = [0u8; 6];
    for (i, p) in parts.iter().enumerate() {
        m[i] = u8::from_str_radix(p, 16).map_err(|_| format!("bad MAC {s}"))?;
    }
    Ok(m)
}

pub fn format_mac(m: &[u8; 6]) -> String {
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        m[0], m[1], m[2], m[3], m[4], m[5]
    )
}

/// Canonical `DDDD:BB:DD.F` form (accepts `BB:DD.F`).
pub fn normalize_pci(s: &str) -> Result<String, String> {
    let (dom, rest) = match s.matches(':').count() {
        2 => {
            let (d, r) = s.split_once(':').unwrap();
            (
                u32::from_str_radix(d, 16).map_err(|_| format!("bad PCI address {s}"))?,
                r,
            )
        }
        1 => (0, s),
        _ => return Err(format!("bad PCI address {s}")),
    };
    let (bus, rest) = rest.split_once(':').ok_or(format!("bad PCI address {s}"))?;
    let (dev, func) = rest.split_once('.').ok_or(format!("bad PCI address {s}"))?;
    let bus = u8::from_str_radix(bus, 16).map_err(|_| format!("bad PCI address {s}"))?;
    let dev = u8::from_str_radix(dev, 16).map_err(|_| format!("bad PCI address {s}"))?;
    let func: u8 = func.parse().map_err(|_| format!("bad PCI address {s}"))?;
    if dev > 0x1f || func > 7 || dom > 0xffff {
        return Err(format!("bad PCI address {s}"));
    }
    Ok(format!("{dom:04x}:{bus:02x}:{dev:02x}.{func}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_full() {
        let c = Config::parse(
            r#"
            [options]
            doorbell_mode = "poll"
            rx_coalesce = true
            rdma_core = "modern"
            [limits]
            max_qp = 8
            [[adapter]]
            pci = "00:04.0"
            [[adapter.port]]
            mac = "00:0D:3A:00:00:01"
            backend = { kind = "pair", peer = "00:0d:3a:00:00:02" }
            [[adapter.port]]
            mac = "00:0d:3a:00:00:02"
            backend = { kind = "pcap", tx = "/tmp/x.pcap" }
            mtu = 9000
            "#,
        )
        .unwrap();
        assert_eq!(c.options.doorbell_mode, DoorbellMode::Poll);
        assert_eq!(c.adapters[0].pci, "0000:00:04.0");
        assert_eq!(c.adapters[0].ports[0].mac, "00:0d:3a:00:00:01");
        assert_eq!(c.adapters[0].ports[1].ifname.as_deref(), Some("eth2"));
        assert_eq!(c.limits.max_qp, 8);
        assert_eq!(c.limits.max_sge, 15);
        assert!(Config::parse("[[adapter]]\npci='x'\n").is_err());
        assert!(Config::parse("[options]\nbogus=1\n").is_err());
    }

    const ONE: &str =
        "[[adapter]]\npci = \"00:04.0\"\n[[adapter.port]]\nmac = \"00:0d:3a:00:00:01\"\n";

    #[test]
    fn limits_profiles_set_what_each_stack_does() {
        let c = Config::parse(&format!(
            "[limits]\nprofile = \"linux-6.12+rdma-core-44\"\n{ONE}"
        ))
        .unwrap();
        assert_eq!(c.options.rdma_core(), RdmaCoreLimits::V44);
        let l = &c.limits;
        assert_eq!(
            (
                l.vendor_id,
                l.vendor_part_id,
                l.raw_packet_caps,
                l.vport_busy_errno
            ),
            (0, 0, 0, libc::ENODEV)
        );
        assert_eq!((l.max_qp, l.max_cqe, l.ib_devices), (64, 2048, 1));
        assert_eq!(c.adapters[0].ib_name.as_deref(), Some("mana_0"));
        assert_eq!(c.adapters[0].rnic_name, None);

        let c = Config::parse(&format!(
            "[limits]\nprofile = \"linux-7+rdma-core-65\"\nmax_qp = 8\n{ONE}"
        ))
        .unwrap();
        assert_eq!(c.options.rdma_core(), RdmaCoreLimits::Modern);
        let l = &c.limits;
        assert_eq!(
            (
                l.vendor_id,
                l.vendor_part_id,
                l.raw_packet_caps,
                l.vport_busy_errno
            ),
            (0x1414, 2, 4, libc::EBUSY)
        );
        assert_eq!((l.max_qp, l.ib_devices, l.rnic_listed_first), (8, 2, false));
        assert_eq!(c.adapters[0].ib_name.as_deref(), Some("manae_0"));
        assert_eq!(c.adapters[0].rnic_name.as_deref(), Some("mana_0"));
        // What the preload library reads back is the same.
        let again = Config::parse(&c.to_toml()).unwrap();
        assert_eq!(again.limits.profile, c.limits.profile);
        assert_eq!(again.limits.max_qp, 8);
        assert_eq!(again.adapters[0].rnic_name.as_deref(), Some("mana_0"));

        let e = Config::parse(&format!(
            "[options]\nrdma_core = \"v44\"\n[limits]\nprofile = \"linux-7+rdma-core-56\"\n{ONE}"
        ))
        .unwrap_err();
        assert!(
            e.contains("contradicts limits.profile linux-7+rdma-core-56"),
            "{e}"
        );
        let e = Config::parse(&format!(
            "[limits]\nprofile = \"linux-6.8+rdma-core-50\"\n{ONE}"
        ))
        .unwrap_err();
        assert!(
            e.contains("unknown limits profile \"linux-6.8+rdma-core-50\""),
            "{e}"
        );
        let e = Config::parse(&format!("[limits]\nib_devices = 3\n{ONE}")).unwrap_err();
        assert!(e.contains("ib_devices = 3"), "{e}");
        let e = Config::parse(
            "[limits]\nib_devices = 2\n[[adapter]]\npci = \"00:04.0\"\nib_name = \"mana_0\"\n[[adapter.port]]\nmac = \"00:0d:3a:00:00:01\"\n"
        )
        .unwrap_err();
        assert!(e.contains("both named mana_0"), "{e}");
    }
}

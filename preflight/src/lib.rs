//! What a VM needs before DPDK can use its MANA ports, read from sysfs
//! and procfs (both roots configurable, so the checks run against the
//! emulator's tree too): the MANA functions and their ports (netdev, MAC,
//! netvsc master), the kernel, the modules, rdma-core's libmana, the
//! interfaces' state, hugepages and the synthetic NIC's driver. Each check
//! that fails says what to do. [`prepare`] performs seed 001's preparation
//! for one port and records what it changed so [`undo`] can restore it.

use serde::{Deserialize, Serialize};
use std::fs;
use std::path::{Path, PathBuf};

/// Hyper-V's class id of a synthetic network adapter.
pub const NET_CLASS: &str = "f8615163-df3e-46c5-913f-f2d2f965ed0e";
const MICROSOFT: &str = "0x1414";
/// MANA's PCI device ids: the VF Azure gives a VM, and the PF.
const MANA_DEVICES: [(&str, &str); 2] = [("0x00ba", "VF"), ("0x00b9", "PF")];
/// The first kernel whose `mana_ib` serves DPDK (seed 001).
const MIN_KERNEL: (u32, u32) = (6, 2);
const IFF_UP: u32 = 1;

/// Where the tool reads and writes.
#[derive(Clone, Debug)]
pub struct Roots {
    /// `/sys`, or the emulator's tree.
    pub sys: PathBuf,
    /// `/proc` (`sys/kernel/osrelease`, `mounts`, `net/route`, `meminfo`).
    pub proc: PathBuf,
}

impl Default for Roots {
    fn default() -> Self {
        Roots {
            sys: "/sys".into(),
            proc: "/proc".into(),
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Function {
    /// PCI address, `bus-info` in `ethtool -i`.
    pub bdf: String,
    /// "VF" or "PF".
    pub kind: String,
    /// The kernel driver bound (`mana` expected).
    pub driver: Option<String>,
    /// The RDMA device of the function DPDK uses, from `mana_ib`: its
    /// Ethernet one (`mana_0` up to 6.12, `manae_0` under 7.x).
    pub rdma: Option<String>,
    /// The function's other RDMA devices: 7.x's RNIC (`mana_0`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_rdma: Vec<String>,
    pub ports: Vec<Netdev>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Netdev {
    pub name: String,
    pub mac: String,
    /// Ethernet port index (`dev_port`; the PMD's IB port is this + 1).
    pub dev_port: u32,
    /// `IFF_UP`: the kernel holds the vPort and DPDK cannot create queues.
    pub up: bool,
    /// The netvsc netdev this one is enslaved to (the synthetic NIC).
    pub master: Option<String>,
    /// That netdev is up.
    pub master_up: Option<bool>,
    /// This port carries the default route (likely the SSH session).
    pub default_route: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct SyntheticNic {
    pub uuid: String,
    /// `hv_netvsc` (the kernel's) or `uio_hv_generic` (DPDK's netvsc PMD).
    pub driver: Option<String>,
    /// Its netdev, while `hv_netvsc` has it.
    pub netdev: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Check {
    pub name: String,
    pub ok: bool,
    pub detail: String,
    /// What to do, in plain words, when not ok.
    pub fix: Option<String>,
    /// Only the netvsc PMD setup needs this one.
    pub netvsc_only: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    pub functions: Vec<Function>,
    pub synthetic_nics: Vec<SyntheticNic>,
    pub checks: Vec<Check>,
    /// EAL arguments for the ports checked, direct use of our PMD.
    pub eal_direct: Vec<String>,
    /// The same behind DPDK's netvsc PMD (the vmbus bus probes every
    /// synthetic NIC bound to `uio_hv_generic`).
    pub eal_netvsc: Vec<String>,
    /// Every check for direct use passed.
    pub ready: bool,
    pub ready_netvsc: bool,
}

fn read(p: &Path) -> Option<String> {
    fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

fn link_name(p: &Path) -> Option<String> {
    Some(
        fs::read_link(p)
            .ok()?
            .file_name()?
            .to_string_lossy()
            .into_owned(),
    )
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

fn flags_up(dir: &Path) -> bool {
    read(&dir.join("flags"))
        .and_then(|s| u32::from_str_radix(s.trim_start_matches("0x"), 16).ok())
        .is_some_and(|f| f & IFF_UP != 0)
}

/// A netdev's directory by name (`class/net/<name>`, else searched under
/// the PCI functions' and synthetic NICs' `net/`).
fn netdev_dir(roots: &Roots, name: &str) -> Option<PathBuf> {
    let d = roots.sys.join("class/net").join(name);
    if d.exists() {
        return Some(d);
    }
    let under = |devs: &str| {
        entries(&roots.sys.join(devs))
            .into_iter()
            .map(|f| f.join("net").join(name))
            .find(|d| d.exists())
    };
    under("bus/pci/devices").or_else(|| under("bus/vmbus/devices"))
}

/// The netvsc master of a netdev: its `master` link, else an `upper_*`.
fn master_of(dir: &Path) -> Option<String> {
    link_name(&dir.join("master")).or_else(|| {
        entries(dir).into_iter().find_map(|p| {
            let n = p.file_name()?.to_string_lossy().into_owned();
            n.strip_prefix("upper_").map(str::to_string)
        })
    })
}

/// Interfaces carrying a default route (`net/route`, destination 0).
fn default_route_ifaces(roots: &Roots) -> Vec<String> {
    read(&roots.proc.join("net/route"))
        .unwrap_or_default()
        .lines()
        .skip(1)
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (iface, dest) = (f.next()?, f.next()?);
            (dest == "00000000").then(|| iface.to_string())
        })
        .collect()
}

pub fn functions(roots: &Roots) -> Vec<Function> {
    let routes = default_route_ifaces(roots);
    let mut out = Vec::new();
    for dir in entries(&roots.sys.join("bus/pci/devices")) {
        if read(&dir.join("vendor")).as_deref() != Some(MICROSOFT) {
            continue;
        }
        let dev = read(&dir.join("device")).unwrap_or_default();
        let Some((_, kind)) = MANA_DEVICES.iter().find(|(id, _)| *id == dev) else {
            continue;
        };
        let bdf = dir.file_name().unwrap().to_string_lossy().into_owned();
        let name = |p: &PathBuf| Some(p.file_name()?.to_string_lossy().into_owned());
        let mut rdma_devices: Vec<String> = entries(&dir.join("infiniband"))
            .iter()
            .filter_map(name)
            .collect();
        if rdma_devices.is_empty() {
            // The RDMA class's view.
            rdma_devices = entries(&roots.sys.join("class/infiniband"))
                .iter()
                .filter(|ib| {
                    fs::canonicalize(ib.join("device")).ok() == fs::canonicalize(&dir).ok()
                })
                .filter_map(name)
                .collect();
        }
        let (rdma, other_rdma) = ethernet_rdma_device(rdma_devices);
        let mut ports: Vec<Netdev> = entries(&dir.join("net"))
            .into_iter()
            .filter_map(|nd| {
                let name = nd.file_name()?.to_string_lossy().into_owned();
                let master = master_of(&nd);
                let master_up = master
                    .as_deref()
                    .and_then(|m| netdev_dir(roots, m))
                    .map(|d| flags_up(&d));
                let default_route =
                    routes.contains(&name) || master.as_ref().is_some_and(|m| routes.contains(m));
                Some(Netdev {
                    mac: read(&nd.join("address"))?,
                    dev_port: read(&nd.join("dev_port"))
                        .and_then(|s| s.parse().ok())
                        .unwrap_or(0),
                    up: flags_up(&nd),
                    name,
                    master,
                    master_up,
                    default_route,
                })
            })
            .collect();
        ports.sort_by_key(|p| p.dev_port);
        out.push(Function {
            bdf,
            kind: kind.to_string(),
            driver: link_name(&dir.join("driver")),
            rdma,
            other_rdma,
            ports,
        });
    }
    out
}

/// Which of a function's RDMA devices (sorted names) is its Ethernet one,
/// and the others. 7.x's `mana_ib` gives a function two, named by their
/// role (`mana_ib_probe`: `manae_<n>` for the Ethernet function DPDK uses,
/// `mana_<n>` for the RNIC); earlier kernels one, `mana_<n>`, the Ethernet
/// one. sysfs lists them in no useful order (kernfs hash order), and has
/// nothing else that tells them apart without opening them.
fn ethernet_rdma_device(mut names: Vec<String>) -> (Option<String>, Vec<String>) {
    let eth = names
        .iter()
        .position(|n| n.starts_with("manae_"))
        .unwrap_or(0);
    if names.is_empty() {
        return (None, names);
    }
    let rdma = names.remove(eth);
    (Some(rdma), names)
}

pub fn synthetic_nics(roots: &Roots) -> Vec<SyntheticNic> {
    entries(&roots.sys.join("bus/vmbus/devices"))
        .into_iter()
        .filter(|d| {
            read(&d.join("class_id"))
                .is_some_and(|c| c.trim_matches(['{', '}']).eq_ignore_ascii_case(NET_CLASS))
        })
        .map(|d| SyntheticNic {
            uuid: d.file_name().unwrap().to_string_lossy().into_owned(),
            driver: link_name(&d.join("driver")),
            netdev: entries(&d.join("net"))
                .first()
                .and_then(|p| Some(p.file_name()?.to_string_lossy().into_owned())),
        })
        .collect()
}

/// `major.minor` of a kernel release string ("6.1.0-26-cloud-amd64").
pub fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut it = release.split(['.', '-']);
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// Directories the dynamic linker searches without its cache (Debian's
/// multiarch ones first).
fn library_dirs() -> Vec<PathBuf> {
    let multiarch = format!("{}-linux-gnu", std::env::consts::ARCH);
    [
        format!("/lib/{multiarch}"),
        format!("/usr/lib/{multiarch}"),
        "/lib64".into(),
        "/usr/lib64".into(),
        "/lib".into(),
        "/usr/lib".into(),
    ]
    .into_iter()
    .map(PathBuf::from)
    .collect()
}

/// Where `libmana.so.1` is: the dynamic linker's cache as `ldconfig -p`
/// prints it, else the first of `dirs` holding it (a system without
/// `ldconfig` or its cache still loads it from there).
pub fn find_libmana(ldconfig_p: &str, dirs: &[PathBuf]) -> Option<PathBuf> {
    ldconfig_p
        .lines()
        .find_map(|l| {
            let l = l.trim();
            l.starts_with("libmana.so.1 ")
                .then(|| l.rsplit_once("=> "))
                .flatten()
                .map(|(_, p)| PathBuf::from(p.trim()))
        })
        .or_else(|| {
            dirs.iter()
                .map(|d| d.join("libmana.so.1"))
                .find(|p| p.exists())
        })
}

/// rdma-core's version from the file `libmana.so.1` resolves to, which
/// rdma-core names `libmana.so.1.0.<its version>` (`44.0`).
pub fn rdma_core_version_of(libmana: &Path) -> Option<String> {
    let real = fs::canonicalize(libmana).ok()?;
    let v = real
        .file_name()?
        .to_str()?
        .strip_prefix("libmana.so.1.0.")?;
    (!v.is_empty()).then(|| v.to_string())
}

/// rdma-core's version (dpkg's, else libmana's file name) and where
/// libmana is (None: not found).
fn rdma_core() -> (Option<String>, Option<PathBuf>) {
    let ldconfig = std::process::Command::new("ldconfig")
        .arg("-p")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let libmana = find_libmana(&ldconfig, &library_dirs());
    let version = ["ibverbs-providers", "rdma-core"]
        .iter()
        .find_map(|pkg| {
            let o = std::process::Command::new("dpkg-query")
                .args(["-W", "-f", "${Version}", pkg])
                .output()
                .ok()?;
            let v = String::from_utf8_lossy(&o.stdout).trim().to_string();
            (o.status.success() && !v.is_empty()).then_some(v)
        })
        .or_else(|| libmana.as_deref().and_then(rdma_core_version_of));
    (version, libmana)
}

/// The 2 MiB hugepages to reserve: seed 001's 1024 (2 GiB), or a quarter
/// of the memory (`MemTotal` of `/proc/meminfo`) when that is less, so
/// that a small VM keeps room to run.
pub fn hugepages_wanted(meminfo: Option<&str>) -> u64 {
    let total_kb = meminfo.and_then(|m| {
        m.lines().find_map(|l| {
            l.strip_prefix("MemTotal:")?
                .split_whitespace()
                .next()?
                .parse::<u64>()
                .ok()
        })
    });
    total_kb.map_or(1024, |kb| (kb / 4 / 2048).clamp(1, 1024))
}

fn check(name: &str, ok: bool, detail: String, fix: impl FnOnce() -> String) -> Check {
    Check {
        name: name.into(),
        ok,
        detail,
        fix: (!ok).then(fix),
        netvsc_only: false,
    }
}

/// Reads everything and checks the ports whose MAC or netdev (the MANA
/// one or its netvsc master) is in `select`; every port if empty.
pub fn inspect(roots: &Roots, select: &[String]) -> Report {
    let functions = functions(roots);
    let nics = synthetic_nics(roots);
    let chosen = |p: &Netdev| {
        select.is_empty()
            || select.iter().any(|s| {
                s.eq_ignore_ascii_case(&p.mac) || *s == p.name || p.master.as_ref() == Some(s)
            })
    };
    let targets: Vec<(&Function, &Netdev)> = functions
        .iter()
        .flat_map(|f| f.ports.iter().filter(|p| chosen(p)).map(move |p| (f, p)))
        .collect();
    let mut checks = Vec::new();
    checks.push(check(
        "MANA function",
        !functions.is_empty(),
        functions
            .iter()
            .map(|f| format!("{} ({})", f.bdf, f.kind))
            .collect::<Vec<_>>()
            .join(", "),
        || "no PCI function 1414:00ba/00b9: enable accelerated networking on the VM's NICs (the VM size must support MANA)".into(),
    ));
    if !select.is_empty() && targets.is_empty() {
        checks.push(check("selected port", false, format!("{select:?}"), || {
            format!(
                "no MANA port has the MAC or interface {}; the ports are listed above",
                select.join(", ")
            )
        }));
    }
    let release = read(&roots.proc.join("sys/kernel/osrelease")).unwrap_or_default();
    let kv = kernel_version(&release);
    checks.push(check(
        "kernel",
        kv.is_some_and(|v| v >= MIN_KERNEL),
        release.clone(),
        || format!("kernel {release} is older than 6.2, whose mana_ib DPDK needs: install a 6.2 or later kernel (or a distribution kernel with the MANA RDMA backports, e.g. Ubuntu's linux-azure)"),
    ));
    for (m, why) in [
        ("mana", "the Ethernet driver that owns the ports"),
        ("mana_ib", "the RDMA driver libmana talks to"),
        (
            "ib_uverbs",
            "the verbs device files (/dev/infiniband/uverbs*)",
        ),
    ] {
        let ok = roots.sys.join("module").join(m).exists();
        checks.push(check(
            &format!("module {m}"),
            ok,
            if ok {
                "loaded".into()
            } else {
                "not loaded".into()
            },
            || format!("modprobe {m} ({why}); if it is not found, the kernel lacks it"),
        ));
    }
    for f in &functions {
        checks.push(check(
            &format!("RDMA device of {}", f.bdf),
            f.rdma.is_some(),
            f.rdma.clone().unwrap_or_else(|| "none".into()),
            || format!("{} has no RDMA device: load mana_ib (modprobe mana_ib) and check dmesg for mana_ib errors", f.bdf),
        ));
    }
    let (rdma_version, libmana) = rdma_core();
    checks.push(check(
        "rdma-core libmana",
        libmana.is_some(),
        format!(
            "rdma-core {}, {}",
            rdma_version.as_deref().unwrap_or("(version unknown)"),
            libmana
                .as_ref()
                .map_or("no libmana.so.1".into(), |p| p.display().to_string())
        ),
        || "install rdma-core 44 or later with the mana provider (Debian/Ubuntu: apt install ibverbs-providers libibverbs1). Built rdma-core from source? Its RDMA_DRIVER_MANA id must match the kernel's (seed 001, \"Version mismatch for rdma-core\")".into(),
    ));
    for (f, p) in &targets {
        let mut detail = format!(
            "{} ({} port {}) is {}",
            p.name,
            f.bdf,
            p.dev_port,
            if p.up { "up" } else { "down" }
        );
        if let (Some(m), Some(up)) = (&p.master, p.master_up) {
            detail += &format!(
                ", its netvsc master {m} is {}",
                if up { "up" } else { "down" }
            );
        }
        let ups: Vec<&str> = [(p.up, p.name.as_str())]
            .into_iter()
            .chain(p.master.as_deref().map(|m| (p.master_up == Some(true), m)))
            .filter(|(up, _)| *up)
            .map(|(_, n)| n)
            .collect();
        checks.push(check(
            &format!("interfaces of {}", p.mac),
            ups.is_empty(),
            detail,
            || {
                let mut s = ups
                    .iter()
                    .map(|n| format!("ip link set {n} down"))
                    .collect::<Vec<_>>()
                    .join("; ");
                s += " (while the kernel holds the vPort, DPDK cannot create its queues: \"Failed to create qp queue\")";
                if p.default_route {
                    s += &format!(". {} carries the default route: taking it down cuts an SSH session over it; use another NIC for DPDK", p.name);
                }
                s
            },
        ));
    }
    let pages: u64 = entries(&roots.sys.join("kernel/mm/hugepages"))
        .iter()
        .filter_map(|d| read(&d.join("nr_hugepages"))?.parse::<u64>().ok())
        .sum();
    let wanted = hugepages_wanted(read(&roots.proc.join("meminfo")).as_deref());
    checks.push(check(
        "hugepages",
        pages > 0,
        format!("{pages} reserved"),
        || format!("echo {wanted} > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages ({} MiB in 2 MiB pages{}); DPDK otherwise stops with \"Cannot get hugepage information\"", wanted * 2, if wanted < 1024 { ", a quarter of the memory" } else { "" }),
    ));
    if pages > 0 {
        let mounted = read(&roots.proc.join("mounts")).is_some_and(|m| m.contains("hugetlbfs"));
        checks.push(check(
            "hugetlbfs",
            mounted,
            if mounted { "mounted".into() } else { "not mounted".into() },
            || "mkdir -p /dev/hugepages && mount -t hugetlbfs nodev /dev/hugepages (systemd mounts it at boot on most distributions)".into(),
        ));
    }
    // The synthetic NICs of the checked ports: their netvsc masters.
    let masters: Vec<&str> = targets
        .iter()
        .filter_map(|(_, p)| p.master.as_deref())
        .collect();
    let mut paired = false;
    for n in &nics {
        let theirs = n.netdev.as_deref().is_some_and(|d| masters.contains(&d))
            || (n.netdev.is_none() && n.driver.as_deref() == Some("uio_hv_generic"));
        if !theirs && !masters.is_empty() {
            continue;
        }
        let ok = n.driver.as_deref() == Some("uio_hv_generic");
        let mut c = check(
            &format!("synthetic NIC {}", n.uuid),
            ok,
            format!(
                "driver {}{}",
                n.driver.as_deref().unwrap_or("none"),
                n.netdev
                    .as_deref()
                    .map(|d| format!(" (netdev {d})"))
                    .unwrap_or_default()
            ),
            || {
                format!("for DPDK's netvsc PMD hand it to uio_hv_generic: modprobe uio_hv_generic; echo {NET_CLASS} > /sys/bus/vmbus/drivers/uio_hv_generic/new_id; echo {u} > /sys/bus/vmbus/drivers/hv_netvsc/unbind; echo {u} > /sys/bus/vmbus/drivers/uio_hv_generic/bind (or mana-preflight --apply)", u = n.uuid)
            },
        );
        c.netvsc_only = true;
        checks.push(c);
        paired = true;
    }
    if !paired && !targets.is_empty() {
        let mut c = check("synthetic NIC", false, "none".into(), || {
            format!("no synthetic NIC (VMBus device of class {NET_CLASS}) pairs with the port: DPDK's netvsc PMD needs one, so only the direct use (-a) works here (on Azure each accelerated NIC has one: its netdev is the MANA netdev's master)")
        });
        c.netvsc_only = true;
        checks.push(c);
    }
    let mut eal_direct = Vec::new();
    let mut by_function: Vec<(&str, Vec<&str>)> = Vec::new();
    for (f, p) in &targets {
        match by_function.iter_mut().find(|(b, _)| *b == f.bdf) {
            Some((_, macs)) => macs.push(&p.mac),
            None => by_function.push((&f.bdf, vec![&p.mac])),
        }
    }
    for (bdf, macs) in &by_function {
        let mut a = bdf.to_string();
        for m in macs {
            a += &format!(",mac={m}");
        }
        eal_direct.push("-a".into());
        eal_direct.push(a);
    }
    let mut eal_netvsc = Vec::new();
    for (bdf, macs) in &by_function {
        let mut a = bdf.to_string();
        for m in macs {
            a += &format!(",mac={m}");
        }
        eal_netvsc.push(format!("--vdev={a}"));
    }
    let ready = checks.iter().all(|c| c.ok || c.netvsc_only) && !targets.is_empty();
    let ready_netvsc = ready && checks.iter().all(|c| c.ok);
    Report {
        functions,
        synthetic_nics: nics,
        checks,
        eal_direct,
        eal_netvsc,
        ready,
        ready_netvsc,
    }
}

impl Report {
    /// The human report: ports, checks with what to fix, EAL arguments.
    pub fn render(&self) -> String {
        let mut s = String::from("MANA functions\n");
        if self.functions.is_empty() {
            s += "  none\n";
        }
        for f in &self.functions {
            let others = if f.other_rdma.is_empty() {
                String::new()
            } else {
                format!(", beside {}", f.other_rdma.join(", "))
            };
            s += &format!(
                "  {} ({}, driver {}, RDMA device {}{others})\n",
                f.bdf,
                f.kind,
                f.driver.as_deref().unwrap_or("none"),
                f.rdma.as_deref().unwrap_or("none")
            );
            for p in &f.ports {
                s += &format!(
                    "    port {}: {} {} {}{}{}\n",
                    p.dev_port,
                    p.name,
                    p.mac,
                    if p.up { "up" } else { "down" },
                    p.master
                        .as_deref()
                        .map(|m| format!(", enslaved to {m} (netvsc)"))
                        .unwrap_or_default(),
                    if p.default_route {
                        ", default route"
                    } else {
                        ""
                    }
                );
            }
        }
        for n in &self.synthetic_nics {
            s += &format!(
                "synthetic NIC {} driver {}{}\n",
                n.uuid,
                n.driver.as_deref().unwrap_or("none"),
                n.netdev
                    .as_deref()
                    .map(|d| format!(" netdev {d}"))
                    .unwrap_or_default()
            );
        }
        s += "checks\n";
        for c in &self.checks {
            let tag = match (c.ok, c.netvsc_only) {
                (true, _) => "ok  ",
                (false, false) => "FIX ",
                (false, true) => "FIX (netvsc only)",
            };
            s += &format!("  {tag} {}: {}\n", c.name, c.detail);
            if let Some(f) = &c.fix {
                s += &format!("       -> {f}\n");
            }
        }
        if !self.eal_direct.is_empty() {
            s += &format!(
                "EAL arguments, our PMD directly:   {}\n",
                self.eal_direct.join(" ")
            );
            s += &format!(
                "EAL arguments, behind netvsc:      {}\n",
                self.eal_netvsc.join(" ")
            );
            s += "  (add -d <path>/librte_net_mana.so unless it is installed in DPDK's plugin directory)\n";
        }
        s += &format!(
            "{}\n",
            match (self.ready, self.ready_netvsc) {
                (true, true) => "READY for DPDK, directly and behind netvsc",
                (true, false) => "READY for DPDK directly; behind netvsc once the synthetic NIC is fixed",
                _ => "NOT READY: fix what is marked FIX above (mana-preflight --apply --iface <netvsc netdev> does the interface, hugepage and synthetic NIC steps)",
            }
        );
        s
    }
}

/// What [`prepare`] changed, kept in a state file for [`undo`].
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Changes {
    /// Interfaces set down (they were up).
    pub downed: Vec<String>,
    /// `nr_hugepages` files and the value they had.
    pub hugepages: Vec<(PathBuf, u64)>,
    /// Synthetic NICs moved from `hv_netvsc` to `uio_hv_generic`.
    pub moved: Vec<String>,
}

fn write(p: &Path, s: &str) -> Result<(), String> {
    fs::write(p, s).map_err(|e| format!("writing {s:?} to {}: {e}", p.display()))
}

fn set_up(roots: &Roots, name: &str, up: bool) -> Result<(), String> {
    let dir = netdev_dir(roots, name).ok_or_else(|| format!("no interface {name}"))?;
    let flags = read(&dir.join("flags"))
        .and_then(|s| u32::from_str_radix(s.trim_start_matches("0x"), 16).ok())
        .ok_or_else(|| format!("{}: unreadable flags", dir.display()))?;
    let new = if up { flags | IFF_UP } else { flags & !IFF_UP };
    write(&dir.join("flags"), &format!("0x{new:x}\n"))
}

/// Seed 001's preparation for the ports `select` names (their MAC, MANA
/// netdev or netvsc master): both interfaces down, [`hugepages_wanted`]
/// 2 MiB hugepages when none are reserved, the synthetic NIC moved to
/// `uio_hv_generic`.
/// Returns what it changed (also when a step fails: `Err` carries it).
pub fn prepare(roots: &Roots, select: &[String]) -> Result<Changes, (Changes, String)> {
    let mut ch = Changes::default();
    if select.is_empty() {
        return Err((ch, "say which port to prepare (--iface <netvsc netdev> or --mac <MAC>): the others, among them the one your SSH session uses, stay with the kernel".into()));
    }
    let report = inspect(roots, select);
    let targets: Vec<&Netdev> = report
        .functions
        .iter()
        .flat_map(|f| &f.ports)
        .filter(|p| {
            select.iter().any(|s| {
                s.eq_ignore_ascii_case(&p.mac) || *s == p.name || p.master.as_ref() == Some(s)
            })
        })
        .collect();
    if targets.is_empty() {
        return Err((
            ch,
            format!(
                "no MANA port has the MAC or interface {}",
                select.join(", ")
            ),
        ));
    }
    for p in &targets {
        for (name, up) in [
            (Some(&p.name), p.up),
            (p.master.as_ref(), p.master_up == Some(true)),
        ] {
            if let (Some(n), true) = (name, up) {
                if let Err(e) = set_up(roots, n, false) {
                    return Err((ch, e));
                }
                ch.downed.push(n.clone());
            }
        }
    }
    let nr = roots
        .sys
        .join("kernel/mm/hugepages/hugepages-2048kB/nr_hugepages");
    let have: u64 = read(&nr).and_then(|s| s.parse().ok()).unwrap_or(0);
    if have == 0 {
        let wanted = hugepages_wanted(read(&roots.proc.join("meminfo")).as_deref());
        if let Err(e) = write(&nr, &format!("{wanted}\n")) {
            return Err((ch, e));
        }
        // The kernel reserves what it can find, silently.
        let got: u64 = read(&nr).and_then(|s| s.parse().ok()).unwrap_or(0);
        if got == 0 {
            return Err((ch, format!("the kernel reserved none of the {wanted} hugepages asked in {}: free memory is short or fragmented; reserve them at boot (hugepages={wanted} on the kernel command line)", nr.display())));
        }
        ch.hugepages.push((nr, have));
    }
    let masters: Vec<&str> = targets.iter().filter_map(|p| p.master.as_deref()).collect();
    let drivers = roots.sys.join("bus/vmbus/drivers");
    for n in &report.synthetic_nics {
        if n.driver.as_deref() != Some("hv_netvsc")
            || !n.netdev.as_deref().is_some_and(|d| masters.contains(&d))
        {
            continue;
        }
        if roots.sys == Path::new("/sys") && !roots.sys.join("module/uio_hv_generic").exists() {
            let st = std::process::Command::new("modprobe")
                .arg("uio_hv_generic")
                .status();
            if !st.is_ok_and(|s| s.success()) {
                return Err((ch, "modprobe uio_hv_generic failed".into()));
            }
        }
        let steps = [
            (drivers.join("uio_hv_generic/new_id"), NET_CLASS.to_string()),
            (drivers.join("hv_netvsc/unbind"), n.uuid.clone()),
            (drivers.join("uio_hv_generic/bind"), n.uuid.clone()),
        ];
        for (path, what) in steps {
            // new_id answers EEXIST once the id is known: not an error.
            if let Err(e) = write(&path, &what) {
                if !(path.ends_with("new_id") && e.contains("File exists")) {
                    return Err((ch, e));
                }
            }
        }
        ch.moved.push(n.uuid.clone());
    }
    Ok(ch)
}

/// Restores what [`prepare`] changed, last change first.
pub fn undo(roots: &Roots, ch: &Changes) -> Result<(), String> {
    let drivers = roots.sys.join("bus/vmbus/drivers");
    for u in &ch.moved {
        write(&drivers.join("uio_hv_generic/unbind"), u)?;
        write(&drivers.join("hv_netvsc/bind"), u)?;
    }
    for (path, n) in &ch.hugepages {
        write(path, &format!("{n}\n"))?;
    }
    // hv_netvsc re-creates its netdev on bind; it may take a moment.
    for name in &ch.downed {
        let mut tries = 0;
        loop {
            match set_up(roots, name, true) {
                Ok(()) => break,
                Err(e) if tries >= 50 => return Err(e),
                Err(_) => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A machine without `ldconfig` or its cache (the guest tier's busybox
    /// userspace): libmana found in the linker's directories, and
    /// rdma-core's version read from its file name. Both failed before
    /// ("no libmana.so.1", version unknown) though testpmd loaded it.
    #[test]
    fn libmana_is_found_without_ldconfig_and_names_its_version() {
        let dir = std::env::temp_dir().join(format!("preflight-libs-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let (empty, libs) = (dir.join("empty"), dir.join("lib"));
        fs::create_dir_all(&empty).unwrap();
        fs::create_dir_all(&libs).unwrap();
        fs::write(libs.join("libmana.so.1.0.44.0"), b"").unwrap();
        std::os::unix::fs::symlink("libmana.so.1.0.44.0", libs.join("libmana.so.1")).unwrap();

        let found = find_libmana("", &[empty.clone(), libs.clone()]);
        assert_eq!(found, Some(libs.join("libmana.so.1")));
        assert_eq!(
            rdma_core_version_of(&libs.join("libmana.so.1")).as_deref(),
            Some("44.0")
        );
        assert_eq!(find_libmana("", std::slice::from_ref(&empty)), None);
        // The linker's cache comes first.
        let cache = "4 libs found in cache `/etc/ld.so.cache'\n\
                     \tlibmana.so (libc6,x86-64) => /x/libmana.so\n\
                     \tlibmana.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libmana.so.1\n";
        assert_eq!(
            find_libmana(cache, std::slice::from_ref(&libs)),
            Some(PathBuf::from("/lib/x86_64-linux-gnu/libmana.so.1"))
        );
        // Not rdma-core's naming: no version made up.
        assert_eq!(rdma_core_version_of(&empty), None);
        fs::remove_dir_all(&dir).unwrap();
    }

    /// 1024 pages (2 GiB) where there is room, a quarter of the memory
    /// where there is not: the guest tier's 512 MiB VM got 1024 asked
    /// before, more than it has.
    #[test]
    fn hugepages_wanted_follows_the_memory() {
        assert_eq!(hugepages_wanted(None), 1024);
        let mem = |kb: u64| format!("MemTotal:       {kb} kB\nMemFree:        1000 kB\n");
        assert_eq!(hugepages_wanted(Some(&mem(16 << 20))), 1024);
        assert_eq!(hugepages_wanted(Some(&mem(8 << 20))), 1024);
        assert_eq!(hugepages_wanted(Some(&mem(4 << 20))), 512);
        assert_eq!(hugepages_wanted(Some(&mem(479_000))), 58);
        assert_eq!(hugepages_wanted(Some(&mem(1000))), 1);
        assert_eq!(hugepages_wanted(Some("garbage")), 1024);
    }
}

//! Explains, in the log, why a MANA PCI function has no usable RDMA device:
//! the failures Azure users hit (missing kernel modules, an old kernel, a
//! missing or mismatched rdma-core provider) each get a line saying what to do.

#![forbid(unsafe_code)]

use crate::hw::sysfs::PciAddr;
use std::path::Path;

/// What the driver could observe about the system when the probe failed.
#[derive(Debug, Default)]
pub struct Facts {
    /// `uname -r`.
    pub kernel_release: String,
    pub mana_loaded: bool,
    pub mana_ib_loaded: bool,
    pub ib_uverbs_loaded: bool,
    /// RDMA devices the kernel created for this PCI function.
    pub kernel_ib_devices: Vec<String>,
    /// RDMA devices libibverbs returned, with the PCI function each belongs to.
    pub verbs_devices: Vec<(String, Option<PciAddr>)>,
    /// `/etc/libibverbs.d/mana.driver` exists (rdma-core's libmana installed).
    pub mana_provider: bool,
}

impl Facts {
    pub fn gather(
        pci: &PciAddr,
        pci_sysfs: &Path,
        verbs_devices: Vec<(String, Option<PciAddr>)>,
    ) -> Facts {
        let module = |m: &str| Path::new("/sys/module").join(m).exists();
        // sysfs lists a function's RDMA devices (two under 7.x) in kernfs
        // hash order, which changes from boot to boot: sorted, the message
        // does not.
        let mut kernel_ib_devices: Vec<String> =
            std::fs::read_dir(pci_sysfs.join(pci.to_string()).join("infiniband"))
                .map(|d| {
                    d.flatten()
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default();
        kernel_ib_devices.sort();
        Facts {
            kernel_release: kernel_release(),
            mana_loaded: module("mana"),
            mana_ib_loaded: module("mana_ib"),
            ib_uverbs_loaded: module("ib_uverbs"),
            kernel_ib_devices,
            verbs_devices,
            mana_provider: Path::new("/etc/libibverbs.d/mana.driver").exists(),
        }
    }
}

fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

/// `(major, minor)` of a kernel release such as `6.1.0-28-cloud-amd64`.
fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut it = release.split(|c: char| !c.is_ascii_digit());
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// The log lines for a PCI function without a matching RDMA device; the
/// first states the problem, each further line one cause and its remedy.
pub fn explain(pci: &PciAddr, f: &Facts) -> Vec<String> {
    let mut lines = vec![format!(
        "{pci}: no RDMA device belongs to this MANA PCI function, so its ports cannot be probed"
    )];
    let seen: Vec<String> = f
        .verbs_devices
        .iter()
        .map(|(n, a)| match a {
            Some(a) => format!("{n} ({a})"),
            None => format!("{n} (no PCI_SLOT_NAME)"),
        })
        .collect();
    lines.push(if seen.is_empty() {
        "  libibverbs lists no RDMA devices at all".to_owned()
    } else {
        format!("  libibverbs lists: {}", seen.join(", "))
    });
    if let Some((maj, min)) = kernel_version(&f.kernel_release) {
        if (maj, min) < (6, 2) {
            lines.push(format!(
                "  kernel {} has no mana_ib driver: MANA DPDK needs Linux >= 6.2 (or a distro kernel with mana_ib backported)",
                f.kernel_release
            ));
        }
    }
    if !f.mana_loaded {
        lines.push("  kernel module mana is not loaded: run 'modprobe mana'; it must stay bound to the device".to_owned());
    }
    if !f.mana_ib_loaded {
        lines.push("  kernel module mana_ib is not loaded: run 'modprobe mana_ib'".to_owned());
    }
    if !f.ib_uverbs_loaded {
        lines.push("  kernel module ib_uverbs is not loaded: run 'modprobe ib_uverbs'".to_owned());
    }
    if !f.mana_provider {
        lines.push("  rdma-core's MANA provider is not installed (/etc/libibverbs.d/mana.driver missing): install rdma-core >= 44 (Debian/Ubuntu: ibverbs-providers)".to_owned());
    }
    if !f.kernel_ib_devices.is_empty() {
        lines.push(format!(
            "  the kernel has RDMA device {} for {pci}, but libibverbs did not open it: the RDMA provider id of the kernel and of rdma-core differ (typical of kernels with backported mana_ib and a newer rdma-core); install an rdma-core that matches the kernel's RDMA_DRIVER_MANA id",
            f.kernel_ib_devices.join(", ")
        ));
    }
    lines.push("  check: lspci -d 1414:00ba; ls /sys/class/infiniband; ibv_devices".to_owned());
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pci() -> PciAddr {
        PciAddr::parse("7870:00:00.0").unwrap()
    }

    #[test]
    fn an_old_kernel_without_modules_names_every_remedy() {
        let f = Facts {
            kernel_release: "6.1.0-28-cloud-amd64".into(),
            mana_loaded: true,
            ..Facts::default()
        };
        let text = explain(&pci(), &f).join("\n");
        assert!(text.starts_with("7870:00:00.0: no RDMA device belongs to this MANA PCI function"));
        assert!(text.contains("libibverbs lists no RDMA devices at all"));
        assert!(text.contains(
            "kernel 6.1.0-28-cloud-amd64 has no mana_ib driver: MANA DPDK needs Linux >= 6.2"
        ));
        assert!(text.contains("run 'modprobe mana_ib'"));
        assert!(text.contains("run 'modprobe ib_uverbs'"));
        assert!(text.contains("install rdma-core >= 44"));
        assert!(!text.contains("modprobe mana'"));
        assert!(!text.contains("provider id"));
    }

    #[test]
    fn a_kernel_device_unseen_by_libibverbs_is_a_provider_mismatch() {
        let f = Facts {
            kernel_release: "6.8.0-1015-azure".into(),
            mana_loaded: true,
            mana_ib_loaded: true,
            ib_uverbs_loaded: true,
            mana_provider: true,
            kernel_ib_devices: vec!["mana_0".into()],
            verbs_devices: vec![("mlx5_0".into(), PciAddr::parse("0000:00:02.0"))],
        };
        let lines = explain(&pci(), &f);
        assert_eq!(lines[1], "  libibverbs lists: mlx5_0 (0000:00:02.0)");
        assert!(lines[2].contains("the kernel has RDMA device mana_0 for 7870:00:00.0"));
        assert!(lines[2].contains("provider id"));
        assert_eq!(lines.len(), 4);
    }

    #[test]
    fn kernel_versions_parse() {
        assert_eq!(kernel_version("6.1.0-28-cloud-amd64"), Some((6, 1)));
        assert_eq!(kernel_version("6.12.3"), Some((6, 12)));
        assert_eq!(kernel_version(""), None);
    }
}

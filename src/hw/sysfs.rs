//! Small readers for the sysfs files the driver consults: PCI slot names,
//! port MACs and interface state.

use crate::hw::mac::MacAddr;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

/// Most ports (IB ports, each with its netdev and MAC) one MANA function
/// carries, as the `mac=` devargs can select.
pub const MAX_PORTS: usize = 8;

/// This PCI function's directory in the sysfs tree EAL scans
/// (`SYSFS_PCI_DEVICES`, or `/sys/bus/pci/devices`).
pub fn pci_dir(pci: &PciAddr) -> std::path::PathBuf {
    // SAFETY: EAL returns a static NUL-terminated string.
    let root = unsafe { std::ffi::CStr::from_ptr(crate::ffi::rte_pci_get_sysfs_path()) };
    Path::new(&*root.to_string_lossy()).join(pci.to_string())
}

/// A PCI address `domain:bus:device.function`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PciAddr {
    pub domain: u32,
    pub bus: u8,
    pub devid: u8,
    pub function: u8,
}

impl PciAddr {
    /// Parses `DDDD:BB:DD.F` (or `BB:DD.F`, domain 0), as sysfs and EAL print it.
    pub fn parse(s: &str) -> Option<PciAddr> {
        let (rest, function) = s.trim().rsplit_once('.')?;
        let mut parts: Vec<&str> = rest.split(':').collect();
        if parts.len() == 2 {
            parts.insert(0, "0");
        }
        let [domain, bus, devid] = parts[..] else {
            return None;
        };
        Some(PciAddr {
            domain: u32::from_str_radix(domain, 16).ok()?,
            bus: u8::from_str_radix(bus, 16).ok()?,
            devid: u8::from_str_radix(devid, 16).ok()?,
            function: u8::from_str_radix(function, 16).ok()?,
        })
    }
}

impl fmt::Display for PciAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain, self.bus, self.devid, self.function
        )
    }
}

/// The `PCI_SLOT_NAME` of an RDMA device (`<ibdev_path>/device/uevent`).
pub fn ib_device_pci_addr(ibdev_path: &Path) -> Option<PciAddr> {
    let uevent = fs::read_to_string(ibdev_path.join("device/uevent")).ok()?;
    uevent
        .lines()
        .find_map(|l| l.strip_prefix("PCI_SLOT_NAME="))
        .and_then(PciAddr::parse)
}

/// A kernel network interface of a MANA port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortNetdev {
    pub ifname: String,
    pub mac: MacAddr,
    /// `IFF_UP` is set: the kernel still owns the port.
    pub up: bool,
}

/// The sysfs directory of the netdev of PCI function `function_dir` whose
/// `dev_port` is `ib_port - 1` (Ethernet ports count from 0, IB ports from
/// 1). Looked up each time: a reset through the kernel may re-create the
/// netdev, under another name, and the RDMA device under another too.
pub fn port_netdev_dir(function_dir: &Path, ib_port: u32) -> Option<PathBuf> {
    let net = function_dir.join("net");
    fs::read_dir(net)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|dir| {
            read_trimmed(&dir.join("dev_port")).and_then(|s| s.parse::<u32>().ok())
                == Some(ib_port.wrapping_sub(1))
        })
}

/// The netdev of IB port `ib_port`.
pub fn port_netdev(ibdev_path: &Path, ib_port: u32) -> Option<PortNetdev> {
    let dir = port_netdev_dir(&ibdev_path.join("device"), ib_port)?;
    let mac = read_trimmed(&dir.join("address"))?.parse().ok()?;
    let flags = read_trimmed(&dir.join("flags"))
        .and_then(|s| u32::from_str_radix(s.trim_start_matches("0x"), 16).ok())
        .unwrap_or(0);
    Some(PortNetdev {
        ifname: dir.file_name()?.to_string_lossy().into_owned(),
        mac,
        up: flags & 1 != 0,
    })
}

/// The MTU in a netdev's `mtu` file (`dir` from [`port_netdev_dir`]): the
/// vPort's, which the kernel's `mana` driver programs on the device.
pub fn netdev_mtu(dir: &Path) -> Option<u16> {
    read_trimmed(&dir.join("mtu"))?.parse().ok()
}

/// What a netdev's sysfs says of its link (`dir` from [`port_netdev_dir`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NetdevLink {
    /// `speed` in Mbit/s; `None` where the kernel reports none: -1 (unknown)
    /// or an unreadable file (Linux answers EINVAL while the interface is
    /// down, as MANA's is while DPDK uses the port).
    pub speed_mbps: Option<u32>,
    /// `carrier`; `None` where unreadable (again: the interface is down).
    pub carrier: Option<bool>,
}

pub fn netdev_link(dir: &Path) -> NetdevLink {
    NetdevLink {
        speed_mbps: read_trimmed(&dir.join("speed"))
            .and_then(|s| s.parse::<i64>().ok())
            .filter(|&s| s > 0)
            .and_then(|s| u32::try_from(s).ok()),
        carrier: match read_trimmed(&dir.join("carrier")).as_deref() {
            Some("1") => Some(true),
            Some("0") => Some(false),
            _ => None,
        },
    }
}

pub fn read_trimmed(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pci_addresses_parse_in_both_forms() {
        let a = PciAddr::parse("7870:00:00.0").unwrap();
        assert_eq!((a.domain, a.bus, a.devid, a.function), (0x7870, 0, 0, 0));
        assert_eq!(a.to_string(), "7870:00:00.0");
        assert_eq!(
            PciAddr::parse("00:04.1").unwrap().to_string(),
            "0000:00:04.1"
        );
        assert!(PciAddr::parse("7870:00:00").is_none());
        assert!(PciAddr::parse("zz:00:00.0").is_none());
    }

    #[test]
    fn netdev_link_reads_speed_and_carrier_and_ignores_what_the_kernel_does_not_know() {
        let dir = std::env::temp_dir().join(format!("mana-sysfs-link-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        assert_eq!(netdev_link(&dir), NetdevLink::default());
        for (speed, carrier, want) in [
            ("50000\n", "1\n", (Some(50000), Some(true))),
            ("-1\n", "0\n", (None, Some(false))),
            ("0\n", "x\n", (None, None)),
            ("fast\n", "", (None, None)),
        ] {
            fs::write(dir.join("speed"), speed).unwrap();
            fs::write(dir.join("carrier"), carrier).unwrap();
            let l = netdev_link(&dir);
            assert_eq!((l.speed_mbps, l.carrier), want, "{speed:?} {carrier:?}");
        }
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn port_netdev_is_found_by_dev_port() {
        let dir = std::env::temp_dir().join(format!("mana-sysfs-{}", std::process::id()));
        for (name, port, mac, flags) in [
            ("eth1", "0", "00:0d:3a:00:00:01", "0x1003"),
            ("eth2", "1", "00:0d:3a:00:00:02", "0x1002"),
        ] {
            let d = dir.join("device/net").join(name);
            fs::create_dir_all(&d).unwrap();
            fs::write(d.join("dev_port"), format!("{port}\n")).unwrap();
            fs::write(d.join("address"), format!("{mac}\n")).unwrap();
            fs::write(d.join("flags"), format!("{flags}\n")).unwrap();
        }
        fs::write(
            dir.join("device/uevent"),
            "DRIVER=mana\nPCI_SLOT_NAME=7870:00:00.0\n",
        )
        .unwrap();
        let p2 = port_netdev(&dir, 2).unwrap();
        assert_eq!(p2.ifname, "eth2");
        assert_eq!(p2.mac.to_string(), "00:0d:3a:00:00:02");
        assert!(!p2.up);
        assert!(port_netdev(&dir, 1).unwrap().up);
        assert!(port_netdev(&dir, 3).is_none());
        assert_eq!(
            ib_device_pci_addr(&dir).unwrap().to_string(),
            "7870:00:00.0"
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}

//! The fake sysfs trees: the PCI function EAL scans (`SYSFS_PCI_DEVICES`)
//! and the IB device directory the PMD reads through `ibdev_path`.
//!
//! ```text
//! <root>/bus/pci/devices/<bdf>/{vendor,device,subsystem_*,class,numa_node,resource,uevent}
//! <root>/bus/pci/devices/<bdf>/driver -> <root>/bus/pci/drivers/mana
//! <root>/bus/pci/devices/<bdf>/net/<if>/{address,dev_port,flags,operstate,mtu,speed,carrier}
//! <root>/bus/pci/devices/<bdf>/infiniband/<ibdev>/
//! <root>/class/infiniband/<ibdev>/device -> <root>/bus/pci/devices/<bdf>
//! ```
//!
//! Under a 7.x limits profile a function has two IB devices, `manae_<n>`
//! (Ethernet) and `mana_<n>` (the RNIC), both pointing at the function.
//!
//! `net/<if>/mtu` is the kernel netdev's MTU, which a PMD sets by writing
//! it (as on a VM, through `<ibdev_path>/device/net/<if>/mtu`). The device
//! follows it (`device/ports.rs`, `MtuWatch`). Like a kernel netdev's, it
//! outlives the process using the port: creating or repairing a tree
//! writes the configured MTU only where the file is missing or does not
//! hold a valid MTU (68..=9000).

#![forbid(unsafe_code)]

use crate::config::{AdapterConfig, Config};
use std::fs;
use std::io;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

pub fn pci_dir(root: &Path, bdf: &str) -> PathBuf {
    root.join("bus/pci/devices").join(bdf)
}

pub fn ib_dir(root: &Path, name: &str) -> PathBuf {
    root.join("class/infiniband").join(name)
}

fn write_if_changed(path: &Path, content: &str) -> io::Result<()> {
    if fs::read_to_string(path).ok().as_deref() == Some(content) {
        return Ok(());
    }
    fs::write(path, content)
}

fn ensure_symlink(link: &Path, target: &Path) -> io::Result<()> {
    if let Ok(t) = fs::read_link(link) {
        if t == target {
            return Ok(());
        }
        fs::remove_file(link)?;
    } else if link.exists() {
        if link.is_dir() {
            fs::remove_dir_all(link)?;
        } else {
            fs::remove_file(link)?;
        }
    }
    symlink(target, link)
}

/// Smallest and largest MTU the device accepts (those of the PMD and of
/// the configuration).
pub const MTU_RANGE: std::ops::RangeInclusive<u32> = 68..=9000;

/// The kernel netdev directory of port `port_idx` of an adapter:
/// `<root>/bus/pci/devices/<bdf>/net/<ifname>`.
pub fn netdev_dir(root: &Path, a: &AdapterConfig, port_idx: usize) -> PathBuf {
    let ifname = a.ports[port_idx]
        .ifname
        .clone()
        .unwrap_or_else(|| format!("eth{port_idx}"));
    pci_dir(root, &a.pci).join("net").join(ifname)
}

/// Parses the content of an `mtu` file: a decimal number within
/// [`MTU_RANGE`], surrounding whitespace allowed.
pub fn parse_mtu(s: &str) -> Option<u32> {
    s.trim().parse().ok().filter(|m| MTU_RANGE.contains(m))
}

/// Creates the `mtu` file with `mtu` unless it already holds a valid MTU.
fn ensure_mtu(path: &Path, mtu: u32) -> io::Result<()> {
    match fs::read_to_string(path) {
        Ok(s) if parse_mtu(&s).is_some() => Ok(()),
        _ => fs::write(path, format!("{mtu}\n")),
    }
}

/// Creates (or repairs) the PCI function directory of one adapter.
pub fn ensure_pci(root: &Path, a: &AdapterConfig, if_up: &[bool]) -> io::Result<()> {
    let dir = pci_dir(root, &a.pci);
    fs::create_dir_all(&dir)?;
    let drv = root.join("bus/pci/drivers/mana");
    fs::create_dir_all(&drv)?;
    write_if_changed(&dir.join("vendor"), "0x1414\n")?;
    write_if_changed(&dir.join("device"), "0x00ba\n")?;
    write_if_changed(
        &dir.join("subsystem_vendor"),
        &format!("0x{:04x}\n", a.subsystem_vendor),
    )?;
    write_if_changed(
        &dir.join("subsystem_device"),
        &format!("0x{:04x}\n", a.subsystem_device),
    )?;
    write_if_changed(&dir.join("class"), "0x020000\n")?;
    write_if_changed(&dir.join("numa_node"), &format!("{}\n", a.numa_node))?;
    write_if_changed(
        &dir.join("resource"),
        &"0x0000000000000000 0x0000000000000000 0x0000000000000000\n".repeat(6),
    )?;
    write_if_changed(
        &dir.join("uevent"),
        &format!("DRIVER=mana\nPCI_CLASS=20000\nPCI_ID=1414:00BA\nPCI_SUBSYS_ID={:04X}:{:04X}\nPCI_SLOT_NAME={}\nMODALIAS=pci:v00001414d000000BAsv{:08X}sd{:08X}bc02sc00i00\n",
            a.subsystem_vendor, a.subsystem_device, a.pci, a.subsystem_vendor, a.subsystem_device),
    )?;
    ensure_symlink(&dir.join("driver"), &drv)?;
    for (i, p) in a.ports.iter().enumerate() {
        let nd = netdev_dir(root, a, i);
        fs::create_dir_all(&nd)?;
        write_if_changed(&nd.join("address"), &format!("{}\n", p.mac))?;
        write_if_changed(&nd.join("dev_port"), &format!("{i}\n"))?;
        let up = if_up.get(i).copied().unwrap_or(p.kernel_if_up);
        write_if_changed(&nd.join("flags"), if up { "0x1003\n" } else { "0x1002\n" })?;
        write_if_changed(&nd.join("operstate"), if up { "up\n" } else { "down\n" })?;
        ensure_mtu(&nd.join("mtu"), p.mtu)?;
        // Kept over a reset's repair: a fault may have changed them.
        ensure_file(&nd.join("speed"), &format!("{}\n", p.link_speed_mbps))?;
        ensure_file(&nd.join("carrier"), "1\n")?;
    }
    Ok(())
}

fn ensure_file(path: &Path, content: &str) -> io::Result<()> {
    if path.exists() {
        return Ok(());
    }
    fs::write(path, content)
}

/// Sets a port's netdev `speed` (Mbit/s, -1 unknown) and `carrier` files,
/// each where given.
pub fn set_netdev_link(
    root: &Path,
    a: &AdapterConfig,
    port_idx: usize,
    speed_mbps: Option<i64>,
    carrier: Option<bool>,
) -> io::Result<()> {
    let nd = netdev_dir(root, a, port_idx);
    if !nd.exists() {
        return Ok(());
    }
    if let Some(s) = speed_mbps {
        write_if_changed(&nd.join("speed"), &format!("{s}\n"))?;
    }
    if let Some(c) = carrier {
        write_if_changed(&nd.join("carrier"), if c { "1\n" } else { "0\n" })?;
    }
    Ok(())
}

/// Creates (or repairs) the IB device directory, pointing at the PCI dir,
/// and its entry in the function's `infiniband/` directory (where the
/// kernel keeps the device; the class entry is a link to it there).
pub fn ensure_ib(root: &Path, a: &AdapterConfig, name: &str) -> io::Result<()> {
    let dir = ib_dir(root, name);
    fs::create_dir_all(&dir)?;
    ensure_symlink(&dir.join("device"), &pci_dir(root, &a.pci))?;
    write_if_changed(&dir.join("node_type"), "1: CA\n")?;
    write_if_changed(&dir.join("hca_type"), "MANA\n")?;
    fs::create_dir_all(pci_dir(root, &a.pci).join("infiniband").join(name))?;
    Ok(())
}

pub fn remove_ib(root: &Path, bdf: &str, name: &str) {
    let _ = fs::remove_dir_all(ib_dir(root, name));
    let _ = fs::remove_dir_all(pci_dir(root, bdf).join("infiniband").join(name));
}

/// The IB devices of a function as configured: the Ethernet one, then the
/// RNIC where there is one.
pub fn ib_names(a: &AdapterConfig) -> Vec<String> {
    let eth = a.ib_name.clone().unwrap_or_else(|| "mana_0".into());
    std::iter::once(eth).chain(a.rnic_name.clone()).collect()
}

pub fn remove_pci(root: &Path, bdf: &str) {
    let _ = fs::remove_dir_all(pci_dir(root, bdf));
}

/// Updates a port's kernel-interface state files.
pub fn set_if_state(root: &Path, a: &AdapterConfig, port_idx: usize, up: bool) -> io::Result<()> {
    let nd = netdev_dir(root, a, port_idx);
    if !nd.exists() {
        return Ok(());
    }
    write_if_changed(&nd.join("flags"), if up { "0x1003\n" } else { "0x1002\n" })?;
    write_if_changed(&nd.join("operstate"), if up { "up\n" } else { "down\n" })
}

/// Creates both trees for every adapter of the configuration.
pub fn create_all(cfg: &Config) -> io::Result<()> {
    let root = &cfg.options.sysfs_root;
    for a in &cfg.adapters {
        let ups: Vec<bool> = a.ports.iter().map(|p| p.kernel_if_up).collect();
        ensure_pci(root, a, &ups)?;
        for name in ib_names(a) {
            ensure_ib(root, a, &name)?;
        }
    }
    if !cfg.netvsc.is_empty() {
        crate::vmbus::sysfs::create(root, &cfg.netvsc)?;
    }
    Ok(())
}

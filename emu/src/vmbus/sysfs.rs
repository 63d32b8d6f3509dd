//! The fake VMBus sysfs tree DPDK's vmbus bus scans, under the emulator's
//! sysfs root (the preload library redirects `/sys/bus/vmbus/…` there):
//!
//! ```text
//! bus/vmbus/devices/<uuid>/{class_id,device_id,id,monitor_id,numa_node}
//! bus/vmbus/devices/<uuid>/driver -> ../../drivers/uio_hv_generic
//! bus/vmbus/devices/<uuid>/uio/uio<N>/{name,version}
//! bus/vmbus/devices/<uuid>/uio/uio<N>/maps/map<K>/{name,addr,size,offset}
//! bus/vmbus/devices/<uuid>/channels/<relid>/{ring,subchannel_id,monitor_id,cpu}
//! ```
//!
//! The maps are those of `uio_hv_generic`: 0 the primary channel's rings,
//! 1 the interrupt page, 2 the monitor page, 3 the receive buffer
//! (`recv:<gpadl>`), 4 the send buffer (`send:<gpadl>`). A channel's `ring`
//! file is a placeholder: opening it through the preload library yields the
//! channel's ring memory (a memfd), as the kernel's binary attribute maps it.

use super::config::NetvscConfig;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// The network device class (`HV_NIC`).
pub const NET_CLASS: &str = "f8615163-df3e-46c5-913f-f2d2f965ed0e";
/// `uio_hv_generic`'s buffer sizes.
pub const RECV_BUF_SIZE: usize = 31 << 20;
pub const SEND_BUF_SIZE: usize = 16 << 20;
pub const PAGE: usize = 4096;

pub fn devices_dir(root: &Path) -> PathBuf {
    root.join("bus/vmbus/devices")
}

pub fn device_dir(root: &Path, uuid: &str) -> PathBuf {
    devices_dir(root).join(uuid)
}

pub fn channel_dir(root: &Path, uuid: &str, relid: u32) -> PathBuf {
    device_dir(root, uuid)
        .join("channels")
        .join(relid.to_string())
}

/// GPADL handles of the receive and send buffers of NIC `index`.
pub fn gpadls(index: usize) -> (u32, u32) {
    let base = 0x000e_1e00 + 0x10 * index as u32;
    (base + 1, base + 2)
}

/// Monitor id of a channel (one bit of the 128-bit monitor page).
pub fn monitor_id(relid: u32) -> u8 {
    (relid & 0x7f) as u8
}

/// (name, size) of the five uio maps of NIC `index`.
pub fn maps(index: usize, nic: &NetvscConfig) -> [(String, usize); 5] {
    let (recv, send) = gpadls(index);
    [
        ("txrx_rings".into(), 2 * nic.ring_size),
        ("int_page".into(), PAGE),
        ("monitor_page".into(), PAGE),
        (format!("recv:{recv}"), RECV_BUF_SIZE),
        (format!("send:{send}"), SEND_BUF_SIZE),
    ]
}

fn write(path: &Path, s: &str) -> io::Result<()> {
    if fs::read_to_string(path).ok().as_deref() == Some(s) {
        return Ok(());
    }
    fs::write(path, s)
}

/// A channel's directory, as the kernel creates it when the channel opens.
pub fn add_channel(root: &Path, uuid: &str, relid: u32, subchannel: u16) -> io::Result<()> {
    let d = channel_dir(root, uuid, relid);
    fs::create_dir_all(&d)?;
    write(&d.join("subchannel_id"), &format!("{subchannel}\n"))?;
    write(&d.join("monitor_id"), &format!("{}\n", monitor_id(relid)))?;
    write(&d.join("cpu"), "0\n")?;
    // The placeholder goes last: DPDK takes a channel once its ring exists.
    write(&d.join("ring"), "")
}

/// Creates (or repairs) the tree of every synthetic NIC; sub-channel
/// directories left from an earlier process are removed (the host offers
/// sub-channels only when the guest asks).
pub fn create(root: &Path, nics: &[NetvscConfig]) -> io::Result<()> {
    // A secondary process: the tree is the live primary's host's, with the
    // sub-channels it offered.
    if super::secondary::primary(root).is_some() {
        return Ok(());
    }
    let drv = root.join("bus/vmbus/drivers/uio_hv_generic");
    fs::create_dir_all(&drv)?;
    fs::create_dir_all(devices_dir(root))?;
    for (i, n) in nics.iter().enumerate() {
        let d = device_dir(root, n.uuid());
        fs::create_dir_all(&d)?;
        write(&d.join("class_id"), &format!("{{{NET_CLASS}}}\n"))?;
        write(&d.join("device_id"), &format!("{{{}}}\n", n.uuid()))?;
        write(&d.join("id"), &format!("{}\n", n.relid()))?;
        write(
            &d.join("monitor_id"),
            &format!("{}\n", monitor_id(n.relid())),
        )?;
        write(&d.join("numa_node"), "0\n")?;
        let link = d.join("driver");
        if fs::read_link(&link).is_err() {
            let _ = fs::remove_file(&link);
            std::os::unix::fs::symlink("../../drivers/uio_hv_generic", &link)?;
        }
        let uio = d.join("uio").join(format!("uio{i}"));
        write_maps(&uio, i, n)?;
        let chans = d.join("channels");
        if let Ok(rd) = fs::read_dir(&chans) {
            for e in rd.flatten() {
                if e.file_name().to_str() != Some(&n.relid().to_string()) {
                    let _ = fs::remove_dir_all(e.path());
                }
            }
        }
        add_channel(root, n.uuid(), n.relid(), 0)?;
    }
    Ok(())
}

fn write_maps(uio: &Path, index: usize, n: &NetvscConfig) -> io::Result<()> {
    fs::create_dir_all(uio)?;
    write(&uio.join("name"), "uio_hv_generic\n")?;
    write(&uio.join("version"), "0.02.1\n")?;
    for (k, (name, size)) in maps(index, n).iter().enumerate() {
        let m = uio.join("maps").join(format!("map{k}"));
        fs::create_dir_all(&m)?;
        write(&m.join("name"), &format!("{name}\n"))?;
        // A plausible guest-physical address; DPDK reads names and sizes.
        let addr = 0x1_0000_0000u64 + ((index as u64) << 28) + ((k as u64) << 24);
        write(&m.join("addr"), &format!("0x{addr:016x}\n"))?;
        write(&m.join("size"), &format!("0x{size:x}\n"))?;
        write(&m.join("offset"), "0x0\n")?;
    }
    Ok(())
}

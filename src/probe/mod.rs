//! PCI probe and remove: finds the RDMA device of a MANA PCI function,
//! selects its ports by the `mac=` devargs, and creates one ethdev per port.

pub mod devargs;
mod diag;

use crate::control::plug;
use crate::dataplane::rxq::RxPathWish;
use crate::dataplane::txq::TxPathWish;
use crate::ffi;
use crate::hw::mac::MacAddr;
use crate::hw::sysfs::{self, PciAddr};
use crate::hw::verbs::{DeviceInfo, DeviceList};
use ::log::{error, info, warn};
use devargs::{Devargs, PathChoice};
use std::ffi::{c_int, CStr};
use std::path::Path;

fn pci_addr(dev: &ffi::rte_pci_device) -> PciAddr {
    PciAddr {
        domain: dev.addr.domain,
        bus: dev.addr.bus,
        devid: dev.addr.devid,
        function: dev.addr.function,
    }
}

/// The device name ports are named after: what the user typed in `-a`/`--vdev`
/// if given, otherwise the canonical PCI address.
fn device_name(dev: &ffi::rte_pci_device) -> String {
    if dev.device.name.is_null() {
        return pci_addr(dev).to_string();
    }
    // SAFETY: EAL sets a NUL-terminated name for every scanned device.
    unsafe { CStr::from_ptr(dev.device.name) }
        .to_string_lossy()
        .into_owned()
}

fn drv_str(dev: &ffi::rte_pci_device) -> String {
    let da = dev.device.devargs;
    if da.is_null() {
        return String::new();
    }
    // SAFETY: devargs belong to the device; `drv_str` is NULL or a string.
    let s = unsafe { (*da).__bindgen_anon_1.drv_str };
    if s.is_null() {
        return String::new();
    }
    // SAFETY: a non-null drv_str is a NUL-terminated string owned by the
    // devargs, which outlive the probe.
    unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
}

pub(crate) fn pci_probe(dev: &mut ffi::rte_pci_device) -> c_int {
    let pci = pci_addr(dev);
    let args = drv_str(dev);
    let devargs = match Devargs::parse(&args) {
        Ok(d) => d,
        Err(e) => {
            error!("{pci}: invalid devargs '{args}': {e}");
            return -libc::EINVAL;
        }
    };
    // SAFETY: FFI call without arguments.
    if unsafe { ffi::rte_eal_process_type() } != ffi::RTE_PROC_PRIMARY {
        return crate::control::mp::attach_secondary(
            dev,
            &device_name(dev),
            &crate::ethdev::SECONDARY_OPS,
        );
    }
    let list = match DeviceList::get() {
        Ok(l) => l,
        Err(e) => {
            error!("{pci}: {e}; is rdma-core (libibverbs, libmana >= 44) installed?");
            return e.neg();
        }
    };
    let infos = list.infos();
    // 7.x kernels give a function two RDMA devices: the Ethernet one
    // (`manae_N`, raw packet QPs) and the RNIC (`mana_N`). Every one on
    // this PCI address is looked at, in the list's order.
    let candidates: Vec<usize> = infos
        .iter()
        .enumerate()
        .filter(|(_, d)| sysfs::ib_device_pci_addr(&d.ibdev_path) == Some(pci))
        .map(|(i, _)| i)
        .collect();
    if candidates.is_empty() {
        explain_missing(&pci, &infos);
        return -libc::ENODEV;
    }
    let mut skipped = Vec::new();
    for index in candidates {
        let ib = &infos[index];
        match probe_ports(dev, &list, index, ib, &devargs) {
            Ok(Probed {
                not_ethernet: Some(part),
                ..
            }) => skipped.push(format!("{} (vendor_part_id {part})", ib.name)),
            Ok(Probed {
                created: 0,
                existing,
                ..
            }) if existing > 0 => {
                info!("{pci}: the {existing} selected port(s) exist already; nothing to add");
                return 0;
            }
            Ok(Probed { created: 0, .. }) => {
                let wanted: Vec<String> = devargs.macs().iter().map(MacAddr::to_string).collect();
                error!(
                    "{pci}: RDMA device {} has no port with MAC {}; check the mac= devargs against 'ip -br link'",
                    ib.name,
                    wanted.join(", ")
                );
                return -libc::ENODEV;
            }
            Ok(Probed { created, .. }) => {
                info!("{pci}: probed {created} port(s) of RDMA device {}", ib.name);
                return 0;
            }
            Err(e) => return e,
        }
    }
    error!(
        "{pci}: no RDMA device of this function is the MANA Ethernet function (looked at {}); the kernel's mana_ib must offer one (vendor_part_id {})",
        skipped.join(", "),
        gdma::control::GDMA_DEVICE_MANA
    );
    -libc::ENODEV
}

fn explain_missing(pci: &PciAddr, infos: &[DeviceInfo]) {
    let seen = infos
        .iter()
        .map(|d| (d.name.clone(), sysfs::ib_device_pci_addr(&d.ibdev_path)))
        .collect();
    // SAFETY: returns a static string.
    let pci_sysfs = unsafe { CStr::from_ptr(ffi::rte_pci_get_sysfs_path()) };
    let facts = diag::Facts::gather(pci, Path::new(&*pci_sysfs.to_string_lossy()), seen);
    for line in diag::explain(pci, &facts) {
        error!("{line}");
    }
}

/// What a probe did with the selected ports.
struct Probed {
    created: usize,
    /// Selected ports that exist already (the function is probed again).
    existing: usize,
    /// The device is not the Ethernet function (its `vendor_part_id`):
    /// 7.x's RNIC beside it.
    not_ethernet: Option<u32>,
}

/// Creates an ethdev for every selected port that does not exist yet.
fn probe_ports(
    dev: &mut ffi::rte_pci_device,
    list: &DeviceList,
    index: usize,
    ib: &DeviceInfo,
    devargs: &Devargs,
) -> Result<Probed, c_int> {
    let pci = pci_addr(dev);
    let ctx = list.open(index).map_err(|e| {
        error!("{pci}: {}: {e}", ib.name);
        e.neg()
    })?;
    let attr = ctx.query_device_ex().map_err(|e| {
        error!("{pci}: {}: {e}", ib.name);
        e.neg()
    })?;
    drop(ctx);
    let part = attr.orig_attr.vendor_part_id;
    if !crate::hw::verbs::is_ethernet_function(part) {
        info!(
            "{pci}: {} is not the MANA Ethernet function (vendor_part_id {part}); skipped",
            ib.name
        );
        return Ok(Probed {
            created: 0,
            existing: 0,
            not_ethernet: Some(part),
        });
    }
    // As DPDK's driver: a kernel that leaves the part id 0 (6.12's mana_ib)
    // reports no capabilities either, and its device works.
    if part != 0 && attr.raw_packet_caps == 0 {
        error!(
            "{pci}: {} reports no raw packet capability; the kernel's mana_ib is too old for DPDK",
            ib.name
        );
        return Err(-libc::ENOTSUP);
    }
    let name = device_name(dev);
    let mut probed = Probed {
        created: 0,
        existing: 0,
        not_ethernet: None,
    };
    for ib_port in 1..=u32::from(attr.orig_attr.phys_port_cnt) {
        let Some(netdev) = sysfs::port_netdev(&ib.ibdev_path, ib_port) else {
            warn!(
                "{pci}: {} port {ib_port} has no network interface in sysfs; skipped",
                ib.name
            );
            continue;
        };
        if !devargs.selects(&netdev.mac) {
            continue;
        }
        let port_name = crate::control::mp::port_name(&name, ib_port);
        if crate::control::mp::port_by_name(&port_name).is_some() {
            probed.existing += 1;
            continue;
        }
        let spec = plug::PortSpec {
            name: port_name,
            pci,
            ib_index: index,
            ib: ib.clone(),
            ib_port,
            netdev,
            attr,
            rx_path: devargs.rx_path().map(|c| match c {
                PathChoice::Auto => RxPathWish::Auto,
                PathChoice::Scalar => RxPathWish::Scalar,
                PathChoice::Vector => RxPathWish::Vector,
            }),
            tx_path: devargs.tx_path().map(|c| match c {
                PathChoice::Auto => TxPathWish::Auto,
                PathChoice::Scalar => TxPathWish::Scalar,
                PathChoice::Vector => TxPathWish::Vector,
            }),
        };
        let name = spec.name.clone();
        plug::create(dev, list, spec, &crate::ethdev::OPS).map_err(|e| e.report(&name))?;
        probed.created += 1;
    }
    Ok(probed)
}

pub(crate) fn pci_remove(dev: &mut ffi::rte_pci_device) -> c_int {
    plug::remove_all(dev)
}

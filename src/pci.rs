//! Registration of the `net_mana` PCI driver with DPDK's PCI bus, and the PMD
//! info strings `dpdk-pmdinfo.py` reads.

use crate::ffi;
use std::cell::UnsafeCell;
use std::ffi::c_int;

pub const VENDOR_MICROSOFT: u16 = 0x1414;
pub const DEVICE_MANA_VF: u16 = 0x00ba;
pub const DEVICE_MANA_PF: u16 = 0x00b9;

const fn pci_id(vendor_id: u16, device_id: u16) -> ffi::rte_pci_id {
    ffi::rte_pci_id {
        class_id: ffi::RTE_CLASS_ANY_ID,
        vendor_id,
        device_id,
        subsystem_vendor_id: ffi::RTE_PCI_ANY_ID as u16,
        subsystem_device_id: ffi::RTE_PCI_ANY_ID as u16,
    }
}

static ID_TABLE: [ffi::rte_pci_id; 3] = [
    pci_id(VENDOR_MICROSOFT, DEVICE_MANA_VF),
    pci_id(VENDOR_MICROSOFT, DEVICE_MANA_PF),
    pci_id(0, 0),
];

/// What `dpdk-pmdinfo.py` finds in `.rodata` (same JSON as DPDK's pmdinfogen).
/// The leading NUL ends whatever printable bytes precede it, since the
/// script only reads strings that start after a non-printable byte.
#[used]
static PMD_INFO: [u8; PMD_INFO_STR.len()] = bytes_array(PMD_INFO_STR);
const PMD_INFO_STR: &[u8] = b"\0PMD_INFO_STRING= {\"name\": \"net_mana\", \
\"params\": \"mac=<mac_addr> rx_path=<auto|scalar|vector> tx_path=<auto|scalar|vector>\", \"kmod\": \"* ib_uverbs & mana_ib\", \
\"pci_ids\": [[5140, 186, 65535, 65535], [5140, 185, 65535, 65535]]}\0";

const fn bytes_array<const N: usize>(s: &[u8]) -> [u8; N] {
    let mut a = [0u8; N];
    let mut i = 0;
    while i < N {
        a[i] = s[i];
        i += 1;
    }
    a
}

/// The driver object the PCI bus keeps a pointer to for the process lifetime.
struct Driver(UnsafeCell<ffi::rte_pci_driver>);

// SAFETY: written once by the constructor before any other thread exists;
// afterwards only DPDK's bus code reads it.
unsafe impl Sync for Driver {}

static DRIVER: Driver = Driver(UnsafeCell::new(ffi::compat::pci_driver(
    c"net_mana",
    Some(probe),
    Some(remove),
    ID_TABLE.as_ptr(),
    // No BAR mapping: the kernel mana/mana_ib drivers stay bound. One
    // function carries several ports: probing it again (a `port attach`
    // with other `mac=` devargs) adds the ports not created yet.
    ffi::RTE_PCI_DRV_INTR_LSC | ffi::RTE_PCI_DRV_INTR_RMV | ffi::RTE_PCI_DRV_PROBE_AGAIN,
)));

unsafe extern "C" fn probe(_drv: *mut ffi::rte_pci_driver, dev: *mut ffi::rte_pci_device) -> c_int {
    // SAFETY: EAL passes a valid device for the duration of the call.
    crate::probe::pci_probe(unsafe { &mut *dev })
}

unsafe extern "C" fn remove(dev: *mut ffi::rte_pci_device) -> c_int {
    // SAFETY: EAL passes a valid, probed device for the duration of the call.
    crate::probe::pci_remove(unsafe { &mut *dev })
}

extern "C" fn constructor() {
    crate::ffi::log::init();
    // SAFETY: runs once at load time; the driver object is static and valid
    // for the life of the process, as the PCI bus requires.
    unsafe { ffi::rte_pci_register(DRIVER.0.get()) };
}

#[used]
#[link_section = ".init_array"]
static CONSTRUCTOR: extern "C" fn() = constructor;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pmd_info_is_the_json_pmdinfo_expects() {
        let s = std::str::from_utf8(&PMD_INFO[1..PMD_INFO.len() - 1]).unwrap();
        let json = s.strip_prefix("PMD_INFO_STRING= ").unwrap();
        assert!(json.contains("\"name\": \"net_mana\""));
        assert!(json.contains("[5140, 186, 65535, 65535]"));
        assert_eq!(ID_TABLE[0].vendor_id, 0x1414);
        assert_eq!(ID_TABLE[0].device_id, 0x00ba);
        assert_eq!(ID_TABLE[2].vendor_id, 0);
    }
}

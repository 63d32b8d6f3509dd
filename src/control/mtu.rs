//! The vPort's MTU. MANA's is the kernel netdev's: the PMD sets it through
//! the netdev's sysfs `mtu` file (DPDK's C driver uses `SIOCSIFMTU` on
//! the same netdev), and the device drops received frames beyond it.

use crate::control::error::{Error, Result};
use crate::control::port::Port;
use crate::hw::sysfs;
use ::log::info;

/// Gives the vPort the MTU ethdev holds for the port when it has another:
/// the last `mtu_set`'s, or the one `rte_eth_dev_configure` took from
/// `rxmode.mtu` (1500 when the application left it 0), which ethdev only
/// stores. `start` applies it, and so does a recovery's rebuild, which may
/// meet a netdev the kernel re-created at its default.
pub fn apply(p: &Port) -> Result<()> {
    let mtu = p.data().mtu;
    let was = sysfs::port_netdev_dir(&sysfs::pci_dir(&p.pci), p.ib_port)
        .and_then(|dir| sysfs::netdev_mtu(&dir));
    if was == Some(mtu) {
        return Ok(());
    }
    write(p, mtu)?;
    info!(
        "{}: MTU {mtu} set on the vPort (its netdev had {})",
        p.name,
        was.map_or_else(|| String::from("none readable"), |m| m.to_string())
    );
    Ok(())
}

/// Sets the vPort MTU through the `mtu` file of the port's kernel netdev.
pub fn write(p: &Port, mtu: u16) -> Result<()> {
    let function = sysfs::pci_dir(&p.pci);
    let dir = sysfs::port_netdev_dir(&function, p.ib_port).ok_or_else(|| {
        Error::new(
            libc::ENODEV,
            format!(
                "cannot set MTU {mtu}: no netdev with dev_port {} under {}/net (is the kernel's mana driver bound?)",
                p.ib_port - 1,
                function.display()
            ),
        )
    })?;
    let path = dir.join("mtu");
    std::fs::write(&path, format!("{mtu}\n")).map_err(|e| {
        Error::new(
            e.raw_os_error().unwrap_or(libc::EIO),
            format!(
                "cannot set MTU {mtu} through {}: {e} (needs CAP_NET_ADMIN)",
                path.display()
            ),
        )
    })
}

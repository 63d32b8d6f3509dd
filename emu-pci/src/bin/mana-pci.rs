//! Serves one MANA function over vfio-user for a QEMU of your own:
//!
//! ```text
//! mana-pci --socket PATH [--mac MAC] [--afpacket IFNAME | --loopback] [--queues N]
//! qemu-system-x86_64 ... -object memory-backend-memfd,id=mem,size=512M,share=on \
//!     -machine q35,memory-backend=mem \
//!     -device '{"driver":"vfio-user-pci","socket":{"path":"PATH","type":"unix"}}'
//! ```
//!
//! Runs until QEMU disconnects, then prints the requests it answered and the
//! port's counters as JSON. Logs to stderr (`MANA_PCI_LOG=debug` for more).

use mana_emu::config::BackendConfig;
use mana_pci::device::DeviceConfig;
use mana_pci::function::Function;
use std::path::PathBuf;

fn usage() -> ! {
    eprintln!(
        "usage: mana-pci --socket PATH [--mac MAC] [--afpacket IFNAME | --loopback] [--queues N]"
    );
    std::process::exit(2)
}

fn main() {
    let mut cfg = DeviceConfig::default();
    let mut socket = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().unwrap_or_else(|| usage());
        match a.as_str() {
            "--socket" => socket = Some(PathBuf::from(val())),
            "--mac" => {
                let v = val();
                let b: Vec<u8> = v
                    .split(':')
                    .filter_map(|x| u8::from_str_radix(x, 16).ok())
                    .collect();
                cfg.mac = b.try_into().unwrap_or_else(|_| {
                    eprintln!("mana-pci: bad MAC {v}");
                    std::process::exit(2)
                });
            }
            "--afpacket" => cfg.backend = BackendConfig::AfPacket { ifname: val() },
            "--loopback" => cfg.backend = BackendConfig::Loopback,
            "--queues" => cfg.max_queues = val().parse().unwrap_or_else(|_| usage()),
            _ => usage(),
        }
    }
    let socket = socket.unwrap_or_else(|| usage());
    mana_pci::logging::init(None);
    let mut f = Function::start(cfg, &socket).unwrap_or_else(|e| {
        eprintln!("mana-pci: {e}");
        std::process::exit(1)
    });
    log::info!("serving {} (waiting for QEMU)", socket.display());
    if let Err(e) = f.wait() {
        eprintln!("mana-pci: {e}");
    }
    let d = mana_pci::vfio::lock(&f.dev);
    println!(
        "{}",
        serde_json::json!({
            "requests": d.ledger,
            "port": d.net.counters().ports[0],
            "errors": d.errors,
            "stale_doorbells": d.stale_doorbells,
        })
    );
}

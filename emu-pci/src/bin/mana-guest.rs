//! Runs the guest tier: boots the trixie 6.12 kernel under QEMU with the
//! MANA function attached and runs the scenarios (see `scripts/guest.sh`).

use mana_emu::config::BackendConfig;
use mana_pci::device::DeviceConfig;
use mana_pci::function::Function;
use mana_pci::guest::peer::Peer;
use mana_pci::guest::vm::{Pieces, RunDir, Vm, VmOptions};
use std::time::Duration;

fn main() {
    mana_pci::logging::init(None);
    let p = Pieces::find().unwrap_or_else(|e| {
        eprintln!("mana-guest: {e}");
        std::process::exit(2)
    });
    let peer = Peer::new().unwrap();
    let run = RunDir::new(&p).unwrap();
    let sock = run.host_path("mana.sock");
    let cfg = DeviceConfig {
        backend: BackendConfig::AfPacket {
            ifname: peer.host_if.clone(),
        },
        ..Default::default()
    };
    let mut f = Function::start(cfg, &sock).unwrap();
    let opts = VmOptions {
        vfio_socket: Some(run.guest_path("mana.sock")),
        ..Default::default()
    };
    let mut vm = match Vm::boot(&p, &run, &opts) {
        Ok(vm) => vm,
        Err(e) => {
            eprintln!("boot failed: {e}");
            std::process::exit(1)
        }
    };
    eprintln!("booted in {:?}: {}", vm.boot_time, vm.banner);
    for cmd in std::env::args().skip(1) {
        match vm.console.run(&cmd, Duration::from_secs(60)) {
            Ok(o) => println!("$ {cmd}  [{}]\n{}", o.status, o.text),
            Err(e) => {
                println!("$ {cmd}: {e}\n--- kernel ---\n{}", vm.kernel_output());
                break;
            }
        }
    }
    println!("peer: {:?}", peer.counters());
    vm.shutdown();
    f.stop();
    let d = mana_pci::vfio::lock(&f.dev);
    println!("{}", serde_json::to_string_pretty(&d.ledger).unwrap());
    println!(
        "{}",
        serde_json::to_string_pretty(&d.net.counters().ports).unwrap()
    );
    println!("errors: {:?}", d.errors);
}

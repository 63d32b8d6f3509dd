//! Runs the guest tier: boots the trixie 6.12 kernel under QEMU with the
//! MANA function attached and runs the scenarios (see `scripts/guest.sh`).

use mana_pci::device::{Device, DeviceConfig};
use mana_pci::guest::vm::{Pieces, RunDir, Vm, VmOptions};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn main() {
    mana_pci::logging::init(None);
    let p = Pieces::find().unwrap_or_else(|e| {
        eprintln!("mana-guest: {e}");
        std::process::exit(2)
    });
    let run = RunDir::new(&p).unwrap();
    let sock = run.host_path("mana.sock");
    let server = mana_pci::vfio::listen(&sock).unwrap();
    let dev = Arc::new(Mutex::new(Device::new(DeviceConfig::default())));
    let d2 = dev.clone();
    let t = std::thread::spawn(move || mana_pci::vfio::serve(&server, d2));
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
        match vm.console.run(&cmd, Duration::from_secs(20)) {
            Ok(o) => println!("$ {cmd}  [{}]\n{}", o.status, o.text),
            Err(e) => {
                println!("$ {cmd}: {e}\n--- kernel ---\n{}", vm.kernel_output());
                break;
            }
        }
    }
    vm.shutdown();
    let _ = t.join();
    let d = mana_pci::vfio::lock(&dev);
    println!("{}", serde_json::to_string_pretty(&d.ledger).unwrap());
}

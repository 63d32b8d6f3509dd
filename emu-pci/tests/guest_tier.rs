//! The guest tier as a cargo test: `scripts/guest.sh` (the real `mana`
//! driver in a QEMU guest, against our vfio-user MANA function) must print
//! `ok` for every scenario: all of them under Debian trixie's 6.12 kernel,
//! and the device-raised service reset under trixie-backports' kernel,
//! whose `mana` handles it; the DPDK scenarios on Debian trixie's
//! userspace (rdma-core 56.1, DPDK 24.11 with its packaged C driver); and
//! on the `newest` stack (the newest Debian kernel, rdma-core 65, DPDK
//! 26.07).
//!
//! Needs root (chroot, network namespaces): skipped otherwise. Needs the
//! pieces `scripts/guest-setup.sh` caches: fails, saying so, without them.

use mana_pci::guest::scenarios::SCENARIOS;
use mana_pci::guest::stack;
use std::process::Command;

/// What runs under the backports kernel: its `mana` probing our device,
/// traffic, the service reset the device raises (6.12 has no handler), and
/// the same reset under our PMD forwarding through 7.x's Ethernet IB device
/// (`manae_0`) while `ib_mad` holds the RNIC's (`mana_0`) kernel objects.
const BACKPORTS: [&str; 4] = [
    "kernel-probe",
    "kernel-ping",
    "kernel-service-reset",
    "dpdk-service-reset",
];

/// One guest at a time: the machine has two cores.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `scripts/guest.sh` on `stack_name` with `scenarios` (the stack's
/// if empty) under the kernel of `kernel_dir` (the stack's if `None`);
/// asserts each one printed `ok`.
fn run(stack_name: &str, kernel_dir: Option<&str>, scenarios: &[&str]) {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("guest tier: skipped (needs root)");
        return;
    }
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let stack = stack::by_name(stack_name).expect("a known stack");
    let mut cmd = Command::new(format!("{root}/scripts/guest.sh"));
    cmd.args(["-v", "--stack", stack_name])
        .args(scenarios)
        .env("MANA_GUEST_BIN", env!("CARGO_BIN_EXE_mana-guest"));
    match kernel_dir {
        Some(k) => cmd.env("MANA_GUEST_KERNEL", k),
        None => cmd.env_remove("MANA_GUEST_KERNEL"),
    };
    let out = cmd.output().expect("run scripts/guest.sh");
    let kernel_dir = kernel_dir.map_or_else(|| stack.kernel.to_string(), String::from);
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    println!("{text}{err}");
    let want: &[&str] = if scenarios.is_empty() {
        stack.scenarios.unwrap_or(&SCENARIOS)
    } else {
        scenarios
    };
    for s in want {
        assert!(
            text.lines().any(|l| l == format!("{s}: ok")),
            "{s} did not pass on stack {stack_name} under {kernel_dir}:\n{text}\n{err}"
        );
    }
    assert!(out.status.success(), "guest.sh failed:\n{text}\n{err}");
}

#[test]
fn guest_tier() {
    run("bookworm", None, &[]);
}

#[test]
fn guest_tier_backports_kernel() {
    run("bookworm", Some("kernel-backports"), &BACKPORTS);
}

/// Debian trixie's userspace under the same 6.12 kernel: rdma-core 56.1's
/// libibverbs/libmana, DPDK 24.11.8's testpmd with our PMD built against
/// 24.11 (`scripts/guest.sh --stack trixie` builds it), and trixie's own
/// packaged C `net/mana` (`librte-net-mana25`).
#[test]
fn guest_tier_trixie_stack() {
    run("trixie", None, &[]);
}

/// The newest of everything Debian and DPDK have: the newest Debian
/// kernel (trixie-backports' 7.3 today; 7.x's two IB devices and its
/// service-reset handler), sid's rdma-core 65 and glibc, and DPDK 26.07 as
/// `scripts/dpdk.sh` builds it, with its own C `net/mana` and our PMD
/// built against its headers (`scripts/guest.sh --stack newest` builds
/// both). The DPDK scenarios and the device-raised service reset.
#[test]
fn guest_tier_newest_stack() {
    run("newest", None, &[]);
}

/// The lying device through the real kernel (`dpdk-lying`, opt-in: longer
/// than the tier allows a scenario): our PMD under 6.12's `mana_ib`
/// survives the structured lies in its CQs, counts them, and forwards
/// exactly once they stop.
#[test]
fn guest_tier_lying_device() {
    run("bookworm", None, &["dpdk-lying"]);
}

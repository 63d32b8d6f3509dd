//! The guest tier as a cargo test: `scripts/guest.sh` (the real `mana`
//! driver of Debian trixie's 6.12 kernel in a QEMU guest, against our
//! vfio-user MANA function) must print `ok` for every scenario.
//!
//! Needs root (chroot, network namespaces): skipped otherwise. Needs the
//! pieces `scripts/guest-setup.sh` caches: fails, saying so, without them.

use mana_pci::guest::scenarios::SCENARIOS;
use std::process::Command;

#[test]
fn guest_tier() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("guest_tier: skipped (needs root)");
        return;
    }
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let out = Command::new(format!("{root}/scripts/guest.sh"))
        .arg("-v")
        .env("MANA_GUEST_BIN", env!("CARGO_BIN_EXE_mana-guest"))
        .output()
        .expect("run scripts/guest.sh");
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    println!("{text}{err}");
    for s in SCENARIOS {
        assert!(
            text.lines().any(|l| l == format!("{s}: ok")),
            "{s} did not pass:\n{text}\n{err}"
        );
    }
    assert!(out.status.success(), "guest.sh failed:\n{text}\n{err}");
}

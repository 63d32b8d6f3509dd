//! The Debian package (`debian/`): `tests/package/deb.sh` builds it with
//! `dpkg-buildpackage`, installs it with apt into a clean chroot of this
//! machine's release (the Depends line alone brings every library the
//! plugin links) and adds `dpdk-dev` (testpmd); then dpdk-testpmd runs in that chroot on
//! the emulated device *without `-d`*: EAL loads our plugin from its plugin
//! directory, the plugin probes the port, and what testpmd forwarded equals
//! what the device counted.
//!
//! Needs root (debootstrap, chroot, mounts): skipped otherwise. The first
//! run builds the chroot and its dpdk-dev layer (a few minutes, cached in
//! /var/cache/net-mana/deb-chroot) and the release build of the package.

mod common;
use common::*;

/// `key: value` lines deb.sh ends with.
fn field<'a>(out: &'a str, key: &str) -> &'a str {
    out.lines()
        .rev()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(": "))
        .unwrap_or_else(|| panic!("deb.sh printed no `{key}:` line:\n{out}"))
}

#[test]
fn deb_installs_and_testpmd_loads_it_without_d() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("package test: skipped (needs root)");
        return;
    }
    let script = repo_root().join("tests/package/deb.sh");
    let out = std::process::Command::new(&script)
        .output()
        .expect("tests/package/deb.sh");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{text}");
    assert!(out.status.success(), "deb.sh failed:\n{text}");
    let root = std::path::PathBuf::from(field(&text, "root"));
    let (lowers, upper) = (field(&text, "lowers"), field(&text, "upper"));
    let plugin = field(&text, "plugin").to_string();

    const N: usize = 2000;
    let env = EmuEnv::new(
        "deb",
        single(vec![PortDef::sink(MAC_A).lossless(), PortDef::sink(MAC_B)]),
    )
    .unwrap();
    // No `.driver()`: no -d; the plugin comes from the package.
    let mut t = Testpmd::builder(&env)
        .launcher(repo_root().join("tests/package/in-root.sh"))
        .env("NET_MANA_ROOT", root.to_str().unwrap())
        .env("NET_MANA_LOWERS", lowers)
        .env("NET_MANA_UPPER", upper)
        .args(&["--forward-mode=io"])
        .timeout(DEADLINE)
        .spawn()
        .unwrap_or_else(|e| panic!("testpmd in {}: {e}", root.display()));
    let started = t.output();
    assert_has(
        &started,
        "Probe PCI driver: net_mana (1414:00ba) device: 7870:00:00.0",
    );
    // The process mapped the packaged file (the maps show it under the
    // chroot's directory), and no other net_mana.
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", t.pid())).unwrap();
    let mapped: std::collections::BTreeSet<&str> = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|p| p.contains("net_mana"))
        .collect();
    let want = format!("{}{plugin}", root.display());
    assert_eq!(
        mapped.into_iter().collect::<Vec<_>>(),
        vec![want.as_str()],
        "{maps}"
    );
    let info = cmd(&mut t, "show port info 0");
    assert_has(&info, "Driver name: net_mana");

    cmd(&mut t, "start");
    let fr = udp_frames(MAC_A, N, 3);
    inject_paced(&t, MAC_A, &fr, 250, |c, sent| {
        c.port(MAC_B).unwrap().tx_packets == sent
    });
    cmd(&mut t, "stop");
    let dev = settled(&t);
    let (s0, s1) = (t.port_stats(0).unwrap(), t.port_stats(1).unwrap());
    let (a, b) = (dev.port(MAC_A).unwrap(), dev.port(MAC_B).unwrap());
    let bytes = total_bytes(&fr);
    let n = N as u64;
    assert_eq!((s0.rx_packets, a.rx_packets), (n, n), "A {s0:?}");
    assert_eq!((s0.rx_bytes, a.rx_bytes), (bytes, bytes));
    assert_eq!((s1.tx_packets, b.tx_packets), (n, n), "B {s1:?}");
    assert_eq!((s1.tx_bytes, b.tx_bytes), (bytes, bytes));
    assert_eq!((s0.rx_errors, s0.rx_nombuf, s1.tx_errors), (0, 0, 0));
    assert!(a.drops.is_empty() && b.drops.is_empty(), "{a:?} {b:?}");
    t.quit().unwrap();
    // The emulator's own count at exit, written from inside the chroot.
    let exit = env.exit_counters().unwrap();
    assert_eq!(exit.port(MAC_B).unwrap().tx_packets, n);
}

//! ethdev calls applications make that testpmd cannot express
//! (tests/c/ethdev_api.c), on a loopback port of the emulated device.

mod common;

use common::{build_c, c_program_args, loopback, EmuEnv};
use std::process::{Command, Stdio};

/// Runs one mode of the program; returns its output and whether it exited 0.
fn run(mode: &str) -> (String, bool, EmuEnv) {
    let env = EmuEnv::new(&format!("api-{mode}"), loopback(200, false)).unwrap();
    let mut cmd = Command::new("timeout");
    cmd.arg("120").arg(build_c("ethdev_api")).arg(mode);
    let _runtime = c_program_args(
        &mut cmd,
        &env,
        &format!("api-{mode}"),
        &["--no-huge", "-m", "512", "--log-level=pmd.net.mana.*:info"],
    );
    let out = cmd.stdin(Stdio::null()).output().expect("run ethdev_api");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (text, out.status.success(), env)
}

/// DPDK's RSS group macros configure the port, and the device hashes what
/// each asks for: addresses of every IP packet (IPv6 with no transport
/// header included), plus ports for TCP and UDP.
#[test]
fn every_rss_group_macro_configures_and_hashes_what_it_names() {
    let (out, ok, _env) = run("rss-groups");
    assert!(ok, "{out}");
    for group in ["ip", "tcp", "udp", "proto-mask", "ip-tcp"] {
        let line = format!("RSS {group} CONFIGURE 0 SENT 64 GOT 64 HASH_OK 64 QUEUE_OK 64");
        assert!(out.contains(&line), "missing {line:?} in:\n{out}");
    }
    assert!(!out.contains("invalid rss_hf"), "{out}");
}

/// The link event of `rte_eth_dev_stop` is raised before the stop returns,
/// on the caller's thread, with the link already down: an application (as
/// net_failsafe does) may stop and close holding a lock its LSC callback
/// takes, and an event still waiting for the alarm thread at close would
/// wait on it while close waits for the event (a hang), or be lost.
#[test]
fn the_stop_link_event_is_raised_before_stop_returns() {
    let (out, ok, _env) = run("lsc-stop-close");
    assert!(ok, "{out}");
    assert!(out.contains("EVENTS-AFTER-START 1\n"), "{out}");
    assert!(
        out.contains("EVENTS-AFTER-STOP 2 ON-MAIN-THREAD 1 LINK down\n"),
        "{out}"
    );
    // Nothing late once the alarm thread runs again.
    assert!(out.contains("EVENTS-AFTER-CLOSE 2\n"), "{out}");
}

/// An application that exits with its port started (rte_eal_cleanup runs
/// the PCI remove): the driver stops and closes the port itself, so the
/// device's queues are destroyed before the process ends.
#[test]
fn eal_cleanup_with_the_port_started_stops_and_closes_it() {
    let (out, ok, env) = run("exit-started");
    assert!(ok, "{out}");
    assert!(out.contains("START 0"), "{out}");
    assert!(out.contains("CLEANUP 0"), "{out}");
    assert!(!out.contains("Cannot close started device"), "{out}");
    assert!(!out.contains("close on PCI remove failed"), "{out}");
    assert!(
        out.contains("net_mana: 7870:00:00.0_port1: closed"),
        "{out}"
    );
    let c = env.exit_counters().expect("exit counters");
    let live: Vec<_> = c.queues.iter().filter(|q| q.live).collect();
    assert!(!c.queues.is_empty(), "the port created queues: {c:?}");
    assert!(live.is_empty(), "queues left at exit: {live:?}");
}

/// Loopback mode is refused, with the reason; the port configures without it.
#[test]
fn loopback_mode_is_refused_with_the_reason() {
    let (out, ok, _env) = run("lpbk");
    assert!(ok, "{out}");
    assert!(out.contains("LPBK1 -22 LPBK0 0"), "{out}");
    assert!(
        out.contains(
            "net_mana: 7870:00:00.0_port1: lpbk_mode 1 refused: MANA has no loopback mode"
        ),
        "{out}"
    );
}

/// Impossible values at every entry that reaches the driver: each call
/// fails with a clear error and loses nothing; the port then works.
#[test]
fn impossible_values_are_refused_and_the_port_still_works() {
    let (out, ok, _env) = run("bad-input");
    assert!(ok, "{out}");
    let mut got = std::collections::BTreeMap::new();
    for l in out.lines() {
        if let Some(rest) = l.strip_prefix("BAD ") {
            let (what, ret) = rest.split_once(' ').unwrap();
            got.insert(what.to_string(), ret.parse::<i32>().unwrap());
        }
    }
    const EINVAL: i32 = -libc::EINVAL;
    const ENOTSUP: i32 = -libc::ENOTSUP;
    let want: &[(&str, i32)] = &[
        ("configure-3-rxq", EINVAL),
        ("configure-128-rxq", EINVAL),
        ("configure-dcb", EINVAL),
        ("configure-lsc", 0),
        ("configure-2-rxq", 0),
        ("rxq-id-out-of-range", EINVAL),
        ("rxq-null-mempool", EINVAL),
        ("rxq-192-desc", EINVAL),
        ("rxq-too-many-desc", EINVAL),
        ("txq-192-desc", EINVAL),
        ("txq-id-out-of-range", EINVAL),
        ("start-without-queues", EINVAL),
        ("mtu-67", EINVAL),
        ("mtu-9001", EINVAL),
        ("mtu-900", 0),
        ("rxq-small-mbufs", 0),
        ("mtu-beyond-buffers", EINVAL),
        ("rxq-small-mbufs-at-mtu-1500", 0),
        ("mtu-1500-back", EINVAL),
        ("rss-key-39-bytes", EINVAL),
        ("rss-sctp", EINVAL),
        ("reta-size-128", EINVAL),
        ("reta-queue-5", EINVAL),
        ("reta-not-periodic", EINVAL),
        ("xstats-1-entry", 1),
        ("xstats-names-1-entry", 1),
        ("fw-version-4-bytes", 1),
        ("mac-other", ENOTSUP),
        ("promiscuous", ENOTSUP),
        ("vlan-filter", EINVAL),
        ("rx-intr-without-conf", EINVAL),
        ("rxq-start-out-of-range", EINVAL),
        ("rxq-start-port-stopped", EINVAL),
        ("start", 0),
    ];
    let want: std::collections::BTreeMap<String, i32> =
        want.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    assert_eq!(got, want, "{out}");
    assert!(out.contains("WORKS SENT 64 GOT 64"), "{out}");
    // What the driver refuses, it says why.
    for line in [
        "3 receive queues: MANA spreads traffic over a power-of-two number of receive queues, at most 64",
        "rx mq_mode 2 is not supported; use none or RSS",
        "192 descriptors: MANA queues take a power of two from 64 to 256",
        "start failed: rx queue 0 is not set up",
        "MTU 1500 needs 1518-byte receive buffers; rx queue 0 has 1024 (no scatter): set the MTU before setting up the queues (frames longer than an mbuf are then received into several), or enable RTE_ETH_RX_OFFLOAD_SCATTER, or use larger mbufs",
        "MTU 1500 needs 1518-byte receive buffers; rx queue 1 has 1024 (no scatter): set the MTU before setting up the queues (frames longer than an mbuf are then received into several), or enable RTE_ETH_RX_OFFLOAD_SCATTER, or use larger mbufs",
        "RSS key length 39 is not 40 bytes",
        "the redirection table has 64 entries, not 128",
        "redirection table rejected: entries 0..2 must name each of the 2 receive queues exactly once (got [0, 0])",
        "cannot change the MAC to 02:00:00:00:00:99: Azure fixes each port's MAC (00:0d:3a:00:00:01)",
    ] {
        assert!(out.contains(&format!("net_mana: 7870:00:00.0_port1: {line}")), "missing {line:?} in:\n{out}");
    }
}

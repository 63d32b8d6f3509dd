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
    c_program_args(
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

//! A C program (tests/c/vf_harness.c) drives the port the way netvsc drives
//! its VF, and the way applications react to recovery events from inside
//! their callbacks: stop, close and remove on the interrupt thread and on
//! the driver's recovery thread. No deadlock, no lost mbuf; one run under
//! valgrind's memcheck for use-after-free.

mod common;

use mana_emu::config::Config;
use mana_emu::harness::{EmuEnv, Hugepages};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn harness() -> PathBuf {
    common::build_c("vf_harness")
}

fn config(down_ms: u64, poll: bool) -> Config {
    common::loopback(down_ms, poll)
}

struct Run {
    out: String,
    ok: bool,
}

impl Run {
    fn events(&self) -> Vec<&str> {
        self.out
            .lines()
            .filter_map(|l| l.strip_prefix("EVENT "))
            .collect()
    }

    fn value(&self, key: &str) -> u64 {
        self.out
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix(key))
            .unwrap_or_else(|| panic!("no {key} in:\n{}", self.out))
            .trim()
            .parse()
            .unwrap()
    }
}

fn run(
    name: &str,
    mode: &str,
    resets: u32,
    env_cfg: Config,
    extra: &[(&str, &str)],
    valgrind: bool,
) -> Run {
    let env = EmuEnv::new(name, env_cfg).unwrap();
    let mut cmd = if valgrind {
        let mut c = Command::new("valgrind");
        let supp = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/dpdk.supp");
        c.args(["--error-exitcode=99", "--errors-for-leak-kinds=none", "-q"])
            .arg(format!("--suppressions={}", supp.display()))
            .arg(harness());
        c
    } else {
        Command::new(harness())
    };
    cmd.args([mode, &resets.to_string()]);
    let _runtime = common::c_program_args(
        &mut cmd,
        &env,
        &format!("vfh-{name}"),
        &["--no-huge", "-m", "512"],
    );
    for (k, v) in extra {
        cmd.env(k, v);
    }
    // Only catches a hang: every wait inside is for an event.
    let limit = if valgrind { 1200 } else { 600 };
    let out = Command::new("timeout")
        .arg(limit.to_string())
        .arg(cmd.get_program())
        .args(cmd.get_args())
        .envs(cmd.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
        .stdin(Stdio::null())
        .output()
        .expect("run vf_harness");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    Run {
        ok: out.status.success(),
        out: text,
    }
}

#[test]
fn netvsc_style_usage_survives_50_resets_without_losing_a_buffer() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let r = run("netvsc", "netvsc", 50, config(20, false), &[], false);
    assert!(r.ok, "{}", r.out);
    let expected: Vec<&str> = ["ERR_RECOVERING intr", "RECOVERY_SUCCESS ctrl"]
        .iter()
        .cycle()
        .take(100)
        .copied()
        .collect();
    assert_eq!(r.events(), expected, "\n{}", r.out);
    assert!(!r.out.contains("NO_TRAFFIC"), "{}", r.out);
    // Every round sent through the VF (at least one ring, 256 packets).
    assert!(r.value("TRAFFIC") >= 50 * 256, "{}", r.out);
    assert_eq!(r.value("IN_USE"), 0, "{}", r.out);
    assert!(r.out.contains("DONE"));
}

#[test]
fn closing_from_the_err_recovering_callback_on_the_interrupt_thread() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let r = run(
        "close-recovering",
        "close-recovering",
        1,
        config(20, false),
        &[],
        false,
    );
    assert!(r.ok, "{}", r.out);
    assert_eq!(r.events(), ["ERR_RECOVERING intr"], "{}", r.out);
    assert_eq!(r.value("IN_USE"), 0, "{}", r.out);
}

#[test]
fn stopping_and_closing_from_the_recovery_success_callback_on_the_recovery_thread() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for mode in ["stop-success", "close-success"] {
        let r = run(mode, mode, 2, config(20, false), &[], false);
        assert!(r.ok, "{mode}: {}", r.out);
        assert_eq!(
            r.events()[..2],
            ["ERR_RECOVERING intr", "RECOVERY_SUCCESS ctrl"],
            "{mode}: {}",
            r.out
        );
        assert_eq!(r.value("IN_USE"), 0, "{mode}: {}", r.out);
    }
}

#[test]
fn removing_from_the_recovery_failed_callback_and_closing_on_removal() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let r = run(
        "remove-failed",
        "remove-failed",
        1,
        config(600_000, false),
        &[("NET_MANA_RESET_TIMEOUT_MS", "500")],
        false,
    );
    assert!(r.ok, "{}", r.out);
    assert_eq!(
        r.events(),
        ["ERR_RECOVERING intr", "RECOVERY_FAILED ctrl"],
        "{}",
        r.out
    );
    assert_eq!(r.value("IN_USE"), 0, "{}", r.out);

    let r = run(
        "close-rmv",
        "close-rmv",
        1,
        config(20, false),
        &[("VF_FAULT", "hot_remove")],
        false,
    );
    assert!(r.ok, "{}", r.out);
    assert_eq!(
        r.events(),
        ["ERR_RECOVERING intr", "INTR_RMV ctrl"],
        "{}",
        r.out
    );
    assert_eq!(r.value("IN_USE"), 0, "{}", r.out);
}

#[test]
fn callbacks_closing_the_port_are_clean_under_valgrind() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if Command::new("valgrind").arg("--version").output().is_err() {
        panic!("valgrind missing: scripts/setup.sh installs it");
    }
    // Poll-mode doorbells: valgrind does not replay the emulator's
    // instruction-skipping SIGSEGV handler.
    for mode in ["close-recovering", "close-success"] {
        let r = run(&format!("vg-{mode}"), mode, 1, config(20, true), &[], true);
        assert!(r.ok, "{mode} under valgrind: {}", r.out);
        assert!(!r.out.contains("Invalid read"), "{}", r.out);
        assert!(!r.out.contains("Invalid write"), "{}", r.out);
        assert_eq!(r.value("IN_USE"), 0, "{}", r.out);
    }
}

/// 2 MiB hugepages for the multi-process test (secondaries cannot share
/// `--no-huge` memory); restores the previous count on drop.
#[test]
fn a_secondary_process_forwards_through_the_primarys_port_across_resets() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _pages = Hugepages::reserve(256).unwrap();
    let env = EmuEnv::new("mp", config(20, false)).unwrap();
    let dir = env.dir.clone();
    let prefix = "vfh-mp";
    // One runtime directory for both processes, removed when the test ends.
    let base = |c: &mut Command, mode: &str, resets: &str| {
        c.args([mode, resets]);
        let runtime = common::c_program_args(c, &env, prefix, &["-m", "256"]);
        c.env("VF_MARK", dir.join("mark"))
            .env("VF_STOP", dir.join("stop"))
            .env("VF_EXITED", dir.join("exited"))
            .env("VF_READY", dir.join("ready"))
            .env("VF_ATTACHED", dir.join("attached"))
            .env("VF_SEEN", dir.join("seen"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        runtime
    };
    let mut p = Command::new(harness());
    let _runtime = base(&mut p, "mp-primary", "3");
    let primary = p.spawn().unwrap();
    // The secondary attaches once the primary's port exists (it says so
    // with a file); the deadline only catches a hang.
    let t0 = std::time::Instant::now();
    while !dir.join("ready").exists() {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(120),
            "the primary never got its port ready"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let mut c = Command::new("timeout");
    c.arg("600").arg(harness());
    let _same_runtime = base(&mut c, "mp-secondary", "0");
    c.arg("--proc-type=secondary");
    let secondary = c.output().unwrap();
    let primary = primary.wait_with_output().unwrap();
    let sec = String::from_utf8_lossy(&secondary.stdout).into_owned()
        + &String::from_utf8_lossy(&secondary.stderr);
    let pri = Run {
        ok: primary.status.success(),
        out: String::from_utf8_lossy(&primary.stdout).into_owned()
            + &String::from_utf8_lossy(&primary.stderr),
    };
    assert!(
        secondary.status.success(),
        "secondary:\n{sec}\nprimary:\n{}",
        pri.out
    );
    assert!(pri.ok, "primary:\n{}\nsecondary:\n{sec}", pri.out);
    let value = |k: &str| -> u64 {
        sec.lines()
            .find_map(|l| l.strip_prefix(k))
            .unwrap_or_else(|| panic!("no {k} in {sec}"))
            .trim()
            .parse()
            .unwrap()
    };
    assert!(value("SEC_RX ") > 1000, "{sec}");
    // Traffic through the secondary resumed after the last reset: it was
    // handed the new doorbell page.
    assert!(value("SEC_RX_AFTER ") > 100, "{sec}\n{}", pri.out);
    assert_eq!(
        pri.events()
            .iter()
            .filter(|e| e.starts_with("RECOVERY_SUCCESS"))
            .count(),
        3,
        "{}",
        pri.out
    );
    assert_eq!(pri.value("IN_USE"), 0, "{}", pri.out);
}

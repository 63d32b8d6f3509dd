//! The main job's verdict (`scripts/demo.sh`, `mana-demo`) over a recorded
//! run (`data/demo-pass.log`, written by `scripts/demo.sh --log`): what the
//! screen says of it, and that a run that went wrong in any of the ways
//! the demo checks gives FAIL, says why, and exits non-zero.

use mana_emu::demo::Verdict;
use std::path::{Path, PathBuf};
use std::process::Command;

fn recorded() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/demo-pass.log"))
        .unwrap()
}

/// The recorded log with every line `f` maps replaced.
fn edited(mut f: impl FnMut(&str) -> Option<String>) -> String {
    recorded()
        .lines()
        .map(|l| f(l).unwrap_or_else(|| l.to_string()) + "\n")
        .collect()
}

fn demo(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mana-demo"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn write_tmp(name: &str, text: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("mana-demo-{name}-{}.log", std::process::id()));
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn the_recorded_run_passes_with_its_numbers() {
    let v = Verdict::from_log(&recorded());
    assert!(v.passed(), "{:?}", v.failures);
    let p0 = &v.ports[0];
    assert_eq!(p0.mac, "00:0D:3A:76:3B:D0");
    assert_eq!(
        (
            p0.testpmd.rx_packets,
            p0.device.rx_packets,
            p0.lost_to_reset
        ),
        (226011, 226075, 64)
    );
    assert_eq!(
        (p0.testpmd.tx_packets, p0.device.tx_packets),
        (141027, 141027)
    );
    assert_eq!(v.ports[1].lost_to_reset, 45);
    assert_eq!(
        v.events[&0],
        ["ERR_RECOVERING", "LSC", "RECOVERY_SUCCESS", "LSC"]
    );
    assert_eq!(
        (v.reset_at_ms, v.recovered_after_ms),
        (Some(516), Some(1015))
    );
    assert_eq!(v.forwarded_after_reset, Some(102341));
    assert_eq!(v.lost.values().sum::<u64>(), 109);
    assert_eq!((v.mbufs_before, v.mbufs_after), (Some(0), Some(0)));
    let screen = v.render("demo.log");
    for line in [
        "  RX frames                           226011         226075  equal with the 64 lost to the reset",
        "  TX frames                           141027         141027  equal",
        "  port 0 events      ERR_RECOVERING -> LSC -> RECOVERY_SUCCESS -> LSC",
        "  recovered          1.01 s after the injection",
        "  frames lost        109 (109 in the receive queues)",
        "PASS: every frame counted alike by testpmd and the device, the reset recovered, no mbuf leaked",
        "raw testpmd and emulator output: demo.log",
    ] {
        assert!(screen.lines().any(|l| l == line), "no {line:?} in\n{screen}");
    }
    // One screen.
    assert!(screen.lines().count() <= 25, "{screen}");
}

#[test]
fn frames_the_driver_did_not_account_for_fail_the_run() {
    // The driver reporting no loss: the device's extra frames are unexplained.
    let log = edited(|l| {
        l.contains("_lost_to_reset: ")
            .then(|| format!("{}: 0", l.split(": ").next().unwrap()))
    });
    let v = Verdict::from_log(&log);
    assert_eq!(
        v.failures,
        [
            "port 0: RX frames: testpmd counted 226011, the device 226075",
            "port 0: RX bytes: testpmd counted 14464704, the device 14468800",
            "port 1: RX frames: testpmd counted 140982, the device 141027",
            "port 1: RX bytes: testpmd counted 9022848, the device 9025728",
        ]
    );
    assert!(v.render("x").contains("DIFFERENT"));
}

#[test]
fn a_failed_recovery_fails_the_run() {
    let log = edited(|l| {
        (l == "Port 1: error recovery successful event")
            .then(|| "Port 1: error recovery failed event".into())
    });
    let v = Verdict::from_log(&log);
    assert_eq!(
        v.failures,
        ["port 1: recovery events ERR_RECOVERING, RECOVERY_FAILED (expected ERR_RECOVERING, RECOVERY_SUCCESS)"]
    );
}

#[test]
fn a_leaked_mbuf_and_a_killed_testpmd_fail_the_run() {
    let mut section = "";
    let mut leaked = false;
    let log = edited(|l| {
        if let Some(s) = l.strip_prefix("@@ section ") {
            section = if s == "mbufs-after" { "after" } else { "" };
        }
        if l == "@@ value testpmd_exit 0" {
            return Some("@@ value testpmd_exit -1".into());
        }
        // One object fewer in the first pool's ring after the run.
        let n = l.trim().strip_prefix("common_pool_count=")?;
        if section != "after" || std::mem::replace(&mut leaked, true) {
            return None;
        }
        Some(format!(
            "  common_pool_count={}",
            n.parse::<u64>().unwrap() - 1
        ))
    });
    let v = Verdict::from_log(&log);
    assert_eq!(
        v.failures,
        [
            "mbufs in use: 0 before, 1 after (1 leaked)",
            "testpmd did not quit (killed)"
        ]
    );
}

#[test]
fn mana_demo_exits_0_on_pass_and_1_on_fail_with_the_reason() {
    let pass = write_tmp("pass", &recorded());
    let (code, out) = demo(&["--verdict", pass.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("\nPASS: "), "{out}");
    assert!(out.ends_with(&format!(
        "raw testpmd and emulator output: {}\n",
        pass.display()
    )));

    let fail = write_tmp(
        "fail",
        &recorded().replace("Port 0: error recovery successful event", ""),
    );
    let (code, out) = demo(&["--verdict", fail.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("\nFAIL: port 0: recovery events ERR_RECOVERING (expected ERR_RECOVERING, RECOVERY_SUCCESS)\n"),
        "{out}"
    );
    let (code, _) = demo(&[]);
    assert_eq!(code, 2);
    for p in [pass, fail] {
        std::fs::remove_file(p).unwrap();
    }
}

//! Rx interrupts as an l3fwd-power style loop uses them (tests/c/rx_intr.c):
//! an armed idle queue lets the lcore sleep, a packet wakes it, and the
//! epoll registration made once at start keeps working across a device
//! reset.

mod common;

use common::{build_c, c_program_args, loopback, EmuEnv};
use std::process::{Command, Stdio};

/// Runs the loop; returns its output and whether it exited 0.
fn run(name: &str, rounds: u32, reset_after: u32, poll: bool) -> (String, bool) {
    let env = EmuEnv::new(name, loopback(200, poll)).unwrap();
    let mut cmd = Command::new(build_c("rx_intr"));
    cmd.args([rounds.to_string(), reset_after.to_string()]);
    let _runtime = c_program_args(
        &mut cmd,
        &env,
        &format!("rxi-{name}"),
        &["--no-huge", "-m", "512"],
    );
    let out = Command::new("timeout")
        .arg("120")
        .arg(cmd.get_program())
        .args(cmd.get_args())
        .envs(cmd.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
        .stdin(Stdio::null())
        .output()
        .expect("run rx_intr");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (text, out.status.success())
}

/// `(idle wake-ups, wake-ups, sent, got)` of every round.
fn rounds(out: &str) -> Vec<(u32, u32, u32, u32)> {
    out.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w.as_slice() {
                ["ROUND", _, "IDLE_WAKEUPS", i, "WAKEUPS", k, "SENT", s, "GOT", g] => Some((
                    i.parse().unwrap(),
                    k.parse().unwrap(),
                    s.parse().unwrap(),
                    g.parse().unwrap(),
                )),
                _ => None,
            }
        })
        .collect()
}

fn check(out: &str, ok: bool, n: usize) {
    assert!(ok, "rx_intr failed:\n{out}");
    let r = rounds(out);
    assert_eq!(r.len(), n, "{out}");
    for (i, &(idle, woken, sent, got)) in r.iter().enumerate() {
        assert_eq!(
            idle,
            0,
            "round {}: an idle queue woke the lcore\n{out}",
            i + 1
        );
        assert_eq!(
            woken,
            1,
            "round {}: the packets did not wake the lcore\n{out}",
            i + 1
        );
        assert_eq!((sent, got), (32, 32), "round {}\n{out}", i + 1);
    }
    assert!(out.contains("IN_USE 0\n"), "mbufs leaked:\n{out}");
    assert!(out.contains("DONE"), "{out}");
}

#[test]
fn a_sleeping_lcore_wakes_for_packets_and_only_for_them() {
    for poll in [false, true] {
        let (out, ok) = run(if poll { "poll" } else { "trap" }, 5, 0, poll);
        check(&out, ok, 5);
    }
}

#[test]
fn rx_interrupts_keep_working_across_a_device_reset() {
    let (out, ok) = run("reset", 6, 3, false);
    check(&out, ok, 6);
    assert!(out.contains("RECOVERED"), "{out}");
    // rx_queue_count and the descriptor status calls see the 32 frames
    // waiting before the reset, and stay out of the rings while the reset
    // owns them (the ERR_RECOVERING callback runs with the rings still
    // mapped, so reading them would report the 32 again).
    // RTE_ETH_RX_DESC_DONE = 1, RTE_ETH_RX_DESC_UNAVAIL = 2,
    // RTE_ETH_TX_DESC_DONE = 1.
    assert!(out.contains("QUEUED 32 OF 32 RXDESC0 1\n"), "{out}");
    assert!(
        out.contains("RECOVERING COUNT 0 RXDESC0 2 TXDESC0 1 AFTER COUNT 0\n"),
        "{out}"
    );
}

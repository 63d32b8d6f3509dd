//! DPDK multi-process with DPDK's own programs: a primary testpmd drives two
//! ports of one function, a secondary testpmd sends on its own queues, and
//! `dpdk-proc-info` reads the ports; device resets in the middle.

mod common;

use common::*;
use std::time::{Duration, Instant};

/// One testpmd at a time: the machine has two cores.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn pair(down_ms: u64) -> Config {
    config(
        &format!("reset_down_ms = {down_ms}"),
        "",
        &[(
            PCI,
            vec![
                PortDef::new(MAC_A, &format!(r#"{{ kind = "pair", peer = "{MAC_B}" }}"#)),
                PortDef::new(MAC_B, &format!(r#"{{ kind = "pair", peer = "{MAC_A}" }}"#)),
            ],
        )],
    )
}

fn primary(env: &EmuEnv, prefix: &str, mode: &str) -> Testpmd {
    Testpmd::builder(env)
        .driver(pmd())
        .hugepages()
        .file_prefix(prefix)
        .device(&format!("{PCI},mac={MAC_A},mac={MAC_B}"))
        .eal(&["--log-level=pmd.net.mana.*:info"])
        // A recovery the test holds open (ResetEnd) outlasts the default
        // 60 s on a loaded machine: two proc-info runs start meanwhile.
        .env("NET_MANA_RESET_TIMEOUT_MS", "900000")
        .args(&[
            "--rxq=2",
            "--txq=2",
            "--num-procs=2",
            "--proc-id=0",
            &format!("--forward-mode={mode}"),
        ])
        .timeout(Duration::from_secs(240))
        .spawn()
        .expect("primary testpmd starts")
}

/// A secondary testpmd on lcores of its own (ids 2 and 3 on the same CPUs:
/// mempool caches are per lcore id and shared by the processes).
fn secondary(env: &EmuEnv, prefix: &str, mode: &str) -> Testpmd {
    Testpmd::builder(env)
        .driver(pmd())
        .hugepages()
        .file_prefix(prefix)
        .lcores("2@0,3@1")
        .device(PCI)
        .eal(&["--proc-type=secondary", "--log-level=pmd.net.mana.*:info"])
        .args(&[
            "--rxq=2",
            "--txq=2",
            "--num-procs=2",
            "--proc-id=1",
            &format!("--forward-mode={mode}"),
        ])
        .timeout(Duration::from_secs(240))
        .spawn()
        .expect("secondary testpmd starts")
}

fn reset(t: &Testpmd) {
    t.fault(Fault::Reset {
        pci: PCI.into(),
        down_ms: None,
        new_name: None,
    })
    .unwrap();
}

fn recoveries(t: &Testpmd, port: u16) -> usize {
    t.output()
        .matches(&format!("Port {port}: error recovery successful event"))
        .count()
}

/// A deadline for a recovery that only catches a hang (a loaded 2-core
/// machine recovers in seconds; an idle one in a fraction of a second).
const RECOVERY_DEADLINE: Duration = Duration::from_secs(120);

/// Waits until both ports announced that they are recovering.
fn wait_recovering(t: &Testpmd) {
    let t0 = Instant::now();
    let started = |port: u16| {
        t.output()
            .matches(&format!("Port {port}: error recovering event"))
            .count()
            > recoveries(t, port)
    };
    while !(started(0) && started(1)) {
        assert!(
            t0.elapsed() < RECOVERY_DEADLINE,
            "no recovery started:\n{}",
            t.output()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wait_recovered(t: &Testpmd, n: usize, timeout: Duration) {
    let t0 = Instant::now();
    while recoveries(t, 0) < n || recoveries(t, 1) < n {
        assert!(
            t0.elapsed() < timeout,
            "recovery {n} did not complete:\n{}",
            t.output()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The live send queues of a port, in creation order: (hardware id, packets).
fn sqs(c: &Counters, mac: &str) -> Vec<(u32, u64)> {
    let mut v: Vec<(u32, u64)> = c
        .queues
        .iter()
        .filter(|q| q.kind == "sq" && q.live && q.port == mac)
        .map(|q| (q.id, q.counters.packets))
        .collect();
    v.sort();
    v
}

/// Waits until the secondary's send queue (queue 1) of both ports has sent
/// on the current device objects, which differ from `old` ids.
fn wait_secondary_sending(t: &Testpmd, old: &[u32], what: &str) -> Vec<u32> {
    let c = t
        .wait_device(Duration::from_secs(120), |c| {
            [MAC_A, MAC_B].iter().all(|m| {
                let q = sqs(c, m);
                q.len() == 2 && !old.contains(&q[1].0) && q[1].1 > 100
            })
        })
        .unwrap_or_else(|e| panic!("{what}: the secondary's send queues stayed silent: {e}"));
    [MAC_A, MAC_B].iter().map(|m| sqs(&c, m)[1].0).collect()
}

/// Each port's recovery hands the secondary the new doorbell page; both
/// ports recover at once, so the two hand-overs race (EAL keeps one pending
/// request per name). After every reset the secondary's traffic resumes on
/// every port, counted by the device per queue.
#[test]
fn a_secondarys_traffic_resumes_on_every_port_after_every_reset() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _pages = Hugepages::reserve(512).unwrap();
    let prefix = format!("mp-resets-{}", std::process::id());
    let env = EmuEnv::new("mp-resets", pair(50)).unwrap();
    let mut p = primary(&env, &prefix, "rxonly");
    cmd(&mut p, "start");
    let mut s = secondary(&env, &prefix, "flowgen");
    cmd(&mut s, "start");
    let mut ids = wait_secondary_sending(&p, &[], "before any reset");
    for i in 1..=8 {
        reset(&p);
        wait_recovered(&p, i, RECOVERY_DEADLINE);
        ids = wait_secondary_sending(&p, &ids, &format!("after reset {i}"));
    }
    cmd(&mut s, "stop");
    let sec = s.quit().unwrap();
    cmd(&mut p, "stop");
    let out = p.quit().unwrap();
    assert!(!out.contains("RECOVERY_FAILED"), "{out}");
    assert!(!out.contains("A pending request"), "{out}");
    assert!(!out.contains("were not handed"), "{out}");
    assert_has(&sec, "attached in a secondary process as port 1");
}

fn proc_info(env: &EmuEnv, prefix: &str, args: &[&str]) -> (String, bool) {
    // The deadline only catches a hang (EAL's start is seconds on a
    // loaded machine).
    let t0 = Instant::now();
    let out = proc_info_command(env, prefix)
        .args(args)
        .output()
        .expect("dpdk-proc-info");
    // A measurement for the log (how long EAL and the queries took), not
    // an assertion.
    eprintln!(
        "dpdk-proc-info {args:?}: {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    (
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
        out.status.success(),
    )
}

fn reset_end(t: &Testpmd) {
    t.fault(Fault::ResetEnd { pci: PCI.into() }).unwrap();
}

/// A monitoring tool started while the primary recovers from a reset
/// attaches and reads stats, the firmware version and the RSS table (the
/// primary's data, in shared memory); a secondary testpmd started during a
/// recovery sends once the recovery hands it the new doorbell page. The
/// device stays away until the test ends the reset (`ResetEnd`), so each
/// secondary provably runs inside the recovery whatever the machine's
/// load, and one that waited for the recovery to end would hang here.
#[test]
fn secondaries_started_during_a_recovery_attach_read_and_send_after_it() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _pages = Hugepages::reserve(512).unwrap();
    let prefix = format!("mp-late-{}", std::process::id());
    let env = EmuEnv::new("mp-late", pair(3_600_000)).unwrap();
    let mut p = primary(&env, &prefix, "rxonly");
    cmd(&mut p, "port config all rss ip");
    cmd(&mut p, "start");
    // Read-only queries a secondary answers from the primary's shared data.
    let (before, ok) = proc_info(
        &env,
        &prefix,
        &["-p", "3", "--firmware-version", "--show-rss-reta"],
    );
    assert!(ok, "{before}");
    // mana_ib reports no firmware version: ours alone.
    assert_eq!(
        fw(&before, 0),
        concat!("net_mana-rs ", env!("CARGO_PKG_VERSION")),
        "{before}"
    );
    assert_has(&before, "RSS RETA configuration: hash index=63, queue=1");
    assert!(!before.contains("not available"), "{before}");
    assert!(!before.contains("Operation not supported"), "{before}");
    reset(&p);
    wait_recovering(&p);
    let (out, ok) = proc_info(
        &env,
        &prefix,
        &[
            "-p",
            "3",
            "--stats",
            "--firmware-version",
            "--show-rss-reta",
        ],
    );
    assert!(ok, "{out}");
    assert_eq!(recoveries(&p, 0), 0, "the device came back by itself");
    for port in 0..2 {
        assert_has(&out, &format!("NIC statistics for port {port}"));
        assert_has(
            &out,
            &format!("Ethdev port {port} firmware version: {}", fw(&before, port)),
        );
    }
    // Two rx queues: the default table alternates 0, 1 over 64 entries.
    assert_has(&out, "RSS RETA configuration: hash index=62, queue=0");
    assert_has(&out, "RSS RETA configuration: hash index=63, queue=1");
    assert!(!out.contains("not available"), "{out}");
    assert!(!out.contains("Operation not supported"), "{out}");
    assert!(!out.contains("No Ethernet ports"), "{out}");
    // `--show-port` too (the issue's second tool, 3 s into a recovery).
    let (shown, ok) = proc_info(&env, &prefix, &["-p", "3", "--show-port"]);
    assert!(ok, "{shown}");
    assert_eq!(recoveries(&p, 0), 0, "the device came back by itself");
    reset_end(&p);
    wait_recovered(&p, 1, RECOVERY_DEADLINE);

    // A secondary testpmd attaching during the next recovery gets its page
    // from the recovery, and its traffic flows once the port is back.
    reset(&p);
    wait_recovering(&p);
    let mut s = secondary(&env, &prefix, "flowgen");
    assert_eq!(recoveries(&p, 0), 1, "the device came back by itself");
    cmd(&mut s, "start");
    reset_end(&p);
    wait_recovered(&p, 2, RECOVERY_DEADLINE);
    wait_secondary_sending(&p, &[], "after the recovery the secondary attached in");
    cmd(&mut s, "stop");
    let sec = s.quit().unwrap();
    assert_has(&sec, "recovering the port from a device reset");
    cmd(&mut p, "stop");
    p.quit().unwrap();
}

/// A secondary's exit leaves the primary's ports alone: it neither stops
/// nor closes them (they were started, by the primary; a stop from the
/// secondary's PCI remove was refused and logged as `stop on PCI remove
/// failed: -95` for every port), and the primary keeps sending on them.
#[test]
fn a_secondarys_exit_leaves_the_primarys_ports_running_and_logs_no_failure() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _pages = Hugepages::reserve(512).unwrap();
    let prefix = format!("mp-exit-{}", std::process::id());
    let env = EmuEnv::new("mp-exit", pair(50)).unwrap();
    let mut p = primary(&env, &prefix, "txonly");
    cmd(&mut p, "start");
    let mut s = secondary(&env, &prefix, "rxonly");
    cmd(&mut s, "start");
    cmd(&mut s, "stop");
    let sec = s.quit().unwrap();
    assert_has(&sec, "attached in a secondary process as port 1");
    assert!(!sec.contains("on PCI remove failed"), "{sec}");
    // The primary's send queues (queue 0 of each port) keep sending.
    let sent = |c: &Counters| -> Vec<u64> {
        [MAC_A, MAC_B]
            .iter()
            .map(|m| sqs(c, m).first().map_or(0, |q| q.1))
            .collect()
    };
    let at_exit = sent(&p.device_counters().unwrap());
    p.wait_device(Duration::from_secs(120), |c| {
        sent(c).iter().zip(&at_exit).all(|(now, then)| now > then)
    })
    .unwrap_or_else(|e| panic!("the primary stopped sending after the secondary's exit: {e}"));
    cmd(&mut p, "stop");
    let out = p.quit().unwrap();
    assert!(!out.contains("on PCI remove failed"), "{out}");
    assert!(!out.contains("Port 0: device removal event"), "{out}");
}

/// A secondary's statistics read leaves the primary's sends alone: only
/// the primary takes in completions before statistics. A reaping secondary
/// (`dpdk-proc-info`) freed the primary's mbufs into its own lcore 0's
/// mempool cache, the one the primary's main thread uses unlocked, through
/// its own table of mempool handlers.
#[test]
fn a_secondarys_stats_read_leaves_the_primarys_sends_to_the_primary() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _pages = Hugepages::reserve(512).unwrap();
    let prefix = format!("mp-reap-{}", std::process::id());
    let env = EmuEnv::new("mp-reap", pair(50)).unwrap();
    let mut p = primary(&env, &prefix, "txonly");
    // The device takes no send of port 0 yet: its ring fills and stays.
    p.fault(Fault::TxPause { mac: MAC_A.into() }).unwrap();
    cmd(&mut p, "start");
    let t0 = Instant::now();
    while xstat(&xstats(&mut p, 0), "tx_q0_held") == 0 {
        assert!(t0.elapsed() < HANG, "port 0 never posted a send");
        std::thread::sleep(Duration::from_millis(100));
    }
    cmd(&mut p, "stop");
    let held = xstat(&xstats(&mut p, 0), "tx_q0_held");
    assert!(held > 0);
    let posted = p.port_stats(0).unwrap().tx_packets;
    // Now it sends them all and writes their completions, which nobody
    // has taken in.
    p.fault(Fault::TxResume { mac: MAC_A.into() }).unwrap();
    p.wait_device(Duration::from_secs(120), |c| {
        sqs(c, MAC_A).first().map(|q| q.1) == Some(posted)
    })
    .unwrap_or_else(|e| panic!("port 0's {posted} sends never left: {e}"));
    let (out, ok) = proc_info(&env, &prefix, &["-p", "1", "--xstats"]);
    assert!(ok, "{out}");
    let seen = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("tx_q0_held: "))
        .unwrap_or_else(|| panic!("no tx_q0_held in {out}"));
    assert_eq!(seen.trim(), held.to_string(), "the secondary reaped: {out}");
    // The primary's own read takes them in: every mbuf back.
    assert_eq!(xstat(&xstats(&mut p, 0), "tx_q0_held"), 0);
    assert_eq!(p.port_stats(0).unwrap().tx_packets, posted);
    cmd(&mut p, "port stop all");
    assert_eq!(mbufs_in_use(&mut p), 0, "mbufs held after port stop");
    p.quit().unwrap();
}

/// The version proc-info printed for `port` before the reset.
fn fw(out: &str, port: u16) -> String {
    let k = format!("Ethdev port {port} firmware version: ");
    let i = out.find(&k).unwrap_or_else(|| panic!("no {k} in {out}")) + k.len();
    out[i..].lines().next().unwrap().to_string()
}

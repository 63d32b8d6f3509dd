//! The main job (`scripts/demo.sh`): dpdk-testpmd with our PMD on an
//! emulated adapter with two ports wired to each other, io forwarding, a
//! service reset in the middle; one progress line per phase, then the
//! verdict (`mana_emu::demo`). Exit status 0 on PASS, 1 on FAIL.
//!
//!   mana-demo --log <file> [--pmd <librte_net_mana.so>]
//!   mana-demo --verdict <file>    (the verdict of a recorded log)

use mana_emu::config::Config;
use mana_emu::demo::{self, Log, Verdict};
use mana_emu::device::{Counters, Fault};
use mana_emu::harness::{target_profile_dir, EmuEnv, Testpmd};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

const PCI: &str = "7870:00:00.0";
const MACS: [&str; 2] = ["00:0d:3a:76:3b:d0", "00:0d:3a:76:3b:d1"];
/// Only a hang takes this long; each wait says what it saw when it gives up.
const DEADLINE: Duration = Duration::from_secs(60);

fn config() -> Config {
    let port = |me: &str, peer: &str, ifname: &str| {
        format!(
            "[[adapter.port]]\nmac = \"{me}\"\nifname = \"{ifname}\"\nbackend = {{ kind = \"pair\", peer = \"{peer}\" }}\n"
        )
    };
    Config::parse(&format!(
        "[options]\nreset_down_ms = 1000\n\n[[adapter]]\npci = \"{PCI}\"\nib_name = \"mana_0\"\n\n{}{}",
        port(MACS[0], MACS[1], "eth1"),
        port(MACS[1], MACS[0], "eth2")
    ))
    .expect("the demo's configuration")
}

fn step(n: u32, what: &str) {
    println!("[{n}/6] {what}");
}

fn device_tx(c: &Counters) -> u64 {
    c.ports.iter().map(|p| p.counters.tx_packets).sum()
}

/// Polls the device until `pred`, up to the deadline.
fn wait_device(
    t: &Testpmd,
    what: &str,
    pred: impl Fn(&Counters) -> bool,
) -> Result<Counters, String> {
    t.wait_device(DEADLINE, pred)
        .map_err(|e| format!("waiting for {what}: {e}"))
}

/// testpmd's event lines for `port` seen so far.
fn events(out: &str, port: usize, what: &str) -> usize {
    out.matches(&format!("Port {port}: {what} event")).count()
}

/// Counters that stay the same over two reads 250 ms apart: nothing in flight.
fn settled(t: &Testpmd) -> Result<Counters, String> {
    let t0 = Instant::now();
    let mut last = t.device_counters()?;
    let mut same = 0;
    while same < 2 {
        std::thread::sleep(Duration::from_millis(250));
        let c = t.device_counters()?;
        if c == last {
            same += 1;
        } else {
            (same, last) = (0, c);
        }
        if t0.elapsed() > DEADLINE {
            return Err("the device's counters never settled".into());
        }
    }
    Ok(last)
}

/// Runs the demo, recording into `log`; an error ends it early (the
/// verdict then says what is missing).
fn run(t: &mut Testpmd, log: &mut Log) -> Result<(), String> {
    t.cmd("port stop all")?;
    log.section(demo::MBUFS_BEFORE, &t.dump_mempool()?);
    t.cmd("port start all")?;
    step(4, "io forwarding between the two ports (start tx_first)");
    t.cmd("set fwd io")?;
    t.cmd("start tx_first")?;
    let t0 = Instant::now();
    wait_device(t, "traffic on both ports", |c| {
        MACS.iter()
            .all(|m| c.port(m).is_some_and(|p| p.rx_packets > 100_000))
    })?;
    step(
        5,
        "service reset injected; waiting for both ports to recover",
    );
    log.value(demo::RESET_AT_MS, t0.elapsed().as_millis() as i64);
    log.value(demo::RESET_FROM, t.output().len() as i64);
    let r0 = Instant::now();
    t.fault(Fault::Reset {
        pci: PCI.into(),
        down_ms: None,
        new_name: None,
    })?;
    loop {
        let out = t.output();
        if (0..MACS.len()).all(|p| events(&out, p, "error recovery successful") >= 1) {
            break;
        }
        if (0..MACS.len()).any(|p| events(&out, p, "error recovery failed") >= 1) {
            return Err("a port's recovery failed".into());
        }
        if let Some(how) = t.exited() {
            return Err(format!("testpmd ended during the recovery: {how}"));
        }
        if r0.elapsed() > DEADLINE {
            return Err("no recovery within the deadline".into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    log.value(demo::RECOVERED_AFTER_MS, r0.elapsed().as_millis() as i64);
    let at = device_tx(&t.device_counters()?);
    log.value(demo::TX_AT_RECOVERY, at as i64);
    // The recovered ports carry traffic again; io forwarding after a reset
    // needs frames to forward, so send a first burst again.
    t.cmd("stop")?;
    t.cmd("start tx_first")?;
    wait_device(t, "traffic after the recovery", |c| {
        device_tx(c) > at + 100_000
    })?;
    log.value(demo::RESET_TO, t.output().len() as i64);
    step(6, "stopping; reading testpmd's and the device's counters");
    t.cmd("stop")?;
    settled(t)?;
    // Frames the device delivered after the last poll wait in the receive
    // queues: `start` receives (and frees) them before it forwards, so
    // testpmd has counted every frame the device delivered.
    t.cmd("start")?;
    t.cmd("stop")?;
    let dev = settled(t)?;
    log.section(demo::PORT_STATS, &t.cmd("show port stats all")?);
    log.section(demo::XSTATS, &t.cmd("show port xstats all")?);
    log.section(
        demo::DEVICE,
        &serde_json::to_string_pretty(&dev).map_err(|e| e.to_string())?,
    );
    t.cmd("port stop all")?;
    log.section(demo::MBUFS_AFTER, &t.dump_mempool()?);
    Ok(())
}

fn live(log_path: PathBuf, pmd: PathBuf) -> Result<Verdict, String> {
    if !pmd.exists() {
        return Err(format!(
            "{} not found (cargo build --release -p net_mana --lib)",
            pmd.display()
        ));
    }
    let env = EmuEnv::new("demo", config())?;
    step(
        3,
        &format!(
            "dpdk-testpmd with the driver on the emulated adapter {PCI} (2 ports, 2 queues each)"
        ),
    );
    let mut t = Testpmd::builder(&env)
        .driver(pmd)
        .device(&format!("{PCI},mac={},mac={}", MACS[0], MACS[1]))
        // The driver's info lines: its own measure of the recovery.
        .eal(&["--log-level=pmd.net.mana.*:info"])
        .args(&["--rxq=2", "--txq=2"])
        .timeout(Duration::from_secs(300))
        .spawn()?;
    let mut log = Log::default();
    let result = run(&mut t, &mut log);
    let (out, status) = match t.quit() {
        Ok(out) => (out, 0),
        Err(e) => (e, -1),
    };
    let mut full = Log::default();
    full.section(demo::TESTPMD, &out);
    let mut text = full.text().to_string();
    text.push_str(log.text());
    let mut tail = Log::default();
    tail.value(demo::TESTPMD_EXIT, status);
    if let Err(e) = &result {
        tail.section("demo-error", e);
    }
    text.push_str(tail.text());
    std::fs::write(&log_path, &text).map_err(|e| format!("{}: {e}", log_path.display()))?;
    let mut v = Verdict::from_log(&text);
    if let Err(e) = result {
        v.failures.insert(0, e);
    }
    Ok(v)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opt = |k: &str| {
        args.iter()
            .position(|a| a == k)
            .and_then(|i| args.get(i + 1))
            .map(PathBuf::from)
    };
    let (verdict, log) = if let Some(rec) = opt("--verdict") {
        match std::fs::read_to_string(&rec) {
            Ok(text) => (Verdict::from_log(&text), rec),
            Err(e) => {
                eprintln!("mana-demo: {}: {e}", rec.display());
                return ExitCode::from(2);
            }
        }
    } else if let Some(log) = opt("--log") {
        let pmd = opt("--pmd").unwrap_or_else(|| target_profile_dir().join("librte_net_mana.so"));
        match live(log.clone(), pmd) {
            Ok(v) => (v, log),
            Err(e) => {
                eprintln!("mana-demo: {e}");
                println!("FAIL: {e}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        eprintln!("usage: mana-demo --log <file> [--pmd <librte_net_mana.so>] | --verdict <file>");
        return ExitCode::from(2);
    };
    print!("{}", verdict.render(&log.display().to_string()));
    if verdict.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

//! The soak: multi-queue testpmd traffic through two ports while the
//! device is reset at random intervals (and, optionally, hot removed and
//! added back, and lying for a while), with DPDK secondary processes
//! attached, checking what an operator cares about: every reset recovered
//! in every process, events in order, no packet lost outside what the
//! resets and the lies took, no mbuf leaked, flat memory.
//!
//! The suite runs a short soak; `scripts/soak.sh --resets N [--hotplug H]
//! [--secondaries S] [--hotplug-rate R] [--lie-rate R] [--restart-rate R]
//! [--seed S]` runs a long one (release build). Parameters come from the
//! environment: `SOAK_RESETS` (default 20), `SOAK_SECONDS` (instead of a
//! count: reset at random intervals until that much time has passed),
//! `SOAK_HOTPLUG` (hot remove and add-back cycles after the resets,
//! default 2: the first is a warm-up, the later ones must leave memory
//! flat), `SOAK_SEED`, `SOAK_WARM` (resets before the memory baseline),
//! `SOAK_PRELOAD` (a library to preload beside the emulator, e.g.
//! heaptrack's), and what is mixed into the resets:
//!
//! - `SOAK_SECONDARIES` (0 to 2; default 1): with 1, a secondary testpmd
//!   forwards (`flowgen`) on queue 1 of both ports while the primary
//!   forwards on queue 0 (hugepage memory then, which multi-process
//!   needs); it is restarted now and then (`SOAK_RESTART_RATE` per 1000
//!   resets, default 100; `scripts/soak.sh`'s default 20), half of the
//!   restarts while the primary recovers. With 2, a monitor too: `dpdk-proc-info --stats` and
//!   `--xstats` taking turns, a new process every 0.5-3 s, whatever the
//!   primary is doing (some start during recoveries), paused only around
//!   hot plug. (No `dpdk-dumpcap` capture: against Debian's testpmd it
//!   breaks the primary, not for our driver's sake; doc/reliability.md.)
//! - `SOAK_HOTPLUG_RATE`: hot remove and add-back cycles per 1000 resets
//!   between the resets (default 0). Each closes an accounting segment:
//!   the re-attached ports count from 0.
//! - `SOAK_LIE_RATE`: lying episodes per 1000 resets (default 0): the
//!   device lies (`Fault::Lie`, 50 lies at 4000 per million completions,
//!   every kind but unknown completion types, whose sends the driver
//!   cannot tell were carried) and must forward again after.
//!
//! The rolls that decide what happens when come from the seed (the
//! timing, from the machine).
//! The last line printed is
//!
//! `soak: <n> resets, <r> recovered, <d> deviations, <l> mbufs leaked, rss <start> -> <end> KiB, longest recovery <ms> ms`
//!
//! followed, with secondaries, by `; forwarding secondary: ...` and
//! `; monitor: ...` columns and the faults mixed in.

mod common;

use common::*;
use mana_emu::device::{DeviceState, LieKind};
use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn env_u64(k: &str, default: u64) -> u64 {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A small deterministic generator (xorshift), so a seed replays a soak.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
    /// True `per_mille` times in 1000.
    fn roll(&mut self, per_mille: u64) -> bool {
        self.range(0, 999) < per_mille
    }
}

fn pair() -> Config {
    config(
        "reset_down_ms = 50",
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

/// What the soak runs beside the primary and mixes into the resets (rates
/// per 1000 resets).
struct Mix {
    secondaries: u64,
    hotplug_rate: u64,
    lie_rate: u64,
    restart_rate: u64,
}

impl Mix {
    fn from_env() -> Mix {
        let secondaries = env_u64("SOAK_SECONDARIES", 1);
        assert!(
            secondaries <= 2,
            "SOAK_SECONDARIES={secondaries}: 0, 1 (a forwarding testpmd) or 2 (and a monitor)"
        );
        Mix {
            secondaries,
            hotplug_rate: env_u64("SOAK_HOTPLUG_RATE", 0),
            lie_rate: env_u64("SOAK_LIE_RATE", 0),
            restart_rate: env_u64("SOAK_RESTART_RATE", 100),
        }
    }
}

/// The longest a process of the soak may run (the harness kills it
/// after): a 10,000-reset soak with secondaries takes hours.
const RUN_LIMIT: Duration = Duration::from_secs(12 * 3600);

/// The primary testpmd: both queues of both ports alone, or (`prefix`,
/// for secondaries) queue 0 of each, on hugepage memory.
fn primary(env: &EmuEnv, prefix: Option<&str>) -> Testpmd {
    let b = Testpmd::builder(env)
        .driver(pmd())
        .eal(&["--log-level=pmd.net.mana.*:info"])
        .timeout(RUN_LIMIT)
        // A memory profiler's preload library (e.g. heaptrack's) beside the
        // emulator's; attaching one to the running process kills it.
        .preloads(std::env::var_os("SOAK_PRELOAD").map(std::path::PathBuf::from));
    let b = match prefix {
        None => b.args(&["--rxq=2", "--txq=2", "--forward-mode=flowgen"]),
        // A recovery the soak holds open until a secondary restarted in it
        // (`ResetEnd`) may outlast the default 60 s on a loaded machine.
        Some(p) => b
            .hugepages()
            .file_prefix(p)
            .env("NET_MANA_RESET_TIMEOUT_MS", "900000")
            .args(&[
                "--rxq=2",
                "--txq=2",
                "--num-procs=2",
                "--proc-id=0",
                "--forward-mode=flowgen",
            ]),
    };
    b.spawn().expect("testpmd starts")
}

/// testpmd's resident memory, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// glibc's malloc arenas of threads other than the main one are heaps
/// aligned to their maximum size (64 MiB on 64-bit).
const ARENA_ALIGN: u64 = 64 << 20;

/// Resident memory by mapping (`[heap]`, a file, `anon`, or
/// `[malloc arenas]`: anonymous mappings starting at a 64 MiB boundary,
/// where glibc keeps the heaps of other threads' arenas), in KiB, from
/// /proc/PID/smaps. Hugepage mappings (hugetlbfs files, DPDK's memory
/// with secondaries) count their `Private_Hugetlb` + `Shared_Hugetlb`
/// under `[hugetlb] <file>`: they are not in `Rss`.
fn rss_by_mapping(pid: u32) -> BTreeMap<String, u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
    let mut out = BTreeMap::new();
    let mut name = String::new();
    let kib = |v: &str| -> u64 {
        v.split_whitespace()
            .next()
            .and_then(|x| x.parse().ok())
            .unwrap_or(0)
    };
    for l in s.lines() {
        let first = l.split_whitespace().next().unwrap_or("");
        if first.contains('-') && first.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
            let start = first
                .split('-')
                .next()
                .and_then(|a| u64::from_str_radix(a, 16).ok())
                .unwrap_or(1);
            name = match l.split_whitespace().nth(5) {
                Some(n) => n.to_string(),
                None if start % ARENA_ALIGN == 0 => "[malloc arenas]".into(),
                None => "anon".into(),
            };
        } else if let Some(v) = l.strip_prefix("Rss:") {
            *out.entry(name.clone()).or_insert(0) += kib(v);
        } else if let Some(v) = l
            .strip_prefix("Private_Hugetlb:")
            .or_else(|| l.strip_prefix("Shared_Hugetlb:"))
        {
            let k = kib(v);
            if k > 0 {
                // One entry for all of DPDK's hugepage files
                // (<prefix>map_<n>).
                let file = match name.rsplit_once("map_") {
                    Some((f, n)) if n.chars().all(|c| c.is_ascii_digit()) => f,
                    _ => name.as_str(),
                };
                *out.entry(format!("[hugetlb] {file}")).or_insert(0) += k;
            }
        }
    }
    out
}

/// Prints what grew by more than `min` KiB between two snapshots, and
/// what shrank by as much, saying which tool showed it.
fn print_growth(what: &str, from: &BTreeMap<String, u64>, to: &BTreeMap<String, u64>, min: u64) {
    for (k, v) in to {
        let was = from.get(k).copied().unwrap_or(0);
        if *v > was + min {
            eprintln!("soak: {what}: {k} grew from {was} to {v} KiB (smaps)");
        }
    }
    for (k, was) in from {
        let v = to.get(k).copied().unwrap_or(0);
        if v + min < *was && min == 0 {
            eprintln!("soak: {what}: {k} shrank from {was} to {v} KiB (smaps)");
        }
    }
}

/// The mappings that can grow, with every other file mapping summed.
fn by_kind(m: &BTreeMap<String, u64>) -> Vec<(String, u64)> {
    let mut files = 0;
    let mut out = Vec::new();
    for (k, v) in m {
        if k.starts_with('[') || k == "anon" || k.starts_with("/memfd:") || k.contains("mana") {
            out.push((k.clone(), *v));
        } else {
            files += v;
        }
    }
    out.push(("other files".into(), files));
    out
}

/// DPDK's heap in use, in KiB, from testpmd's `dump_socket_mem` (its
/// `Total` line: `alloc: <MiB>`); None where testpmd does not print it.
fn dpdk_heap_kib(t: &mut Testpmd) -> Option<u64> {
    let o = t.cmd("dump_socket_mem").ok()?;
    let l = o.lines().find(|l| l.trim_start().starts_with("Total"))?;
    let v = l
        .split("alloc:")
        .nth(1)?
        .split(['(', ' '])
        .find(|s| !s.is_empty())?;
    v.parse::<f64>()
        .ok()
        .map(|mib| (mib * 1024.0).round() as u64)
}

/// One process's memory at a point of the soak.
#[derive(Clone, Default)]
struct Mem {
    rss: u64,
    maps: BTreeMap<String, u64>,
}

impl Mem {
    fn of(pid: u32) -> Mem {
        Mem {
            rss: rss_kib(pid),
            maps: rss_by_mapping(pid),
        }
    }
}

/// The forwarding secondary: a testpmd of the primary's file prefix on
/// lcores of its own (ids 2 and 3 on the same CPUs: mempool caches are per
/// lcore id and shared by the processes), sending and receiving on queue 1
/// of both ports.
fn spawn_forwarder(env: &EmuEnv, prefix: &str) -> Result<Testpmd, String> {
    let mut s = Testpmd::builder(env)
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
            "--forward-mode=flowgen",
        ])
        .timeout(RUN_LIMIT)
        .spawn()?;
    let o = s.output();
    if !o.contains("attached in a secondary process as port 1") {
        return Err(format!(
            "the secondary did not attach both ports: {}",
            o.lines().rev().take(20).collect::<Vec<_>>().join(" | ")
        ));
    }
    s.cmd("start")?;
    Ok(s)
}

/// The send queue of queue 1 of each port (the second live SQ by device
/// id: the driver creates a port's queues in order), as (id, packets).
fn secondary_sqs(s: &DeviceState) -> Option<Vec<(u32, u64)>> {
    [MAC_A, MAC_B]
        .iter()
        .map(|m| {
            let mut v: Vec<(u32, u64)> = s
                .wqs
                .iter()
                .filter(|w| w.kind == "sq" && !w.ctx_dead && w.port.eq_ignore_ascii_case(m))
                .map(|w| (w.id, w.packets))
                .collect();
            v.sort();
            v.get(1).copied().filter(|_| v.len() == 2)
        })
        .collect()
}

/// The forwarding secondary and what it did.
#[derive(Default)]
struct Forwarder {
    t: Option<Testpmd>,
    /// Its queues as last seen sending: (device id, packets) per port.
    seen: Vec<(u32, u64)>,
    /// The reset count when the running instance started, and its memory
    /// after its first check.
    born: u64,
    mem0: Option<Mem>,
    restarts: u64,
    restarts_in_recovery: u64,
    /// Resets the running instance lived through, and after how many of
    /// them its queues sent again.
    lived: u64,
    recovered: u64,
    /// (resets lived, rss at its first check, rss at its end) of the
    /// instance that lived longest.
    longest: (u64, u64, u64),
    failures: Vec<String>,
}

impl Forwarder {
    fn running(&self) -> bool {
        self.t.is_some()
    }

    /// Starts an instance (after `reset` resets).
    fn start(&mut self, env: &EmuEnv, prefix: &str, reset: u64) {
        match spawn_forwarder(env, prefix) {
            Ok(t) => {
                eprintln!(
                    "soak: forwarding secondary pid {} started at reset {reset}",
                    t.pid()
                );
                self.t = Some(t);
                self.born = reset;
                self.mem0 = None;
            }
            Err(e) => self
                .failures
                .push(format!("forwarding secondary start at reset {reset}: {e}")),
        }
    }

    /// Ends the running instance: `stop`, then `quit` (its exit leaves the
    /// primary's ports alone), recording its memory.
    fn stop(&mut self, reset: u64) {
        let Some(mut t) = self.t.take() else {
            return;
        };
        let end = Mem::of(t.pid());
        if let Some(m0) = &self.mem0 {
            let lived = reset - self.born;
            if lived >= self.longest.0 {
                self.longest = (lived, m0.rss, end.rss);
            }
            if lived >= 100 {
                print_growth(
                    &format!("forwarding secondary pid {} over {lived} resets", t.pid()),
                    &m0.maps,
                    &end.maps,
                    16,
                );
            }
        }
        let _ = t.cmd("stop");
        match t.quit() {
            Ok(out) => {
                for bad in ["RECOVERY_FAILED", "not attached", "cannot map"] {
                    if out.contains(bad) {
                        self.failures.push(format!(
                            "forwarding secondary (ended at reset {reset}) printed {bad:?}"
                        ));
                    }
                }
            }
            Err(e) => self.failures.push(format!(
                "forwarding secondary (ended at reset {reset}): {}",
                e.lines().next().unwrap_or("")
            )),
        }
    }

    /// Waits until its queues send (again): on new device objects after a
    /// reset or hot plug, or more than when last seen.
    fn wait_sending(&mut self, p: &Testpmd, what: &str) -> Result<(), String> {
        let Some(t) = &self.t else {
            return Ok(());
        };
        let old = self.seen.clone();
        let moved = |q: &[(u32, u64)]| {
            q.iter().enumerate().all(|(i, (id, n))| match old.get(i) {
                Some((was_id, was_n)) if was_id == id => n > was_n,
                _ => *n > 0,
            })
        };
        let t0 = Instant::now();
        loop {
            let s = p.device_state()?;
            if let Some(q) = secondary_sqs(&s) {
                if moved(&q) {
                    self.seen = q;
                    if self.mem0.is_none() {
                        self.mem0 = Some(Mem::of(t.pid()));
                    }
                    return Ok(());
                }
            }
            if let Some(how) = t.exited() {
                return Err(format!("{what}: the forwarding secondary ended: {how}"));
            }
            if t0.elapsed() > HANG {
                return Err(format!(
                    "{what}: the forwarding secondary's send queues did not send within {HANG:?} (last seen {old:?}, now {:?})",
                    secondary_sqs(&s)
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// What the monitor process needs to attach to the primary.
#[derive(Clone)]
struct Tools {
    prefix: String,
    config: std::path::PathBuf,
    pci_devices: std::path::PathBuf,
}

/// What the monitor did.
#[derive(Default)]
struct MonitorTally {
    runs: u64,
    in_recovery: u64,
    failures: Vec<String>,
}

/// Runs one of DPDK's secondary tools against the primary under a
/// deadline that only catches a hang; its output, or why it failed.
fn run_tool(
    tools: &Tools,
    program: &str,
    args: &[String],
    limit: Duration,
) -> Result<String, String> {
    let preload = emu_lib_path()?;
    let out = Command::new("timeout")
        .arg(limit.as_secs().to_string())
        .arg(program)
        .args(args)
        .env("LD_PRELOAD", preload)
        .env("MANA_EMU_CONFIG", &tools.config)
        .env("SYSFS_PCI_DEVICES", &tools.pci_devices)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{program}: {e}"))?;
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        // The whole output goes to a file: a deviation in a 10,000-reset run
        // must keep its message, whichever stream and line it is on.
        let kept = keep_failed_output(program, &text);
        let tail: Vec<&str> = text.lines().rev().take(15).collect();
        return Err(format!(
            "{program} {args:?} exited with {} (whole output: {kept}): {}",
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
        ));
    }
    Ok(text)
}

/// Writes a failed tool run's output to `target/soak-failures/`; returns
/// the file's path (or why it could not be written).
fn keep_failed_output(program: &str, text: &str) -> String {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/soak-failures");
    let n = N.fetch_add(1, Ordering::Relaxed);
    let path = dir.join(format!("{}-{program}-{n}.log", std::process::id()));
    match std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(&path, text)) {
        Ok(()) => path.display().to_string(),
        Err(e) => format!("not kept: {}: {e}", path.display()),
    }
}

/// `dpdk-proc-info --stats` or `--xstats` (it prints only the first it is
/// given) on both ports. (It sets its own core mask: its lcore id is 0,
/// the primary's main lcore's, whose mempool cache it shares; only the
/// primary reaps send completions, see doc/reliability.md on the soak
/// across processes.)
fn proc_info(tools: &Tools, what: &str) -> Result<(), String> {
    let driver = pmd().display().to_string();
    let args: Vec<String> = [
        "--file-prefix",
        tools.prefix.as_str(),
        "-d",
        driver.as_str(),
        "-a",
        PCI,
        "--",
        "-p",
        "3",
        what,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let o = run_tool(tools, "dpdk-proc-info", &args, Duration::from_secs(300))?;
    let (title, ours) = if what == "--xstats" {
        ("NIC extended statistics for port", "rx_q1_lost_to_reset")
    } else {
        ("NIC statistics for port", "RX-packets")
    };
    let flat = || o.lines().collect::<Vec<_>>().join(" | ");
    for port in 0..2 {
        if !o.contains(&format!("{title} {port} ")) {
            return Err(format!(
                "dpdk-proc-info {what} printed no \"{title} {port}\": {}",
                flat()
            ));
        }
    }
    if !o.contains(ours) {
        return Err(format!(
            "dpdk-proc-info {what} printed no {ours}: {}",
            flat()
        ));
    }
    Ok(())
}

/// The monitor: `dpdk-proc-info --stats` and `--xstats` take turns, a new
/// process every 0.5-3 s until `stop`, each while holding `gate` (the
/// soak takes it around hot plug). (Not `dpdk-dumpcap`: against Debian's
/// testpmd its capture pool's mempool ops index names another driver's
/// ops; doc/reliability.md.)
fn monitor(
    tools: Tools,
    seed: u64,
    stop: Arc<AtomicBool>,
    gate: Arc<Mutex<()>>,
    recovering: Arc<AtomicBool>,
) -> MonitorTally {
    let mut rng = Rng(seed.max(1));
    let mut m = MonitorTally::default();
    let mut turn = 0u64;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(rng.range(500, 3000)));
        let _g = gate.lock().unwrap_or_else(|e| e.into_inner());
        if stop.load(Ordering::Relaxed) {
            break;
        }
        if recovering.load(Ordering::Relaxed) {
            m.in_recovery += 1;
        }
        turn += 1;
        m.runs += 1;
        let r = proc_info(
            &tools,
            if turn.is_multiple_of(2) {
                "--xstats"
            } else {
                "--stats"
            },
        );
        if let Err(e) = r {
            eprintln!("soak: monitor: {e}");
            m.failures.push(e);
        }
    }
    m
}

/// testpmd's output from byte `from` on (without copying what came
/// before: after thousands of resets the output is tens of megabytes).
fn output_since(t: &Testpmd, from: usize) -> String {
    t.wait_for_from(from, "", HANG).unwrap_or_default()
}

/// The length of testpmd's output now; `known` is a length it had before
/// (outputs only grow), updated.
fn output_len(t: &Testpmd, known: &mut usize) -> usize {
    *known += output_since(t, *known).len();
    *known
}

/// Injects a fault the soak cannot go on without; panics with testpmd's
/// last 200 lines of output if the emulator does not take it.
fn inject(t: &Testpmd, f: Fault) {
    if let Err(e) = t.fault(f.clone()) {
        let out = t.output();
        let lines: Vec<&str> = out.lines().collect();
        panic!(
            "fault {f:?}: {e}; testpmd's last lines:\n{}",
            lines[lines.len().saturating_sub(200)..].join("\n")
        );
    }
}

/// The kinds of lies the soak tells: all but unknown completion types
/// (for a send, the driver cannot know whether the device carried what an
/// unknown completion covers: it counts those sends as errors, so the
/// wire's count would exceed the driver's by an amount no counter tells
/// apart from the sends a reset took back; `tests/lying_device.rs` counts
/// that kind).
fn soak_lies() -> Vec<LieKind> {
    LieKind::ALL
        .into_iter()
        .filter(|k| *k != LieKind::UnknownType)
        .collect()
}

/// One lying episode: 50 lies (at most 10 s of them), then the truth, and
/// traffic must flow again through both ports and the forwarding
/// secondary's queues. Returns the lies told, by kind.
fn lie_episode(
    t: &Testpmd,
    fwd: &mut Forwarder,
    seed: u64,
    n: u64,
) -> Result<BTreeMap<String, u64>, String> {
    let told = |t: &Testpmd| -> Result<BTreeMap<String, u64>, String> {
        Ok(t.device_counters()?.device.lies)
    };
    let before = told(t)?;
    let sum = |m: &BTreeMap<String, u64>| m.values().sum::<u64>();
    t.fault(Fault::Lie {
        seed,
        per_million: 4000,
        kinds: soak_lies(),
        count: Some(50),
        ms: Some(10_000),
    })?;
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(10) {
        if sum(&told(t)?) >= sum(&before) + 50 {
            break;
        }
        if let Some(how) = t.exited() {
            return Err(format!("testpmd died while the device lied: {how}"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    t.fault(Fault::LieStop)?;
    let after = told(t)?;
    let diff: BTreeMap<String, u64> = after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0)))
        .filter(|(_, v)| *v > 0)
        .collect();
    eprintln!(
        "soak: lying episode {n}: told {diff:?} in {:?}",
        t0.elapsed()
    );
    let now = t.device_counters()?;
    wait_traffic(t, &now, 1000).map_err(|e| format!("lying episode {n}: no traffic after: {e}"))?;
    fwd.wait_sending(t, &format!("lying episode {n}"))?;
    Ok(diff)
}

/// What the accounting attributed over the soak.
#[derive(Default)]
struct Tally {
    wire_tx: u64,
    delivered: u64,
    polled: u64,
    lost_to_reset: u64,
    /// Delivered packets the driver dropped (a buffer the device used
    /// without a completion it could read, a length beyond the buffer):
    /// what the lies took.
    discarded: u64,
    lies: BTreeMap<String, u64>,
}

/// Checks one accounting segment at a quiescent point (forwarding and the
/// ports stopped, the device settled at `dev`), against the device's
/// counters at its start (`base`; None: from the device's start). Every
/// send the driver counts was carried by the wire; every packet the device
/// delivered was polled, lost to a reset (`lost_to_reset`) or dropped by
/// the driver as a lie left it (the receive errors: `missed_completions`,
/// `bad_length_drops`, ...).
fn account(
    t: &mut Testpmd,
    seg: &str,
    base: Option<&Counters>,
    dev: &Counters,
    tally: &mut Tally,
    deviations: &mut Vec<String>,
) {
    for (port, mac) in [(0u16, MAC_A), (1, MAC_B)] {
        let s = t.port_stats(port).unwrap();
        let x = xstats(t, port);
        let d = dev.port(mac).unwrap();
        let b = base.and_then(|c| c.port(mac));
        let wire_tx = d.tx_packets - b.map_or(0, |b| b.tx_packets);
        let delivered = d.rx_packets - b.map_or(0, |b| b.rx_packets);
        let lost = xstat_sum(&x, "rx", "lost_to_reset");
        let discarded = s.rx_errors;
        let why: Vec<String> = [
            "missed_completions",
            "bad_length_drops",
            "unexpected_completions",
            "truncated_drops",
        ]
        .iter()
        .map(|n| (n, xstat_sum(&x, "rx", n)))
        .filter(|(_, v)| *v > 0)
        .map(|(n, v)| format!("{n} {v}"))
        .collect();
        eprintln!(
            "soak: accounting {seg}, port {port}: wire carried {wire_tx}, driver sent {}; device delivered {delivered} = polled {} + lost to resets {lost} + dropped as lies left them {discarded} ({})",
            s.tx_packets,
            s.rx_packets,
            why.join(", ")
        );
        if s.tx_packets != wire_tx {
            deviations.push(format!(
                "{seg}, port {port}: driver sent {} but the wire carried {wire_tx}",
                s.tx_packets
            ));
        }
        if s.rx_packets + lost + discarded != delivered {
            deviations.push(format!(
                "{seg}, port {port}: device delivered {delivered} but the driver polled {}, lost {lost} to resets and dropped {discarded}",
                s.rx_packets
            ));
        }
        tally.wire_tx += wire_tx;
        tally.delivered += delivered;
        tally.polled += s.rx_packets;
        tally.lost_to_reset += lost;
        tally.discarded += discarded;
    }
}

/// The quiescent point that closes a segment: the device stops taking
/// sends (XOFF), every process forwards until everything delivered has
/// been polled, then forwarding stops, the forwarding secondary ends, and
/// the primary stops the ports, which takes back the sends the device
/// never took. Returns the settled device counters.
fn quiesce(t: &mut Testpmd, fwd: &mut Forwarder, reset: u64) -> Counters {
    for m in [MAC_A, MAC_B] {
        inject(t, Fault::TxPause { mac: m.into() });
    }
    settled(t);
    if let Some(s) = fwd.t.as_mut() {
        let _ = s.cmd("stop");
    }
    cmd(t, "stop");
    fwd.stop(reset);
    cmd(t, "port stop all");
    let dev = settled(t);
    for m in [MAC_A, MAC_B] {
        inject(t, Fault::TxResume { mac: m.into() });
    }
    dev
}

/// The events of one reset's window (from its injection to the next
/// step): exactly ERR_RECOVERING then RECOVERY_SUCCESS on each port.
fn check_window(w: &str, reset: u64, deviations: &mut Vec<String>) {
    for port in 0..2u16 {
        let seq = events(w, port);
        if seq != ["R", "S"] {
            deviations.push(format!(
                "reset {reset}: port {port}'s events were {seq:?}, not [\"R\", \"S\"]"
            ));
        }
    }
}
/// Per-port event names, in order.
fn events(out: &str, port: u16) -> Vec<&'static str> {
    let prefix = format!("Port {port}: ");
    out.lines()
        .filter_map(|l| l.find(&prefix).map(|i| &l[i + prefix.len()..]))
        .filter_map(|e| match e {
            "error recovering event" => Some("R"),
            "error recovery successful event" => Some("S"),
            "error recovery failed event" => Some("F"),
            "device removal event" => Some("X"),
            _ => None,
        })
        .collect()
}

/// The longest recovery the driver reported ("recovered from the device
/// reset in 123.4ms").
fn longest_recovery_ms(out: &str) -> f64 {
    out.lines()
        .filter_map(|l| l.split("recovered from the device reset in ").nth(1))
        .filter_map(|d| {
            let d = d.trim();
            if let Some(ms) = d.strip_suffix("ms") {
                ms.parse::<f64>().ok()
            } else if let Some(us) = d.strip_suffix("µs") {
                us.parse::<f64>().ok().map(|u| u / 1000.0)
            } else {
                d.strip_suffix('s')?.parse::<f64>().ok().map(|s| s * 1000.0)
            }
        })
        .fold(0.0, f64::max)
}

/// Sums an xstat over queues: `rx_q<i>_<name>`.
fn xstat_sum(x: &BTreeMap<String, u64>, dir: &str, name: &str) -> u64 {
    x.iter()
        .filter(|(k, _)| k.starts_with(&format!("{dir}_q")) && k.ends_with(&format!("_{name}")))
        .map(|(_, v)| *v)
        .sum()
}

/// What explains a deviation, printed where it is found: the device's
/// view (adapters, every live queue's head and tail, the doorbell ring
/// between the driver's stores and the device thread, the device thread's
/// passes), testpmd's per-stream forwarding counters and port states, and
/// the driver's gauges (each queue's gate and ring positions, the burst
/// functions installed, the reset phase), twice a second apart so what
/// still moves shows; first, testpmd's output since `from` (at most its
/// last 120 lines).
fn explain(t: &mut Testpmd, what: &str, from: usize) {
    eprintln!(
        "soak evidence for \"{what}\" ({:.1} s into testpmd):",
        t.started.elapsed().as_secs_f64()
    );
    let out = t.output();
    let lines: Vec<&str> = out.get(from..).unwrap_or("").lines().collect();
    eprintln!(
        "soak evidence: testpmd output since then ({} lines, the last 120):",
        lines.len()
    );
    for l in &lines[lines.len().saturating_sub(120)..] {
        eprintln!("soak evidence: | {l}");
    }
    for round in 0..2 {
        if round == 1 {
            std::thread::sleep(Duration::from_secs(1));
        }
        eprintln!("soak evidence: round {round}");
        match t.device_state() {
            Ok(s) => {
                eprintln!(
                    "soak evidence: device: loops {}, doorbell ring pending {} dropped {}, scheduled faults {}, adapters {:?}",
                    s.device_loops, s.doorbell_ring_pending, s.doorbell_ring_drops, s.scheduled_faults, s.adapters
                );
                for w in &s.wqs {
                    eprintln!("soak evidence: device {w:?}");
                }
                for c in &s.cqs {
                    eprintln!("soak evidence: device {c:?}");
                }
            }
            Err(e) => eprintln!("soak evidence: device state: {e}"),
        }
        match t.device_counters() {
            Ok(c) => eprintln!("soak evidence: device ports {:?}", c.ports),
            Err(e) => eprintln!("soak evidence: device counters: {e}"),
        }
        for port in 0..2u16 {
            let o = t
                .cmd(&format!("show port xstats {port}"))
                .unwrap_or_default();
            // Every counter that is not 0 (drops by reason included), and
            // the gauges whatever their value.
            let gauges: Vec<&str> = o
                .lines()
                .map(str::trim)
                .filter(|l| match l.split_once(": ") {
                    Some((k, v)) if !k.contains(' ') => {
                        v != "0"
                            || k.ends_with("_open")
                            || k.ends_with("running")
                            || k.ends_with("started")
                    }
                    _ => l.contains("not valid") || l.contains("Invalid"),
                })
                .collect();
            eprintln!("soak evidence: port {port} driver: {}", gauges.join(", "));
        }
    }
    for c in [
        "show fwd stats all",
        "show port summary all",
        "show port info all",
    ] {
        let o = t.cmd(c).unwrap_or_else(|e| e);
        eprintln!("soak evidence: {c}:\n{}", o.trim_end());
    }
}

/// A deadline that only catches hangs: every wait below waits for an
/// event (a count reached, a line printed), however slow a busy machine
/// makes it.
const HANG: Duration = Duration::from_secs(120);
/// How long the driver waits for a vanished PCI function to come back
/// before it reports the removal (`NET_MANA_REMOVAL_GRACE_MS`, 15 s by
/// default): a hot remove is reported that much later.
const REMOVAL_GRACE: Duration = Duration::from_secs(15);

/// Waits until every port's device-side TX count has grown by `n` frames
/// since `before`; at the deadline, says how far each got.
fn wait_traffic(t: &Testpmd, before: &Counters, n: u64) -> Result<(), String> {
    let grown = |c: &Counters, m: &str| {
        let was = before.port(m).map_or(0, |p| p.tx_packets);
        c.port(m).map_or(0, |p| p.tx_packets.saturating_sub(was))
    };
    let t0 = Instant::now();
    t.wait_device(HANG, |c| [MAC_A, MAC_B].iter().all(|m| grown(c, m) >= n))
        .map(|_| eprintln!("soak: {n} frames out of each port in {:?}", t0.elapsed()))
        .map_err(|e| match t.device_counters() {
            Ok(c) => format!(
                "after {HANG:?}, TX grew by {} on {MAC_A} and {} on {MAC_B} (waiting for {n} each)",
                grown(&c, MAC_A),
                grown(&c, MAC_B)
            ),
            Err(_) => e,
        })
}

/// Hot remove with the ports stopped, then hot add: the driver reports
/// the removal once the function has stayed away for the removal grace;
/// testpmd's removal callback (an alarm 100 ms after a port's removal
/// event) stops and closes that port and detaches the device, which closes
/// the other port too; `port attach` brings both back, and traffic flows
/// through both again; returns the device's counters at the attach.
fn hotplug_cycle(t: &mut Testpmd, h: u64) -> Result<Counters, String> {
    eprintln!("soak: hot plug cycle {h}");
    let from = t.output().len();
    t.fault(Fault::HotRemove { pci: PCI.into() })?;
    // (The wait's message goes on with testpmd's whole output; its first
    // line says what ended the wait, the evidence has the output's tail.)
    t.wait_for_from(from, "Device is detached", REMOVAL_GRACE + HANG)
        .map_err(|e| {
            format!(
                "device not detached after the removal ({:?} deadline): {}",
                REMOVAL_GRACE + HANG,
                e.lines().next().unwrap_or("")
            )
        })?;
    let out = t.output()[from..].to_string();
    for port in 0..2u16 {
        if !out.contains(&format!("Port {port} is closed")) {
            return Err(format!("port {port} not closed after the removal"));
        }
    }
    // Each port either reported the removal or was closed, by the detach
    // its sibling's removal event started, while its own recovery still
    // waited out the grace (then no event is due: the application closed
    // it). The first removal event is what starts the detach.
    let reported: Vec<bool> = (0..2u16)
        .map(|p| out.contains(&format!("Port {p}: device removal event")))
        .collect();
    if !reported.contains(&true) {
        return Err("no removal event for either port".into());
    }
    for port in 0..2u16 {
        let cancelled = drv_line(
            &format!("{PCI}_port{}", port + 1),
            "recovery cancelled by close",
        );
        if !reported[usize::from(port)] && !out.contains(&cancelled) {
            return Err(format!(
                "no removal event for port {port}, and its recovery was not cancelled by its close"
            ));
        }
    }
    // testpmd handles each removal event in an alarm 100 ms after it: the
    // first detached the device; each later one must have found its port
    // gone ("Invalid port_id=N") before the ports are attached again, or it
    // closes and detaches the new port that took the same id (seen in a
    // run beside stress-ng: the port attach's prompt interleaved with a
    // second "Device is detached").
    let events = reported.iter().filter(|&&r| r).count();
    let t0 = Instant::now();
    loop {
        let gone = t.output()[from..].matches("Invalid port_id=").count();
        if gone + 1 >= events {
            break;
        }
        if t0.elapsed() > HANG {
            return Err(format!(
                "{events} removal events but after {HANG:?} {gone} of testpmd's later removal callbacks had found their port gone"
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    t.fault(Fault::HotAdd { pci: PCI.into() })?;
    let o = cmd(t, &format!("port attach {PCI},mac={MAC_A},mac={MAC_B}"));
    if !o.contains("Now total ports is 2") {
        return Err(format!("port attach: {o}"));
    }
    // The re-attached ports count from 0: the device's counters now are
    // the base of the next accounting segment.
    let base = t.device_counters()?;
    cmd(t, "port start all");
    cmd(t, "start");
    wait_traffic(t, &base, 1000).map_err(|e| format!("no traffic after the hot add: {e}"))?;
    Ok(base)
}

/// Stops forwarding and the ports (whatever state a cycle left them in).
fn stop_all(t: &mut Testpmd) {
    cmd(t, "stop");
    cmd(t, "port stop all");
}

/// Mbufs in use in testpmd's own pools (`mb_pool_<socket>`): a capture
/// tool's pool is its own.
fn app_mbufs(t: &mut Testpmd) -> u64 {
    let pools = mempools(t);
    for p in pools.iter().filter(|p| !p.name.starts_with("mb_pool")) {
        eprintln!("soak: mempool {} (not testpmd's): {p:?}", p.name);
    }
    pools
        .iter()
        .filter(|p| p.name.starts_with("mb_pool"))
        .map(|p| p.in_use)
        .sum()
}

/// The size in bytes of the emulator's `counters` reply now (JSON text,
/// read raw from its control socket), and the highest live queue id: the
/// reply is built on the emulator's control thread in the primary, its
/// largest allocation; a malloc arena holds its high-water.
fn counters_reply(t: &Testpmd) -> (usize, u32) {
    use std::io::{BufRead, Write};
    let len = (|| -> std::io::Result<usize> {
        let path = t.socket().map_err(std::io::Error::other)?;
        let mut s = std::os::unix::net::UnixStream::connect(path)?;
        s.set_read_timeout(Some(HANG))?;
        s.write_all(b"{\"cmd\":\"counters\"}\n")?;
        let mut line = Vec::new();
        std::io::BufReader::new(s).read_until(b'\n', &mut line)?;
        Ok(line.len())
    })()
    .unwrap_or(0);
    let id = t
        .device_state()
        .map_or(0, |s| s.wqs.iter().map(|w| w.id).max().unwrap_or(0));
    (len, id)
}

/// Prints the memory of every process now and what grew since `last`
/// (reset, primary's memory, DPDK heap), then makes now the new `last`.
fn report_memory(t: &mut Testpmd, fwd: &Forwarder, i: u64, last: &mut (u64, Mem, Option<u64>)) {
    let now = Mem::of(t.pid());
    let heap = dpdk_heap_kib(t);
    eprintln!(
        "soak: memory at reset {i}: primary rss {} KiB ({:+} KiB since reset {}; VmRSS), DPDK heap in use {} KiB ({:+} KiB; dump_socket_mem), by mapping (smaps): {:?}",
        now.rss,
        now.rss as i64 - last.1.rss as i64,
        last.0,
        heap.map_or("?".into(), |h| h.to_string()),
        heap.unwrap_or(0) as i64 - last.2.unwrap_or(0) as i64,
        by_kind(&now.maps)
    );
    let (reply, id) = counters_reply(t);
    eprintln!(
        "soak: memory at reset {i}: the emulator's counters reply is {reply} bytes; highest live queue id {id}"
    );
    print_growth(
        &format!("primary, resets {}..{i}", last.0),
        &last.1.maps,
        &now.maps,
        0,
    );
    if let Some(s) = &fwd.t {
        let m = Mem::of(s.pid());
        eprintln!(
            "soak: memory at reset {i}: forwarding secondary pid {} (since reset {}) rss {} KiB, first checked at {} KiB; by mapping (smaps): {:?}",
            s.pid(),
            fwd.born,
            m.rss,
            fwd.mem0.as_ref().map_or(0, |m| m.rss),
            by_kind(&m.maps)
        );
        if let Some(m0) = &fwd.mem0 {
            print_growth(
                &format!(
                    "forwarding secondary pid {}, resets {}..{i}",
                    s.pid(),
                    fwd.born
                ),
                &m0.maps,
                &m.maps,
                16,
            );
        }
    }
    *last = (i, now, heap);
}

/// Restarts the forwarding secondary (after `reset` resets); returns how
/// much DPDK's heap (shared by the processes) grew meanwhile, in KiB.
fn restart_forwarder(
    t: &mut Testpmd,
    fwd: &mut Forwarder,
    env: &EmuEnv,
    prefix: &str,
    reset: u64,
) -> i64 {
    let h0 = dpdk_heap_kib(t);
    fwd.stop(reset);
    fwd.restarts += 1;
    fwd.start(env, prefix, reset);
    let h1 = dpdk_heap_kib(t);
    h1.zip(h0).map_or(0, |(b, a)| b as i64 - a as i64)
}

#[test]
fn soak() {
    if skip() {
        return;
    }
    let seconds = env_u64("SOAK_SECONDS", 0);
    let resets = if seconds > 0 {
        u64::MAX
    } else {
        env_u64("SOAK_RESETS", 20)
    };
    let mix = Mix::from_env();
    let mp = mix.secondaries > 0;
    let mut rng = Rng(env_u64("SOAK_SEED", 0x5eed_1234_abcd).max(1));
    // 2 GiB: every secondary testpmd start keeps 6.4 MB of DPDK's heap
    // for good (testpmd's port array; doc/reliability.md).
    let _pages = mp.then(|| Hugepages::reserve(1024).expect("hugepages for the secondaries"));
    let env = EmuEnv::new("soak", pair()).unwrap();
    let prefix = format!("soak-{}", std::process::id());
    let mut t = primary(&env, mp.then_some(prefix.as_str()));
    cmd(&mut t, "port stop all");
    let baseline = app_mbufs(&mut t);
    cmd(&mut t, "port start all");
    cmd(&mut t, "start");
    // Warm up (pools and caches touched) before the memory baseline.
    wait_dev(&t, "traffic", |c| {
        [MAC_A, MAC_B]
            .iter()
            .all(|m| c.port(m).is_some_and(|p| p.tx_packets > 10_000))
    });
    let mut deviations = Vec::new();
    let mut fwd = Forwarder::default();
    if mp {
        fwd.start(&env, &prefix, 0);
        if let Err(e) = fwd.wait_sending(&t, "at the start") {
            deviations.push(e);
        }
    }
    // The monitor, on a thread of its own: its processes start whatever
    // the primary is doing.
    let stop = Arc::new(AtomicBool::new(false));
    let gate = Arc::new(Mutex::new(()));
    let recovering = Arc::new(AtomicBool::new(false));
    let monitor_thread = (mix.secondaries >= 2).then(|| {
        let tools = Tools {
            prefix: prefix.clone(),
            config: env.config_path.clone(),
            pci_devices: env.pci_devices(),
        };
        let (s, g, r) = (stop.clone(), gate.clone(), recovering.clone());
        let seed = rng.next();
        std::thread::spawn(move || monitor(tools, seed, s, g, r))
    });
    // Memory is measured again after `warm` resets: the emulator keeps the
    // last 4096 retired queue reports one by one (16 per reset here).
    let warm = env_u64("SOAK_WARM", (resets / 2).min(300));
    let mem_every = if resets == u64::MAX {
        1000
    } else {
        (resets / 4).clamp(50, 1000) / 50 * 50
    };
    let mut injected = 0u64;
    let mut rss_start = rss_kib(t.pid());
    let mut maps_start = rss_by_mapping(t.pid());
    let mut heap_start = dpdk_heap_kib(&mut t);
    let mut last_mem = (0, Mem::of(t.pid()), heap_start);

    let mut recovered = 0u64;
    let mut last_reset_at = 0;
    let mut window: Option<(usize, u64)> = None;
    let mut base: Option<Counters> = None;
    let mut tally = Tally::default();
    let (mut hotplugs_mixed, mut lie_episodes) = (0u64, 0u64);
    // DPDK's heap growth over the secondary's restarts and the mixed hot
    // plug cycles (each with the secondary's restart after it), in KiB,
    // since the warm-up.
    let (mut heap_restarts, mut heap_hotplug) = (0i64, 0i64);
    let mut out_len = 0;
    let (mut longest_recovery, mut longest_held) = (0f64, 0f64);
    let t0 = Instant::now();
    for i in 1..=resets {
        if seconds > 0 && t0.elapsed() >= Duration::from_secs(seconds) {
            break;
        }
        std::thread::sleep(Duration::from_millis(rng.range(10, 300)));
        if let Some((from, r)) = window.take() {
            check_window(&output_since(&t, from), r, &mut deviations);
        }
        if mix.lie_rate > 0 && rng.roll(mix.lie_rate) {
            lie_episodes += 1;
            let at = output_len(&t, &mut out_len);
            match lie_episode(&t, &mut fwd, rng.next(), lie_episodes) {
                Ok(told) => {
                    for (k, v) in told {
                        *tally.lies.entry(k).or_default() += v;
                    }
                }
                Err(e) => {
                    explain(&mut t, &e, at);
                    deviations.push(e);
                }
            }
        }
        if mix.hotplug_rate > 0 && rng.roll(mix.hotplug_rate) {
            hotplugs_mixed += 1;
            let h = hotplugs_mixed;
            let _g = gate.lock().unwrap_or_else(|e| e.into_inner());
            let h0 = dpdk_heap_kib(&mut t);
            let dev = quiesce(&mut t, &mut fwd, i - 1);
            let seg = format!("segment before mixed hot plug cycle {h}");
            account(
                &mut t,
                &seg,
                base.as_ref(),
                &dev,
                &mut tally,
                &mut deviations,
            );
            let at = t.output().len();
            match hotplug_cycle(&mut t, h) {
                Ok(b) => base = Some(b),
                Err(e) => {
                    let e = format!("mixed hot plug cycle {h} (before reset {i}): {e}");
                    explain(&mut t, &e, at);
                    deviations.push(e);
                    // Where the ports stand is unknown: what follows would
                    // only repeat this.
                    break;
                }
            }
            if mp {
                fwd.start(&env, &prefix, i - 1);
                if let Err(e) = fwd.wait_sending(&t, &format!("after mixed hot plug cycle {h}")) {
                    deviations.push(e);
                }
            }
            let h1 = dpdk_heap_kib(&mut t);
            heap_hotplug += h1.zip(h0).map_or(0, |(b, a)| b as i64 - a as i64);
        }
        injected = i;
        // A restart of the forwarding secondary: between resets, or (half
        // of them) quitting and attaching while the primary recovers, which
        // the device's outage (held until the new secondary attached) makes
        // certain.
        let restart = mp && rng.roll(mix.restart_rate);
        let in_recovery = restart && rng.roll(500);
        if restart && !in_recovery {
            heap_restarts += restart_forwarder(&mut t, &mut fwd, &env, &prefix, i - 1);
            if let Err(e) = fwd.wait_sending(&t, &format!("restarted before reset {i}")) {
                deviations.push(e);
            }
        }
        let reset_at = output_len(&t, &mut out_len);
        last_reset_at = reset_at;
        recovering.store(true, Ordering::Relaxed);
        let down_ms = rng.range(10, 200);
        inject(
            &t,
            Fault::Reset {
                pci: PCI.into(),
                down_ms: Some(if in_recovery { 3_600_000 } else { down_ms }),
                new_name: None,
            },
        );
        if in_recovery {
            let seen = t
                .wait_for_from(reset_at, "Port 1: error recovering event", HANG)
                .and_then(|_| t.wait_for_from(reset_at, "Port 0: error recovering event", HANG));
            if let Err(e) = seen {
                deviations.push(format!(
                    "reset {i}: no recovery started: {}",
                    e.lines().next().unwrap_or("")
                ));
            }
            fwd.restarts_in_recovery += 1;
            heap_restarts += restart_forwarder(&mut t, &mut fwd, &env, &prefix, i - 1);
            if let Some(s) = &fwd.t {
                if !s
                    .output()
                    .contains("the primary is recovering the port from a device reset")
                {
                    deviations.push(format!(
                        "reset {i}: the secondary started during the recovery did not see it"
                    ));
                }
            }
            inject(&t, Fault::ResetEnd { pci: PCI.into() });
        }
        let deadline = Instant::now() + HANG;
        loop {
            let w = output_since(&t, reset_at);
            let done =
                (0..2).all(|p| w.contains(&format!("Port {p}: error recovery successful event")));
            if done {
                recovered += 1;
                // How long the driver took; a recovery held open for a
                // secondary's restart is as long as the soak held it.
                let ms = longest_recovery_ms(&w);
                let longest = if in_recovery {
                    &mut longest_held
                } else {
                    &mut longest_recovery
                };
                *longest = longest.max(ms);
                break;
            }
            if Instant::now() > deadline {
                let e = format!("reset {i}: not recovered within {HANG:?}");
                explain(&mut t, &e, reset_at);
                deviations.push(e);
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        recovering.store(false, Ordering::Relaxed);
        if fwd.running() {
            fwd.lived += 1;
            match fwd.wait_sending(&t, &format!("reset {i}")) {
                Ok(()) => fwd.recovered += 1,
                Err(e) => {
                    explain(&mut t, &e, reset_at);
                    deviations.push(e);
                }
            }
        }
        window = Some((reset_at, i));
        if i == warm {
            // The emulator's control thread builds the counters reply in
            // its malloc arena; once the retired queue reports are at their
            // cap, a few replies take it to its high-water for good (the
            // first ones are mmapped, which raises glibc's mmap threshold,
            // so the next ones land in the arena).
            for _ in 0..4 {
                t.device_counters().unwrap();
            }
            rss_start = rss_kib(t.pid());
            maps_start = rss_by_mapping(t.pid());
            heap_start = dpdk_heap_kib(&mut t);
            (heap_restarts, heap_hotplug) = (0, 0);
            last_mem = (i, Mem::of(t.pid()), heap_start);
        }
        if i % 50 == 0 {
            // The wire's TX count per port: forwarding that stopped shows
            // here as a count that no longer moves.
            let tx = t.device_counters().map_or_else(
                |e| e,
                |c| {
                    [MAC_A, MAC_B]
                        .map(|m| c.port(m).map_or(0, |p| p.tx_packets).to_string())
                        .join(" / ")
                },
            );
            eprintln!(
                "soak: {i} resets, {:.0} s, rss {} KiB, wire tx {tx}{}",
                t0.elapsed().as_secs_f64(),
                rss_kib(t.pid()),
                fwd.t.as_ref().map_or(String::new(), |s| format!(
                    ", forwarding secondary rss {} KiB",
                    rss_kib(s.pid())
                ))
            );
        }
        if i > warm && i % mem_every == 0 {
            report_memory(&mut t, &fwd, i, &mut last_mem);
        }
    }
    if let Some((from, r)) = window.take() {
        check_window(&output_since(&t, from), r, &mut deviations);
    }
    // Traffic flows again after the last reset.
    let before = t.device_counters().unwrap();
    if let Err(e) = wait_traffic(&t, &before, 1000) {
        let e = format!("no traffic after the last reset: {e}");
        explain(&mut t, &e, last_reset_at);
        deviations.push(e);
    }
    // The monitor ends (its last tool finishes first), then the quiescent
    // point: nothing lost but what the resets and lies took.
    stop.store(true, Ordering::Relaxed);
    let mon = monitor_thread.map(|h| h.join().expect("the monitor thread"));
    let dev = quiesce(&mut t, &mut fwd, injected);
    account(
        &mut t,
        "the last segment",
        base.as_ref(),
        &dev,
        &mut tally,
        &mut deviations,
    );
    let reset_phase_len = t.output().len();
    // Memory at the end of the resets, before the hot plug cycles (which
    // are measured apart: see the assertion below).
    let rss_resets = rss_kib(t.pid());
    let maps_resets = rss_by_mapping(t.pid());
    let heap_resets = dpdk_heap_kib(&mut t);
    // The first hot plug cycle is a warm-up (DPDK's attach path touches
    // memory it reuses later); the cycles after it must be flat.
    let hotplugs = env_u64("SOAK_HOTPLUG", 2);
    let (mut rss_first, mut maps_first) = (rss_resets, maps_resets.clone());
    for h in 1..=hotplugs {
        let cycle_at = t.output().len();
        if let Err(e) = hotplug_cycle(&mut t, h) {
            let e = format!("hot plug cycle {h}: {e}");
            explain(&mut t, &e, cycle_at);
            deviations.push(e);
        }
        stop_all(&mut t);
        if h == 1 {
            rss_first = rss_kib(t.pid());
            maps_first = rss_by_mapping(t.pid());
        }
    }
    let after = app_mbufs(&mut t);
    let rss_end = rss_kib(t.pid());
    let maps_end = rss_by_mapping(t.pid());
    let heap_end = dpdk_heap_kib(&mut t);

    print_growth("over the resets", &maps_start, &maps_resets, 64);
    print_growth("first hot plug cycle", &maps_resets, &maps_first, 16);
    print_growth("later hot plug cycles", &maps_first, &maps_end, 16);
    eprintln!(
        "soak: memory by mapping at the end (KiB): {:?}",
        by_kind(&maps_end)
    );
    eprintln!(
        "soak: DPDK heap in use (dump_socket_mem): {} KiB after the warm-up, {} after the resets, {} at the end",
        heap_start.map_or("?".into(), |h| h.to_string()),
        heap_resets.map_or("?".into(), |h| h.to_string()),
        heap_end.map_or("?".into(), |h| h.to_string())
    );
    let out = t.quit().unwrap();
    // testpmd's whole output (the driver's log included), beside the
    // soak's own log (scripts/soak.sh names it).
    if let Some(p) = std::env::var_os("SOAK_TESTPMD_LOG") {
        match std::fs::write(&p, &out) {
            Ok(()) => eprintln!("soak: testpmd output in {}", p.to_string_lossy()),
            Err(e) => eprintln!("soak: writing {}: {e}", p.to_string_lossy()),
        }
    }
    let reset_phase = &out[..reset_phase_len.min(out.len())];
    for bad in ["RECOVERY_FAILED", "were not handed"] {
        if reset_phase.contains(bad) {
            deviations.push(format!("the primary printed {bad:?}"));
        }
    }
    let remap_retries = reset_phase
        .matches("handing secondaries the new doorbell page")
        .count();
    deviations.extend(fwd.failures.iter().cloned());
    if let Some(m) = &mon {
        deviations.extend(m.failures.iter().cloned());
    }
    let leaked = after as i64 - baseline as i64;
    for d in &deviations {
        eprintln!("soak deviation: {d}");
    }
    let mut line = format!(
        "soak: {injected} resets, {recovered} recovered, {} deviations, {leaked} mbufs leaked, rss {rss_start} -> {rss_end} KiB, longest recovery {:.0} ms",
        deviations.len(),
        longest_recovery
    );
    if mp {
        let (lived, r0, r1) = fwd.longest;
        line += &format!(
            "; forwarding secondary: {}/{} resets recovered, {} restarts ({} during recoveries, held open up to {longest_held:.0} ms), rss {r0} -> {r1} KiB over its longest life ({lived} resets), {remap_retries} doorbell hand-over retries",
            fwd.recovered, fwd.lived, fwd.restarts, fwd.restarts_in_recovery
        );
    }
    if let Some(m) = &mon {
        line += &format!(
            "; monitor: {} dpdk-proc-info runs ({} started during recoveries), {} failed",
            m.runs,
            m.in_recovery,
            m.failures.len()
        );
    }
    if mix.hotplug_rate > 0 || mix.lie_rate > 0 || mp {
        line += &format!(
            "; faults: {hotplugs_mixed} hot plug cycles, {lie_episodes} lying episodes ({} lies); wire carried {}, device delivered {} = polled {} + lost to resets {} + dropped as lies left them {}; DPDK heap {} -> {} KiB ({heap_restarts:+} KiB over the secondary's restarts, {heap_hotplug:+} KiB over the mixed hot plug cycles)",
            tally.lies.values().sum::<u64>(),
            tally.wire_tx,
            tally.delivered,
            tally.polled,
            tally.lost_to_reset,
            tally.discarded,
            heap_start.map_or("?".into(), |h| h.to_string()),
            heap_end.map_or("?".into(), |h| h.to_string()),
        );
    }
    let first_cycle = rss_first.saturating_sub(rss_resets);
    let later = hotplugs.saturating_sub(1);
    let per_cycle = rss_end.saturating_sub(rss_first) / later.max(1);
    println!(
        "soak: rss {rss_start} -> {rss_resets} KiB over the resets, then {first_cycle} KiB for the first hot plug cycle and {per_cycle} KiB per cycle over {later} more"
    );
    println!("{line}");
    assert_eq!(recovered, injected, "{line}");
    assert!(deviations.is_empty(), "{line}\n{deviations:?}");
    assert_eq!(leaked, 0, "{line}");
    // Flat memory over the resets: a soak may fault in pages once, not grow
    // per reset. Hot plug: the first cycle may touch memory once (DPDK's
    // attach); every later cycle must leave the process about as it found
    // it. Not to the page: the main thread's [heap] top still moved by
    // 100 KiB in the suite's second cycle (debug build, testpmd's attach
    // and detach on that thread). Before the emulator's control socket
    // served its clients on one thread, a cycle could add 3 MB (a new
    // malloc arena holding a counters reply's high-water; doc/reliability.md).
    assert!(
        rss_resets <= rss_start + 4 * 1024,
        "{line}: resident memory grew by {} KiB over the resets",
        rss_resets.saturating_sub(rss_start)
    );
    assert!(
        first_cycle <= 1024,
        "{line}: resident memory grew by {first_cycle} KiB over the first hot plug cycle"
    );
    assert!(
        per_cycle <= 256,
        "{line}: resident memory grew by {per_cycle} KiB per hot plug cycle after the first"
    );
    // DPDK's heap (shared by the processes) is flat but for what each
    // secondary testpmd start keeps (testpmd's port array, never freed;
    // sampled around every start since the warm-up).
    if let (Some(a), Some(b)) = (heap_start, heap_resets) {
        let unexplained = b as i64 - a as i64 - heap_restarts - heap_hotplug;
        assert!(
            unexplained <= 1024,
            "{line}: DPDK's heap grew by {unexplained} KiB over the resets beside the secondary's starts"
        );
    }
}

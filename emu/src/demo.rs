//! The main job's record and verdict (`scripts/demo.sh`, `mana-demo`).
//!
//! The run writes one log: testpmd's whole output, then what the demo read
//! at its checkpoints, each as a section (`@@ section <name>`) or a value
//! (`@@ value <name> <number>`). The verdict is computed from that log
//! alone, so a recorded log gives the same screen as the live run and the
//! checks are tested on recorded runs.

use crate::device::{Counters, PortCounters};
use crate::harness::{parse_mempools, parse_port_stats, PortStats};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The section holding testpmd's output.
pub const TESTPMD: &str = "testpmd";
/// `dump_mempool` with the ports stopped, before traffic and after it.
pub const MBUFS_BEFORE: &str = "mbufs-before";
pub const MBUFS_AFTER: &str = "mbufs-after";
/// `show port stats all` after the last frame was received.
pub const PORT_STATS: &str = "port-stats";
/// `show port xstats all` at the same moment: the frames each receive
/// queue lost to the reset (`rx_q<n>_lost_to_reset`: delivered by the
/// device, destroyed with the queue before the driver read them).
pub const XSTATS: &str = "port-xstats";
/// The device's counters (JSON) at the same moment.
pub const DEVICE: &str = "device-counters";
/// Where in testpmd's output the reset begins and its recovery has been
/// seen with traffic again (byte offsets): the reset's events.
pub const RESET_FROM: &str = "reset_output_from";
pub const RESET_TO: &str = "reset_output_to";
/// Milliseconds of traffic before the reset was injected.
pub const RESET_AT_MS: &str = "reset_at_ms";
/// Milliseconds from the injection to every port's RECOVERY_SUCCESS.
pub const RECOVERED_AFTER_MS: &str = "recovered_after_ms";
/// Frames the device sent (all ports) when the recovery was seen, and at
/// the end: traffic after the reset is their difference.
pub const TX_AT_RECOVERY: &str = "device_tx_at_recovery";
/// testpmd's exit status (-1: killed or did not quit).
pub const TESTPMD_EXIT: &str = "testpmd_exit";

/// A demo log being written.
#[derive(Default)]
pub struct Log(String);

impl Log {
    pub fn section(&mut self, name: &str, body: &str) {
        let _ = writeln!(self.0, "@@ section {name}");
        self.0.push_str(body);
        if !body.ends_with('\n') {
            self.0.push('\n');
        }
    }
    pub fn value(&mut self, name: &str, v: i64) {
        let _ = writeln!(self.0, "@@ value {name} {v}");
    }
    pub fn text(&self) -> &str {
        &self.0
    }
}

/// A recorded log, split into its sections and values.
pub struct Record<'a> {
    sections: BTreeMap<&'a str, &'a str>,
    values: BTreeMap<&'a str, i64>,
}

impl<'a> Record<'a> {
    pub fn parse(log: &'a str) -> Record<'a> {
        let mut sections = BTreeMap::new();
        let mut values = BTreeMap::new();
        let mut open: Option<(&str, usize)> = None;
        let mut at = 0;
        for line in log.split_inclusive('\n') {
            let marker = line.trim_end().strip_prefix("@@ ");
            if let Some(m) = marker {
                if let Some((name, start)) = open.take() {
                    sections.insert(name, &log[start..at]);
                }
                if let Some(name) = m.strip_prefix("section ") {
                    open = Some((name.trim(), at + line.len()));
                } else if let Some((k, v)) =
                    m.strip_prefix("value ").and_then(|r| r.split_once(' '))
                {
                    if let Ok(v) = v.trim().parse() {
                        values.insert(k, v);
                    }
                }
            }
            at += line.len();
        }
        if let Some((name, start)) = open {
            sections.insert(name, &log[start..]);
        }
        Record { sections, values }
    }
    pub fn section(&self, name: &str) -> Option<&'a str> {
        self.sections.get(name).copied()
    }
    pub fn value(&self, name: &str) -> Option<i64> {
        self.values.get(name).copied()
    }
}

/// One port: what testpmd (the driver's counters) and the device counted.
#[derive(Debug)]
pub struct PortAccount {
    pub port: u16,
    pub mac: String,
    pub testpmd: PortStats,
    pub device: PortCounters,
    /// Frames the device delivered that the reset destroyed in the
    /// receive queues before the driver read them (driver xstats).
    pub lost_to_reset: u64,
}

/// One row of a port's accounting.
pub struct Row {
    pub what: &'static str,
    pub testpmd: u64,
    pub device: u64,
    /// What the device counted that testpmd cannot have: the frames (or
    /// their bytes) lost to the reset in the receive queues.
    pub lost: Option<u64>,
}

impl Row {
    pub fn balanced(&self) -> bool {
        self.lost
            .is_some_and(|l| self.testpmd.checked_add(l) == Some(self.device))
    }
}

impl PortAccount {
    pub fn rows(&self) -> [Row; 4] {
        let (t, d) = (&self.testpmd, &self.device);
        let lost = self.lost_to_reset;
        // The bytes of the lost frames: known when every frame received
        // had one length (testpmd's tx_first bursts do).
        let lost_bytes = match d.rx_packets {
            0 => Some(0),
            n if d.rx_bytes % n == 0 => Some(lost * (d.rx_bytes / n)),
            _ => (lost == 0).then_some(0),
        };
        let row = |what, testpmd, device, lost| Row {
            what,
            testpmd,
            device,
            lost,
        };
        [
            row("RX frames", t.rx_packets, d.rx_packets, Some(lost)),
            row("RX bytes", t.rx_bytes, d.rx_bytes, lost_bytes),
            row("TX frames", t.tx_packets, d.tx_packets, Some(0)),
            row("TX bytes", t.tx_bytes, d.tx_bytes, Some(0)),
        ]
    }
}

/// Per port, the sum of `rx_q<n>_lost_to_reset` in `show port xstats all`.
fn lost_to_reset(xstats: &str) -> BTreeMap<u16, u64> {
    let mut out = BTreeMap::new();
    let mut port = None;
    for l in xstats.lines() {
        if let Some(rest) = l.split("NIC extended statistics for port").nth(1) {
            port = rest.trim().parse::<u16>().ok();
            continue;
        }
        let Some((k, v)) = l.trim().split_once(": ") else {
            continue;
        };
        let queue_stat = k
            .strip_prefix("rx_q")
            .and_then(|r| r.strip_suffix("_lost_to_reset"))
            .is_some_and(|q| !q.is_empty() && q.bytes().all(|b| b.is_ascii_digit()));
        if let (Some(p), true, Ok(v)) = (port, queue_stat, v.trim().parse::<u64>()) {
            *out.entry(p).or_insert(0) += v;
        }
    }
    out
}

/// What the log says about the run.
#[derive(Debug)]
pub struct Verdict {
    pub ports: Vec<PortAccount>,
    pub reset_at_ms: Option<i64>,
    /// Per port, testpmd's event lines in order (short names).
    pub events: BTreeMap<u16, Vec<String>>,
    /// The driver's own measure, per port ("recovered ... in <d>").
    pub recovered_in: Vec<String>,
    pub recovered_after_ms: Option<i64>,
    pub forwarded_after_reset: Option<u64>,
    /// Frames lost to the reset, by where: dropped by the device (by its
    /// reason), or destroyed in the receive queues; all ports.
    pub lost: BTreeMap<String, u64>,
    pub mbufs_before: Option<u64>,
    pub mbufs_after: Option<u64>,
    pub testpmd_exit: Option<i64>,
    /// Why the run failed; empty when it passed.
    pub failures: Vec<String>,
}

/// testpmd's name for an event, as the demo shows it.
fn event_name(line: &str) -> Option<(u16, &'static str)> {
    let rest = line.trim().strip_prefix("Port ")?;
    let (port, what) = rest.split_once(": ")?;
    let port = port.parse().ok()?;
    let name = match what.strip_suffix(" event")? {
        "error recovering" => "ERR_RECOVERING",
        "error recovery successful" => "RECOVERY_SUCCESS",
        "error recovery failed" => "RECOVERY_FAILED",
        "device removal" => "INTR_RMV",
        "interrupt reset" => "INTR_RESET",
        "link state change" => "LSC",
        _ => "OTHER",
    };
    Some((port, name))
}

fn mbufs(section: Option<&str>) -> Option<u64> {
    let pools = parse_mempools(section?);
    (!pools.is_empty()).then(|| pools.iter().map(|p| p.in_use).sum())
}

/// The ports testpmd announced at start ("Port 0: 00:0D:3A:76:3B:D0").
fn port_macs(out: &str) -> Vec<(u16, String)> {
    let mut v: Vec<(u16, String)> = Vec::new();
    for l in out.lines() {
        let Some(rest) = l.trim().strip_prefix("Port ") else {
            continue;
        };
        let Some((p, mac)) = rest.split_once(": ") else {
            continue;
        };
        let (Ok(p), true) = (
            p.parse::<u16>(),
            mac.len() == 17 && mac.bytes().filter(|&b| b == b':').count() == 5,
        ) else {
            continue;
        };
        if !v.iter().any(|(q, _)| *q == p) {
            v.push((p, mac.to_string()));
        }
    }
    v
}

impl Verdict {
    pub fn from_log(log: &str) -> Verdict {
        let rec = Record::parse(log);
        let out = rec.section(TESTPMD).unwrap_or("");
        let mut failures = Vec::new();
        let device: Option<Counters> = match rec.section(DEVICE) {
            Some(s) => match serde_json::from_str(s) {
                Ok(c) => Some(c),
                Err(e) => {
                    failures.push(format!("the device's counters do not parse: {e}"));
                    None
                }
            },
            None => None,
        };
        let stats = rec.section(PORT_STATS).unwrap_or("");
        let lost = lost_to_reset(rec.section(XSTATS).unwrap_or(""));
        let macs = port_macs(out);
        if macs.is_empty() {
            failures.push("testpmd announced no port (did it start?)".into());
        }
        let mut ports = Vec::new();
        for (port, mac) in &macs {
            let t = parse_port_stats(stats, *port);
            let d = device.as_ref().and_then(|c| c.port(mac)).cloned();
            match (t, d) {
                (Some(testpmd), Some(device)) => ports.push(PortAccount {
                    port: *port,
                    mac: mac.clone(),
                    testpmd,
                    device,
                    lost_to_reset: lost.get(port).copied().unwrap_or(0),
                }),
                (t, _) => failures.push(format!(
                    "port {port}: no {} to compare",
                    if t.is_none() {
                        "testpmd statistics"
                    } else {
                        "device counters"
                    }
                )),
            }
        }
        for p in &ports {
            if p.testpmd.tx_packets == 0 || p.testpmd.rx_packets == 0 {
                failures.push(format!("port {}: no frames forwarded", p.port));
            }
            for r in p.rows() {
                if !r.balanced() {
                    failures.push(format!(
                        "port {}: {}: testpmd counted {}{}, the device {}",
                        p.port,
                        r.what,
                        r.testpmd,
                        match r.lost {
                            Some(0) => String::new(),
                            Some(l) => format!(" and {l} lost to the reset"),
                            None => format!(
                                " and {} frames of unknown lengths were lost to the reset",
                                p.lost_to_reset
                            ),
                        },
                        r.device
                    ));
                }
            }
        }
        // The reset's events: those printed from its injection until traffic
        // flowed again. Over the whole run, the recovery events (link
        // changes aside, which start and stop raise too) are one
        // ERR_RECOVERING and one RECOVERY_SUCCESS per port.
        let window = match (rec.value(RESET_FROM), rec.value(RESET_TO)) {
            (Some(a), Some(b)) => out.get(a as usize..b as usize).unwrap_or(""),
            _ => "",
        };
        let sequence = |text: &str| {
            let mut m: BTreeMap<u16, Vec<String>> = BTreeMap::new();
            for l in text.lines() {
                if let Some((p, n)) = event_name(l) {
                    m.entry(p).or_default().push(n.into());
                }
            }
            m
        };
        let events = sequence(window);
        let all = sequence(out);
        for (port, _) in &macs {
            let seq: Vec<String> = all
                .get(port)
                .into_iter()
                .flatten()
                .filter(|e| *e != "LSC")
                .cloned()
                .collect();
            if seq != ["ERR_RECOVERING", "RECOVERY_SUCCESS"] {
                failures.push(format!(
                    "port {port}: recovery events {} (expected ERR_RECOVERING, RECOVERY_SUCCESS)",
                    if seq.is_empty() {
                        "none".into()
                    } else {
                        seq.join(", ")
                    }
                ));
            }
        }
        let recovered_in: Vec<String> = out
            .lines()
            .filter_map(|l| {
                let (name, rest) = l.split_once(": recovered from the device reset in ")?;
                Some(format!(
                    "{} {}",
                    name.trim_start_matches("net_mana: "),
                    rest.trim()
                ))
            })
            .collect();
        let reset_at_ms = rec.value(RESET_AT_MS);
        if reset_at_ms.is_none() {
            failures.push("no reset was injected".into());
        }
        let recovered_after_ms = rec.value(RECOVERED_AFTER_MS);
        if reset_at_ms.is_some() && recovered_after_ms.is_none() {
            failures.push("the ports did not report recovery".into());
        }
        let tx_end: Option<u64> = device
            .as_ref()
            .map(|c| c.ports.iter().map(|p| p.counters.tx_packets).sum());
        let forwarded_after_reset = match (tx_end, rec.value(TX_AT_RECOVERY)) {
            (Some(end), Some(at)) => Some(end.saturating_sub(at as u64)),
            _ => None,
        };
        if recovered_after_ms.is_some() && forwarded_after_reset.unwrap_or(0) == 0 {
            failures.push("no frame forwarded after the recovery".into());
        }
        let mut lost = BTreeMap::new();
        for p in device.iter().flat_map(|c| &c.ports) {
            for (why, n) in &p.counters.drops {
                if *n > 0 {
                    *lost.entry(format!("device drops {why}")).or_insert(0) += n;
                }
            }
        }
        let in_queues: u64 = ports.iter().map(|p| p.lost_to_reset).sum();
        if in_queues > 0 {
            lost.insert("in the receive queues".into(), in_queues);
        }
        let mbufs_before = mbufs(rec.section(MBUFS_BEFORE));
        let mbufs_after = mbufs(rec.section(MBUFS_AFTER));
        match (mbufs_before, mbufs_after) {
            (Some(b), Some(a)) if a != b => failures.push(format!(
                "mbufs in use: {b} before, {a} after ({} leaked)",
                a as i64 - b as i64
            )),
            (Some(_), Some(_)) => {}
            _ => failures.push("the mbufs in use were not read before and after".into()),
        }
        let testpmd_exit = rec.value(TESTPMD_EXIT);
        match testpmd_exit {
            Some(0) => {}
            Some(-1) => failures.push("testpmd did not quit (killed)".into()),
            Some(s) => failures.push(format!("testpmd exited with status {s}")),
            None => failures.push("testpmd's exit was not recorded".into()),
        }
        Verdict {
            ports,
            reset_at_ms,
            events,
            recovered_in,
            recovered_after_ms,
            forwarded_after_reset,
            lost,
            mbufs_before,
            mbufs_after,
            testpmd_exit,
            failures,
        }
    }

    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }

    /// The screen a person reads: accounting per port, the reset, the
    /// verdict; `log` is where the raw output is.
    pub fn render(&self, log: &str) -> String {
        let mut s = String::new();
        let secs = |ms: i64| format!("{:.2} s", ms as f64 / 1000.0);
        for p in &self.ports {
            let _ = writeln!(
                s,
                "port {} ({})    {:>14} {:>14}",
                p.port, p.mac, "testpmd", "device"
            );
            for r in p.rows() {
                let verdict = match r.lost.filter(|_| r.balanced()) {
                    Some(0) => "equal".to_string(),
                    Some(l) => format!("equal with the {l} lost to the reset"),
                    None => "DIFFERENT".to_string(),
                };
                let _ = writeln!(
                    s,
                    "  {:<28}{:>14} {:>14}  {verdict}",
                    r.what, r.testpmd, r.device
                );
            }
        }
        let _ = writeln!(s, "reset");
        if let Some(at) = self.reset_at_ms {
            let _ = writeln!(s, "  injected           after {} of traffic", secs(at));
        }
        for (port, seq) in &self.events {
            let _ = writeln!(s, "  port {port} events      {}", seq.join(" -> "));
        }
        if self.events.is_empty() {
            let _ = writeln!(s, "  events             none recorded");
        }
        if let Some(ms) = self.recovered_after_ms {
            let _ = writeln!(s, "  recovered          {} after the injection", secs(ms));
        }
        for r in &self.recovered_in {
            let _ = writeln!(s, "  driver measured    {r}");
        }
        if let Some(n) = self.forwarded_after_reset {
            let _ = writeln!(s, "  forwarded after    {n} frames sent by the device");
        }
        let total: u64 = self.lost.values().sum();
        let why: Vec<String> = self.lost.iter().map(|(k, n)| format!("{n} {k}")).collect();
        let _ = writeln!(
            s,
            "  frames lost        {total}{}",
            if why.is_empty() {
                String::new()
            } else {
                format!(" ({})", why.join(", "))
            }
        );
        let show = |m: Option<u64>| m.map_or("?".to_string(), |m| m.to_string());
        let _ = writeln!(
            s,
            "  mbufs in use       {} before, {} after (ports stopped)",
            show(self.mbufs_before),
            show(self.mbufs_after)
        );
        if self.passed() {
            let _ = writeln!(
                s,
                "PASS: every frame counted alike by testpmd and the device, the reset recovered, no mbuf leaked"
            );
        } else {
            let _ = writeln!(s, "FAIL: {}", self.failures.join("; "));
        }
        let _ = writeln!(s, "raw testpmd and emulator output: {log}");
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_and_values_round_trip() {
        let mut l = Log::default();
        l.section("a", "one\ntwo");
        l.value("x", 42);
        l.section("b", "three\n");
        l.value("y", -1);
        let r = Record::parse(l.text());
        assert_eq!(r.section("a"), Some("one\ntwo\n"));
        assert_eq!(r.section("b"), Some("three\n"));
        assert_eq!((r.value("x"), r.value("y")), (Some(42), Some(-1)));
        assert_eq!(r.section("c"), None);
    }

    #[test]
    fn an_empty_log_fails_with_reasons() {
        let v = Verdict::from_log("");
        assert!(!v.passed());
        assert!(v
            .failures
            .contains(&"testpmd announced no port (did it start?)".to_string()));
        assert!(v.failures.contains(&"no reset was injected".to_string()));
        assert!(v.render("x.log").contains("FAIL: "));
    }
}

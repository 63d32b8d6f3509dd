//! The guest tier's scenarios, run in order on one booted guest: the real
//! `mana` driver of the trixie 6.12 kernel against the function, traffic to
//! and from the host-side peer with the counters of every hop compared,
//! RSS over several queues, checksum verdicts, and an unload/reload.
//!
//! Each scenario returns `Ok(summary)` or `Err(reason)`; on failure the
//! runner prints the guest's kernel log and the device's log tail.

use super::peer::{self, LinkCounters, Peer, GUEST_IP, PEER_IP};
use super::stack::Stack;
use super::vm::{Pieces, RunDir, Vm, VmOptions};
use crate::device::DeviceConfig;
use crate::function::Function;
use crate::vfio::lock;
use mana_emu::config::BackendConfig;
use mana_emu::device::PortCounters;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The MAC the tier configures (a Hyper-V OUI, as Azure VMs have).
pub const MAC: [u8; 6] = [0x00, 0x15, 0x5d, 0x4e, 0x0a, 0x01];
pub(super) const MAC_STR: &str = "00:15:5d:4e:0a:01";
pub(super) const PCI: &str = "0000:00:01.0";

pub type Outcome = Result<String, String>;

/// The deadline of a guest command or a testpmd prompt: it only catches a
/// hang (a 4-vCPU TCG guest on two busy cores once took over 30 s to answer
/// `wc -c`, beside a CPU hog on both).
pub const HANG: Duration = Duration::from_secs(120);

/// Everything one run holds: the guest, the function, the peer.
pub struct Tier {
    // Dropped in this order: the guest first (it is the VMM's client), then
    // the function, the peer and the run directory.
    pub vm: Vm,
    pub func: Function,
    pub peer: Peer,
    pub run: RunDir,
    pub device_log: PathBuf,
    pub cpus: u32,
    /// The kernel and userspace the guest runs.
    pub stack: &'static Stack,
    /// The whole output of the last testpmd a forwarding scenario quit.
    pub last_testpmd_output: String,
}

pub(super) fn fmt_dur(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

impl Tier {
    /// Sets up the peer and the function and boots the guest.
    pub fn start(stack: &'static Stack, cpus: u32, device_log: PathBuf) -> Result<Tier, String> {
        let p = Pieces::find(stack).map_err(|e| e.to_string())?;
        let peer = Peer::new().map_err(|e| format!("host peer: {e}"))?;
        let run = RunDir::new(&p).map_err(|e| format!("run directory: {e}"))?;
        let cfg = DeviceConfig {
            mac: MAC,
            backend: BackendConfig::AfPacket {
                ifname: peer.host_if.clone(),
            },
            // Exact counters at every hop, however slowly the emulated
            // guest drains its receive queues.
            lossless_rx: true,
            ..Default::default()
        };
        let func = Function::start(cfg, &run.host_path("mana.sock"))
            .map_err(|e| format!("function: {e}"))?;
        let opts = VmOptions {
            cpus,
            vfio_socket: Some(run.guest_path("mana.sock")),
            ..Default::default()
        };
        let vm = Vm::boot(&p, &run, &opts).map_err(|e| format!("guest boot: {e}"))?;
        Ok(Tier {
            vm,
            func,
            peer,
            run,
            device_log,
            cpus,
            stack,
            last_testpmd_output: String::new(),
        })
    }

    /// Runs `cmd` in the guest; its output, or why it failed.
    pub fn sh(&mut self, cmd: &str, timeout: Duration) -> Result<String, String> {
        match self.vm.console.run(cmd, timeout) {
            Ok(o) if o.ok() => Ok(o.text),
            Ok(o) => Err(format!("`{cmd}` exited {}: {}", o.status, o.text.trim())),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Runs a quick command in the guest under [`HANG`].
    pub(super) fn cmd(&mut self, cmd: &str) -> Result<String, String> {
        self.sh(cmd, HANG)
    }

    /// The guest's kernel log (through the console, or the console file
    /// if the guest no longer answers).
    pub fn kernel_log(&mut self) -> String {
        match self.vm.console.run("dmesg", Duration::from_secs(10)) {
            Ok(o) => o.text,
            Err(_) => self.vm.kernel_output(),
        }
    }

    /// The last lines of the device's log.
    pub fn device_log_tail(&self, lines: usize) -> String {
        let s = std::fs::read_to_string(&self.device_log).unwrap_or_default();
        let v: Vec<&str> = s.lines().collect();
        v[v.len().saturating_sub(lines)..].join("\n")
    }

    fn guest_counters(&mut self) -> Result<LinkCounters, String> {
        let out = self.cmd(
            "cd /sys/class/net/eth0/statistics && cat rx_packets rx_bytes tx_packets tx_bytes",
        )?;
        let v: Vec<u64> = out
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        match v[..] {
            [rxp, rxb, txp, txb] => Ok(LinkCounters {
                rx_packets: rxp,
                rx_bytes: rxb,
                tx_packets: txp,
                tx_bytes: txb,
            }),
            _ => Err(format!("guest counters: {out:?}")),
        }
    }

    pub(super) fn port(&self) -> PortCounters {
        lock(&self.func.dev).net.counters().ports[0]
            .counters
            .clone()
    }

    /// Sum of a counter over every SQ or RQ the device ever had.
    fn queue_sum(&self, kind: &str, f: impl Fn(&mana_emu::device::QueueCounters) -> u64) -> u64 {
        let c = lock(&self.func.dev).net.counters();
        c.queues
            .iter()
            .filter(|q| q.kind == kind)
            .map(|q| f(&q.counters))
            .sum()
    }

    /// All three views, taken once they stop changing (frames in flight,
    /// late ACKs and FINs settle first).
    fn snapshot(&mut self) -> Result<Snapshot, String> {
        let mut last: Option<Snapshot> = None;
        let t0 = Instant::now();
        loop {
            let s = Snapshot {
                guest: self.guest_counters()?,
                peer: self.peer.counters().map_err(|e| e.to_string())?,
                port: self.port(),
                sq_wqes: self.queue_sum("sq", |q| q.wqes),
            };
            if last.as_ref() == Some(&s) || t0.elapsed() > Duration::from_secs(10) {
                return Ok(s);
            }
            last = Some(s);
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// What the device and the peer hold now, for a wait that reached its
    /// deadline: port counters and drops, each live queue's head and tail
    /// (an RQ whose head met its tail has no buffer), each CQ's CQEs and
    /// arming, each EQ's events, interrupts and arming, and the peer's TCP
    /// sockets (unacknowledged bytes, retransmission backoff).
    pub(super) fn stall_report(&self) -> String {
        let mut out = String::new();
        {
            let d = lock(&self.func.dev);
            let c = d.net.counters();
            let p = &c.ports[0].counters;
            out += &format!(
                "device port: rx {} frames, tx {} frames, drops {:?}\n",
                p.rx_packets, p.tx_packets, p.drops
            );
            let st = d.net.device_state(0);
            for w in st.wqs.iter().filter(|w| w.active) {
                out += &format!(
                    "  {} {}: head {} tail {} ({} doorbells, {} packets)\n",
                    w.kind, w.id, w.head, w.tail, w.doorbells, w.packets
                );
            }
            for q in &st.cqs {
                out += &format!(
                    "  CQ {}: {} CQEs written, armed {}\n",
                    q.id, q.written, q.armed
                );
            }
            for (id, e) in &d.eqs {
                out += &format!(
                    "  EQ {id}: {} events, {} interrupts, armed {}, producer {}\n",
                    e.events, e.interrupts, e.producer.armed, e.producer.prod
                );
            }
        }
        out += &format!("peer TCP:\n{}", self.peer.tcp_sockets());
        out
    }

    pub(super) fn device_check(&self, what: &str) -> Result<(), String> {
        self.device_check_with(what, &BTreeMap::new())
    }

    /// [`Self::device_check`], with the port drops in `expected` (a window
    /// in which the hardware drops too) not counted as failures.
    pub(super) fn device_check_with(
        &self,
        what: &str,
        expected: &BTreeMap<String, u64>,
    ) -> Result<(), String> {
        let d = lock(&self.func.dev);
        let mut bad = Vec::new();
        if !d.ledger.failed.is_empty() {
            bad.push(format!("failed requests {:?}", d.ledger.failed));
        }
        if d.ledger.unanswered() != 0 {
            bad.push(format!("{} requests unanswered", d.ledger.unanswered()));
        }
        for (kind, (n, last)) in &d.errors {
            bad.push(format!(
                "{n} device error(s) of kind {kind}, the last: {last}"
            ));
        }
        let drops = &d.net.counters().ports[0].counters.drops;
        if drops != expected {
            bad.push(format!("port drops {drops:?}"));
        }
        if bad.is_empty() {
            Ok(())
        } else {
            Err(format!("{what}: {}", bad.join("; ")))
        }
    }

    /// `mana` binds the function and its netdev has the configured MAC.
    pub fn probe(&mut self) -> Outcome {
        self.cmd("insmod /modules/mana.ko")?;
        self.expect_probed()?;
        let d = lock(&self.func.dev);
        let eqs = d.eqs.len();
        let reqs: u64 = d.ledger.received.values().sum();
        drop(d);
        let log = self.cmd("dmesg")?;
        if !log.contains("Microsoft Azure Network Adapter protocol version") {
            return Err("no probe message from mana in the kernel log".into());
        }
        Ok(format!(
            "eth0 {MAC_STR}, {eqs} EQs (HWC + {} queues), {reqs} requests answered",
            eqs - 1
        ))
    }

    pub(super) fn expect_probed(&mut self) -> Result<(), String> {
        let drv = self.cmd(&format!("readlink /sys/bus/pci/devices/{PCI}/driver"))?;
        if !drv.trim().ends_with("/mana") {
            return Err(format!("{PCI} bound to {:?}, not mana", drv.trim()));
        }
        let mac = self.cmd("cat /sys/class/net/eth0/address")?;
        if mac.trim() != MAC_STR {
            return Err(format!(
                "eth0 has MAC {:?}, the device reports {MAC_STR}",
                mac.trim()
            ));
        }
        let d = lock(&self.func.dev);
        if d.hwc.is_none() {
            return Err("the HWC is not established".into());
        }
        if d.ledger.unimplemented.values().sum::<u64>() != 0 {
            return Err(format!(
                "unimplemented requests: {:?}",
                d.ledger.unimplemented
            ));
        }
        drop(d);
        self.device_check("after probe")
    }

    fn link_up(&mut self) -> Result<(), String> {
        // The peer knows the guest's MAC as an Azure host answers ARP for
        // it: a peer left to re-probe a stale entry sends unicast ARP that
        // lands while a later scenario holds the interface down (counted
        // as no_rx_queue drops, depending on timing).
        let o = std::process::Command::new("ip")
            .args([
                "-n",
                &self.peer.ns,
                "neigh",
                "replace",
                GUEST_IP,
                "lladdr",
                MAC_STR,
            ])
            .args(["dev", &self.peer.peer_if, "nud", "permanent"])
            .output()
            .map_err(|e| format!("ip neigh: {e}"))?;
        if !o.status.success() {
            return Err(format!(
                "ip neigh replace in {}: {}",
                self.peer.ns,
                String::from_utf8_lossy(&o.stderr).trim()
            ));
        }
        self.cmd(&format!(
            "ip addr add {GUEST_IP}/24 dev eth0 && ip link set eth0 up"
        ))?;
        self.wait_guest("grep -q 1 /sys/class/net/eth0/carrier", "eth0's carrier")
    }

    /// `ip link set up` and pings both ways' counters equal.
    pub fn ping(&mut self) -> Outcome {
        self.link_up()?;
        let a = self.snapshot()?;
        let out = self.sh(
            &format!("ping -c 10 -i 0.2 -W 30 {PEER_IP}"),
            Duration::from_secs(60),
        )?;
        if !out.contains("10 packets received") {
            return Err(format!("ping: {}", out.trim()));
        }
        let b = self.snapshot()?;
        let d = compare(&a, &b)?;
        self.device_check("after ping")?;
        Ok(format!(
            "10/10 replies; guest tx {} = device tx {} = peer rx {} packets, guest rx {} = device rx {} = peer tx {}",
            d.guest.tx_packets, d.port_tx, d.peer.rx_packets, d.guest.rx_packets, d.port_rx, d.peer.tx_packets
        ))
    }

    /// A 4 MiB TCP transfer each way, contents checked, counters equal.
    pub fn tcp(&mut self) -> Outcome {
        const N: usize = 4 << 20;
        let a = self.snapshot()?;
        // Guest to peer.
        let sink = self.peer.tcp_sink(5001, Duration::from_secs(120));
        let sum = self.sh(
            &format!("head -c {N} /dev/urandom > /tmp/tx && md5sum /tmp/tx && nc {PEER_IP} 5001 < /tmp/tx"),
            Duration::from_secs(120),
        )?;
        let got = sink
            .join()
            .map_err(|_| "sink thread panicked".to_string())?
            .map_err(|e| format!("peer receive: {e}"))?;
        let want = sum.split_whitespace().next().unwrap_or("").to_string();
        if got.len() != N || md5_hex(&got) != want {
            return Err(format!(
                "guest to peer: peer got {} bytes (md5 {}), guest sent {N} (md5 {want})",
                got.len(),
                md5_hex(&got)
            ));
        }
        // Peer to guest.
        let data: Vec<u8> = (0..N).map(|i| (i * 7 + i / 4099) as u8).collect();
        let want = md5_hex(&data);
        // The peer retries its connection until the listener is up.
        self.cmd("(sleep 300 | nc -l -p 5002 > /tmp/rx &)")?;
        let send = self
            .peer
            .tcp_send(GUEST_IP, 5002, data, Duration::from_secs(120));
        send.join()
            .map_err(|_| "sender thread panicked".to_string())?
            .map_err(|e| format!("peer send: {e}"))?;
        // The peer's send ends when its socket buffer has the data, not when
        // the guest has it: a guest slowed down by a busy host (TCG) may
        // still be receiving. Wait for every byte (asking from here, one
        // short command at a time), then sum.
        self.wait_guest_bytes("/tmp/rx", N)?;
        let out = self.cmd("md5sum /tmp/rx; wc -c < /tmp/rx")?;
        if !out.contains(&want) {
            return Err(format!(
                "peer to guest: guest has {}, want md5 {want}",
                out.trim()
            ));
        }
        let b = self.snapshot()?;
        let d = compare(&a, &b)?;
        let tso = b.port.tx_packets - a.port.tx_packets - (b.sq_wqes - a.sq_wqes);
        self.device_check("after TCP")?;
        Ok(format!(
            "4 MiB each way, md5 equal; guest sent {} skbs = {} send WQEs -> {} frames on the wire (TSO added {tso}) = peer rx; guest rx {} = device rx = peer tx",
            d.guest.tx_packets, d.sq_wqes, d.port_tx, d.guest.rx_packets
        ))
    }

    /// Eight flows from the peer land on the RX queues the vPort's RSS
    /// picks (Toeplitz over the key and table the guest reports), several
    /// of them; the guest's per-queue counts equal the device's.
    pub fn rss(&mut self) -> Outcome {
        let (key, table) = self.rss_config()?;
        let queues = self.cpus as usize;
        let before = self.rx_per_queue(queues)?;
        let dev_before = self.device_rq_packets();
        let ports: Vec<u16> = (5010..5018).collect();
        let cmd = ports
            .iter()
            .map(|p| format!("(sleep 300 | nc -l -p {p} > /tmp/rss{p} &)"))
            .collect::<Vec<_>>()
            .join("; ");
        self.cmd(&cmd)?;
        let mut predicted = BTreeMap::new();
        for &p in &ports {
            let data = vec![p as u8; 128 << 10];
            let sport = self
                .peer
                .tcp_send(GUEST_IP, p, data, Duration::from_secs(60))
                .join()
                .map_err(|_| "sender panicked".to_string())?
                .map_err(|e| format!("flow to port {p}: {e}"))?;
            let mut input = Vec::new();
            input.extend_from_slice(&[10, 99, 0, 1, 10, 99, 0, 2]);
            input.extend_from_slice(&sport.to_be_bytes());
            input.extend_from_slice(&p.to_be_bytes());
            let h = mana_emu::pkt::toeplitz(&key, &input);
            let q = table[h as usize % table.len()];
            predicted.insert(p, q);
        }
        for &p in &ports {
            self.wait_guest_bytes(&format!("/tmp/rss{p}"), 128 << 10)?;
        }
        let sizes = self.cmd("wc -c /tmp/rss*")?;
        for &p in &ports {
            if !sizes.contains(&format!("131072 /tmp/rss{p}")) {
                return Err(format!("flow to port {p} incomplete: {}", sizes.trim()));
            }
        }
        std::thread::sleep(Duration::from_millis(500));
        let after = self.rx_per_queue(queues)?;
        let dev_after = self.device_rq_packets();
        let guest: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
        let dev: Vec<u64> = dev_after
            .iter()
            .zip(dev_before.iter().chain(std::iter::repeat(&0)))
            .map(|(a, b)| a - b)
            .collect();
        if guest != dev {
            return Err(format!("per-queue RX: guest {guest:?}, device {dev:?}"));
        }
        let used: Vec<usize> = (0..queues).filter(|&q| guest[q] > 0).collect();
        let want: std::collections::BTreeSet<usize> = predicted.values().copied().collect();
        if used.len() < 2 {
            return Err(format!(
                "traffic on queues {used:?} only (per queue {guest:?})"
            ));
        }
        for q in &want {
            if guest[*q] == 0 {
                return Err(format!("queue {q} predicted by RSS for some flow got nothing ({guest:?}, flows {predicted:?})"));
            }
        }
        for q in &used {
            if !want.contains(q) && *q != 0 {
                return Err(format!(
                    "queue {q} got {} frames, but RSS sends no flow there ({predicted:?})",
                    guest[*q]
                ));
            }
        }
        self.device_check("after RSS")?;
        Ok(format!(
            "{} queues, frames per queue {guest:?} (guest = device), flows to queues {:?} as Toeplitz predicts",
            queues,
            predicted.values().collect::<Vec<_>>()
        ))
    }

    /// Asks `done` every half second from here until it says so (a loop of
    /// `sleep`s in the guest has been seen to stall under TCG on a busy
    /// host: emu-pci/README.md). `Some(time waited)` if [`HANG`] passed
    /// first.
    fn poll(
        &mut self,
        mut done: impl FnMut(&mut Tier) -> Result<bool, String>,
    ) -> Result<Option<String>, String> {
        let t0 = Instant::now();
        while !done(self)? {
            if t0.elapsed() > HANG {
                return Ok(Some(fmt_dur(t0.elapsed())));
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        Ok(None)
    }

    /// Waits until the guest command `check` exits 0; at the deadline fails
    /// naming `what` and the last output.
    pub(super) fn wait_guest(&mut self, check: &str, what: &str) -> Result<(), String> {
        let mut last = String::new();
        let late = self.poll(|t| match t.vm.console.run(check, HANG) {
            Ok(o) if o.ok() => Ok(true),
            Ok(o) => {
                last = o.text;
                Ok(false)
            }
            Err(e) => Err(format!("waiting for {what}: {e}")),
        })?;
        match late {
            None => Ok(()),
            Some(waited) => Err(format!(
                "{what}: not after {waited} (`{check}` last printed {:?})",
                last.trim()
            )),
        }
    }

    /// Waits until the guest's file `path` holds `n` bytes; at the deadline
    /// (a hang, not a slow guest) fails with the sizes seen and
    /// [`Self::stall_report`].
    fn wait_guest_bytes(&mut self, path: &str, n: usize) -> Result<(), String> {
        let mut seen: Vec<usize> = Vec::new();
        let late = self.poll(|t| {
            let out = t.cmd(&format!("wc -c < {path}"))?;
            let got: usize = out.trim().parse().unwrap_or(0);
            if seen.last() != Some(&got) {
                seen.push(got);
            }
            Ok(got >= n)
        })?;
        match late {
            None => Ok(()),
            Some(waited) => Err(format!(
                "{path}: {} of {n} bytes after {waited} (sizes seen {seen:?})\n{}",
                seen.last().copied().unwrap_or(0),
                self.stall_report()
            )),
        }
    }

    fn rss_config(&mut self) -> Result<([u8; 40], Vec<usize>), String> {
        let out = self.cmd("ethtool -x eth0")?;
        let mut table = Vec::new();
        let mut key = None;
        let mut lines = out.lines();
        while let Some(l) = lines.next() {
            let t = l.trim();
            if let Some((idx, rest)) = t.split_once(':') {
                if idx.chars().all(|c| c.is_ascii_digit()) && !idx.is_empty() {
                    table.extend(
                        rest.split_whitespace()
                            .filter_map(|x| x.parse::<usize>().ok()),
                    );
                    continue;
                }
            }
            if t.starts_with("RSS hash key") {
                let k: Vec<u8> = lines
                    .next()
                    .unwrap_or("")
                    .trim()
                    .split(':')
                    .filter_map(|x| u8::from_str_radix(x, 16).ok())
                    .collect();
                key = k.try_into().ok();
            }
        }
        match key {
            Some(k) if !table.is_empty() => Ok((k, table)),
            _ => Err(format!("cannot read the RSS key and table: {out}")),
        }
    }

    fn rx_per_queue(&mut self, n: usize) -> Result<Vec<u64>, String> {
        let out = self.cmd("ethtool -S eth0")?;
        (0..n)
            .map(|q| {
                let k = format!("rx_{q}_packets:");
                out.lines()
                    .find_map(|l| l.trim().strip_prefix(&k).map(|v| v.trim().parse::<u64>()))
                    .and_then(|r| r.ok())
                    .ok_or_else(|| format!("no {k} in ethtool -S"))
            })
            .collect()
    }

    /// Packets per live RQ, in queue order (the order the driver created
    /// them).
    fn device_rq_packets(&self) -> Vec<u64> {
        let d = lock(&self.func.dev);
        let c = d.net.counters();
        d.wq_objs
            .values()
            .filter(|o| o.kind == mana_emu::device::WqKind::Rq)
            .map(|o| {
                c.queues
                    .iter()
                    .find(|q| q.live && q.kind == "rq" && q.id == o.wq_id)
                    .map_or(0, |q| q.counters.packets)
            })
            .collect()
    }

    /// Checksum verdicts: frames with good UDP checksums reach UDP (port
    /// unreachable), bad UDP and TCP checksums are counted as checksum
    /// errors by the guest's stack, as the device's failure verdicts say.
    pub fn csum(&mut self) -> Outcome {
        let peer_mac = self.peer_mac()?;
        let before = self.snmp()?;
        let udp_good = ipv4_frame(MAC, peer_mac, 17, &udp(40000, 5999, b"good checksum", true));
        let udp_bad = ipv4_frame(
            MAC,
            peer_mac,
            17,
            &udp(40000, 5999, b"bad checksum!", false),
        );
        let tcp_bad = ipv4_frame(MAC, peer_mac, 6, &tcp_syn(40001, 5998, false));
        for f in [udp_good, udp_bad, tcp_bad] {
            peer::send_raw(&self.peer.ns, &self.peer.peer_if, f)
                .map_err(|e| format!("raw send: {e}"))?;
        }
        std::thread::sleep(Duration::from_millis(500));
        let after = self.snmp()?;
        let delta =
            |k: &str| after.get(k).copied().unwrap_or(0) - before.get(k).copied().unwrap_or(0);
        let want = [
            ("Udp:NoPorts", 1),
            ("Udp:InCsumErrors", 1),
            ("Tcp:InCsumErrors", 1),
        ];
        for (k, n) in want {
            if delta(k) != n {
                return Err(format!(
                    "{k} went up by {}, want {n} (Udp NoPorts {}, Udp InCsumErrors {}, Tcp InCsumErrors {})",
                    delta(k),
                    delta("Udp:NoPorts"),
                    delta("Udp:InCsumErrors"),
                    delta("Tcp:InCsumErrors")
                ));
            }
        }
        self.device_check("after checksum frames")?;
        Ok("good UDP checksum accepted (NoPorts +1), bad UDP and TCP checksums counted as InCsumErrors +1 each".into())
    }

    pub(super) fn peer_mac(&self) -> Result<[u8; 6], String> {
        let o = std::process::Command::new("ip")
            .args([
                "-n",
                &self.peer.ns,
                "-j",
                "link",
                "show",
                "dev",
                &self.peer.peer_if,
            ])
            .output()
            .map_err(|e| e.to_string())?;
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).map_err(|e| e.to_string())?;
        let s = v[0]["address"].as_str().ok_or("no peer MAC")?;
        let b: Vec<u8> = s
            .split(':')
            .filter_map(|x| u8::from_str_radix(x, 16).ok())
            .collect();
        b.try_into().map_err(|_| format!("peer MAC {s}"))
    }

    fn snmp(&mut self) -> Result<BTreeMap<String, u64>, String> {
        let out = self.cmd("cat /proc/net/snmp")?;
        let mut m = BTreeMap::new();
        let lines: Vec<&str> = out.lines().collect();
        for pair in lines.chunks(2) {
            if let [h, v] = pair {
                let (Some((p, hs)), Some((_, vs))) = (h.split_once(':'), v.split_once(':')) else {
                    continue;
                };
                for (k, x) in hs.split_whitespace().zip(vs.split_whitespace()) {
                    if let Ok(x) = x.parse::<i64>() {
                        m.insert(format!("{p}:{k}"), x.max(0) as u64);
                    }
                }
            }
        }
        Ok(m)
    }

    /// `rmmod mana` destroys every object and takes the HWC down with no
    /// request unanswered; `insmod mana` brings the netdev back and it pings.
    pub fn reload(&mut self) -> Outcome {
        let (est, des) = {
            let d = lock(&self.func.dev);
            (d.ledger.hwc_established, d.ledger.hwc_destroyed)
        };
        self.cmd("rmmod mana")?;
        {
            let d = lock(&self.func.dev);
            let mut alive = Vec::new();
            if d.hwc.is_some() {
                alive.push("the HWC".to_string());
            }
            alive.extend(d.eqs.keys().map(|e| format!("EQ {e}")));
            alive.extend(d.regions.keys().map(|h| format!("DMA region {h:#x}")));
            alive.extend(d.wq_objs.keys().map(|h| format!("WQ object {h:#x}")));
            alive.extend(d.registered.keys().map(|r| format!("registration {r:#x}")));
            alive.extend(
                d.rdma
                    .adapter
                    .iter()
                    .map(|a| format!("RDMA adapter {:#x}", a.handle)),
            );
            if !alive.is_empty() {
                return Err(format!("after rmmod the device still holds {alive:?}"));
            }
            if !d.ledger.leaked.is_empty() {
                return Err(format!(
                    "the driver left objects the device destroyed: {:?}",
                    d.ledger.leaked
                ));
            }
            if d.ledger.hwc_destroyed != des + 1 {
                return Err("rmmod did not tear the HWC down through the SMC".into());
            }
        }
        self.device_check("after rmmod")?;
        let log = self.cmd("dmesg")?;
        for bad in ["timed out", "WARNING", "Failed"] {
            if let Some(l) = log.lines().find(|l| l.contains(bad)) {
                return Err(format!("kernel log after rmmod: {l}"));
            }
        }
        let objects = self.objects_count();
        self.cmd("insmod /modules/mana.ko")?;
        self.expect_probed()?;
        if lock(&self.func.dev).ledger.hwc_established != est + 1 {
            return Err("insmod did not establish a new HWC".into());
        }
        self.link_up()?;
        let out = self.sh(
            &format!("ping -c 5 -i 0.2 -W 30 {PEER_IP}"),
            Duration::from_secs(60),
        )?;
        if !out.contains("5 packets received") {
            return Err(format!("ping after reload: {}", out.trim()));
        }
        self.device_check("after reload")?;
        let stale = lock(&self.func.dev).stale_doorbells;
        Ok(format!(
            "rmmod: HWC destroyed, {objects} objects left, no request unanswered ({stale} late doorbells to destroyed queues ignored); insmod: eth0 back, 5/5 pings"
        ))
    }

    /// `kernel-service-reset` (opt-in): the device raises
    /// `GDMA_EQE_HWC_RESET_REQUEST` on the HWC's EQ with eth0 up; a kernel
    /// that handles it (`mana_serv_reset`) tears the HWC down through the
    /// SMC (suspend), waits `MANA_SERVICE_PERIOD` (10 s), establishes a new
    /// one (resume) and brings eth0 back: 5 pings. The summary has the
    /// kernel's timings from the event.
    pub fn service_reset(&mut self) -> Outcome {
        if self.cmd("ip addr show eth0 | grep -q 10.99.0.2").is_err() {
            self.link_up()?;
        }
        let (est, des) = {
            let d = lock(&self.func.dev);
            (d.ledger.hwc_established, d.ledger.hwc_destroyed)
        };
        let t0 = Instant::now();
        lock(&self.func.dev).service_reset()?;
        let wait = |t: &Self, what: &str, limit: Duration, f: &dyn Fn(u64, u64) -> bool| loop {
            let (e, d) = {
                let d = lock(&t.func.dev);
                (d.ledger.hwc_established, d.ledger.hwc_destroyed)
            };
            if f(e, d) {
                return Ok(t0.elapsed());
            }
            if t0.elapsed() > limit {
                return Err(format!(
                        "{what} {:.0} s after GDMA_EQE_HWC_RESET_REQUEST (kernel {}; 6.12 has no handler for the event: this scenario needs one with mana_serv_reset)",
                        limit.as_secs_f64(),
                        t.vm.banner
                    ));
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        let suspended = wait(
            self,
            "the HWC was not torn down",
            Duration::from_secs(15),
            &|_, d| d > des,
        )?;
        let resumed = wait(self, "no new HWC", Duration::from_secs(40), &|e, _| e > est)?;
        let drv = self.cmd(&format!("readlink /sys/bus/pci/devices/{PCI}/driver"))?;
        if !drv.trim().ends_with("/mana") {
            return Err(format!(
                "after the reset {PCI} is bound to {:?}",
                drv.trim()
            ));
        }
        let t_link = loop {
            if self.cmd("grep -q 1 /sys/class/net/eth0/carrier").is_ok() {
                break t0.elapsed();
            }
            if t0.elapsed() > Duration::from_secs(60) {
                return Err("eth0 has no carrier 60 s after the service reset".into());
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        // Frames that reached the port while the driver had no RQ (between
        // suspend and resume) are dropped, as the hardware drops them; none
        // may be dropped once eth0 is back.
        let window = lock(&self.func.dev).net.counters().ports[0]
            .counters
            .drops
            .clone();
        if window.keys().any(|k| k != "no_rx_queue") {
            return Err(format!("port drops during the reset: {window:?}"));
        }
        let out = self.sh(
            &format!("ping -c 5 -i 0.2 -W 30 {PEER_IP}"),
            Duration::from_secs(60),
        )?;
        if !out.contains("5 packets received") {
            return Err(format!("ping after the service reset: {}", out.trim()));
        }
        let log = self.cmd("dmesg")?;
        if !log.contains("MANA reset cycle start") {
            return Err("the kernel log lacks \"MANA reset cycle start\"".into());
        }
        if let Some(l) = log.lines().find(|l| l.contains("resume failed")) {
            return Err(format!("kernel log: {l}"));
        }
        self.device_check_with("after the service reset", &window)?;
        let dropped = window.values().sum::<u64>();
        Ok(format!(
            "HWC torn down {:.1} s after the event, new HWC at {:.1} s, eth0 carrier at {:.1} s, 5/5 pings; {dropped} frames dropped while the vPort had no RQ",
            suspended.as_secs_f64(),
            resumed.as_secs_f64(),
            t_link.as_secs_f64()
        ))
    }

    fn objects_count(&self) -> usize {
        let d = lock(&self.func.dev);
        d.eqs.len()
            + d.regions.len()
            + d.wq_objs.len()
            + d.registered.len()
            + usize::from(d.hwc.is_some())
            + usize::from(d.rdma.adapter.is_some())
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Snapshot {
    guest: LinkCounters,
    peer: LinkCounters,
    port: PortCounters,
    sq_wqes: u64,
}

struct Deltas {
    guest: LinkCounters,
    peer: LinkCounters,
    port_tx: u64,
    port_rx: u64,
    sq_wqes: u64,
}

/// The deltas between two snapshots, checked hop by hop: every frame the
/// device sent reached the peer and every frame the peer sent reached the
/// guest, byte for byte; every skb the guest sent was one send WQE.
fn compare(a: &Snapshot, b: &Snapshot) -> Result<Deltas, String> {
    let d = Deltas {
        guest: b.guest - a.guest,
        peer: b.peer - a.peer,
        port_tx: b.port.tx_packets - a.port.tx_packets,
        port_rx: b.port.rx_packets - a.port.rx_packets,
        sq_wqes: b.sq_wqes - a.sq_wqes,
    };
    let ptb = b.port.tx_bytes - a.port.tx_bytes;
    let prb = b.port.rx_bytes - a.port.rx_bytes;
    let checks = [
        (
            "device TX frames = peer RX frames",
            d.port_tx,
            d.peer.rx_packets,
        ),
        ("device TX bytes = peer RX bytes", ptb, d.peer.rx_bytes),
        (
            "peer TX frames = device RX frames",
            d.peer.tx_packets,
            d.port_rx,
        ),
        ("peer TX bytes = device RX bytes", d.peer.tx_bytes, prb),
        (
            "device RX frames = guest RX packets",
            d.port_rx,
            d.guest.rx_packets,
        ),
        ("device RX bytes = guest RX bytes", prb, d.guest.rx_bytes),
        (
            "guest TX packets = device send WQEs",
            d.guest.tx_packets,
            d.sq_wqes,
        ),
    ];
    let bad: Vec<String> = checks
        .iter()
        .filter(|(_, x, y)| x != y)
        .map(|(n, x, y)| format!("{n}: {x} != {y}"))
        .collect();
    if !bad.is_empty() {
        return Err(format!("counters differ: {}", bad.join("; ")));
    }
    if d.port_tx == 0 || d.port_rx == 0 {
        return Err("no traffic counted".into());
    }
    Ok(d)
}

fn md5_hex(data: &[u8]) -> String {
    use md5::Digest;
    md5::Md5::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn csum16(data: &[u8], init: u32) -> u16 {
    let mut s = init;
    for c in data.chunks(2) {
        s += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

const SRC: [u8; 4] = [10, 99, 0, 1];
const DST: [u8; 4] = [10, 99, 0, 2];

fn pseudo(proto: u8, len: usize) -> u32 {
    let mut s = 0u32;
    for c in SRC.chunks(2).chain(DST.chunks(2)) {
        s += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    s + u32::from(proto) + len as u32
}

pub(super) fn udp(sport: u16, dport: u16, payload: &[u8], good: bool) -> Vec<u8> {
    let len = 8 + payload.len();
    let mut u = Vec::new();
    u.extend_from_slice(&sport.to_be_bytes());
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&(len as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(payload);
    let mut c = csum16(&u, pseudo(17, len));
    if c == 0 {
        c = 0xffff;
    }
    if !good {
        c ^= 0x5a5a;
    }
    u[6..8].copy_from_slice(&c.to_be_bytes());
    u
}

fn tcp_syn(sport: u16, dport: u16, good: bool) -> Vec<u8> {
    let mut t = vec![0u8; 20];
    t[0..2].copy_from_slice(&sport.to_be_bytes());
    t[2..4].copy_from_slice(&dport.to_be_bytes());
    t[4..8].copy_from_slice(&0x1234_5678u32.to_be_bytes());
    t[12] = 5 << 4;
    t[13] = 0x02; // SYN
    t[14..16].copy_from_slice(&64240u16.to_be_bytes());
    let mut c = csum16(&t, pseudo(6, 20));
    if !good {
        c ^= 0x5a5a;
    }
    t[16..18].copy_from_slice(&c.to_be_bytes());
    t
}

pub(super) fn ipv4_frame(dst: [u8; 6], src: [u8; 6], proto: u8, l4: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&0x0800u16.to_be_bytes());
    let mut ip = vec![0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, 64, proto, 0, 0];
    ip[2..4].copy_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
    ip.extend_from_slice(&SRC);
    ip.extend_from_slice(&DST);
    let c = csum16(&ip, 0);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(l4);
    f
}

/// Scenarios that run only when named: they need a kernel newer than the
/// tier's 6.12 (`kernel-service-reset`, `dpdk-service-reset`: a kernel with
/// `mana_serv_reset`; 6.12 ignores the event, and they fail saying so);
/// `dpdk-lying` runs under 6.12 but takes longer than the tier allows a
/// scenario (the cargo test `guest_tier_lying_device` runs it).
pub const OPT_IN_SCENARIOS: [&str; 3] =
    ["kernel-service-reset", "dpdk-service-reset", "dpdk-lying"];

/// The scenarios, in the order they run.
pub const SCENARIOS: [&str; 20] = [
    "kernel-probe",
    "kernel-ping",
    "kernel-tcp",
    "kernel-rss",
    "kernel-csum",
    "kernel-reload",
    "rdma-probe",
    "rdma-devinfo",
    "rdma-mr",
    "dpdk-probe",
    "dpdk-rust-1q",
    "dpdk-rust-4q",
    "dpdk-mtu",
    "dpdk-c",
    "dpdk-c-4q",
    "dpdk-iface-up",
    "dpdk-reset",
    "dpdk-reset-rescan",
    "dpdk-reset-loop",
    "preflight",
];

impl Tier {
    pub fn run(&mut self, name: &str) -> Outcome {
        match name {
            "kernel-probe" => self.probe(),
            "kernel-ping" => self.ping(),
            "kernel-tcp" => self.tcp(),
            "kernel-rss" => self.rss(),
            "kernel-csum" => self.csum(),
            "kernel-reload" => self.reload(),
            "rdma-probe" => self.rdma_probe(),
            "rdma-devinfo" => self.rdma_devinfo(),
            "rdma-mr" => self.rdma_mr(),
            "dpdk-probe" => self.dpdk_probe(),
            "dpdk-rust-1q" => self.dpdk_rust_1q(),
            "dpdk-rust-4q" => self.dpdk_rust_4q(),
            "dpdk-mtu" => self.dpdk_mtu(),
            "dpdk-c" => self.dpdk_c(),
            "dpdk-c-4q" => self.dpdk_c_4q(),
            "dpdk-iface-up" => self.dpdk_iface_up(),
            "dpdk-reset" => self.dpdk_reset(),
            "dpdk-reset-rescan" => self.dpdk_reset_rescan(),
            "dpdk-reset-loop" => self.dpdk_reset_loop(),
            "preflight" => self.preflight(),
            "kernel-service-reset" => self.service_reset(),
            "dpdk-service-reset" => self.dpdk_service_reset(),
            "dpdk-lying" => self.dpdk_lying(),
            _ => Err(format!("unknown scenario {name}")),
        }
    }
}

pub fn describe_boot(t: &Tier) -> String {
    format!(
        "stack {} (rdma-core {}, DPDK {}): booted {} ({} CPUs) in {}",
        t.stack.name,
        t.stack.rdma_core,
        t.stack.dpdk,
        t.vm.banner,
        t.cpus,
        fmt_dur(t.vm.boot_time)
    )
}

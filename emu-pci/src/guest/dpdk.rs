//! The DPDK scenarios: the stack's testpmd (bookworm's DPDK 22.11, trixie's
//! 24.11) in the guest on the
//! real libibverbs/libmana/`mana_ib`, with our PMD or DPDK's C driver,
//! checked against the host peer's and the device's counters.

use super::peer::{self, LinkCounters};
use super::scenarios::HANG;
use super::scenarios::{ipv4_frame, udp, Outcome, Tier, MAC, MAC_STR, PCI};
use super::stack::{CDriver, Stack};
use crate::vfio::lock;
use mana_emu::device::{Fault, PortCounters, QueueCounters, Trigger};
use std::time::{Duration, Instant};

/// The PMD testpmd loads in the guest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Pmd {
    /// Ours (`librte_net_mana.so`, `MANA_GUEST_PMD`).
    Rust,
    /// DPDK's own `drivers/net/mana`: the stack's package, or (bookworm)
    /// DPDK 22.11's built out of tree (`MANA_GUEST_C_PMD`) with the
    /// queue-state shim preloaded: 22.11.11's driver never sets its queues'
    /// states, and testpmd 22.11 never polls a queue whose state reads
    /// "stopped" (tests/upstream/queue-state-shim.c). 23.11 and later set
    /// them.
    C,
}

impl Pmd {
    fn plugin(self, stack: &Stack) -> &'static str {
        match (self, stack.c_driver) {
            (Pmd::Rust, _) => super::vm::GUEST_PMD,
            (Pmd::C, CDriver::Built) => super::vm::GUEST_C_PMD,
            (Pmd::C, CDriver::Packaged(path) | CDriver::Release(path)) => path,
        }
    }

    /// What precedes the testpmd command line.
    fn env(self, stack: &Stack) -> String {
        match (self, stack.c_driver) {
            (Pmd::C, CDriver::Built) => format!("LD_PRELOAD={} ", super::vm::GUEST_QSTATE_SHIM),
            _ => String::new(),
        }
    }

    fn name(self, stack: &Stack) -> String {
        match (self, stack.c_driver) {
            (Pmd::Rust, _) => "our PMD".into(),
            (Pmd::C, CDriver::Built) => format!("DPDK {}'s C net/mana", stack.dpdk),
            (Pmd::C, CDriver::Packaged(_)) => {
                format!("{}'s packaged DPDK {} C net/mana", stack.name, stack.dpdk)
            }
            (Pmd::C, CDriver::Release(_)) => {
                format!("DPDK {}'s C net/mana (scripts/dpdk.sh's build)", stack.dpdk)
            }
        }
    }

    /// The C driver counts a packet sent when it reaps the packet's
    /// completion, at the start of a later `tx_burst` (tx.c, 22.11 and
    /// 24.11 alike): each queue's last burst stays uncounted until the
    /// queue forwards again. Ours counts what the device took.
    fn counts_tx_on_completion(self) -> bool {
        self == Pmd::C
    }
}

/// The port's EAL arguments as seed 001 composes them on Azure:
/// `-a <pci>,mac=<mac>`.
pub(super) fn seed_eal() -> String {
    format!("-a {PCI},mac={MAC_STR}")
}

/// testpmd in the guest with `pmd` on the port `eal` names (`seed_eal()`,
/// or what mana-preflight printed). The guest has no hugepages to spare
/// (512 MiB): EAL runs on `--no-huge -m 128`; the mempool driver and the
/// PMD are loaded with `-d` (neither is in DPDK's plugin directory), and
/// the stack's own EAL options come first.
pub(super) fn testpmd_cmd(stack: &Stack, pmd: Pmd, eal: &str, args: &str) -> String {
    dpdk_cmd(stack, "dpdk-testpmd", pmd, NO_HUGE, eal, args)
}

/// EAL's memory and cores in the guest unless a scenario reserves
/// hugepages.
pub(super) const NO_HUGE: &str = "--no-huge -m 128 -l 0-1";

/// The DPDK program `prog` of `stack` (in /usr/local/bin, or in the bin/
/// of the stack's DPDK build with its libraries first) with `pmd`, EAL
/// memory and core arguments `mem`, on the port `eal` names.
pub(super) fn dpdk_cmd(
    stack: &Stack,
    prog: &str,
    pmd: Pmd,
    mem: &str,
    eal: &str,
    args: &str,
) -> String {
    let prog = match stack.dpdk_build {
        Some(dir) => format!("LD_LIBRARY_PATH={dir}/lib {dir}/bin/{prog}"),
        None => format!("/usr/local/bin/{prog}"),
    };
    format!(
        "{}{prog} {mem} -d {} -d {} {} {eal} -- {args}",
        pmd.env(stack),
        stack.mempool_ring,
        pmd.plugin(stack),
        stack.testpmd_eal
    )
}

impl Tier {
    /// testpmd with our PMD, ports not started, runs `cmd` and quits; its
    /// whole output.
    fn testpmd_once(&mut self, cmd: &str) -> Result<String, String> {
        self.sh(
            &format!(
                "printf '{cmd}\\nquit\\n' | {} 2>&1",
                testpmd_cmd(
                    self.stack,
                    Pmd::Rust,
                    &seed_eal(),
                    "-i --disable-device-start --total-num-mbufs=2048"
                )
            ),
            Duration::from_secs(120),
        )
    }

    /// Bookworm's dpdk-testpmd (DPDK 22.11) with our PMD in the guest, on
    /// the real libibverbs/libmana/mana_ib: the PCI function is probed and
    /// its port has the vPort's MAC and the limits the real stack reports
    /// (64 queues from the adapter's `max_qp`, 256 descriptors under
    /// rdma-core 44, 15 segments); the context's doorbell page and PD come
    /// and go with testpmd. The ports are not started (`dpdk-rust-*` and
    /// `dpdk-c*` start them).
    pub fn dpdk_probe(&mut self) -> Outcome {
        self.ensure_mana()?;
        self.load_mana_ib()?;
        self.cmd("ip link set eth0 down")?;
        let pds0 = lock(&self.func.dev)
            .ledger
            .succeeded
            .get("GDMA_CREATE_PD")
            .copied()
            .unwrap_or(0);
        let out = self.testpmd_once("show port info 0")?;
        let desc = self.stack.max_descriptors;
        let want = [
            // EAL's (22.11) or the PCI bus's (24.11) log line.
            "Probe PCI driver: net_mana (1414:00ba) device: 0000:00:01.0",
            "MAC address: 00:15:5D:4E:0A:01",
            "Driver name: net_mana",
            // Our PMD spreads RX over a 64-entry RSS table: no more RX
            // queues than that.
            &format!("Max possible RX queues: {}", self.stack.max_queues.min(64)),
            &format!("Max possible TX queues: {}", self.stack.max_queues),
            &format!("Max possible number of RXDs per queue: {desc}"),
            &format!("Max possible number of TXDs per queue: {desc}"),
            "Max segment number per packet: 15",
        ];
        if let Some(w) = want.iter().find(|w| !out.contains(*w)) {
            return Err(format!("testpmd output lacks {w:?}:\n{out}"));
        }
        let d = lock(&self.func.dev);
        let pds = d
            .ledger
            .succeeded
            .get("GDMA_CREATE_PD")
            .copied()
            .unwrap_or(0)
            - pds0;
        if pds == 0 {
            return Err("testpmd allocated no PD through mana_ib".into());
        }
        if d.rdma.user_pds() != 0 || !d.rdma.mrs.is_empty() || !d.rdma.db_pages.is_empty() {
            return Err(format!(
                "after testpmd quit the device holds {} PDs, {} MRs, doorbell pages {:?}",
                d.rdma.user_pds(),
                d.rdma.mrs.len(),
                d.rdma.db_pages
            ));
        }
        drop(d);
        self.device_check("after testpmd")?;
        self.kernel_log_clean("after testpmd")?;
        Ok(format!(
            "testpmd (DPDK {}) + our PMD probed 0000:00:01.0 port 1 (00:15:5d:4e:0a:01, {} RX / {} TX queues, {desc} descriptors) through libmana (rdma-core {})/mana_ib; {pds} PD(s) made and destroyed",
            self.stack.dpdk,
            self.stack.max_queues.min(64),
            self.stack.max_queues,
            self.stack.rdma_core
        ))
    }
}

/// What the peer and the device counted for one round of frames.
#[derive(Clone, Debug)]
pub(super) struct Round {
    /// Peer TX, device RX, device TX, peer RX: (frames, bytes) each.
    pub peer_tx: (u64, u64),
    pub dev_rx: (u64, u64),
    pub dev_tx: (u64, u64),
    pub peer_rx: (u64, u64),
}

impl Round {
    /// Both rounds' counts.
    fn plus(&self, o: &Round) -> Round {
        let add = |a: (u64, u64), b: (u64, u64)| (a.0 + b.0, a.1 + b.1);
        Round {
            peer_tx: add(self.peer_tx, o.peer_tx),
            dev_rx: add(self.dev_rx, o.dev_rx),
            dev_tx: add(self.dev_tx, o.dev_tx),
            peer_rx: add(self.peer_rx, o.peer_rx),
        }
    }
}

/// One "NIC statistics for port 0" block of testpmd's output:
/// (RX frames, RX bytes, TX frames, TX bytes).
pub(super) fn port_stats(block: &str) -> Result<(u64, u64, u64, u64), String> {
    let stat = |k: &str| -> Result<u64, String> {
        block
            .split_whitespace()
            .skip_while(|w| *w != k)
            .nth(1)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("no {k} in testpmd's stats:\n{block}"))
    };
    Ok((
        stat("RX-packets:")?,
        stat("RX-bytes:")?,
        stat("TX-packets:")?,
        stat("TX-bytes:")?,
    ))
}

/// Every hop counted the same frames and bytes: peer TX = device RX =
/// testpmd RX = testpmd TX = device TX = peer RX.
pub(super) fn check_hops(r: &Round, tpmd: (u64, u64, u64, u64)) -> Result<(), String> {
    check_hops_held(r, tpmd, (0, 0))
}

/// [`check_hops`] when testpmd forwarded `held` (frames, bytes) into SQs
/// the device does not send from (see `Tier::reap_tx_completions`):
/// testpmd RX = testpmd TX + held.
fn check_hops_held(r: &Round, tpmd: (u64, u64, u64, u64), held: (u64, u64)) -> Result<(), String> {
    let (trx, trxb, ttx, ttxb) = tpmd;
    let checks = [
        ("peer TX = device RX frames", r.peer_tx.0, r.dev_rx.0),
        ("peer TX = device RX bytes", r.peer_tx.1, r.dev_rx.1),
        ("device RX = testpmd RX frames", r.dev_rx.0, trx),
        ("device RX = testpmd RX bytes", r.dev_rx.1, trxb),
        ("testpmd RX = testpmd TX (+ held) frames", trx, ttx + held.0),
        (
            "testpmd RX = testpmd TX (+ held) bytes",
            trxb,
            ttxb + held.1,
        ),
        ("testpmd TX = device TX frames", ttx, r.dev_tx.0),
        ("testpmd TX = device TX bytes", ttxb, r.dev_tx.1),
        ("device TX = peer RX frames", r.dev_tx.0, r.peer_rx.0),
        ("device TX = peer RX bytes", r.dev_tx.1, r.peer_rx.1),
    ];
    let bad: Vec<String> = checks
        .iter()
        .filter(|(_, a, b)| a != b)
        .map(|(n, a, b)| format!("{n}: {a} != {b}"))
        .collect();
    if bad.is_empty() {
        Ok(())
    } else {
        Err(format!("counters differ: {}", bad.join("; ")))
    }
}

impl Tier {
    /// Sends `cmd` to the testpmd running in the guest (its stdin is the
    /// FIFO /tmp/tpin) and waits until its output contains `until`. The
    /// prompt is written at once; testpmd's printf output reaches the file
    /// (no tty, no stdbuf in the guest) only when it exits.
    pub(super) fn testpmd_do(
        &mut self,
        cmd: &str,
        until: &str,
        timeout: Duration,
    ) -> Result<String, String> {
        let from = self
            .cmd("wc -c < /tmp/tpout")?
            .trim()
            .parse::<usize>()
            .unwrap_or(0);
        self.cmd(&format!("echo '{cmd}' > /tmp/tpin"))?;
        let t0 = Instant::now();
        loop {
            // testpmd's prompt ends without a newline; the console needs one.
            let out = self.cmd(&format!("tail -c +{} /tmp/tpout; echo", from + 1))?;
            if out.contains(until) {
                return Ok(out);
            }
            if t0.elapsed() > timeout {
                return Err(format!(
                    "testpmd `{cmd}`: no {until:?} after {timeout:?}:\n{out}"
                ));
            }
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// Starts testpmd in the background, as seed 001 runs it (kernel
    /// interface down, `-a <pci>,mac=<mac>`), `macswap` forwarding over
    /// `queues` queue pairs, driven through the FIFO /tmp/tpin; returns
    /// once forwarding has started.
    pub(super) fn testpmd_launch(&mut self, queues: usize) -> Result<(), String> {
        self.testpmd_launch_with(Pmd::Rust, queues)
    }

    /// [`Tier::testpmd_launch`] with `pmd`; fails saying how to get it if
    /// it is not in the guest.
    fn testpmd_launch_with(&mut self, pmd: Pmd, queues: usize) -> Result<(), String> {
        self.testpmd_launch_args(pmd, queues, &seed_eal(), "")
    }

    /// [`Tier::testpmd_launch_with`] on the port `eal` names, with `extra`
    /// testpmd arguments.
    fn testpmd_launch_args(
        &mut self,
        pmd: Pmd,
        queues: usize,
        eal: &str,
        extra: &str,
    ) -> Result<(), String> {
        self.testpmd_launch_mem(pmd, queues, NO_HUGE, eal, extra)
    }

    /// [`Tier::testpmd_launch_args`] with EAL memory arguments `mem`.
    pub(super) fn testpmd_launch_mem(
        &mut self,
        pmd: Pmd,
        queues: usize,
        mem: &str,
        eal: &str,
        extra: &str,
    ) -> Result<(), String> {
        if self
            .cmd(&format!("test -e {}", pmd.plugin(self.stack)))
            .is_err()
        {
            return Err(format!(
                "{} is not in the guest ({}): scripts/guest.sh builds it (tests/upstream/build-c-driver.sh for the C driver; scripts/dpdk.sh for a stack's DPDK build) and names it in MANA_GUEST_PMD / MANA_GUEST_C_PMD / MANA_GUEST_DPDK",
                pmd.name(self.stack),
                pmd.plugin(self.stack)
            ));
        }
        self.ensure_mana()?;
        self.load_mana_ib()?;
        self.cmd("ip link set eth0 down")?;
        // A scenario that failed while quiescing may have left TX paused.
        self.pause_tx(false)?;
        self.cmd(&format!(
            "rm -f /tmp/tpin /tmp/tpout; mkfifo /tmp/tpin; \
             {} < /tmp/tpin > /tmp/tpout 2>&1 & sleep 900 > /tmp/tpin & echo $! > /tmp/tpsleep",
            dpdk_cmd(
                self.stack,
                "dpdk-testpmd",
                pmd,
                mem,
                eal,
                &format!(
                    "-i --forward-mode=macswap --rxq={queues} --txq={queues} --total-num-mbufs=4096 {extra}"
                )
            )
        ))?;
        let t0 = Instant::now();
        // Asked without copying the output over the 115200-baud console: a
        // testpmd that logs without end would outrun it.
        while self
            .cmd("grep -q 'testpmd> ' /tmp/tpout && echo up; true")?
            .trim()
            != "up"
        {
            if t0.elapsed() > Duration::from_secs(90) {
                return Err(format!("testpmd did not come up:\n{}", self.tpout_ends()?));
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        self.testpmd_do("start", "testpmd> ", HANG)?;
        Ok(())
    }

    /// testpmd's output so far: its size, and its first and last 3000
    /// bytes if it is longer than that.
    fn tpout_ends(&mut self) -> Result<String, String> {
        self.cmd(
            "n=$(wc -c < /tmp/tpout); echo \"($n bytes)\"; \
             if [ $n -le 6000 ]; then cat /tmp/tpout; else head -c 3000 /tmp/tpout; echo; echo ...; tail -c 3000 /tmp/tpout; fi; echo",
        )
    }

    /// The peer sends `n` UDP frames (61 flows, 60-260 bytes) to the port
    /// and waits for them to come back; the peer's and the device's counts
    /// once they settle. `seed` varies the payloads between rounds.
    pub(super) fn peer_round(&mut self, n: u64, seed: u8) -> Result<Round, String> {
        self.peer_round_sized(n, seed, &|i| 18 + (i as usize % 200))
    }

    /// [`Tier::peer_round`] with frame `i` carrying `payload(i)` bytes of
    /// UDP payload.
    fn peer_round_sized(
        &mut self,
        n: u64,
        seed: u8,
        payload: &dyn Fn(u64) -> usize,
    ) -> Result<Round, String> {
        let (p0, d0) = (
            self.peer.counters().map_err(|e| e.to_string())?,
            self.port(),
        );
        self.peer_send(n, seed, payload)?;
        // Every frame back at the peer (or a timeout), then settled.
        let t0 = Instant::now();
        loop {
            let p = self.peer.counters().map_err(|e| e.to_string())?;
            if p.rx_packets - p0.rx_packets >= n || t0.elapsed() > Duration::from_secs(60) {
                break;
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        std::thread::sleep(Duration::from_millis(500));
        self.round_since(&p0, &d0)
    }

    /// The peer sends `n` UDP frames to the port over 61 flows, frame `i`
    /// carrying `payload(i)` bytes of `i + seed`.
    pub(super) fn peer_send(
        &mut self,
        n: u64,
        seed: u8,
        payload: &dyn Fn(u64) -> usize,
    ) -> Result<(), String> {
        let peer_mac = self.peer_mac()?;
        for i in 0..n {
            let payload = vec![(i as u8).wrapping_add(seed); payload(i)];
            let f = ipv4_frame(
                MAC,
                peer_mac,
                17,
                &udp(40000 + i as u16 % 61, 6000, &payload, true),
            );
            peer::send_raw(&self.peer.ns, &self.peer.peer_if, f)
                .map_err(|e| format!("raw send: {e}"))?;
        }
        Ok(())
    }

    /// What the peer and the device counted since `p0` and `d0`.
    pub(super) fn round_since(
        &self,
        p0: &LinkCounters,
        d0: &PortCounters,
    ) -> Result<Round, String> {
        let (p1, d1) = (
            self.peer.counters().map_err(|e| e.to_string())?,
            self.port(),
        );
        Ok(Round {
            peer_tx: (p1.tx_packets - p0.tx_packets, p1.tx_bytes - p0.tx_bytes),
            dev_rx: (d1.rx_packets - d0.rx_packets, d1.rx_bytes - d0.rx_bytes),
            dev_tx: (d1.tx_packets - d0.tx_packets, d1.tx_bytes - d0.tx_bytes),
            peer_rx: (p1.rx_packets - p0.rx_packets, p1.rx_bytes - p0.rx_bytes),
        })
    }

    /// The packet counts of the device's live RQs (testpmd's, until it
    /// quits).
    fn live_rqs(&self) -> Vec<u64> {
        let d = lock(&self.func.dev);
        d.net
            .counters()
            .queues
            .iter()
            .filter(|q| q.live && q.kind == "rq")
            .map(|q| q.counters.packets)
            .collect()
    }

    /// `quit`; testpmd's whole output (written only at exit).
    pub(super) fn testpmd_quit(&mut self) -> Result<String, String> {
        self.testpmd_do("quit", "Bye", Duration::from_secs(60))?;
        // The FIFO's writer, by its pid.
        self.cmd("kill $(cat /tmp/tpsleep)")?;
        self.cmd("cat /tmp/tpout; echo")
    }

    /// Nothing testpmd made through mana_ib outlives it on the device.
    pub(super) fn testpmd_left_nothing(&self) -> Result<(), String> {
        let d = lock(&self.func.dev);
        if !d.wq_objs.is_empty()
            || d.rdma.user_pds() != 0
            || !d.rdma.mrs.is_empty()
            || !d.rdma.db_pages.is_empty()
        {
            return Err(format!(
                "after testpmd quit the device holds {} WQ objects, {} PDs, {} MRs, doorbell pages {:?}",
                d.wq_objs.len(),
                d.rdma.user_pds(),
                d.rdma.mrs.len(),
                d.rdma.db_pages
            ));
        }
        drop(d);
        self.device_check("after testpmd")
    }

    /// `dpdk-rust-1q`: testpmd with our PMD in the guest, one queue pair,
    /// `macswap` forwarding; the host peer sends UDP frames to the port
    /// and receives them back. Every hop counts the same frames and bytes.
    /// When testpmd quits, everything it made through mana_ib is gone.
    ///
    /// The queue pair is as deep as our PMD says the stack allows (256
    /// descriptors under rdma-core 44, 2048 under 56): testpmd must set
    /// it up at that depth and forward through it.
    pub fn dpdk_rust_1q(&mut self) -> Outcome {
        let n = self.stack.max_descriptors;
        let summary = self.dpdk_forward_args(
            Pmd::Rust,
            1,
            &seed_eal(),
            &format!("--rxd={n} --txd={n}"),
            &["show rxq info 0 0", "show txq info 0 0"],
        )?;
        let out = &self.last_testpmd_output;
        for want in [
            format!("Number of RXDs: {n}"),
            format!("Number of TXDs: {n}"),
        ] {
            if !out.contains(&want) {
                return Err(format!("testpmd's queue info lacks {want:?}:\n{out}"));
            }
        }
        Ok(format!("{summary}; {n} descriptors per queue"))
    }

    /// `dpdk-rust-4q`: the same with 4 queue pairs: `mana_ib`'s RSS QP
    /// spreads the peer's 61 flows over 4 RQs (at least 2 used, and the
    /// device's per-RQ counts add up to what testpmd received).
    pub fn dpdk_rust_4q(&mut self) -> Outcome {
        self.dpdk_rust(4)
    }

    fn dpdk_rust(&mut self, queues: usize) -> Outcome {
        self.dpdk_forward(Pmd::Rust, queues)
    }

    /// `dpdk-mtu`: testpmd with our PMD and `--max-pkt-len=4000`, the MTU
    /// set at configure (`rxmode.mtu`) as DTS's `mtu` suite and LISA's MTU
    /// cases set it: the real kernel netdev's MTU becomes 3982 while
    /// testpmd runs, and 3000-byte frames cross every hop with equal counts.
    pub fn dpdk_mtu(&mut self) -> Outcome {
        const N: u64 = 50;
        const LEN: usize = 3000;
        let before = self.cmd("cat /sys/class/net/eth0/mtu")?.trim().to_string();
        self.peer
            .set_mtu(9000)
            .map_err(|e| format!("peer MTU: {e}"))?;
        let outcome = self.dpdk_mtu_with_peer(N, LEN);
        // The next scenarios expect the defaults.
        self.peer
            .set_mtu(1500)
            .map_err(|e| format!("peer MTU: {e}"))?;
        self.cmd("ip link set eth0 mtu 1500")?;
        let mtu = outcome?;
        Ok(format!(
            "testpmd --max-pkt-len=4000 + our PMD: eth0's MTU {before} -> {mtu}; {N} frames of {LEN} bytes macswapped, equal at every hop"
        ))
    }

    fn dpdk_mtu_with_peer(&mut self, n: u64, len: usize) -> Result<String, String> {
        self.testpmd_launch_args(
            Pmd::Rust,
            1,
            &seed_eal(),
            "--max-pkt-len=4000 --mbuf-size=4300",
        )?;
        let mtu = self.cmd("cat /sys/class/net/eth0/mtu")?.trim().to_string();
        if mtu != "3982" {
            let _ = self.testpmd_quit();
            return Err(format!("eth0's MTU is {mtu} with testpmd at MTU 3982"));
        }
        let r = self.peer_round_sized(n, 7, &|_| len - 42)?;
        self.testpmd_do("stop", "testpmd> ", HANG)?;
        self.testpmd_do("show port stats 0", "testpmd> ", HANG)?;
        let out = self.testpmd_quit()?;
        let stats = out
            .rsplit_once("NIC statistics for port 0")
            .map(|(_, s)| s.to_string())
            .ok_or_else(|| format!("no port statistics from testpmd:\n{out}"))?;
        check_hops(&r, port_stats(&stats)?)?;
        if r.dev_rx != (n, n * len as u64) {
            return Err(format!(
                "the device received {:?} (frames, bytes) of {n} x {len}",
                r.dev_rx
            ));
        }
        self.testpmd_left_nothing()?;
        Ok(mtu)
    }

    /// `dpdk-c`: the procedure of `dpdk-rust-1q` with DPDK 22.11's own C
    /// driver in the guest (bookworm's packages do not ship it;
    /// tests/upstream/build-c-driver.sh builds it and scripts/guest.sh
    /// names it in `MANA_GUEST_C_PMD`). Its TX count is compared at a
    /// quiescent point (`reap_tx_completions`).
    pub fn dpdk_c(&mut self) -> Outcome {
        self.dpdk_forward(Pmd::C, 1)
    }

    /// `dpdk-c-4q`: the C driver with 4 queue pairs (its RSS QP).
    pub fn dpdk_c_4q(&mut self) -> Outcome {
        self.dpdk_forward(Pmd::C, 4)
    }

    fn dpdk_forward(&mut self, pmd: Pmd, queues: usize) -> Outcome {
        self.dpdk_forward_on(pmd, queues, &seed_eal())
    }

    /// [`Tier::dpdk_forward`] with testpmd on the port `eal` names.
    pub(super) fn dpdk_forward_on(&mut self, pmd: Pmd, queues: usize, eal: &str) -> Outcome {
        self.dpdk_forward_args(pmd, queues, eal, "", &[])
    }

    /// [`Tier::dpdk_forward_on`] with `extra` testpmd arguments, and
    /// `show` commands run once forwarding stopped (their output is in
    /// `last_testpmd_output` afterwards).
    fn dpdk_forward_args(
        &mut self,
        pmd: Pmd,
        queues: usize,
        eal: &str,
        extra: &str,
        show: &[&str],
    ) -> Outcome {
        const N: u64 = 200;
        self.testpmd_launch_args(pmd, queues, eal, extra)?;
        let r = self.peer_round(N, 0)?;
        let (held, flush) = if pmd.counts_tx_on_completion() {
            let flush = self.reap_tx_completions()?;
            ((flush.dev_rx.0, flush.dev_rx.1), Some(flush))
        } else {
            ((0, 0), None)
        };
        self.testpmd_do("stop", "testpmd> ", HANG)?;
        self.testpmd_do("show port stats 0", "testpmd> ", HANG)?;
        for cmd in show {
            self.testpmd_do(cmd, "testpmd> ", HANG)?;
        }
        let per_rq = self.live_rqs();
        let out = self.testpmd_quit()?;
        self.last_testpmd_output = out.clone();
        // testpmd's SQs, and the frames held in them, are gone.
        self.pause_tx(false)?;
        let stats = out
            .rsplit_once("NIC statistics for port 0")
            .map(|(_, s)| s.to_string())
            .ok_or_else(|| format!("no port statistics from testpmd:\n{out}"))?;
        let total = match &flush {
            Some(f) => r.plus(f),
            None => r.clone(),
        };
        check_hops_held(&total, port_stats(&stats)?, held).map_err(|e| {
            let tail: Vec<&str> = out.lines().rev().take(30).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            format!("{e}\ntestpmd's output ends:\n{}", tail.join("\n"))
        })?;
        if let Some(f) = &flush {
            if f.dev_tx != (0, 0) || f.peer_rx != (0, 0) {
                return Err(format!(
                    "TX paused, yet the device sent {:?} and the peer got {:?} (frames, bytes)",
                    f.dev_tx, f.peer_rx
                ));
            }
        }
        let (drx, drxb) = r.dev_rx;
        if drx < N {
            return Err(format!("the device received {drx} of the {N} frames sent"));
        }
        if per_rq.len() != queues {
            return Err(format!(
                "{} RQs on the device, testpmd set up {queues}",
                per_rq.len()
            ));
        }
        if per_rq.iter().sum::<u64>() != total.dev_rx.0 {
            return Err(format!(
                "the RQs counted {per_rq:?}, the port {}",
                total.dev_rx.0
            ));
        }
        if queues > 1 && per_rq.iter().filter(|n| **n > 0).count() < 2 {
            return Err(format!("RSS used one RQ of {queues}: {per_rq:?}"));
        }
        self.testpmd_left_nothing()?;
        let reaped = if held.0 > 0 {
            format!(
                " (then TX paused: {} frames more reaped the last completions, held in the SQs)",
                held.0
            )
        } else {
            String::new()
        };
        Ok(format!(
            "{drx} frames / {drxb} bytes peer -> device -> testpmd ({}, {queues} queue(s), macswap) -> device -> peer, equal at every hop{reaped}; per RQ {per_rq:?}",
            pmd.name(self.stack)
        ))
    }

    /// Stops (XOFF) or resumes the device's sending on the vPort.
    fn pause_tx(&mut self, pause: bool) -> Result<(), String> {
        let mac = MAC_STR.to_string();
        let f = if pause {
            Fault::TxPause { mac }
        } else {
            Fault::TxResume { mac }
        };
        lock(&self.func.dev)
            .net
            .schedule(f, Trigger::Now)
            .map_err(|e| format!("TX pause {pause}: errno {}", e.0))
    }

    /// The live queues of `kind` ("sq", "rq"): id and counters.
    fn live_queues(&self, kind: &str) -> Vec<(u32, QueueCounters)> {
        let c = lock(&self.func.dev).net.counters();
        c.queues
            .iter()
            .filter(|q| q.live && q.kind == kind)
            .map(|q| (q.id, q.counters.clone()))
            .collect()
    }

    /// For a PMD that counts TX at completion (the C driver): a quiescent
    /// point at which its TX count is exact. The device stops sending
    /// (XOFF), the peer sends frames to every RQ, and the `tx_burst` that
    /// forwards them reaps every completion the device posted before; the
    /// frames stay in the paused SQs, sent and counted by no one (testpmd
    /// RX = testpmd TX + these). Returns what the peer and the device
    /// counted for them.
    fn reap_tx_completions(&mut self) -> Result<Round, String> {
        // 16 flows: every RQ of 4 gets some (checked below).
        const F: u16 = 16;
        let peer_mac = self.peer_mac()?;
        let sq0 = self.live_queues("sq");
        let rq0 = self.live_queues("rq");
        let (p0, d0) = (
            self.peer.counters().map_err(|e| e.to_string())?,
            self.port(),
        );
        self.pause_tx(true)?;
        for i in 0..F {
            let f = ipv4_frame(MAC, peer_mac, 17, &udp(50000 + i, 6000, &[0xf0; 32], true));
            peer::send_raw(&self.peer.ns, &self.peer.peer_if, f)
                .map_err(|e| format!("raw send: {e}"))?;
        }
        // Each SQ rung again: its queue forwarded its share, reaping first.
        let t0 = Instant::now();
        loop {
            let quiet: Vec<u32> = self
                .live_queues("sq")
                .iter()
                .filter(|(id, c)| {
                    sq0.iter()
                        .find(|(i, _)| i == id)
                        .is_none_or(|(_, c0)| c.doorbells == c0.doorbells)
                })
                .map(|(id, _)| *id)
                .collect();
            if quiet.is_empty() {
                break;
            }
            if t0.elapsed() > HANG {
                let got: Vec<u64> = self
                    .live_queues("rq")
                    .iter()
                    .map(|(id, c)| {
                        let before = rq0.iter().find(|(i, _)| i == id);
                        c.packets - before.map_or(0, |(_, c0)| c0.packets)
                    })
                    .collect();
                return Err(format!(
                    "TX paused, {F} frames more sent (per RQ {got:?}): SQs {quiet:?} not rung again in {HANG:?}"
                ));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        self.round_since(&p0, &d0)
    }
}

impl Tier {
    /// `dpdk-iface-up`: seed 001's troubleshooting for real — testpmd
    /// started with the kernel's interface still up: `mana_ib` refuses the
    /// raw QP (the vPort is the kernel's, EBUSY) without asking the device,
    /// the port does not start, and our PMD's log line says what to do.
    /// Nothing is left on the device.
    pub fn dpdk_iface_up(&mut self) -> Outcome {
        self.ensure_mana()?;
        self.load_mana_ib()?;
        self.cmd("ip link set eth0 up")?;
        let wq_before = lock(&self.func.dev).wq_objs.len();
        let out = self.testpmd_once("port start 0")?;
        let want = [
            "tx queue 0: the kernel still uses port 00:15:5d:4e:0a:01 (eth0): run 'ip link set eth0 down' before starting DPDK",
            "Fail to start port 0",
        ];
        if let Some(w) = want.iter().find(|w| !out.contains(*w)) {
            return Err(format!("testpmd output lacks {w:?}:\n{out}"));
        }
        let d = lock(&self.func.dev);
        if d.vport.user.is_some() || d.rdma.user_pds() != 0 || !d.rdma.db_pages.is_empty() {
            return Err("testpmd's objects outlived it".into());
        }
        if d.wq_objs.len() != wq_before {
            return Err(format!(
                "WQ objects {} -> {}: the refused start reached the device",
                wq_before,
                d.wq_objs.len()
            ));
        }
        drop(d);
        self.device_check("after the refused start")?;
        self.cmd("ip link set eth0 down")?;
        Ok("eth0 up: port 0 refused with \"run 'ip link set eth0 down' before starting DPDK\"; the device untouched".into())
    }
}

/// Every `dump_socket_mem`'s total: (bytes, allocations) in use.
fn heap_in_use(out: &str) -> Vec<(String, u64)> {
    out.lines()
        .filter_map(|l| l.strip_prefix("Total   : "))
        .filter_map(|l| {
            let bytes = l.split("alloc: ").nth(1)?.split('(').next()?.to_string();
            let count = l.split("count alloc: ").nth(1)?.split_whitespace().next()?;
            Some((bytes, count.parse().ok()?))
        })
        .collect()
}

/// testpmd's two `dump_socket_mem` in `out` (before and after `what`) show
/// the same heap in use, and its last `dump_mempool` no mbuf in use (the
/// port stopped); the heap (MB, allocations).
pub(super) fn heap_and_mbufs_flat(out: &str, what: &str) -> Result<(String, u64), String> {
    let heap = heap_in_use(out);
    if heap.len() != 2 || heap[0] != heap[1] {
        return Err(format!(
            "DPDK heap before and after {what} (MB, allocations): {heap:?}"
        ));
    }
    let pools: Vec<_> = mana_emu::harness::parse_mempools(out)
        .into_iter()
        .filter(|p| p.name.starts_with("mb_pool"))
        .collect();
    match pools.last() {
        Some(p) if p.in_use == 0 => Ok(heap[0].clone()),
        Some(p) => Err(format!(
            "{} of {} mbufs in use with the port stopped after {what}",
            p.in_use, p.size
        )),
        None => Err(format!("no mempool in testpmd's dump:\n{out}")),
    }
}

/// How long a reset took: the function away, back, our PMD's queues live
/// again (each from the reset's start but `back`, from the return).
pub(super) struct ResetTimes {
    pub away: Duration,
    pub back: Duration,
    pub recovered: Duration,
}

/// How `dpdk-reset*` takes the device away and brings it back.
#[derive(Clone, Copy, Debug)]
pub(super) enum ResetPath {
    /// `mana` unbound and bound: the suspend/resume of a service reset.
    Unbind,
    /// The PCI function removed and the bus rescanned: an FPGA
    /// reconfiguration.
    Rescan,
    /// The device raises `GDMA_EQE_HWC_RESET_REQUEST`: a kernel with
    /// `mana_serv_reset` suspends, waits 10 s and resumes by itself.
    Service,
}

/// The events testpmd printed for port 0, in order, by their short names.
pub(super) fn port0_events(out: &str) -> Vec<&'static str> {
    out.lines()
        .filter_map(|l| l.trim().strip_prefix("Port 0: "))
        .filter_map(|e| match e {
            "error recovering event" => Some("ERR_RECOVERING"),
            "error recovery successful event" => Some("RECOVERY_SUCCESS"),
            "error recovery failed event" => Some("RECOVERY_FAILED"),
            "device removal event" => Some("INTR_RMV"),
            _ => None,
        })
        .collect()
}

impl Tier {
    /// `dpdk-reset`: a device reset through the real kernel path while our
    /// PMD forwards. The 6.12 kernel has no handler for the device's
    /// service events (later kernels handle `GDMA_EQE_HWC_RESET_REQUEST`), so the
    /// scenario does what that handler does: the PCI function's `mana`
    /// driver is unbound (its suspend half: `mana_ib`'s device is
    /// unregistered, uverbs disassociates testpmd's context and reads it
    /// `IBV_EVENT_DEVICE_FATAL`, the HWC is torn down through the SMC) and
    /// bound again (its resume half: HWC, vPort, a new IB device). Our PMD
    /// must emit ERR_RECOVERING then RECOVERY_SUCCESS, rebuild its queues
    /// on the new device under the same port id, forward the next round
    /// with exact counters at every hop, and hold no mbuf once stopped.
    pub fn dpdk_reset(&mut self) -> Outcome {
        self.reset_through(ResetPath::Unbind)
    }

    /// `dpdk-reset-rescan`: the same through the path of an FPGA
    /// reconfiguration (later kernels' `FPGA_RECONFIG` handler): the PCI
    /// function is removed and the bus rescanned.
    pub fn dpdk_reset_rescan(&mut self) -> Outcome {
        self.reset_through(ResetPath::Rescan)
    }

    /// `dpdk-service-reset` (opt-in, needs a kernel with
    /// `mana_serv_reset`): the procedure of `dpdk-reset`, the reset raised
    /// by the device (`GDMA_EQE_HWC_RESET_REQUEST` on the HWC's EQ) and
    /// carried out by the kernel alone.
    pub fn dpdk_service_reset(&mut self) -> Outcome {
        self.reset_through(ResetPath::Service)
    }

    /// One reset through `path` under a forwarding testpmd with `queues`
    /// queues: the function goes away (nothing of it left on the device)
    /// and comes back, and our PMD's new PD and RSS QP are live with all
    /// its RQs.
    pub(super) fn reset_and_recover(
        &mut self,
        path: ResetPath,
        queues: usize,
    ) -> Result<ResetTimes, String> {
        let (pds0, qps0) = {
            let d = lock(&self.func.dev);
            let n = |k: &str| d.ledger.succeeded.get(k).copied().unwrap_or(0);
            (n("GDMA_CREATE_PD"), n("MANA_CONFIG_VPORT_RX"))
        };

        // Away: the IB device goes, testpmd's context with it.
        let t0 = Instant::now();
        let (est0, des0) = {
            let d = lock(&self.func.dev);
            (d.ledger.hwc_established, d.ledger.hwc_destroyed)
        };
        let hwc_wait = |t: &Self, what: &str, f: &dyn Fn(u64, u64) -> bool| loop {
            let (e, d) = {
                let d = lock(&t.func.dev);
                (d.ledger.hwc_established, d.ledger.hwc_destroyed)
            };
            if f(e, d) {
                return Ok(());
            }
            if t0.elapsed() > Duration::from_secs(40) {
                return Err(format!(
                    "{what} {:.0} s after GDMA_EQE_HWC_RESET_REQUEST (kernel {}; 6.12 has no handler for the event: this scenario needs one with mana_serv_reset)",
                    t0.elapsed().as_secs_f64(),
                    t.vm.banner
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        match path {
            ResetPath::Unbind | ResetPath::Rescan => {
                self.sh(
                    &if matches!(path, ResetPath::Unbind) {
                        format!("echo {PCI} > /sys/bus/pci/drivers/mana/unbind")
                    } else {
                        format!("echo 1 > /sys/bus/pci/devices/{PCI}/remove")
                    },
                    Duration::from_secs(60),
                )?;
            }
            ResetPath::Service => {
                lock(&self.func.dev).service_reset()?;
                hwc_wait(self, "the HWC was not torn down", &|_, d| d > des0)?;
            }
        }
        let away = t0.elapsed();
        {
            let d = lock(&self.func.dev);
            if !d.wq_objs.is_empty() || !d.rdma.db_pages.is_empty() || !d.registered.is_empty() {
                return Err(format!(
                    "with the function away the device still holds {} WQ objects, doorbell pages {:?}, {} registered devices",
                    d.wq_objs.len(),
                    d.rdma.db_pages,
                    d.registered.len()
                ));
            }
        }
        // Back: mana probes again and mana_ib adds a new device.
        let t1 = Instant::now();
        match path {
            ResetPath::Unbind => {
                self.sh(
                    &format!("echo {PCI} > /sys/bus/pci/drivers/mana/bind"),
                    Duration::from_secs(60),
                )?;
            }
            ResetPath::Rescan => {
                self.sh("echo 1 > /sys/bus/pci/rescan", Duration::from_secs(60))?;
            }
            ResetPath::Service => hwc_wait(self, "no new HWC", &|e, _| e > est0)?,
        }
        let back = t1.elapsed();
        // Recovered, as the device sees it: the PMD's new PD and RSS QP
        // with all its RQs live.
        loop {
            let done = {
                let d = lock(&self.func.dev);
                let n = |k: &str| d.ledger.succeeded.get(k).copied().unwrap_or(0);
                n("GDMA_CREATE_PD") > pds0 && n("MANA_CONFIG_VPORT_RX") > qps0
            } && self.live_rqs().len() == queues;
            if done {
                break;
            }
            if t0.elapsed() > Duration::from_secs(120) {
                let out = self.testpmd_quit().unwrap_or_default();
                return Err(format!(
                    "our PMD did not rebuild its queues within 120 s:\n{out}"
                ));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(ResetTimes {
            away,
            back,
            recovered: t0.elapsed(),
        })
    }

    fn reset_through(&mut self, path: ResetPath) -> Outcome {
        const N: u64 = 200;
        const QUEUES: usize = 2;
        self.testpmd_launch(QUEUES)?;
        let r1 = self.peer_round(N, 0)?;
        self.testpmd_do("show port stats 0", "testpmd> ", HANG)?;
        self.testpmd_do(&self.stack.dump("socket_mem"), "testpmd> ", HANG)?;
        self.testpmd_do("clear port stats 0", "testpmd> ", HANG)?;
        let times = self.reset_and_recover(path, QUEUES)?;
        let (away, back, recovered) = (times.away, times.back, times.recovered);
        let ibdev = self
            .cmd(&format!(
                "ls /sys/bus/pci/devices/{PCI}/infiniband; ls /sys/bus/pci/devices/{PCI}/infiniband_verbs"
            ))?
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");

        let r2 = self.peer_round(N, 100)?;
        self.testpmd_do(&self.stack.dump("socket_mem"), "testpmd> ", HANG)?;
        self.testpmd_do("stop", "testpmd> ", HANG)?;
        self.testpmd_do("show port stats 0", "testpmd> ", HANG)?;
        let per_rq = self.live_rqs();
        self.testpmd_do("port stop 0", "testpmd> ", HANG)?;
        self.testpmd_do(&self.stack.dump("mempool"), "testpmd> ", HANG)?;
        let out = self.testpmd_quit()?;

        let events = port0_events(&out);
        if events != ["ERR_RECOVERING", "RECOVERY_SUCCESS"] {
            return Err(format!(
                "port 0's events {events:?}, not [ERR_RECOVERING, RECOVERY_SUCCESS]:\n{out}"
            ));
        }
        // Each `show port stats`, not `clear port stats`'s "... cleared".
        let blocks: Vec<&str> = out
            .split("NIC statistics for port 0")
            .skip(1)
            .filter(|b| !b.trim_start().starts_with("cleared"))
            .collect();
        if blocks.len() != 2 {
            return Err(format!(
                "{} port statistics from testpmd, not 2:\n{out}",
                blocks.len()
            ));
        }
        check_hops(&r1, port_stats(blocks[0])?).map_err(|e| format!("before the reset: {e}"))?;
        check_hops(&r2, port_stats(blocks[1])?).map_err(|e| format!("after the reset: {e}"))?;
        for (when, r) in [("before", &r1), ("after", &r2)] {
            if r.dev_rx.0 < N {
                return Err(format!(
                    "{when} the reset the device received {} of the {N} frames sent",
                    r.dev_rx.0
                ));
            }
        }
        if per_rq.iter().sum::<u64>() != r2.dev_rx.0 {
            return Err(format!(
                "the new RQs counted {per_rq:?}, the port {}",
                r2.dev_rx.0
            ));
        }
        // The same queues on the new device: the same DPDK memory in use.
        // (On a disassociated context libibverbs fails the destroys with
        // EIO and libmana then never frees the rings it had us allocate.)
        let heap = heap_and_mbufs_flat(&out, "the reset")?;
        self.testpmd_left_nothing()?;
        let mut silent = String::new();
        if matches!(path, ResetPath::Service) {
            // The HWC answered nothing after the event; 7.x's ib_mad warns
            // that its kernel PD could not be destroyed (the kernel's own
            // doing: see SERVICE_RESET_KERNEL_WARNINGS).
            let known = self.kernel_log_clean_but(
                "after the reset",
                &super::rdma::SERVICE_RESET_KERNEL_WARNINGS,
            )?;
            let d = lock(&self.func.dev);
            let n: u64 = d.ledger.unanswered_in_reset.values().sum();
            if n == 0 {
                return Err("the kernel sent no request after the service reset event: its teardown did not run through the HWC".into());
            }
            silent = format!(
                "; {n} teardown requests left unanswered as the hardware leaves them, {} objects taken by the reset, kernel warnings {known:?}",
                d.ledger.taken_by_reset.len()
            );
        } else {
            self.kernel_log_clean("after the reset")?;
        }
        let (a, b) = match path {
            ResetPath::Unbind => ("unbind", "bind"),
            ResetPath::Rescan => ("remove", "rescan"),
            ResetPath::Service => ("service reset event to HWC teardown", "to a new HWC"),
        };
        Ok(format!(
            "{a} {}, {b} {}, our PMD forwarding again {} after the {a} ({ibdev}); events ERR_RECOVERING, RECOVERY_SUCCESS; {} + {} frames equal at every hop ({QUEUES} queues, per RQ after {per_rq:?}); 0 mbufs in use once stopped; DPDK heap {} MB in {} allocations before and after{silent}",
            super::scenarios::fmt_dur(away),
            super::scenarios::fmt_dur(back),
            super::scenarios::fmt_dur(recovered),
            r1.dev_rx.0,
            r2.dev_rx.0,
            heap.0,
            heap.1,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(rx: (u64, u64), tx: (u64, u64)) -> Round {
        Round {
            peer_tx: rx,
            dev_rx: rx,
            dev_tx: tx,
            peer_rx: tx,
        }
    }

    /// The C driver's lag as dpdk-c first met it: 200 frames forwarded,
    /// 199 counted sent (the last burst's completion not reaped). Only
    /// frames testpmd holds in paused SQs may make up the difference.
    #[test]
    fn held_frames_balance_the_tx_count_exactly() {
        let r = round((200, 31900), (200, 31900));
        let e = check_hops(&r, (200, 31900, 199, 31641)).unwrap_err();
        assert!(
            e.contains("testpmd TX = device TX frames: 199 != 200"),
            "{e}"
        );

        let flush = round((16, 1216), (0, 0));
        let all = r.plus(&flush);
        assert_eq!(all.dev_rx, (216, 33116));
        assert_eq!(all.dev_tx, (200, 31900));
        check_hops_held(&all, (216, 33116, 200, 31900), (16, 1216)).unwrap();
        // One held frame too many or too few is a difference.
        let e = check_hops_held(&all, (216, 33116, 200, 31900), (15, 1140)).unwrap_err();
        assert!(e.contains("(+ held) frames: 216 != 215"), "{e}");
        assert!(check_hops_held(&all, (216, 33116, 199, 31824), (16, 1216)).is_err());
    }
}

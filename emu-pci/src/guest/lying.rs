//! `dpdk-lying`: the lying device (`mana_emu`'s `Fault::Lie`, the same
//! structured lies the LD_PRELOAD emulator tells) through the real kernel.
//! testpmd with our PMD forwards (`macswap`, 2 queue pairs) on queues
//! created through 6.12's `mana_ib`; the device lies only in the CQs of
//! testpmd's user context (its doorbell page), where it writes each
//! completion: owner bits out of phase, undefined CQE types, RX lengths
//! beyond the buffer, wrong queue ids, WQE offsets outside the ring or off
//! a WQE boundary, completions repeated and dropped; and, for the unknown
//! event kind, an EQE of undefined type on the kernel's EQ the CQ reports
//! to (`mana_ib`'s). One clean round first, then the lies until `LIES` are
//! told, then clean rounds again: our PMD must survive (testpmd answers,
//! no crash), count what it refused, never report more than the device
//! delivered, forward again with exact counters at every hop, and hold no
//! mbuf once stopped; the kernel must log nothing.
//!
//! `MANA_GUEST_LIE_SEED` and `MANA_GUEST_LIE_PER_MILLION` change the seed
//! and the rate.

use super::dpdk::{check_hops, port_stats};
use super::scenarios::HANG;
use super::scenarios::{fmt_dur, Outcome, Tier};
use crate::vfio::lock;
use mana_emu::device::{hw_ctx, Fault, Trigger};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const QUEUES: usize = 2;
/// Frames of each clean round.
const N: u64 = 200;
/// Frames the peer sends per burst while the device lies.
const BURST: u64 = 100;
/// Lies the device tells before it stops (bounded by `LIE_DEADLINE`).
const LIES: u64 = 60;
/// Only catches a device that stopped completing: the lies end at their
/// count long before.
const LIE_DEADLINE: Duration = Duration::from_secs(120);

fn env_num(k: &str, default: u64) -> Result<u64, String> {
    match std::env::var(k) {
        Err(_) => Ok(default),
        Ok(v) => v.parse().map_err(|_| format!("{k}={v:?}: give a number")),
    }
}

/// The driver's counters of refused or lost completions, summed over the
/// queues of both directions, from the last `show port xstats 0` block of
/// testpmd's output.
const REFUSED: [&str; 8] = mana_emu::harness::REFUSED_COMPLETION_XSTATS;

fn refused_counts(out: &str) -> Result<BTreeMap<&'static str, u64>, String> {
    let block = out
        .rsplit("NIC extended statistics for port 0")
        .next()
        .filter(|_| out.contains("NIC extended statistics for port 0"))
        .ok_or_else(|| format!("no xstats of port 0 in testpmd's output:\n{out}"))?;
    let mut m: BTreeMap<&'static str, u64> = REFUSED.iter().map(|n| (*n, 0)).collect();
    for l in block.lines() {
        let Some((k, v)) = l.trim().split_once(": ") else {
            continue;
        };
        let Ok(v) = v.trim().parse::<u64>() else {
            continue;
        };
        // rx_q0_stale_completions: queue-direction, queue, name.
        let Some(name) = (k.starts_with("rx_q") || k.starts_with("tx_q"))
            .then(|| k.split_once('_').and_then(|(_, r)| r.split_once('_')))
            .flatten()
            .map(|(_, n)| n)
        else {
            continue;
        };
        if let Some(c) = REFUSED.iter().find(|n| **n == name) {
            *m.get_mut(c).unwrap() += v;
        }
    }
    Ok(m)
}

impl Tier {
    /// Lies told so far by kind (the shared model's counters).
    fn lies_told(&self) -> BTreeMap<String, u64> {
        lock(&self.func.dev).net.counters().device.lies.clone()
    }

    /// The peer sends `n` frames (as `peer_round`) without waiting for
    /// them all to come back: the device lies, some never will. Waits
    /// until the device has received them all and its TX count stays put
    /// for a second.
    fn lying_burst(&mut self, n: u64, seed: u8) -> Result<(), String> {
        let rx0 = self.port().rx_packets;
        self.peer_send(n, seed, &|i| 18 + (i as usize % 200))?;
        let t0 = Instant::now();
        let mut last = (self.port().tx_packets, Instant::now());
        loop {
            let p = self.port();
            if p.tx_packets != last.0 {
                last = (p.tx_packets, Instant::now());
            }
            if p.rx_packets >= rx0 + n && last.1.elapsed() > Duration::from_secs(1) {
                return Ok(());
            }
            if t0.elapsed() > Duration::from_secs(60) {
                return Err(format!(
                    "under lies the device received {} of {n} frames in 60 s (our PMD stopped posting receive buffers?)",
                    p.rx_packets - rx0
                ));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// `dpdk-lying`: see the module's comment.
    pub fn dpdk_lying(&mut self) -> Outcome {
        let seed = env_num("MANA_GUEST_LIE_SEED", 0x11e5_0fad_e71c_e001)?;
        let per_million = env_num("MANA_GUEST_LIE_PER_MILLION", 40_000)? as u32;
        self.testpmd_launch(QUEUES)?;
        let wait = HANG;
        self.testpmd_do("stop", "testpmd> ", wait)?;
        self.testpmd_do("port stop 0", "testpmd> ", wait)?;
        self.testpmd_do(&self.stack.dump("mempool"), "testpmd> ", wait)?;
        self.testpmd_do("port start 0", "testpmd> ", wait)?;
        self.testpmd_do("start", "testpmd> ", wait)?;

        // Clean.
        let r1 = self.peer_round(N, 0)?;
        self.testpmd_do("show port stats 0", "testpmd> ", wait)?;
        self.testpmd_do("clear port stats 0", "testpmd> ", wait)?;
        self.testpmd_do("clear port xstats 0", "testpmd> ", wait)?;

        // Lies, in testpmd's CQs only.
        let before = self.lies_told();
        let (p0, d0) = (
            self.peer.counters().map_err(|e| e.to_string())?,
            self.port(),
        );
        {
            let mut d = lock(&self.func.dev);
            let ctxs: Vec<u32> = d.rdma.db_pages.iter().map(|p| hw_ctx(*p)).collect();
            if ctxs.is_empty() {
                return Err("testpmd runs but the device has no user doorbell page".into());
            }
            d.net
                .schedule(
                    Fault::Lie {
                        seed,
                        per_million,
                        kinds: Vec::new(),
                        count: Some(LIES),
                        ms: Some(LIE_DEADLINE.as_millis() as u64),
                    },
                    Trigger::Now,
                )
                .map_err(|e| format!("Fault::Lie: {e:?}"))?;
            d.net
                .lie_only_on(ctxs)
                .map_err(|e| format!("lie_only_on: {e:?}"))?;
        }
        let t_lie = Instant::now();
        let mut bursts = 0u8;
        while lock(&self.func.dev).net.lying() {
            if t_lie.elapsed() > LIE_DEADLINE {
                break;
            }
            self.lying_burst(BURST, 50 + bursts)?;
            bursts = bursts.wrapping_add(1);
            // testpmd still answers.
            self.testpmd_do("show port stats 0", "testpmd> ", wait)
                .map_err(|e| format!("while the device lied: {e}"))?;
        }
        lock(&self.func.dev)
            .net
            .schedule(Fault::LieStop, Trigger::Now)
            .ok();
        let lied = t_lie.elapsed();
        let rl = self.round_since(&p0, &d0)?;
        let told: BTreeMap<String, u64> = self
            .lies_told()
            .into_iter()
            .map(|(k, v)| {
                let b = before.get(&k).copied().unwrap_or(0);
                (k, v - b)
            })
            .filter(|(_, v)| *v > 0)
            .collect();
        let told_n: u64 = told.values().sum();
        if told_n < LIES {
            return Err(format!(
                "the device told {told_n} lies of {LIES} in {} ({bursts} bursts): {told:?}",
                fmt_dur(lied)
            ));
        }
        self.testpmd_do("show port xstats 0", "testpmd> ", wait)?;
        self.testpmd_do("show port stats 0", "testpmd> ", wait)?;
        self.testpmd_do("clear port stats 0", "testpmd> ", wait)?;

        // Truthful again: forwarding resumes, exactly.
        let r3 = self.peer_round(N, 150)?;
        self.testpmd_do("stop", "testpmd> ", wait)?;
        self.testpmd_do("show port stats 0", "testpmd> ", wait)?;
        self.testpmd_do("port stop 0", "testpmd> ", wait)?;
        self.testpmd_do(&self.stack.dump("mempool"), "testpmd> ", wait)?;
        let out = self.testpmd_quit()?;

        let blocks: Vec<&str> = out
            .split("NIC statistics for port 0")
            .skip(1)
            .filter(|b| !b.trim_start().starts_with("cleared"))
            .collect();
        let nlie = bursts as usize;
        if blocks.len() != 3 + nlie {
            return Err(format!(
                "{} port statistics from testpmd, not {}:\n{out}",
                blocks.len(),
                3 + nlie
            ));
        }
        check_hops(&r1, port_stats(blocks[0])?).map_err(|e| format!("before the lies: {e}"))?;
        check_hops(&r3, port_stats(blocks[2 + nlie])?)
            .map_err(|e| format!("after the lies: {e}"))?;
        for (when, r) in [("before", &r1), ("after", &r3)] {
            if r.dev_rx.0 < N {
                return Err(format!(
                    "{when} the lies the device received {} of the {N} frames sent",
                    r.dev_rx.0
                ));
            }
        }
        // Under the lies: never more than the device delivered.
        let (lrx, lrxb, ltx, ltxb) = port_stats(blocks[1 + nlie])?;
        if lrx > rl.dev_rx.0 || lrxb > rl.dev_rx.1 || ltx > rl.dev_tx.0 || ltxb > rl.dev_tx.1 {
            return Err(format!(
                "under the lies testpmd counted RX {lrx}/{lrxb} B, TX {ltx}/{ltxb} B, more than the device moved ({rl:?})"
            ));
        }
        let refused = refused_counts(&out)?;
        let refused_n: u64 = refused.values().sum();
        let t = |k: &str| told.get(k).copied().unwrap_or(0);
        let in_cqes = told_n - t("unknown_event");
        if in_cqes > 0 && refused_n == 0 {
            return Err(format!(
                "the device told {in_cqes} lies in completions, our PMD counted none: told {told:?}\n{out}"
            ));
        }
        // Each refusal that names a kind is bounded by the lies of that
        // kind (repeats and lapped slots add to the ring-level ones).
        for (name, kinds) in [
            ("unexpected_completions", &["unknown_type"][..]),
            ("bad_length_drops", &["bad_length"][..]),
            ("wrong_queue_completions", &["wrong_queue"][..]),
        ] {
            let n: u64 = kinds.iter().map(|k| t(k)).sum();
            if refused[name] > n {
                return Err(format!(
                    "our PMD counted {} {name}, the device told {n}: told {told:?}, counted {refused:?}",
                    refused[name]
                ));
            }
        }
        // An owner lap ahead reads as an overflow; a repeated completion
        // takes a slot more, so the device may lap the CQ once more.
        let (ahead, dup) = (t("owner_ahead"), t("duplicate"));
        if !(ahead..=ahead + dup).contains(&refused["cq_overflows"])
            || refused["stale_completions"] > t("owner_stale") + dup
        {
            return Err(format!(
                "our PMD's ring-level counts do not match the lies: told {told:?}, counted {refused:?}"
            ));
        }
        let pools: Vec<_> = mana_emu::harness::parse_mempools(&out)
            .into_iter()
            .filter(|p| p.name.starts_with("mb_pool"))
            .collect();
        let in_use: Vec<u64> = pools.iter().map(|p| p.in_use).collect();
        if in_use != [0, 0] {
            return Err(format!(
                "mbufs in use with the port stopped, before and after the lies: {in_use:?} (pools {pools:?})"
            ));
        }
        let eqes: u64 = lock(&self.func.dev).ledger.lie_eqes.values().sum();
        if eqes != t("unknown_event") {
            return Err(format!(
                "{} unknown_event lies told, {eqes} EQEs of undefined type posted",
                t("unknown_event")
            ));
        }
        if lock(&self.func.dev).net.counters().device.bad_doorbells != 0 {
            return Err("our PMD rang a doorbell the device refused".into());
        }
        self.testpmd_left_nothing()?;
        self.kernel_log_clean("after the lies")?;
        Ok(format!(
            "{} + {} frames equal at every hop before and after the lies ({QUEUES} queues); \
             {told_n} lies told in {} ({bursts} bursts of {BURST}, {per_million}/10^6, seed {seed:#x}): {told:?}; \
             under them testpmd counted RX {lrx} of the device's {}, TX {ltx} of {}; \
             our PMD counted {refused:?}; {eqes} undefined EQEs on mana_ib's EQ, kernel log clean; \
             0 mbufs in use once stopped, before and after",
            r1.dev_rx.0,
            r3.dev_rx.0,
            fmt_dur(lied),
            rl.dev_rx.0,
            rl.dev_tx.0,
        ))
    }
}

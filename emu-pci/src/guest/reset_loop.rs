//! `dpdk-reset-loop`: the real kernel's reset again and again under our
//! PMD forwarding, alternating its two paths (`mana` unbound and bound: a
//! service reset's suspend/resume; the function removed and the bus
//! rescanned: an FPGA reconfiguration), with a DPDK secondary
//! (`dpdk-proc-info`) attaching to the rebuilt port after each one.
//!
//! `MANA_GUEST_RESET_CYCLES` sets the count (default 4: the suite's run;
//! the recorded run is 100). Each cycle checks the frames of its round at
//! every hop and in the secondary; at the end, testpmd's events are
//! ERR_RECOVERING then RECOVERY_SUCCESS once per cycle, its heap is what it
//! was before the first reset, and no mbuf is in use once stopped.

use super::dpdk::{check_hops, dpdk_cmd, heap_and_mbufs_flat, port0_events, port_stats};
use super::dpdk::{seed_eal, Pmd, ResetPath};
use super::scenarios::HANG;
use super::scenarios::{fmt_dur, Outcome, Tier};
use super::vm::{GUEST_PROC_INFO, HOST_PROC_INFO};
use crate::vfio::lock;
use std::time::{Duration, Instant};

/// Hugepages the scenario reserves in the guest (2 MiB each, 128 MiB of
/// its 512): secondaries need the primary's memory shared.
const HUGEPAGES: u32 = 64;
/// EAL memory for the primary: about what `--no-huge -m 128` gave, from
/// them; its cores. (`dpdk-proc-info` picks its own core.)
const HUGE_MEM: &str = "--huge-dir /dev/hugepages -m 100 -l 0-1";
const QUEUES: usize = 2;
/// Frames per round.
const N: u64 = 50;

/// The suite's count unless `MANA_GUEST_RESET_CYCLES` names one.
fn cycles() -> Result<u32, String> {
    match std::env::var("MANA_GUEST_RESET_CYCLES") {
        Err(_) => Ok(4),
        Ok(v) => v
            .parse::<u32>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("MANA_GUEST_RESET_CYCLES={v:?}: give a count of 1 or more")),
    }
}

impl Tier {
    pub fn dpdk_reset_loop(&mut self) -> Outcome {
        let cycles = cycles()?;
        if self.cmd(&format!("test -x {GUEST_PROC_INFO}")).is_err() {
            return Err(format!(
                "no {GUEST_PROC_INFO} in the guest: the host's {HOST_PROC_INFO} (Debian package dpdk, which scripts/setup.sh installs) is put there"
            ));
        }
        self.reserve_hugepages(HUGEPAGES)?;
        let r = self.reset_loop(cycles);
        // Other scenarios run on --no-huge: give the memory back.
        let _ = self.cmd("umount /dev/hugepages; echo 0 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages");
        r
    }

    /// hugetlbfs on /dev/hugepages with `n` pages reserved (at least
    /// three quarters of them granted, or the scenario fails saying so).
    fn reserve_hugepages(&mut self, n: u32) -> Result<(), String> {
        let got = self.cmd(&format!(
            "mkdir -p /dev/hugepages; grep -q hugetlbfs /proc/mounts || mount -t hugetlbfs nodev /dev/hugepages; \
             echo {n} > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages; \
             cat /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"
        ))?;
        match got.trim().parse::<u32>() {
            Ok(g) if g >= n * 3 / 4 => Ok(()),
            _ => Err(format!(
                "the guest granted {:?} of {n} hugepages of 2 MiB",
                got.trim()
            )),
        }
    }

    fn reset_loop(&mut self, cycles: u32) -> Outcome {
        let t_all = Instant::now();
        self.testpmd_launch_mem(Pmd::Rust, QUEUES, HUGE_MEM, &seed_eal(), "")?;
        let r0 = self.peer_round(N, 0)?;
        if r0.dev_rx.0 != N || r0.peer_rx.0 != N {
            let out = self.testpmd_quit().unwrap_or_default();
            return Err(format!("before the first reset: {r0:?}\n{out}"));
        }
        self.testpmd_do(&self.stack.dump("socket_mem"), "testpmd> ", HANG)?;
        let mut longest = Duration::ZERO;
        for i in 0..cycles {
            let path = if i % 2 == 0 {
                ResetPath::Unbind
            } else {
                ResetPath::Rescan
            };
            let t = self
                .reset_and_recover(path, QUEUES)
                .map_err(|e| format!("reset {} of {cycles}: {e}", i + 1))?;
            longest = longest.max(t.recovered);
            self.testpmd_do("clear port stats 0", "testpmd> ", HANG)?;
            let r = self.peer_round(N, i as u8 + 1)?;
            // The secondary attaches to the rebuilt port and reads what
            // the primary's queues counted since the clear.
            let info = self.sh(
                &dpdk_cmd(
                    self.stack,
                    "dpdk-proc-info",
                    Pmd::Rust,
                    "",
                    &seed_eal(),
                    "--stats",
                ),
                Duration::from_secs(120),
            )?;
            let block = info
                .split("NIC statistics for port 0")
                .nth(1)
                .ok_or_else(|| {
                    format!("reset {}: dpdk-proc-info printed no port 0:\n{info}", i + 1)
                })?;
            check_hops(&r, port_stats(block)?).map_err(|e| {
                format!(
                    "reset {} of {cycles} ({path:?}), the secondary's view: {e}",
                    i + 1
                )
            })?;
            if r.dev_rx.0 != N {
                return Err(format!(
                    "reset {}: the device received {} of the {N} frames sent",
                    i + 1,
                    r.dev_rx.0
                ));
            }
        }
        self.testpmd_do(&self.stack.dump("socket_mem"), "testpmd> ", HANG)?;
        self.testpmd_do("stop", "testpmd> ", HANG)?;
        self.testpmd_do("port stop 0", "testpmd> ", HANG)?;
        self.testpmd_do(&self.stack.dump("mempool"), "testpmd> ", HANG)?;
        let out = self.testpmd_quit()?;

        let events = port0_events(&out);
        let want: Vec<&str> = (0..cycles)
            .flat_map(|_| ["ERR_RECOVERING", "RECOVERY_SUCCESS"])
            .collect();
        if events != want {
            return Err(format!(
                "port 0's events {events:?}, not ERR_RECOVERING, RECOVERY_SUCCESS {cycles} times:\n{out}"
            ));
        }
        let heap = heap_and_mbufs_flat(&out, &format!("{cycles} resets"))?;
        self.testpmd_left_nothing()?;
        self.kernel_log_clean("after the resets")?;
        let leaked = lock(&self.func.dev).ledger.leaked.len();
        if leaked != 0 {
            return Err(format!(
                "the driver left {leaked} objects the device destroyed: {:?}",
                lock(&self.func.dev).ledger.leaked
            ));
        }
        Ok(format!(
            "{cycles} resets (unbind/bind and remove/rescan in turn), each recovered (longest {}) with ERR_RECOVERING, RECOVERY_SUCCESS, {N} frames equal at every hop and in dpdk-proc-info after each; DPDK heap {} MB in {} allocations before and after; 0 mbufs in use once stopped ({})",
            fmt_dur(longest),
            heap.0,
            heap.1,
            fmt_dur(t_all.elapsed()),
        ))
    }
}

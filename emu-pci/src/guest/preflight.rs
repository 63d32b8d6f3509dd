//! The `preflight` scenario: `mana-preflight` (the workspace's
//! `preflight/` crate) in the guest, reading the real 6.12 kernel's sysfs
//! while `mana` and `mana_ib` drive the function: its verdict and advice
//! for an interface up, a missing module and missing hugepages, `--apply`
//! and `--undo` on the real netdev, and the EAL arguments it prints
//! starting testpmd with our PMD, which forwards the peer's frames.

use super::dpdk::Pmd;
use super::scenarios::{Outcome, Tier, MAC_STR, PCI};
use super::vm::GUEST_PREFLIGHT;
use serde_json::Value;

/// The check of the port's interfaces, as mana-preflight names it.
fn iface_check() -> String {
    format!("interfaces of {MAC_STR}")
}

const NR_HUGEPAGES: &str = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages";

/// One `mana-preflight` run: exit status and output.
struct Run {
    status: i32,
    text: String,
}

impl Run {
    fn json(&self) -> Result<Value, String> {
        serde_json::from_str(&self.text)
            .map_err(|e| format!("mana-preflight --json: {e}:\n{}", self.text))
    }

    /// The output has every line of `want`, whole.
    fn has_lines(&self, want: &[&str]) -> Result<(), String> {
        match want.iter().find(|w| !self.text.lines().any(|l| l == **w)) {
            Some(w) => Err(format!(
                "mana-preflight's output lacks the line {w:?}:\n{}",
                self.text
            )),
            None => Ok(()),
        }
    }
}

/// The names of the checks that failed, in the report's order.
fn failing(report: &Value) -> Vec<String> {
    report["checks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["ok"] == false)
        .filter_map(|c| c["name"].as_str().map(str::to_string))
        .collect()
}

fn check<'a>(report: &'a Value, name: &str) -> Result<&'a Value, String> {
    report["checks"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["name"] == name)
        .ok_or_else(|| format!("no check {name:?} in {report:#}"))
}

impl Tier {
    fn preflight_run(&mut self, args: &str) -> Result<Run, String> {
        let out = self.cmd(&format!("{GUEST_PREFLIGHT} {args} 2>&1; echo \"@@rc $?\""))?;
        let (text, rc) = out
            .trim_end()
            .rsplit_once("@@rc ")
            .ok_or_else(|| format!("no exit status from mana-preflight: {out}"))?;
        Ok(Run {
            status: rc
                .trim()
                .parse()
                .map_err(|_| format!("exit status {rc:?}"))?,
            text: text.to_string(),
        })
    }

    /// `mana-preflight --json`: the report and the exit status that must
    /// go with its verdict.
    fn preflight_report(&mut self) -> Result<Value, String> {
        let r = self.preflight_run("--json")?;
        let v = r.json()?;
        let ready = v["ready"] == true;
        if r.status != i32::from(!ready) {
            return Err(format!(
                "mana-preflight --json exited {} with \"ready\": {ready}",
                r.status
            ));
        }
        Ok(v)
    }

    /// `preflight`: see the module's documentation; each step's
    /// expectations below.
    pub fn preflight(&mut self) -> Outcome {
        if self.cmd(&format!("test -x {GUEST_PREFLIGHT}")).is_err() {
            return Err(format!(
                "mana-preflight is not in the guest ({GUEST_PREFLIGHT}): scripts/guest.sh builds it and names it in MANA_GUEST_PREFLIGHT"
            ));
        }
        self.ensure_mana()?;
        self.load_mana_ib()?;
        // What the guest starts with: no hugepages, no hugetlbfs.
        self.cmd(&format!(
            "echo 0 > {NR_HUGEPAGES}; grep -q hugetlbfs /proc/mounts && umount /dev/hugepages; true"
        ))?;
        let r = self.preflight_steps();
        // The scenarios after this one expect eth0 down and no hugepages.
        let _ = self.cmd(&format!(
            "ip link set eth0 down; echo 0 > {NR_HUGEPAGES}; grep -q hugetlbfs /proc/mounts && umount /dev/hugepages; true"
        ));
        r
    }

    fn preflight_steps(&mut self) -> Outcome {
        let iface = iface_check();

        // (a) eth0 up: not ready, the advice to take it down.
        self.cmd("ip link set eth0 up")?;
        let up = self.preflight_run("")?;
        if up.status != 1 {
            return Err(format!(
                "mana-preflight exited {} with eth0 up, not 1:\n{}",
                up.status, up.text
            ));
        }
        up.has_lines(&[
            &format!("  {PCI} (VF, driver mana, RDMA device mana_0)"),
            &format!("    port 0: eth0 {MAC_STR} up"),
            &format!("  FIX  {iface}: eth0 ({PCI} port 0) is up"),
            "       -> ip link set eth0 down (while the kernel holds the vPort, DPDK cannot create its queues: \"Failed to create qp queue\")",
            "  ok   module mana: loaded",
            "  ok   module mana_ib: loaded",
            "  ok   module ib_uverbs: loaded",
            &format!("  ok   RDMA device of {PCI}: mana_0"),
            // No ldconfig, no dpkg in the guest: found in the linker's
            // directories, the version from the library's name.
            "  ok   rdma-core libmana: rdma-core 44.0, /usr/lib/x86_64-linux-gnu/libmana.so.1",
        ])?;
        if !up.text.lines().any(|l| l.starts_with("NOT READY: ")) {
            return Err(format!("no NOT READY verdict with eth0 up:\n{}", up.text));
        }
        let v = self.preflight_report()?;
        let f = &v["functions"][0];
        let p = &f["ports"][0];
        let seen = [
            &f["bdf"],
            &f["kind"],
            &f["driver"],
            &f["rdma"],
            &p["name"],
            &p["mac"],
            &p["up"],
        ];
        let want = [PCI, "VF", "mana", "mana_0", "eth0", MAC_STR].map(Value::from);
        if seen[..6].iter().zip(&want).any(|(a, b)| *a != b) || *seen[6] != true {
            return Err(format!("the function as mana-preflight reads it: {f:#}"));
        }
        let c = check(&v, &iface)?;
        let fix = c["fix"].as_str().unwrap_or_default().to_string();
        if c["detail"] != format!("eth0 ({PCI} port 0) is up")
            || !fix.starts_with("ip link set eth0 down (")
        {
            return Err(format!("the interface check with eth0 up: {c:#}"));
        }
        let want = [iface.as_str(), "hugepages", "synthetic NIC"];
        if failing(&v) != want {
            return Err(format!(
                "with eth0 up and no hugepages the failing checks are {:?}, not {want:?}:\n{}",
                failing(&v),
                up.text
            ));
        }

        // (b) Its advice followed word for word, one failing check at a
        // time: eth0 down, hugepages (as many as the guest's 512 MiB
        // allow), hugetlbfs; then ready for our PMD directly. Behind
        // netvsc it is not: the guest has no synthetic NIC.
        let mut v = v;
        let mut done = Vec::new();
        for (name, next) in [
            (iface.as_str(), Some("hugepages")),
            ("hugepages", Some("hugetlbfs")),
            ("hugetlbfs", None),
        ] {
            let fix = check(&v, name)?["fix"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let cmd = fix.split(" (").next().unwrap_or_default().to_string();
            self.cmd(&cmd)
                .map_err(|e| format!("the advice for {name:?}, `{cmd}`: {e}"))?;
            done.push(cmd);
            v = self.preflight_report()?;
            let want: Vec<&str> = next.into_iter().chain(["synthetic NIC"]).collect();
            if failing(&v) != want {
                return Err(format!(
                    "after `{}` the failing checks are {:?}, not {want:?}: {v:#}",
                    done.join("; "),
                    failing(&v)
                ));
            }
        }
        let eal = v["eal_direct"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" ");
        if eal != format!("-a {PCI},mac={MAC_STR}")
            || v["ready"] != true
            || v["ready_netvsc"] != false
            || v["synthetic_nics"] != Value::Array(vec![])
        {
            return Err(format!("the ready report: {v:#}"));
        }
        let ready = self.preflight_run("")?;
        if ready.status != 0 {
            return Err(format!(
                "mana-preflight exited {} once ready:\n{}",
                ready.status, ready.text
            ));
        }
        ready.has_lines(&[
            "  FIX (netvsc only) synthetic NIC: none",
            &format!("EAL arguments, our PMD directly:   {eal}"),
            "READY for DPDK directly; behind netvsc once the synthetic NIC is fixed",
        ])?;

        // (c) mana_ib, then ib_uverbs unloaded: each named, with
        // modprobe; the function has no RDMA device. Loaded again: ready.
        let mut missing = Vec::new();
        for m in ["mana_ib", "ib_uverbs"] {
            self.cmd(&format!("rmmod {m}"))?;
            missing.push(format!("module {m}"));
            let r = self.preflight_run("")?;
            r.has_lines(&[&format!("  FIX  module {m}: not loaded")])?;
            let v = self.preflight_report()?;
            let want: Vec<String> = missing
                .iter()
                .cloned()
                .chain([format!("RDMA device of {PCI}"), "synthetic NIC".into()])
                .collect();
            let fix = check(&v, &format!("module {m}"))?["fix"].clone();
            if r.status != 1
                || failing(&v) != want
                || !fix
                    .as_str()
                    .is_some_and(|f| f.starts_with(&format!("modprobe {m} (")))
            {
                return Err(format!(
                    "without {m}: exit {}, failing {:?} (want {want:?}), advice {fix}:\n{}",
                    r.status,
                    failing(&v),
                    r.text
                ));
            }
        }
        self.load_mana_ib()?;
        if self.preflight_report()?["ready"] != true {
            return Err("not ready again with mana_ib and ib_uverbs loaded again".into());
        }

        // (e) --apply for eth0 from eth0 up and no hugepages: eth0 down,
        // hugepages reserved, no synthetic NIC to move; ready. --undo:
        // eth0 up again, the hugepages given back.
        self.cmd(&format!("echo 0 > {NR_HUGEPAGES}; ip link set eth0 up"))?;
        let state = "/tmp/preflight-state.json";
        let a = self.preflight_run(&format!("--apply --iface eth0 --state {state}"))?;
        let applied = self.cmd(&format!(
            "cat /sys/class/net/eth0/flags {NR_HUGEPAGES}; test -e {state} && echo state"
        ))?;
        let lines: Vec<&str> = applied.split_whitespace().collect();
        let reserved = lines.get(1).copied().unwrap_or("?").to_string();
        if a.status != 0
            || lines.len() != 3
            || flags_up(lines[0])
            || reserved == "0"
            || a.text.contains("moved synthetic NIC")
        {
            return Err(format!(
                "--apply: exit {}, eth0 flags, hugepages, state file: {lines:?}:\n{}",
                a.status, a.text
            ));
        }
        a.has_lines(&[
            "set eth0 down",
            &format!("reserved {reserved} hugepages in {NR_HUGEPAGES} (was 0)"),
            &format!("recorded in {state} (mana-preflight --undo restores it)"),
            "READY for DPDK directly; behind netvsc once the synthetic NIC is fixed",
        ])?;
        let u = self.preflight_run(&format!("--undo --state {state}"))?;
        let undone = self.cmd(&format!(
            "cat /sys/class/net/eth0/flags {NR_HUGEPAGES}; test -e {state} && echo state; true"
        ))?;
        let lines: Vec<&str> = undone.split_whitespace().collect();
        if u.status != 0
            || u.text.trim()
                != "restored: 1 interface(s) up, 1 hugepage setting(s), 0 synthetic NIC(s) back to hv_netvsc"
            || lines.len() != 2
            || !flags_up(lines[0])
            || lines[1] != "0"
        {
            return Err(format!(
                "--undo: exit {}, eth0 flags and hugepages {lines:?} (state file left?):\n{}",
                u.status, u.text
            ));
        }

        // (d) The arguments it printed for direct use start testpmd with
        // our PMD, which forwards the peer's frames with equal counts at
        // every hop. The scenario adds what every testpmd in this guest
        // needs (testpmd_cmd: --no-huge -m 128, the cores, the mempool
        // driver and our PMD with -d: no plugin directory holds them).
        let fwd = self.dpdk_forward_on(Pmd::Rust, 1, &eal)?;
        self.kernel_log_clean("after preflight's steps")?;
        Ok(format!(
            "eth0 up: exit 1, \"ip link set eth0 down\"; advice followed ({}): ready, exit 0, `{eal}`; \
             mana_ib / ib_uverbs unloaded: named, exit 1; --apply: eth0 down, {reserved} hugepages, nothing to move; \
             --undo: eth0 up, 0 hugepages; testpmd on `{eal}`: {fwd}",
            done.join("; ")
        ))
    }
}

/// `IFF_UP` in a netdev's sysfs `flags` ("0x1003").
fn flags_up(flags: &str) -> bool {
    u32::from_str_radix(flags.trim_start_matches("0x"), 16).is_ok_and(|f| f & 1 != 0)
}

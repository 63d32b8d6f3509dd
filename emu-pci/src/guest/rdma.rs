//! The RDMA scenarios: the kernel's `mana_ib` (with `ib_core` and
//! `ib_uverbs`) on the function, checked from both sides: the IB device
//! the guest shows in sysfs against the adapter, MAC, GIDs and EQs the
//! device holds.

use super::scenarios::HANG;
use super::scenarios::{Outcome, Tier, MAC, PCI};
use crate::rdma::{
    fmt_gid, Adapter, CAP_MAX_CQ, CAP_MAX_MR, CAP_MAX_PD, CAP_MAX_QP, CAP_QUEUE_BYTES,
    CAP_RECV_SGE, CAP_SEND_SGE, RDMA_DB_PAGE,
};
use crate::vfio::lock;
use gdma::control::{DevId, GDMA_DEVICE_MANA_IB, SGID_TYPE_IPV4, SGID_TYPE_IPV6};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

const IBDEV: &str = "/sys/class/infiniband/mana_0";

/// What the device holds for the RDMA function.
struct RdmaView {
    adapter: Option<Adapter>,
    eqs: Vec<(u32, u32)>,
    registered: bool,
    created: u64,
    db_pages: BTreeSet<u32>,
}

impl Tier {
    fn rdma_view(&self) -> RdmaView {
        let d = lock(&self.func.dev);
        let ib = DevId::new(GDMA_DEVICE_MANA_IB, 0);
        RdmaView {
            adapter: d.rdma.adapter.clone(),
            eqs: d
                .eqs
                .values()
                .filter(|q| q.owner == ib)
                .map(|q| (q.id, q.db_page))
                .collect(),
            registered: d.registered.contains_key(&ib.as_u32()),
            created: d.rdma.adapters_created,
            db_pages: d.rdma.db_pages.clone(),
        }
    }

    /// Loads `mana_ib` (and the RDMA core) and waits for its IB device.
    /// The kernel's `mana` bound to the function (a scenario may run
    /// after one that unloaded it, or alone).
    pub(super) fn ensure_mana(&mut self) -> Result<(), String> {
        if self
            .cmd(&format!("test -e /sys/bus/pci/devices/{PCI}/driver"))
            .is_err()
        {
            self.cmd("insmod /modules/mana.ko")?;
            self.expect_probed()?;
        }
        Ok(())
    }

    pub(super) fn load_mana_ib(&mut self) -> Result<(), String> {
        // Every module the cache lists after `mana`, in its order: the RDMA
        // core's set differs between kernels (7.x splits `ib_uverbs_support`
        // out of `ib_uverbs`).
        self.cmd(
            "for m in $(sed -n 's/\\.ko$//p' /modules/order); do \
               [ $m = mana ] && continue; \
               grep -q \"^$m \" /proc/modules || insmod /modules/$m.ko || exit 1; \
             done",
        )?;
        let t0 = Instant::now();
        while self
            .cmd(&format!("test -e {IBDEV}/ports/1/gids/0"))
            .is_err()
        {
            if t0.elapsed() > HANG {
                return Err(format!("no {IBDEV} {HANG:?} after insmod mana_ib"));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(())
    }

    /// The non-zero GIDs of port 1, as the guest's GID table lists them.
    fn guest_gids(&mut self) -> Result<BTreeSet<(u32, [u8; 16])>, String> {
        let out = self.cmd(&format!("cat {IBDEV}/ports/1/gids/*"))?;
        let mut set = BTreeSet::new();
        for line in out.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let g = parse_gid(line).ok_or_else(|| format!("GID {line:?}"))?;
            if g == [0; 16] {
                continue;
            }
            let v4 = g[..10].iter().all(|b| *b == 0) && g[10..12] == [0xff, 0xff];
            set.insert((if v4 { SGID_TYPE_IPV4 } else { SGID_TYPE_IPV6 }, g));
        }
        Ok(set)
    }

    pub(super) fn kernel_log_clean(&mut self, when: &str) -> Result<(), String> {
        self.kernel_log_clean_but(when, &[]).map(|_| ())
    }

    /// [`Self::kernel_log_clean`], except for the kernel warnings (whole
    /// `cut here` .. `end trace` blocks) and lines that contain one of
    /// `known`; returns the markers of those left out.
    pub(super) fn kernel_log_clean_but(
        &mut self,
        when: &str,
        known: &[&str],
    ) -> Result<Vec<String>, String> {
        let log = self.cmd("dmesg")?;
        let (rest, skipped) = without_known_warnings(&log, known);
        for bad in ["timed out", "WARNING", "Call Trace", "Failed"] {
            if let Some(l) = rest.iter().find(|l| l.contains(bad)) {
                return Err(format!("kernel log {when}: {l}"));
            }
        }
        Ok(skipped)
    }

    /// `insmod mana_ib`: the IB device appears with port 1 on eth0, its
    /// node GUID and default GID from the MAC, and the device holds the
    /// adapter with that MAC, exactly the GIDs the guest's table lists, and
    /// one EQ per completion vector plus the fatal-event EQ on the RDMA
    /// function's doorbell page. `rmmod` takes it all away again; a second
    /// `insmod` brings it back.
    pub fn rdma_probe(&mut self) -> Outcome {
        self.ensure_mana()?;
        let eqs_before = lock(&self.func.dev).eqs.len();
        self.load_mana_ib()?;
        let summary = self.check_rdma_device(eqs_before)?;
        let ip_ok = |t: &Tier| {
            lock(&t.func.dev)
                .ledger
                .succeeded
                .get("MANA_IB_CONFIG_IP_ADDR")
                .copied()
                .unwrap_or(0)
        };
        let gids = self.rdma_view().adapter.map(|a| a.gids.len()).unwrap_or(0);
        let ip_before = ip_ok(self);

        self.cmd("rmmod mana_ib")?;
        let v = self.rdma_view();
        let d = lock(&self.func.dev);
        let mut alive = Vec::new();
        if let Some(a) = v.adapter {
            alive.push(format!("adapter {:#x}", a.handle));
        }
        alive.extend(v.eqs.iter().map(|(e, _)| format!("EQ {e}")));
        if v.registered {
            alive.push("the registration".into());
        }
        if !alive.is_empty() {
            return Err(format!(
                "after rmmod mana_ib the device still holds {alive:?}"
            ));
        }
        if !d.ledger.leaked.is_empty() {
            return Err(format!(
                "the driver left objects the device destroyed: {:?}",
                d.ledger.leaked
            ));
        }
        if d.eqs.len() != eqs_before {
            return Err(format!(
                "{} EQs after rmmod mana_ib, {eqs_before} before insmod",
                d.eqs.len()
            ));
        }
        drop(d);
        let removed = ip_ok(self) - ip_before;
        if removed != gids as u64 {
            return Err(format!(
                "rmmod removed {removed} GIDs through CONFIG_IP_ADDR, the adapter had {gids}"
            ));
        }
        self.device_check("after rmmod mana_ib")?;
        self.kernel_log_clean("after rmmod mana_ib")?;

        self.load_mana_ib()?;
        self.check_rdma_device(eqs_before)?;
        if self.rdma_view().created != 2 {
            return Err("the second insmod did not create a new adapter".into());
        }
        Ok(format!(
            "{summary}; rmmod: {gids} GIDs removed, adapter and EQs destroyed, deregistered; insmod again: mana_0 back"
        ))
    }

    fn check_rdma_device(&mut self, eqs_before: usize) -> Result<String, String> {
        let m = MAC;
        let guid = format!(
            "{:02x}{:02x}:{:02x}ff:fe{:02x}:{:02x}{:02x}",
            m[0] ^ 2,
            m[1],
            m[2],
            m[3],
            m[4],
            m[5]
        );
        let node_guid = self.cmd(&format!("cat {IBDEV}/node_guid"))?;
        if node_guid.trim() != guid {
            return Err(format!(
                "node_guid {:?}, the MAC's EUI-64 is {guid}",
                node_guid.trim()
            ));
        }
        let ll = self.cmd(&format!("cat {IBDEV}/ports/1/link_layer"))?;
        if ll.trim() != "Ethernet" {
            return Err(format!("port 1 link layer {:?}", ll.trim()));
        }
        let gid0 = self.cmd(&format!("cat {IBDEV}/ports/1/gids/0"))?;
        if gid0.trim() != format!("fe80:0000:0000:0000:{guid}") {
            return Err(format!(
                "GID 0 is {:?}, not the link-local address of the MAC",
                gid0.trim()
            ));
        }
        let uverbs = self.cmd("cat /sys/class/infiniband_verbs/uverbs0/ibdev")?;
        if uverbs.trim() != "mana_0" {
            return Err(format!("uverbs0 is for {:?}", uverbs.trim()));
        }
        let state = self.cmd(&format!("cat {IBDEV}/ports/1/state"))?;
        let gids = self.guest_gids()?;

        let v = self.rdma_view();
        let Some(Adapter {
            handle,
            macs,
            gids: dev_gids,
            ..
        }) = v.adapter
        else {
            return Err("the device holds no RDMA adapter".into());
        };
        if macs != BTreeSet::from([MAC]) {
            return Err(format!("the adapter's MACs are {macs:?}, not the vPort's"));
        }
        if dev_gids != gids {
            let f = |s: &BTreeSet<(u32, [u8; 16])>| {
                s.iter().map(|(_, g)| fmt_gid(g)).collect::<Vec<_>>()
            };
            return Err(format!(
                "the device has GIDs {:?}, the guest's table {:?}",
                f(&dev_gids),
                f(&gids)
            ));
        }
        // One EQ for fatal events plus one per completion vector (the
        // Ethernet function's queue count).
        let want = eqs_before;
        if v.eqs.len() != want {
            return Err(format!(
                "mana_ib made {} EQs, expected {want} (fatal events + {} vectors)",
                v.eqs.len(),
                want - 1
            ));
        }
        if let Some((e, p)) = v.eqs.iter().find(|(_, p)| *p != RDMA_DB_PAGE) {
            return Err(format!(
                "EQ {e} on doorbell page {p}, not the RDMA function's"
            ));
        }
        {
            let d = lock(&self.func.dev);
            if d.ledger.unimplemented.values().sum::<u64>() != 0 {
                return Err(format!(
                    "unimplemented requests: {:?}",
                    d.ledger.unimplemented
                ));
            }
        }
        self.device_check("after insmod mana_ib")?;
        self.kernel_log_clean("after insmod mana_ib")?;
        Ok(format!(
            "mana_0 port 1 {} on eth0, node GUID {guid}, adapter {handle:#x}, {} GIDs agree, {} EQs",
            state.trim(),
            gids.len(),
            v.eqs.len()
        ))
    }
}

impl Tier {
    /// Bookworm's `ibv_devinfo -v` (rdma-core 44's libibverbs and libmana)
    /// lists `mana_0` with the limits `mana_ib` derived from the adapter's
    /// capabilities; opening the device took one doorbell page from the
    /// function (`GDMA_ALLOCATE_RESOURCE_RANGE`) and closing it gave it back.
    pub fn rdma_devinfo(&mut self) -> Outcome {
        self.ensure_mana()?;
        self.load_mana_ib()?;
        let count = |t: &Tier, name: &str| {
            lock(&t.func.dev)
                .ledger
                .succeeded
                .get(name)
                .copied()
                .unwrap_or(0)
        };
        let (alloc0, free0) = (
            count(self, "GDMA_ALLOCATE_RESOURCE_RANGE"),
            count(self, "GDMA_DESTROY_RESOURCE_RANGE"),
        );
        let out = self.cmd("ibv_devinfo -v")?;
        let field = |k: &str| {
            out.lines()
                .filter_map(|l| l.trim().split_once(':'))
                .find(|(key, _)| key.trim() == k)
                .map(|(_, v)| v.trim().to_string())
        };
        let max_qp_wr = (CAP_QUEUE_BYTES / 512).min(CAP_QUEUE_BYTES / 256);
        let port_state = self.cmd(&format!("cat {IBDEV}/ports/1/state"))?;
        let state = if port_state.contains("ACTIVE") {
            "PORT_ACTIVE (4)"
        } else {
            "PORT_DOWN (1)"
        };
        let want: Vec<(&str, String)> = vec![
            ("hca_id", "mana_0".into()),
            ("node_guid", "0215:5dff:fe4e:0a01".into()),
            ("phys_port_cnt", "1".into()),
            ("max_qp", CAP_MAX_QP.to_string()),
            ("max_qp_wr", max_qp_wr.to_string()),
            // uverbs reports the smaller of the send and receive SGE limits.
            ("max_sge", CAP_SEND_SGE.min(CAP_RECV_SGE).to_string()),
            ("max_cq", CAP_MAX_CQ.to_string()),
            ("max_cqe", max_qp_wr.to_string()),
            ("max_mr", CAP_MAX_MR.to_string()),
            ("max_pd", CAP_MAX_PD.to_string()),
            ("max_mr_size", "0xffffffffffffffff".into()),
            ("link_layer", "Ethernet".into()),
            ("state", state.into()),
            ("GID[  0]", "fe80::215:5dff:fe4e:a01, RoCE v2".into()),
        ];
        let bad: Vec<String> = want
            .iter()
            .filter(|(k, v)| field(k).as_deref() != Some(v.as_str()))
            .map(|(k, v)| format!("{k}: {:?}, expected {v:?}", field(k)))
            .collect();
        if !bad.is_empty() {
            return Err(format!("ibv_devinfo -v: {}", bad.join("; ")));
        }
        let (alloc, free) = (
            count(self, "GDMA_ALLOCATE_RESOURCE_RANGE") - alloc0,
            count(self, "GDMA_DESTROY_RESOURCE_RANGE") - free0,
        );
        if (alloc, free) != (1, 1) {
            return Err(format!(
                "ibv_devinfo allocated {alloc} and freed {free} doorbell pages, expected 1 and 1"
            ));
        }
        if !self.rdma_view().db_pages.is_empty() {
            return Err("doorbell pages still allocated after ibv_devinfo exited".into());
        }
        self.device_check("after ibv_devinfo")?;
        self.kernel_log_clean("after ibv_devinfo")?;
        Ok(format!(
            "ibv_devinfo (rdma-core {}) lists mana_0: max_qp_wr {max_qp_wr}, max_sge 15, {}, one doorbell page allocated and freed",
            self.stack.rdma_core,
            state
        ))
    }
}

impl Tier {
    /// Through bookworm's libibverbs and libmana and the kernel's mana_ib,
    /// a guest process registers a buffer filled with a known pattern
    /// (`mana-verbs-check`): the device holds a PD and an MR with that
    /// length, and reading the process's virtual addresses through the MR
    /// gives the process's bytes. When the process ends, the MR, the PD
    /// and the context's doorbell page are gone.
    pub fn rdma_mr(&mut self) -> Outcome {
        self.ensure_mana()?;
        self.load_mana_ib()?;
        self.cmd(
            "rm -f /tmp/mr-done; (/usr/local/bin/mana-verbs-check /tmp/mr-done > /tmp/vc 2>&1 &)",
        )?;
        self.wait_guest("grep -q lkey /tmp/vc", "mana-verbs-check's MR line")?;
        let out = self.cmd("cat /tmp/vc")?;
        let line = out
            .lines()
            .find(|l| l.starts_with("mr "))
            .ok_or_else(|| format!("mana-verbs-check: {}", out.trim()))?;
        let val = |k: &str| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(k))
                .and_then(|v| match v.strip_prefix("0x") {
                    Some(h) => u64::from_str_radix(h, 16).ok(),
                    None => v.parse().ok(),
                })
                .ok_or_else(|| format!("no {k} in {line:?}"))
        };
        let (lkey, addr, len, seed) = (val("lkey=")?, val("addr=")?, val("len=")?, val("seed=")?);
        let (pds, space, page_size) = {
            let d = lock(&self.func.dev);
            let mr = d
                .mr_by_key(lkey as u32)
                .ok_or_else(|| format!("the device has no MR with key {lkey:#x}"))?;
            if !d.rdma.pds.contains_key(&mr.pd) {
                return Err(format!("MR {lkey:#x}'s PD does not exist"));
            }
            let ps = d.regions.get(&mr.region).map(|r| r.page_size).unwrap_or(0);
            (d.rdma.pds.len(), mr.space.clone(), ps)
        };
        if (space.iova, space.length) != (addr, len) {
            return Err(format!(
                "the MR maps {:#x}+{:#x}, the process registered {addr:#x}+{len:#x}",
                space.iova, space.length
            ));
        }
        let regions = mana_emu::mem::DmaSpace::translate(&*space, addr, len as usize)
            .ok_or("the MR's pages are not all guest memory")?;
        let mut got = Vec::with_capacity(len as usize);
        for r in regions {
            let mut b = vec![0u8; r.len()];
            r.read(0, &mut b);
            got.extend_from_slice(&b);
        }
        let want: Vec<u8> = (0..len)
            .map(|i| (i.wrapping_mul(131).wrapping_add(seed)) as u8)
            .collect();
        if let Some(i) = (0..len as usize).find(|i| got[*i] != want[*i]) {
            return Err(format!(
                "byte {i} through the MR is {:#x}, the process wrote {:#x}",
                got[i], want[i]
            ));
        }
        // The process was started by an earlier shell: poll for its last line.
        self.cmd("touch /tmp/mr-done")?;
        self.wait_guest("grep -q '^done' /tmp/vc", "mana-verbs-check's end")?;
        let out = self.cmd("cat /tmp/vc")?;
        if !out.lines().any(|l| l == "done") {
            return Err(format!("mana-verbs-check did not finish: {}", out.trim()));
        }
        let d = lock(&self.func.dev);
        if !d.rdma.mrs.is_empty() || d.rdma.user_pds() != 0 || !d.rdma.db_pages.is_empty() {
            return Err(format!(
                "after the process ended the device holds {} MRs, {} PDs, doorbell pages {:?}",
                d.rdma.mrs.len(),
                d.rdma.user_pds(),
                d.rdma.db_pages
            ));
        }
        drop(d);
        self.device_check("after mana-verbs-check")?;
        self.kernel_log_clean("after mana-verbs-check")?;
        Ok(format!(
            "MR {lkey:#x}: {len} bytes at {addr:#x} on {page_size}-byte pages, {pds} PD, every byte read through it is the process's; all destroyed at exit"
        ))
    }
}

/// A GID as sysfs prints it.
fn parse_gid(s: &str) -> Option<[u8; 16]> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 8 {
        return None;
    }
    let mut g = [0u8; 16];
    for (i, p) in parts.iter().enumerate() {
        let v = u16::from_str_radix(p, 16).ok()?;
        g[2 * i..2 * i + 2].copy_from_slice(&v.to_be_bytes());
    }
    Some(g)
}

/// The warnings the RDMA core raises when a service reset tears down IB
/// objects under 7.x: the HWC answers nothing then, so every destroy fails
/// with -ETIMEDOUT: `ib_mad`'s kernel PD on the RNIC ("Destroy of kernel
/// PD shouldn't fail"), the PD of the user context uverbs disassociates
/// (testpmd's: `ib_dealloc_pd_user`, then `uverbs_destroy_ufile_hw`), and
/// ib_core finds them still tracked when it unregisters each device
/// (`rdma_restrack_clean`). And `mana`'s GF statistics query, every 2 s,
/// times out (-110: ETIMEDOUT, in either of its two wordings) when it runs
/// between the event and the suspend cancelling it; with eth0 up, `mana`
/// cannot fence its RQs (`mana_fence_rq` logs whatever `mana_need_log`
/// says). A `*` in a marker stands for any text.
/// The kernel's behaviour on the hardware too.
pub(super) const SERVICE_RESET_KERNEL_WARNINGS: [&str; 7] = [
    "Destroy of kernel PD shouldn't fail",
    "at ib_dealloc_pd_user",
    "at uverbs_destroy_ufile_hw",
    "at rdma_restrack_clean",
    "Gf stats wk handler: gf stats query timed out.",
    "Failed to query GF stats: -110",
    "Failed to fence RQ *: -110",
];

/// Whether `line` holds `pattern`'s pieces between its `*`s, in order.
fn holds(line: &str, pattern: &str) -> bool {
    let mut rest = line;
    for piece in pattern.split('*') {
        match rest.find(piece) {
            Some(i) => rest = &rest[i + piece.len()..],
            None => return false,
        }
    }
    true
}

/// `log`'s lines without the kernel warning blocks and the lines that
/// contain one of `known`, and the marker of each one left out.
fn without_known_warnings<'a>(log: &'a str, known: &[&str]) -> (Vec<&'a str>, Vec<String>) {
    let (mut rest, mut skipped) = (Vec::new(), Vec::new());
    let mut block: Option<Vec<&str>> = None;
    for l in log.lines() {
        if l.contains("------------[ cut here ]------------") {
            if let Some(b) = block.take() {
                rest.extend(b);
            }
            block = Some(vec![l]);
            continue;
        }
        let Some(b) = block.as_mut() else {
            match known.iter().find(|k| holds(l, k)) {
                Some(k) => skipped.push(k.to_string()),
                None => rest.push(l),
            }
            continue;
        };
        b.push(l);
        if l.contains("---[ end trace") {
            let b = block.take().unwrap();
            match known.iter().find(|k| b.iter().any(|l| holds(l, k))) {
                Some(k) => skipped.push(k.to_string()),
                None => rest.extend(b),
            }
        }
    }
    rest.extend(block.unwrap_or_default());
    (rest, skipped)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two warning blocks as 7.3 prints them in a service reset, with a
    /// line between them and after: only what is not in a known block
    /// is left; an unknown block and an unterminated one stay.
    #[test]
    fn known_kernel_warnings_are_left_out_whole() {
        let log = "\
[ 12.0] MANA reset cycle start
[ 12.1] ------------[ cut here ]------------
[ 12.1] Destroy of kernel PD shouldn't fail
[ 12.1] WARNING: include/rdma/ib_verbs.h:3816 at ib_mad_port_close+0x13d/0x170 [ib_core]
[ 12.1] Call Trace:
[ 12.1] ---[ end trace 0000000000000000 ]---
[ 12.2] between
[ 12.2] mana 0000:00:01.0: Gf stats wk handler: gf stats query timed out.
[ 12.2] mana 0000:00:01.0 eth0: Failed to fence RQ 3: -110
[ 12.2] mana 0000:00:01.0 eth0: Failed to fence RQ 3: timed out
[ 12.3] ------------[ cut here ]------------
[ 12.3] WARNING: drivers/infiniband/core/restrack.c:52 at rdma_restrack_clean+0x41/0x90 [ib_core]
[ 12.3] ---[ end trace 0000000000000000 ]---
[ 12.4] ------------[ cut here ]------------
[ 12.4] WARNING: somewhere else
[ 12.4] ---[ end trace 0000000000000000 ]---
[ 12.5] ------------[ cut here ]------------
[ 12.5] Destroy of kernel PD shouldn't fail
";
        let (rest, skipped) = without_known_warnings(log, &SERVICE_RESET_KERNEL_WARNINGS);
        assert_eq!(
            skipped,
            [
                "Destroy of kernel PD shouldn't fail",
                "Gf stats wk handler: gf stats query timed out.",
                "Failed to fence RQ *: -110",
                "at rdma_restrack_clean"
            ]
        );
        assert!(SERVICE_RESET_KERNEL_WARNINGS
            .iter()
            .all(|k| !k.contains("WARNING")));
        assert_eq!(
            rest[..2],
            ["[ 12.0] MANA reset cycle start", "[ 12.2] between"]
        );
        // A fence that timed out waiting for its completion is not the
        // unanswered request: kept.
        assert!(rest[2].ends_with("Failed to fence RQ 3: timed out"));
        assert!(rest[4].contains("WARNING: somewhere else"));
        assert_eq!(rest.len(), 8, "{rest:#?}");
        assert!(
            rest[7].contains("Destroy of kernel PD"),
            "unterminated: kept"
        );
        let (rest, skipped) = without_known_warnings(log, &[]);
        assert!(skipped.is_empty());
        assert_eq!(rest.len(), log.lines().count());
    }

    #[test]
    fn gids_parse_as_sysfs_prints_them() {
        let g = parse_gid("fe80:0000:0000:0000:0215:5dff:fe4e:0a01").unwrap();
        assert_eq!(fmt_gid(&g), "fe80:0000:0000:0000:0215:5dff:fe4e:0a01");
        assert_eq!(g[0], 0xfe);
        assert_eq!(g[15], 0x01);
        assert_eq!(parse_gid("fe80::1"), None);
        assert_eq!(parse_gid("fe80:0:0:0:0:0:0:zz"), None);
    }
}

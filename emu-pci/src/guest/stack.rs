//! The userspace stacks the guest tier runs (issue 21): a kernel, an
//! rdma-core and a DPDK, all from one Debian release's archive
//! (`scripts/guest-setup.sh` caches them). Whatever the scenarios expect
//! differently from one stack to the next is written here, and nowhere
//! else; `emu-pci/README.md`'s fidelity record says why each value is what
//! it is.

use crate::gdma::MAX_WQS;
use crate::rdma::CAP_MAX_QP;

/// Where the guest finds DPDK's C `net/mana`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CDriver {
    /// Not packaged (bookworm): built out of tree from the DPDK source of
    /// the installed version (`tests/upstream/build-c-driver.sh`), named by
    /// `MANA_GUEST_C_PMD` and put in the guest by the harness with the
    /// testpmd queue-state shim, which that driver needs.
    Built,
    /// The distribution's own package, at this path in the guest (outside
    /// the autoloaded plugin directory: testpmd loads it with `-d`).
    Packaged(&'static str),
}

/// One stack of the guest tier.
#[derive(Debug)]
pub struct Stack {
    pub name: &'static str,
    /// Its kernel's directory in the guest cache (`MANA_GUEST_KERNEL`
    /// overrides it).
    pub kernel: &'static str,
    /// Its userspace's directory in the guest cache.
    pub rootfs: &'static str,
    /// The versions, as the scenarios' summaries name them.
    pub rdma_core: &'static str,
    pub dpdk: &'static str,
    /// DPDK's ring mempool plugin in the guest (testpmd's pools need it).
    pub mempool_ring: &'static str,
    pub c_driver: CDriver,
    /// EAL options every testpmd gets: 24.11 logs the PCI bus's "Probe PCI
    /// driver" line at INFO under its own log type, whose default level is
    /// NOTICE (22.11 logged it under EAL, shown by default).
    pub testpmd_eal: &'static str,
    /// How testpmd spells its dump commands: `dump_socket_mem` up to
    /// 24.11, `dump socket_mem` in Debian's 25.11.4 (one `dump` command
    /// with the object as its argument).
    pub testpmd_dump: &'static str,
    /// The queues our PMD reports: the IB device's `max_qp`, which 6.12's
    /// `mana_ib` takes from the adapter's caps (`CAP_MAX_QP`) and 7.x's
    /// Ethernet IB device (`manae_0`) from `GDMA_QUERY_MAX_RESOURCES`
    /// (the device's SQs, half its WQs).
    pub max_queues: u32,
    /// The descriptors per queue our PMD reports on this stack's libmana:
    /// rdma-core 44's refuses CQs deeper than 256 entries (our PMD tries one
    /// at probe and falls back), 56's takes the device's `max_cqe` (2048).
    pub max_descriptors: u32,
    /// The LD_PRELOAD emulator's `[limits] profile` that models what this
    /// stack's kernel and rdma-core do differently (the fast tier's
    /// `tests/config_limits.rs` runs our PMD under each).
    pub emu_profile: &'static str,
    /// The scenarios `scripts/guest.sh --stack NAME` runs by default
    /// (`None`: all of [`super::scenarios::SCENARIOS`]).
    pub scenarios: Option<&'static [&'static str]>,
}

/// What a stack other than bookworm runs: the RDMA and DPDK scenarios
/// (issue 21's item 2 and the userspace's own checks), after the kernel's
/// probe. The kernel's own scenarios (`kernel-tcp` ...) are left to the
/// stack whose kernel they test.
const USERSPACE_SCENARIOS: [&str; 13] = [
    "kernel-probe",
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
];

/// What the stacks with a 7.x kernel (two IB devices per function,
/// `mana_serv_reset`) run: the DPDK scenarios and the device-raised service reset. The
/// `rdma-*` scenarios are written for 6.12's one IB device.
const SEVEN_X_SCENARIOS: [&str; 11] = [
    "kernel-probe",
    "dpdk-probe",
    "dpdk-rust-1q",
    "dpdk-rust-4q",
    "dpdk-mtu",
    "dpdk-c",
    "dpdk-c-4q",
    "dpdk-iface-up",
    "dpdk-reset",
    "dpdk-reset-rescan",
    "dpdk-service-reset",
];

/// The stacks, in the order `--matrix` runs them.
pub const STACKS: [Stack; 4] = [
    Stack {
        name: "bookworm",
        kernel: "kernel",
        rootfs: "rootfs",
        rdma_core: "44",
        dpdk: "22.11",
        mempool_ring: "/usr/lib/x86_64-linux-gnu/dpdk/pmds-23.0/librte_mempool_ring.so.23",
        c_driver: CDriver::Built,
        testpmd_eal: "",
        testpmd_dump: "dump_",
        max_queues: CAP_MAX_QP,
        max_descriptors: 256,
        emu_profile: "linux-6.12+rdma-core-44",
        scenarios: None,
    },
    Stack {
        name: "trixie",
        kernel: "kernel",
        rootfs: "rootfs-trixie",
        rdma_core: "56.1",
        dpdk: "24.11",
        mempool_ring: "/usr/lib/x86_64-linux-gnu/dpdk/pmds-25.0/librte_mempool_ring.so.25",
        c_driver: CDriver::Packaged("/usr/lib/x86_64-linux-gnu/librte_net_mana.so.25"),
        testpmd_eal: "--log-level=bus.pci:info",
        testpmd_dump: "dump_",
        max_queues: CAP_MAX_QP,
        max_descriptors: 2048,
        emu_profile: "linux-6.12+rdma-core-56",
        scenarios: Some(&USERSPACE_SCENARIOS),
    },
    Stack {
        name: "trixie-bpo",
        kernel: "kernel-backports",
        rootfs: "rootfs-trixie",
        rdma_core: "56.1",
        dpdk: "24.11",
        mempool_ring: "/usr/lib/x86_64-linux-gnu/dpdk/pmds-25.0/librte_mempool_ring.so.25",
        c_driver: CDriver::Packaged("/usr/lib/x86_64-linux-gnu/librte_net_mana.so.25"),
        testpmd_eal: "--log-level=bus.pci:info",
        testpmd_dump: "dump_",
        max_queues: MAX_WQS / 2,
        max_descriptors: 2048,
        emu_profile: "linux-7+rdma-core-56",
        scenarios: Some(&SEVEN_X_SCENARIOS),
    },
    Stack {
        name: "sid",
        kernel: "kernel-sid",
        rootfs: "rootfs-sid",
        rdma_core: "65.0",
        dpdk: "25.11",
        mempool_ring: "/usr/lib/x86_64-linux-gnu/dpdk/pmds-26.0/librte_mempool_ring.so.26",
        c_driver: CDriver::Packaged("/usr/lib/x86_64-linux-gnu/librte_net_mana.so.26"),
        testpmd_eal: "--log-level=bus.pci:info",
        testpmd_dump: "dump ",
        max_queues: MAX_WQS / 2,
        max_descriptors: 2048,
        emu_profile: "linux-7+rdma-core-65",
        scenarios: Some(&SEVEN_X_SCENARIOS),
    },
];

impl Stack {
    /// testpmd's command dumping `what` (`socket_mem`, `mempool`).
    pub fn dump(&self, what: &str) -> String {
        format!("{}{what}", self.testpmd_dump)
    }
}

/// The stack `MANA_GUEST_STACK` names (`bookworm` if unset).
pub fn selected() -> Result<&'static Stack, String> {
    let name = std::env::var("MANA_GUEST_STACK").unwrap_or_else(|_| "bookworm".into());
    by_name(&name)
}

pub fn by_name(name: &str) -> Result<&'static Stack, String> {
    STACKS.iter().find(|s| s.name == name).ok_or_else(|| {
        format!(
            "unknown stack {name:?} (known: {})",
            STACKS.iter().map(|s| s.name).collect::<Vec<_>>().join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guest::scenarios::{OPT_IN_SCENARIOS, SCENARIOS};
    use mana_emu::config::{Profile, RdmaCoreLimits};

    /// The fast tier's profile of each stack reports what the guest tier
    /// expects of it: queues and descriptors, and (7.x) two IB devices.
    #[test]
    fn each_stack_has_the_fast_tier_profile_of_its_limits() {
        for s in &STACKS {
            let p = Profile::try_from(s.emu_profile.to_string()).unwrap();
            let l = p.limits();
            assert_eq!(l.max_qp, s.max_queues, "{}", s.name);
            let desc = match p.rdma_core_limits() {
                RdmaCoreLimits::V44 => 256,
                RdmaCoreLimits::Modern => l.max_cqe.min(l.max_qp_wr),
            };
            assert_eq!(desc, s.max_descriptors, "{}", s.name);
            let seven = s.kernel != "kernel";
            assert_eq!(l.ib_devices, if seven { 2 } else { 1 }, "{}", s.name);
        }
    }

    #[test]
    fn stacks_name_known_scenarios() {
        for s in &STACKS {
            for sc in s.scenarios.unwrap_or(&SCENARIOS) {
                assert!(
                    SCENARIOS.contains(sc) || OPT_IN_SCENARIOS.contains(sc),
                    "{}: {sc}",
                    s.name
                );
            }
        }
        assert_eq!(by_name("trixie").unwrap().dpdk, "24.11");
        assert_eq!(by_name("bookworm").unwrap().dump("mempool"), "dump_mempool");
        assert_eq!(
            by_name("sid").unwrap().dump("socket_mem"),
            "dump socket_mem"
        );
        let e = by_name("jessie").unwrap_err();
        assert_eq!(
            e,
            "unknown stack \"jessie\" (known: bookworm, trixie, trixie-bpo, sid)"
        );
    }
}

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
    /// The one `scripts/dpdk.sh` built with the release (its `reference/`,
    /// moved out of the plugin directory), at this path in the guest with
    /// the rest of that build ([`Stack::dpdk_build`]). 23.11 and later set
    /// their queues' states: no shim.
    Release(&'static str),
}

/// Which cached kernel a stack boots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// This directory of the guest cache.
    Dir(&'static str),
    /// The newest of these directories that are cached, by the upstream
    /// version `scripts/guest-setup.sh` writes in each one's `version`
    /// (the first listed on a tie).
    Newest(&'static [&'static str]),
}

impl std::fmt::Display for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Kernel::Dir(d) => f.write_str(d),
            Kernel::Newest(ds) => write!(f, "the newest of {}", ds.join(", ")),
        }
    }
}

impl Kernel {
    /// The directory of the guest cache `cache` this kernel is in, or why
    /// none is.
    pub fn resolve(&self, cache: &std::path::Path) -> Result<&'static str, String> {
        let dirs = match self {
            Kernel::Dir(d) => return Ok(d),
            Kernel::Newest(ds) => ds,
        };
        let mut best: Option<(&'static str, Vec<u64>)> = None;
        for d in dirs.iter() {
            let Ok(v) = std::fs::read_to_string(cache.join(d).join("version")) else {
                continue;
            };
            let v = upstream_version(v.trim());
            if best.as_ref().is_none_or(|(_, b)| v > *b) {
                best = Some((d, v));
            }
        }
        best.map(|(d, _)| d).ok_or_else(|| {
            format!(
                "none of the kernels {} is cached under {}: run scripts/guest-setup.sh (as root)",
                dirs.join(", "),
                cache.display()
            )
        })
    }
}

/// The numbers of a kernel release's upstream version, `[7, 3, 4]` for
/// `7.3.4+deb13-cloud-amd64`: what orders Debian's kernels across suites
/// (the `+debNN` revision names the suite, not the age).
fn upstream_version(release: &str) -> Vec<u64> {
    release
        .split(|c: char| c != '.' && !c.is_ascii_digit())
        .next()
        .unwrap_or("")
        .split('.')
        .map_while(|n| n.parse().ok())
        .collect()
}

/// One stack of the guest tier.
#[derive(Debug)]
pub struct Stack {
    pub name: &'static str,
    /// Its kernel in the guest cache (`MANA_GUEST_KERNEL` names another
    /// directory).
    pub kernel: Kernel,
    /// Its userspace's directory in the guest cache.
    pub rootfs: &'static str,
    /// The versions, as the scenarios' summaries name them.
    pub rdma_core: &'static str,
    pub dpdk: &'static str,
    /// DPDK's ring mempool plugin in the guest (testpmd's pools need it).
    pub mempool_ring: &'static str,
    pub c_driver: CDriver,
    /// `None`: testpmd and DPDK's libraries are the userspace's (its
    /// packages). `Some(dir)`: they are `scripts/dpdk.sh`'s build of
    /// [`Stack::dpdk`] instead, which the harness copies into the guest
    /// under `dir` from the install prefix `MANA_GUEST_DPDK` names
    /// (`scripts/guest.sh` sets it): testpmd from `dir/bin`, run with
    /// `LD_LIBRARY_PATH=dir/lib` (the build's RUNPATH names a host
    /// directory, and the userspace's own DPDK may have the same sonames:
    /// sid's 25.11 is ABI 26.0, 26.07 is 26.2), the C driver in
    /// `dir/reference`. EAL's compiled-in plugin directory does not exist
    /// in the guest: nothing is autoloaded, as on the other stacks.
    pub dpdk_build: Option<&'static str>,
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
pub const STACKS: [Stack; 5] = [
    Stack {
        name: "bookworm",
        kernel: Kernel::Dir("kernel"),
        rootfs: "rootfs",
        rdma_core: "44",
        dpdk: "22.11",
        mempool_ring: "/usr/lib/x86_64-linux-gnu/dpdk/pmds-23.0/librte_mempool_ring.so.23",
        c_driver: CDriver::Built,
        dpdk_build: None,
        testpmd_eal: "",
        testpmd_dump: "dump_",
        max_queues: CAP_MAX_QP,
        max_descriptors: 256,
        emu_profile: "linux-6.12+rdma-core-44",
        scenarios: None,
    },
    Stack {
        name: "trixie",
        kernel: Kernel::Dir("kernel"),
        rootfs: "rootfs-trixie",
        rdma_core: "56.1",
        dpdk: "24.11",
        mempool_ring: "/usr/lib/x86_64-linux-gnu/dpdk/pmds-25.0/librte_mempool_ring.so.25",
        c_driver: CDriver::Packaged("/usr/lib/x86_64-linux-gnu/librte_net_mana.so.25"),
        dpdk_build: None,
        testpmd_eal: "--log-level=bus.pci:info",
        testpmd_dump: "dump_",
        max_queues: CAP_MAX_QP,
        max_descriptors: 2048,
        emu_profile: "linux-6.12+rdma-core-56",
        scenarios: Some(&USERSPACE_SCENARIOS),
    },
    Stack {
        name: "trixie-bpo",
        kernel: Kernel::Dir("kernel-backports"),
        rootfs: "rootfs-trixie",
        rdma_core: "56.1",
        dpdk: "24.11",
        mempool_ring: "/usr/lib/x86_64-linux-gnu/dpdk/pmds-25.0/librte_mempool_ring.so.25",
        c_driver: CDriver::Packaged("/usr/lib/x86_64-linux-gnu/librte_net_mana.so.25"),
        dpdk_build: None,
        testpmd_eal: "--log-level=bus.pci:info",
        testpmd_dump: "dump_",
        max_queues: MAX_WQS / 2,
        max_descriptors: 2048,
        emu_profile: "linux-7+rdma-core-56",
        scenarios: Some(&SEVEN_X_SCENARIOS),
    },
    Stack {
        name: "sid",
        kernel: Kernel::Dir("kernel-sid"),
        rootfs: "rootfs-sid",
        rdma_core: "65.0",
        dpdk: "25.11",
        mempool_ring: "/usr/lib/x86_64-linux-gnu/dpdk/pmds-26.0/librte_mempool_ring.so.26",
        c_driver: CDriver::Packaged("/usr/lib/x86_64-linux-gnu/librte_net_mana.so.26"),
        dpdk_build: None,
        testpmd_eal: "--log-level=bus.pci:info",
        testpmd_dump: "dump ",
        max_queues: MAX_WQS / 2,
        max_descriptors: 2048,
        emu_profile: "linux-7+rdma-core-65",
        scenarios: Some(&SEVEN_X_SCENARIOS),
    },
    // The newest of everything: Debian's newest kernel (trixie-backports'
    // 7.3 against sid's 7.2 today), sid's userspace (rdma-core 65, sid's
    // glibc) and the newest DPDK release, 26.07, which no Debian suite
    // packages yet: scripts/dpdk.sh builds it (on this bookworm machine,
    // against rdma-core 44's headers; its binaries run on sid's newer glibc
    // and libibverbs).
    Stack {
        name: "newest",
        kernel: Kernel::Newest(&["kernel-backports", "kernel-sid"]),
        rootfs: "rootfs-sid",
        rdma_core: "65.0",
        dpdk: "26.07",
        mempool_ring: "/opt/dpdk-26.07/lib/librte_mempool_ring.so.26",
        c_driver: CDriver::Release("/opt/dpdk-26.07/reference/librte_net_mana_c.so"),
        dpdk_build: Some("/opt/dpdk-26.07"),
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
            let seven = s.kernel != Kernel::Dir("kernel");
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
            "unknown stack \"jessie\" (known: bookworm, trixie, trixie-bpo, sid, newest)"
        );
    }

    /// The `newest` stack's paths all lie in its DPDK build's directory.
    #[test]
    fn newest_runs_its_dpdk_build() {
        let s = by_name("newest").unwrap();
        let dir = s.dpdk_build.unwrap();
        assert!(s.mempool_ring.starts_with(&format!("{dir}/lib/")));
        match s.c_driver {
            CDriver::Release(p) => assert!(p.starts_with(&format!("{dir}/reference/"))),
            c => panic!("newest's C driver: {c:?}"),
        }
    }

    #[test]
    fn upstream_versions_order_across_suites() {
        assert_eq!(upstream_version("7.3.4+deb13-cloud-amd64"), [7, 3, 4]);
        assert_eq!(upstream_version("6.12.118+deb13-cloud-amd64"), [6, 12, 118]);
        assert!(
            upstream_version("7.3.4+deb13-cloud-amd64")
                > upstream_version("7.2.13+deb14-cloud-amd64")
        );
        assert!(
            upstream_version("7.10.1-1-cloud-amd64") > upstream_version("7.9.12+deb14-cloud-amd64")
        );
    }

    /// `Kernel::Newest` picks by version, skips what is not cached and
    /// says what it looked for when nothing is.
    #[test]
    fn newest_kernel_is_resolved_from_the_cache() {
        let g = std::env::temp_dir().join(format!("net-mana-kernels-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&g);
        let k = Kernel::Newest(&["kernel-backports", "kernel-sid"]);
        let e = k.resolve(&g).unwrap_err();
        assert!(
            e.starts_with("none of the kernels kernel-backports, kernel-sid is cached under"),
            "{e}"
        );
        std::fs::create_dir_all(g.join("kernel-sid")).unwrap();
        std::fs::write(g.join("kernel-sid/version"), "7.2.13+deb14-cloud-amd64\n").unwrap();
        assert_eq!(k.resolve(&g), Ok("kernel-sid"));
        std::fs::create_dir_all(g.join("kernel-backports")).unwrap();
        std::fs::write(
            g.join("kernel-backports/version"),
            "7.3.4+deb13-cloud-amd64\n",
        )
        .unwrap();
        assert_eq!(k.resolve(&g), Ok("kernel-backports"));
        std::fs::write(g.join("kernel-sid/version"), "7.10.1+deb14-cloud-amd64\n").unwrap();
        assert_eq!(k.resolve(&g), Ok("kernel-sid"));
        assert_eq!(Kernel::Dir("kernel").resolve(&g), Ok("kernel"));
        std::fs::remove_dir_all(&g).unwrap();
    }
}

//! `mana-preflight` against the emulator's sysfs tree, completed with what
//! a VM has beside it (modules, hugepages, a synthetic NIC whose netdev is
//! the MANA netdev's master, a kernel release): an interface up gets its
//! advice, `--apply`'s preparation makes the port ready and `--undo`'s
//! restores the tree, a missing module gets its advice, and the EAL
//! arguments printed start testpmd with our PMD on that port.

mod common;
use common::*;
use mana_preflight::{inspect, prepare, undo, Roots};
use std::fs;
use std::path::Path;

const UUID: &str = "0e5ad57a-2b73-4b6e-9a1c-6f3c2a7d8e01";

/// Port 0 (eth1, `MAC_A`) with its kernel interface up, port 1 (eth2,
/// `MAC_B`) down; eth1 is enslaved to eth0, the netdev of a synthetic NIC
/// on hv_netvsc.
fn vm(name: &str) -> (EmuEnv, Roots) {
    vm_with(name, "")
}

/// [`vm`] with a `[limits]` body (a kernel's profile).
fn vm_with(name: &str, limits: &str) -> (EmuEnv, Roots) {
    let mut a = PortDef::sink(MAC_A);
    a.extra = "ifname = \"eth1\"\nkernel_if_up = true".into();
    let mut b = PortDef::sink(MAC_B);
    b.extra = "ifname = \"eth2\"".into();
    let env = EmuEnv::new(name, config("", limits, &[(PCI, vec![a, b])])).unwrap();
    let sys = env.config.options.sysfs_root.clone();
    let proc = env.dir.join("proc");
    let mk = |p: &Path, s: &str| {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, s).unwrap();
    };
    for m in ["mana", "mana_ib", "ib_uverbs"] {
        fs::create_dir_all(sys.join("module").join(m)).unwrap();
    }
    mk(
        &sys.join("kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"),
        "0\n",
    );
    mk(&proc.join("sys/kernel/osrelease"), "6.6.0-azure\n");
    mk(
        &proc.join("mounts"),
        "hugetlbfs /dev/hugepages hugetlbfs rw,relatime,pagesize=2M 0 0\n",
    );
    let nic = sys.join("bus/vmbus/devices").join(UUID);
    mk(
        &nic.join("class_id"),
        "{f8615163-df3e-46c5-913f-f2d2f965ed0e}\n",
    );
    mk(&nic.join("net/eth0/flags"), "0x1003\n");
    mk(&nic.join("net/eth0/address"), &format!("{MAC_A}\n"));
    let drivers = sys.join("bus/vmbus/drivers");
    for d in ["hv_netvsc", "uio_hv_generic"] {
        fs::create_dir_all(drivers.join(d)).unwrap();
    }
    std::os::unix::fs::symlink(drivers.join("hv_netvsc"), nic.join("driver")).unwrap();
    let eth1 = sys.join("bus/pci/devices").join(PCI).join("net/eth1");
    std::os::unix::fs::symlink(nic.join("net/eth0"), eth1.join("master")).unwrap();
    (env, Roots { sys, proc })
}

fn read(p: &Path) -> String {
    fs::read_to_string(p).unwrap().trim().to_string()
}

fn failing(r: &mana_preflight::Report) -> Vec<(String, String)> {
    r.checks
        .iter()
        .filter(|c| !c.ok)
        .map(|c| (c.name.clone(), c.fix.clone().unwrap_or_default()))
        .collect()
}

#[test]
fn an_interface_up_gets_advice_apply_makes_the_port_ready_and_undo_restores() {
    let (_env, roots) = vm("preflight-up");
    let select = vec!["eth0".to_string()];
    let r = inspect(&roots, &select);
    let f = &r.functions[0];
    assert_eq!((f.bdf.as_str(), f.kind.as_str()), (PCI, "VF"));
    assert_eq!(f.rdma.as_deref(), Some("mana_0"));
    let p = &f.ports[0];
    assert_eq!(
        (p.name.as_str(), p.mac.as_str(), p.up, p.master.as_deref()),
        ("eth1", MAC_A, true, Some("eth0"))
    );
    assert!(!r.ready);
    let fails = failing(&r);
    let names: Vec<&str> = fails.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            format!("interfaces of {MAC_A}").as_str(),
            "hugepages",
            &format!("synthetic NIC {UUID}")
        ],
        "{}",
        r.render()
    );
    assert!(
        fails[0]
            .1
            .starts_with("ip link set eth1 down; ip link set eth0 down"),
        "{}",
        fails[0].1
    );
    assert!(fails[1]
        .1
        .starts_with("echo 1024 > /sys/kernel/mm/hugepages/"));
    assert!(r.render().contains("NOT READY"));
    // Only the selected port is prepared and printed.
    assert_eq!(r.eal_direct, ["-a", &format!("{PCI},mac={MAC_A}")]);

    let changes = prepare(&roots, &select).unwrap();
    assert_eq!(changes.downed, ["eth1", "eth0"]);
    assert_eq!(changes.moved, [UUID]);
    let pci = roots.sys.join("bus/pci/devices").join(PCI);
    assert_eq!(read(&pci.join("net/eth1/flags")), "0x1002");
    assert_eq!(
        read(&pci.join("net/eth2/flags")),
        "0x1002",
        "eth2 untouched"
    );
    let hp = roots
        .sys
        .join("kernel/mm/hugepages/hugepages-2048kB/nr_hugepages");
    assert_eq!(read(&hp), "1024");
    let drv = roots.sys.join("bus/vmbus/drivers");
    assert_eq!(
        read(&drv.join("uio_hv_generic/new_id")),
        mana_preflight::NET_CLASS
    );
    assert_eq!(read(&drv.join("hv_netvsc/unbind")), UUID);
    assert_eq!(read(&drv.join("uio_hv_generic/bind")), UUID);
    // The fake tree has no kernel to move the driver link: the direct use
    // is ready, netvsc's still asks for the move.
    let r = inspect(&roots, &select);
    assert!(r.ready, "{}", r.render());
    assert!(!r.ready_netvsc);
    assert!(r.render().contains("READY for DPDK directly"));

    undo(&roots, &changes).unwrap();
    assert_eq!(read(&pci.join("net/eth1/flags")), "0x1003");
    assert_eq!(read(&hp), "0");
    assert_eq!(read(&drv.join("uio_hv_generic/unbind")), UUID);
    assert_eq!(read(&drv.join("hv_netvsc/bind")), UUID);
    // Without a port named, --apply changes nothing.
    let (ch, why) = prepare(&roots, &[]).unwrap_err();
    assert_eq!(ch, Default::default());
    assert!(why.starts_with("say which port to prepare"), "{why}");
}

/// A VM of 512 MiB: the advice and `--apply` ask a quarter of its memory
/// in hugepages (64), not seed 001's 1024 (2 GiB, more than it has: the
/// kernel takes what it finds and the VM is left without memory). Failed
/// before: 1024 asked.
#[test]
fn a_small_vm_gets_a_quarter_of_its_memory_in_hugepages() {
    let (_env, roots) = vm("preflight-small");
    fs::write(
        roots.proc.join("meminfo"),
        "MemTotal:         524288 kB\nMemFree:          300000 kB\n",
    )
    .unwrap();
    let select = vec!["eth0".to_string()];
    let r = inspect(&roots, &select);
    let fix = failing(&r)
        .into_iter()
        .find(|(n, _)| n == "hugepages")
        .map(|(_, f)| f)
        .unwrap();
    assert!(
        fix.starts_with(
            "echo 64 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages (128 MiB in 2 MiB pages, a quarter of the memory)"
        ),
        "{fix}"
    );
    let changes = prepare(&roots, &select).unwrap();
    let hp = roots
        .sys
        .join("kernel/mm/hugepages/hugepages-2048kB/nr_hugepages");
    assert_eq!(read(&hp), "64");
    assert_eq!(changes.hugepages, [(hp.clone(), 0)]);
    undo(&roots, &changes).unwrap();
    assert_eq!(read(&hp), "0");
}

#[test]
fn a_missing_module_and_an_old_kernel_get_advice() {
    let (_env, roots) = vm("preflight-module");
    fs::remove_dir(roots.sys.join("module/mana_ib")).unwrap();
    fs::write(
        roots.proc.join("sys/kernel/osrelease"),
        "6.1.0-26-cloud-amd64\n",
    )
    .unwrap();
    let r = inspect(&roots, &[MAC_B.to_string()]);
    let fails = failing(&r);
    assert_eq!(fails[0].0, "kernel");
    assert!(fails[0]
        .1
        .starts_with("kernel 6.1.0-26-cloud-amd64 is older than 6.2"));
    assert_eq!(fails[1].0, "module mana_ib");
    assert!(fails[1].1.starts_with("modprobe mana_ib"), "{}", fails[1].1);
    assert!(!r.ready);
}

#[test]
fn the_printed_eal_arguments_start_testpmd_with_our_pmd_on_the_port() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if skip() {
        return;
    }
    let (env, roots) = vm("preflight-eal");
    fs::write(
        roots
            .sys
            .join("kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"),
        "1024\n",
    )
    .unwrap();
    let r = inspect(&roots, &[MAC_B.to_string()]);
    assert!(r.ready, "{}", r.render());
    let [flag, devargs] = &r.eal_direct[..] else {
        panic!("{:?}", r.eal_direct)
    };
    assert_eq!(flag, "-a");
    let mut t = spawn_with(&env, &[devargs], &[], &[]);
    let info = t.cmd("show port summary all").unwrap();
    let out = t.quit().unwrap();
    assert!(
        out.contains(&format!("Port 0: {}", MAC_B.to_uppercase())),
        "{out}"
    );
    assert!(info.contains("Number of available ports: 1"), "{info}");
    assert!(out.contains("net_mana"), "{out}");
}

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// 7.x gives the function two RDMA devices, the Ethernet one DPDK uses
/// (`manae_0`) and the RNIC (`mana_0`), which sort the other way round:
/// the report names the Ethernet one as the function's RDMA device and
/// the RNIC beside it. Under 6.12 there is one, `mana_0`.
#[test]
fn the_rdma_device_named_is_the_ethernet_one_beside_the_rnic() {
    for (i, (limits, rdma, others)) in [
        (
            "profile = \"linux-7+rdma-core-65\"",
            "manae_0",
            vec!["mana_0"],
        ),
        (
            "profile = \"linux-7+rdma-core-56\"\nrnic_listed_first = true",
            "manae_0",
            vec!["mana_0"],
        ),
        ("profile = \"linux-6.12+rdma-core-44\"", "mana_0", vec![]),
    ]
    .into_iter()
    .enumerate()
    {
        let (_env, roots) = vm_with(&format!("preflight-rnic{i}"), limits);
        let r = inspect(&roots, &["eth2".to_string()]);
        let f = &r.functions[0];
        assert_eq!(f.rdma.as_deref(), Some(rdma), "{limits}");
        assert_eq!(f.other_rdma, others, "{limits}");
        let check = r
            .checks
            .iter()
            .find(|c| c.name == format!("RDMA device of {PCI}"))
            .unwrap();
        assert!(check.ok);
        assert_eq!(check.detail, rdma);
        let beside = if others.is_empty() {
            String::new()
        } else {
            format!(", beside {}", others.join(", "))
        };
        assert!(
            r.render().contains(&format!(
                "{PCI} (VF, driver mana, RDMA device {rdma}{beside})"
            )),
            "{}",
            r.render()
        );
    }
}

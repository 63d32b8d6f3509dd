//! The port MTU follows the kernel netdev's sysfs `mtu` file, which is how
//! a PMD sets the MTU of a MANA port on a VM (the Rust PMD's `mtu_set`
//! writes `<ibdev_path>/device/net/<ifname>/mtu`). The device enforces it
//! on TX (`CQE_TX_MTU_DROP`) and RX (drop reason `rx_mtu`).

use mana_emu::config::{BackendConfig, Config, PortConfig};
use mana_emu::harness::{target_profile_dir, testpmd_available, EmuEnv, Testpmd};
use mana_emu::pkt::{self, build};
use mana_emu::testing::*;
use mana_emu::wire::{self, vendor_err as ve};
use mana_emu::Fault;
use std::time::{Duration, Instant};

mod common;
use common::*;

fn cfg(mtu_a: u32, mtu_b: u32) -> Config {
    let mut c = config(vec![
        PortConfig {
            mtu: mtu_a,
            ..port(A, BackendConfig::Sink)
        },
        PortConfig {
            mtu: mtu_b,
            ..port(B, BackendConfig::Sink)
        },
    ]);
    c.options.reset_down_ms = 50;
    c
}

/// A UDP/IPv4 frame of exactly `len` bytes on the wire.
fn frame(len: usize) -> Vec<u8> {
    let f = build::udp4(mac(B), mac(A), [10, 0, 0, 1], [10, 0, 0, 2], 1, 2, len - 42);
    assert_eq!(f.len(), len);
    f
}

/// Writes the MTU the way the Rust PMD's `mtu_set` does.
fn set_mtu(dev: &TestDevice, m: &str, mtu: u32) {
    std::fs::write(dev.mtu_file(m), format!("{mtu}\n")).unwrap();
}

fn port_mtu(dev: &TestDevice, m: &str) -> u32 {
    let c = dev.counters();
    c.ports
        .iter()
        .find(|p| p.mac.eq_ignore_ascii_case(m))
        .unwrap()
        .mtu
}

#[test]
fn mtu_files_are_created_with_the_configured_mtu() {
    let dev = TestDevice::new("mtu-create", cfg(1500, 9000));
    let a = dev.mtu_file(A);
    assert!(a.ends_with("class/infiniband/mana_0/device/net/eth1/mtu"));
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "1500\n");
    assert_eq!(std::fs::read_to_string(dev.mtu_file(B)).unwrap(), "9000\n");
    assert_eq!((port_mtu(&dev, A), port_mtu(&dev, B)), (1500, 9000));
    assert_eq!(dev.counters().device.mtu_changes, 0);
    // Repairing the tree keeps an MTU set since (like a kernel netdev's,
    // it outlives the process that set it); a missing or invalid file is
    // recreated with the configured one.
    std::fs::write(&a, "4000\n").unwrap();
    std::fs::write(dev.mtu_file(B), "junk").unwrap();
    mana_emu::sysfs::create_all(dev.config()).unwrap();
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "4000\n");
    assert_eq!(std::fs::read_to_string(dev.mtu_file(B)).unwrap(), "9000\n");
    std::fs::remove_file(&a).unwrap();
    mana_emu::sysfs::create_all(dev.config()).unwrap();
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "1500\n");
}

#[test]
fn tx_mtu_follows_the_file_from_the_next_doorbell_on() {
    let dev = TestDevice::new("mtu-tx", cfg(1500, 1500));
    let ctx = dev.open();
    let mut tx = ctx.tx_queue(1, 64).unwrap();
    dev.capture(A);
    let jumbo = frame(9014);
    let check = |tx: &mut TxQueue, f: &[u8], want: u32| {
        let off = tx.post(f);
        tx.ring();
        let c = tx.cq.wait(1);
        assert_eq!(
            (c[0].cqe_type, c[0].tx_wqe_offset()),
            (want, off),
            "{} bytes",
            f.len()
        );
        if want == wire::CQE_TX_MTU_DROP {
            assert_eq!(c[0].vendor_err, ve::MTU);
        }
    };
    check(&mut tx, &jumbo, wire::CQE_TX_MTU_DROP);
    // Written, then rung at once: the doorbell sees the new MTU (no wait).
    for _ in 0..20 {
        set_mtu(&dev, A, 9000);
        check(&mut tx, &jumbo, wire::CQE_TX_OKAY);
        check(&mut tx, &frame(9015), wire::CQE_TX_MTU_DROP);
        set_mtu(&dev, A, 1400);
        check(&mut tx, &frame(1414), wire::CQE_TX_OKAY);
        check(&mut tx, &frame(1415), wire::CQE_TX_MTU_DROP);
    }
    let k = dev.counters();
    let pa = k.port(A).unwrap();
    assert_eq!((pa.tx_packets, pa.drops("mtu")), (40, 41));
    assert_eq!(k.device.mtu_changes, 40);
    assert_eq!(port_mtu(&dev, A), 1400);
    assert_eq!(port_mtu(&dev, B), 1500, "the other port keeps its MTU");
    assert_eq!(dev.take_capture(A).len(), 40);
}

#[test]
fn lso_segments_are_held_to_the_current_mtu() {
    let dev = TestDevice::new("mtu-lso", cfg(1500, 1500));
    let ctx = dev.open();
    let mut tx = ctx.tx_queue(1, 64).unwrap();
    dev.capture(A);
    let f = build::tcp4(mac(B), mac(A), [1, 2, 3, 4], [5, 6, 7, 8], 1, 2, 3, 20000);
    let (hdr, hl, pl) = linux_lso_split(&f);
    let o = tx.lso_oob(&hl);
    tx.post_lso(&hdr, &[&pl], &o, false, 8000);
    tx.ring();
    assert_eq!(tx.cq.wait(1)[0].cqe_type, wire::CQE_TX_MTU_DROP);
    set_mtu(&dev, A, 8040);
    tx.post_lso(&hdr, &[&pl], &o, false, 8000);
    tx.ring();
    assert_eq!(tx.cq.wait(1)[0].cqe_type, wire::CQE_TX_OKAY);
    let segs = dev.take_capture(A);
    assert_eq!(
        segs.iter().map(|s| s.len()).collect::<Vec<_>>(),
        [8054, 8054, 4054]
    );
}

#[test]
fn rx_mtu_follows_the_file() {
    let dev = TestDevice::new("mtu-rx", cfg(1500, 1500));
    let ctx = dev.open();
    let mut rx = ctx.rx_queues(1, 1, 64, 0, &[0u8; 40]).expect("rx queues");
    rx.post(0, 32, 9216);
    rx.ring(0);
    let tagged = |len: usize| pkt::vlan_insert(&frame(len - 4), 0, false, 5);
    let receive = |frames: Vec<Vec<u8>>| {
        dev.inject_batch(A, frames);
        dev.settle();
    };
    receive(vec![frame(1514), frame(1515), tagged(1518), tagged(1519)]);
    let got = rx.wait(0, 2);
    assert_eq!(
        got.iter()
            .map(|p| p.cqe.rx_ppi(p.index).pkt_len)
            .collect::<Vec<_>>(),
        [1514, 1514], // the tag is stripped
    );
    set_mtu(&dev, A, 9000);
    receive(vec![frame(9014), frame(9015)]);
    let got = rx.wait(0, 1);
    assert_eq!(got[0].data, frame(9014));
    set_mtu(&dev, A, 576);
    receive(vec![frame(590), frame(591), frame(1514)]);
    assert_eq!(rx.wait(0, 1)[0].data.len(), 590);
    dev.settle();
    assert!(rx.poll(0).is_empty());
    let k = dev.counters();
    let pa = k.port(A).unwrap();
    assert_eq!((pa.rx_packets, pa.drops("rx_mtu")), (4, 5));
}

#[test]
fn invalid_or_half_written_files_keep_the_mtu() {
    let dev = TestDevice::new("mtu-bad", cfg(1500, 1500));
    let ctx = dev.open();
    let mut tx = ctx.tx_queue(1, 64).unwrap();
    let path = dev.mtu_file(A);
    for junk in ["", "abc\n", "67\n", "9001\n", "-1\n", "1500 1600\n"] {
        std::fs::write(&path, junk).unwrap();
        tx.post(&frame(1514));
        tx.ring();
        assert_eq!(tx.cq.wait(1)[0].cqe_type, wire::CQE_TX_OKAY, "{junk:?}");
        assert_eq!(port_mtu(&dev, A), 1500, "{junk:?}");
    }
    assert!(dev.counters().device.mtu_file_invalid >= 5);
    // Surrounding whitespace is fine, as for the kernel.
    std::fs::write(&path, " 1280 ").unwrap();
    assert_eq!(port_mtu(&dev, A), 1280);
    // Replaced by a rename, as an editor or `install` would.
    let tmp = path.with_file_name(".mtu.tmp");
    std::fs::write(&tmp, "2000\n").unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    assert_eq!(port_mtu(&dev, A), 2000);
}

#[test]
fn the_mtu_survives_a_service_reset() {
    let dev = TestDevice::new("mtu-reset", cfg(1500, 1500));
    set_mtu(&dev, A, 4000);
    assert_eq!(port_mtu(&dev, A), 4000);
    dev.fault(Fault::Reset {
        pci: "7870:00:00.0".into(),
        down_ms: Some(30),
        new_name: None,
    })
    .unwrap();
    let t0 = Instant::now();
    while dev.emu.lock().visible().is_empty() || t0.elapsed() < Duration::from_millis(40) {
        assert!(t0.elapsed() < Duration::from_secs(120), "device never back");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(std::fs::read_to_string(dev.mtu_file(A)).unwrap(), "4000\n");
    assert_eq!(port_mtu(&dev, A), 4000);
    // And the watch still works after the tree was repaired.
    set_mtu(&dev, A, 3000);
    assert_eq!(port_mtu(&dev, A), 3000);
}

/// `port config mtu` in testpmd, through the Rust PMD: the device's port
/// MTU changes and its TX MTU drops follow.
#[test]
fn testpmd_port_config_mtu_through_the_rust_pmd() {
    let pmd = target_profile_dir().join("deps/librte_net_mana.so");
    if !testpmd_available() || !pmd.exists() {
        eprintln!(
            "dpdk-testpmd or {} missing (cargo build): skipping",
            pmd.display()
        );
        return;
    }
    let mut c = cfg(1500, 1500);
    c.adapters[0].ports[0].backend = BackendConfig::Pair { peer: B.into() };
    c.adapters[0].ports[1].backend = BackendConfig::Pair { peer: A.into() };
    let env = EmuEnv::new("mtu-testpmd", c).unwrap();
    let mut t = Testpmd::builder(&env)
        .driver(pmd)
        .args(&["--forward-mode=txonly", "--txpkts=2014"])
        .timeout(Duration::from_secs(120))
        .spawn()
        .expect("testpmd starts");
    let mtu_of = |t: &Testpmd| {
        t.device_counters()
            .unwrap()
            .ports
            .iter()
            .find(|p| p.mac.eq_ignore_ascii_case(A))
            .unwrap()
            .mtu
    };
    let drops = |t: &Testpmd| t.device_counters().unwrap().port(A).unwrap().drops("mtu");
    let sent = |t: &Testpmd| t.device_counters().unwrap().port(A).unwrap().tx_packets;
    assert_eq!(mtu_of(&t), 1500);
    let o = t.cmd("port config mtu 0 2000").unwrap();
    assert!(!o.contains("Fail") && !o.contains("rror"), "{o}");
    let file = env
        .config
        .options
        .sysfs_root
        .join("bus/pci/devices/7870:00:00.0/net/eth1/mtu");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "2000\n");
    assert_eq!(mtu_of(&t), 2000);
    // 2014-byte frames fit MTU 2000.
    t.cmd("start").unwrap();
    t.wait_device(Duration::from_secs(10), |c| {
        c.port(A).unwrap().tx_packets > 1000
    })
    .unwrap();
    t.cmd("stop").unwrap();
    assert_eq!(drops(&t), 0);
    // At MTU 1400 the device refuses them.
    t.cmd("port config mtu 0 1400").unwrap();
    assert_eq!(mtu_of(&t), 1400);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "1400\n");
    let before = sent(&t);
    t.cmd("start").unwrap();
    t.wait_device(Duration::from_secs(10), |c| {
        c.port(A).unwrap().drops("mtu") > 1000
    })
    .unwrap();
    t.cmd("stop").unwrap();
    assert_eq!(sent(&t), before, "nothing above the MTU was sent");
    t.quit().unwrap();
}

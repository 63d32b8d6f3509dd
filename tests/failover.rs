//! Our port as a sub-device of DPDK's software failover and bonding PMDs,
//! driven by testpmd: traffic is forwarded between the composite port and
//! a plain MANA port of a second adapter, and the composite port's counters
//! (the sums of our sub-device's) equal what the emulated device moved.

mod common;
use common::*;
use std::time::Duration;

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Adapter 1 (PCI) carries A, the sub-device; adapter 2 (PCI2) carries B.
fn two_adapters() -> Config {
    config(
        "",
        "",
        &[
            (PCI, vec![PortDef::sink(MAC_A).lossless()]),
            (PCI2, vec![PortDef::sink(MAC_B).lossless()]),
        ],
    )
}

/// io forwarding between port `comp` (composite, sub-device A) and port
/// `plain` (B): N frames into A come out of B, M frames into B come out of
/// A; both testpmd ports' counters equal the device's.
fn forward_through(t: &mut Testpmd, comp: u16, plain: u16) {
    const N: usize = 1000;
    const M: usize = 700;
    let into_a = udp_frames(MAC_A, N, 1);
    let into_b = udp_frames(MAC_B, M, 2);
    cmd(t, "start");
    inject_paced(t, MAC_A, &into_a, 100, |c, sent| {
        c.port(MAC_B).unwrap().tx_packets == sent
    });
    inject_paced(t, MAC_B, &into_b, 100, |c, sent| {
        c.port(MAC_A).unwrap().tx_packets == sent
    });
    cmd(t, "stop");
    let dev = settled(t);
    let (a, b) = (dev.port(MAC_A).unwrap(), dev.port(MAC_B).unwrap());
    let sc = t.port_stats(comp).unwrap();
    let sp = t.port_stats(plain).unwrap();
    let (n, m) = (N as u64, M as u64);
    let (bn, bm) = (total_bytes(&into_a), total_bytes(&into_b));
    assert_eq!(
        (a.rx_packets, a.rx_bytes, a.tx_packets, a.tx_bytes),
        (n, bn, m, bm),
        "device A"
    );
    assert_eq!(
        (b.rx_packets, b.rx_bytes, b.tx_packets, b.tx_bytes),
        (m, bm, n, bn),
        "device B"
    );
    assert_eq!(
        (sc.rx_packets, sc.rx_bytes, sc.tx_packets, sc.tx_bytes),
        (n, bn, m, bm),
        "composite port {comp}: {sc:?}"
    );
    assert_eq!(
        (sp.rx_packets, sp.rx_bytes, sp.tx_packets, sp.tx_bytes),
        (m, bm, n, bn),
        "port {plain}: {sp:?}"
    );
    assert_eq!(
        (sc.rx_errors, sc.tx_errors, sp.rx_errors, sp.tx_errors),
        (0, 0, 0, 0)
    );
    assert!(a.drops.is_empty() && b.drops.is_empty(), "{a:?} {b:?}");
}

#[test]
fn failsafe_sub_device_forwards_with_exact_counts() {
    let _g = lock();
    if skip() {
        return;
    }
    let env = EmuEnv::new("rs-failsafe", two_adapters()).unwrap();
    // B is probed from the allow list (port 0); failsafe (port 1) probes A
    // itself as its sub-device (port 2, owned by failsafe, hidden).
    let mut t = spawn_with(
        &env,
        &[PCI2],
        &[&format!("--vdev=net_failsafe0,dev({PCI},mac={MAC_A})")],
        &["--rxd=256", "--txd=256", "--forward-mode=io"],
    );
    let out = t.output();
    assert!(!out.contains("Fail to start port"), "{out}");
    let o = cmd(&mut t, "show port summary all");
    assert_has(&o, "net_failsafe0 net_failsafe   up");
    assert_has(&o, "7870:00:01.0_port1 net_mana       up");
    let o = cmd(&mut t, "show port info 1");
    assert_has(&o, "Driver name: net_failsafe");
    assert_has(&o, "MAC address: 00:0D:3A:00:00:0A");
    forward_through(&mut t, 1, 0);
    t.quit().unwrap();
}

#[test]
fn failsafe_with_four_queues_spreads_and_counts_exactly() {
    let _g = lock();
    if skip() {
        return;
    }
    let env = EmuEnv::new("rs-failsafe4", two_adapters()).unwrap();
    let mut t = spawn_with(
        &env,
        &[PCI2],
        &[&format!("--vdev=net_failsafe0,dev({PCI},mac={MAC_A})")],
        &[
            "--rxq=4",
            "--txq=4",
            "--rxd=256",
            "--txd=256",
            "--forward-mode=io",
        ],
    );
    forward_through(&mut t, 1, 0);
    // A's receive queues got what RSS through failsafe's configuration says.
    let dev = t.device_counters().unwrap();
    let want = rss_spread(&udp_frames(MAC_A, 1000, 1), &default_reta(4), 4, false);
    assert_eq!(live_queue_packets(&dev, "rq", MAC_A), want);
    t.quit().unwrap();
}

#[test]
fn bonding_slave_forwards_with_exact_counts() {
    let _g = lock();
    if skip() {
        return;
    }
    let env = EmuEnv::new("rs-bonding", two_adapters()).unwrap();
    // DPDK 23.11 renamed the bond's slaves members, in its devargs and in
    // testpmd's output.
    let (member, members) = if dpdk_version().unwrap() >= (23, 11) {
        ("member", "Members")
    } else {
        ("slave", "Slaves")
    };
    // A (port 0) is the bond's only slave, given by PCI address; B is port
    // 1; the bond (mode 0, round robin) is port 2.
    let mut t = spawn_with(
        &env,
        &[&format!("{PCI},mac={MAC_A}"), PCI2],
        &[&format!("--vdev=net_bonding0,mode=0,{member}={PCI}")],
        &["--rxd=256", "--txd=256", "--forward-mode=io"],
    );
    let out = t.output();
    assert!(!out.contains("Failed to update port Id"), "{out}");
    assert!(!out.contains("Fail to start port"), "{out}");
    let o = cmd(&mut t, "show bonding config 2");
    assert_has(&o, &format!("{members} (1): [0]"));
    assert_has(&o, &format!("Active {members} (1): [0]"));
    let o = cmd(&mut t, "show port summary all");
    assert_has(&o, "net_bonding0 net_bonding    up");
    // testpmd listed the slave as a forwarding port before the bond took it.
    cmd(&mut t, "set portlist 1,2");
    forward_through(&mut t, 2, 1);
    t.quit().unwrap();
}

/// PCI hot removal of the sub-device's function: our driver reports it
/// (INTR_RMV), failsafe closes and removes the sub-device, the process lives
/// on, the failsafe port restarts without it and the other port keeps
/// forwarding into it; quitting closes everything cleanly.
///
/// Forwarding is stopped around the removal and the ports restarted after
/// it, for two failsafe (DPDK 22.11.11) problems that do not depend on the
/// sub-device's PMD: failsafe switches to its checking burst functions by
/// rewriting `dev->rx_pkt_burst`, which `rte_eth_rx_burst` no longer reads
/// (fast-path ops are copied at `dev_start`), so with forwarding running it
/// calls the released sub-device's NULL burst pointer (SIGSEGV); and
/// `fs_dev_remove` releases the sub-device's port again after closing it,
/// when its data is zeroed, resetting port 0's fast-path ops.
#[test]
fn failsafe_survives_the_hot_removal_of_its_sub_device() {
    let _g = lock();
    if skip() {
        return;
    }
    let env = EmuEnv::new("rs-failsafe-rmv", two_adapters()).unwrap();
    let mut t = spawn_with(
        &env,
        &[PCI2],
        &[&format!("--vdev=net_failsafe0,dev({PCI},mac={MAC_A})")],
        &["--rxd=256", "--txd=256", "--forward-mode=io"],
    );
    forward_through(&mut t, 1, 0);
    t.fault(Fault::HotRemove { pci: PCI.into() }).unwrap();
    let name = format!("{PCI}_port1");
    t.wait_for(
        &drv_line(&name, "the PCI function was removed; close the port"),
        Duration::from_secs(20),
    )
    .unwrap();
    t.wait_for("Port 2: device removal event", Duration::from_secs(10))
        .unwrap();
    // Failsafe closes the sub-device from its hot-plug alarm.
    t.wait_for("Port 2 is closed", Duration::from_secs(10))
        .unwrap();
    if dpdk_version().unwrap() >= (23, 11) {
        // Since 23.11 ethdev clears `dev->data` when it releases a port, and
        // failsafe's removal (fs_dev_remove) releases the sub-device's port
        // a second time after the close that released it and the bus
        // detach: rte_eth_dev_release_port dereferences the NULL data and
        // testpmd dies (SIGSEGV, in failsafe_dev_remove from its hot-plug
        // alarm), whatever the sub-device's PMD. Pinned here: when DPDK
        // fixes it, this fails and the rest of the test applies again.
        let err = t
            .quit()
            .expect_err("testpmd survived failsafe's double release");
        assert!(err.contains("SIGSEGV"), "{err}");
        return;
    }
    // Every port restarts: failsafe's removal releases the closed
    // sub-device a second time, when its ethdev data is already zeroed, which
    // resets the fast-path ops of port 0 (B) too.
    cmd(&mut t, "port stop all");
    let o = cmd(&mut t, "port start all");
    assert!(!o.contains("Fail"), "{o}");
    cmd(&mut t, "start");
    // B still receives and forwards into failsafe, which has nowhere to send.
    let b0 = t.device_counters().unwrap().port(MAC_B).unwrap().rx_packets;
    t.inject(MAC_B, &udp_frames(MAC_B, 100, 9)).unwrap();
    wait_dev(&t, "B received", |c| {
        c.port(MAC_B).unwrap().rx_packets == b0 + 100
    });
    let s0 = wait_stats(&mut t, 0, |s| s.rx_packets == 800);
    assert_eq!(s0.rx_packets, 800, "{s0:?}");
    cmd(&mut t, "stop");
    let dev = t.device_counters().unwrap();
    assert_eq!(
        dev.port(MAC_A).unwrap().tx_packets,
        700,
        "nothing more left on A"
    );
    t.quit().unwrap();
}

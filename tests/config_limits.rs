//! Queue and descriptor limits of our driver on the emulated device: every
//! power-of-two descriptor count from 64 to the device's maximum (256 under
//! rdma-core 44, 2048 with a modern rdma-core) and 1 to 16 queues carry
//! traffic with exact counts and rings of exactly the configured depth;
//! impossible values are refused with a message that says why.

mod common;
use common::*;

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

const NAME: &str = "7870:00:00.0_port1";

/// A (RX side, lossless sink) and B (TX side, sink) on one adapter.
fn two_ports(options: &str, limits: &str) -> Config {
    config(
        options,
        limits,
        &[(
            PCI,
            vec![PortDef::sink(MAC_A).lossless(), PortDef::sink(MAC_B)],
        )],
    )
}

fn port_counters(t: &Testpmd, mac: &str) -> PortCounters {
    t.device_counters().unwrap().port(mac).unwrap().clone()
}

/// One round of io forwarding A -> B with `rxq`/`txq` queues (`rxq <=
/// txq`): exact counts on both sides, per queue, after `clear port stats`.
/// Frames go in `chunk` at a time, each chunk once the previous one is on
/// B's wire, so that no send ring overflows (`chunk` <= the ring size / 2).
fn io_round(t: &mut Testpmd, frames: &[Vec<u8>], rxq: usize, txq: usize, chunk: usize) {
    assert!(rxq <= txq, "testpmd polls min(rxq, txq) streams");
    cmd(t, "clear port stats all");
    let (a0, b0) = (port_counters(t, MAC_A), port_counters(t, MAC_B));
    cmd(t, "start");
    inject_paced(t, MAC_A, frames, chunk, |c, sent| {
        c.port(MAC_B).unwrap().tx_packets == b0.tx_packets + sent
    });
    cmd(t, "stop");
    let dev = settled(t);
    let (a, b) = (dev.port(MAC_A).unwrap(), dev.port(MAC_B).unwrap());
    let s0 = t.port_stats(0).unwrap();
    let s1 = t.port_stats(1).unwrap();
    let (n, bytes) = (frames.len() as u64, total_bytes(frames));
    assert_eq!(
        (s0.rx_packets, a.rx_packets - a0.rx_packets),
        (n, n),
        "{s0:?}"
    );
    assert_eq!((s0.rx_bytes, a.rx_bytes - a0.rx_bytes), (bytes, bytes));
    assert_eq!(
        (s1.tx_packets, b.tx_packets - b0.tx_packets),
        (n, n),
        "{s1:?}"
    );
    assert_eq!((s1.tx_bytes, b.tx_bytes - b0.tx_bytes), (bytes, bytes));
    assert_eq!((s0.rx_errors, s0.rx_nombuf, s1.tx_errors), (0, 0, 0));
    let spread = rss_spread(frames, &default_reta(rxq), rxq, false);
    assert!(spread.iter().all(|&x| x > 0), "flows reach every queue");
    assert_eq!(live_queue_packets(&dev, "rq", MAC_A), spread);
    let mut sq = spread.clone();
    sq.resize(txq, 0);
    assert_eq!(live_queue_packets(&dev, "sq", MAC_B), sq);
}

/// With forwarding stopped, exactly `d` frames fit A's receive ring. With
/// B's send queue paused and forwarding running, exactly `d` packets fit
/// B's send ring (testpmd drops what tx_burst refuses); B then drains them.
/// (`start` flushes whatever waits in the receive queues, so the second
/// batch goes in after it.)
fn ring_depths(t: &mut Testpmd, d: u64) {
    cmd(t, "clear port stats all");
    let (a0, b0) = (port_counters(t, MAC_A), port_counters(t, MAC_B));
    t.fault(Fault::TxPause { mac: MAC_B.into() }).unwrap();
    t.inject(MAC_A, &udp_frames(MAC_A, d as usize + 32, 4))
        .unwrap();
    wait_dev(t, "A's RX ring filled", |c| {
        c.port(MAC_A).unwrap().rx_packets - a0.rx_packets >= d
    });
    let dev = settled(t);
    assert_eq!(
        dev.port(MAC_A).unwrap().rx_packets - a0.rx_packets,
        d,
        "A's receive ring holds {d} buffers"
    );
    cmd(t, "start");
    let k = 2 * d + 64;
    t.inject(MAC_A, &udp_frames(MAC_A, k as usize, 5)).unwrap();
    let total = d + 32 + k;
    let s0 = wait_stats(t, 0, |s| s.rx_packets == total);
    assert_eq!(s0.rx_packets, total, "every frame reached testpmd");
    let s1 = t.port_stats(1).unwrap();
    assert_eq!(s1.tx_packets, d, "B's send ring takes {d} packets");
    assert_eq!(port_counters(t, MAC_B).tx_packets, b0.tx_packets);
    t.fault(Fault::TxResume { mac: MAC_B.into() }).unwrap();
    wait_dev(t, "B drained", |c| {
        c.port(MAC_B).unwrap().tx_packets - b0.tx_packets == d
    });
    cmd(t, "stop");
    let dev = settled(t);
    let s1 = t.port_stats(1).unwrap();
    assert_eq!(s1.tx_packets, d);
    assert_eq!(dev.port(MAC_B).unwrap().tx_packets - b0.tx_packets, d);
    assert_eq!(s1.tx_bytes, dev.port(MAC_B).unwrap().tx_bytes - b0.tx_bytes);
}

fn set_desc(t: &mut Testpmd, rxd: u64, txd: u64) -> String {
    cmd(t, "port stop all");
    let mut o = cmd(t, &format!("port config all rxd {rxd}"));
    o += &cmd(t, &format!("port config all txd {txd}"));
    o + &cmd(t, "port start all")
}

/// Every power of two from 64 to `max` carries traffic with rings of that
/// depth, and the in-use mbufs after start are exactly the posted buffers.
fn descriptor_counts(t: &mut Testpmd, max: u64) {
    let info = cmd(t, "show port info 0");
    assert_has(
        &info,
        &format!("Max possible number of RXDs per queue: {max}"),
    );
    assert_has(&info, "Min possible number of RXDs per queue: 64");
    assert_has(&info, "RXDs number alignment: 64");
    assert_has(
        &info,
        &format!("Max possible number of TXDs per queue: {max}"),
    );
    let mut d = 64;
    while d <= max {
        let o = set_desc(t, d, d);
        assert!(!o.contains("Fail"), "{d} descriptors: {o}");
        assert_has(
            &cmd(t, "show rxq info 0 0"),
            &format!("Number of RXDs: {d}"),
        );
        assert_has(
            &cmd(t, "show txq info 1 0"),
            &format!("Number of TXDs: {d}"),
        );
        // Each port's receive queue posted exactly d buffers.
        assert_eq!(mbufs_in_use(t), 2 * d, "{d} descriptors");
        io_round(t, &udp_frames(MAC_A, 300, 1), 1, 1, d as usize / 2);
        ring_depths(t, d);
        d *= 2;
    }
}

/// A count the ethdev layer lets through (a multiple of 64, in range) but
/// that is no power of two: our driver says why.
fn refused_by_driver(t: &mut Testpmd, d: u64, max: u64) {
    let o = set_desc(t, d, 64);
    assert_has(
        &o,
        &drv_line(
            NAME,
            &format!("{d} descriptors: MANA queues take a power of two from 64 to {max}"),
        ),
    );
    assert_has(&o, "Fail to configure port 0 rx queues");
    let o = set_desc(t, 64, d);
    assert_has(
        &o,
        &drv_line(
            NAME,
            &format!("{d} descriptors: MANA queues take a power of two from 64 to {max}"),
        ),
    );
    assert_has(&o, "Fail to configure port 0 tx queues");
}

/// Counts outside the limits our dev_info reports: testpmd refuses them.
fn refused_by_limits(t: &mut Testpmd, max: u64) {
    cmd(t, "port stop all");
    let o = cmd(t, &format!("port config all rxd {}", max * 2));
    assert_has(
        &o,
        &format!(
            "Fail: input rxd ({}) can't be greater than max_rxds ({max}) of port 0",
            max * 2
        ),
    );
    let o = cmd(t, &format!("port config all txd {}", max * 2));
    assert_has(
        &o,
        &format!(
            "Fail: input txd ({}) can't be greater than max_txds ({max}) of port 0",
            max * 2
        ),
    );
    let o = cmd(t, "port config all rxd 32");
    assert_has(
        &o,
        "Fail: input rxd (32) can't be less than min_rxds (64) of port 0",
    );
    let o = cmd(t, "port config all txd 32");
    assert_has(
        &o,
        "Fail: input txd (32) can't be less than min_txds (64) of port 0",
    );
    cmd(t, "port start all");
}

#[test]
fn descriptors_64_to_256_under_rdma_core_44() {
    let _g = lock();
    if skip() {
        return;
    }
    let env = EmuEnv::new("rs-desc44", two_ports("", "")).unwrap();
    let mut t = spawn(&env, &["--rxd=64", "--txd=64", "--forward-mode=io"]);
    descriptor_counts(&mut t, 256);
    refused_by_limits(&mut t, 256);
    refused_by_driver(&mut t, 192, 256);
    // Not a multiple of 64: ethdev refuses it after our dev_info.
    let o = set_desc(&mut t, 100, 64);
    assert_has(
        &o,
        "Invalid value for nb_rx_desc(=100), should be: <= 256, >= 64, and a product of 64",
    );
    // And the port works again with a good count.
    let o = set_desc(&mut t, 256, 256);
    assert!(!o.contains("Fail"), "{o}");
    io_round(&mut t, &udp_frames(MAC_A, 300, 2), 1, 1, 128);
    t.quit().unwrap();
}

#[test]
fn descriptors_64_to_2048_with_a_modern_rdma_core() {
    let _g = lock();
    if skip() {
        return;
    }
    let env = EmuEnv::new("rs-descmodern", two_ports("rdma_core = \"modern\"", "")).unwrap();
    let mut t = spawn(&env, &["--rxd=64", "--txd=64", "--forward-mode=io"]);
    descriptor_counts(&mut t, 2048);
    refused_by_limits(&mut t, 2048);
    refused_by_driver(&mut t, 1536, 2048);
    refused_by_driver(&mut t, 320, 2048);
    t.quit().unwrap();
}

fn set_queues(t: &mut Testpmd, rxq: usize, txq: usize) -> String {
    cmd(t, "port stop all");
    let mut o = cmd(t, &format!("port config all rxq {rxq}"));
    o += &cmd(t, &format!("port config all txq {txq}"));
    o + &cmd(t, "port start all")
}

#[test]
fn one_to_sixteen_queues_carry_traffic_and_impossible_counts_are_refused() {
    let _g = lock();
    if skip() {
        return;
    }
    // The device reports 16 queue pairs.
    let env = EmuEnv::new("rs-queues", two_ports("", "max_qp = 16")).unwrap();
    let mut t = spawn(
        &env,
        &[
            "--rxd=256",
            "--txd=256",
            "--forward-mode=io",
            "--total-num-mbufs=24576",
        ],
    );
    let info = cmd(&mut t, "show port info 0");
    assert_has(&info, "Max possible RX queues: 16");
    assert_has(&info, "Max possible TX queues: 16");
    let fr = udp_frames(MAC_A, 1200, 3);
    for (rxq, txq) in [(1, 1), (2, 2), (2, 3), (4, 4), (4, 7), (8, 8), (16, 16)] {
        let o = set_queues(&mut t, rxq, txq);
        assert!(!o.contains("Fail"), "{rxq}/{txq}: {o}");
        let dev = t.device_counters().unwrap();
        assert_eq!(live_queue_packets(&dev, "rq", MAC_A).len(), rxq);
        assert_eq!(live_queue_packets(&dev, "sq", MAC_A).len(), txq);
        // Every receive queue of both ports posted a full ring.
        assert_eq!(mbufs_in_use(&mut t), 2 * 256 * rxq as u64, "{rxq}/{txq}");
        io_round(&mut t, &fr, rxq, txq, 128);
    }

    // Receive queue counts MANA cannot spread over.
    for rxq in [3, 5, 6, 12] {
        let o = set_queues(&mut t, rxq, 4);
        assert_has(&o, &drv_line(NAME, &format!("{rxq} receive queues: MANA spreads traffic over a power-of-two number of receive queues, at most 64")));
        assert_has(&o, "Port0 dev_configure = -22");
    }
    // No receive or no transmit queue.
    for (rxq, txq) in [(0, 4), (4, 0)] {
        let o = set_queues(&mut t, rxq, txq);
        assert_has(
            &o,
            &drv_line(
                NAME,
                "configure needs at least one receive and one transmit queue",
            ),
        );
        assert_has(&o, "Port0 dev_configure = -22");
    }
    // More queues than the device has: refused by testpmd from our dev_info.
    cmd(&mut t, "port stop all");
    let o = cmd(&mut t, "port config all rxq 32");
    assert_has(
        &o,
        "Fail: input rxq (32) can't be greater than max_rx_queues (16) of port 0",
    );
    let o = cmd(&mut t, "port config all txq 17");
    assert_has(
        &o,
        "Fail: input txq (17) can't be greater than max_tx_queues (16) of port 0",
    );
    // And the port still works.
    let o = set_queues(&mut t, 4, 4);
    assert!(!o.contains("Fail"), "{o}");
    io_round(&mut t, &fr, 4, 4, 128);
    t.quit().unwrap();
}

/// The 6.12 kernel's `mana_ib` (Debian trixie; the guest tier runs it)
/// leaves `vendor_id`, `vendor_part_id` and `raw_packet_caps` at 0
/// (checked with ibv_query_device_ex against our PCI device model in the
/// guest tier): the driver probes and forwards as DPDK's does,
/// which checks the raw packet capability only when the part id is set.
/// A part id of 2 without the capability is still refused.
#[test]
fn linux_6_12_device_attributes_probe() {
    let _g = lock();
    if skip() {
        return;
    }
    let k612 = "vendor_id = 0\nvendor_part_id = 0\nraw_packet_caps = 0";
    let env = EmuEnv::new("rs-k612", two_ports("", k612)).unwrap();
    let mut t = spawn(&env, &["--rxd=256", "--txd=256", "--forward-mode=io"]);
    let out = t.output();
    assert!(!out.contains("no raw packet capability"), "{out}");
    io_round(&mut t, &udp_frames(MAC_A, 300, 2), 1, 1, 128);
    t.quit().unwrap();

    let env = EmuEnv::new(
        "rs-nocaps",
        two_ports("", "vendor_part_id = 2\nraw_packet_caps = 0"),
    )
    .unwrap();
    let t = spawn(&env, &["--forward-mode=io"]);
    let out = t.output();
    assert_has(
        &out,
        "mana_0 reports no raw packet capability; the kernel's mana_ib is too old for DPDK",
    );
    assert_has(&out, "No probed ethernet devices");
    t.quit().unwrap();
}

/// The kernel's interface left up (seed 001's troubleshooting): the raw QP
/// is refused with EBUSY by later kernels and ENODEV by 6.12's `mana_ib`
/// (the guest tier's `dpdk-iface-up` met the latter); either way the port
/// does not start and our log line says what to do. With 6.12's empty
/// firmware version the port reports our version alone (it began with a
/// space before).
#[test]
fn interface_left_up_is_named_under_either_kernel() {
    let _g = lock();
    if skip() {
        return;
    }
    for errno in [16, 19] {
        let mut a = PortDef::sink(MAC_A);
        a.extra = "kernel_if_up = true".into();
        let cfg = config(
            "",
            &format!("vport_busy_errno = {errno}"),
            &[(PCI, vec![a, PortDef::sink(MAC_B)])],
        );
        let env = EmuEnv::new(&format!("rs-ifup{errno}"), cfg).unwrap();
        let mut t = spawn(&env, &["--disable-device-start"]);
        let o = cmd(&mut t, "port start 0");
        assert_has(&o, "Fail to start port 0");
        let out = t.output();
        assert_has(
            &out,
            &format!("{NAME}: start failed: tx queue 0: the kernel still uses port {MAC_A} (eth1): run 'ip link set eth1 down' before starting DPDK"),
        );
        let o = cmd(&mut t, "show port info 0");
        assert_has(
            &o,
            &format!(
                "Firmware-version: net_mana-rs {}",
                env!("CARGO_PKG_VERSION")
            ),
        );
        t.quit().unwrap();
    }
}

/// A stack the guest tier ran (`emu-pci/README.md`, fidelity record) as
/// the emulator's `[limits] profile` models it, and what our PMD must make
/// of it.
struct Stack {
    profile: &'static str,
    /// rdma-core 44's libmana refuses CQs deeper than 256 entries; 56.1's
    /// and 65's take the device's 2048.
    max_desc: u64,
    /// 6.12's `mana_ib` reports the adapter's 64 QPs; 7.x's Ethernet device
    /// 128 (half the device's WQs); our RSS table takes 64 receive queues.
    max_rxq: u64,
    max_txq: u64,
    /// The IB device our PMD must take: 6.12's only one, or 7.x's Ethernet
    /// one beside the RNIC `mana_0`.
    eth: &'static str,
}

const STACKS: [Stack; 4] = [
    Stack {
        profile: "linux-6.12+rdma-core-44",
        max_desc: 256,
        max_rxq: 64,
        max_txq: 64,
        eth: "mana_0",
    },
    Stack {
        profile: "linux-6.12+rdma-core-56",
        max_desc: 2048,
        max_rxq: 64,
        max_txq: 64,
        eth: "mana_0",
    },
    Stack {
        profile: "linux-7+rdma-core-56",
        max_desc: 2048,
        max_rxq: 64,
        max_txq: 128,
        eth: "manae_0",
    },
    Stack {
        profile: "linux-7+rdma-core-65",
        max_desc: 2048,
        max_rxq: 64,
        max_txq: 128,
        eth: "manae_0",
    },
];

const INFO: &str = "--log-level=pmd.net.mana.*:info";

/// Each stack's limits as our PMD reports them, and traffic at them: the
/// deepest rings with one queue pair, then 4 receive queues and every
/// transmit queue; one more queue or a deeper ring is refused from our
/// dev_info. The probe names the IB device it took.
#[test]
fn each_stack_profile_reports_its_limits_and_forwards_at_them() {
    let _g = lock();
    if skip() {
        return;
    }
    for s in &STACKS {
        let limits = format!("profile = \"{}\"", s.profile);
        let env = EmuEnv::new(
            &format!("rs-stack-{}", s.profile.replace('+', "-")),
            two_ports("", &limits),
        )
        .unwrap();
        let mut t = spawn_with(
            &env,
            &[],
            &[INFO],
            &[
                "--rxd=64",
                "--txd=64",
                "--forward-mode=io",
                "--total-num-mbufs=16384",
            ],
        );
        assert_has(
            &t.output(),
            &format!("net_mana: {PCI}: probed 2 port(s) of RDMA device {}", s.eth),
        );
        let info = cmd(&mut t, "show port info 0");
        for line in [
            format!("Max possible RX queues: {}", s.max_rxq),
            format!("Max possible TX queues: {}", s.max_txq),
            format!("Max possible number of RXDs per queue: {}", s.max_desc),
            format!("Max possible number of TXDs per queue: {}", s.max_desc),
        ] {
            assert_has(&info, &line);
        }
        let d = s.max_desc;
        let o = set_desc(&mut t, d, d);
        assert!(!o.contains("Fail"), "{}: {d} descriptors: {o}", s.profile);
        assert_eq!(mbufs_in_use(&mut t), 2 * d, "{}", s.profile);
        io_round(&mut t, &udp_frames(MAC_A, 300, 1), 1, 1, d as usize / 2);
        refused_by_limits(&mut t, d);

        let o = set_desc(&mut t, 64, 64);
        assert!(!o.contains("Fail"), "{o}");
        let txq = s.max_txq as usize;
        let o = set_queues(&mut t, 4, txq);
        assert!(!o.contains("Fail"), "{}: 4/{txq} queues: {o}", s.profile);
        let dev = t.device_counters().unwrap();
        assert_eq!(live_queue_packets(&dev, "sq", MAC_B).len(), txq);
        io_round(&mut t, &udp_frames(MAC_A, 600, 3), 4, txq, 32);
        cmd(&mut t, "port stop all");
        let o = cmd(&mut t, &format!("port config all rxq {}", s.max_rxq + 1));
        assert_has(
            &o,
            &format!(
                "Fail: input rxq ({}) can't be greater than max_rx_queues ({}) of port 0",
                s.max_rxq + 1,
                s.max_rxq
            ),
        );
        let o = cmd(&mut t, &format!("port config all txq {}", s.max_txq + 1));
        assert_has(
            &o,
            &format!(
                "Fail: input txq ({}) can't be greater than max_tx_queues ({}) of port 0",
                s.max_txq + 1,
                s.max_txq
            ),
        );
        t.quit().unwrap();
    }
}

/// The kernel's interface left up under each stack: the raw QP is refused
/// with that kernel's errno (6.12: ENODEV, 7.x: EBUSY), and our PMD gives
/// seed 001's advice for both; the other port starts.
#[test]
fn each_stack_profile_refuses_a_busy_vport_with_its_errno() {
    let _g = lock();
    if skip() {
        return;
    }
    for s in &STACKS {
        let mut a = PortDef::sink(MAC_A);
        a.extra = "kernel_if_up = true".into();
        let cfg = config(
            "",
            &format!("profile = \"{}\"", s.profile),
            &[(PCI, vec![a, PortDef::sink(MAC_B)])],
        );
        let errno = cfg.limits.vport_busy_errno;
        let want = if s.profile.starts_with("linux-6.12") {
            libc::ENODEV
        } else {
            libc::EBUSY
        };
        assert_eq!(errno, want, "{}", s.profile);
        let env = EmuEnv::new(&format!("rs-busy-{}", s.profile.replace('+', "-")), cfg).unwrap();
        let mut t = spawn(&env, &["--disable-device-start"]);
        let o = cmd(&mut t, "port start 0");
        assert_has(&o, "Fail to start port 0");
        assert_has(
            &t.output(),
            &format!("{NAME}: start failed: tx queue 0: the kernel still uses port {MAC_A} (eth1): run 'ip link set eth1 down' before starting DPDK"),
        );
        // Port B, whose netdev is down, starts.
        let o = cmd(&mut t, "port start 1");
        assert!(!o.contains("Fail"), "{}: {o}", s.profile);
        t.quit().unwrap();
    }
}

/// 7.x gives the function two IB devices: the Ethernet one (`manae_0`,
/// raw packet QPs, DPDK's) and the RNIC (`mana_0`, vendor_part_id 3).
/// Whichever libibverbs lists first, the probe takes `manae_0`, says why
/// it skipped the RNIC, forwards, and after a service reset reopens
/// `manae_0`, not the RNIC. If neither is the Ethernet function, the probe
/// names both devices it looked at.
#[test]
fn the_probe_takes_the_ethernet_device_beside_the_rnic_in_either_order() {
    let _g = lock();
    if skip() {
        return;
    }
    let skipped = format!(
        "net_mana: {PCI}: mana_0 is not the MANA Ethernet function (vendor_part_id 3); skipped"
    );
    for rnic_first in [false, true] {
        let limits =
            format!("profile = \"linux-7+rdma-core-65\"\nrnic_listed_first = {rnic_first}");
        let env = EmuEnv::new(&format!("rs-rnic-{rnic_first}"), two_ports("", &limits)).unwrap();
        let mut t = spawn_with(
            &env,
            &[],
            &[INFO],
            &["--rxd=256", "--txd=256", "--forward-mode=io"],
        );
        let out = t.output();
        assert_has(
            &out,
            &format!("net_mana: {PCI}: probed 2 port(s) of RDMA device manae_0"),
        );
        // Looked at only when listed first: the probe stops at manae_0.
        assert_eq!(out.contains(&skipped), rnic_first, "{out}");
        io_round(&mut t, &udp_frames(MAC_A, 300, 2), 1, 1, 128);

        t.fault(Fault::Reset {
            pci: PCI.into(),
            down_ms: None,
            new_name: None,
        })
        .unwrap();
        for port in ["port1", "port2"] {
            let line = format!("net_mana: {PCI}_{port}: device is back as manae_0");
            let t0 = std::time::Instant::now();
            while !t.output().contains(&line) {
                assert!(t0.elapsed() < DEADLINE, "no {line:?} in:\n{}", t.output());
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
        for port in 0..2 {
            let ev = format!("Port {port}: error recovery successful event");
            let t0 = std::time::Instant::now();
            while !t.output().contains(&ev) {
                assert!(t0.elapsed() < DEADLINE, "no {ev:?} in:\n{}", t.output());
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
        assert!(!t.output().contains("device is back as mana_0"));
        io_round(&mut t, &udp_frames(MAC_A, 300, 4), 1, 1, 128);
        t.quit().unwrap();
    }

    // Both devices claim the RNIC's part id: nothing to probe, and the
    // error names what was looked at, in the list's order.
    let limits = "profile = \"linux-7+rdma-core-65\"\nvendor_part_id = 3";
    let env = EmuEnv::new("rs-rnic-only", two_ports("", limits)).unwrap();
    let t = spawn_with(&env, &[], &[INFO], &["--forward-mode=io"]);
    let out = t.output();
    assert_has(
        &out,
        &format!("net_mana: {PCI}: no RDMA device of this function is the MANA Ethernet function (looked at manae_0 (vendor_part_id 3), mana_0 (vendor_part_id 3)); the kernel's mana_ib must offer one (vendor_part_id 2)"),
    );
    assert_has(&out, "No probed ethernet devices");
    t.quit().unwrap();
}

//! The plain send run a transmit queue uses: the vector one (AVX2) where
//! the CPU has it, the scalar one elsewhere or when `NET_MANA_TX_PATH`
//! forces it; `show txq info` names it, both put every packet and byte on
//! the wire, and a value of the switch the driver does not know is
//! refused with a message that says which values it takes. (The
//! burst-level transmit tests, forwarding, robustness, vlan, tx_offloads
//! and lying_device, run under each path: scripts/test.sh runs them again
//! with `NET_MANA_TX_PATH=scalar`.)

mod common;
use common::*;

/// One testpmd at a time: the machine has two cores.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

const NAME: &str = "7870:00:00.0_port1";

fn spawn_path(env: &EmuEnv, path: &str, args: &[&str]) -> Testpmd {
    spawn_with_var(env, "NET_MANA_TX_PATH", path, args)
}

/// Each value of the switch: the burst mode testpmd shows; then 2000
/// frames of 60 to 259 bytes io-forwarded from A to B arrive on B's wire
/// whole and in order (packets and bytes at both ends, no error, every
/// mbuf back in the pool); then txonly on two queues, where testpmd's
/// count and the device's agree.
#[test]
fn the_switch_chooses_the_transmit_path_and_every_packet_reaches_the_wire() {
    let _g = lock();
    if skip() {
        return;
    }
    const N: usize = 2000;
    let vector = "Burst mode: Vector AVX2, four plain packets per step";
    let scalar = "Burst mode: Scalar, CQE suppression";
    let mut paths = vec![
        ("auto", if cpu_has_avx2() { vector } else { scalar }),
        ("scalar", scalar),
    ];
    if cpu_has_avx2() {
        paths.push(("vector", vector));
    }
    for (path, mode) in paths {
        let scratch =
            EmuEnv::new(&format!("rs-txpath-pcap-{path}"), Config::default_single()).unwrap();
        let wire = scratch.dir.join("b.pcap");
        let env = EmuEnv::new(
            &format!("rs-txpath-{path}"),
            config(
                "",
                "",
                &[(
                    PCI,
                    vec![
                        PortDef::sink(MAC_A).lossless(),
                        PortDef::pcap_tx(MAC_B, &wire),
                    ],
                )],
            ),
        )
        .unwrap();
        let mut t = spawn_path(&env, path, &["--forward-mode=io", "--rxd=256", "--txd=256"]);
        assert_has(&cmd(&mut t, "show txq info 1 0"), mode);
        let posted = mbufs_in_use(&mut t);
        cmd(&mut t, "start");
        let fr = udp_frames(MAC_A, N, 7);
        // Paced, so B's send ring never fills (testpmd drops what it
        // refuses).
        inject_paced(&t, MAC_A, &fr, 100, |c, sent| {
            c.port(MAC_B).unwrap().tx_packets == sent
        });
        cmd(&mut t, "stop");
        let d = settled(&t);
        let d = d.port(MAC_B).unwrap();
        let s = t.port_stats(1).unwrap();
        let bytes = total_bytes(&fr);
        assert_eq!(
            (s.tx_packets, d.tx_packets),
            (N as u64, N as u64),
            "{path}: {s:?}"
        );
        assert_eq!((s.tx_bytes, d.tx_bytes), (bytes, bytes), "{path}");
        assert_eq!(s.tx_errors, 0, "{path}: {s:?}");
        assert!(d.drops.is_empty(), "{path}: device drops {:?}", d.drops);
        assert_eq!(mbufs_in_use(&mut t), posted, "{path}: sent mbufs freed");
        t.quit().unwrap();
        let got = mana_emu::backend::read_pcap(&wire).unwrap();
        assert!(
            got == fr,
            "{path}: B's wire has {} frames, not the {N} sent in order",
            got.len()
        );

        let env = EmuEnv::new(
            &format!("rs-txpath-txonly-{path}"),
            single(vec![PortDef::sink(MAC_A)]),
        )
        .unwrap();
        let mut t = spawn_path(
            &env,
            path,
            &["--rxq=2", "--txq=2", "--txd=256", "--forward-mode=txonly"],
        );
        assert_has(&cmd(&mut t, "show txq info 0 1"), mode);
        cmd(&mut t, "start");
        wait_dev(&t, "txonly traffic", |c| {
            c.port(MAC_A).unwrap().tx_packets > 5000
        });
        cmd(&mut t, "stop");
        let dev = settled(&t);
        let s = t.port_stats(0).unwrap();
        let d = dev.port(MAC_A).unwrap();
        assert_eq!(
            s.tx_packets, d.tx_packets,
            "{path}: testpmd {s:?} device {d:?}"
        );
        assert_eq!(
            (s.tx_bytes, d.tx_bytes),
            (64 * d.tx_packets, 64 * d.tx_packets)
        );
        assert_eq!(s.tx_errors, 0, "{path}: {s:?}");
        let sqs = live_queue_packets(&dev, "sq", MAC_A);
        assert!(
            sqs.len() == 2 && sqs.iter().all(|&p| p > 0),
            "{path}: {sqs:?}"
        );
        t.quit().unwrap();
    }
}

/// A value the driver does not know: the transmit queue is refused, and
/// the log says what the switch takes.
#[test]
fn an_unknown_transmit_path_is_refused_with_the_values_it_takes() {
    let _g = lock();
    if skip() {
        return;
    }
    let env = EmuEnv::new("rs-txpath-bad", single(vec![PortDef::sink(MAC_A)])).unwrap();
    let t = spawn_path(&env, "fast", &["--rxq=1", "--txq=1"]);
    let o = t.output();
    assert_has(
        &o,
        &drv_line(
            NAME,
            "tx queue 0: NET_MANA_TX_PATH=fast: unknown transmit path (use auto, scalar or vector)",
        ),
    );
    assert_has(&o, "Fail to configure port 0 tx queues");
}

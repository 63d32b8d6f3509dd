//! The receive loop a one-buffer queue runs: the vector one (AVX2) where
//! the CPU has it, the scalar one elsewhere or when the device argument
//! `rx_path=` or `NET_MANA_RX_PATH` forces it (the device arguments'
//! test covers `tx_path=` too); `show rxq info` names it, both receive every packet and
//! byte, and a value of the switch the driver does not know is refused
//! with a message that says which values it takes. (The burst-level tests,
//! lying_device, rx_metadata, robustness and forwarding, run under each
//! path: scripts/test.sh runs them again with `NET_MANA_RX_PATH=scalar`.)

mod common;
use common::*;

/// One testpmd at a time: the machine has two cores.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

const NAME: &str = "7870:00:00.0_port1";

fn spawn_path(env: &EmuEnv, path: &str, args: &[&str]) -> Testpmd {
    spawn_with_var(env, "NET_MANA_RX_PATH", path, args)
}

/// Each value of the switch: the burst mode testpmd shows, then 2000
/// frames of 60 to 259 bytes received whole (packets and bytes at both
/// ends, no error, every buffer reposted).
#[test]
fn the_switch_chooses_the_receive_path_and_the_burst_mode_names_it() {
    let _g = lock();
    if skip() {
        return;
    }
    const N: usize = 2000;
    let vector = "Burst mode: Vector AVX2";
    let scalar = "Burst mode: Scalar, single and coalesced CQEs";
    let mut paths = vec![
        ("auto", if cpu_has_avx2() { vector } else { scalar }),
        ("scalar", scalar),
    ];
    if cpu_has_avx2() {
        paths.push(("vector", vector));
    }
    for (path, mode) in paths {
        let env = EmuEnv::new(
            &format!("rs-rxpath-{path}"),
            single(vec![PortDef::sink(MAC_A).lossless()]),
        )
        .unwrap();
        let mut t = spawn_path(
            &env,
            path,
            &["--rxq=1", "--txq=1", "--rxd=256", "--txd=256"],
        );
        assert_has(&cmd(&mut t, "show rxq info 0 0"), mode);
        let posted = mbufs_in_use(&mut t);
        cmd(&mut t, "set fwd rxonly");
        cmd(&mut t, "start");
        let fr = udp_frames(MAC_A, N, 1);
        t.inject(MAC_A, &fr).unwrap();
        wait_dev(&t, "all frames received", |c| {
            c.port(MAC_A).unwrap().rx_packets == N as u64
        });
        let s = wait_stats(&mut t, 0, |s| s.rx_packets >= N as u64);
        cmd(&mut t, "stop");
        let d = settled(&t);
        let d = d.port(MAC_A).unwrap();
        let bytes = total_bytes(&fr);
        assert_eq!(
            (s.rx_packets, d.rx_packets),
            (N as u64, N as u64),
            "{path}: {s:?}"
        );
        assert_eq!((s.rx_bytes, d.rx_bytes), (bytes, bytes), "{path}");
        assert_eq!((s.rx_errors, s.rx_nombuf), (0, 0), "{path}: {s:?}");
        assert_eq!(mbufs_in_use(&mut t), posted, "{path}: buffers reposted");
        t.quit().unwrap();
    }
}

/// A value the driver does not know: the receive queue is refused, and
/// the log says what the switch takes.
#[test]
fn an_unknown_receive_path_is_refused_with_the_values_it_takes() {
    let _g = lock();
    if skip() {
        return;
    }
    let env = EmuEnv::new("rs-rxpath-bad", single(vec![PortDef::sink(MAC_A)])).unwrap();
    let t = spawn_path(&env, "fast", &["--rxq=1", "--txq=1"]);
    let o = t.output();
    assert_has(
        &o,
        &drv_line(
            NAME,
            "rx queue 0: NET_MANA_RX_PATH=fast: unknown receive path (use auto, scalar or vector)",
        ),
    );
    assert_has(&o, "Fail to configure port 0 rx queues");
}

/// The device arguments `rx_path=` and `tx_path=` choose the loops of that
/// device's queues, whatever the environment says (here values it would
/// refuse).
#[test]
fn the_path_device_arguments_win_over_the_environment() {
    let _g = lock();
    if skip() {
        return;
    }
    let mut cases = vec![(
        "scalar",
        "Burst mode: Scalar, single and coalesced CQEs",
        "Burst mode: Scalar, CQE suppression",
    )];
    if cpu_has_avx2() {
        cases.push((
            "vector",
            "Burst mode: Vector AVX2",
            "Burst mode: Vector AVX2, four plain packets per step",
        ));
    }
    for (path, rx_mode, tx_mode) in cases {
        let env = EmuEnv::new(
            &format!("rs-path-arg-{path}"),
            single(vec![PortDef::sink(MAC_A)]),
        )
        .unwrap();
        let mut t = Testpmd::builder(&env)
            .driver(pmd())
            .args(&["--rxq=1", "--txq=1"])
            .env("NET_MANA_RX_PATH", "fast")
            .env("NET_MANA_TX_PATH", "fast")
            .device(&format!("{PCI},rx_path={path},tx_path={path}"))
            .timeout(std::time::Duration::from_secs(120))
            .spawn()
            .expect("testpmd starts");
        assert_has(&cmd(&mut t, "show rxq info 0 0"), rx_mode);
        assert_has(&cmd(&mut t, "show txq info 0 0"), tx_mode);
        assert!(!t.output().contains("unknown"), "{}", t.output());
        t.quit().unwrap();
    }
}

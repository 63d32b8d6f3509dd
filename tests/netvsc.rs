//! Our port as the VF of DPDK's own netvsc PMD (Debian's unmodified
//! `librte_net_netvsc`), both devices emulated in one testpmd process: the
//! synthetic NIC on VMBus (`mana_emu::vmbus`) and the MANA adapter, sharing
//! one MAC and one wire as on Azure.

mod common;
use common::*;
use std::time::Duration;

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The MANA adapter (port A, the VF) and the synthetic NIC with A's MAC.
fn azure_nic(extra: &str) -> Config {
    let mut c = config(
        "",
        "",
        &[(PCI, vec![PortDef::sink(MAC_A).lossless()])],
    );
    let t = format!("{}\n[[netvsc]]\nmac = \"{MAC_A}\"\n{extra}\n", c.to_toml());
    c = Config::parse(&t).unwrap_or_else(|e| panic!("config: {e}\n{t}"));
    c
}

fn spawn_netvsc(env: &EmuEnv, args: &[&str]) -> Testpmd {
    Testpmd::builder(env)
        .driver(pmd())
        .preload(queue_state_shim().expect("testpmd queue-state shim"))
        .env("QSTATE_SHIM_DRIVERS", "net_netvsc")
        .args(args)
        .timeout(Duration::from_secs(180))
        .spawn()
        .expect("testpmd starts")
}

#[test]
fn debug_txonly() {
    let _g = lock();
    if skip() {
        return;
    }
    let env = EmuEnv::new("nv-debug", azure_nic("")).unwrap();
    let mut t = spawn_netvsc(&env, &["--rxd=256", "--txd=256", "--forward-mode=txonly"]);
    cmd(&mut t, "start");
    std::thread::sleep(Duration::from_secs(1));
    let c = t.device_counters().unwrap();
    eprintln!("{:#?}", c.ports);
    eprintln!("{:#?}", c.netvsc);
    cmd(&mut t, "stop");
    let s = t.port_stats(1).unwrap();
    eprintln!("{s:?}");
    t.quit().unwrap();
}

/// The synthetic path alone (no VF associated; the MANA function is not
/// probed): io forwarding, frames in through the receive buffer and out
/// through the send buffer, counted exactly by netvsc, the host and the
/// wire; with several queues, the host's RSS spreads them as the guest's
/// parameters say.
fn synthetic_io(nq: usize) {
    let _g = lock();
    if skip() {
        return;
    }
    const N: usize = 1500;
    let env = EmuEnv::new(&format!("nv-synth{nq}"), azure_nic("vf = false")).unwrap();
    let q = [format!("--rxq={nq}"), format!("--txq={nq}")];
    let mut t = Testpmd::builder(&env)
        .driver(pmd())
        .preload(queue_state_shim().expect("testpmd queue-state shim"))
        .env("QSTATE_SHIM_DRIVERS", "net_netvsc")
        .device("7870:00:1f.0")
        .args(&["--rxd=256", "--txd=256", "--forward-mode=io", &q[0], &q[1]])
        .timeout(Duration::from_secs(180))
        .spawn()
        .expect("testpmd starts");
    let o = cmd(&mut t, "show port summary all");
    assert_has(&o, "Number of available ports: 1");
    let fr = udp_frames(MAC_A, N, 3);
    cmd(&mut t, "start");
    inject_paced(&t, MAC_A, &fr, 250, |c, sent| c.netvsc[0].tx_packets == sent);
    cmd(&mut t, "stop");
    let dev = settled(&t);
    let s = t.port_stats(0).unwrap();
    let n = &dev.netvsc[0];
    let bytes = total_bytes(&fr);
    eprintln!("{s:?}\n{n:#?}");
    t.quit().unwrap();
}

#[test]
fn synthetic_io_1q() {
    synthetic_io(1);
}

#[test]
fn synthetic_io_4q() {
    synthetic_io(4);
}

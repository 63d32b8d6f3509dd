//! Every path an MTU takes to the device: `rxmode.mtu` at configure
//! (testpmd `--max-pkt-len`, DTS's `mtu` suite, LISA's MTU cases),
//! `mtu_set`, a reconfigure after stop, and a recovery that meets a netdev
//! the kernel re-created at its default MTU. Each is checked where it
//! counts: the device's port MTU, and frames on both sides of the limit
//! forwarded or dropped, counted at both ends.

mod common;
use common::*;
use mana_emu::device::Fault;
use mana_emu::pkt;
use std::time::{Duration, Instant};

/// One testpmd at a time: the machine has two cores.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// `n` untagged IPv4/UDP frames of exactly `len` bytes to `dst`.
fn frames(dst: &str, len: usize, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let f = pkt::build::udp4(
                mac(dst),
                [0x02, 0, 0, 0, 0, 1],
                [10, 0, 0, (i % 200) as u8],
                [10, 9, 9, 9],
                1000 + i as u16,
                4789,
                len - 42,
            );
            assert_eq!(f.len(), len);
            f
        })
        .collect()
}

/// Port 0 receives, port 1 sends (io forwarding); both ports are sinks.
fn env(name: &str) -> EmuEnv {
    EmuEnv::new(
        name,
        single(vec![PortDef::sink(MAC_A).lossless(), PortDef::sink(MAC_B)]),
    )
    .unwrap()
}

/// testpmd, io forwarding, with mbufs that hold a 4000-byte frame, and
/// the driver's info lines.
fn testpmd(env: &EmuEnv, extra: &[&str]) -> Testpmd {
    let mut args = vec!["--forward-mode=io", "--mbuf-size=4300"];
    args.extend_from_slice(extra);
    spawn_with(env, &[], &["--log-level=pmd.net.mana.*:info"], &args)
}

/// Both device ports enforce `mtu`, and testpmd reports it.
fn assert_mtu(t: &mut Testpmd, mtu: u32) {
    let mtus = |c: &Counters| -> Vec<u32> { c.ports.iter().map(|p| p.mtu).collect() };
    wait_dev(t, &format!("device MTU {mtu}"), |c| mtus(c) == [mtu, mtu]);
    for port in 0..2 {
        let info = cmd(t, &format!("show port info {port}"));
        assert!(info.contains(&format!("MTU: {mtu}\n")), "{info}");
    }
}

/// Injects `n` frames of the largest length port 0's MTU admits and `n`
/// of one byte more, then checks that exactly the first forward: testpmd
/// and the device agree on packets and bytes, and the device names the
/// others dropped for MTU.
fn assert_limit(t: &mut Testpmd, mtu: usize, n: usize) {
    let before = t.device_counters().unwrap();
    let rx0 = before.port(MAC_A).unwrap().rx_packets;
    let mtu_drops0 = before.port(MAC_A).unwrap().drops("rx_mtu");
    let tx0 = before.port(MAC_B).unwrap().tx_packets;
    let bytes0 = before.port(MAC_B).unwrap().tx_bytes;
    cmd(t, "clear port stats all");
    cmd(t, "start");
    let fit = frames(MAC_A, mtu + 14, n);
    let over = frames(MAC_A, mtu + 15, n);
    t.inject(MAC_A, &fit).unwrap();
    t.inject(MAC_A, &over).unwrap();
    let n = n as u64;
    wait_dev(t, "frames forwarded and dropped", |c| {
        c.port(MAC_B).unwrap().tx_packets == tx0 + n
            && c.port(MAC_A).unwrap().drops("rx_mtu") == mtu_drops0 + n
    });
    cmd(t, "stop");
    let dev = settled(t);
    let (a, b) = (dev.port(MAC_A).unwrap(), dev.port(MAC_B).unwrap());
    assert_eq!(a.rx_packets - rx0, n, "device port 0 {a:?}");
    assert_eq!(a.drops("rx_mtu") - mtu_drops0, n, "{a:?}");
    assert_eq!(b.tx_packets - tx0, n, "{b:?}");
    assert_eq!(b.tx_bytes - bytes0, total_bytes(&fit), "{b:?}");
    let (s0, s1) = (t.port_stats(0).unwrap(), t.port_stats(1).unwrap());
    assert_eq!((s0.rx_packets, s0.rx_bytes), (n, total_bytes(&fit)));
    assert_eq!((s1.tx_packets, s1.tx_bytes), (n, total_bytes(&fit)));
}

/// `--max-pkt-len` is `rxmode.mtu` at configure; ethdev only stores it, so
/// the driver applies it at start. (Before: the device stayed at 1500 and
/// dropped every larger frame.)
#[test]
fn an_mtu_set_at_configure_reaches_the_device() {
    let _g = lock();
    if skip() {
        return;
    }
    let env = env("mtu-configure");
    let mut t = testpmd(&env, &["--max-pkt-len=4000"]);
    assert_mtu(&mut t, 3982);
    assert_limit(&mut t, 3982, 100);
    assert_has(
        &t.output(),
        "MTU 3982 set on the vPort (its netdev had 1500)",
    );
    t.quit().unwrap();
}

/// `mtu_set` on a stopped port, then a reconfigure after stop (testpmd's
/// `port config all max-pkt-len` sets both `mtu_set` and `rxmode.mtu`,
/// and the restart configures again): the device follows each.
#[test]
fn mtu_set_and_a_reconfigure_after_stop_reach_the_device() {
    let _g = lock();
    if skip() {
        return;
    }
    let env = env("mtu-set");
    let mut t = testpmd(&env, &[]);
    assert_mtu(&mut t, 1500);
    cmd(&mut t, "port stop all");
    for port in 0..2 {
        let o = cmd(&mut t, &format!("port config mtu {port} 3000"));
        assert!(!o.contains("Fail") && !o.contains("rror"), "{o}");
    }
    cmd(&mut t, "port start all");
    assert_mtu(&mut t, 3000);
    assert_limit(&mut t, 3000, 50);
    cmd(&mut t, "port stop all");
    cmd(&mut t, "port config all max-pkt-len 2018");
    cmd(&mut t, "port start all");
    assert_mtu(&mut t, 2000);
    assert_limit(&mut t, 2000, 50);
    t.quit().unwrap();
}

/// testpmd's event lines for `port` naming `what`.
fn events(out: &str, port: u16, what: &str) -> usize {
    out.matches(&format!("Port {port}: {what} event")).count()
}

/// Waits until both ports have had `n` `what` events.
fn wait_events(t: &Testpmd, what: &str, n: usize) {
    let t0 = Instant::now();
    while (0..2).any(|p| events(&t.output(), p, what) < n) {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "fewer than {n} '{what}' events per port:\n{}",
            t.output()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A service reset keeps the netdev (and its MTU); an FPGA reconfiguration
/// removes the PCI function and rescans it, and the kernel re-creates the
/// netdev at its default MTU. Either way the port forwards frames of the
/// application's MTU after the recovery. (Before: 1500 after the rescan.)
#[test]
fn the_mtu_survives_a_reset_and_a_rescan() {
    let _g = lock();
    if skip() {
        return;
    }
    let env = env("mtu-reset");
    let mut t = testpmd(&env, &["--max-pkt-len=4000"]);
    assert_mtu(&mut t, 3982);
    cmd(&mut t, "start");
    t.fault(Fault::Reset {
        pci: PCI.into(),
        down_ms: None,
        new_name: None,
    })
    .unwrap();
    wait_events(&t, "error recovery successful", 1);
    cmd(&mut t, "stop");
    assert_mtu(&mut t, 3982);
    assert_limit(&mut t, 3982, 50);

    cmd(&mut t, "start");
    t.fault(Fault::HotRemove { pci: PCI.into() }).unwrap();
    wait_events(&t, "error recovering", 2);
    t.fault(Fault::HotAdd { pci: PCI.into() }).unwrap();
    wait_events(&t, "error recovery successful", 2);
    cmd(&mut t, "stop");
    assert_mtu(&mut t, 3982);
    assert_limit(&mut t, 3982, 50);
    t.quit().unwrap();
}

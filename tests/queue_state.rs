//! Per-queue start and stop (`port 0 rxq|txq N stop|start` in testpmd, and
//! deferred start): a stopped queue moves nothing, the others keep going,
//! and after its restart it works again with nothing lost.

mod common;
use common::*;
use std::time::Duration;

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

const QUEUES: [&str; 4] = ["--rxq=2", "--txq=2", "--rxd=256", "--txd=256"];

fn args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    QUEUES
        .iter()
        .copied()
        .chain(extra.iter().copied())
        .collect()
}

#[test]
fn a_stopped_tx_queue_sends_nothing_until_restarted() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if skip() {
        return;
    }
    let env = EmuEnv::new("qs-tx", single(vec![PortDef::sink(MAC_A)])).unwrap();
    let mut t = spawn(&env, &args(&["--forward-mode=txonly"]));
    cmd(&mut t, "port 0 txq 1 stop");
    // The state survives a device reset: recovery reopens only txq 0.
    t.fault(Fault::Reset {
        pci: PCI.into(),
        down_ms: None,
        new_name: None,
    })
    .unwrap();
    t.wait_for(
        "Port 0: error recovery successful event",
        Duration::from_secs(20),
    )
    .unwrap();
    cmd(&mut t, "start");
    wait_dev(&t, "traffic on txq 0", |c| {
        live_queue_packets(c, "sq", MAC_A)[0] > 2000
    });
    cmd(&mut t, "stop");
    let dev = settled(&t);
    let sqs = live_queue_packets(&dev, "sq", MAC_A);
    assert!(sqs[0] > 0 && sqs[1] == 0, "only txq 0 sends: {sqs:?}");
    let o = cmd(&mut t, "show txq info 0 1");
    assert!(o.contains("stopped"), "{o}");
    cmd(&mut t, "port 0 txq 1 start");
    cmd(&mut t, "start");
    wait_dev(&t, "traffic on txq 1", |c| {
        live_queue_packets(c, "sq", MAC_A)[1] > 2000
    });
    cmd(&mut t, "stop");
    let dev = settled(&t);
    let s = t.port_stats(0).unwrap();
    let d = dev.port(MAC_A).unwrap();
    assert_eq!((s.tx_packets, s.tx_bytes), (d.tx_packets, d.tx_bytes));
    assert_eq!(s.tx_errors, 0);
    t.quit().unwrap();
}

#[test]
fn a_stopped_rx_queue_delivers_what_it_holds_after_restart() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if skip() {
        return;
    }
    const N: usize = 200;
    let env = EmuEnv::new("qs-rx", single(vec![PortDef::sink(MAC_A).lossless()])).unwrap();
    let fr = udp_frames(MAC_A, N, 3);
    let expect = rss_spread(&fr, &default_reta(2), 2, false);
    assert!(expect.iter().all(|&x| x > 0 && x < 256), "{expect:?}");
    let mut t = spawn(&env, &args(&["--forward-mode=rxonly"]));
    cmd(&mut t, "port 0 rxq 1 stop");
    cmd(&mut t, "start");
    t.inject(MAC_A, &fr).unwrap();
    wait_dev(&t, "all frames received by the device", |c| {
        c.port(MAC_A).unwrap().rx_packets == N as u64
    });
    let s = wait_stats(&mut t, 0, |s| s.rx_packets >= expect[0]);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(t.port_stats(0).unwrap().rx_packets, expect[0], "{s:?}");
    cmd(&mut t, "stop");
    cmd(&mut t, "port 0 rxq 1 start");
    cmd(&mut t, "start");
    let s = wait_stats(&mut t, 0, |s| s.rx_packets >= N as u64);
    cmd(&mut t, "stop");
    let d = settled(&t);
    assert_eq!(
        (s.rx_packets, s.rx_bytes, s.rx_errors),
        (N as u64, total_bytes(&fr), 0)
    );
    assert!(d.port(MAC_A).unwrap().drops.is_empty());
    t.quit().unwrap();
}

#[test]
fn a_deferred_queue_stays_stopped_at_port_start() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if skip() {
        return;
    }
    let env = EmuEnv::new("qs-def", single(vec![PortDef::sink(MAC_A)])).unwrap();
    let mut t = spawn(&env, &args(&["--forward-mode=txonly"]));
    cmd(&mut t, "port stop 0");
    let o = cmd(&mut t, "port 0 txq 1 deferred_start on");
    assert!(!o.contains("rror"), "{o}");
    let o = cmd(&mut t, "port 0 txq 1 setup");
    assert!(!o.contains("rror") && !o.contains("ail"), "{o}");
    cmd(&mut t, "port start 0");
    let o = cmd(&mut t, "show txq info 0 1");
    assert!(o.contains("stopped"), "{o}");
    cmd(&mut t, "start");
    wait_dev(&t, "traffic on txq 0", |c| {
        c.port(MAC_A).unwrap().tx_packets > 2000
    });
    cmd(&mut t, "stop");
    let dev = settled(&t);
    assert_eq!(live_queue_packets(&dev, "sq", MAC_A)[1], 0);
    cmd(&mut t, "port 0 txq 1 start");
    let o = cmd(&mut t, "show txq info 0 1");
    assert!(o.contains("started"), "{o}");
    t.quit().unwrap();
}

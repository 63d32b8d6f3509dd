//! testpmd forwarding engines over our driver on the emulated device, with
//! exact counters on both sides: what testpmd (through our stats ops)
//! reports equals what the device moved, in total, per queue and per byte,
//! and the frames on the far wire are exactly the frames sent in.
//!
//! Our driver counts a TX packet when it posts it to the send queue and
//! takes errors back when their completions arrive, so once the device has
//! drained the queues (its counters stop moving) the two sides agree
//! without any quiescing trick.

mod common;
use common::*;

/// One testpmd at a time: the machine has two cores.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn queues_args(nq: usize) -> [String; 4] {
    [
        format!("--rxq={nq}"),
        format!("--txq={nq}"),
        "--rxd=256".into(),
        "--txd=256".into(),
    ]
}

fn spawn_q(env: &EmuEnv, nq: usize, extra: &[&str]) -> Testpmd {
    let q = queues_args(nq);
    let mut args: Vec<&str> = q.iter().map(|s| s.as_str()).collect();
    args.extend_from_slice(extra);
    spawn(env, &args)
}

/// Per-queue xstats of a port: `<dir>_q<i>_<name>` for i in 0..nq.
fn per_queue(
    x: &std::collections::BTreeMap<String, u64>,
    dir: &str,
    name: &str,
    nq: usize,
) -> Vec<u64> {
    (0..nq)
        .map(|i| xstat(x, &format!("{dir}_q{i}_{name}")))
        .collect()
}

fn txonly(nq: usize) {
    let _g = lock();
    if skip() {
        return;
    }
    let env = EmuEnv::new(
        &format!("rs-txonly{nq}"),
        single(vec![PortDef::sink(MAC_A)]),
    )
    .unwrap();
    let mut t = spawn_q(&env, nq, &["--forward-mode=txonly"]);
    cmd(&mut t, "start");
    wait_dev(&t, "txonly traffic", |c| {
        c.port(MAC_A).unwrap().tx_packets > 3000
    });
    let out = cmd(&mut t, "stop");
    let dev = settled(&t);
    let s = t.port_stats(0).unwrap();
    let d = dev.port(MAC_A).unwrap();
    assert_eq!(s.tx_packets, d.tx_packets, "testpmd {s:?} device {d:?}");
    assert_eq!(s.tx_bytes, d.tx_bytes);
    // txonly's default frames are 64 bytes (60 + the 4-byte FCS testpmd
    // does not build: it sends 64-byte frames).
    assert_eq!(d.tx_bytes, 64 * d.tx_packets);
    assert_eq!((s.tx_errors, s.rx_packets, d.rx_packets), (0, 0, 0));
    assert!(d.drops.is_empty(), "device drops {:?}", d.drops);
    // Per queue: our xstats, testpmd's per-stream count of what tx_burst
    // accepted, and the device's send queues all agree.
    let sqs = live_queue_packets(&dev, "sq", MAC_A);
    assert_eq!(sqs.len(), nq);
    assert!(sqs.iter().all(|&p| p > 0), "every TX queue sent: {sqs:?}");
    let x = xstats(&mut t, 0);
    assert_eq!(per_queue(&x, "tx", "packets", nq), sqs);
    assert_eq!(per_queue(&x, "tx", "errors", nq), vec![0; nq]);
    assert_eq!(xstat(&x, "tx_good_packets"), d.tx_packets);
    if nq > 1 {
        let mut streams = parse_stream_stats(&out);
        streams.sort_by_key(|s| s.tx_queue);
        let accepted: Vec<u64> = streams.iter().map(|s| s.tx_packets).collect();
        assert_eq!(accepted, sqs, "{out}");
    }
    t.quit().unwrap();
    let exit = env.exit_counters().unwrap();
    assert_eq!(exit.port(MAC_A).unwrap().tx_packets, d.tx_packets);
}

fn rxonly(nq: usize) {
    let _g = lock();
    if skip() {
        return;
    }
    const N: usize = 2000;
    let env = EmuEnv::new(
        &format!("rs-rxonly{nq}"),
        single(vec![PortDef::sink(MAC_A).lossless()]),
    )
    .unwrap();
    let fr = udp_frames(MAC_A, N, 1);
    let expect = rss_spread(&fr, &default_reta(nq), nq, false);
    assert!(
        expect.iter().all(|&x| x > 0),
        "flows cover every queue: {expect:?}"
    );
    let mut t = spawn_q(&env, nq, &["--forward-mode=rxonly"]);
    cmd(&mut t, "start");
    // After `start`: testpmd drains, uncounted per stream, what came before.
    t.inject(MAC_A, &fr).unwrap();
    wait_dev(&t, "all frames received", |c| {
        c.port(MAC_A).unwrap().rx_packets == N as u64
    });
    let s = wait_stats(&mut t, 0, |s| s.rx_packets >= N as u64);
    let out = cmd(&mut t, "stop");
    let dev = settled(&t);
    let d = dev.port(MAC_A).unwrap();
    let bytes = total_bytes(&fr);
    assert_eq!(
        (s.rx_packets, d.rx_packets),
        (N as u64, N as u64),
        "testpmd {s:?}"
    );
    assert_eq!((s.rx_bytes, d.rx_bytes), (bytes, bytes));
    assert_eq!((s.rx_errors, s.rx_nombuf, s.tx_packets), (0, 0, 0));
    assert!(d.drops.is_empty(), "device drops {:?}", d.drops);
    // The device spread the frames as the default RETA says, and each of
    // our queues counted what its hardware queue received.
    let rqs = live_queue_packets(&dev, "rq", MAC_A);
    assert_eq!(rqs, expect, "RSS spread");
    let x = xstats(&mut t, 0);
    assert_eq!(per_queue(&x, "rx", "packets", nq), expect);
    assert_eq!(per_queue(&x, "rx", "errors", nq), vec![0; nq]);
    if nq > 1 {
        let mut streams = parse_stream_stats(&out);
        streams.sort_by_key(|s| s.rx_queue);
        let got: Vec<u64> = streams.iter().map(|s| s.rx_packets).collect();
        assert_eq!(got, expect, "{out}");
    }
    t.quit().unwrap();
}

/// io / mac forwarding: A receives N injected frames, testpmd forwards them
/// to B, whose wire is a pcap file.
fn forward(mode: &str, nq: usize) {
    let _g = lock();
    if skip() {
        return;
    }
    const N: usize = 2000;
    let scratch = EmuEnv::new(&format!("rs-{mode}{nq}-pcap"), Config::default_single()).unwrap();
    let wire = scratch.dir.join("b.pcap");
    let env = EmuEnv::new(
        &format!("rs-{mode}{nq}"),
        single(vec![
            PortDef::sink(MAC_A).lossless(),
            PortDef::pcap_tx(MAC_B, &wire),
        ]),
    )
    .unwrap();
    let fr = udp_frames(MAC_A, N, 2);
    let spread = rss_spread(&fr, &default_reta(nq), nq, false);
    assert!(spread.iter().all(|&x| x > 0));
    let mut t = spawn_q(&env, nq, &[&format!("--forward-mode={mode}")]);
    cmd(&mut t, "start");
    inject_paced(&t, MAC_A, &fr, 250, |c, sent| {
        c.port(MAC_B).unwrap().tx_packets == sent
    });
    cmd(&mut t, "stop");
    let dev = settled(&t);
    let s0 = t.port_stats(0).unwrap();
    let s1 = t.port_stats(1).unwrap();
    let (a, b) = (dev.port(MAC_A).unwrap(), dev.port(MAC_B).unwrap());
    let bytes = total_bytes(&fr);
    assert_eq!(
        (s0.rx_packets, a.rx_packets),
        (N as u64, N as u64),
        "A {s0:?}"
    );
    assert_eq!((s0.rx_bytes, a.rx_bytes), (bytes, bytes));
    assert_eq!(
        (s1.tx_packets, b.tx_packets),
        (N as u64, N as u64),
        "B {s1:?}"
    );
    assert_eq!((s1.tx_bytes, b.tx_bytes), (bytes, bytes));
    assert_eq!(
        (s0.tx_packets, a.tx_packets, s1.rx_packets, b.rx_packets),
        (0, 0, 0, 0)
    );
    assert_eq!((s0.rx_errors, s0.rx_nombuf, s1.tx_errors), (0, 0, 0));
    assert!(a.drops.is_empty() && b.drops.is_empty(), "{a:?} {b:?}");
    // Stream i is A's RX queue i -> B's TX queue i.
    assert_eq!(live_queue_packets(&dev, "rq", MAC_A), spread);
    assert_eq!(live_queue_packets(&dev, "sq", MAC_B), spread);
    let xa = xstats(&mut t, 0);
    let xb = xstats(&mut t, 1);
    assert_eq!(per_queue(&xa, "rx", "packets", nq), spread);
    assert_eq!(per_queue(&xb, "tx", "packets", nq), spread);
    t.quit().unwrap();
    let mut sent = mana_emu::backend::read_pcap(&wire).unwrap();
    let mut orig = fr.clone();
    if mode == "mac" {
        // macfwd: destination = testpmd's peer address of port 1, source = B.
        for f in orig.iter_mut() {
            f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
            f[6..12].copy_from_slice(&mac(MAC_B));
        }
    }
    sent.sort();
    orig.sort();
    assert_eq!(sent.len(), N);
    assert!(sent == orig, "B sent exactly the frames A received");
}

/// The frames of the checksum test and what the csum engine with hardware
/// offloads must put on B's wire for each.
struct CsumCase {
    input: Vec<Vec<u8>>,
    expect: Vec<Vec<u8>>,
    bad_ip: u64,
    bad_l4: u64,
}

fn csum_case() -> CsumCase {
    let (mut input, mut expect) = (Vec::new(), Vec::new());
    let (mut bad_ip, mut bad_l4) = (0, 0);
    for i in 0..600usize {
        let flow = (i % 59) as u8;
        let src = [0x02, 0, 0, 0, 7, 1];
        let mut f = match i % 3 {
            0 => pkt::build::udp4(
                mac(MAC_A),
                src,
                [10, 7, 0, flow],
                [10, 9, 9, 9],
                2000 + u16::from(flow),
                53,
                20 + i % 300,
            ),
            1 => pkt::build::tcp4(
                mac(MAC_A),
                src,
                [10, 7, 1, flow],
                [10, 9, 9, 8],
                3000 + u16::from(flow),
                80,
                i as u32 * 1000,
                6 + i % 900,
            ),
            _ => {
                let mut s6 = [0u8; 16];
                s6[0] = 0xfd;
                s6[15] = flow;
                let mut d6 = [0u8; 16];
                d6[0] = 0xfd;
                d6[15] = 0xff;
                pkt::build::udp6(
                    mac(MAC_A),
                    src,
                    s6,
                    d6,
                    4000 + u16::from(flow),
                    5000,
                    10 + i % 400,
                )
            }
        };
        let l = pkt::parse(&f).unwrap();
        // What must come out: csum rewrites the MACs (peer of port 1, B's
        // address) and the device computes every checksum.
        let mut e = f.clone();
        e[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
        e[6..12].copy_from_slice(&mac(MAC_B));
        expect.push(e);
        // Break some checksums on the way in: the RX verdicts must say so.
        match i % 10 {
            4 if l.ipv4 => {
                f[l.l3 + 10] ^= 0x5a;
                bad_ip += 1;
            }
            7 => {
                let at = l.l4.unwrap() + if l.proto == pkt::IPPROTO_TCP { 16 } else { 6 };
                f[at] ^= 0xa5;
                bad_l4 += 1;
            }
            _ => {}
        }
        input.push(f);
    }
    CsumCase {
        input,
        expect,
        bad_ip,
        bad_l4,
    }
}

/// Sums "Bad-ipcsum" / "Bad-l4csum" of the per-port forward statistics of
/// port `port` in a `stop` output.
fn bad_csums(out: &str, port: u16) -> (u64, u64) {
    let hdr = format!("Forward statistics for port {port} ");
    let i = out
        .find(&hdr)
        .unwrap_or_else(|| panic!("no {hdr:?} in {out}"));
    let l = out[i..]
        .lines()
        .find(|l| l.contains("Bad-ipcsum:"))
        .unwrap_or_else(|| panic!("no Bad-ipcsum in {out}"));
    let num = |k: &str| -> u64 {
        let j = l.find(k).unwrap() + k.len();
        l[j..].split_whitespace().next().unwrap().parse().unwrap()
    };
    (num("Bad-ipcsum:"), num("Bad-l4csum:"))
}

/// csum forwarding with IPv4, TCP and UDP checksum offload on B: frames
/// arrive on A with good and broken checksums (our RX verdicts are
/// counted by the engine), leave B with every checksum computed by the
/// device from the pseudo-header sums tx_prepare wrote.
fn csum(nq: usize) {
    let _g = lock();
    if skip() {
        return;
    }
    let case = csum_case();
    let n = case.input.len() as u64;
    let scratch = EmuEnv::new(&format!("rs-csum{nq}-pcap"), Config::default_single()).unwrap();
    let wire = scratch.dir.join("b.pcap");
    let env = EmuEnv::new(
        &format!("rs-csum{nq}"),
        single(vec![
            PortDef::sink(MAC_A).lossless(),
            PortDef::pcap_tx(MAC_B, &wire),
        ]),
    )
    .unwrap();
    let mut t = spawn_q(&env, nq, &[]);
    cmd(&mut t, "port stop all");
    for c in ["ip", "udp", "tcp"] {
        let o = cmd(&mut t, &format!("csum set {c} hw 1"));
        assert!(!o.contains("not supported"), "{o}");
    }
    let o = cmd(&mut t, "csum show 1");
    assert_has(&o, "IP checksum offload is hw");
    assert_has(&o, "UDP checksum offload is hw");
    assert_has(&o, "TCP checksum offload is hw");
    cmd(&mut t, "port start all");
    cmd(&mut t, "set fwd csum");
    cmd(&mut t, "start");
    inject_paced(&t, MAC_A, &case.input, 200, |c, sent| {
        c.port(MAC_B).unwrap().tx_packets == sent
    });
    let out = cmd(&mut t, "stop");
    let dev = settled(&t);
    let (a, b) = (dev.port(MAC_A).unwrap(), dev.port(MAC_B).unwrap());
    let s0 = t.port_stats(0).unwrap();
    let s1 = t.port_stats(1).unwrap();
    assert_eq!((s0.rx_packets, a.rx_packets), (n, n));
    assert_eq!(s0.rx_bytes, a.rx_bytes);
    assert_eq!(a.rx_bytes, total_bytes(&case.input));
    assert_eq!((s1.tx_packets, b.tx_packets), (n, n), "{s1:?}");
    assert_eq!(s1.tx_bytes, b.tx_bytes);
    assert_eq!(b.tx_bytes, total_bytes(&case.expect));
    assert_eq!((s0.rx_errors, s1.tx_errors), (0, 0));
    assert!(b.drops.is_empty(), "B drops {:?}", b.drops);
    // Our RX checksum verdicts, as the csum engine counted them.
    assert_eq!(bad_csums(&out, 0), (case.bad_ip, case.bad_l4), "{out}");
    t.quit().unwrap();
    let mut got = mana_emu::backend::read_pcap(&wire).unwrap();
    let mut want = case.expect;
    got.sort();
    want.sort();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w, "B's frame differs from the expected one");
    }
}

/// EAL leaves a process's runtime directory (13 MB of memseg lists with
/// `--no-huge`, in /var/run/dpdk/<prefix>) behind, and the suite's runs use
/// fresh prefixes: they filled the disk (29 GB after a few runs) until the
/// harness removed them. Gone after `quit` and after a kill.
#[test]
fn a_finished_testpmd_leaves_no_runtime_directory() {
    let _g = lock();
    if skip() {
        return;
    }
    let env = EmuEnv::new("rs-runtime", single(vec![PortDef::sink(MAC_A)])).unwrap();
    for quit in [true, false] {
        let t = spawn(&env, &[]);
        let dir = t
            .runtime_dir()
            .expect("a primary's directory")
            .to_path_buf();
        assert!(dir.join("config").exists(), "{}", dir.display());
        if quit {
            t.quit().unwrap();
        } else {
            drop(t);
        }
        assert!(
            !dir.exists(),
            "{} left behind (quit: {quit})",
            dir.display()
        );
    }
}

#[test]
fn txonly_1q() {
    txonly(1);
}

#[test]
fn txonly_8q() {
    txonly(8);
}

#[test]
fn rxonly_1q() {
    rxonly(1);
}

#[test]
fn rxonly_8q() {
    rxonly(8);
}

#[test]
fn io_1q() {
    forward("io", 1);
}

#[test]
fn io_8q() {
    forward("io", 8);
}

#[test]
fn mac_1q() {
    forward("mac", 1);
}

#[test]
fn mac_8q() {
    forward("mac", 8);
}

/// DTS `dynamic_config.disable_promisc_multicast` against what Azure
/// carries: with promiscuous and all-multicast off, frames to an IPv4
/// multicast group (01:00:5e:00:00:01), to IPv6 all-nodes (33:33:00:00:00:01)
/// and to the broadcast address, interleaved with unicast to the port's MAC,
/// are neither received nor forwarded: the vPort drops them (the device
/// counts each with its reason) and the unicast frames arrive and leave on
/// B's wire whole.
#[test]
fn io_forwards_unicast_only_as_an_azure_vnet_carries() {
    let _g = lock();
    if skip() {
        return;
    }
    let scratch = EmuEnv::new("rs-vnetcast-pcap", Config::default_single()).unwrap();
    let wire = scratch.dir.join("b.pcap");
    let env = EmuEnv::new(
        "rs-vnetcast",
        single(vec![
            PortDef::sink(MAC_A).lossless(),
            PortDef::pcap_tx(MAC_B, &wire),
        ]),
    )
    .unwrap();
    let unicast = udp_frames(MAC_A, 300, 3);
    let groups: [[u8; 6]; 3] = [
        [0x01, 0x00, 0x5e, 0x00, 0x00, 0x01],
        [0x33, 0x33, 0x00, 0x00, 0x00, 0x01],
        [0xff; 6],
    ];
    let mut frames = Vec::new();
    for (i, f) in unicast.iter().enumerate() {
        frames.push(f.clone());
        let mut g = f.clone();
        g[..6].copy_from_slice(&groups[i % 3]);
        frames.push(g);
    }
    let mut t = spawn_q(&env, 1, &["--forward-mode=io"]);
    for c in ["set promisc all off", "set allmulti all off", "start"] {
        cmd(&mut t, c);
    }
    inject_paced(&t, MAC_A, &frames, 100, |c, sent| {
        c.port(MAC_B).unwrap().tx_packets == sent / 2
    });
    cmd(&mut t, "stop");
    let dev = settled(&t);
    let (a, b) = (dev.port(MAC_A).unwrap(), dev.port(MAC_B).unwrap());
    let s0 = t.port_stats(0).unwrap();
    let s1 = t.port_stats(1).unwrap();
    let n = unicast.len() as u64;
    let bytes = total_bytes(&unicast);
    assert_eq!(
        (a.drops("vnet_multicast"), a.drops("vnet_broadcast")),
        (200, 100),
        "{a:?}"
    );
    assert_eq!(a.drops.len(), 2, "{a:?}");
    assert_eq!(
        (s0.rx_packets, a.rx_packets, s0.rx_bytes, a.rx_bytes),
        (n, n, bytes, bytes)
    );
    assert_eq!(
        (s1.tx_packets, b.tx_packets, s1.tx_bytes, b.tx_bytes),
        (n, n, bytes, bytes)
    );
    t.quit().unwrap();
    let mut sent = mana_emu::backend::read_pcap(&wire).unwrap();
    let mut orig = unicast;
    sent.sort();
    orig.sort();
    assert!(sent == orig, "B sent exactly the unicast frames");
}

#[test]
fn csum_1q() {
    csum(1);
}

#[test]
fn csum_8q() {
    csum(8);
}

/// io forwarding against the emulator's benchmark mode (`bench =
/// "saturate"`, what benches/perf.py's native runs use): every TX WQE our
/// driver posts is completed (device and driver agree exactly), every RX
/// buffer it posts comes back as the 64-byte template, and what the driver
/// received differs from what the device completed only by the buffers
/// still posted when forwarding stopped.
#[test]
fn io_against_the_saturating_device() {
    let _g = lock();
    if skip() {
        return;
    }
    let env = EmuEnv::new(
        "rs-saturate",
        config(
            r#"bench = "saturate""#,
            "",
            &[(PCI, vec![PortDef::sink(MAC_A), PortDef::sink(MAC_B)])],
        ),
    )
    .unwrap();
    let mut t = spawn(&env, &["--forward-mode=io", "--rxd=256", "--txd=256"]);
    cmd(&mut t, "start");
    wait_dev(&t, "saturated io", |c| {
        c.port(MAC_A).unwrap().tx_packets > 20_000 && c.port(MAC_B).unwrap().tx_packets > 20_000
    });
    cmd(&mut t, "stop");
    let dev = settled(&t);
    let s = [t.port_stats(0).unwrap(), t.port_stats(1).unwrap()];
    let d = [dev.port(MAC_A).unwrap(), dev.port(MAC_B).unwrap()];
    for (s, d) in s.iter().zip(&d) {
        assert_eq!(
            (s.tx_packets, s.tx_bytes, s.tx_errors),
            (d.tx_packets, d.tx_bytes, 0),
            "testpmd {s:?} device {d:?}"
        );
        assert_eq!(d.rx_bytes, 64 * d.rx_packets);
        assert_eq!(s.rx_bytes, 64 * s.rx_packets, "the template's length");
        assert!(
            d.rx_packets >= s.rx_packets && d.rx_packets - s.rx_packets <= 256,
            "completed but not received: at most the ring; testpmd {s:?} device {d:?}"
        );
        assert!(d.drops.is_empty(), "device drops {:?}", d.drops);
    }
    // io sends what it receives, on the other port.
    assert!(s[0].rx_packets >= s[1].tx_packets && s[1].rx_packets >= s[0].tx_packets);
    let k = &dev.device;
    assert_eq!(k.bench_tx_wqes, d[0].tx_packets + d[1].tx_packets);
    assert_eq!(k.bench_rx_wqes, d[0].rx_packets + d[1].rx_packets);
    assert!(
        k.bench_template_writes > 0 && k.bench_template_writes < k.bench_rx_wqes,
        "the template is written once per buffer, buffers are reused: {k:?}"
    );
    t.quit().expect("testpmd quits");
}

//! Scattered receive: frames longer than one mbuf arrive as mbuf chains.
//! testpmd receives jumbo frames into 2 KB mbufs (five per receive WQE)
//! and with the Azure acceptance tests' (LISA) `--mbuf-size=9000
//! --max-pkt-len=9000` (8,872 bytes of data room for MTU 8982 frames, two
//! per WQE), in every forwarding mode that receives, with frames of every
//! size around the buffer boundaries; packets and bytes agree exactly
//! between testpmd, the driver's per-queue counters and the device, the
//! forwarded frames on the far wire are the frames sent in, and every
//! mbuf is back in its pool after the ports stop. A completion claiming
//! more bytes than the WQE's buffers hold is dropped and counted.

mod common;
use common::*;
use std::collections::BTreeMap;
use std::time::Duration;

/// One testpmd at a time: the machine has two cores.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A port of MTU `mtu`.
fn with_mtu(p: PortDef, mtu: u32) -> PortDef {
    PortDef {
        extra: format!("mtu = {mtu}"),
        ..p
    }
}

/// UDP/IPv4 frames to `MAC_A` of each length in `sizes`, `flows` flows
/// each, interleaved.
fn frames_of(sizes: &[usize], flows: usize) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for flow in 0..flows {
        for &len in sizes {
            v.push(pkt::build::udp4(
                mac(MAC_A),
                [0x02, 0, 0, 0, 7, 1],
                [10, 7, 0, flow as u8],
                [10, 9, 9, 9],
                1000 + flow as u16,
                4789,
                len - 42,
            ));
        }
    }
    v
}

/// A receive set-up: testpmd's mbuf and frame options, the device MTU
/// they give, the buffers per WQE the driver must pick, the frame sizes.
struct Setup {
    name: &'static str,
    args: &'static [&'static str],
    mtu: u32,
    segs: u64,
    sizes: &'static [usize],
}

/// 2 KB mbufs (2048 bytes of data room after the headroom), MTU 9000.
const TWO_KB: Setup = Setup {
    name: "2k",
    args: &["--mbuf-size=2176", "--max-pkt-len=9018"],
    mtu: 9000,
    segs: 5,
    // Around one, two, three and four buffers, and the largest frames.
    sizes: &[
        60, 2047, 2048, 2049, 4095, 4096, 4097, 6144, 8192, 8193, 9000, 9014,
    ],
};

/// LISA's `--mbuf-size=9000 --max-pkt-len=9000`: 8,872-byte buffers, MTU
/// 8982 (frames up to 8,996 bytes untagged; twice the buffer is beyond it).
const LISA: Setup = Setup {
    name: "lisa",
    args: &["--mbuf-size=9000", "--max-pkt-len=9000"],
    mtu: 8982,
    segs: 2,
    sizes: &[60, 1514, 8871, 8872, 8873, 8996],
};

/// DPDK's own test suite, `TestSuite_buffer_scatter.py`: testpmd's mac
/// engine with `--mbuf-size=2048` (1,920 bytes of data room) and
/// `--max-pkt-len=9000`, frames of the mbuf size plus -1, 0, 1, 4 and 5
/// bytes counted with the FCS (so 4 bytes less on our wire), without and
/// with `--enable-scatter` (`scatter_mbuf_2048`,
/// `scatter_mbuf_2048_with_offload`). Both ways every WQE holds five
/// buffers: the MTU 8982 frame (9,000 bytes) and the largest (9,018) need 5.
const DTS: Setup = Setup {
    name: "dts",
    args: &["--mbuf-size=2048", "--max-pkt-len=9000", "--mbcache=200"],
    mtu: 8982,
    segs: 5,
    sizes: &[2043, 2044, 2045, 2048, 2049],
};

const DTS_OFFLOAD: Setup = Setup {
    name: "dts-offload",
    args: &[
        "--mbuf-size=2048",
        "--max-pkt-len=9000",
        "--mbcache=200",
        "--enable-scatter",
    ],
    ..DTS
};

/// testpmd forwards (`mode`) what port A receives to port B, whose wire is
/// a pcap file.
fn forward(setup: &Setup, mode: &str) {
    let _g = lock();
    if skip() {
        return;
    }
    let tag = format!("sg-{}-{mode}", setup.name);
    let scratch = EmuEnv::new(&format!("{tag}-pcap"), Config::default_single()).unwrap();
    let wire = scratch.dir.join("b.pcap");
    let env = EmuEnv::new(
        &tag,
        single(vec![
            with_mtu(PortDef::sink(MAC_A).lossless(), setup.mtu),
            with_mtu(PortDef::pcap_tx(MAC_B, &wire), setup.mtu),
        ]),
    )
    .unwrap();
    let fr = frames_of(setup.sizes, 20);
    let n = fr.len() as u64;
    let bytes = total_bytes(&fr);
    let mut args = vec![
        "--rxq=1",
        "--txq=1",
        "--rxd=256",
        "--txd=256",
        "--tx-offloads=0x8000",
    ];
    args.extend_from_slice(setup.args);
    let fwd = format!("--forward-mode={mode}");
    args.push(&fwd);
    let mut t = spawn(&env, &args);
    // Every WQE of both ports' receive queues holds `segs` buffers.
    assert_eq!(mbufs_in_use(&mut t), 2 * 256 * setup.segs, "posted");
    let info = cmd(&mut t, "show rxq info 0 0");
    for line in ["RX scattered packets: on", "Burst mode: Scalar scattered"] {
        assert!(info.contains(line), "{line:?} in {info}");
    }
    cmd(&mut t, "start");
    inject_paced(&t, MAC_A, &fr, 40, |c, sent| {
        let a = c.port(MAC_A).unwrap();
        if mode == "rxonly" {
            a.rx_packets == sent
        } else {
            c.port(MAC_B).unwrap().tx_packets == sent
        }
    });
    let s0 = wait_stats(&mut t, 0, |s| s.rx_packets >= n);
    cmd(&mut t, "stop");
    let dev = settled(&t);
    let s1 = t.port_stats(1).unwrap();
    let (a, b) = (dev.port(MAC_A).unwrap(), dev.port(MAC_B).unwrap());
    assert_eq!((s0.rx_packets, a.rx_packets), (n, n), "A {s0:?}");
    assert_eq!((s0.rx_bytes, a.rx_bytes), (bytes, bytes), "A {s0:?}");
    assert_eq!((s0.rx_errors, s0.rx_nombuf), (0, 0), "A {s0:?}");
    assert!(a.drops.is_empty() && b.drops.is_empty(), "{a:?} {b:?}");
    let x = xstats(&mut t, 0);
    assert_eq!(
        (xstat(&x, "rx_q0_packets"), xstat(&x, "rx_q0_bytes")),
        (n, bytes)
    );
    assert_eq!(live_queue_packets(&dev, "rq", MAC_A), vec![n]);
    let fwd_n = if mode == "rxonly" { 0 } else { n };
    let fwd_bytes = if mode == "rxonly" { 0 } else { bytes };
    assert_eq!((s1.tx_packets, b.tx_packets), (fwd_n, fwd_n), "B {s1:?}");
    assert_eq!(
        (s1.tx_bytes, b.tx_bytes),
        (fwd_bytes, fwd_bytes),
        "B {s1:?}"
    );
    assert_eq!(s1.tx_errors, 0);
    // Every chain came back to the pool: nothing held once the ports stop.
    cmd(&mut t, "port stop all");
    assert_eq!(mbufs_in_use(&mut t), 0, "mbufs held after port stop");
    t.quit().unwrap();
    let mut sent = mana_emu::backend::read_pcap(&wire).unwrap_or_default();
    if mode == "rxonly" {
        assert!(sent.is_empty());
        return;
    }
    let mut want = fr.clone();
    for f in want.iter_mut() {
        match mode {
            // macfwd: destination = testpmd's peer address of port 1.
            "mac" => {
                f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
                f[6..12].copy_from_slice(&mac(MAC_B));
            }
            "macswap" => {
                let (dst, src) = (f[0..6].to_vec(), f[6..12].to_vec());
                f[0..6].copy_from_slice(&src);
                f[6..12].copy_from_slice(&dst);
            }
            _ => {}
        }
    }
    sent.sort();
    want.sort();
    assert_eq!(sent.len(), want.len());
    assert!(sent == want, "B sent exactly the frames A received");
}

#[test]
fn jumbo_frames_into_2k_mbufs_io() {
    forward(&TWO_KB, "io");
}

#[test]
fn jumbo_frames_into_2k_mbufs_mac() {
    forward(&TWO_KB, "mac");
}

#[test]
fn jumbo_frames_into_2k_mbufs_macswap() {
    forward(&TWO_KB, "macswap");
}

#[test]
fn jumbo_frames_into_2k_mbufs_rxonly() {
    forward(&TWO_KB, "rxonly");
}

#[test]
fn lisa_mbuf_size_9000_io() {
    forward(&LISA, "io");
}

#[test]
fn lisa_mbuf_size_9000_mac() {
    forward(&LISA, "mac");
}

#[test]
fn lisa_mbuf_size_9000_macswap() {
    forward(&LISA, "macswap");
}

#[test]
fn lisa_mbuf_size_9000_rxonly() {
    forward(&LISA, "rxonly");
}

#[test]
fn dts_buffer_scatter_mbuf_2048() {
    forward(&DTS, "mac");
}

#[test]
fn dts_buffer_scatter_mbuf_2048_with_offload() {
    forward(&DTS_OFFLOAD, "mac");
}

/// Completions that claim more bytes than the WQE's five buffers hold are
/// dropped and counted, never delivered; the honest ones around them are.
#[test]
fn a_length_beyond_the_wqe_is_dropped_and_counted() {
    let _g = lock();
    if skip() {
        return;
    }
    let env = EmuEnv::new(
        "sg-lie",
        single(vec![with_mtu(PortDef::sink(MAC_A).lossless(), 9000)]),
    )
    .unwrap();
    let mut args = vec!["--rxq=1", "--txq=1", "--rxd=256", "--txd=256"];
    args.extend_from_slice(TWO_KB.args);
    args.push("--forward-mode=rxonly");
    let mut t = spawn(&env, &args);
    cmd(&mut t, "start");
    const LIES: u64 = 25;
    // Every receive completion lies (16..64 KiB, beyond 5 * 2048) until
    // 25 have.
    t.fault(Fault::Lie {
        seed: 7,
        per_million: 1_000_000,
        kinds: vec![mana_emu::device::LieKind::BadLength],
        count: Some(LIES),
        ms: Some(120_000),
    })
    .unwrap();
    let fr = frames_of(TWO_KB.sizes, 10);
    let n = fr.len() as u64;
    inject_paced(&t, MAC_A, &fr, 40, |c, sent| {
        c.port(MAC_A).unwrap().rx_packets == sent
    });
    t.fault(Fault::LieStop).unwrap();
    let dev = settled(&t);
    let told = dev.device.lies.get("bad_length").copied().unwrap_or(0);
    assert_eq!(told, LIES, "lies {:?}", dev.device.lies);
    // The first 25 frames were lied about.
    let honest = total_bytes(&fr[LIES as usize..]);
    let s = wait_stats(&mut t, 0, |s| s.rx_packets >= n - LIES);
    cmd(&mut t, "stop");
    let x = xstats(&mut t, 0);
    let got: BTreeMap<&str, u64> = ["packets", "bytes", "bad_length_drops", "errors"]
        .into_iter()
        .map(|k| (k, xstat(&x, &format!("rx_q0_{k}"))))
        .collect();
    let want: BTreeMap<&str, u64> = [
        ("packets", n - LIES),
        ("bytes", honest),
        ("bad_length_drops", LIES),
        ("errors", LIES),
    ]
    .into_iter()
    .collect();
    assert_eq!(got, want, "{s:?}");
    assert_eq!((s.rx_packets, s.rx_bytes), (n - LIES, honest));
    assert_eq!(dev.port(MAC_A).unwrap().rx_packets, n);
    cmd(&mut t, "port stop all");
    assert_eq!(mbufs_in_use(&mut t), 0, "mbufs held after port stop");
    t.quit().unwrap();
}

/// A frame needing more buffers than the device lets a WQE carry is
/// refused at queue setup, naming the mbuf size that works.
#[test]
fn more_buffers_than_a_wqe_takes_are_refused() {
    let _g = lock();
    if skip() {
        return;
    }
    // A device whose WQEs take at most 4 SGEs: 9018-byte frames need 5 of
    // 2048 bytes.
    let env = EmuEnv::new(
        "sg-refused",
        config(
            "",
            "max_sge = 4",
            &[(PCI, vec![with_mtu(PortDef::sink(MAC_A), 9000)])],
        ),
    )
    .unwrap();
    let mut args = vec!["--rxq=1", "--txq=1"];
    args.extend_from_slice(TWO_KB.args);
    let t = spawn(&env, &args);
    let out = t
        .wait_for("Start ports failed", Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("{e}\n{}", t.output()));
    assert_has(
        &out,
        "rx queue 0: mbufs hold 2048 bytes but MTU 9000 frames need 9018; MANA receives a \
         frame into at most 4 buffers: use an mbuf data room of at least 2383 bytes \
         (headroom included)",
    );
    drop(t);
}

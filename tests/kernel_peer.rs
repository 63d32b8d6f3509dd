//! Real kernels on both ends: two network namespaces, each with a veth
//! whose other end (in the root namespace) an emulated MANA port drives
//! through the emulator's AF_PACKET backend. testpmd forwards between the
//! two ports; `ping` and a TCP transfer (`nc`) must get through, with exact
//! counters on both sides.
//!
//! The veths keep their TX checksum offload on (TSO/GSO off, so frames fit
//! the MTU): frames leave each namespace with only the pseudo-header sum in
//! their TCP checksum. Our RX verdicts flag them, and only our TX checksum
//! offload (testpmd's csum engine with hardware TCP/IP checksums) makes the
//! other kernel accept them: the transfer completing, with the kernels
//! counting no checksum errors, is the proof.

mod common;
use common::*;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

const IP_A: &str = "10.77.0.1";
const IP_B: &str = "10.77.0.2";

fn run(args: &[&str]) -> Output {
    Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

#[track_caller]
fn ok(args: &[&str]) -> String {
    let o = run(args);
    assert!(
        o.status.success(),
        "{args:?} failed: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Root, the tools and network namespaces: otherwise the test is skipped,
/// loudly.
fn prerequisites() -> bool {
    if skip() {
        return false;
    }
    // SAFETY: plain getter.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("kernel_peer: needs root (network namespaces): SKIPPED");
        return false;
    }
    for t in ["ip", "ping", "nc", "ethtool", "ss"] {
        if !have(t) {
            eprintln!("kernel_peer: {t} not installed: SKIPPED");
            return false;
        }
    }
    true
}

/// One namespace with a veth (`inner`, addressed) whose peer (`outer`)
/// stays in the root namespace for the emulator.
struct Side {
    ns: String,
    inner: String,
    outer: String,
    mac: String,
}

/// Two namespaces and their veths; removed on drop, also when a test fails.
struct Net {
    a: Side,
    b: Side,
}

impl Net {
    fn new(tag: &str) -> Net {
        let id = std::process::id() % 100_000;
        let side = |s: &str| Side {
            ns: format!("mana-{tag}{s}-{id}"),
            inner: format!("mk{tag}{s}{id}"),
            outer: format!("md{tag}{s}{id}"),
            mac: String::new(),
        };
        let mut net = Net {
            a: side("a"),
            b: side("b"),
        };
        net.cleanup();
        for (side, ip) in [(&mut net.a, IP_A), (&mut net.b, IP_B)] {
            let (ns, inner, outer) = (&side.ns, &side.inner, &side.outer);
            ok(&["ip", "netns", "add", ns]);
            ok(&[
                "ip", "link", "add", inner, "type", "veth", "peer", "name", outer,
            ]);
            ok(&["ip", "link", "set", inner, "netns", ns]);
            let sysctl = format!("net.ipv6.conf.{outer}.disable_ipv6=1");
            ok(&["sysctl", "-qw", &sysctl]);
            ok(&["ip", "link", "set", outer, "up"]);
            let x = |args: &[&str]| {
                let mut v = vec!["ip", "netns", "exec", ns.as_str()];
                v.extend_from_slice(args);
                ok(&v)
            };
            x(&["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"]);
            x(&["sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"]);
            // Frames must fit the MTU; checksums stay offloaded (partial).
            x(&[
                "ethtool", "-K", inner, "tso", "off", "gso", "off", "gro", "off",
            ]);
            x(&["ip", "addr", "add", &format!("{ip}/24"), "dev", inner]);
            x(&["ip", "link", "set", inner, "up"]);
            x(&["ip", "link", "set", "lo", "up"]);
            // (`ip netns exec` mounts the namespace's own /sys.)
            side.mac = x(&["cat", &format!("/sys/class/net/{inner}/address")])
                .trim()
                .to_string();
            let feat = x(&["ethtool", "-k", inner]);
            assert!(
                feat.contains("tx-checksum-ip-generic: on") || feat.contains("tx-checksumming: on"),
                "veth TX checksum offload is on: {feat}"
            );
        }
        // An Azure virtual network carries no broadcast: the host answers
        // a VM's ARP requests itself, and the emulated vPort drops them like
        // the real one. Permanent neighbour entries stand in for the host's
        // answers (each namespace reaches the other's address at the other's
        // MAC, which io forwarding keeps).
        for (from, to, ip) in [(&net.a, &net.b, IP_B), (&net.b, &net.a, IP_A)] {
            ok(&[
                "ip",
                "-n",
                &from.ns,
                "neigh",
                "replace",
                ip,
                "lladdr",
                &to.mac,
                "dev",
                &from.inner,
                "nud",
                "permanent",
            ]);
        }
        net
    }

    fn exec(&self, side: &Side, args: &[&str]) -> Output {
        let mut v = vec!["ip", "netns", "exec", side.ns.as_str()];
        v.extend_from_slice(args);
        run(&v)
    }

    /// TCP checksum errors a namespace's kernel counted (/proc/net/snmp).
    fn tcp_csum_errors(&self, side: &Side) -> u64 {
        let o = self.exec(side, &["cat", "/proc/net/snmp"]);
        let text = String::from_utf8_lossy(&o.stdout);
        let tcp: Vec<&str> = text.lines().filter(|l| l.starts_with("Tcp:")).collect();
        let keys: Vec<&str> = tcp[0].split_whitespace().collect();
        let vals: Vec<&str> = tcp[1].split_whitespace().collect();
        let i = keys.iter().position(|k| *k == "InCsumErrors").unwrap();
        vals[i].parse().unwrap()
    }

    fn cleanup(&self) {
        for s in [&self.a, &self.b] {
            let _ = run(&["ip", "netns", "del", &s.ns]);
            let _ = run(&["ip", "link", "del", &s.outer]);
        }
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        self.cleanup();
    }
}

fn env_for(net: &Net, name: &str) -> EmuEnv {
    EmuEnv::new(
        name,
        single(vec![
            PortDef::af_packet(MAC_A, &net.a.outer),
            PortDef::af_packet(MAC_B, &net.b.outer),
        ]),
    )
    .unwrap()
}

/// After traffic, with forwarding still running: testpmd's counters of both
/// ports equal the device's, and testpmd forwarded everything it received.
/// Read while forwarding runs because a late frame from a kernel (the last
/// ACK of a TCP close) that lands after `stop` rightly waits in the RX ring,
/// counted by the device and not yet by testpmd. The snapshot is taken
/// between two equal device readings so no frame arrives during it.
fn exact_counts(t: &mut Testpmd) -> (PortStats, PortStats) {
    let (dev, s0, s1) = (0..10)
        .find_map(|_| {
            let dev = settled(t);
            let s0 = t.port_stats(0).unwrap();
            let s1 = t.port_stats(1).unwrap();
            (t.device_counters().unwrap() == dev).then_some((dev, s0, s1))
        })
        .expect("the device kept receiving while testpmd's stats were read");
    let (a, b) = (dev.port(MAC_A).unwrap(), dev.port(MAC_B).unwrap());
    assert_eq!(
        (s0.rx_packets, s0.rx_bytes),
        (a.rx_packets, a.rx_bytes),
        "A {s0:?} {a:?}"
    );
    assert_eq!(
        (s0.tx_packets, s0.tx_bytes),
        (a.tx_packets, a.tx_bytes),
        "A {s0:?} {a:?}"
    );
    assert_eq!(
        (s1.rx_packets, s1.rx_bytes),
        (b.rx_packets, b.rx_bytes),
        "B {s1:?} {b:?}"
    );
    assert_eq!(
        (s1.tx_packets, s1.tx_bytes),
        (b.tx_packets, b.tx_bytes),
        "B {s1:?} {b:?}"
    );
    assert_eq!(s0.rx_packets, s1.tx_packets, "A -> B forwarded whole");
    assert_eq!(s1.rx_packets, s0.tx_packets, "B -> A forwarded whole");
    assert_eq!(
        (s0.rx_errors, s1.rx_errors, s0.tx_errors, s1.tx_errors),
        (0, 0, 0, 0)
    );
    assert!(a.drops.is_empty() && b.drops.is_empty(), "{a:?} {b:?}");
    (s0, s1)
}

#[test]
fn ping_between_namespaces_through_io_forwarding() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !prerequisites() {
        return;
    }
    let net = Net::new("p");
    let env = env_for(&net, "rs-peer-ping");
    let mut t = spawn(&env, &["--forward-mode=io", "--rxd=256", "--txd=256"]);
    cmd(&mut t, "start");
    for (from, to) in [(&net.a, IP_B), (&net.b, IP_A)] {
        let o = net.exec(from, &["ping", "-c", "5", "-i", "0.2", "-w", "120", to]);
        let text = String::from_utf8_lossy(&o.stdout);
        // With a deadline (`-w`) ping sends until its count is answered.
        let replies = text
            .lines()
            .find_map(|l| l.split_once(" packets transmitted, "))
            .and_then(|(_, rest)| rest.split_once(" received"))
            .and_then(|(n, _)| n.trim().parse::<u64>().ok());
        assert!(
            replies >= Some(5),
            "ping {to}: {text}{}\n{}",
            String::from_utf8_lossy(&o.stderr),
            t.output()
        );
    }
    let (s0, s1) = exact_counts(&mut t);
    cmd(&mut t, "stop");
    // 10 echo requests and 10 replies at least (no ARP: see Net::new).
    assert!(s0.rx_packets >= 10 && s1.rx_packets >= 10, "{s0:?} {s1:?}");
    t.quit().unwrap();
}

#[test]
fn tcp_transfer_between_namespaces_needs_our_tx_checksum_offload() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !prerequisites() {
        return;
    }
    let net = Net::new("t");
    let env = env_for(&net, "rs-peer-tcp");
    let mut t = spawn(&env, &["--rxd=256", "--txd=256"]);
    cmd(&mut t, "port stop all");
    for p in [0, 1] {
        for c in ["ip", "tcp", "udp"] {
            let o = cmd(&mut t, &format!("csum set {c} hw {p}"));
            assert!(!o.contains("not supported"), "{o}");
        }
    }
    // csum forwarding rewrites the Ethernet addresses: each port sends to
    // the veth of its namespace.
    cmd(&mut t, &format!("set eth-peer 0 {}", net.a.mac));
    cmd(&mut t, &format!("set eth-peer 1 {}", net.b.mac));
    cmd(&mut t, "port start all");
    cmd(&mut t, "set fwd csum");
    cmd(&mut t, "start");

    let errs0 = (net.tcp_csum_errors(&net.a), net.tcp_csum_errors(&net.b));
    let data: Vec<u8> = (0..1_500_000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    let dir = env.dir.join("tcp");
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("src.bin");
    let dst = dir.join("dst.bin");
    std::fs::write(&src, &data).unwrap();
    // Server in B, client in A; both bounded.
    let server = Command::new("ip")
        .args([
            "netns", "exec", &net.b.ns, "timeout", "40", "nc", "-l", "5001",
        ])
        .stdout(std::fs::File::create(&dst).unwrap())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The client connects once the server listens.
    let t0 = std::time::Instant::now();
    loop {
        let o = net.exec(&net.b, &["ss", "-Hltn", "sport = :5001"]);
        if String::from_utf8_lossy(&o.stdout).contains("5001") {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(120), "nc never listened");
        std::thread::sleep(Duration::from_millis(50));
    }
    let client = net.exec(
        &net.a,
        &[
            "sh",
            "-c",
            &format!("timeout 30 nc -N -w 10 {IP_B} 5001 < {}", src.display()),
        ],
    );
    let server = server.wait_with_output().unwrap();
    let (s0, _) = exact_counts(&mut t);
    let out = cmd(&mut t, "stop");
    assert!(
        client.status.success(),
        "client: {}{}\nserver: {}\n{}",
        String::from_utf8_lossy(&client.stdout),
        String::from_utf8_lossy(&client.stderr),
        String::from_utf8_lossy(&server.stderr),
        t.output()
    );
    let got = std::fs::read(&dst).unwrap();
    assert_eq!(got.len(), data.len(), "bytes received by B's kernel");
    assert!(got == data, "B received the data intact");
    // The kernels saw no bad checksum...
    assert_eq!(
        (net.tcp_csum_errors(&net.a), net.tcp_csum_errors(&net.b)),
        errs0,
        "TCP checksum errors in the namespaces"
    );
    // ...although what arrived on our RX side carried partial checksums
    // (our RX verdicts said so), so the device's TX offload computed them.
    let bad_l4 = |port: u16| -> u64 {
        let hdr = format!("Forward statistics for port {port} ");
        let i = out.find(&hdr).unwrap_or_else(|| panic!("{out}"));
        let l = out[i..]
            .lines()
            .find(|l| l.contains("Bad-l4csum:"))
            .unwrap();
        let j = l.find("Bad-l4csum:").unwrap() + "Bad-l4csum:".len();
        l[j..].split_whitespace().next().unwrap().parse().unwrap()
    };
    let (bad0, bad1) = (bad_l4(0), bad_l4(1));
    assert!(
        bad0 > 100,
        "frames from A arrived with partial checksums: {out}"
    );
    assert!(
        bad1 > 10,
        "frames from B arrived with partial checksums: {out}"
    );
    assert!(s0.rx_bytes > data.len() as u64, "{s0:?}");
    t.quit().unwrap();
}

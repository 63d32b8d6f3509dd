//! Shared helpers of the testpmd integration tests of the Rust driver on
//! the emulated MANA device (`mana-emu`): configurations, launching
//! `dpdk-testpmd` with our plugin, frame builders, the RSS expectation,
//! settling the device and parsing testpmd's xstats and mempool dumps.
#![allow(dead_code)]

pub use mana_emu::config::Config;
#[allow(unused_imports)]
pub use mana_emu::device::{Counters, Fault, PortCounters};
pub use mana_emu::harness::*;
pub use mana_emu::pkt;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub const PCI: &str = "7870:00:00.0";
pub const PCI2: &str = "7870:00:01.0";
pub const MAC_A: &str = "00:0d:3a:00:00:0a";
pub const MAC_B: &str = "00:0d:3a:00:00:0b";
pub const MAC_C: &str = "00:0d:3a:00:00:0c";

/// DPDK's (and our driver's) default RSS key, written out independently of
/// the driver's source.
pub const DEFAULT_RSS_KEY: [u8; 40] = [
    0x2c, 0xc6, 0x81, 0xd1, 0x5b, 0xdb, 0xf4, 0xf7, 0xfc, 0xa2, 0x83, 0x19, 0xdb, 0x1a, 0x3e, 0x94,
    0x6b, 0x9e, 0x38, 0xd9, 0x2c, 0x9c, 0x03, 0xd1, 0xad, 0x99, 0x44, 0xa7, 0xd9, 0x56, 0x3d, 0x59,
    0x06, 0x3c, 0x25, 0xf3, 0xfc, 0x1f, 0xdc, 0x2a,
];

/// Our plugin as `cargo test` builds it: next to the test, in `deps/`
/// (the copy in `target/<profile>/` is refreshed only by `cargo build`);
/// `NET_MANA_PMD` names another build of it (e.g. meson's).
pub fn pmd() -> PathBuf {
    if let Some(p) = std::env::var_os("NET_MANA_PMD") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("current_exe");
    exe.with_file_name("librte_net_mana.so")
}

pub fn pkg_config(args: &[&str]) -> Vec<String> {
    let out = std::process::Command::new("pkg-config")
        .args(args)
        .output()
        .expect("pkg-config");
    assert!(out.status.success(), "pkg-config {args:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .split_whitespace()
        .map(String::from)
        .collect()
}

/// Compiles `tests/c/<name>.c` against the installed DPDK (and the
/// driver-SDK headers of the same version, which Debian does not package)
/// into `target/<profile>/<name>`, once per test process.
pub fn build_c(name: &str) -> PathBuf {
    static BUILT: std::sync::Mutex<BTreeMap<String, PathBuf>> =
        std::sync::Mutex::new(BTreeMap::new());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = built.get(name) {
        return p.clone();
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let version = pkg_config(&["--modversion", "libdpdk"]).join("");
    let sdk = std::env::var("NET_MANA_DPDK_SRC")
        .unwrap_or_else(|_| format!("/var/cache/net-mana/dpdk-stable-{version}"));
    let exe = pmd().parent().unwrap().parent().unwrap().join(name);
    let out = std::process::Command::new("cc")
        .args(["-O1", "-g", "-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(root.join(format!("tests/c/{name}.c")))
        .args(pkg_config(&["--cflags", "libdpdk"]))
        .args(["-DALLOW_INTERNAL_API", "-DALLOW_EXPERIMENTAL_API"])
        .arg(format!("-I{sdk}/lib/ethdev"))
        .arg(format!("-I{sdk}/lib/eal/include"))
        .arg(format!("-I{sdk}/drivers/bus/pci"))
        .args(pkg_config(&["--libs", "libdpdk"]))
        .arg("-lpthread")
        .output()
        .expect("cc");
    assert!(
        out.status.success(),
        "building {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    built.insert(name.to_string(), exe.clone());
    exe
}

/// One adapter at `PCI` with one loopback port: what a C test program
/// sends comes back to it.
pub fn loopback(down_ms: u64, poll: bool) -> Config {
    Config::parse(&format!(
        r#"
[options]
reset_down_ms = {down_ms}
doorbell_mode = "{}"

[[adapter]]
pci = "{PCI}"
ib_name = "mana_0"

[[adapter.port]]
mac = "00:0d:3a:00:00:01"
backend = {{ kind = "loopback" }}
"#,
        if poll { "poll" } else { "trap" }
    ))
    .unwrap()
}

/// EAL arguments (after the program's own `args`) and the emulator's
/// environment for a C test program driving `PCI` of `env` with our plugin;
/// the prefix's runtime directory goes when the result is dropped.
pub fn c_program_args(
    cmd: &mut std::process::Command,
    env: &EmuEnv,
    file_prefix: &str,
    eal: &[&str],
) -> RuntimeDir {
    cmd.args(eal)
        .args(["-l", "0", "--iova-mode=va", "--file-prefix", file_prefix])
        .arg("-d")
        .arg(pmd())
        .args(["-a", PCI])
        .env("LD_PRELOAD", emu_lib_path().unwrap())
        .env("MANA_EMU_CONFIG", &env.config_path)
        .env("MANA_EMU_RUN_DIR", &env.config.options.run_dir)
        .env("SYSFS_PCI_DEVICES", env.pci_devices())
        .env("VF_PCI", PCI)
        .stdin(std::process::Stdio::null());
    RuntimeDir::new(file_prefix)
}

/// Whether the CPU runs the vector data-path loops (AVX2).
pub fn cpu_has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// testpmd with our driver and the environment variable `var=value`
/// (`NET_MANA_RX_PATH`, `NET_MANA_TX_PATH`).
pub fn spawn_with_var(env: &EmuEnv, var: &str, value: &str, args: &[&str]) -> Testpmd {
    Testpmd::builder(env)
        .driver(pmd())
        .args(args)
        .env(var, value)
        .timeout(std::time::Duration::from_secs(120))
        .spawn()
        .expect("testpmd starts")
}

/// Skips (with a message) when testpmd is not installed.
pub fn skip() -> bool {
    if !testpmd_available() {
        eprintln!("dpdk-testpmd not installed (scripts/setup.sh): skipping");
        return true;
    }
    assert!(pmd().exists(), "{} not built", pmd().display());
    false
}

/// One emulated port, written as TOML so new configuration fields keep
/// their defaults.
#[derive(Clone, Debug)]
pub struct PortDef {
    pub mac: String,
    pub backend: String,
    pub lossless: bool,
    pub extra: String,
}

impl PortDef {
    pub fn new(mac: &str, backend: &str) -> PortDef {
        PortDef {
            mac: mac.into(),
            backend: backend.into(),
            lossless: false,
            extra: String::new(),
        }
    }
    /// Frames sent are counted and dropped; nothing arrives but injections.
    pub fn sink(mac: &str) -> PortDef {
        Self::new(mac, r#"{ kind = "sink" }"#)
    }
    /// Frames sent are written to a pcap file.
    pub fn pcap_tx(mac: &str, path: &std::path::Path) -> PortDef {
        Self::new(
            mac,
            &format!(r#"{{ kind = "pcap", tx = "{}" }}"#, path.display()),
        )
    }
    pub fn af_packet(mac: &str, ifname: &str) -> PortDef {
        Self::new(
            mac,
            &format!(r#"{{ kind = "af_packet", ifname = "{ifname}" }}"#),
        )
    }
    /// Received frames wait for a posted buffer instead of being dropped.
    pub fn lossless(mut self) -> PortDef {
        self.lossless = true;
        self
    }
}

/// A configuration: `[options]` and `[limits]` TOML bodies, then adapters
/// (PCI address and ports).
pub fn config(options: &str, limits: &str, adapters: &[(&str, Vec<PortDef>)]) -> Config {
    let mut t = format!("[options]\n{options}\n[limits]\n{limits}\n");
    // IB names as the kernel of the limits profile gives them (`mana_<i>`,
    // or `manae_<i>` beside the RNIC `mana_<i>` under 7.x).
    for (pci, ports) in adapters {
        t += &format!("[[adapter]]\npci = \"{pci}\"\n");
        for p in ports {
            t += &format!(
                "[[adapter.port]]\nmac = \"{}\"\nbackend = {}\nlossless_rx = {}\n{}\n",
                p.mac, p.backend, p.lossless, p.extra
            );
        }
    }
    Config::parse(&t).unwrap_or_else(|e| panic!("config: {e}\n{t}"))
}

/// One adapter (`PCI`) with these ports and default options.
pub fn single(ports: Vec<PortDef>) -> Config {
    config("", "", &[(PCI, ports)])
}

/// testpmd with our driver; `args` go after `--`.
pub fn spawn(env: &EmuEnv, args: &[&str]) -> Testpmd {
    spawn_with(env, &[], &[], args)
}

/// testpmd with our driver, `-a` device arguments (none: every adapter)
/// and extra EAL arguments.
pub fn spawn_with(env: &EmuEnv, devices: &[&str], eal: &[&str], args: &[&str]) -> Testpmd {
    let mut b = Testpmd::builder(env)
        .driver(pmd())
        .eal(eal)
        .args(args)
        .timeout(Duration::from_secs(120));
    for d in devices {
        b = b.device(d);
    }
    b.spawn().expect("testpmd starts")
}

pub fn mac(s: &str) -> [u8; 6] {
    mana_emu::config::parse_mac(s).unwrap()
}

/// `n` IPv4/UDP frames to `dst` over 61 flows (source addresses), lengths
/// 60..=259.
pub fn udp_frames(dst: &str, n: usize, seed: u8) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let flow = (i % 61) as u8;
            pkt::build::udp4(
                mac(dst),
                [0x02, 0, 0, 0, seed, 1],
                [10, seed, 0, flow],
                [10, 9, 9, 9],
                1000 + u16::from(flow),
                4789,
                18 + (i % 200),
            )
        })
        .collect()
}

pub fn total_bytes(frames: &[Vec<u8>]) -> u64 {
    frames.iter().map(|f| f.len() as u64).sum()
}

/// Toeplitz hash of an IPv4 frame over the default key: source and
/// destination address, plus the UDP/TCP ports when `l4`.
pub fn rss_hash(f: &[u8], l4: bool) -> u32 {
    let l = pkt::parse(f).expect("parsable");
    assert!(l.ipv4);
    let mut input = f[l.l3 + 12..l.l3 + 20].to_vec();
    if l4 {
        let p = l.l4.expect("l4");
        input.extend_from_slice(&f[p..p + 4]);
    }
    pkt::toeplitz(&DEFAULT_RSS_KEY, &input)
}

/// The default redirection table for `nq` queues.
pub fn default_reta(nq: usize) -> [u16; 64] {
    let mut r = [0u16; 64];
    for (i, e) in r.iter_mut().enumerate() {
        *e = (i % nq) as u16;
    }
    r
}

/// The receive queue RSS picks (DPDK semantics: RETA[hash mod 64]).
pub fn rss_queue(f: &[u8], reta: &[u16; 64], l4: bool) -> usize {
    usize::from(reta[(rss_hash(f, l4) & 63) as usize])
}

/// Packets per receive queue the RSS configuration predicts.
pub fn rss_spread(frames: &[Vec<u8>], reta: &[u16; 64], nq: usize, l4: bool) -> Vec<u64> {
    let mut v = vec![0u64; nq];
    for f in frames {
        v[rss_queue(f, reta, l4)] += 1;
    }
    v
}

/// Packet counts of the device's live queues of `kind` ("sq"/"rq") on a
/// port, in hardware-id order (creation order).
pub fn live_queue_packets(c: &Counters, kind: &str, mac: &str) -> Vec<u64> {
    let mut v: Vec<(u32, u64)> = c
        .queues
        .iter()
        .filter(|q| q.kind == kind && q.live && q.port == mac)
        .map(|q| (q.id, q.counters.packets))
        .collect();
    v.sort();
    v.into_iter().map(|x| x.1).collect()
}

/// Waits until the device's counters stop changing (three reads 250 ms
/// apart are equal) and returns them.
pub fn settled(t: &Testpmd) -> Counters {
    let t0 = Instant::now();
    let mut last = t.device_counters().expect("device counters");
    let mut same = 0;
    while same < 2 {
        std::thread::sleep(Duration::from_millis(250));
        let c = t.device_counters().expect("device counters");
        if c == last {
            same += 1;
        } else {
            same = 0;
            last = c;
        }
        assert!(
            t0.elapsed() < DEADLINE,
            "device never settled; last counters: {last:?}"
        );
    }
    last
}

/// The deadline of every wait for an event: it only catches a hang. A
/// loaded 2-core machine (the busy mode of scripts/test.sh) takes seconds
/// where an idle one takes milliseconds; nothing asserts on how long.
pub const DEADLINE: Duration = Duration::from_secs(120);

/// Polls `show port stats` until `pred` holds; panics at [`DEADLINE`] with
/// the last stats seen.
#[track_caller]
pub fn wait_stats(t: &mut Testpmd, port: u16, pred: impl Fn(&PortStats) -> bool) -> PortStats {
    let t0 = Instant::now();
    loop {
        let s = t.port_stats(port).expect("port stats");
        if pred(&s) {
            return s;
        }
        assert!(
            t0.elapsed() < DEADLINE,
            "port {port}'s stats never got there in {} s; last seen: {s:?}",
            DEADLINE.as_secs()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits for the device counters; panics with `what` at [`DEADLINE`].
pub fn wait_dev(t: &Testpmd, what: &str, pred: impl Fn(&Counters) -> bool) -> Counters {
    t.wait_device(DEADLINE, pred)
        .unwrap_or_else(|e| panic!("{what}: {e}\ntestpmd output:\n{}", t.output()))
}

/// Runs a command, panicking with the output if testpmd does not answer.
pub fn cmd(t: &mut Testpmd, c: &str) -> String {
    t.cmd(c)
        .unwrap_or_else(|e| panic!("testpmd command {c:?}: {e}"))
}

/// `show port xstats N` as name -> value.
pub fn xstats(t: &mut Testpmd, port: u16) -> BTreeMap<String, u64> {
    let o = cmd(t, &format!("show port xstats {port}"));
    let start = o
        .find(&format!("NIC extended statistics for port {port}"))
        .unwrap_or_else(|| panic!("no xstats in {o}"));
    let mut m = BTreeMap::new();
    for l in o[start..].lines().skip(1) {
        let Some((k, v)) = l.split_once(": ") else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        if k.is_empty() || k.contains(' ') {
            continue;
        }
        if let Ok(v) = v.parse::<u64>() {
            m.insert(k.to_string(), v);
        }
    }
    assert!(!m.is_empty(), "no xstats parsed from {o}");
    m
}

pub fn xstat(x: &BTreeMap<String, u64>, name: &str) -> u64 {
    *x.get(name)
        .unwrap_or_else(|| panic!("no xstat {name} in {x:?}"))
}

/// The mempools and their in-use counts (`dump_mempool`).
pub fn mempools(t: &mut Testpmd) -> Vec<Pool> {
    let o = t
        .dump_mempool()
        .unwrap_or_else(|e| panic!("testpmd command dump_mempool: {e}"));
    let p = parse_mempools(&o);
    assert!(!p.is_empty(), "no mempool in {o}");
    p
}

/// Mbufs in use over every mempool.
pub fn mbufs_in_use(t: &mut Testpmd) -> u64 {
    mempools(t).iter().map(|p| p.in_use).sum()
}

/// The line our driver logs for a port: `net_mana: <port name>: <msg>`.
pub fn drv_line(port_name: &str, msg: &str) -> String {
    format!("net_mana: {port_name}: {msg}")
}

/// Asserts the output contains `needle`.
#[track_caller]
pub fn assert_has(out: &str, needle: &str) {
    assert!(out.contains(needle), "missing {needle:?} in:\n{out}");
}

/// Injects frames in chunks, waiting after each until `done(counters,
/// frames so far)` holds (testpmd drops what a full TX ring refuses, so a
/// forwarding test must not outrun the wire).
pub fn inject_paced(
    t: &Testpmd,
    mac: &str,
    frames: &[Vec<u8>],
    chunk: usize,
    done: impl Fn(&Counters, u64) -> bool,
) {
    let mut sent = 0u64;
    for c in frames.chunks(chunk) {
        t.inject(mac, c).expect("inject");
        sent += c.len() as u64;
        wait_dev(t, &format!("{sent} frames through"), |d| done(d, sent));
    }
}

/// `dpdk-proc-info` as a secondary of the testpmd of file prefix `prefix`
/// on the emulated function `PCI`, with our plugin; the arguments after
/// `--` are the caller's. `timeout 300` only catches a hang.
pub fn proc_info_command(env: &EmuEnv, prefix: &str) -> std::process::Command {
    let mut c = std::process::Command::new("timeout");
    c.arg("300")
        .arg("dpdk-proc-info")
        .args(["--file-prefix", prefix, "-d"])
        .arg(pmd())
        .args(["-a", PCI, "--"])
        .env("LD_PRELOAD", emu_lib_path().unwrap())
        .env("MANA_EMU_CONFIG", &env.config_path)
        .env("SYSFS_PCI_DEVICES", env.pci_devices())
        .stdin(std::process::Stdio::null());
    c
}

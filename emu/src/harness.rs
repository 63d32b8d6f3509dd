//! Running `dpdk-testpmd` on the emulated device: configuration, launch,
//! interactive commands, stats parsing and the device's counters.
//!
//! Used by the upstream-C-driver tests in `emu/tests/` and meant for the
//! Rust PMD's tests too: pass its plugin with [`Testpmd::builder`]'s
//! `driver(...)` (e.g. `target/<profile>/librte_net_mana.so`) instead of
//! [`upstream_c_driver`].
//!
//! ```no_run
//! use mana_emu::harness::*;
//! let env = EmuEnv::new("doc", mana_emu::Config::default_single()).unwrap();
//! let mut t = Testpmd::builder(&env).driver(upstream_c_driver().unwrap()).args(&["--forward-mode=txonly"]).spawn().unwrap();
//! t.cmd("start").unwrap();
//! let stats = t.port_stats(0).unwrap();
//! let dev = t.device_counters().unwrap();
//! ```

use crate::config::Config;
use crate::control::{self, Request};
use crate::device::{Counters, Fault, Trigger};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The repository root (parent of `emu/`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// `target/<profile>/` of the running test binary.
pub fn target_profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let mut d = exe.parent().unwrap().to_path_buf();
    if d.ends_with("deps") {
        d.pop();
    }
    d
}

/// The preload library `target/<profile>/examples/libmana_emu.so`
/// (`cargo build -p mana-emu --examples`; `cargo test` builds it too).
pub fn emu_lib_path() -> Result<PathBuf, String> {
    let p = target_profile_dir().join("examples/libmana_emu.so");
    if p.exists() {
        Ok(p)
    } else {
        Err(format!(
            "{} not built (cargo build -p mana-emu --examples)",
            p.display()
        ))
    }
}

/// The upstream C driver plugin of the DPDK under test: the one in
/// `NET_MANA_UPSTREAM_PMD` when set (DPDK's own build of net/mana, as
/// `scripts/matrix.sh` sets it for the releases `scripts/dpdk.sh` builds),
/// else built (once) for the installed DPDK by
/// `tests/upstream/build-c-driver.sh`.
pub fn upstream_c_driver() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("NET_MANA_UPSTREAM_PMD") {
        let p = PathBuf::from(p);
        return if p.exists() {
            Ok(p)
        } else {
            Err(format!(
                "NET_MANA_UPSTREAM_PMD={} does not exist",
                p.display()
            ))
        };
    }
    static BUILT: Mutex<Option<PathBuf>> = Mutex::new(None);
    let mut g = BUILT.lock().unwrap();
    if let Some(p) = &*g {
        return Ok(p.clone());
    }
    let script = repo_root().join("tests/upstream/build-c-driver.sh");
    let out = Command::new("bash")
        .arg(&script)
        .output()
        .map_err(|e| format!("{}: {e}", script.display()))?;
    if !out.status.success() {
        return Err(format!(
            "build-c-driver.sh failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let path = PathBuf::from(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .last()
            .unwrap_or("")
            .trim(),
    );
    *g = Some(path.clone());
    Ok(path)
}

/// The testpmd queue-state shim for the 22.11.x C driver (see
/// `tests/upstream/queue-state-shim.c`), built by `upstream_c_driver`;
/// `None` for a C driver from `NET_MANA_UPSTREAM_PMD` (23.11 and later set
/// their queue states).
pub fn queue_state_shim() -> Result<Option<PathBuf>, String> {
    if std::env::var_os("NET_MANA_UPSTREAM_PMD").is_some() {
        return Ok(None);
    }
    let d = upstream_c_driver()?;
    Ok(Some(d.parent().unwrap().join("libtestpmd_qstate_shim.so")))
}

/// The DPDK release under test, `(year, month)` (`pkg-config --modversion
/// libdpdk`, which follows `PKG_CONFIG_PATH` like the build does).
pub fn dpdk_version() -> Result<(u32, u32), String> {
    let out = Command::new("pkg-config")
        .args(["--modversion", "libdpdk"])
        .output()
        .map_err(|e| format!("pkg-config: {e}"))?;
    let v = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let mut it = v.split('.').map(|x| x.parse::<u32>());
    match (it.next(), it.next()) {
        (Some(Ok(y)), Some(Ok(m))) if out.status.success() => Ok((y, m)),
        _ => Err(format!("pkg-config --modversion libdpdk gave {v:?}")),
    }
}

pub fn testpmd_available() -> bool {
    Command::new("dpdk-testpmd")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// A private directory with the configuration, sysfs trees and run dir of
/// one emulated setup.
pub struct EmuEnv {
    pub dir: PathBuf,
    pub config: Config,
    pub config_path: PathBuf,
}

impl EmuEnv {
    /// Creates `/tmp/mana-emu-<name>-<pid>/` with `config` re-rooted into it.
    pub fn new(name: &str, mut config: Config) -> Result<EmuEnv, String> {
        let dir = std::env::temp_dir().join(format!("mana-emu-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        config.options.sysfs_root = dir.join("sys");
        config.options.run_dir = dir.join("run");
        if config.options.counters_dump.is_none() {
            config.options.counters_dump = Some(dir.join("counters.json"));
        }
        config.normalize()?;
        let config_path = dir.join("config.toml");
        std::fs::write(&config_path, config.to_toml()).map_err(|e| e.to_string())?;
        crate::sysfs::create_all(&config).map_err(|e| format!("sysfs: {e}"))?;
        Ok(EmuEnv {
            dir,
            config,
            config_path,
        })
    }

    pub fn pci_devices(&self) -> PathBuf {
        self.config.pci_devices_dir()
    }

    /// Counters written by the emulator at process exit.
    pub fn exit_counters(&self) -> Result<Counters, String> {
        let p = self.config.options.counters_dump.clone().unwrap();
        let s = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        serde_json::from_str(&s).map_err(|e| e.to_string())
    }
}

impl Drop for EmuEnv {
    fn drop(&mut self) {
        if std::env::var_os("MANA_EMU_KEEP").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// testpmd's "show port stats" numbers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortStats {
    pub rx_packets: u64,
    pub rx_missed: u64,
    pub rx_bytes: u64,
    pub rx_errors: u64,
    pub rx_nombuf: u64,
    pub tx_packets: u64,
    pub tx_errors: u64,
    pub tx_bytes: u64,
}

/// Per-stream forward stats printed by `stop` when there are more streams
/// than ports: (rx port, rx queue, tx port, tx queue, rx packets, tx packets, dropped).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamStats {
    pub rx_port: u16,
    pub rx_queue: u16,
    pub tx_port: u16,
    pub tx_queue: u16,
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub tx_dropped: u64,
}

fn num_after(line: &str, key: &str) -> Option<u64> {
    let i = line.find(key)? + key.len();
    line[i..]
        .trim_start()
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// `text` without testpmd's asynchronous event lines
/// (`"\nPort N: <name> event\n"`), which may split any other line; the
/// leading newline, written apart, may be elsewhere and stays.
pub fn without_events(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("Port ") {
        let line_end = rest[at..].find('\n').map(|e| at + e);
        match line_end {
            Some(end) if is_event_line(&rest[at..end]) => {
                // Drop the event's own leading newline when it is adjacent.
                let keep = if rest[..at].ends_with('\n') {
                    at - 1
                } else {
                    at
                };
                out.push_str(&rest[..keep]);
                rest = &rest[end + 1..];
            }
            _ => {
                out.push_str(&rest[..at + 5]);
                rest = &rest[at + 5..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Log lines written by other threads (the drivers' interrupt and recovery
/// threads, EAL's alarms), which, written whole, can land inside the
/// prompt testpmd writes a byte at a time: `text` with each of them cut
/// out wherever it starts.
pub fn without_log_lines(text: &str) -> String {
    const PREFIXES: [&str; 4] = ["net_mana: ", "MANA_DRIVER: ", "EAL: ", "ETHDEV: "];
    let mut out = text.to_string();
    for p in PREFIXES {
        while let Some(at) = out.find(p) {
            let end = out[at..].find('\n').map_or(out.len(), |e| at + e + 1);
            out.replace_range(at..end, "");
        }
    }
    out
}

fn is_event_line(line: &str) -> bool {
    let Some(tail) = line.strip_prefix("Port ") else {
        return false;
    };
    let Some((port, name)) = tail.split_once(": ") else {
        return false;
    };
    !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) && name.ends_with(" event")
}

/// Parses the "NIC statistics for port N" block of `show port stats N`.
pub fn parse_port_stats(text: &str, port: u16) -> Option<PortStats> {
    let hdr = format!("NIC statistics for port {port} ");
    let start = text.rfind(&hdr)?;
    let block = &text[start..];
    let end = block.find("Throughput").unwrap_or(block.len());
    let block = &block[..end];
    let mut s = PortStats::default();
    for l in block.lines() {
        if l.contains("RX-packets:") {
            s.rx_packets = num_after(l, "RX-packets:")?;
            s.rx_missed = num_after(l, "RX-missed:")?;
            s.rx_bytes = num_after(l, "RX-bytes:")?;
        } else if l.contains("RX-errors:") {
            s.rx_errors = num_after(l, "RX-errors:")?;
        } else if l.contains("RX-nombuf:") {
            s.rx_nombuf = num_after(l, "RX-nombuf:")?;
        } else if l.contains("TX-packets:") {
            s.tx_packets = num_after(l, "TX-packets:")?;
            s.tx_errors = num_after(l, "TX-errors:")?;
            s.tx_bytes = num_after(l, "TX-bytes:")?;
        }
    }
    Some(s)
}

/// Parses every "Forward Stats for RX Port=.. /Queue=.. -> TX Port=../Queue=.." block.
pub fn parse_stream_stats(text: &str) -> Vec<StreamStats> {
    let mut out = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        if let Some(p) = l.find("Forward Stats for RX Port=") {
            let s = &l[p..];
            let nums: Vec<u64> = s
                .split(|c: char| !c.is_ascii_digit())
                .filter(|x| !x.is_empty())
                .filter_map(|x| x.parse().ok())
                .collect();
            if nums.len() < 4 {
                continue;
            }
            let Some(next) = lines.get(i + 1) else {
                continue;
            };
            out.push(StreamStats {
                rx_port: nums[0] as u16,
                rx_queue: nums[1] as u16,
                tx_port: nums[2] as u16,
                tx_queue: nums[3] as u16,
                rx_packets: num_after(next, "RX-packets:").unwrap_or(0),
                tx_packets: num_after(next, "TX-packets:").unwrap_or(0),
                tx_dropped: num_after(next, "TX-dropped:").unwrap_or(0),
            });
        }
    }
    out
}

/// One mempool from `dump_mempool` (see [`parse_mempools`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pool {
    pub name: String,
    pub size: u64,
    /// Objects neither in the pool's ring nor in an lcore cache.
    pub in_use: u64,
    /// Objects in the pool's ring and the lcore caches. More than `size`
    /// means some object was freed twice.
    pub free: u64,
}

/// The driver's xstats of completions it refused or lost (per queue, both
/// directions): what a lying device's lies show up as.
pub const REFUSED_COMPLETION_XSTATS: [&str; 8] = [
    "cq_overflows",
    "stale_completions",
    "unexpected_completions",
    "bad_length_drops",
    "wrong_queue_completions",
    "bad_wqe_completions",
    "missed_completions",
    "errors",
];

pub fn parse_mempools(o: &str) -> Vec<Pool> {
    let mut out = Vec::new();
    for block in o.split("mempool <").skip(1) {
        let name = block.split('>').next().unwrap_or("").to_string();
        let mut size: Option<u64> = None;
        let mut cache = 0u64;
        let mut common: Option<u64> = None;
        for l in block.lines() {
            let l = l.trim();
            if let Some(v) = l.strip_prefix("size=") {
                size = v.parse().ok();
            } else if let Some(v) = l.strip_prefix("total_cache_count=") {
                cache = v.parse().unwrap_or(0);
            } else if let Some(v) = l.strip_prefix("common_pool_count=") {
                common = v.parse().ok();
                break;
            }
        }
        if let (Some(size), Some(common)) = (size, common) {
            // More free than the pool holds: an object was freed twice
            // (DPDK's mempool does not check). Fail loudly, here.
            assert!(
                cache + common <= size,
                "mempool {name}: {} objects free (cache {cache} + common {common}) but the pool holds {size}: an object was freed twice",
                cache + common
            );
            out.push(Pool {
                name,
                size,
                in_use: size - cache - common,
                free: cache + common,
            });
        }
    }
    out
}

pub struct TestpmdBuilder<'a> {
    env: &'a EmuEnv,
    driver: Option<PathBuf>,
    preload_extra: Vec<PathBuf>,
    eal: Vec<String>,
    args: Vec<String>,
    lcores: String,
    devargs: Vec<String>,
    timeout: Duration,
    file_prefix: Option<String>,
    hugepages: bool,
    envs: Vec<(String, String)>,
    binary: PathBuf,
    launcher: Option<PathBuf>,
}

impl<'a> TestpmdBuilder<'a> {
    /// The testpmd to run (default: `dpdk-testpmd` from `PATH`), e.g. one
    /// of another DPDK release (with `LD_LIBRARY_PATH` through `env`).
    pub fn testpmd(mut self, bin: PathBuf) -> Self {
        self.binary = bin;
        self
    }
    /// An environment variable for testpmd.
    pub fn env(mut self, k: &str, v: &str) -> Self {
        self.envs.push((k.into(), v.into()));
        self
    }
    /// The PMD plugin passed with `-d` (must not be in a world-writable dir).
    pub fn driver(mut self, p: PathBuf) -> Self {
        self.driver = Some(p);
        self
    }
    /// Another library to LD_PRELOAD after `libmana_emu.so`.
    pub fn preload(mut self, p: PathBuf) -> Self {
        self.preload_extra.push(p);
        self
    }
    /// Each library of `ps` (e.g. an `Option`) to LD_PRELOAD.
    pub fn preloads(mut self, ps: impl IntoIterator<Item = PathBuf>) -> Self {
        self.preload_extra.extend(ps);
        self
    }
    /// Extra EAL arguments.
    pub fn eal(mut self, a: &[&str]) -> Self {
        self.eal.extend(a.iter().map(|s| s.to_string()));
        self
    }
    /// testpmd application arguments (after `--`).
    pub fn args(mut self, a: &[&str]) -> Self {
        self.args.extend(a.iter().map(|s| s.to_string()));
        self
    }
    /// `-l` list, or an `--lcores` map when it contains `@` (lcore ids
    /// apart from another process's on the same CPUs: a mempool's per-lcore
    /// caches are shared between the processes of one file prefix).
    pub fn lcores(mut self, l: &str) -> Self {
        self.lcores = l.into();
        self
    }
    /// A DPDK file prefix of our own, shared with other processes (primary
    /// and secondaries); by default each run has a private one.
    pub fn file_prefix(mut self, p: &str) -> Self {
        self.file_prefix = Some(p.into());
        self
    }
    /// Hugepage memory (`-m 256`) instead of `--no-huge`: what DPDK's
    /// multi-process support needs (see [`Hugepages`]).
    pub fn hugepages(mut self) -> Self {
        self.hugepages = true;
        self
    }
    /// `-a` device arguments; defaults to every configured adapter.
    pub fn device(mut self, d: &str) -> Self {
        self.devargs.push(d.into());
        self
    }
    /// Hard limit for the whole run (the process is killed after it).
    pub fn timeout(mut self, t: Duration) -> Self {
        self.timeout = t;
        self
    }
    /// A program that runs testpmd elsewhere (e.g. in a chroot), given the
    /// command line `stdbuf -oL -eL <testpmd> <args>` to exec as the same
    /// process. The preload list goes in `MANA_EMU_PRELOAD` instead of
    /// `LD_PRELOAD`, for the launcher to set where testpmd runs: the
    /// launcher itself must not load the emulator.
    pub fn launcher(mut self, p: PathBuf) -> Self {
        self.launcher = Some(p);
        self
    }

    pub fn spawn(self) -> Result<Testpmd, String> {
        let emu = emu_lib_path()?;
        let mut preload = vec![emu.display().to_string()];
        preload.extend(self.preload_extra.iter().map(|p| p.display().to_string()));
        static RUNS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let prefix = self.file_prefix.clone().unwrap_or_else(|| {
            format!(
                "manaemu{}-{}",
                std::process::id(),
                RUNS.fetch_add(1, Ordering::Relaxed)
            )
        });
        // stdout is a pipe: make testpmd's printf output line-buffered so
        // replies arrive before the next prompt (stdbuf execs, same pid).
        let mut cmd = match &self.launcher {
            Some(l) => {
                let mut c = Command::new(l);
                c.arg("stdbuf");
                c.env("MANA_EMU_PRELOAD", preload.join(" "));
                c
            }
            None => {
                let mut c = Command::new("stdbuf");
                c.env("LD_PRELOAD", preload.join(" "));
                c
            }
        };
        cmd.args(["-oL", "-eL"]).arg(&self.binary);
        if self.hugepages {
            cmd.args(["-m", "256"]);
        } else {
            cmd.args(["--no-huge", "-m", "1024"]);
        }
        cmd.args(["--iova-mode=va", "--file-prefix"]).arg(&prefix);
        let lcores = if self.lcores.contains('@') {
            "--lcores"
        } else {
            "-l"
        };
        cmd.args([lcores, &self.lcores]);
        if let Some(d) = &self.driver {
            cmd.arg("-d").arg(d);
        }
        if self.devargs.is_empty() {
            for a in &self.env.config.adapters {
                cmd.arg("-a").arg(&a.pci);
            }
        } else {
            for d in &self.devargs {
                cmd.arg("-a").arg(d);
            }
        }
        cmd.args(&self.eal);
        cmd.arg("--");
        cmd.args(["-i", "--total-num-mbufs=8192"]);
        cmd.args(&self.args);
        cmd.env("MANA_EMU_CONFIG", &self.env.config_path);
        cmd.env("SYSFS_PCI_DEVICES", self.env.pci_devices());
        for (k, v) in &self.envs {
            cmd.env(k, v);
        }
        // stdout and stderr share one pipe, so what a command logs is read
        // in the order written: before the prompt that follows it.
        let (reader, writer) = std::io::pipe().map_err(|e| format!("pipe: {e}"))?;
        let writer2 = writer.try_clone().map_err(|e| format!("pipe: {e}"))?;
        cmd.stdin(Stdio::piped()).stdout(writer).stderr(writer2);
        let spawned = cmd.spawn();
        // The command holds the pipe's write end: drop it, or no EOF.
        drop(cmd);
        let mut child = spawned.map_err(|e| format!("spawn dpdk-testpmd: {e}"))?;
        let out = Arc::new(Mutex::new(String::new()));
        {
            let out = out.clone();
            let pid = child.id();
            std::thread::spawn(move || {
                let mut r = BufReader::new(reader);
                let mut line = String::new();
                while r.read_line(&mut line).map(|n| n > 0).unwrap_or(false) {
                    out.lock().unwrap().push_str(&line);
                    line.clear();
                }
                // Output closed: say how testpmd ended, so a test waiting
                // for more reports the crash rather than a timeout.
                let note = exit_note(pid);
                out.lock().unwrap().push_str(&note);
            });
        }
        let stdin = child.stdin.take();
        // Watchdog: every run is bounded, whatever the test does.
        let done = Arc::new(AtomicBool::new(false));
        {
            let done = done.clone();
            let pid = child.id() as libc::pid_t;
            let deadline = Instant::now() + self.timeout.max(RUN_HANG);
            std::thread::spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    if Instant::now() > deadline {
                        // SAFETY: signalling the child we spawned (not yet reaped: `done` is set before wait).
                        unsafe { libc::kill(pid, libc::SIGKILL) };
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            });
        }
        let t = Testpmd {
            done,
            child,
            stdin,
            out,
            run_dir: self.env.config.options.run_dir.clone(),
            started: Instant::now(),
            deadline: Instant::now() + self.timeout.max(RUN_HANG),
            // A secondary's files live in its primary's directory.
            runtime: (!self.eal.iter().any(|a| a.contains("secondary")))
                .then(|| RuntimeDir::new(&prefix)),
        };
        let mut t = t;
        t.cmd("")
            .map_err(|e| format!("testpmd did not start: {e}"))?;
        Ok(t)
    }
}

/// Where EAL keeps the runtime files of `prefix` (eal_get_runtime_dir:
/// `/var/run/dpdk` for root, else `$XDG_RUNTIME_DIR/dpdk` or `/tmp/dpdk`).
pub fn dpdk_runtime_dir(prefix: &str) -> PathBuf {
    use std::os::unix::fs::MetadataExt;
    let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    let base = if root {
        PathBuf::from("/var/run")
    } else {
        std::env::var_os("XDG_RUNTIME_DIR").map_or_else(|| PathBuf::from("/tmp"), PathBuf::from)
    };
    base.join("dpdk").join(prefix)
}

/// A DPDK process's runtime directory, removed on drop. EAL leaves it
/// behind when the process ends (13 MB of memseg lists with `--no-huge`),
/// and the suite's runs use fresh prefixes: without this a run of the
/// suite leaves gigabytes in /var/run/dpdk. Drop it after the processes
/// of its prefix have ended.
#[must_use = "the directory is removed when this is dropped"]
pub struct RuntimeDir(PathBuf);

impl RuntimeDir {
    pub fn new(prefix: &str) -> RuntimeDir {
        RuntimeDir(dpdk_runtime_dir(prefix))
    }
}

impl Drop for RuntimeDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running interactive `dpdk-testpmd`.
pub struct Testpmd {
    done: Arc<AtomicBool>,
    child: Child,
    stdin: Option<ChildStdin>,
    out: Arc<Mutex<String>>,
    run_dir: PathBuf,
    pub started: Instant,
    deadline: Instant,
    /// The prefix's runtime directory, for a primary process: dropped
    /// after `Drop::drop` has ended the process.
    runtime: Option<RuntimeDir>,
}

impl Testpmd {
    pub fn builder(env: &EmuEnv) -> TestpmdBuilder<'_> {
        TestpmdBuilder {
            env,
            driver: None,
            preload_extra: Vec::new(),
            eal: Vec::new(),
            args: Vec::new(),
            lcores: "0,1".into(),
            devargs: Vec::new(),
            timeout: Duration::from_secs(120),
            file_prefix: None,
            hugepages: false,
            envs: Vec::new(),
            binary: PathBuf::from("dpdk-testpmd"),
            launcher: None,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// How testpmd ended, once it has (its output closed).
    pub fn exited(&self) -> Option<String> {
        let o = self.out.lock().unwrap();
        let i = o.rfind(EXIT_MARK)?;
        Some(
            o[i + EXIT_MARK.len()..]
                .trim_end_matches([']', '\n'])
                .to_string(),
        )
    }

    /// Everything testpmd printed so far.
    pub fn output(&self) -> String {
        self.out.lock().unwrap().clone()
    }

    /// Waits until the output (after `from` bytes) contains `pat`.
    pub fn wait_for_from(
        &self,
        from: usize,
        pat: &str,
        timeout: Duration,
    ) -> Result<String, String> {
        self.wait_until(from, pat, timeout, str::to_string, |v| v.contains(pat))
    }

    /// Waits until `done(view(output after from))`; returns the view. `pat`
    /// names what is awaited in the timeout message.
    fn wait_until(
        &self,
        from: usize,
        pat: &str,
        timeout: Duration,
        view: impl Fn(&str) -> String,
        done: impl Fn(&str) -> bool,
    ) -> Result<String, String> {
        let timeout = timeout.max(HANG);
        let t0 = Instant::now();
        loop {
            {
                let o = self.out.lock().unwrap();
                if o.len() >= from {
                    let v = view(&o[from..]);
                    if done(&v) {
                        return Ok(v);
                    }
                }
            }
            if let Some(how) = self.exited() {
                return Err(format!(
                    "{how} while waiting for {pat:?}; output:\n{}",
                    self.output()
                ));
            }
            if t0.elapsed() > timeout || Instant::now() > self.deadline {
                return Err(format!(
                    "no {pat:?} after {} s; output:\n{}",
                    t0.elapsed().as_secs(),
                    self.output()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn wait_for(&self, pat: &str, timeout: Duration) -> Result<String, String> {
        self.wait_for_from(0, pat, timeout)
    }

    /// Sends one command without waiting for it to finish (for a command
    /// that blocks until the test does something else); returns the output
    /// length before it, for `wait_for_from`.
    pub fn send(&mut self, c: &str) -> Result<usize, String> {
        let from = self.out.lock().unwrap().len();
        let stdin = self.stdin.as_mut().ok_or("stdin closed")?;
        stdin
            .write_all(format!("{c}\n\n").as_bytes())
            .map_err(|e| e.to_string())?;
        stdin.flush().map_err(|e| e.to_string())?;
        Ok(from)
    }

    /// Sends one command and returns what it printed.
    ///
    /// With a pipe on stdin, testpmd's command line prints its prompt only
    /// when the next input arrives, so the command is followed by an empty
    /// line: its prompt, `"testpmd> \r\n"`, marks the end of the output.
    pub fn cmd(&mut self, c: &str) -> Result<String, String> {
        let from = self.out.lock().unwrap().len();
        let stdin = self.stdin.as_mut().ok_or("stdin closed")?;
        stdin
            .write_all(format!("{c}\n\n").as_bytes())
            .map_err(|e| e.to_string())?;
        stdin.flush().map_err(|e| e.to_string())?;
        // Event callbacks print from another thread, possibly in the middle
        // of the prompt; the command's output is read without them.
        // testpmd writes its prompt a byte at a time, so an event printed
        // meanwhile (itself possibly split at its leading newline) can land
        // inside it: look for the prompt without event lines and newlines.
        self.wait_until(from, "testpmd> \r\n", HANG, without_events, |v| {
            without_log_lines(v)
                .replace('\n', "")
                .contains("testpmd> \r")
        })
    }

    /// Every mempool's dump: `dump_mempool`, which testpmd 26.07 renamed
    /// `dump mempool`.
    pub fn dump_mempool(&mut self) -> Result<String, String> {
        let o = self.cmd("dump_mempool")?;
        if o.contains("Command not found") {
            return self.cmd("dump mempool");
        }
        Ok(o)
    }

    pub fn port_stats(&mut self, port: u16) -> Result<PortStats, String> {
        let o = self.cmd(&format!("show port stats {port}"))?;
        parse_port_stats(&o, port).ok_or_else(|| format!("no stats in {o:?}"))
    }

    /// The emulator inside testpmd names its socket after testpmd's pid.
    pub fn socket(&self) -> Result<PathBuf, String> {
        Ok(control::socket_path(&self.run_dir, self.child.id()))
    }

    pub fn request(&self, req: &Request) -> Result<control::Reply, String> {
        control::request(&self.socket()?, req)
    }

    /// The device's counters, read over the control socket.
    pub fn device_counters(&self) -> Result<Counters, String> {
        self.request(&Request::Counters)?
            .counters
            .ok_or_else(|| "no counters".into())
    }

    /// What the device holds now (see `DeviceState`).
    pub fn device_state(&self) -> Result<crate::device::DeviceState, String> {
        self.request(&Request::State)?
            .state
            .ok_or_else(|| "no state".into())
    }

    pub fn fault(&self, fault: Fault) -> Result<(), String> {
        self.fault_at(fault, Trigger::Now)
    }

    pub fn fault_at(&self, fault: Fault, trigger: Trigger) -> Result<(), String> {
        self.request(&Request::Fault { fault, trigger }).map(|_| ())
    }

    pub fn inject(&self, mac: &str, frames: &[Vec<u8>]) -> Result<(), String> {
        for chunk in frames.chunks(256) {
            let frames = chunk.iter().map(|f| control::hex_encode(f)).collect();
            self.request(&Request::Inject {
                mac: mac.into(),
                frames,
            })?;
        }
        Ok(())
    }

    /// Polls the device counters until `pred` holds.
    pub fn wait_device(
        &self,
        timeout: Duration,
        pred: impl Fn(&Counters) -> bool,
    ) -> Result<Counters, String> {
        let timeout = timeout.max(HANG);
        let t0 = Instant::now();
        loop {
            let c = self.device_counters()?;
            if pred(&c) {
                return Ok(c);
            }
            if t0.elapsed() > timeout {
                return Err(format!(
                    "device counters never matched in {} s; last seen: {c:?}",
                    t0.elapsed().as_secs()
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The runtime directory EAL made for this (primary) process, removed
    /// when this value is dropped.
    pub fn runtime_dir(&self) -> Option<&Path> {
        self.runtime.as_ref().map(|r| r.0.as_path())
    }

    /// `quit`, then waits for the process (killing it after `timeout`).
    pub fn quit(mut self) -> Result<String, String> {
        if let Some(mut s) = self.stdin.take() {
            let _ = s.write_all(b"quit\n");
        }
        let t0 = Instant::now();
        loop {
            match self.child.try_wait() {
                Ok(Some(st)) => {
                    self.done.store(true, Ordering::Relaxed);
                    // The reader threads may still be taking the last
                    // lines: they mark the end of the output when done.
                    while self.exited().is_none() && t0.elapsed() < HANG {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    let out = self.output();
                    return if st.success() {
                        Ok(out)
                    } else {
                        Err(format!("testpmd exited with {st}:\n{out}"))
                    };
                }
                Ok(None) if t0.elapsed() < HANG => std::thread::sleep(Duration::from_millis(50)),
                _ => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    self.done.store(true, Ordering::Relaxed);
                    return Err(format!("testpmd did not quit:\n{}", self.output()));
                }
            }
        }
    }
}

impl Drop for Testpmd {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        self.done.store(true, Ordering::Relaxed);
    }
}

/// 2 MiB hugepages reserved (and hugetlbfs mounted) for a test, as DPDK's
/// multi-process support needs; the previous reservation is restored on
/// drop. Needs root.
pub struct Hugepages(u64);

impl Hugepages {
    const NR: &'static str = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages";

    fn read() -> u64 {
        std::fs::read_to_string(Self::NR)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    }

    pub fn reserve(n: u64) -> Result<Hugepages, String> {
        let before = Self::read();
        if before < n {
            std::fs::write(Self::NR, n.to_string())
                .map_err(|e| format!("reserving {n} hugepages in {}: {e}", Self::NR))?;
        }
        let now = Self::read();
        if now < n {
            return Err(format!("only {now} of {n} hugepages could be reserved"));
        }
        let mounted = std::fs::read_to_string("/proc/mounts")
            .map_err(|e| e.to_string())?
            .contains("hugetlbfs");
        if !mounted {
            std::fs::create_dir_all("/dev/hugepages").map_err(|e| e.to_string())?;
            let st = Command::new("mount")
                .args(["-t", "hugetlbfs", "nodev", "/dev/hugepages"])
                .status()
                .map_err(|e| e.to_string())?;
            if !st.success() {
                return Err("mounting hugetlbfs on /dev/hugepages failed".into());
            }
        }
        Ok(Hugepages(before))
    }
}

impl Drop for Hugepages {
    fn drop(&mut self) {
        let _ = std::fs::write(Self::NR, self.0.to_string());
    }
}

const EXIT_MARK: &str = "\n[harness: ";

/// The least any wait of the harness gives an event before it reports a
/// hang (a timeout passed by a test is raised to it): tests wait for
/// events, never for a span of time, and a loaded 2-core machine takes
/// seconds where an idle one takes milliseconds.
pub const HANG: Duration = Duration::from_secs(120);

/// The least a whole testpmd run gets before the watchdog kills it.
const RUN_HANG: Duration = Duration::from_secs(900);

/// Waits (without reaping: `Testpmd` still owns the child) until `pid` has
/// ended and describes how.
fn exit_note(pid: u32) -> String {
    // SAFETY: a zeroed siginfo_t is a valid out-parameter.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: waits on our own child; WNOWAIT leaves it to `Child::wait`.
    let r = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOWAIT,
        )
    };
    if r != 0 {
        return format!("{EXIT_MARK}dpdk-testpmd closed its output]\n");
    }
    // SAFETY: filled in by a successful waitid for an exited child.
    let status = unsafe { info.si_status() };
    if info.si_code == libc::CLD_EXITED {
        format!("{EXIT_MARK}dpdk-testpmd exited with status {status}]\n")
    } else {
        // SAFETY: strsignal returns a static or thread-local string.
        let name = unsafe { std::ffi::CStr::from_ptr(libc::strsignal(status)) };
        format!(
            "{EXIT_MARK}dpdk-testpmd killed by signal {status} ({})]\n",
            name.to_string_lossy()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::{without_events, without_log_lines};

    #[test]
    fn event_lines_are_cut_out_even_inside_a_prompt() {
        let raw = "te\nPort 0: error recovery successful event\nstpmd> \r\n";
        assert_eq!(without_events(raw), "testpmd> \r\n");
        let raw = "a\nPort 1: link state change event\nPort 1: x\n";
        assert_eq!(without_events(raw), "aPort 1: x\n");
        let kept = "\nPort 0: not an event line\n  RX-packets: 3\n";
        assert_eq!(without_events(kept), kept);
        // The event's leading newline written apart, inside the prompt.
        let raw = "Done.\ntestpmd\n> \r\ntestpmd> Port 0: error recovery successful event\n";
        let v = without_events(raw);
        assert_eq!(v, "Done.\ntestpmd\n> \r\ntestpmd> ");
        assert!(v.replace('\n', "").contains("testpmd> \r"));
    }

    #[test]
    fn a_driver_log_line_inside_the_prompt_does_not_hide_it() {
        // Seen with DPDK 24.11: the recovery thread's line split the prompt.
        let raw = "tesnet_mana: 7870:00:00.0_port1: device reset (IBV_EVENT_DEVICE_FATAL): \
                   stopping traffic and recovering\n\nPort 0: error recovering event\n\
                   net_mana: 7870:00:00.0_port2: stopping\ntpmd> \r\n";
        let v = without_events(raw);
        assert!(!v.replace('\n', "").contains("testpmd> \r"));
        assert!(without_log_lines(&v)
            .replace('\n', "")
            .contains("testpmd> \r"));
        assert_eq!(without_log_lines("a\nEAL: x\nb"), "a\nb");
    }
}

//! One guest: QEMU from the cached trixie chroot (software emulation: this
//! machine's /dev/kvm is PVM and cannot run stock kernels), the trixie cloud
//! kernel, a busybox initramfs with the kernel's modules, the MANA function
//! attached over vfio-user, the kernel console in a file and the control
//! channel on the second serial port.
//!
//! Everything the guest needs lives in a run directory inside the chroot
//! (QEMU sees `/tmp/<run>`, the host `<chroot>/tmp/<run>`), removed when the
//! guest is dropped.

use super::console::Console;
use super::initramfs::Initramfs;
use super::stack::{CDriver, Stack};
use std::fs;
use std::io;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where `scripts/guest-setup.sh` caches the guest's pieces.
pub fn cache_dir() -> PathBuf {
    let base = std::env::var_os("NET_MANA_CACHE").unwrap_or_else(|| "/var/cache/net-mana".into());
    PathBuf::from(base).join("guest")
}

/// The cached pieces, checked.
pub struct Pieces {
    pub chroot: PathBuf,
    pub kernel: PathBuf,
    pub kernel_version: String,
    /// Module files in load order (dependencies first).
    pub modules: Vec<PathBuf>,
    pub rootfs: PathBuf,
    /// Our PMD (`librte_net_mana.so`), put in the guest at [`GUEST_PMD`]
    /// when `MANA_GUEST_PMD` names it (scripts/guest.sh builds it).
    pub pmd: Option<PathBuf>,
    /// DPDK 22.11's own C driver (`librte_net_mana_upstream.so`, built by
    /// tests/upstream/build-c-driver.sh) and the testpmd queue-state shim
    /// beside it, put in the guest at [`GUEST_C_PMD`] and
    /// [`GUEST_QSTATE_SHIM`] when `MANA_GUEST_C_PMD` names the driver.
    pub c_pmd: Option<(PathBuf, PathBuf)>,
    /// The `mana-preflight` binary, put in the guest at
    /// [`GUEST_PREFLIGHT`] when `MANA_GUEST_PREFLIGHT` names it
    /// (scripts/guest.sh builds it).
    pub preflight: Option<PathBuf>,
    /// For a stack that runs `scripts/dpdk.sh`'s DPDK ([`Stack::dpdk_build`]):
    /// that install's prefix (`MANA_GUEST_DPDK`) and the guest directory
    /// it goes to.
    pub dpdk: Option<(PathBuf, &'static str)>,
}

/// Where the guest finds our PMD.
pub const GUEST_PMD: &str = "/usr/lib/net-mana/librte_net_mana.so";
/// Where the guest finds DPDK 22.11's C driver.
pub const GUEST_C_PMD: &str = "/usr/lib/net-mana/librte_net_mana_upstream.so";
/// Where the guest finds the testpmd queue-state shim the 22.11 C driver
/// needs (tests/upstream/queue-state-shim.c says why).
pub const GUEST_QSTATE_SHIM: &str = "/usr/lib/net-mana/libtestpmd_qstate_shim.so";
/// Where the guest finds `mana-preflight`.
pub const GUEST_PREFLIGHT: &str = "/usr/local/bin/mana-preflight";
/// bookworm's `dpdk-proc-info` (package dpdk), and where the guest finds it.
pub const HOST_PROC_INFO: &str = "/usr/bin/dpdk-proc-info";
pub const GUEST_PROC_INFO: &str = "/usr/local/bin/dpdk-proc-info";

impl Pieces {
    /// The pieces of `stack`.
    pub fn find(stack: &Stack) -> io::Result<Pieces> {
        let g = cache_dir();
        let missing = |what: &str| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "{what} missing under {}: run scripts/guest-setup.sh (as root) to install the guest tier",
                    g.display()
                ),
            )
        };
        let chroot = g.join("chroot");
        if !chroot.join("usr/bin/qemu-system-x86_64").exists() {
            return Err(missing("QEMU (chroot/usr/bin/qemu-system-x86_64)"));
        }
        // The stack's kernel (trixie's 6.12, `kernel/`; for `newest` the
        // newest cached), or another one (trixie-backports',
        // `kernel-backports/`) when MANA_GUEST_KERNEL names it.
        let kdir = match std::env::var("MANA_GUEST_KERNEL") {
            Ok(k) => k,
            Err(_) => stack
                .kernel
                .resolve(&g)
                .map_err(|e| io::Error::new(io::ErrorKind::NotFound, e))?
                .to_string(),
        };
        let kernel = g.join(&kdir).join("vmlinuz");
        if !kernel.exists() {
            return Err(missing(&format!("the kernel ({kdir}/vmlinuz)")));
        }
        let kernel_version = fs::read_to_string(g.join(&kdir).join("version"))
            .map_err(|_| missing(&format!("{kdir}/version")))?
            .trim()
            .to_string();
        let order = fs::read_to_string(g.join(&kdir).join("modules.order"))
            .map_err(|_| missing(&format!("{kdir}/modules.order")))?;
        let modules = order
            .lines()
            .filter(|l| !l.is_empty())
            .map(|l| g.join(&kdir).join("modules").join(l))
            .collect::<Vec<_>>();
        if let Some(m) = modules.iter().find(|m| !m.exists()) {
            return Err(missing(&m.display().to_string()));
        }
        let rootfs = g.join(stack.rootfs);
        if !rootfs.join("bin/busybox").exists() {
            return Err(missing(&format!(
                "stack {}'s userspace ({}/bin/busybox)",
                stack.name, stack.rootfs
            )));
        }
        let named = |var: &str| -> io::Result<Option<PathBuf>> {
            let p = std::env::var_os(var).map(PathBuf::from);
            match p.as_ref().filter(|p| !p.exists()) {
                Some(p) => Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("{var} names {}, which does not exist", p.display()),
                )),
                None => Ok(p),
            }
        };
        let pmd = named("MANA_GUEST_PMD")?;
        let preflight = named("MANA_GUEST_PREFLIGHT")?;
        // A packaged C driver is in the stack's userspace already.
        let c_pmd = match std::env::var_os("MANA_GUEST_C_PMD")
            .map(PathBuf::from)
            .filter(|_| stack.c_driver == CDriver::Built)
        {
            None => None,
            Some(p) => {
                let shim = p.with_file_name("libtestpmd_qstate_shim.so");
                if let Some(f) = [&p, &shim].into_iter().find(|f| !f.exists()) {
                    return Err(io::Error::new(
                        io::ErrorKind::NotFound,
                        format!(
                            "MANA_GUEST_C_PMD names {}, but {} does not exist: run tests/upstream/build-c-driver.sh",
                            p.display(),
                            f.display()
                        ),
                    ));
                }
                Some((p, shim))
            }
        };
        let dpdk = match stack.dpdk_build {
            None => None,
            Some(dir) => Some((dpdk_install(stack)?, dir)),
        };
        Ok(Pieces {
            chroot,
            kernel,
            kernel_version,
            modules,
            rootfs,
            pmd,
            c_pmd,
            preflight,
            dpdk,
        })
    }

    /// The initramfs: the base userspace, `/init`, and the modules under
    /// `/modules` (decompressed, in `/modules/order`).
    pub fn initramfs(&self) -> io::Result<Vec<u8>> {
        let mut i = Initramfs::new();
        i.tree(&self.rootfs)?;
        i.file("init", 0o755, include_bytes!("../../guest/init"));
        let mut order = String::new();
        for m in &self.modules {
            let name = m.file_name().unwrap().to_string_lossy().into_owned();
            i.file(&format!("modules/{name}"), 0o644, &fs::read(m)?);
            order.push_str(&name);
            order.push('\n');
        }
        i.file("modules/order", 0o644, order.as_bytes());
        if let Some(p) = &self.pmd {
            i.file(GUEST_PMD, 0o755, &fs::read(p)?);
        }
        if let Some((pmd, shim)) = &self.c_pmd {
            i.file(GUEST_C_PMD, 0o755, &fs::read(pmd)?);
            i.file(GUEST_QSTATE_SHIM, 0o755, &fs::read(shim)?);
        }
        if let Some(p) = &self.preflight {
            i.file(GUEST_PREFLIGHT, 0o755, &fs::read(p)?);
        }
        if let Some((prefix, dir)) = &self.dpdk {
            add_dpdk_build(&mut i, prefix, dir)?;
        }
        // The DPDK secondary of `dpdk-reset-loop`: this machine's (the same
        // bookworm DPDK as the guest's testpmd, whose libraries it uses).
        if let Ok(b) = fs::read(HOST_PROC_INFO) {
            i.file(GUEST_PROC_INFO, 0o755, &b);
        }
        Ok(i.finish())
    }
}

/// The DPDK install `MANA_GUEST_DPDK` names, checked to be `scripts/dpdk.sh`'s
/// build of `stack`'s release (its testpmd, its pkg-config version, the C
/// driver in `reference/` beside it).
fn dpdk_install(stack: &Stack) -> io::Result<PathBuf> {
    let err = |m: String| io::Error::new(io::ErrorKind::NotFound, m);
    let prefix = std::env::var_os("MANA_GUEST_DPDK").map(PathBuf::from).ok_or_else(|| {
        err(format!(
            "stack {} runs DPDK {} as scripts/dpdk.sh builds it: MANA_GUEST_DPDK must name that install (`scripts/dpdk.sh {}` prints it; scripts/guest.sh --stack {} sets it)",
            stack.name, stack.dpdk, stack.dpdk, stack.name
        ))
    })?;
    let pc = prefix.join("lib/pkgconfig/libdpdk.pc");
    let version = fs::read_to_string(&pc)
        .map_err(|e| {
            err(format!(
                "MANA_GUEST_DPDK={}: {}: {e}",
                prefix.display(),
                pc.display()
            ))
        })?
        .lines()
        .find_map(|l| l.strip_prefix("Version:").map(|v| v.trim().to_string()))
        .unwrap_or_default();
    if version != stack.dpdk && !version.starts_with(&format!("{}.", stack.dpdk)) {
        return Err(err(format!(
            "MANA_GUEST_DPDK={} is DPDK {version:?}, stack {} runs {} (`scripts/dpdk.sh {}` prints its install)",
            prefix.display(),
            stack.name,
            stack.dpdk,
            stack.dpdk
        )));
    }
    for f in [prefix.join("bin/dpdk-testpmd"), c_driver_of(&prefix)] {
        if !f.exists() {
            return Err(err(format!(
                "MANA_GUEST_DPDK={}: {} does not exist (scripts/dpdk.sh {} builds it)",
                prefix.display(),
                f.display(),
                stack.dpdk
            )));
        }
    }
    Ok(prefix)
}

/// Where `scripts/dpdk.sh` keeps a release's C net/mana: `reference/`
/// beside the install prefix.
fn c_driver_of(prefix: &Path) -> PathBuf {
    prefix
        .with_file_name("reference")
        .join("librte_net_mana_c.so")
}

/// `scripts/dpdk.sh`'s install at `prefix` into the guest under `dir`:
/// testpmd, every library by its soname (`librte_eal.so.26`: what the
/// dynamic linker looks for; the static archives and development links
/// stay out) and the C driver.
fn add_dpdk_build(i: &mut Initramfs, prefix: &Path, dir: &str) -> io::Result<()> {
    i.file(
        &format!("{dir}/bin/dpdk-testpmd"),
        0o755,
        &read(&prefix.join("bin/dpdk-testpmd"))?,
    );
    let lib = prefix.join("lib");
    let mut libs: Vec<_> = fs::read_dir(&lib)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", lib.display())))?
        .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect::<Result<_, _>>()?;
    libs.sort();
    for name in libs.iter().filter(|n| is_soname(n)) {
        let path = prefix.join("lib").join(name);
        // Since 25.11 a driver lives in the plugin directory and lib/
        // links to it; scripts/dpdk.sh moved the C driver out of there, so
        // lib/librte_net_mana.so.26 leads nowhere (the driver goes in from
        // reference/ below).
        if !path.exists() {
            continue;
        }
        // fs::read follows the soname's link to the versioned file.
        i.file(&format!("{dir}/lib/{name}"), 0o755, &read(&path)?);
    }
    i.file(
        &format!("{dir}/reference/librte_net_mana_c.so"),
        0o755,
        &read(&c_driver_of(prefix))?,
    );
    Ok(())
}

/// fs::read, naming the file it could not read.
fn read(path: &Path) -> io::Result<Vec<u8>> {
    fs::read(path).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

/// `librte_eal.so.26`, not `librte_eal.so`, `librte_eal.so.26.2` or
/// `librte_eal.a`.
fn is_soname(name: &str) -> bool {
    name.rsplit_once(".so.")
        .is_some_and(|(_, v)| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
}

/// How to start a guest.
#[derive(Clone, Debug)]
pub struct VmOptions {
    pub cpus: u32,
    pub memory_mb: u32,
    /// Attach the MANA function served on this socket (a path inside the
    /// run directory, see [`Vm::path`]).
    pub vfio_socket: Option<String>,
    pub boot_timeout: Duration,
}

impl Default for VmOptions {
    fn default() -> Self {
        VmOptions {
            cpus: 2,
            memory_mb: 512,
            vfio_socket: None,
            boot_timeout: Duration::from_secs(120),
        }
    }
}

/// A run directory inside the chroot, removed on drop.
pub struct RunDir {
    /// As the host sees it.
    pub host: PathBuf,
    /// As QEMU (in the chroot) sees it.
    pub guest: String,
}

impl RunDir {
    pub fn new(p: &Pieces) -> io::Result<RunDir> {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("net-mana-guest-{}-{n}", std::process::id());
        let tmp = p.chroot.join("tmp");
        // Run directories of runs that were killed before they cleaned up.
        for e in fs::read_dir(&tmp).into_iter().flatten().flatten() {
            let f = e.file_name().to_string_lossy().into_owned();
            let pid = f
                .strip_prefix("net-mana-guest-")
                .and_then(|r| r.split('-').next())
                .and_then(|p| p.parse::<u32>().ok());
            if pid.is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists()) {
                let _ = fs::remove_dir_all(e.path());
            }
        }
        let host = tmp.join(&name);
        let _ = fs::remove_dir_all(&host);
        fs::create_dir_all(&host)?;
        Ok(RunDir {
            host,
            guest: format!("/tmp/{name}"),
        })
    }
    /// `name` as the host sees it.
    pub fn host_path(&self, name: &str) -> PathBuf {
        self.host.join(name)
    }
    /// `name` as QEMU sees it.
    pub fn guest_path(&self, name: &str) -> String {
        format!("{}/{name}", self.guest)
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.host);
    }
}

/// A running guest.
pub struct Vm {
    child: Child,
    pub console: Console,
    pub kernel_log: PathBuf,
    pub qemu_log: PathBuf,
    /// `uname -r` and the CPU count the guest reported when it came up.
    pub banner: String,
    pub boot_time: Duration,
}

impl Vm {
    /// Boots a guest in `run` and waits for its control channel.
    pub fn boot(p: &Pieces, run: &RunDir, opts: &VmOptions) -> io::Result<Vm> {
        let t0 = Instant::now();
        fs::write(run.host_path("initramfs.cpio"), p.initramfs()?)?;
        fs::copy(&p.kernel, run.host_path("vmlinuz"))?;
        let ctl_host = run.host_path("ctl.sock");
        let listener = UnixListener::bind(&ctl_host)?;
        let kernel_log = run.host_path("console.log");
        let qemu_log = run.host_path("qemu.log");
        let mem = format!("{}M", opts.memory_mb);
        let mut args: Vec<String> = vec![
            p.chroot.display().to_string(),
            "qemu-system-x86_64".into(),
            "-machine".into(),
            "q35,memory-backend=mem".into(),
            "-accel".into(),
            "tcg".into(),
            "-cpu".into(),
            "max".into(),
            "-smp".into(),
            opts.cpus.to_string(),
            "-m".into(),
            mem.clone(),
            "-object".into(),
            format!("memory-backend-memfd,id=mem,size={mem},share=on"),
            "-nodefaults".into(),
            "-no-user-config".into(),
            "-display".into(),
            "none".into(),
            "-no-reboot".into(),
            "-kernel".into(),
            run.guest_path("vmlinuz"),
            "-initrd".into(),
            run.guest_path("initramfs.cpio"),
            "-append".into(),
            "console=ttyS0 panic=-1 ipv6.disable=1 mitigations=off tsc=reliable no_timer_check"
                .into(),
            "-serial".into(),
            format!("file:{}", run.guest_path("console.log")),
            "-chardev".into(),
            format!("socket,id=ctl,path={}", run.guest_path("ctl.sock")),
        ];
        if let Some(s) = &opts.vfio_socket {
            args.push("-device".into());
            args.push(format!(
                r#"{{"driver":"vfio-user-pci","socket":{{"path":"{s}","type":"unix"}}}}"#
            ));
        }
        // The control channel is a virtio console (the guest's hvc0), not a
        // second 16550: under TCG on a busy host a command's answer on ttyS1
        // has been seen never to arrive while the guest ran on
        // (emu-pci/README.md). Its own slot, after the function's 00:01.0.
        args.extend(
            [
                "-device",
                "virtio-serial-pci,id=vser,addr=0x6",
                "-device",
                "virtconsole,bus=vser.0,chardev=ctl",
            ]
            .map(String::from),
        );
        // MANA_GUEST_QEMU_ARGS: more QEMU arguments, split at whitespace
        // (`-trace enable=vfio_user_*` to see the vfio-user messages).
        if let Ok(extra) = std::env::var("MANA_GUEST_QEMU_ARGS") {
            args.extend(extra.split_whitespace().map(String::from));
        }
        let child = Command::new("chroot")
            .args(&args)
            .stdin(Stdio::null())
            .stdout(fs::File::create(&qemu_log)?)
            .stderr(fs::File::create(&qemu_log)?.try_clone()?)
            .spawn()?;
        let mut vm = Vm {
            child,
            console: Console::accept(&listener, opts.boot_timeout)?,
            kernel_log,
            qemu_log,
            banner: String::new(),
            boot_time: Duration::ZERO,
        };
        let left = opts.boot_timeout.saturating_sub(t0.elapsed());
        match vm.console.wait_ready(left) {
            Ok(b) => vm.banner = b,
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!(
                        "{e}\n--- QEMU ---\n{}\n--- kernel ---\n{}",
                        vm.qemu_output(),
                        vm.kernel_output()
                    ),
                ))
            }
        }
        vm.boot_time = t0.elapsed();
        Ok(vm)
    }

    /// The kernel console so far.
    pub fn kernel_output(&self) -> String {
        fs::read_to_string(&self.kernel_log).unwrap_or_default()
    }

    pub fn qemu_output(&self) -> String {
        fs::read_to_string(&self.qemu_log).unwrap_or_default()
    }

    /// Whether QEMU is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Powers the guest off (asking first, then killing QEMU).
    pub fn shutdown(&mut self) {
        if self.running() {
            let _ = self.console.send_only("poweroff -f");
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(10) && self.running() {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        if self.running() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

impl Drop for Vm {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dpdk_build_goes_in_by_soname() {
        assert!(is_soname("librte_eal.so.26"));
        assert!(!is_soname("librte_eal.so.26.2"));
        assert!(!is_soname("librte_eal.so"));
        assert!(!is_soname("librte_eal.a"));
        assert_eq!(
            c_driver_of(Path::new("/var/cache/net-mana/dpdk-26.07/install")),
            Path::new("/var/cache/net-mana/dpdk-26.07/reference/librte_net_mana_c.so")
        );
    }
}

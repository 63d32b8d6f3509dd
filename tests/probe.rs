//! The driver loads into dpdk-testpmd as a plugin, is probed for a MANA PCI
//! function (a fake sysfs tree through SYSFS_PCI_DEVICES), and explains in
//! the log why a function without an RDMA device cannot be used.

use std::path::{Path, PathBuf};
use std::process::Command;

fn pmd() -> PathBuf {
    // Next to the test: `cargo test` refreshes deps/, not target/<profile>/.
    let exe = std::env::current_exe().unwrap();
    exe.with_file_name("librte_net_mana.so")
}

/// A fake PCI device directory as EAL's scan reads it.
fn fake_pci(root: &Path, addr: &str, device: &str) {
    let dev = root.join(addr);
    std::fs::create_dir_all(&dev).unwrap();
    std::fs::create_dir_all(root.join("drivers/mana")).unwrap();
    for (f, v) in [
        ("vendor", "0x1414"),
        ("device", device),
        ("subsystem_vendor", "0x1414"),
        ("subsystem_device", "0x0001"),
        ("class", "0x020000"),
        ("numa_node", "0"),
    ] {
        std::fs::write(dev.join(f), format!("{v}\n")).unwrap();
    }
    std::fs::write(dev.join("resource"), "0x0 0x0 0x0\n".repeat(6)).unwrap();
    let link = dev.join("driver");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink("../drivers/mana", link).unwrap();
}

fn testpmd(root: &Path, prefix: &str, dev_arg: &[&str]) -> String {
    let _runtime = mana_emu::harness::RuntimeDir::new(prefix);
    let mut cmd = Command::new("timeout");
    cmd.args([
        "60",
        "dpdk-testpmd",
        "--no-huge",
        "-m",
        "1024",
        "--file-prefix",
        prefix,
        // The PCI bus logs its probes at INFO in its own log type since
        // 23.11 (22.11: EAL's, shown by default).
        "--log-level=bus.pci:info",
        "-d",
    ])
    .arg(pmd())
    .args(dev_arg)
    .args(["--", "-i", "--total-num-mbufs=8192"])
    .env("SYSFS_PCI_DEVICES", root)
    .stdin(std::process::Stdio::null());
    let out = cmd
        .output()
        .expect("dpdk-testpmd runs (scripts/setup.sh installs it)");
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// EAL's line for the probe of `id` at 7870:00:00.0 (23.11 and later add
/// the socket).
#[track_caller]
fn assert_probed(log: &str, id: &str) {
    let line = format!("Probe PCI driver: net_mana ({id}) device: 7870:00:00.0");
    assert!(
        log.contains(&format!("EAL: {line}\n")) || log.contains(&format!("{line} (socket 0)")),
        "no {line:?} in:\n{log}"
    );
}

/// The PCI bus's line for a device it could not probe (EAL's until 23.11,
/// PCI_BUS's in 24.11, reworded by 26.07).
#[track_caller]
fn assert_refused(log: &str) {
    assert!(
        log.contains("EAL: Requested device 7870:00:00.0 cannot be used")
            || log.contains("PCI_BUS: Requested device 7870:00:00.0 cannot be used")
            || log.contains("EAL: Failed to probe device 7870:00:00.0"),
        "EAL did not report the failed probe:\n{log}"
    );
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("net-mana-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn a_mana_function_without_rdma_device_is_probed_and_explained() {
    let root = scratch("probe-diag");
    fake_pci(&root, "7870:00:00.0", "0x00ba");
    // Azure's documented form: --vdev=<pci>,mac=...
    let log = testpmd(
        &root,
        &format!("mana-diag-{}", std::process::id()),
        &["--vdev=7870:00:00.0,mac=00:0d:3a:76:3b:d0"],
    );
    assert_probed(&log, "1414:00ba");
    assert!(
        log.contains("net_mana: 7870:00:00.0: no RDMA device belongs to this MANA PCI function, so its ports cannot be probed"),
        "{log}"
    );
    assert!(
        log.contains("net_mana:   libibverbs lists no RDMA devices at all"),
        "{log}"
    );
    assert!(log.contains("run 'modprobe mana_ib'"), "{log}");
    assert_refused(&log);
    assert!(log.contains("testpmd: No probed ethernet devices"), "{log}");
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn the_pf_id_is_matched_and_bad_devargs_fail_the_probe_with_the_reason() {
    let root = scratch("probe-devargs");
    fake_pci(&root, "7870:00:00.0", "0x00b9");
    let log = testpmd(
        &root,
        &format!("mana-devargs-{}", std::process::id()),
        &["-a", "7870:00:00.0,mac=00:0d:3a:76:3b:zz"],
    );
    assert_probed(&log, "1414:00b9");
    assert!(
        log.contains("net_mana: 7870:00:00.0: invalid devargs 'mac=00:0d:3a:76:3b:zz': mac=00:0d:3a:76:3b:zz: invalid MAC address"),
        "{log}"
    );
    let log = testpmd(
        &root,
        &format!("mana-devargs-{}", std::process::id()),
        &["-a", "7870:00:00.0,foo=1"],
    );
    assert!(
        log.contains(
            "net_mana: 7870:00:00.0: invalid devargs 'foo=1': foo=1: unknown key 'foo' \
             (the accepted keys are mac=<mac_addr>, rx_path=auto|scalar|vector and \
             tx_path=auto|scalar|vector"
        ),
        "{log}"
    );
    let log = testpmd(
        &root,
        &format!("mana-devargs-{}", std::process::id()),
        &["-a", "7870:00:00.0,rx_path=fast"],
    );
    assert!(
        log.contains(
            "net_mana: 7870:00:00.0: invalid devargs 'rx_path=fast': rx_path=fast: \
             unknown receive path (use auto, scalar or vector"
        ),
        "{log}"
    );
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn pmdinfo_lists_ids_params_and_kernel_modules() {
    let out = Command::new("dpdk-pmdinfo.py")
        .arg(pmd())
        .output()
        .expect("dpdk-pmdinfo.py");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    for needle in [
        "\"name\": \"net_mana\"",
        "\"params\": \"mac=<mac_addr> rx_path=<auto|scalar|vector> tx_path=<auto|scalar|vector>\"",
        "\"kmod\": \"* ib_uverbs & mana_ib\"",
        "\"device\": \"00ba\"",
        "\"device\": \"00b9\"",
        "\"vendor\": \"1414\"",
    ] {
        assert!(text.contains(needle), "missing {needle} in {text}");
    }
}

//! The `mana-emu` command line against a live device (control socket) and
//! the sysfs subcommand.

use mana_emu::pkt::build;
use mana_emu::testing::*;
use mana_emu::Config;
use std::process::Command;

mod common;
use common::rx_queue;

const BIN: &str = env!("CARGO_BIN_EXE_mana-emu");

fn run(args: &[&str]) -> (bool, String) {
    let o = Command::new(BIN).args(args).output().unwrap();
    (
        o.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

#[test]
fn sysfs_subcommand_creates_both_trees() {
    let dir = std::env::temp_dir().join(format!("mana-emu-cli-sysfs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut c = Config::default_single();
    c.options.sysfs_root = dir.join("sys");
    let cfgp = dir.join("c.toml");
    std::fs::write(&cfgp, c.to_toml()).unwrap();
    let (ok, out) = run(&["sysfs", cfgp.to_str().unwrap()]);
    assert!(ok, "{out}");
    let pci = dir.join("sys/bus/pci/devices/7870:00:00.0");
    assert!(out.contains(&format!(
        "SYSFS_PCI_DEVICES={}",
        dir.join("sys/bus/pci/devices").display()
    )));
    for (f, v) in [
        ("vendor", "0x1414\n"),
        ("device", "0x00ba\n"),
        ("class", "0x020000\n"),
        ("numa_node", "0\n"),
    ] {
        assert_eq!(std::fs::read_to_string(pci.join(f)).unwrap(), v, "{f}");
    }
    assert_eq!(
        std::fs::read_to_string(pci.join("resource"))
            .unwrap()
            .lines()
            .count(),
        6
    );
    assert_eq!(
        std::fs::read_link(pci.join("driver"))
            .unwrap()
            .file_name()
            .unwrap(),
        "mana"
    );
    let ib = dir.join("sys/class/infiniband/mana_0/device");
    let ue = std::fs::read_to_string(ib.join("uevent")).unwrap();
    assert!(ue.contains("PCI_SLOT_NAME=7870:00:00.0\n"));
    assert_eq!(
        std::fs::read_to_string(ib.join("net/eth1/address")).unwrap(),
        "00:0d:3a:00:00:01\n"
    );
    assert_eq!(
        std::fs::read_to_string(ib.join("net/eth1/dev_port")).unwrap(),
        "0\n"
    );
    assert_eq!(
        std::fs::read_to_string(ib.join("net/eth1/operstate")).unwrap(),
        "down\n"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn counters_inject_and_send_over_the_control_socket() {
    let dev = TestDevice::new("cli", Config::default_single());
    let sock = mana_emu::control::serve(&dev.emu).unwrap();
    let s = sock.to_str().unwrap();
    let (ok, out) = run(&["ping", "--socket", s]);
    assert!(
        ok && out.contains(&format!("pid {}", std::process::id())),
        "{out}"
    );
    let ctx = dev.open();
    let mut rx = rx_queue(&ctx, 8);
    // send: two frames as hex.
    let m = mana_emu::config::parse_mac("00:0d:3a:00:00:01").unwrap();
    let f = build::udp4(m, [2, 0, 0, 0, 0, 1], [1, 1, 1, 1], [2, 2, 2, 2], 1, 2, 10);
    let hex = mana_emu::control::hex_encode(&f);
    let (ok, out) = run(&[
        "send",
        "--socket",
        s,
        "--mac",
        "00:0d:3a:00:00:01",
        "--hex",
        &hex,
        "--hex",
        &hex,
    ]);
    assert!(ok, "{out}");
    let got = rx.wait(0, 2);
    assert_eq!(got[1].data, f);
    // counters (JSON) match the device.
    let (ok, out) = run(&["counters", "--socket", s, "--mac", "00:0d:3a:00:00:01"]);
    assert!(ok, "{out}");
    let pc: mana_emu::device::PortCounters = serde_json::from_str(&out).unwrap();
    assert_eq!(pc.rx_packets, 2);
    assert_eq!(pc.rx_bytes, 2 * f.len() as u64);
    // inject a fault: link down, then frames are dropped.
    let (ok, out) = run(&[
        "inject",
        "--socket",
        s,
        "link-down",
        "--mac",
        "00:0d:3a:00:00:01",
    ]);
    assert!(ok, "{out}");
    assert!(!dev.counters().ports[0].link_up);
    let (ok, _) = run(&[
        "inject",
        "--socket",
        s,
        "link-up",
        "--mac",
        "00:0d:3a:00:00:01",
        "--after-ms",
        "50",
    ]);
    assert!(ok);
    dev.wait_counters(|k| k.ports[0].link_up);
    let (ok, out) = run(&["inject", "--socket", s, "bogus"]);
    assert!(!ok && out.contains("unknown fault"), "{out}");
    // A lying device: the kinds are checked, then it lies until told not to.
    let lie = [
        "inject",
        "--socket",
        s,
        "lie",
        "--seed",
        "7",
        "--per-million",
        "1000000",
        "--kinds",
    ];
    let (ok, out) = run(&[&lie[..], &["drop,nope"]].concat());
    assert!(!ok && out.contains("lie: unknown kind nope"), "{out}");
    let (ok, out) = run(&[&lie[..], &["drop", "--count", "1"]].concat());
    assert!(ok, "{out}");
    let (ok, out) = run(&["inject", "--socket", s, "lie-stop"]);
    assert!(ok, "{out}");
    let (ok, out) = run(&[
        "inject",
        "--socket",
        s,
        "link-down",
        "--mac",
        "00:00:00:00:00:09",
    ]);
    assert!(!ok, "{out}");
}

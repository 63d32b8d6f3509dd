//! The command line: exit status, `--json`, `--apply` then `--undo` with
//! a state file, on a small hand-made tree (the emulator's full tree is
//! used by the driver's `tests/preflight.rs`).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn tree(name: &str, up: bool) -> PathBuf {
    let root = std::env::temp_dir().join(format!("mana-preflight-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&root);
    let mk = |p: &str, s: &str| {
        let p = root.join(p);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, s).unwrap();
    };
    let f = "sys/bus/pci/devices/7870:00:00.0";
    mk(&format!("{f}/vendor"), "0x1414\n");
    mk(&format!("{f}/device"), "0x00ba\n");
    mk(&format!("{f}/infiniband/mana_0/node_type"), "1: CA\n");
    mk(
        &format!("{f}/net/enP30832s1/address"),
        "00:0d:3a:76:3b:d0\n",
    );
    mk(&format!("{f}/net/enP30832s1/dev_port"), "0\n");
    mk(
        &format!("{f}/net/enP30832s1/flags"),
        if up { "0x1003\n" } else { "0x1002\n" },
    );
    for m in ["mana", "mana_ib", "ib_uverbs"] {
        fs::create_dir_all(root.join("sys/module").join(m)).unwrap();
    }
    mk(
        "sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages",
        "512\n",
    );
    mk("proc/sys/kernel/osrelease", "6.8.0-1015-azure\n");
    mk("proc/mounts", "hugetlbfs /dev/hugepages hugetlbfs rw 0 0\n");
    root
}

fn run(root: &Path, args: &[&str]) -> (i32, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_mana-preflight"))
        .arg("--sysfs-root")
        .arg(root.join("sys"))
        .arg("--proc-root")
        .arg(root.join("proc"))
        .args(args)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// libmana is found through the machine's ldconfig: skip where the
/// machine has none (scripts/setup.sh installs it).
fn has_libmana() -> bool {
    Command::new("ldconfig")
        .arg("-p")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("libmana.so.1"))
}

#[test]
fn up_is_not_ready_and_apply_then_undo_round_trip_through_the_state_file() {
    if !has_libmana() {
        eprintln!("no libmana.so.1 on this machine: skipping");
        return;
    }
    let root = tree("cli", true);
    let (code, out, _) = run(&root, &["--json"]);
    assert_eq!(code, 1, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["ready"], false);
    assert_eq!(v["functions"][0]["ports"][0]["name"], "enP30832s1");
    assert_eq!(v["eal_direct"][1], "7870:00:00.0,mac=00:0d:3a:76:3b:d0");
    // No synthetic NIC in this tree: nothing for DPDK's netvsc PMD (it
    // said "READY ... behind netvsc" before).
    assert_eq!(v["synthetic_nics"], serde_json::json!([]));
    let nic = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "synthetic NIC")
        .unwrap();
    assert_eq!(
        (&nic["ok"], &nic["netvsc_only"]),
        (&false.into(), &true.into())
    );

    let state = root.join("state.json");
    let st = state.to_str().unwrap();
    let (code, _, err) = run(&root, &["--apply", "--state", st]);
    assert_eq!(code, 1);
    assert!(err.contains("say which port to prepare"), "{err}");
    assert!(!state.exists());

    let (code, out, err) = run(
        &root,
        &["--apply", "--mac", "00:0D:3A:76:3B:D0", "--state", st],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("set enP30832s1 down\n"), "{out}");
    assert!(
        out.lines()
            .any(|l| l == "READY for DPDK directly; behind netvsc once the synthetic NIC is fixed"),
        "{out}"
    );
    let nic = root.join("sys/bus/pci/devices/7870:00:00.0/net/enP30832s1/flags");
    assert_eq!(fs::read_to_string(&nic).unwrap(), "0x1002\n");
    assert!(state.exists());

    let (code, out, err) = run(&root, &["--undo", "--state", st]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        out,
        "restored: 1 interface(s) up, 0 hugepage setting(s), 0 synthetic NIC(s) back to hv_netvsc\n"
    );
    assert_eq!(fs::read_to_string(&nic).unwrap(), "0x1003\n");
    assert!(!state.exists());
    let (code, _, err) = run(&root, &["--undo", "--state", st]);
    assert_eq!(code, 1);
    assert!(err.contains("no state to undo"), "{err}");
    let (code, _, _) = run(&root, &["--bogus"]);
    assert_eq!(code, 2);
    fs::remove_dir_all(root).unwrap();
}

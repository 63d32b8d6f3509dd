//! The driver's layers, as `doc/design.md` describes them: each module of
//! `src/` imports only from its own layer and the layers below it, and the
//! data path never reaches into control, probe or ethdev code. Read from
//! the source text: every `crate::<layer>` path in a file counts.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Bottom to top. `pci` (the driver registration) and `lib` sit above all.
const LAYERS: &[&str] = &[
    "ffi",
    "hw",
    "dataplane",
    "control",
    "ethdev",
    "probe",
    "pci",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The layer a file belongs to: its first path component under src/.
fn layer_of(src: &Path, f: &Path) -> String {
    let rel = f.strip_prefix(src).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

/// The layers a file's code names through `crate::` (comments skipped).
fn uses(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap();
        let mut rest = code;
        while let Some(i) = rest.find("crate::") {
            rest = &rest[i + "crate::".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            out.insert(name);
        }
    }
    out
}

#[test]
fn every_module_imports_only_from_the_layers_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let rank = |l: &str| LAYERS.iter().position(|x| *x == l);
    let mut bad = Vec::new();
    for f in &files {
        let me = layer_of(&src, f);
        if me == "lib" {
            continue;
        }
        let my_rank = rank(&me).unwrap_or_else(|| panic!("{me}: not a layer of {LAYERS:?}"));
        let text = std::fs::read_to_string(f).unwrap();
        for used in uses(&text) {
            match rank(&used) {
                Some(r) if r > my_rank => bad.push(format!(
                    "{}: layer {me} uses crate::{used}, a layer above it",
                    f.strip_prefix(&src).unwrap().display()
                )),
                Some(_) => {}
                None => bad.push(format!(
                    "{}: crate::{used} is not a layer",
                    f.strip_prefix(&src).unwrap().display()
                )),
            }
        }
    }
    assert!(bad.is_empty(), "layering violations:\n{}", bad.join("\n"));
}

#[test]
fn the_checker_sees_an_upward_import() {
    let u = uses("use crate::control::port::Port; // crate::ethdev in a comment\nlet x = crate::ffi::sys::X;");
    assert_eq!(
        u,
        BTreeSet::from(["control".to_string(), "ffi".to_string()])
    );
}

/// `rte_eth_dev_configure` frees and replaces ethdev's queue arrays without
/// any driver lock, so the driver's own threads (interrupts, recovery,
/// multi-process) must reach queues through the control state, never
/// through those arrays: only `control/state/queue_sets.rs` (which writes
/// them at setup and defines the op-time view) and the ethdev ops read them.
#[test]
fn only_ethdev_ops_read_ethdevs_queue_arrays() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut bad = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
        if rel == "control/state/queue_sets.rs"
            || rel.starts_with("ethdev/")
            || rel.starts_with("ffi/")
        {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap();
            let arrays = [".rx_queues", ".tx_queues"]
                .iter()
                .any(|a| code.contains(a) && !code.contains(&format!(".nb_{}", &a[1..])));
            if arrays || code.contains("EthQueues") {
                bad.push(format!("{rel}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "ethdev queue arrays read outside ethdev ops:\n{}",
        bad.join("\n")
    );
}

//! The driver's layers, as `doc/design.md` describes them: each module of
//! `src/` imports only from its own layer and the layers below it, and the
//! data path never reaches into control, probe or ethdev code. Inside
//! `control/`, the entries (files and folders) import each other without a
//! cycle, so the port's state sits at the bottom and each behaviour reads
//! top-down. Read from the source text: every `crate::<layer>` path in a
//! file counts.

use std::collections::{BTreeMap, BTreeSet};
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

/// The entries of a folder module `module` that `text` names: every
/// `crate::<module>::<entry>` path, braced groups (`crate::<module>::{a, b}`)
/// included, and in a file directly inside the folder (`top_level`) every
/// `super::<entry>` path. Comments are skipped.
fn entry_uses(module: &str, text: &str, top_level: bool) -> BTreeSet<String> {
    let code: String = text
        .lines()
        .map(|l| l.split("//").next().unwrap())
        .collect::<Vec<_>>()
        .join("\n");
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut prefixes = vec![format!("crate::{module}::")];
    if top_level {
        prefixes.push("super::".to_string());
    }
    let mut out = BTreeSet::new();
    for prefix in &prefixes {
        let mut rest = code.as_str();
        while let Some(i) = rest.find(prefix.as_str()) {
            rest = rest[i + prefix.len()..].trim_start();
            if !rest.starts_with('{') {
                out.insert(ident(rest));
                continue;
            }
            // The first segment of each path at the group's top level.
            let mut depth = 0;
            let mut segment_start = true;
            for (j, c) in rest.char_indices() {
                match c {
                    '{' => {
                        depth += 1;
                        segment_start = depth == 1;
                    }
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            rest = &rest[j..];
                            break;
                        }
                    }
                    ',' if depth == 1 => segment_start = true,
                    c if c.is_whitespace() => {}
                    _ if segment_start && depth == 1 => {
                        out.insert(ident(&rest[j..]));
                        segment_start = false;
                    }
                    _ => {}
                }
            }
        }
    }
    out.remove("");
    out
}

/// Which entries of a folder module each entry imports: `files` are the
/// folder's files as (entry, top level?, text).
fn entry_graph<'a>(
    module: &str,
    files: impl IntoIterator<Item = (&'a str, bool, &'a str)>,
) -> BTreeMap<String, BTreeSet<String>> {
    let files: Vec<_> = files.into_iter().collect();
    let entries: BTreeSet<&str> = files.iter().map(|f| f.0).collect();
    let mut graph = BTreeMap::new();
    for (entry, top_level, text) in files {
        let edges: &mut BTreeSet<String> = graph.entry(entry.to_string()).or_default();
        for used in entry_uses(module, text, top_level) {
            if used != entry && entries.contains(used.as_str()) {
                edges.insert(used);
            }
        }
    }
    graph
}

/// The import cycles of a graph: each group of two or more entries that
/// reach one another, sorted.
fn import_cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let reach = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_string()];
        while let Some(v) = todo.pop() {
            for w in graph.get(&v).into_iter().flatten() {
                if seen.insert(w.clone()) {
                    todo.push(w.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|v| (v, reach(v))).collect();
    let mut cycles: Vec<Vec<String>> = Vec::new();
    for (v, r) in &reached {
        if !r.contains(*v) || cycles.iter().any(|c| c.contains(v)) {
            continue;
        }
        let group = reached
            .iter()
            .filter(|(w, rw)| r.contains(**w) && rw.contains(*v))
            .map(|(w, _)| (*w).clone())
            .collect();
        cycles.push(group);
    }
    cycles
}

/// The entry graph of `src/<module>/`: its files and folders (`mod.rs`
/// aside), each file counted for the entry it lies in.
fn folder_graph(module: &str) -> BTreeMap<String, BTreeSet<String>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src")
        .join(module);
    let mut files = Vec::new();
    rust_files(&dir, &mut files);
    let texts: Vec<(String, bool, String)> = files
        .iter()
        .filter(|f| f.parent() != Some(dir.as_path()) || !f.ends_with("mod.rs"))
        .map(|f| {
            let top_level = f.parent() == Some(dir.as_path());
            (
                layer_of(&dir, f),
                top_level,
                std::fs::read_to_string(f).unwrap(),
            )
        })
        .collect();
    entry_graph(
        module,
        texts.iter().map(|(e, t, s)| (e.as_str(), *t, s.as_str())),
    )
}

#[test]
fn control_has_no_import_cycle() {
    let graph = folder_graph("control");
    assert!(graph.contains_key("port") && graph.contains_key("reset"));
    let cycles = import_cycles(&graph);
    let report: Vec<String> = cycles
        .iter()
        .map(|c| {
            let edges: Vec<String> = c
                .iter()
                .map(|e| {
                    let to: Vec<&str> = graph[e]
                        .iter()
                        .filter(|w| c.contains(w))
                        .map(String::as_str)
                        .collect();
                    format!("  {e} -> {}", to.join(", "))
                })
                .collect();
            format!("cycle: {}\n{}", c.join(" "), edges.join("\n"))
        })
        .collect();
    assert!(
        cycles.is_empty(),
        "import cycles among control's entries (move the shared piece below both, or pass it in):\n{}",
        report.join("\n")
    );
}

#[test]
fn the_entry_reader_sees_paths_groups_and_super() {
    let text = "use crate::m::{\n    a::X,\n    b::{self, Y},\n    c,\n};\n\
                let z = crate::m::d::f(); // crate::m::e in a comment\n\
                use super::g::Z;\nuse super::*;";
    let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(
        entry_uses("m", text, true),
        names(&["a", "b", "c", "d", "g"])
    );
    // In a nested file `super::` is its own folder, not the module's.
    assert_eq!(entry_uses("m", text, false), names(&["a", "b", "c", "d"]));
}

#[test]
fn the_cycle_checker_finds_a_synthetic_cycle() {
    let files = [
        ("a", true, "use crate::m::b::X;"),
        ("b", true, "use crate::m::{c::Y, d};"),
        ("c", true, "fn f() { super::a::g() }"),
        ("d", true, "// crate::m::a only in a comment"),
        ("e", true, "use crate::m::a; use crate::other::b;"),
        ("s", false, "use super::e::Q; use crate::m::s::x;"),
    ];
    let graph = entry_graph("m", files);
    assert_eq!(
        import_cycles(&graph),
        vec![vec!["a".to_string(), "b".to_string(), "c".to_string()]]
    );
    // Two files of one folder entry are one node; no self edge.
    let mut files = files.to_vec();
    files.push(("s", false, "use crate::m::b;"));
    files[4] = ("e", true, "use crate::m::s;");
    files[2] = ("c", true, "fn f() {}");
    let graph = entry_graph("m", files.clone());
    assert!(import_cycles(&graph).is_empty(), "{graph:?}");
    files.push(("b", true, "use crate::m::e;"));
    let cycles = import_cycles(&entry_graph("m", files));
    assert_eq!(
        cycles,
        vec![vec!["b".to_string(), "e".to_string(), "s".to_string()]]
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

//! The fuzz targets' checks without a fuzzer: every committed seed
//! (`fuzz/seeds/<target>/`, minimized corpora of the campaigns in
//! `doc/fuzzing.md`) and a few thousand generated inputs per target. This is
//! the fuzzing step of the timed suite; it needs no nightly toolchain.

use std::path::PathBuf;

use fuzz_checks::{target, TARGETS};

/// Generated inputs per target.
const GENERATED: usize = 3000;

/// SplitMix64: deterministic, so a failure here reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// Characters the devargs grammar is made of, so generated text reaches
/// the parser instead of failing UTF-8 or the first key.
const DEVARGS_CHARS: &[u8] = b"0123456789abcdefABCDEF:-,=[] \tmacx";

fn generated(name: &str, n: usize) -> impl Iterator<Item = Vec<u8>> + '_ {
    let mut rng = Rng(name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    }));
    (0..n).map(move |i| {
        // Lengths around every structure size: CQE 64, OOB 8/24, key 40...
        let len = (rng.next() % if i % 4 == 0 { 600 } else { 130 }) as usize;
        let mut v: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        if name == "devargs" {
            for b in &mut v {
                *b = DEVARGS_CHARS[usize::from(*b) % DEVARGS_CHARS.len()];
            }
            match i % 4 {
                0 | 2 => drop(v.splice(0..0, b"mac=".iter().copied())),
                1 => {
                    let word: &[u8] = [
                        &b"rx_path=scalar,"[..],
                        b"rx_path=vector",
                        b"rx_path=",
                        b"tx_path=auto,",
                    ][(i / 4) % 4];
                    drop(v.splice(0..0, word.iter().copied()));
                }
                _ => {}
            }
        }
        v
    })
}

fn seeds(name: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../seeds")
        .join(name);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut v: Vec<(PathBuf, Vec<u8>)> = entries
        .map(|e| {
            let p = e.unwrap().path();
            let data = std::fs::read(&p).unwrap();
            (p, data)
        })
        .collect();
    v.sort();
    v
}

fn run(name: &str) {
    let t = target(name).unwrap_or_else(|| panic!("no target {name}"));
    for (path, data) in seeds(name) {
        let r = std::panic::catch_unwind(|| (t.check)(&data));
        assert!(r.is_ok(), "{name}: seed {} fails", path.display());
    }
    for (i, data) in generated(name, GENERATED).enumerate() {
        let r = std::panic::catch_unwind(|| (t.check)(&data));
        assert!(r.is_ok(), "{name}: generated input {i} fails: {data:02x?}");
    }
}

#[test]
fn every_target_has_a_test() {
    let tested = [
        "devargs",
        "devargs_model",
        "cqe",
        "cq_phase",
        "wqe",
        "wqe_write",
        "tx_oob",
        "doorbell",
        "eqe",
        "rss",
    ];
    let names: Vec<&str> = TARGETS.iter().map(|t| t.name).collect();
    assert_eq!(names, tested);
}

/// Targets whose check is the driver's own (it needs the driver's private
/// parts and DPDK), replayed by the driver's unit tests instead:
/// `rx_paths` by `dataplane::rxq::side_by_side::tests`, `tx_paths` by
/// `dataplane::txq::side_by_side::tests`.
const IN_THE_DRIVER: &[&str] = &["rx_paths", "tx_paths"];

/// Every libFuzzer entry (`fuzz/fuzz_targets/*.rs`) is replayed under
/// `cargo test`: here, or by the driver's tests.
#[test]
fn every_fuzz_target_is_replayed() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz_targets");
    let mut missing = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_stem().unwrap().to_str().unwrap().to_owned();
        if target(&name).is_none() && !IN_THE_DRIVER.contains(&name.as_str()) {
            missing.push(name);
        }
    }
    assert!(
        missing.is_empty(),
        "fuzz targets nothing replays: {missing:?}"
    );
}

#[test]
fn devargs() {
    run("devargs");
}

#[test]
fn devargs_model() {
    run("devargs_model");
}

#[test]
fn cqe() {
    run("cqe");
}

#[test]
fn cq_phase() {
    run("cq_phase");
}

#[test]
fn wqe() {
    run("wqe");
}

#[test]
fn wqe_write() {
    run("wqe_write");
}

#[test]
fn tx_oob() {
    run("tx_oob");
}

#[test]
fn doorbell() {
    run("doorbell");
}

#[test]
fn eqe() {
    run("eqe");
}

#[test]
fn rss() {
    run("rss");
}

//! The checks behind the fuzz targets.
//!
//! Each target is a function from the fuzzer's bytes to nothing that panics
//! when the code under test does something wrong: a decoder that panics, that
//! accepts a value with a reserved bit set or an unknown type, that reads a
//! field from the wrong bits (each check reads the same bits again with plain
//! shifts and masks, [`bits`]), that names the wrong field in its error, or an
//! encoder whose output does not decode back to what it was given.
//!
//! The same functions run under libFuzzer (`fuzz/fuzz_targets`, `cargo
//! fuzz`), AFL++ (`fuzz/afl`, `cargo afl`) and plain `cargo test`
//! (`tests/replay.rs`: the committed seeds plus generated inputs), so the
//! timed suite needs no nightly toolchain. `doc/fuzzing.md` has the commands
//! and the campaigns' figures.

#![forbid(unsafe_code)]

pub mod bits;
pub mod cq_phase;
pub mod cqe;
pub mod devargs;
pub mod doorbell;
pub mod eqe;
pub mod rss;
pub mod tx_oob;
pub mod wqe;

mod hw;

/// One fuzz target: its name (the libFuzzer binary, the AFL++ argument and
/// the seed directory `fuzz/seeds/<name>`) and its check.
#[derive(Clone, Copy)]
pub struct Target {
    /// Target name.
    pub name: &'static str,
    /// Runs one input; panics on a finding.
    pub check: fn(&[u8]),
}

/// Every target.
pub const TARGETS: &[Target] = &[
    Target {
        name: "devargs",
        check: devargs::check_text,
    },
    Target {
        name: "devargs_model",
        check: devargs::check_model,
    },
    Target {
        name: "cqe",
        check: cqe::check,
    },
    Target {
        name: "cq_phase",
        check: cq_phase::check,
    },
    Target {
        name: "wqe",
        check: wqe::check_read,
    },
    Target {
        name: "wqe_write",
        check: wqe::check_write,
    },
    Target {
        name: "tx_oob",
        check: tx_oob::check,
    },
    Target {
        name: "doorbell",
        check: doorbell::check,
    },
    Target {
        name: "eqe",
        check: eqe::check,
    },
    Target {
        name: "rss",
        check: rss::check,
    },
];

/// The target called `name`.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}

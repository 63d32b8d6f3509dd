//! libFuzzer entry of the `eqe` target: the check is
//! `fuzz_checks::eqe::check` (see fuzz/checks and doc/fuzzing.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::eqe::check(data));

//! libFuzzer entry of the `cqe` target: the check is
//! `fuzz_checks::cqe::check` (see fuzz/checks and doc/fuzzing.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::cqe::check(data));

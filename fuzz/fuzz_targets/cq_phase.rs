//! libFuzzer entry of the `cq_phase` target: the check is
//! `fuzz_checks::cq_phase::check` (see fuzz/checks and doc/fuzzing.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::cq_phase::check(data));

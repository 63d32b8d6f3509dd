//! libFuzzer entry of the `doorbell` target: the check is
//! `fuzz_checks::doorbell::check` (see fuzz/checks and doc/fuzzing.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::doorbell::check(data));

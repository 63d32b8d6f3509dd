//! libFuzzer entry of the `tx_oob` target: the check is
//! `fuzz_checks::tx_oob::check` (see fuzz/checks and doc/fuzzing.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::tx_oob::check(data));

//! libFuzzer entry of the `wqe` target: the check is
//! `fuzz_checks::wqe::check_read` (see fuzz/checks and doc/fuzzing.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::wqe::check_read(data));

//! libFuzzer entry of the `devargs_model` target: the check is
//! `fuzz_checks::devargs::check_model` (see fuzz/checks and doc/fuzzing.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::devargs::check_model(data));

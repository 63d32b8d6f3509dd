//! libFuzzer entry of the `devargs` target: the check is
//! `fuzz_checks::devargs::check_text` (see fuzz/checks and doc/fuzzing.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::devargs::check_text(data));

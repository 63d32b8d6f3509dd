//! libFuzzer entry of the `rss` target: the check is
//! `fuzz_checks::rss::check` (see fuzz/checks and doc/fuzzing.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::rss::check(data));

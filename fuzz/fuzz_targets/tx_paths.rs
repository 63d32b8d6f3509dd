//! libFuzzer entry of the `tx_paths` target: the vector and scalar
//! transmit paths over the same bursts and completions must agree exactly.
//! The check is the driver's `net_mana::fuzzing::tx_paths`
//! (src/dataplane/txq/side_by_side.rs, built with the `fuzzing` feature;
//! doc/fuzzing.md); it links DPDK.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    rte_net_mana::fuzzing::tx_paths(data);
});

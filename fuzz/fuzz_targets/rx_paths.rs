//! libFuzzer entry of the `rx_paths` target: the vector and scalar receive
//! paths over the same completions must agree exactly. The check is the
//! driver's `net_mana::fuzzing::rx_paths` (src/dataplane/rxq/side_by_side.rs,
//! built with the `fuzzing` feature; doc/fuzzing.md); it links DPDK.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    rte_net_mana::fuzzing::rx_paths(data);
});

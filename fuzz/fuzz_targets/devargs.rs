//! Fuzz target for the `mac=` devargs parser (src/probe/devargs.rs).
//!
//! Run from the repository root (cargo-fuzz needs nightly; on a stable-only
//! machine use `RUSTC_BOOTSTRAP=1 cargo fuzz run ...` instead of `+nightly`):
//!
//!     cargo install cargo-fuzz
//!     cargo +nightly fuzz run devargs -- -max_total_time=60 -dict=fuzz/devargs.dict
//!
//! Without cargo-fuzz, `cargo build` in fuzz/ still checks that it compiles.
//! The module is included by path because the main crate needs DPDK to build.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../src/hw/mac.rs"]
#[allow(dead_code)]
mod mac;
/// `devargs` names the MAC type by its path in the driver crate.
mod hw {
    pub use super::mac;
}
#[path = "../../src/probe/devargs.rs"]
#[allow(dead_code)]
mod devargs;

use devargs::{Devargs, MacAddr, MAX_MACS};

fuzz_target!(|data: &[u8]| {
    // drv_str comes from a C string: any bytes, but only UTF-8 can reach the
    // Rust parser (the C-ABI glue rejects the rest before calling it).
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };

    // MacAddr::from_str must agree with Display on whatever it accepts.
    if let Ok(m) = s.parse::<MacAddr>() {
        assert_eq!(m.to_string().parse::<MacAddr>(), Ok(m));
    }

    match Devargs::parse(s) {
        Err(e) => assert!(!e.to_string().is_empty()),
        Ok(d) => {
            let macs = d.macs();
            assert!(macs.len() <= MAX_MACS);
            for (i, m) in macs.iter().enumerate() {
                assert!(m.is_unicast() && !m.is_zero(), "{s:?}");
                assert!(!macs[..i].contains(m), "duplicate accepted: {s:?}");
                assert!(d.selects(m));
            }
            // Re-parsing the canonical form gives the same result.
            let canon: Vec<String> = macs.iter().map(|m| format!("mac={m}")).collect();
            assert_eq!(Devargs::parse(&canon.join(",")), Ok(d));
        }
    }
});

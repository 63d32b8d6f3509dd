//! Generates the libibverbs / manadv struct layouts from the installed
//! rdma-core headers, so the ABI the emulator presents is exactly the one
//! the driver was compiled against (no hand-copied layouts).

use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/verbs_wrapper.h");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    let bindings = bindgen::Builder::default()
        .header("src/verbs_wrapper.h")
        .allowlist_type("ibv_.*")
        .allowlist_type("verbs_context")
        .allowlist_type("manadv_.*")
        .allowlist_type("ib_uverbs_.*")
        .allowlist_var("IBV_.*")
        .allowlist_var("MANADV_.*")
        .allowlist_var("IB_UVERBS_.*")
        .derive_default(true)
        .derive_debug(false)
        .layout_tests(true)
        .prepend_enum_name(false)
        .generate_comments(false)
        .generate()
        .expect("bindgen over <infiniband/verbs.h> and <infiniband/manadv.h>");
    bindings
        .write_to_file(out.join("verbs_bindings.rs"))
        .expect("write bindings");
}

//! Generates the DPDK + libibverbs/libmana bindings and builds the small C
//! shim for the `static inline` helpers the driver needs.
//!
//! DPDK's driver-SDK headers (`ethdev_driver.h`, `bus_pci_driver.h`, ...) are
//! taken from pkg-config's include dirs when the installed DPDK ships them,
//! otherwise from the DPDK source tree of exactly the installed version,
//! which `scripts/setup.sh` fetches (Debian's `dpdk` source package).

use std::env;
use std::path::{Path, PathBuf};

const SDK_HEADERS: &[&str] = &[
    "ethdev_driver.h",
    "ethdev_pci.h",
    "bus_pci_driver.h",
    "dev_driver.h",
    "bus_driver.h",
];

/// Where each SDK header lives inside a DPDK source tree.
const SDK_SOURCE_DIRS: &[&str] = &["lib/ethdev", "drivers/bus/pci", "lib/eal/include"];

/// The DPDK libraries a PMD links: nothing else from `libdpdk.pc`.
const DPDK_LIBS: &[&str] = &[
    "rte_ethdev",
    "rte_bus_pci",
    "rte_pci",
    "rte_mbuf",
    "rte_mempool",
    "rte_net",
    "rte_kvargs",
    "rte_eal",
];

fn main() {
    let dpdk = pkg_config::Config::new()
        .atleast_version("22.11")
        .cargo_metadata(false)
        .probe("libdpdk")
        .unwrap_or_else(|e| fail(&format!("DPDK (libdpdk.pc) not found: {e}")));
    let verbs = probe_link("libibverbs");
    let mana = probe_link("libmana");

    let sdk_dirs = sdk_include_dirs(&dpdk);
    let mut clang_args: Vec<String> = Vec::new();
    for dir in dpdk.include_paths.iter().chain(&sdk_dirs) {
        clang_args.push(format!("-I{}", dir.display()));
    }
    for dir in verbs.include_paths.iter().chain(&mana.include_paths) {
        clang_args.push(format!("-I{}", dir.display()));
    }
    // rte_config.h must come first, as DPDK's own cflags say.
    clang_args.push("-include".into());
    clang_args.push("rte_config.h".into());
    clang_args.push("-DALLOW_INTERNAL_API".into());
    clang_args.push("-DALLOW_EXPERIMENTAL_API".into());

    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    generate_bindings(&clang_args, &out);
    build_shim(&dpdk, &sdk_dirs, &verbs);

    for lib in DPDK_LIBS {
        println!("cargo:rustc-link-lib=dylib={lib}");
    }
    for dir in &dpdk.link_paths {
        println!("cargo:rustc-link-search=native={}", dir.display());
    }
    println!("cargo:rustc-link-lib=dylib=ibverbs");
    println!("cargo:rustc-link-lib=dylib=mana");
    println!("cargo:rerun-if-changed=src/ffi/wrapper.h");
    println!("cargo:rerun-if-changed=src/ffi/shim.c");
    println!("cargo:rerun-if-changed=src/ffi/layout.c");
    println!("cargo:rerun-if-env-changed=NET_MANA_DPDK_SRC");
}

fn fail(msg: &str) -> ! {
    panic!("\n\nnet_mana build: {msg}\nRun `scripts/setup.sh` (as root) to install DPDK 22.11, rdma-core and the DPDK driver-SDK headers.\n\n");
}

fn probe_link(name: &str) -> pkg_config::Library {
    pkg_config::Config::new()
        .cargo_metadata(false)
        .probe(name)
        .unwrap_or_else(|e| fail(&format!("{name} (rdma-core >= 44) not found: {e}")))
}

/// Directories holding the driver-SDK headers, or a build failure that says
/// how to get them.
fn sdk_include_dirs(dpdk: &pkg_config::Library) -> Vec<PathBuf> {
    if SDK_HEADERS
        .iter()
        .all(|h| dpdk.include_paths.iter().any(|d| d.join(h).exists()))
    {
        return Vec::new();
    }
    let src = match env::var_os("NET_MANA_DPDK_SRC") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(format!("/var/cache/net-mana/dpdk-stable-{}", dpdk.version)),
    };
    let dirs: Vec<PathBuf> = SDK_SOURCE_DIRS.iter().map(|d| src.join(d)).collect();
    for header in SDK_HEADERS {
        if !dirs.iter().any(|d| d.join(header).exists()) {
            fail(&format!(
                "the installed DPDK {} has no driver-SDK header {header}, and the DPDK source \
                 of the same version is not at {} (set NET_MANA_DPDK_SRC to override)",
                dpdk.version,
                src.display()
            ));
        }
    }
    println!("cargo:rerun-if-changed={}", src.display());
    dirs
}

fn generate_bindings(clang_args: &[String], out: &Path) {
    let bindings = bindgen::Builder::default()
        .header("src/ffi/wrapper.h")
        .clang_args(clang_args)
        .allowlist_function("rte_.*")
        .allowlist_function("ibv_.*")
        .allowlist_function("manadv_.*")
        .allowlist_function("mana_shim_.*")
        .allowlist_type("rte_.*")
        .allowlist_type("eth_.*")
        .allowlist_type("ibv_.*")
        .allowlist_type("manadv_.*")
        .allowlist_var("rte_.*")
        .allowlist_var("RTE_.*")
        .allowlist_var("IBV_.*")
        .allowlist_var("MANADV_.*")
        .allowlist_var("mana_c_layout.*")
        // Atomic / aligned types that bindgen cannot express are opaque.
        .opaque_type("rte_rwlock_t")
        // Packed structs containing aligned unions, which Rust rejects.
        .opaque_type("rte_l2tpv2_.*")
        .opaque_type("rte_flow_item_l2tpv2")
        .derive_default(true)
        .derive_debug(false)
        .layout_tests(false)
        .generate_inline_functions(false)
        .prepend_enum_name(false)
        .default_enum_style(bindgen::EnumVariation::Consts)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
        .generate()
        .unwrap_or_else(|e| fail(&format!("bindgen failed: {e}")));
    bindings
        .write_to_file(out.join("bindings.rs"))
        .expect("write bindings.rs");
}

fn build_shim(dpdk: &pkg_config::Library, sdk_dirs: &[PathBuf], verbs: &pkg_config::Library) {
    let mut build = cc::Build::new();
    build
        .file("src/ffi/shim.c")
        .file("src/ffi/layout.c")
        .includes(&dpdk.include_paths)
        .includes(sdk_dirs)
        .includes(&verbs.include_paths)
        .define("ALLOW_INTERNAL_API", None)
        .define("ALLOW_EXPERIMENTAL_API", None)
        .flag("-include")
        .flag("rte_config.h")
        .flag("-march=corei7")
        .flag_if_supported("-Wno-unused-parameter")
        .warnings(true);
    build.compile("net_mana_shim");
}

//! Generates the DPDK + libibverbs/libmana bindings, detects what the DPDK
//! headers say where DPDK releases differ, and builds the small C shim for
//! the `static inline` helpers the driver needs.
//!
//! DPDK comes from pkg-config (`libdpdk.pc`; point `PKG_CONFIG_PATH` at
//! another install to build against it). Its driver-SDK headers
//! (`ethdev_driver.h`, `bus_pci_driver.h`, ...) are taken from pkg-config's
//! include dirs when the install ships them (a DPDK built with
//! `-Denable_driver_sdk=true`), otherwise from the DPDK source tree of
//! exactly the installed version, which `scripts/setup.sh` fetches for
//! Debian's packages (`NET_MANA_DPDK_SRC` overrides it).
//!
//! Differences between DPDK releases are detected from the headers, never
//! from version numbers (point releases of one LTS change headers too), and
//! reach the Rust code as `cfg`s, each used in one small module of
//! `src/ffi/`. Before anything is generated, the headers are checked against
//! the installed binaries.

use std::env;
use std::path::{Path, PathBuf};

/// The DPDK release series this driver is tested with (`scripts/matrix.sh`).
const TESTED: &[&str] = &["22.11", "23.11", "24.11", "25.11", "26.07"];

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
/// `rte_log` is added where logging has its own library (23.11 and later).
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

/// One difference between DPDK releases, as the headers say it.
struct Feature {
    /// The `cfg` set when the probe compiles.
    cfg: &'static str,
    /// What the cfg means, for the build log.
    what: &'static str,
    /// Headers to include, then a C snippet that compiles only when the
    /// feature is there.
    headers: &'static [&'static str],
    present: &'static str,
    /// A snippet that compiles only when it is not: exactly one of the two
    /// must compile, or the headers are not understood and the build stops.
    /// `None` where absence is simply "not present".
    absent: Option<&'static str>,
}

const FEATURES: &[Feature] = &[
    Feature {
        cfg: "dpdk_ptypes_count",
        what: "dev_supported_ptypes_get returns the list's length through a size_t * (24.03)",
        headers: &["ethdev_driver.h"],
        present: "_Static_assert(__builtin_types_compatible_p(eth_dev_supported_ptypes_get_t, \
                  const uint32_t *(*)(struct rte_eth_dev *, size_t *)), \"\");",
        absent: Some(
            "_Static_assert(__builtin_types_compatible_p(eth_dev_supported_ptypes_get_t, \
             const uint32_t *(*)(struct rte_eth_dev *)), \"\");",
        ),
    },
    Feature {
        cfg: "dpdk_queue_stats",
        what: "stats_get writes per-queue counters to a separate struct eth_queue_stats (25.11)",
        headers: &["ethdev_driver.h"],
        present: "_Static_assert(__builtin_types_compatible_p(eth_stats_get_t, \
                  int (*)(struct rte_eth_dev *, struct rte_eth_stats *, struct eth_queue_stats *)), \"\");",
        absent: Some(
            "_Static_assert(__builtin_types_compatible_p(eth_stats_get_t, \
             int (*)(struct rte_eth_dev *, struct rte_eth_stats *)), \"\");",
        ),
    },
    Feature {
        cfg: "dpdk_rx_queue_count_int",
        what: "rx_queue_count returns int (25.11)",
        headers: &["ethdev_driver.h"],
        present: "_Static_assert(__builtin_types_compatible_p(eth_rx_queue_count_t, \
                  int (*)(void *)), \"\");",
        absent: Some(
            "_Static_assert(__builtin_types_compatible_p(eth_rx_queue_count_t, \
             uint32_t (*)(void *)), \"\");",
        ),
    },
    Feature {
        cfg: "dpdk_mbuf_unions",
        what: "rte_mbuf's rearm and Rx descriptor fields sit in anonymous unions, not after markers (24.07)",
        headers: &["rte_mbuf.h"],
        present: "_Static_assert(sizeof(((struct rte_mbuf *)0)->rearm_data) == 8, \"\");",
        absent: Some("_Static_assert(sizeof(((struct rte_mbuf *)0)->rearm_data) == 0, \"\");"),
    },
    Feature {
        cfg: "dpdk_link_union",
        what: "rte_eth_link is a union with val64 (24.07, backported to 23.11.x)",
        headers: &["rte_ethdev.h"],
        present: "_Static_assert(sizeof(((struct rte_eth_link *)0)->val64) == 8, \"\");",
        absent: None,
    },
    Feature {
        cfg: "dpdk_logtype_pmd",
        what: "RTE_LOGTYPE_PMD exists (removed in 24.03)",
        headers: &["rte_log.h"],
        present: "_Static_assert(RTE_LOGTYPE_PMD >= 0, \"\");",
        absent: None,
    },
];

fn main() {
    for var in [
        "PKG_CONFIG_PATH",
        "PKG_CONFIG_LIBDIR",
        "PKG_CONFIG_SYSROOT_DIR",
        "NET_MANA_DPDK_SRC",
        "NET_MANA_DPDK_LIB_DIRS",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/ffi/wrapper.h");
    println!("cargo:rerun-if-changed=src/ffi/shim.c");
    println!("cargo:rerun-if-changed=src/ffi/shim.h");
    println!("cargo:rerun-if-changed=src/ffi/layout.c");

    let dpdk = pkg_config::Config::new()
        .atleast_version("22.11")
        .cargo_metadata(false)
        .probe("libdpdk")
        .unwrap_or_else(|e| fail(&format!("DPDK (libdpdk.pc) not found: {e}")));
    let series = dpdk
        .version
        .split('.')
        .take(2)
        .collect::<Vec<_>>()
        .join(".");
    if !TESTED.contains(&series.as_str()) {
        println!(
            "cargo:warning=DPDK {} is not a release this driver is tested with ({}); \
             the build goes on with what its headers say, run the tests before use",
            dpdk.version,
            TESTED.join(", ")
        );
    }
    println!("cargo:rustc-env=NET_MANA_DPDK_VERSION={}", dpdk.version);
    let lib_dirs = dpdk_lib_dirs(&dpdk);

    let verbs = probe_link("libibverbs");
    let mana = probe_link("libmana");
    let sdk_dirs = sdk_include_dirs(&dpdk);
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());

    let mut base = cc::Build::new();
    base.includes(&dpdk.include_paths)
        .includes(&sdk_dirs)
        .includes(&verbs.include_paths)
        .includes(&mana.include_paths)
        .define("ALLOW_INTERNAL_API", None)
        .define("ALLOW_EXPERIMENTAL_API", None)
        .flag("-include")
        .flag("rte_config.h")
        .flag("-march=corei7")
        .cargo_metadata(false)
        .warnings(false);

    check_headers_match_binaries(&base, &lib_dirs, &out, &dpdk.version);
    for f in FEATURES {
        println!("cargo::rustc-check-cfg=cfg({})", f.cfg);
        if detect(&base, f, &out) {
            println!("cargo::rustc-cfg={}", f.cfg);
        }
    }

    let mut clang_args: Vec<String> = Vec::new();
    for dir in dpdk
        .include_paths
        .iter()
        .chain(&sdk_dirs)
        .chain(&verbs.include_paths)
        .chain(&mana.include_paths)
    {
        clang_args.push(format!("-I{}", dir.display()));
    }
    // rte_config.h must come first, as DPDK's own cflags say.
    clang_args.push("-include".into());
    clang_args.push("rte_config.h".into());
    clang_args.push("-DALLOW_INTERNAL_API".into());
    clang_args.push("-DALLOW_EXPERIMENTAL_API".into());
    generate_bindings(&clang_args, &out);
    build_shim(&base);

    let mut libs: Vec<&str> = DPDK_LIBS.to_vec();
    if dpdk.libs.iter().any(|l| l == "rte_log")
        || lib_dirs.iter().any(|d| d.join("librte_log.so").exists())
    {
        libs.push("rte_log");
    }
    for lib in libs {
        println!("cargo:rustc-link-lib=dylib={lib}");
    }
    for dir in &lib_dirs {
        println!("cargo:rustc-link-search=native={}", dir.display());
    }
    println!("cargo:rustc-link-lib=dylib=ibverbs");
    println!("cargo:rustc-link-lib=dylib=mana");
}

fn fail(msg: &str) -> ! {
    panic!(
        "\n\nnet_mana build: {msg}\nRun `scripts/setup.sh` (as root) to install DPDK 22.11, rdma-core and \
         the DPDK driver-SDK headers, or `scripts/dpdk.sh <version>` to build another DPDK and point \
         PKG_CONFIG_PATH at its lib/pkgconfig.\n\n"
    );
}

fn probe_link(name: &str) -> pkg_config::Library {
    pkg_config::Config::new()
        .cargo_metadata(false)
        .probe(name)
        .unwrap_or_else(|e| fail(&format!("{name} (rdma-core >= 44) not found: {e}")))
}

/// Where DPDK's shared libraries are: `NET_MANA_DPDK_LIB_DIRS` (colon
/// separated; meson sets it for a DPDK subproject, whose drivers such as
/// the PCI bus are built in a directory of their own), pkg-config's `-L`
/// paths, and its `libdir` (pkg-config leaves system directories out of
/// `--libs`, so the variable is asked for).
fn dpdk_lib_dirs(dpdk: &pkg_config::Library) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = env::var_os("NET_MANA_DPDK_LIB_DIRS")
        .map(|v| env::split_paths(&v).collect())
        .unwrap_or_default();
    dirs.extend(dpdk.link_paths.iter().cloned());
    if let Ok(d) = pkg_config::get_variable("libdpdk", "libdir") {
        if !d.is_empty() {
            dirs.push(PathBuf::from(d));
        }
    }
    dirs.dedup();
    if dirs.is_empty() {
        fail("libdpdk.pc names no library directory");
    }
    dirs
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

/// Compiles `src` (syntax only) with DPDK's flags; true when it compiles.
fn compiles(base: &cc::Build, src: &str, out: &Path, name: &str) -> bool {
    let file = out.join(format!("probe_{name}.c"));
    std::fs::write(&file, src).expect("write probe");
    let status = base
        .get_compiler()
        .to_command()
        .arg("-fsyntax-only")
        .arg(&file)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap_or_else(|e| fail(&format!("cannot run the C compiler: {e}")));
    status.success()
}

fn detect(base: &cc::Build, f: &Feature, out: &Path) -> bool {
    let includes: String = f
        .headers
        .iter()
        .map(|h| format!("#include <{h}>\n"))
        .collect();
    let present = compiles(base, &format!("{includes}{}\n", f.present), out, f.cfg);
    if let Some(absent) = f.absent {
        let not = compiles(base, &format!("{includes}{absent}\n"), out, f.cfg);
        if present == not {
            fail(&format!(
                "cannot tell from the DPDK headers whether {}: both or neither form compiles \
                 (a DPDK release this build does not know? tested: {})",
                f.what,
                TESTED.join(", ")
            ));
        }
    }
    // In the build script's output (target/*/build/net_mana-*/output).
    println!(
        "net_mana: DPDK headers: {} {} (cfg {})",
        if present { "yes:" } else { "no: " },
        f.what,
        f.cfg
    );
    present
}

/// Refuses driver-SDK headers that do not describe the installed binaries:
/// `rte_eth_devices` is `RTE_MAX_ETHPORTS` `struct rte_eth_dev`s, so the
/// size the headers give must be the size librte_ethdev exports.
fn check_headers_match_binaries(base: &cc::Build, lib_dirs: &[PathBuf], out: &Path, version: &str) {
    let src = out.join("probe_eth_devices.c");
    std::fs::write(
        &src,
        "#include <ethdev_driver.h>\n\
         char net_mana_probe_eth_devices[RTE_MAX_ETHPORTS * sizeof(struct rte_eth_dev)];\n",
    )
    .expect("write probe");
    let obj = out.join("probe_eth_devices.o");
    let o = base
        .get_compiler()
        .to_command()
        .arg("-c")
        .arg(&src)
        .arg("-o")
        .arg(&obj)
        .output()
        .unwrap_or_else(|e| fail(&format!("cannot run the C compiler: {e}")));
    if !o.status.success() {
        fail(&format!(
            "the DPDK driver-SDK headers do not compile:\n{}",
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    let headers = symbol_size(&obj, "net_mana_probe_eth_devices", false)
        .unwrap_or_else(|e| fail(&format!("reading {}: {e}", obj.display())));
    let lib = lib_dirs
        .iter()
        .map(|d| d.join("librte_ethdev.so"))
        .find(|p| p.exists())
        .unwrap_or_else(|| lib_dirs[0].join("librte_ethdev.so"));
    match symbol_size(&lib, "rte_eth_devices", true) {
        Ok(binary) if binary == headers => {}
        Ok(binary) => fail(&format!(
            "the driver-SDK headers do not match the installed DPDK {version}: they make \
             rte_eth_devices {headers:#x} bytes (RTE_MAX_ETHPORTS * sizeof(struct rte_eth_dev)), \
             {} exports {binary:#x}. The headers come from another DPDK version or build; use the \
             SDK headers of exactly this install (NET_MANA_DPDK_SRC, or a DPDK built with \
             -Denable_driver_sdk=true)",
            lib.display()
        )),
        Err(e) => println!(
            "cargo:warning=cannot check the SDK headers against {}: {e}",
            lib.display()
        ),
    }
}

/// The size of `name` in an ELF file's (dynamic) symbol table.
fn symbol_size(path: &Path, name: &str, dynamic: bool) -> Result<u64, String> {
    use object::{Object, ObjectSymbol};
    let data = std::fs::read(path).map_err(|e| e.to_string())?;
    let file = object::File::parse(&*data).map_err(|e| e.to_string())?;
    let found = if dynamic {
        file.dynamic_symbols().find(|s| s.name() == Ok(name))
    } else {
        file.symbols().find(|s| s.name() == Ok(name))
    };
    found
        .map(|s| s.size())
        .ok_or_else(|| format!("no symbol {name}"))
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
        // Packed structs holding aligned members, which Rust rejects (E0588):
        // L2TPv2 headers, and the ARP header around an align(2)
        // rte_ether_addr (23.11 and later).
        .opaque_type("rte_l2tpv2_.*")
        .opaque_type("rte_flow_item_l2tpv2")
        .opaque_type("rte_arp_.*")
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

fn build_shim(base: &cc::Build) {
    let mut build = base.clone();
    build
        .file("src/ffi/shim.c")
        .file("src/ffi/layout.c")
        .cargo_metadata(true)
        .flag_if_supported("-Wno-unused-parameter")
        .warnings(true);
    build.compile("net_mana_shim");
}

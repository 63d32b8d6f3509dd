//! The `log` crate bridged to DPDK's `rte_log`, with the log types
//! `pmd.net.mana.{init,driver,rx,tx}` so `--log-level=pmd.net.mana.*:debug`
//! works as for any DPDK driver.

use crate::ffi;
use std::ffi::{c_int, CStr};
use std::sync::atomic::{AtomicI32, Ordering};

#[derive(Clone, Copy)]
enum LogType {
    Init = 0,
    Driver = 1,
    Rx = 2,
    Tx = 3,
}

const NAMES: [&CStr; 4] = [
    c"pmd.net.mana.init",
    c"pmd.net.mana.driver",
    c"pmd.net.mana.rx",
    c"pmd.net.mana.tx",
];

/// DPDK log type ids, or -1 before registration (then DPDK's generic PMD type is used).
static TYPES: [AtomicI32; 4] = [const { AtomicI32::new(-1) }; 4];

struct RteLogger;

static LOGGER: RteLogger = RteLogger;

/// Registers the log types and installs the bridge. Called from the
/// driver's constructor, before EAL parses `--log-level`.
pub fn init() {
    for (slot, name) in TYPES.iter().zip(NAMES) {
        // SAFETY: `name` is a NUL-terminated static string.
        let id = unsafe {
            ffi::rte_log_register_type_and_pick_level(name.as_ptr(), ffi::RTE_LOG_NOTICE)
        };
        slot.store(id, Ordering::Relaxed);
    }
    // Another logger (a Rust application linking us statically) keeps priority.
    if ::log::set_logger(&LOGGER).is_ok() {
        ::log::set_max_level(::log::LevelFilter::Trace);
    }
}

/// Which DPDK log type a record belongs to: by the module that logged it.
fn log_type(target: &str) -> LogType {
    let module = target.rsplit("::").next().unwrap_or(target);
    match module {
        "rxq" | "rx" => LogType::Rx,
        "txq" | "tx" => LogType::Tx,
        "probe" | "devargs" | "pci" | "diag" | "init" => LogType::Init,
        _ => LogType::Driver,
    }
}

fn rte_level(level: ::log::Level) -> u32 {
    match level {
        ::log::Level::Error => ffi::RTE_LOG_ERR,
        ::log::Level::Warn => ffi::RTE_LOG_WARNING,
        ::log::Level::Info => ffi::RTE_LOG_INFO,
        ::log::Level::Debug | ::log::Level::Trace => ffi::RTE_LOG_DEBUG,
    }
}

fn type_id(t: LogType) -> c_int {
    match TYPES[t as usize].load(Ordering::Relaxed) {
        id if id >= 0 => id,
        _ => ffi::compat::FALLBACK_LOGTYPE,
    }
}

impl ::log::Log for RteLogger {
    fn enabled(&self, meta: &::log::Metadata) -> bool {
        let id = type_id(log_type(meta.target()));
        // SAFETY: plain query of the log configuration.
        unsafe { ffi::rte_log_can_log(id as u32, rte_level(meta.level())) }
    }

    fn log(&self, record: &::log::Record) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let id = type_id(log_type(record.target()));
        let msg = format!("net_mana: {}", record.args());
        // SAFETY: the format consumes exactly one (int, const char *) pair,
        // and `msg` outlives the call; its length is bounded by the int cast.
        unsafe {
            ffi::rte_log(
                rte_level(record.level()),
                id as u32,
                c"%.*s\n".as_ptr(),
                msg.len().min(i32::MAX as usize) as c_int,
                msg.as_ptr(),
            );
        }
    }

    fn flush(&self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_map_to_dpdk_log_types_by_module() {
        assert!(matches!(log_type("rte_net_mana::rxq"), LogType::Rx));
        assert!(matches!(log_type("rte_net_mana::txq"), LogType::Tx));
        assert!(matches!(log_type("rte_net_mana::probe"), LogType::Init));
        assert!(matches!(log_type("rte_net_mana::devargs"), LogType::Init));
        assert!(matches!(log_type("rte_net_mana::reset"), LogType::Driver));
        assert!(matches!(log_type("rx"), LogType::Rx));
    }
}

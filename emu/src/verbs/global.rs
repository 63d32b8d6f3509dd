//! The process-wide emulator behind the exported verbs (configured by
//! `MANA_EMU_CONFIG`), its counters dump at exit, and what the preload
//! library's ELF constructor does.

use crate::config::Config;
use crate::device::Emulator;
use std::sync::OnceLock;

static GLOBAL: OnceLock<Result<Emulator, String>> = OnceLock::new();

/// The emulator behind the exported verbs (from `MANA_EMU_CONFIG`).
pub fn global() -> Option<&'static Emulator> {
    let r = GLOBAL.get_or_init(|| {
        let cfg = Config::from_env()?;
        crate::sysfs::create_all(&cfg).map_err(|e| format!("sysfs: {e}"))?;
        let emu = Emulator::new(cfg).map_err(|e| e.to_string())?;
        if emu.config().options.control_socket {
            if let Err(e) = crate::control::serve(&emu) {
                eprintln!("mana-emu: control socket: {e}");
            }
        }
        // SAFETY: registering a plain extern "C" fn with atexit.
        unsafe { libc::atexit(at_exit) };
        Ok(emu)
    });
    match r {
        Ok(e) => Some(e),
        Err(msg) => {
            static ONCE: std::sync::Once = std::sync::Once::new();
            ONCE.call_once(|| eprintln!("mana-emu: {msg}"));
            None
        }
    }
}

extern "C" fn at_exit() {
    if let Some(Ok(e)) = GLOBAL.get() {
        e.dump_counters();
    }
}

/// Run from the preload library's ELF constructor: with `MANA_EMU_CONFIG`
/// set, the fake PCI tree must exist before EAL scans the bus (which
/// happens before any verbs call).
pub fn preload_init() {
    if std::env::var_os("MANA_EMU_CONFIG").is_some()
        && std::env::var_os("MANA_EMU_NO_CTOR").is_none()
    {
        if let Ok(c) = Config::from_env() {
            crate::vmbus::interpose::init(&c);
            if let Err(e) = crate::sysfs::create_all(&c) {
                eprintln!(
                    "mana-emu: creating sysfs tree under {}: {e}",
                    c.options.sysfs_root.display()
                );
            }
        }
    }
}

//! A small logger for the device: lines with the time since start, to
//! stderr or a file, filtered by level (`MANA_PCI_LOG`: error, warn, info,
//! debug, trace; default info). The vfio-user crate logs through it too.

use std::fs::File;
use std::io::Write;
use std::sync::Mutex;
use std::time::Instant;

struct Logger {
    start: Instant,
    out: Mutex<Box<dyn Write + Send>>,
    level: log::LevelFilter,
}

impl log::Log for Logger {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        // The vfio-user crate reports every message at info; keep it at debug.
        let level = if m.target().starts_with("vfio_user") {
            m.level().max(log::Level::Debug)
        } else {
            m.level()
        };
        level <= self.level
    }

    fn log(&self, r: &log::Record<'_>) {
        if !self.enabled(r.metadata()) {
            return;
        }
        let t = self.start.elapsed();
        let mut o = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(
            o,
            "[{:4}.{:03}] mana-pci {}: {}",
            t.as_secs(),
            t.subsec_millis(),
            r.level().as_str().to_ascii_lowercase(),
            r.args()
        );
        let _ = o.flush();
    }

    fn flush(&self) {}
}

/// Installs the logger (once per process; later calls do nothing).
pub fn init(file: Option<File>) {
    let level = std::env::var("MANA_PCI_LOG")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(log::LevelFilter::Info);
    let out: Box<dyn Write + Send> = match file {
        Some(f) => Box::new(f),
        None => Box::new(std::io::stderr()),
    };
    let l = Box::new(Logger {
        start: Instant::now(),
        out: Mutex::new(out),
        level,
    });
    if log::set_boxed_logger(l).is_ok() {
        log::set_max_level(level);
    }
}

//! Test holds: places where a test can stop a driver thread to run a race
//! deterministically (race 4c of doc/reliability.md).
//!
//! Off unless `NET_MANA_TEST_HOLD_DIR` names a directory when the first
//! hold point is reached; then it costs a failed `unlink` per pass. A test
//! arms the point `name` by creating `<dir>/<name>.arm`: the next thread to
//! pass removes that file (one hold per arming), creates `<dir>/<name>.held`
//! and waits, with whatever locks it holds, until `<dir>/<name>.go` exists
//! (at most a minute, so a test that dies never wedges the port).

use ::log::warn;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();

const LONGEST: Duration = Duration::from_secs(60);

pub fn point(name: &str) {
    let dir = DIR.get_or_init(|| std::env::var_os("NET_MANA_TEST_HOLD_DIR").map(PathBuf::from));
    let Some(dir) = dir else {
        return;
    };
    if std::fs::remove_file(dir.join(format!("{name}.arm"))).is_err() {
        return;
    }
    warn!("test hold '{name}': held");
    let _ = std::fs::write(dir.join(format!("{name}.held")), b"");
    let go = dir.join(format!("{name}.go"));
    let t0 = Instant::now();
    while !go.exists() && t0.elapsed() < LONGEST {
        std::thread::sleep(Duration::from_millis(1));
    }
    warn!("test hold '{name}': released");
}

//! Following the ports' kernel-netdev `mtu` files.
//!
//! A PMD sets the MTU of a MANA port the way it is done on a VM: it writes
//! `<ibdev_path>/device/net/<ifname>/mtu`, the kernel netdev's sysfs file.
//! In the fake sysfs tree that is a plain file, so the device watches it:
//! one inotify instance per emulator, one watch per port on the netdev
//! *directory* (so a file that is truncated, rewritten, created or renamed
//! into place is seen alike; events on other files are ignored).
//!
//! [`MtuWatch::poll`] reads the pending events without blocking and names
//! the ports whose file must be read again. The device calls it after
//! draining doorbells in every pass that drained one (or has received
//! frames waiting), and otherwise at most every [`CHECK_INTERVAL`]. A
//! write to the file completes (and queues its event) before the writer
//! can ring a doorbell, so the packets of any doorbell rung after the write
//! see the new MTU: the write takes effect as synchronously as a sysfs
//! write does on a real kernel, at the cost of one `read(2)` returning
//! `EAGAIN` per busy device pass.
//!
//! A directory that does not exist (yet, or any more: hot remove) is
//! retried every [`RETRY_INTERVAL`]. Without inotify (e.g. the per-user
//! instance limit reached) every file is read every [`CHECK_INTERVAL`].

#![forbid(unsafe_code)]

use crate::fd;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How often the device looks at the files when no doorbell asks it to.
pub const CHECK_INTERVAL: Duration = Duration::from_millis(2);
/// How often a missing netdev directory is looked for again.
pub const RETRY_INTERVAL: Duration = Duration::from_millis(50);

const MASK: u32 = libc::IN_MODIFY
    | libc::IN_CLOSE_WRITE
    | libc::IN_CREATE
    | libc::IN_MOVED_TO
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF
    | libc::IN_ONLYDIR;

struct Watched {
    dir: PathBuf,
    wd: Option<i32>,
    retry_at: Instant,
}

pub struct MtuWatch {
    fd: Option<OwnedFd>,
    /// Event buffer (4 KiB, room for many events with their names).
    buf: Vec<u8>,
    ports: Vec<Watched>,
    next_check: Instant,
}

impl MtuWatch {
    /// Watches the netdev directories `dirs` (one per port, in port order).
    pub fn new(dirs: Vec<PathBuf>) -> MtuWatch {
        let now = Instant::now();
        MtuWatch {
            fd: fd::inotify(),
            buf: vec![0; 4096],
            ports: dirs
                .into_iter()
                .map(|dir| Watched {
                    dir,
                    wd: None,
                    retry_at: now,
                })
                .collect(),
            next_check: now,
        }
    }

    /// The `mtu` file of port `i`.
    pub fn file(&self, i: usize) -> PathBuf {
        self.ports[i].dir.join("mtu")
    }

    /// Whether inotify is in use (else files are polled).
    pub fn has_inotify(&self) -> bool {
        self.fd.is_some()
    }

    /// Returns the ports whose `mtu` file must be read again. `urgent`:
    /// look now (a doorbell was drained); otherwise only if
    /// [`CHECK_INTERVAL`] has passed since the last look.
    pub fn poll(&mut self, urgent: bool) -> Vec<usize> {
        let now = Instant::now();
        let due = now >= self.next_check;
        if !urgent && !due {
            return Vec::new();
        }
        if due {
            self.next_check = now + CHECK_INTERVAL;
        }
        let Some(ifd) = self.fd.as_ref().map(|f| f.as_raw_fd()) else {
            // No inotify: read every file, on the timer only.
            return if due {
                (0..self.ports.len()).collect()
            } else {
                Vec::new()
            };
        };
        let mut dirty: Vec<usize> = Vec::new();
        let mark = |dirty: &mut Vec<usize>, i: usize| {
            if !dirty.contains(&i) {
                dirty.push(i);
            }
        };
        loop {
            let n = fd::read_fd(ifd, &mut self.buf);
            if n <= 0 {
                break; // EAGAIN: no more events
            }
            let bytes = &self.buf[..n as usize];
            let mut off = 0usize;
            // struct inotify_event { int wd; u32 mask, cookie, len; char name[len]; }
            while off + 16 <= bytes.len() {
                let word = |o: usize| u32::from_ne_bytes(bytes[o..o + 4].try_into().unwrap());
                let (wd, mask, len) = (word(off) as i32, word(off + 4), word(off + 12) as usize);
                let name = &bytes[off + 16..(off + 16 + len).min(bytes.len())];
                let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
                off += 16 + len;
                if mask & libc::IN_Q_OVERFLOW != 0 {
                    (0..self.ports.len()).for_each(|i| mark(&mut dirty, i));
                    continue;
                }
                for (i, p) in self.ports.iter_mut().enumerate() {
                    if p.wd != Some(wd) {
                        continue;
                    }
                    if mask & (libc::IN_IGNORED | libc::IN_DELETE_SELF | libc::IN_MOVE_SELF) != 0 {
                        // The directory is gone or elsewhere: watch its path
                        // again once it exists.
                        if mask & libc::IN_IGNORED == 0 {
                            fd::inotify_rm_watch(ifd, wd);
                        }
                        p.wd = None;
                        p.retry_at = now;
                    } else if name == b"mtu" {
                        mark(&mut dirty, i);
                    }
                }
            }
        }
        for (i, p) in self.ports.iter_mut().enumerate() {
            if p.wd.is_some() || now < p.retry_at {
                continue;
            }
            let wd = fd::inotify_add_watch(ifd, &p.dir, MASK);
            if wd >= 0 {
                // Two ports on one directory share the watch descriptor;
                // both match it above.
                p.wd = Some(wd);
                mark(&mut dirty, i); // read what was written before the watch
            } else {
                p.retry_at = now + RETRY_INTERVAL;
            }
        }
        dirty
    }
}

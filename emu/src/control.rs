//! The control socket: a Unix stream socket in `run_dir` speaking JSON
//! lines, so `mana-emu inject|counters|fault` (or a test) can reach the
//! device inside a running DPDK process.
//!
//! Requests: `{"cmd":"ping"}`, `{"cmd":"counters"}`, `{"cmd":"state"}`,
//! `{"cmd":"fault","fault":{"fault":"link_down","mac":"..."},"trigger":"now"}`,
//! `{"cmd":"inject","mac":"...","frames":["<hex>",...]}`.
//! Replies: `{"ok":true,...}` or `{"ok":false,"error":"..."}`.

#![forbid(unsafe_code)]

use crate::device::{Counters, DeviceState, Emulator, Fault, Shared, Trigger};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

#[derive(Serialize, Deserialize, Debug)]
#[serde(tag = "cmd", rename_all = "snake_case")]
pub enum Request {
    Ping,
    Counters,
    Fault {
        fault: Fault,
        #[serde(default)]
        trigger: Trigger,
    },
    Inject {
        mac: String,
        frames: Vec<String>,
    },
    /// What the device holds now (live queues' heads and tails, adapters,
    /// the doorbell ring), for explaining a stall.
    State,
}

#[derive(Serialize, Deserialize, Debug, Default)]
pub struct Reply {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counters: Option<Counters>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<DeviceState>,
}

pub fn socket_path(run_dir: &Path, pid: u32) -> PathBuf {
    run_dir.join(format!("mana-emu-{pid}.sock"))
}

/// The stable name pointing at the most recent process's socket.
pub fn latest_path(run_dir: &Path) -> PathBuf {
    run_dir.join("mana-emu.sock")
}

pub fn hex_decode(s: &str) -> Result<Vec<u8>, String> {
    let s: String = s
        .chars()
        .filter(|c| !c.is_whitespace() && *c != ':')
        .collect();
    if !s.len().is_multiple_of(2) {
        return Err("odd hex length".into());
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).map_err(|e| e.to_string()))
        .collect()
}

pub fn hex_encode(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

pub(crate) fn handle(sh: &Arc<Shared>, req: Request) -> Reply {
    let mut st = sh.st.lock().unwrap_or_else(|e| e.into_inner());
    let r = match req {
        Request::Ping => Ok(Reply {
            ok: true,
            pid: Some(std::process::id()),
            ..Default::default()
        }),
        Request::Counters => Ok(Reply {
            ok: true,
            counters: Some({
                st.refresh_mtu(true);
                st.counters()
            }),
            ..Default::default()
        }),
        Request::State => Ok(Reply {
            ok: true,
            state: Some(st.device_state(sh.loops.load(Ordering::Relaxed))),
            ..Default::default()
        }),
        Request::Fault { fault, trigger } => st
            .schedule(fault, trigger)
            .map(|_| Reply {
                ok: true,
                ..Default::default()
            })
            .map_err(|e| format!("errno {}", e.0)),
        Request::Inject { mac, frames } => match st.port_index(&mac) {
            None => Err(format!("no port {mac}")),
            Some(p) => {
                let mut res = Ok(Reply {
                    ok: true,
                    ..Default::default()
                });
                for f in frames {
                    match hex_decode(&f) {
                        Ok(b) => st.inject_rx(p, b),
                        Err(e) => {
                            res = Err(e);
                            break;
                        }
                    }
                }
                res
            }
        },
    };
    drop(st);
    // Wake the device thread.
    crate::fd::write_fd(
        std::os::fd::AsRawFd::as_raw_fd(&sh.wake),
        &1u64.to_ne_bytes(),
    );
    r.unwrap_or_else(|e| Reply {
        ok: false,
        error: Some(e),
        ..Default::default()
    })
}

/// One connected client of the control thread: the bytes of its next
/// request(s) read so far, and the reply still being written.
struct Client {
    s: UnixStream,
    input: Vec<u8>,
    out: Vec<u8>,
    sent: usize,
    /// The client closed its side: answer what it asked, then drop it.
    eof: bool,
}

impl Client {
    fn writing(&self) -> bool {
        self.sent < self.out.len()
    }

    /// Answers the next complete request line, if no reply is pending (a
    /// client gets its replies in order, one at a time). A last line
    /// without a newline counts once the client has closed its side.
    fn next_request(&mut self, sh: &Arc<Shared>) {
        while !self.writing() {
            let line = match self.input.iter().position(|&b| b == b'\n') {
                Some(i) => {
                    let l: Vec<u8> = self.input.drain(..=i).collect();
                    l
                }
                None if self.eof && !self.input.is_empty() => std::mem::take(&mut self.input),
                None => return,
            };
            let line = String::from_utf8_lossy(&line);
            if line.trim().is_empty() {
                continue;
            }
            let reply = match serde_json::from_str::<Request>(&line) {
                Ok(req) => handle(sh, req),
                Err(e) => Reply {
                    ok: false,
                    error: Some(format!("bad request: {e}")),
                    ..Default::default()
                },
            };
            let mut out = serde_json::to_string(&reply).unwrap_or_else(|_| "{\"ok\":false}".into());
            out.push('\n');
            self.out = out.into_bytes();
            self.sent = 0;
        }
    }

    /// Moves bytes in the direction the client waits for; false once the
    /// client is done (closed and answered) or broken.
    fn service(&mut self, sh: &Arc<Shared>) -> bool {
        if self.writing() {
            match (&self.s).write(&self.out[self.sent..]) {
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => return true,
                Err(_) => return false,
            }
            if self.writing() {
                return true;
            }
            self.out = Vec::new();
        } else if !self.eof {
            let mut buf = [0u8; 4096];
            match (&self.s).read(&mut buf) {
                Ok(0) => self.eof = true,
                Ok(n) => self.input.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => return true,
                Err(_) => return false,
            }
        }
        self.next_request(sh);
        self.writing() || !self.eof
    }
}

/// Starts the control socket of an emulator (a background thread).
///
/// The one thread serves every client itself, multiplexing them with
/// poll(2): a thread per client made glibc give each client thread that
/// overlapped another its own malloc arena, and each arena kept the
/// high-water of a `counters` reply (megabytes once thousands of queues
/// were retired): the soak's process grew by 3 MB per new arena, up to 8
/// arenas per core. No client waits for another: a client that keeps its
/// connection open and asks again and again (the benchmark's pacing shim,
/// inside the DPDK process) and one that connects and never asks leave
/// the others answered, and nothing is dropped for being slow (a client
/// under valgrind reads its reply at a fraction of native speed).
pub fn serve(emu: &Emulator) -> std::io::Result<PathBuf> {
    let dir = emu.config().options.run_dir.clone();
    std::fs::create_dir_all(&dir)?;
    let path = socket_path(&dir, std::process::id());
    let _ = std::fs::remove_file(&path);
    let l = UnixListener::bind(&path)?;
    l.set_nonblocking(true)?;
    let latest = latest_path(&dir);
    let _ = std::fs::remove_file(&latest);
    let _ = std::os::unix::fs::symlink(&path, &latest);
    let sh = emu.sh.clone();
    let p2 = path.clone();
    std::thread::Builder::new()
        .name("mana-emu-ctl".into())
        .spawn(move || {
            serve_clients(&sh, &l);
            let _ = std::fs::remove_file(p2);
        })?;
    Ok(path)
}

/// The control thread's loop: accepts clients and serves whichever is
/// ready, until the listener fails.
fn serve_clients(sh: &Arc<Shared>, l: &UnixListener) {
    use std::os::fd::AsRawFd;
    let mut clients: Vec<Client> = Vec::new();
    let mut fds: Vec<libc::pollfd> = Vec::new();
    loop {
        fds.clear();
        fds.push(libc::pollfd {
            fd: l.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        });
        fds.extend(clients.iter().map(|c| libc::pollfd {
            fd: c.s.as_raw_fd(),
            events: if c.writing() {
                libc::POLLOUT
            } else {
                libc::POLLIN
            },
            revents: 0,
        }));
        if crate::fd::poll_many(&mut fds, -1) < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        // Clients first (their indexes match `fds[1..]`), then new ones.
        let mut i = 0;
        clients.retain_mut(|c| {
            let ready = fds[1 + i].revents != 0;
            i += 1;
            !ready || c.service(sh)
        });
        if fds[0].revents != 0 {
            loop {
                match l.accept() {
                    Ok((s, _)) => {
                        if s.set_nonblocking(true).is_ok() {
                            clients.push(Client {
                                s,
                                input: Vec::new(),
                                out: Vec::new(),
                                sent: 0,
                                eof: false,
                            });
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e)
                        if matches!(
                            e.raw_os_error(),
                            Some(libc::EBADF | libc::EINVAL | libc::ENOTSOCK)
                        ) =>
                    {
                        return
                    }
                    // Out of fds and the like: the clients being served
                    // free some; retry shortly rather than spin.
                    Err(_) => {
                        std::thread::sleep(std::time::Duration::from_millis(100));
                        break;
                    }
                }
            }
        }
    }
}

/// How long a client waits for a reply before it gives up on the emulator.
pub const REPLY_DEADLINE: std::time::Duration = std::time::Duration::from_secs(300);

/// Client side: one request, one reply.
pub fn request(path: &Path, req: &Request) -> Result<Reply, String> {
    let mut s = UnixStream::connect(path).map_err(|e| format!("{}: {e}", path.display()))?;
    // Only catches a dead emulator: a busy machine, or a DPDK process under
    // valgrind, answers in seconds rather than microseconds.
    s.set_read_timeout(Some(REPLY_DEADLINE)).ok();
    let mut line = serde_json::to_string(req).map_err(|e| e.to_string())?;
    line.push('\n');
    s.write_all(line.as_bytes()).map_err(|e| e.to_string())?;
    let mut r = String::new();
    BufReader::new(s).read_line(&mut r).map_err(|e| {
        format!(
            "{}: no reply within {} s: {e}",
            path.display(),
            REPLY_DEADLINE.as_secs()
        )
    })?;
    let rep: Reply = serde_json::from_str(&r).map_err(|e| format!("bad reply {r:?}: {e}"))?;
    if !rep.ok {
        return Err(rep.error.unwrap_or_else(|| "request failed".into()));
    }
    Ok(rep)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::TestDevice;

    /// Threads of this process whose name starts with `prefix`.
    fn threads_named(prefix: &str) -> usize {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
            .filter(|c| c.starts_with(prefix))
            .count()
    }

    /// The control tests one at a time: one counts the process's control
    /// threads.
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn serial() -> std::sync::MutexGuard<'static, ()> {
        SERIAL.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// One request on a connection kept open, its reply read.
    fn ping_kept_open(path: &Path) -> UnixStream {
        let mut s = UnixStream::connect(path).unwrap();
        s.write_all(b"{\"cmd\":\"ping\"}\n").unwrap();
        let mut r = String::new();
        BufReader::new(s.try_clone().unwrap())
            .read_line(&mut r)
            .unwrap();
        assert!(r.contains("\"ok\":true"), "{r}");
        s
    }

    /// The control thread answers requests itself: a thread per client
    /// gave each overlapping client its own malloc arena, which kept a
    /// counters reply's high-water (the soak's hot plug memory growth).
    #[test]
    fn requests_are_served_on_the_control_thread() {
        let _s = serial();
        let dev = TestDevice::new("ctl-thread", crate::Config::default_single());
        let path = serve(&dev.emu).unwrap();
        let open = ping_kept_open(&path);
        // Counted once the control thread has answered (it names itself
        // as it starts); earlier tests' control threads live on.
        let threads = threads_named("mana-emu-ctl");
        let open2 = ping_kept_open(&path);
        assert_eq!(
            threads_named("mana-emu-ctl"),
            threads,
            "a request was served on a thread of its own"
        );
        drop(open2);
        // A client that connects and never asks does not hold the others.
        let silent = UnixStream::connect(&path).unwrap();
        let rep = request(&path, &Request::Ping).unwrap();
        assert_eq!(rep.pid, Some(std::process::id()));
        drop(silent);
        drop(open);
    }

    /// A client that keeps its connection and asks again and again (the
    /// benchmark's pacing shim inside testpmd) does not starve another:
    /// served one client at a time, the second was never answered while
    /// the first kept asking (every callgrind row of the benchmark timed
    /// out).
    #[test]
    fn a_client_that_keeps_asking_does_not_starve_another() {
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        let _s = serial();
        let dev = TestDevice::new("ctl-busy", crate::Config::default_single());
        let path = serve(&dev.emu).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let asked = Arc::new(AtomicU64::new(0));
        let busy = {
            let (stop, asked) = (stop.clone(), asked.clone());
            let mut s = ping_kept_open(&path);
            std::thread::spawn(move || {
                // Gives up after a deadline that only catches the hang.
                let t0 = std::time::Instant::now();
                let mut r = BufReader::new(s.try_clone().unwrap());
                while !stop.load(Ordering::Relaxed) && t0.elapsed().as_secs() < 60 {
                    s.write_all(b"{\"cmd\":\"counters\"}\n").unwrap();
                    let mut line = String::new();
                    r.read_line(&mut line).unwrap();
                    assert!(line.contains("\"ok\":true"), "{line}");
                    asked.fetch_add(1, Ordering::Relaxed);
                }
                !stop.load(Ordering::Relaxed)
            })
        };
        while asked.load(Ordering::Relaxed) < 3 {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let rep = request(&path, &Request::Ping).unwrap();
        stop.store(true, Ordering::Relaxed);
        let gave_up = busy.join().unwrap();
        assert_eq!(rep.pid, Some(std::process::id()));
        assert!(
            !gave_up,
            "the second client was answered only after the first stopped asking \
             ({} requests of the first served)",
            asked.load(Ordering::Relaxed)
        );
    }

    /// A request split over several writes, and several requests in one
    /// write, are each answered once, in order.
    #[test]
    fn requests_are_framed_by_lines_not_by_writes() {
        let _s = serial();
        let dev = TestDevice::new("ctl-lines", crate::Config::default_single());
        let path = serve(&dev.emu).unwrap();
        let mut s = UnixStream::connect(&path).unwrap();
        s.write_all(b"{\"cmd\":").unwrap();
        s.flush().unwrap();
        s.write_all(b"\"ping\"}\n{\"cmd\":\"nope\"}\n{\"cmd\":\"ping\"}")
            .unwrap();
        // The last request has no newline: closing the writing side ends it.
        s.shutdown(std::net::Shutdown::Write).unwrap();
        let lines: Vec<String> = BufReader::new(s).lines().map(|l| l.unwrap()).collect();
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(lines[0].contains("\"ok\":true"), "{lines:?}");
        assert!(lines[1].contains("bad request"), "{lines:?}");
        assert!(lines[2].contains("\"ok\":true"), "{lines:?}");
    }

    /// `state` shows a live queue's head and tail as the device has them
    /// (what the soak prints at a deviation), and a reset's effect: the
    /// adapter away with the time it has left, the queue's context dead.
    #[test]
    fn the_state_request_shows_heads_tails_and_a_reset() {
        let dev = TestDevice::new("ctl-state", crate::Config::default_single());
        // Answered as the control thread answers it (not through a socket:
        // a second control thread would upset the test above, which counts
        // them).
        let ask = || handle(&dev.emu.sh, Request::State);
        let ctx = dev.open();
        let mut tx = ctx.tx_queue(1, 64).unwrap();
        tx.post(&[0u8; 60]);
        tx.ring();
        assert_eq!(tx.cq.wait(1).len(), 1);
        let state = |what: &str| {
            let st = ask().state.unwrap();
            let sq = st
                .wqs
                .iter()
                .find(|w| w.kind == "sq" && w.id == tx.sq_id)
                .unwrap_or_else(|| panic!("no sq {} {what}: {st:?}", tx.sq_id))
                .clone();
            (st, sq)
        };
        let (st, sq) = state("after a send");
        let tail = tx.head_bu * 32;
        assert!(tail > 0);
        assert_eq!(
            (sq.head, sq.tail, sq.doorbells, sq.packets),
            (tail, tail, 1, 1),
            "{sq:?}"
        );
        assert!(sq.active && !sq.ctx_dead, "{sq:?}");
        assert_eq!(st.adapters.len(), 1);
        assert!(st.adapters[0].present && st.adapters[0].back_in_ms.is_none());
        assert_eq!(st.adapters[0].live_contexts, 1);
        assert_eq!(st.doorbell_ring_pending, 0);
        assert!(st.device_loops > 0);
        dev.fault(Fault::Reset {
            pci: st.adapters[0].pci.clone(),
            down_ms: Some(60_000),
            new_name: None,
        })
        .unwrap();
        let (st, sq) = state("after a reset");
        assert!(!sq.active && sq.ctx_dead, "{sq:?}");
        let a = &st.adapters[0];
        assert!(!a.present && !a.removed, "{a:?}");
        assert!(a.back_in_ms.is_some_and(|ms| ms > 50_000), "{a:?}");
        assert_eq!((a.live_contexts, a.dead_contexts), (0, 1), "{a:?}");
    }
}

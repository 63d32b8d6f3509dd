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
use std::io::{BufRead, BufReader, Write};
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

/// How long the control thread waits for a client's request or for its
/// reply to be taken before it drops the client (every client sends one
/// request and reads one reply).
const CLIENT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

fn client(sh: &Arc<Shared>, s: UnixStream) {
    let _ = s.set_read_timeout(Some(CLIENT_TIMEOUT));
    let _ = s.set_write_timeout(Some(CLIENT_TIMEOUT));
    let mut w = match s.try_clone() {
        Ok(w) => w,
        Err(_) => return,
    };
    for line in BufReader::new(s).lines() {
        let Ok(line) = line else { return };
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
        if w.write_all(out.as_bytes()).is_err() {
            return;
        }
    }
}

/// Starts the control socket of an emulator (a background thread).
///
/// The thread serves its clients one after the other itself. A thread per
/// client made glibc give each client thread that overlapped another its
/// own malloc arena, and each arena kept the high-water of a `counters`
/// reply (megabytes once thousands of queues were retired): the soak's
/// process grew by 3 MB per new arena, up to 8 arenas per core.
pub fn serve(emu: &Emulator) -> std::io::Result<PathBuf> {
    let dir = emu.config().options.run_dir.clone();
    std::fs::create_dir_all(&dir)?;
    let path = socket_path(&dir, std::process::id());
    let _ = std::fs::remove_file(&path);
    let l = UnixListener::bind(&path)?;
    let latest = latest_path(&dir);
    let _ = std::fs::remove_file(&latest);
    let _ = std::os::unix::fs::symlink(&path, &latest);
    let sh = emu.sh.clone();
    let p2 = path.clone();
    std::thread::Builder::new()
        .name("mana-emu-ctl".into())
        .spawn(move || {
            for s in l.incoming() {
                match s {
                    Ok(s) => client(&sh, s),
                    Err(_) => break,
                }
            }
            let _ = std::fs::remove_file(p2);
        })?;
    Ok(path)
}

/// Client side: one request, one reply.
pub fn request(path: &Path, req: &Request) -> Result<Reply, String> {
    let mut s = UnixStream::connect(path).map_err(|e| format!("{}: {e}", path.display()))?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .ok();
    let mut line = serde_json::to_string(req).map_err(|e| e.to_string())?;
    line.push('\n');
    s.write_all(line.as_bytes()).map_err(|e| e.to_string())?;
    let mut r = String::new();
    BufReader::new(s)
        .read_line(&mut r)
        .map_err(|e| e.to_string())?;
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
        let dev = TestDevice::new("ctl-thread", crate::Config::default_single());
        let path = serve(&dev.emu).unwrap();
        let open = ping_kept_open(&path);
        assert_eq!(
            threads_named("mana-emu-ctl"),
            1,
            "a request was served on a thread of its own"
        );
        drop(open);
        // A client that connects and never asks holds the thread for
        // CLIENT_TIMEOUT at most; the next one is answered.
        let silent = UnixStream::connect(&path).unwrap();
        let rep = request(&path, &Request::Ping).unwrap();
        assert_eq!(rep.pid, Some(std::process::id()));
        drop(silent);
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

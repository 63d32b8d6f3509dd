//! The control channel on the guest's second serial port: the host sends
//! `<id> <command>` lines, the guest's init runs each with `sh -c` and
//! answers with the output and `@@END <id> <status>`.

use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::{Duration, Instant};

pub struct Console {
    w: UnixStream,
    r: BufReader<UnixStream>,
    next: u64,
    /// The bytes of a line not yet ended (kept across read timeouts).
    partial: Vec<u8>,
    /// Empty lines sent to a silent guest, and after how long a silence
    /// ([`NUDGE_AFTER`]).
    pub nudges: u64,
    nudge_after: Duration,
}

/// A command's answer not begun or continued for this long gets an empty
/// line sent after it. The guest's 16550 under TCG can lose a transmit
/// interrupt on a busy host: its 8250 driver then holds the rest of the
/// output until any other interrupt of the port, and an arriving byte is
/// one. (The init runs the empty line as an empty command and answers
/// `@@END  0`, which no command's id matches.)
const NUDGE_AFTER: Duration = Duration::from_secs(5);

/// What a command printed and its exit status.
#[derive(Clone, Debug)]
pub struct Output {
    pub status: i32,
    pub text: String,
}

impl Output {
    pub fn ok(&self) -> bool {
        self.status == 0
    }
}

fn timed_out(what: &str, t: Duration) -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        format!("{what}: no answer within {t:?}"),
    )
}

impl Console {
    /// Waits for QEMU to connect the serial port's socket.
    pub fn accept(l: &UnixListener, timeout: Duration) -> io::Result<Console> {
        l.set_nonblocking(true)?;
        let t0 = Instant::now();
        loop {
            match l.accept() {
                Ok((s, _)) => {
                    s.set_nonblocking(false)?;
                    return Ok(Console {
                        r: BufReader::new(s.try_clone()?),
                        w: s,
                        next: 1,
                        partial: Vec::new(),
                        nudges: 0,
                        nudge_after: NUDGE_AFTER,
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if t0.elapsed() > timeout {
                        return Err(timed_out("QEMU's serial connection", timeout));
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The next line, waiting until `deadline`; with `nudge`, an empty line
    /// goes to the guest after each `nudge_after` without a byte.
    fn read_line(&mut self, deadline: Instant, what: &str, nudge: bool) -> io::Result<String> {
        let t0 = Instant::now();
        loop {
            let now = Instant::now();
            let left = deadline.saturating_duration_since(now);
            if left.is_zero() {
                return Err(timed_out(what, now - t0));
            }
            let slice = if nudge {
                left.min(self.nudge_after)
            } else {
                left
            };
            self.r.get_ref().set_read_timeout(Some(slice))?;
            let had = self.partial.len();
            match self.r.read_until(b'\n', &mut self.partial) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("{what}: guest console closed"),
                    ))
                }
                Ok(_) if self.partial.ends_with(b"\n") => {
                    let line = String::from_utf8_lossy(&self.partial)
                        .trim_end_matches(['\n', '\r'])
                        .to_string();
                    self.partial.clear();
                    return Ok(line);
                }
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    if nudge && self.partial.len() == had && Instant::now() < deadline {
                        self.nudges += 1;
                        eprintln!(
                            "guest console: {what}: silent for {:.0?}, sent an empty line",
                            t0.elapsed()
                        );
                        writeln!(self.w)?;
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Waits for the init's `@@READY` line; returns the rest of it.
    pub fn wait_ready(&mut self, timeout: Duration) -> io::Result<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let l = self.read_line(deadline, "guest boot", false)?;
            if let Some(rest) = l.strip_prefix("@@READY ") {
                return Ok(rest.to_string());
            }
        }
    }

    /// Sends a command without waiting for it.
    pub fn send_only(&mut self, cmd: &str) -> io::Result<()> {
        let id = self.next;
        self.next += 1;
        writeln!(self.w, "{id} {cmd}")
    }

    /// Runs `cmd` in the guest and waits for its end.
    pub fn run(&mut self, cmd: &str, timeout: Duration) -> io::Result<Output> {
        assert!(!cmd.contains('\n'), "one line per command");
        let id = self.next;
        self.next += 1;
        writeln!(self.w, "{id} {cmd}")?;
        let deadline = Instant::now() + timeout;
        let end = format!("@@END {id} ");
        let mut text = String::new();
        loop {
            let l = self.read_line(deadline, &format!("guest command `{cmd}`"), true)?;
            if let Some(rc) = l.strip_prefix(&end) {
                return Ok(Output {
                    status: rc.trim().parse().unwrap_or(-1),
                    text,
                });
            }
            // Another command's end: an empty line's (a nudge) or one given
            // up on. Not this command's output.
            if l.starts_with("@@END ") {
                continue;
            }
            text.push_str(&l);
            text.push('\n');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A guest whose answer is held until another byte arrives (as a lost
    /// transmit interrupt holds it) answers after one empty line; the
    /// empty line's own `@@END` is not the next command's output.
    #[test]
    fn a_held_answer_comes_after_an_empty_line_and_its_end_is_skipped() {
        let dir = std::env::temp_dir().join(format!("console-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ctl.sock");
        let l = UnixListener::bind(&path).unwrap();
        let guest = std::thread::spawn({
            let path = path.clone();
            move || {
                let s = UnixStream::connect(&path).unwrap();
                let mut r = BufReader::new(s.try_clone().unwrap());
                let mut w = s;
                // The next command, past any empty lines (more nudges come
                // if this thread is slow to run on a busy machine).
                let command = |r: &mut BufReader<UnixStream>| loop {
                    let mut line = String::new();
                    r.read_line(&mut line).unwrap();
                    if line != "\n" {
                        return line;
                    }
                };
                assert_eq!(command(&mut r), "1 echo hi\n");
                // Held: nothing until the host's empty line.
                let mut line = String::new();
                r.read_line(&mut line).unwrap();
                assert_eq!(line, "\n");
                write!(w, "hi\n@@END 1 0\n@@END  0\n").unwrap();
                assert_eq!(command(&mut r), "2 echo two\n");
                write!(w, "two\n@@END 2 0\n").unwrap();
            }
        });
        let mut c = Console::accept(&l, Duration::from_secs(120)).unwrap();
        c.nudge_after = Duration::from_millis(200);
        let o = c.run("echo hi", Duration::from_secs(120)).unwrap();
        assert_eq!((o.status, o.text.as_str()), (0, "hi\n"));
        assert!(c.nudges >= 1);
        let o = c.run("echo two", Duration::from_secs(120)).unwrap();
        assert_eq!(o.text, "two\n", "the empty line's @@END is skipped");
        guest.join().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}

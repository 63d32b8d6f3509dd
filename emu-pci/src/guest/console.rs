//! The control channel on the guest's virtio console (hvc0): the host sends
//! `<id> <command>` lines, the guest's init runs each with `sh -c` and
//! answers with the output and `@@END <id> <status>`.

use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::{Duration, Instant};

pub struct Console {
    w: UnixStream,
    r: BufReader<UnixStream>,
    next: u64,
}

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

    fn read_line(&mut self, deadline: Instant, what: &str) -> io::Result<String> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(timed_out(what, Duration::ZERO));
        }
        self.r.get_ref().set_read_timeout(Some(left))?;
        let mut line = String::new();
        match self.r.read_line(&mut line) {
            Ok(0) => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("{what}: guest console closed"),
            )),
            Ok(_) => Ok(line.trim_end_matches(['\n', '\r']).to_string()),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                Err(timed_out(what, left))
            }
            Err(e) => Err(e),
        }
    }

    /// Waits for the init's `@@READY` line; returns the rest of it.
    pub fn wait_ready(&mut self, timeout: Duration) -> io::Result<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let l = self.read_line(deadline, "guest boot")?;
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
            let l = self.read_line(deadline, &format!("guest command `{cmd}`"))?;
            if let Some(rc) = l.strip_prefix(&end) {
                return Ok(Output {
                    status: rc.trim().parse().unwrap_or(-1),
                    text,
                });
            }
            // The end of a command given up on at its deadline, answering
            // late: not this command's output.
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

    /// A command given up on answers late, before the next command's
    /// answer: its `@@END` line is not the next command's output.
    #[test]
    fn a_late_answer_of_a_command_given_up_on_is_skipped() {
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
                let mut line = String::new();
                r.read_line(&mut line).unwrap();
                assert_eq!(line, "1 sleep 1000\n");
                line.clear();
                r.read_line(&mut line).unwrap();
                assert_eq!(line, "2 echo two\n");
                write!(w, "@@END 1 0\ntwo\n@@END 2 0\n").unwrap();
            }
        });
        let mut c = Console::accept(&l, Duration::from_secs(120)).unwrap();
        let e = c.run("sleep 1000", Duration::from_millis(1)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        let o = c.run("echo two", Duration::from_secs(120)).unwrap();
        assert_eq!((o.status, o.text.as_str()), (0, "two\n"));
        guest.join().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}

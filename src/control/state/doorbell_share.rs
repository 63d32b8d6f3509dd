//! Where a port's doorbell page comes from, as the primary hands it to
//! secondaries (`mp`): the current device context's uverbs fd.

#![forbid(unsafe_code)]

use parking_lot::Mutex;
use std::ffi::c_int;

/// The uverbs fd whose first page is the current context's doorbell page,
/// and how many contexts the port has had: a secondary keeps the mapping of
/// the highest generation it was given, whichever message arrives last.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DoorbellSource {
    /// `cmd_fd` of the open context, or -1 while there is none.
    pub fd: c_int,
    pub generation: u64,
}

/// A port's doorbell source, shared between the thread that opens and
/// closes device contexts and the IPC thread that hands the fd out: a reply
/// carrying the fd is sent while the source is held, and changing the
/// source waits for it, so the fd is never closed under a reply.
pub struct DoorbellShare(Mutex<DoorbellSource>);

impl DoorbellShare {
    pub const fn new() -> DoorbellShare {
        DoorbellShare(Mutex::new(DoorbellSource {
            fd: -1,
            generation: 0,
        }))
    }

    /// A new context's fd (a new generation), or none. Returns once no
    /// reply carries the previous fd any more.
    pub fn set(&self, fd: Option<c_int>) {
        let mut src = self.0.lock();
        match fd {
            Some(fd) => {
                src.fd = fd;
                src.generation += 1;
            }
            None => src.fd = -1,
        }
    }

    pub fn current(&self) -> DoorbellSource {
        *self.0.lock()
    }

    /// Runs `f` with the current source held (it sends the reply).
    pub fn with_current<R>(&self, f: impl FnOnce(DoorbellSource) -> R) -> R {
        let src = self.0.lock();
        f(*src)
    }
}

impl Default for DoorbellShare {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A secondary's DOORBELL_FD request answered while the primary closes
    /// the device context: closing (setting no fd) waits until the reply
    /// carrying the old fd is sent, so the fd it sends is still open.
    #[test]
    fn closing_the_context_waits_for_a_reply_carrying_its_fd() {
        use std::sync::atomic::{AtomicU32, Ordering};
        use std::sync::Arc;
        let share = Arc::new(DoorbellShare::new());
        share.set(Some(42));
        let step = Arc::new(AtomicU32::new(0));
        let (s2, st2) = (share.clone(), step.clone());
        let reply = std::thread::spawn(move || {
            s2.with_current(|src| {
                st2.store(1, Ordering::SeqCst);
                std::thread::sleep(std::time::Duration::from_millis(100));
                // The "reply": the fd must still be the open context's.
                assert_eq!(st2.load(Ordering::SeqCst), 1, "closed under the reply");
                src
            })
        });
        while step.load(Ordering::SeqCst) == 0 {
            std::thread::yield_now();
        }
        share.set(None);
        step.store(2, Ordering::SeqCst);
        let sent = reply.join().unwrap();
        assert_eq!((sent.fd, sent.generation), (42, 1));
        assert_eq!(share.current().fd, -1);
        share.set(Some(7));
        assert_eq!(
            share.current(),
            DoorbellSource {
                fd: 7,
                generation: 2
            }
        );
    }
}

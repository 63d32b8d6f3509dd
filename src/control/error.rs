//! The one error type control code returns: an errno and what went wrong,
//! in words for the log. The ethdev layer logs it once, with the port's
//! name, and hands DPDK `-errno` ([`Error::report`]).

#![forbid(unsafe_code)]

use crate::hw::verbs::VerbsError;
use std::ffi::c_int;
use std::fmt;

#[derive(Debug)]
pub struct Error {
    errno: c_int,
    what: String,
    /// A refusal the application is expected to retry (a recovery in
    /// progress) is a warning, not an error.
    retry: bool,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn new(errno: c_int, what: impl Into<String>) -> Error {
        Error {
            errno,
            what: what.into(),
            retry: false,
        }
    }

    pub fn invalid(what: impl Into<String>) -> Error {
        Error::new(libc::EINVAL, what)
    }

    /// `-EBUSY` for something to retry later, logged as a warning.
    pub fn retry_later(what: impl Into<String>) -> Error {
        Error {
            retry: true,
            ..Error::new(libc::EBUSY, what)
        }
    }

    /// The same error with `context: ` before what went wrong.
    pub fn context(self, context: impl fmt::Display) -> Error {
        Error {
            what: format!("{context}: {}", self.what),
            ..self
        }
    }

    #[cfg(test)]
    pub fn errno(&self) -> c_int {
        self.errno
    }

    /// Logs the error for port `name` and returns `-errno` for DPDK.
    pub fn report(&self, name: &str) -> c_int {
        if self.retry {
            ::log::warn!("{name}: {self}");
        } else {
            ::log::error!("{name}: {self}");
        }
        -self.errno
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.what)
    }
}

impl From<VerbsError> for Error {
    fn from(e: VerbsError) -> Error {
        Error::new(e.errno.max(1), e.to_string())
    }
}

/// `0` or `-errno`, the error logged for port `name`.
pub fn ret(name: &str, r: Result<()>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => e.report(name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_keep_their_errno_and_gain_context() {
        let e = Error::invalid("256 descriptors").context("rx queue 3");
        assert_eq!(
            (e.errno(), e.to_string().as_str()),
            (libc::EINVAL, "rx queue 3: 256 descriptors")
        );
        assert_eq!(e.report("p"), -libc::EINVAL);
        let v = VerbsError {
            call: "ibv_create_cq",
            errno: libc::ENOMEM,
        };
        let e = Error::from(v).context("tx queue 0 CQ");
        assert_eq!(e.errno(), libc::ENOMEM);
        assert!(
            e.to_string().starts_with("tx queue 0 CQ: ibv_create_cq"),
            "{e}"
        );
        assert_eq!(Error::retry_later("x").report("p"), -libc::EBUSY);
    }
}

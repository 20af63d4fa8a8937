//! The lab's error type: what went wrong, and whether it is the user's to fix.

use std::fmt;

#[derive(Debug)]
pub enum Error {
    /// Bad input from the user: the message says what to do; exit status 2.
    Usage(String),
    /// The run was interrupted by a signal (its number).
    Cancelled(i32),
    /// This experiment (or metric) cannot run here: no permission, a missing tool, too few CPUs.
    Skip(String),
    /// Something failed that should not have: the experiment is marked failed and the suite goes on.
    Fail(String),
}

pub type Result<T> = std::result::Result<T, Error>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Usage(m) | Error::Skip(m) | Error::Fail(m) => f.write_str(m),
            Error::Cancelled(sig) => write!(f, "interrupted by {}", signal_name(*sig)),
        }
    }
}

impl std::error::Error for Error {}

impl Error {
    /// A failure from a system call, with the OS error text.
    pub fn os(what: &str) -> Error {
        Error::Fail(format!("{what}: {}", std::io::Error::last_os_error()))
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error::Fail(e.to_string())
    }
}

pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}

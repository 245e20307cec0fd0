//! The crate's single error type.
//!
//! Every failure of a system call is reported as a [`SysError`] that names the
//! call, its argument and the object it was applied to (for example
//! `setsockopt(SO_RCVBUF=268435456) on fd 7`), followed by the operating
//! system's message. The underlying [`io::Error`] stays reachable through
//! [`SysError::io`] and [`SysError::kind`], so callers can branch on `EPERM`,
//! `ENOENT`, `ENOPROTOOPT` and friends without parsing text.

use std::io;

/// A failed system call, with the call and the object it was applied to.
///
/// `Display` prints `<call>: <os message>`. The OS error is part of the message
/// and is deliberately *not* also returned by [`std::error::Error::source`], so
/// that error-chain printers (such as `anyhow`'s `{:#}`) do not repeat it.
#[derive(Debug, thiserror::Error)]
#[error("{call}: {err}")]
pub struct SysError {
    call: String,
    err: io::Error,
}

/// `Result` with [`SysError`] as the error type.
pub type Result<T> = std::result::Result<T, SysError>;

impl SysError {
    /// Wraps `source`, describing the failed `call` (for example
    /// `"getsockopt(TCP_INFO) on fd 7"`).
    pub fn new(call: impl Into<String>, source: io::Error) -> Self {
        Self {
            call: call.into(),
            err: source,
        }
    }

    /// Builds the error from `errno` as left by the call that just failed.
    ///
    /// `errno` is read first and only then is `describe` called to build the
    /// description, so formatting (which may allocate) cannot clobber it. Call
    /// this immediately after the failing call.
    pub fn last_os_error<S: Into<String>>(describe: impl FnOnce() -> S) -> Self {
        let err = io::Error::last_os_error();
        Self::new(describe(), err)
    }

    /// The description of the failed call (without the OS message).
    pub fn call(&self) -> &str {
        &self.call
    }

    /// The underlying OS error.
    pub fn io(&self) -> &io::Error {
        &self.err
    }

    /// The kind of the underlying OS error.
    pub fn kind(&self) -> io::ErrorKind {
        self.err.kind()
    }

    /// The raw `errno` value, if the error came from the OS (for example
    /// `Some(libc::ENOPROTOOPT)`).
    pub fn raw_os_error(&self) -> Option<i32> {
        self.err.raw_os_error()
    }

    /// Consumes the error, returning the underlying OS error.
    pub fn into_io(self) -> io::Error {
        self.err
    }
}

impl From<SysError> for io::Error {
    /// Keeps the error kind and the full message (the raw `errno` is not kept).
    fn from(e: SysError) -> Self {
        io::Error::new(e.kind(), e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_names_call_and_os_error() {
        let e = SysError::new(
            "setsockopt(SO_RCVBUF=268435456) on fd 7",
            io::Error::from_raw_os_error(libc::EPERM),
        );
        let text = e.to_string();
        assert!(
            text.starts_with("setsockopt(SO_RCVBUF=268435456) on fd 7: "),
            "{text}"
        );
        assert!(text.ends_with("(os error 1)"), "{text}");
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
        assert_eq!(e.raw_os_error(), Some(libc::EPERM));
        assert_eq!(e.call(), "setsockopt(SO_RCVBUF=268435456) on fd 7");
        assert!(std::error::Error::source(&e).is_none());
    }

    #[test]
    fn converts_to_io_error_keeping_kind() {
        let e = SysError::new("open x", io::Error::from_raw_os_error(libc::ENOENT));
        let io: io::Error = e.into();
        assert_eq!(io.kind(), io::ErrorKind::NotFound);
        assert!(io.to_string().starts_with("open x: "));
    }
}

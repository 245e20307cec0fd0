//! The crate's error type.

use longhaul_link::ConfigError;
use longhaul_sys::SysError;

/// Why the testbed could not be brought up (or torn down).
#[derive(Debug, thiserror::Error)]
pub enum EmuError {
    /// The process lacks a capability; the message carries the fix.
    #[error(
        "longhaul emulate needs CAP_NET_ADMIN and CAP_SYS_ADMIN to create network namespaces and TUN \
devices; run it as root (e.g. `sudo longhaul emulate ...`)"
    )]
    NotPrivileged,
    /// A configuration value is refused.
    #[error("{0}")]
    Config(String),
    /// The link model refused a direction's configuration.
    #[error("{direction}: {source}")]
    Link {
        /// "a→b" or "b→a".
        direction: &'static str,
        /// What is wrong.
        source: ConfigError,
    },
    /// A system call or an `ip` command failed.
    #[error("{0}")]
    Sys(#[from] SysError),
    /// Something else during set-up (a thread could not be started).
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The cause.
        source: std::io::Error,
    },
}

//! Engine errors: each names what was being attempted and, where the fix is known, says it.

use std::io;

use longhaul_proto::ProtoError;
use longhaul_proto::conversation;
use longhaul_sys::SysError;

/// Why a test or a server operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// No address of the host could be reached.
    #[error("cannot connect to {target}: {source}{hint}")]
    Connect {
        /// Host and port tried.
        target: String,
        /// The last connect error.
        source: io::Error,
        /// A hint on what to check.
        hint: &'static str,
    },
    /// Name resolution failed or gave no usable address.
    #[error("cannot resolve {0}")]
    Resolve(String),
    /// A socket call failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being attempted.
        what: String,
        /// The OS error.
        source: io::Error,
    },
    /// A socket option or other system call failed.
    #[error(transparent)]
    Sys(#[from] SysError),
    /// The peer sent bytes that are not a valid longhaul message.
    #[error("protocol error: {0}")]
    Protocol(#[from] ProtoError),
    /// The peer reported an error and ended the test.
    #[error("peer refused: {0}")]
    Peer(String),
    /// The server is at its cap of concurrent tests.
    #[error("server busy, {running} tests running (cap {cap}); try again later")]
    Busy {
        /// Tests running.
        running: u32,
        /// The server's cap.
        cap: u32,
    },
    /// The peer speaks another protocol version.
    #[error(
        "protocol version mismatch: we speak {ours}, the peer speaks {theirs}; run the same longhaul version on both ends"
    )]
    Version {
        /// Our version.
        ours: u16,
        /// Theirs.
        theirs: u16,
    },
    /// The server answered as an iperf3 server does (the client tries again in iperf3's protocol).
    #[error("the server speaks iperf3's protocol")]
    SpeaksIperf3,
    /// The options asked for something this test cannot do (the text says what and why).
    #[error("{0}")]
    Unsupported(String),
    /// The peer went quiet.
    #[error("timed out waiting for {0}")]
    Timeout(String),
    /// The user interrupted (SIGINT, SIGTERM) before there was anything to report.
    #[error("interrupted {0}")]
    Interrupted(&'static str),
    /// The peer closed the control connection between messages.
    #[error("peer {0} closed the control connection (did it die?)")]
    Closed(String),
    /// The peer closed the control connection in the middle of a message.
    #[error("peer {0} closed the control connection in the middle of a message")]
    Truncated(String),
    /// The congestion control is not available on this kernel.
    #[error(
        "congestion control {name:?} is not available: this kernel offers {available} \
         (net.ipv4.tcp_available_congestion_control; a module is never loaded on request)"
    )]
    UnknownCongestion {
        /// Name asked for.
        name: String,
        /// What the kernel offers.
        available: String,
    },
    /// The server refused or ended a test at one of its own limits (the text names the limit and
    /// the flag that sets it).
    #[error("refused by the server's limits: {0}")]
    Limit(String),
    /// A file transfer failed (the message says why and, where known, what to do).
    #[error("{0}")]
    Transfer(String),
    /// The peer sent transfer bytes that break the protocol. Not a `source`: the message already
    /// includes it, and a chained report (`{:#}`) would print it twice.
    #[error("transfer protocol error: {0}")]
    Wire(longhaul_transfer::WireError),
    /// The peer sent job bytes that break the protocol (`longhaul-fleet`).
    #[error("job protocol error: {0}")]
    Job(longhaul_fleet::JobError),
    /// A file operation under a transfer's root failed.
    #[error(transparent)]
    Root(#[from] crate::transfer::root::RootError),
    /// The kernel gave no random bytes (getrandom(2) failed); nothing secret is made without them.
    #[error(
        "cannot draw random bytes from the kernel (getrandom: {0}); refusing to make {1} without them"
    )]
    Random(getrandom::Error, &'static str),
    /// `--encrypt`: a certificate or key file, or the TLS handshake with a peer, failed (the text
    /// names the file or the peer).
    #[error("TLS: {0}")]
    Tls(String),
    /// A data stream failed during the test.
    #[error("stream {stream}: {source}")]
    Stream {
        /// Stream index.
        stream: u32,
        /// What went wrong.
        source: io::Error,
    },
}

/// A conversation's error is the engine error of the same name, with the same text.
impl From<conversation::Error> for EngineError {
    fn from(e: conversation::Error) -> Self {
        match e {
            conversation::Error::Protocol(p) => EngineError::Protocol(p),
            conversation::Error::Timeout(what) => EngineError::Timeout(what),
            conversation::Error::Busy { running, cap } => EngineError::Busy { running, cap },
            conversation::Error::Limit(why) => EngineError::Limit(why),
            conversation::Error::Peer(message) => EngineError::Peer(message),
        }
    }
}

impl From<longhaul_fleet::JobError> for EngineError {
    fn from(e: longhaul_fleet::JobError) -> Self {
        EngineError::Job(e)
    }
}

impl From<longhaul_transfer::WireError> for EngineError {
    fn from(e: longhaul_transfer::WireError) -> Self {
        EngineError::Wire(e)
    }
}

impl EngineError {
    /// A refusal under the limits a server's `--controllers` file sets for `controller`.
    pub(crate) fn controller_limit(controller: &str, why: String) -> Self {
        EngineError::Limit(format!(
            "controller {controller}: {why} (its limits in this server's --controllers file)"
        ))
    }

    /// The error as a peer is told it: a file error under a transfer's root without the root's
    /// absolute path ([`crate::transfer::root::RootError::for_peer`]), anything else as it is.
    pub(crate) fn for_peer(&self) -> String {
        match self {
            EngineError::Root(r) => r.for_peer(),
            e => e.to_string(),
        }
    }

    pub(crate) fn io(what: impl Into<String>, source: io::Error) -> Self {
        EngineError::Io {
            what: what.into(),
            source,
        }
    }
}

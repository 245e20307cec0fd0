//! longhaul-proto: the pure, sans-IO heart of the memory-to-memory test: what client and server say
//! to each other and how a run is planned and accounted. Depends on `longhaul-units`, serde,
//! serde_json, thiserror and jiff (the report's dates); `longhaul-engine` drives it, and
//! `longhaul-transfer` and `longhaul-experiments` share its framing and limits. Start at [`msg`].
//!
//! Nothing here touches a socket, a thread or the clock; the engine crate drives these types over real
//! connections and passes time in. That keeps every rule testable and every parser fuzzable:
//!
//! - [`wire`]: the connection preamble (and the control frames' items, re-exported for the test);
//! - [`frame`]: the one frame codec of every control connection (length-prefixed JSON, optionally
//!   sealed), generic over the message type;
//! - [`msg`]: the control messages, the test parameters and their validation;
//! - [`window`]: socket-buffer sizing from RTT × rate, and the honest report of what the kernel granted;
//! - [`pacing`]: a total pacing rate split across streams;
//! - [`auto_pace`]: `--pace auto`: the bottleneck from packet trains, and the governor that holds
//!   the pacing rate under it;
//! - [`interval`]: per-interval and end-of-test accounting of TCP_INFO samples;
//! - [`report`]: the iperf3-compatible JSON report;
//! - [`probe`]: the probe stream of `longhaul monitor`'s latency tests (TWAMP's split: a TCP control
//!   connection, UDP probes reflected), its packets, the reflector's rules and the sender's figures;
//! - [`udp`]: UDP test datagrams (iperf3's header, 32- or 64-bit counters) and the receiver's
//!   account of a stream as iperf3 keeps it (lost, out of order, RFC 3550 jitter) plus duplicates;
//! - [`conversation`]: the test conversation of each side as a state machine (phases, deadlines, the
//!   end of the test, the drain, the pairing of intervals, the end report).
//!
//! Allowed dependencies: `longhaul-units`, serde, serde_json, thiserror, jiff (without its clock). No
//! tokio, libc, sockets or clock.

pub mod auto_pace;
pub mod conversation;
pub mod fast_start;
pub mod frame;
pub mod interval;
pub mod iperf3;
pub mod msg;
pub mod pacing;
pub mod probe;
pub mod rate_search;
pub mod report;
pub mod udp;
pub mod window;
pub mod wire;

pub use msg::{Direction, EndCondition, Message, TestParams, Transport, WindowRequest};

/// Everything that can be wrong with bytes or messages from a peer.
#[derive(Debug, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum ProtoError {
    /// The connection did not start with the longhaul magic: not a longhaul client.
    #[error("not a longhaul connection (bad magic bytes)")]
    BadMagic,
    /// Unknown connection kind in the preamble.
    #[error("unknown connection kind {0} in preamble")]
    BadKind(u8),
    /// Reserved flags were set.
    #[error("reserved preamble flags set ({0:#04x})")]
    BadFlags(u8),
    /// A frame announced more bytes than the receiver accepts at this point of the conversation.
    #[error("control frame of {len} bytes exceeds the {} KiB limit", limit / 1024)]
    FrameTooLarge {
        /// The length announced.
        len: usize,
        /// The receiver's limit.
        limit: usize,
    },
    /// A frame of length zero.
    #[error("empty control frame")]
    EmptyFrame,
    /// A sealed frame whose tag did not verify ([`frame::FrameOpen`]).
    #[error("control frame failed authentication: {0}")]
    FrameAuth(String),
    /// The frame was not a valid message.
    #[error("malformed control message: {0}")]
    BadMessage(String),
    /// A well-formed message with an out-of-range field.
    #[error("invalid control message: {0}")]
    Invalid(String),
    /// A message arrived in a phase where it makes no sense.
    #[error("unexpected {got} message while {phase}")]
    Unexpected {
        /// Kind of the message received.
        got: &'static str,
        /// What the receiver was waiting for.
        phase: &'static str,
    },
}

impl From<frame::FrameError> for ProtoError {
    fn from(e: frame::FrameError) -> Self {
        match e {
            frame::FrameError::TooLarge { len, limit } => ProtoError::FrameTooLarge { len, limit },
            frame::FrameError::Empty => ProtoError::EmptyFrame,
            frame::FrameError::Auth(why) => ProtoError::FrameAuth(why),
        }
    }
}

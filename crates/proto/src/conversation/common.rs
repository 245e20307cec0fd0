//! What both sides of the test conversation share: its errors, its notion of time, the drain deadline
//! and the cookie's text form.

use std::time::Duration;

use crate::wire::Cookie;
use crate::{ProtoError, TestParams};

/// A moment of the conversation: the time elapsed since an origin the driver picks once, on a
/// monotonic clock (`Instant::now() - origin`). Deadlines come back in the same terms.
pub type Time = Duration;

/// Why a conversation ended early. Each variant is the engine error of the same name, with the same
/// text; the driver maps them one to one (exhaustively: a new variant must be mapped, not guessed).
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum Error {
    /// The peer sent a message that makes no sense in this phase, or a bad value.
    #[error("protocol error: {0}")]
    Protocol(#[from] ProtoError),
    /// A deadline passed (the text names what was awaited and, for set-up steps, from whom).
    #[error("timed out waiting for {0}")]
    Timeout(String),
    /// The server is at its cap of concurrent tests.
    #[error("server busy, {running} tests running (cap {cap}); try again later")]
    Busy {
        /// Tests running.
        running: u32,
        /// The server's cap.
        cap: u32,
    },
    /// The server refused or ended the test at one of its own limits.
    #[error("refused by the server's limits: {0}")]
    Limit(String),
    /// The peer reported an error and ended the test.
    #[error("peer refused: {0}")]
    Peer(String),
}

/// The error for a message that makes no sense in the current phase. `phase` is what the receiver
/// was doing, as users and tests see it ("unexpected ping message while running").
pub(crate) fn unexpected(got: &crate::Message, phase: &'static str) -> Error {
    Error::Protocol(ProtoError::Unexpected {
        got: got.kind(),
        phase,
    })
}

/// How long each side lets queued data drain after the end, from the moment it stops its senders:
/// generous, since a long path with large buffers can hold seconds of data (15 s plus 20 RTT).
pub fn drain_timeout(params: &TestParams) -> Duration {
    Duration::from_secs(15) + Duration::from_nanos(params.rtt_ns.saturating_mul(20))
}

/// How long a TCP receiver waits after the stop for its sender's end of stream before it is cut and
/// keeps the count of what arrived (1 s plus 4 RTT). On a path that moves, the sender's queued bytes
/// and its FIN arrive within about an RTT; on one that crawls (Reno at 1 % loss moves about a
/// megabit a second at 120 ms) they would take minutes, and what is still queued at the sender is
/// not what the path carried in the test's time.
pub fn tail_grace(params: &TestParams) -> Duration {
    Duration::from_secs(1) + Duration::from_nanos(params.rtt_ns.saturating_mul(4))
}

/// Lower-case hex of a cookie, as it travels in JSON.
pub fn cookie_hex(cookie: &Cookie) -> String {
    cookie.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses a 32-digit hex cookie.
pub fn parse_cookie(s: &str) -> Option<Cookie> {
    if s.len() != 32 || !s.is_ascii() {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// A deadline `after` from `now`, saturating instead of overflowing (times from a fuzzer may be huge).
pub(crate) fn after(now: Time, after: Duration) -> Time {
    now.saturating_add(after)
}

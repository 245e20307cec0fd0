//! What every job module shares: the job connection's type and frame limit, the Unix clock, nonces,
//! and the errors of a message out of place.

use std::time::{SystemTime, UNIX_EPOCH};

use longhaul_fleet::JobMessage;
use longhaul_fleet::msg::TargetFamily;

use crate::address::Family;
use crate::control::Conn;
use crate::{EngineError, random};

/// A job's connection.
pub(crate) type JobConn = Conn<JobMessage>;

/// Largest frame on a job connection once both sides are authenticated: a report's start and end
/// list every stream (up to 1024 streams both ways, as a test's own control connection allows).
pub(crate) const AUTHENTICATED_FRAME_LIMIT: usize = 4 << 20;

/// The engine's address family for a request's.
pub(crate) fn family(f: TargetFamily) -> Family {
    match f {
        TargetFamily::Any => Family::Any,
        TargetFamily::V4 => Family::V4,
        TargetFamily::V6 => Family::V6,
    }
}

/// Nanoseconds since the Unix epoch (0 before it).
pub fn unix_ns(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// A fresh 32-byte nonce.
pub(crate) fn nonce() -> Result<[u8; 32], EngineError> {
    let mut n = [0u8; 32];
    random::fill(&mut n, "a handshake nonce")?;
    Ok(n)
}

/// A message that does not belong at this point of the conversation.
pub(crate) fn unexpected(m: &JobMessage, waiting_for: &str) -> EngineError {
    EngineError::Job(longhaul_fleet::JobError::Invalid(format!(
        "unexpected {} while waiting for {waiting_for}",
        m.kind()
    )))
}

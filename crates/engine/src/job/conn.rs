//! What every job module shares: the job connection's type and frame limit, the Unix clock, nonces,
//! and the errors of a message out of place.

use longhaul_fleet::JobMessage;
use longhaul_fleet::msg::TargetFamily;

use crate::address::Family;
pub use crate::clock::unix_ns;
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

/// The family a server uses to reach a job's target: the one the controller was asked for
/// (`-4`/`-6`).
pub fn target_family(f: Family) -> TargetFamily {
    match f {
        Family::Any => TargetFamily::Any,
        Family::V4 => TargetFamily::V4,
        Family::V6 => TargetFamily::V6,
    }
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

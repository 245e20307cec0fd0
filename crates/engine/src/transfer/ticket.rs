//! The copy tickets a server issued (`crate::job`'s copy job, `longhaul copy A:PATH B:DEST`): each
//! admits one transfer whose client proves the ticket's key instead of the server's own, a send
//! into the ticket's destination within its controller's limits, and tells the job that issued it
//! how that transfer ended.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Mutex, mpsc};
use std::time::{Duration, Instant};

use longhaul_fleet::Limits;
use longhaul_transfer::RelPath;
use longhaul_transfer::auth::{Key, TicketId};
use longhaul_transfer::report::Summary;

use crate::EngineError;

/// How long a ticket waits for the transfer that presents it.
pub(crate) const TICKET_WAIT: Duration = Duration::from_secs(60);

/// The tickets a server issued and no transfer has presented yet.
#[derive(Default)]
pub(crate) struct Tickets(Mutex<HashMap<TicketId, Issued>>);

impl fmt::Debug for Tickets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tickets({} waiting)", self.lock().len())
    }
}

/// A ticket waiting for its transfer.
struct Issued {
    key: Key,
    grant: Grant,
    expires: Instant,
}

/// What a ticket admits, and where the transfer it admitted reports its end.
pub(crate) struct Grant {
    /// The controller it was issued to (for refusals).
    pub(crate) controller: String,
    /// That controller's limits on this server.
    pub(crate) limits: Limits,
    /// The only destination admitted.
    pub(crate) dest: Option<RelPath>,
    /// Whether existing files that differ may be replaced.
    pub(crate) overwrite: bool,
    /// Whether files must be made durable before they are renamed into place.
    pub(crate) fsync: bool,
    /// Whether only a transfer in TLS is admitted.
    pub(crate) encrypted: bool,
    /// A striped copy: the only stripe admitted (`None`: an unstriped one).
    pub(crate) stripe: Option<longhaul_transfer::stripe::Stripe>,
    pub(crate) report: mpsc::Sender<Result<Summary, String>>,
}

impl Grant {
    /// Tells the job that issued the ticket how its transfer ended.
    pub(crate) fn report(&self, result: Result<Summary, String>) {
        let _ = self.report.send(result);
    }

    /// A refusal under the controller's limits.
    pub(crate) fn refuse(&self, why: String) -> EngineError {
        EngineError::controller_limit(&self.controller, why)
    }
}

impl Tickets {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<TicketId, Issued>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Issues ticket `id` with its key and grant, valid for [`TICKET_WAIT`]; returns when it expires.
    pub(crate) fn issue(&self, id: TicketId, key: Key, grant: Grant) -> Instant {
        let expires = Instant::now() + TICKET_WAIT;
        self.lock().insert(
            id,
            Issued {
                key,
                grant,
                expires,
            },
        );
        expires
    }

    /// Whether ticket `id` still waits for its transfer (none has taken it, and it was not revoked).
    pub(crate) fn is_waiting(&self, id: &TicketId) -> bool {
        self.lock().contains_key(id)
    }

    /// The key of ticket `id`, for the handshake of the transfer that presents it.
    pub(crate) fn key_of(&self, id: &TicketId) -> Result<Key, EngineError> {
        match self.lock().get(id) {
            Some(t) if Instant::now() < t.expires => Ok(t.key.clone()),
            _ => Err(not_valid()),
        }
    }

    /// The grant of ticket `id`, taken once the transfer that presents it proved the ticket's key:
    /// a ticket admits one transfer (a stranger who saw the id on the wire cannot use it up).
    pub(crate) fn take(&self, id: &TicketId) -> Result<Grant, EngineError> {
        match self.lock().remove(id) {
            Some(t) if Instant::now() < t.expires => Ok(t.grant),
            _ => Err(not_valid()),
        }
    }

    /// Removes ticket `id` if no transfer took it; whether it was still waiting.
    pub(crate) fn revoke(&self, id: &TicketId) -> bool {
        self.lock().remove(id).is_some()
    }
}

fn not_valid() -> EngineError {
    EngineError::Transfer(
        "unknown, used or expired copy ticket: ask the controller to run the copy again".into(),
    )
}

//! What the store is asked and what it answers: a request to book with everything its transaction
//! needs, the caller's account, the reply (an HTTP status and a booking or an error body, stored as
//! is for idempotent replay) and the database failures that are not replies.

use jiff::{SignedDuration, Timestamp};
use longhaul_testbed::api::{BookingView, CreateBooking, ErrorBody};
use longhaul_testbed::booking::Actor;
use longhaul_testbed::idempotency::{Fingerprint, IdempotencyKey};
use longhaul_testbed::policy::Policy;
use longhaul_testbed::resource::Inventory;
use serde::{Deserialize, Serialize};

/// A database failure (HTTP 500); refusals are [`Reply`]s, not errors.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// From the driver.
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
    /// Migrations failed.
    #[error("database migration: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A stored row that does not make sense.
    #[error("corrupt row: {0}")]
    Corrupt(String),
}

/// The answer to a write: the HTTP status and the body, as stored for
/// idempotent replay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// The booking, or the error.
    pub body: Result<BookingView, ErrorBody>,
}

impl Reply {
    /// A refusal with the status its code implies.
    pub fn error(e: ErrorBody) -> Self {
        Self {
            status: e.status(),
            body: Err(e),
        }
    }

    /// A booking with `status`.
    pub fn ok(status: u16, view: BookingView) -> Self {
        Self {
            status,
            body: Ok(view),
        }
    }

    pub(crate) fn to_stored(&self) -> String {
        serde_json::to_string(&self.body).unwrap_or_default()
    }

    pub(crate) fn from_stored(status: u16, text: &str) -> Result<Self, StoreError> {
        let body = serde_json::from_str(text).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        Ok(Self { status, body })
    }
}

/// A request to book, with everything the transaction needs.
#[derive(Debug, Clone)]
pub struct BookRequest<'a> {
    /// Who asks (the owner).
    pub actor: &'a Actor,
    /// The body.
    pub create: &'a CreateBooking,
    /// The resources (for existence, state and policy).
    pub inventory: &'a Inventory,
    /// The rules.
    pub policy: &'a Policy,
    /// Now.
    pub now: Timestamp,
    /// How long a hold lasts.
    pub hold_ttl: SignedDuration,
    /// The `Idempotency-Key`, when sent, with the request's fingerprint.
    pub idempotency: Option<(IdempotencyKey, Fingerprint)>,
    /// The user's display zone (DST warnings for it).
    pub zone: Option<String>,
}

/// An account: who a token belongs to, and their display zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// User and role.
    pub actor: Actor,
    /// IANA zone for display, when set.
    pub zone: Option<String>,
}

//! Idempotency keys (DataTAG lesson L2, "duplication mechanisms"): a script
//! that retries `POST /bookings` after a timeout must not book twice. The
//! client sends an `Idempotency-Key` header; the service stores, per user and
//! key, the request's [`Fingerprint`] (method, path, BLAKE3 of the body) and,
//! once done, the response. A retry with the same key and fingerprint gets
//! the stored response again; the same key with a different request is
//! refused (HTTP 409/422 style); a retry while the first is still running is
//! refused too (409, "try again"). Keys are scoped by user, so one user's key
//! can never replay another's response. The logic is pure, over the
//! [`IdempotencyStore`] trait; [`MemoryStore`] is for tests, the service
//! implements it on the same database transaction as the booking.

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

/// What identifies a request: method, path and a hash of the body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fingerprint {
    /// HTTP method, upper case.
    pub method: String,
    /// Path with query string.
    pub path: String,
    /// BLAKE3 of the body bytes, hex.
    pub body_hash: String,
}

impl Fingerprint {
    /// The fingerprint of a request.
    pub fn new(method: &str, path: &str, body: &[u8]) -> Self {
        Self {
            method: method.to_ascii_uppercase(),
            path: path.to_owned(),
            body_hash: blake3::hash(body).to_hex().to_string(),
        }
    }
}

/// An idempotency key, scoped to the user who sent it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct IdempotencyKey {
    /// The account.
    pub user: String,
    /// The client's key: 1 to 255 visible ASCII characters.
    pub key: String,
}

impl IdempotencyKey {
    /// Checks the header value.
    pub fn new(user: &str, key: &str) -> Result<Self, IdempotencyError> {
        if key.is_empty() || key.len() > 255 || !key.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(IdempotencyError::BadKey);
        }
        Ok(Self {
            user: user.to_owned(),
            key: key.to_owned(),
        })
    }
}

/// A response kept for replay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredResponse {
    /// HTTP status.
    pub status: u16,
    /// Content type of the body.
    pub content_type: String,
    /// Body.
    pub body: Vec<u8>,
}

/// What the store keeps per key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The first request's fingerprint.
    pub fingerprint: Fingerprint,
    /// When it arrived (for expiry).
    pub created_at: Timestamp,
    /// `None` while the first request is being processed.
    pub response: Option<StoredResponse>,
}

/// Storage of records: one row per key. `insert_if_absent` must be atomic
/// (SQL: `INSERT … ON CONFLICT DO NOTHING` and check the row count).
pub trait IdempotencyStore {
    /// The record of `key`.
    fn get(&self, key: &IdempotencyKey) -> Option<Record>;
    /// Inserts `record` unless `key` is present; true when inserted.
    fn insert_if_absent(&mut self, key: &IdempotencyKey, record: Record) -> bool;
    /// Replaces the record of `key`.
    fn put(&mut self, key: &IdempotencyKey, record: Record);
    /// Removes `key`.
    fn remove(&mut self, key: &IdempotencyKey);
    /// Removes every record created before `before`.
    fn purge_before(&mut self, before: Timestamp);
}

/// A key the service refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdempotencyError {
    /// Not a usable key.
    #[error("Idempotency-Key must be 1 to 255 visible ASCII characters")]
    BadKey,
    /// The key was used for a different request (HTTP 422).
    #[error(
        "this Idempotency-Key was used for a different request ({method} {path}); use a new key for a new request"
    )]
    Mismatch {
        /// The first request's method.
        method: String,
        /// The first request's path.
        path: String,
    },
    /// The first request with this key is still running (HTTP 409).
    #[error("a request with this Idempotency-Key is still being processed; retry shortly")]
    InFlight,
    /// `complete` or `abandon` without a matching `begin`.
    #[error("no request in flight for this Idempotency-Key")]
    NotStarted,
}

/// What the service should do with an incoming request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Begin {
    /// New: process it, then call [`complete`] (or [`abandon`] on failure).
    Process,
    /// A retry: send this response again without processing.
    Replay(StoredResponse),
}

/// How long records are kept ([`purge`]).
pub const RETENTION: SignedDuration = SignedDuration::from_hours(24);

/// Starts a request with `key`.
pub fn begin(
    store: &mut impl IdempotencyStore,
    key: &IdempotencyKey,
    fingerprint: &Fingerprint,
    now: Timestamp,
) -> Result<Begin, IdempotencyError> {
    let fresh = Record {
        fingerprint: fingerprint.clone(),
        created_at: now,
        response: None,
    };
    if store.insert_if_absent(key, fresh) {
        return Ok(Begin::Process);
    }
    let Some(rec) = store.get(key) else {
        // Removed between the two calls (abandoned): the caller may retry.
        return Err(IdempotencyError::InFlight);
    };
    if rec.fingerprint != *fingerprint {
        return Err(IdempotencyError::Mismatch {
            method: rec.fingerprint.method,
            path: rec.fingerprint.path,
        });
    }
    match rec.response {
        Some(r) => Ok(Begin::Replay(r)),
        None => Err(IdempotencyError::InFlight),
    }
}

/// Stores the response of a processed request for replay.
pub fn complete(
    store: &mut impl IdempotencyStore,
    key: &IdempotencyKey,
    fingerprint: &Fingerprint,
    response: StoredResponse,
) -> Result<(), IdempotencyError> {
    match store.get(key) {
        Some(mut rec) if rec.fingerprint == *fingerprint && rec.response.is_none() => {
            rec.response = Some(response);
            store.put(key, rec);
            Ok(())
        }
        _ => Err(IdempotencyError::NotStarted),
    }
}

/// Forgets a request that failed before doing anything (a 5xx), so a retry
/// is processed afresh. Refusals (4xx) are completed, not abandoned: the
/// retry gets the same refusal.
pub fn abandon(
    store: &mut impl IdempotencyStore,
    key: &IdempotencyKey,
    fingerprint: &Fingerprint,
) -> Result<(), IdempotencyError> {
    match store.get(key) {
        Some(rec) if rec.fingerprint == *fingerprint && rec.response.is_none() => {
            store.remove(key);
            Ok(())
        }
        _ => Err(IdempotencyError::NotStarted),
    }
}

/// Drops records older than [`RETENTION`].
pub fn purge(store: &mut impl IdempotencyStore, now: Timestamp) {
    store.purge_before(now - RETENTION);
}

/// An in-memory store for tests and as the reference for the SQL ones.
#[derive(Debug, Clone, Default)]
pub struct MemoryStore {
    records: BTreeMap<IdempotencyKey, Record>,
}

impl MemoryStore {
    /// Number of records.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
}

impl IdempotencyStore for MemoryStore {
    fn get(&self, key: &IdempotencyKey) -> Option<Record> {
        self.records.get(key).cloned()
    }
    fn insert_if_absent(&mut self, key: &IdempotencyKey, record: Record) -> bool {
        if self.records.contains_key(key) {
            return false;
        }
        self.records.insert(key.clone(), record);
        true
    }
    fn put(&mut self, key: &IdempotencyKey, record: Record) {
        self.records.insert(key.clone(), record);
    }
    fn remove(&mut self, key: &IdempotencyKey) {
        self.records.remove(key);
    }
    fn purge_before(&mut self, before: Timestamp) {
        self.records.retain(|_, r| r.created_at >= before);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::booking::{Actor, Ledger, NewBooking};
    use crate::resource::{ResourceId, tests::datatag};
    use crate::time::Slot;

    fn now() -> Timestamp {
        "2026-05-04T08:00:00Z".parse().unwrap()
    }

    fn created(body: &str) -> StoredResponse {
        StoredResponse {
            status: 201,
            content_type: "application/json".into(),
            body: body.as_bytes().to_vec(),
        }
    }

    /// The service's handler in miniature: book once per key.
    fn post(
        store: &mut MemoryStore,
        ledger: &mut Ledger,
        key: &str,
        body: &str,
    ) -> Result<StoredResponse, IdempotencyError> {
        let key = IdempotencyKey::new("alice", key)?;
        let fp = Fingerprint::new("post", "/bookings", body.as_bytes());
        match begin(store, &key, &fp, now())? {
            Begin::Replay(r) => Ok(r),
            Begin::Process => {
                let slot: Slot = serde_json::from_str(body).unwrap();
                let req = NewBooking {
                    resource: ResourceId::parse("cern/starlight-lambda").unwrap(),
                    owner: "alice".into(),
                    slot,
                    hold_until: None,
                    note: String::new(),
                };
                let resp = match ledger.try_book(req, &Actor::user("alice"), now()) {
                    Ok(id) => created(&format!("{{\"id\":{id}}}")),
                    Err(e) => StoredResponse {
                        status: 409,
                        content_type: "application/json".into(),
                        body: e.to_string().into_bytes(),
                    },
                };
                complete(store, &key, &fp, resp.clone())?;
                Ok(resp)
            }
        }
    }

    const BODY: &str = r#"{"start":"2026-05-05T08:00:00Z","end":"2026-05-05T10:00:00Z"}"#;

    #[test]
    fn a_retried_request_books_once_and_gets_the_same_answer() {
        let mut store = MemoryStore::default();
        let mut ledger = Ledger::new(datatag());
        let first = post(&mut store, &mut ledger, "k1", BODY).unwrap();
        let again = post(&mut store, &mut ledger, "k1", BODY).unwrap();
        assert_eq!(first, again);
        assert_eq!(first.status, 201);
        assert_eq!(ledger.bookings().count(), 1);
        // A new key for the same body is a new request: it conflicts.
        assert_eq!(
            post(&mut store, &mut ledger, "k2", BODY).unwrap().status,
            409
        );
        assert_eq!(ledger.bookings().count(), 1);
    }

    #[test]
    fn same_key_different_body_is_refused() {
        let mut store = MemoryStore::default();
        let mut ledger = Ledger::new(datatag());
        post(&mut store, &mut ledger, "k1", BODY).unwrap();
        let other = BODY.replace("10:00", "11:00");
        let e = post(&mut store, &mut ledger, "k1", &other).unwrap_err();
        assert!(
            matches!(&e, IdempotencyError::Mismatch { method, path } if method == "POST" && path == "/bookings")
        );
        assert!(e.to_string().contains("use a new key"));
        // Same body, different path or method: also different.
        let key = IdempotencyKey::new("alice", "k1").unwrap();
        let fp = Fingerprint::new("PUT", "/bookings", BODY.as_bytes());
        assert!(matches!(
            begin(&mut store, &key, &fp, now()),
            Err(IdempotencyError::Mismatch { .. })
        ));
    }

    #[test]
    fn in_flight_abandon_and_scoping() {
        let mut store = MemoryStore::default();
        let key = IdempotencyKey::new("alice", "k").unwrap();
        let fp = Fingerprint::new("POST", "/bookings", b"x");
        assert_eq!(begin(&mut store, &key, &fp, now()), Ok(Begin::Process));
        assert_eq!(
            begin(&mut store, &key, &fp, now()),
            Err(IdempotencyError::InFlight)
        );
        // Bob's "k" is another key.
        let bob = IdempotencyKey::new("bob", "k").unwrap();
        assert_eq!(begin(&mut store, &bob, &fp, now()), Ok(Begin::Process));
        abandon(&mut store, &key, &fp).unwrap();
        assert_eq!(
            abandon(&mut store, &key, &fp),
            Err(IdempotencyError::NotStarted)
        );
        assert_eq!(begin(&mut store, &key, &fp, now()), Ok(Begin::Process));
        complete(&mut store, &key, &fp, created("{}")).unwrap();
        assert_eq!(
            complete(&mut store, &key, &fp, created("{}")),
            Err(IdempotencyError::NotStarted)
        );
        assert_eq!(
            abandon(&mut store, &key, &fp),
            Err(IdempotencyError::NotStarted)
        );
    }

    #[test]
    fn keys_are_checked_and_records_expire() {
        assert_eq!(IdempotencyKey::new("a", ""), Err(IdempotencyError::BadKey));
        assert_eq!(
            IdempotencyKey::new("a", "has space"),
            Err(IdempotencyError::BadKey)
        );
        assert_eq!(
            IdempotencyKey::new("a", &"x".repeat(256)),
            Err(IdempotencyError::BadKey)
        );
        assert!(IdempotencyKey::new("a", "550e8400-e29b-41d4-a716-446655440000").is_ok());
        let mut store = MemoryStore::default();
        let key = IdempotencyKey::new("a", "k").unwrap();
        let fp = Fingerprint::new("POST", "/b", b"");
        begin(&mut store, &key, &fp, now()).unwrap();
        purge(&mut store, now() + RETENTION);
        assert_eq!(store.len(), 1);
        purge(&mut store, now() + RETENTION + SignedDuration::from_secs(1));
        assert!(store.is_empty());
    }

    #[test]
    fn fingerprint_hashes_the_body() {
        let a = Fingerprint::new("post", "/b", b"abc");
        assert_eq!(a.method, "POST");
        // BLAKE3("abc"), from the reference implementation's test vectors.
        assert_eq!(
            a.body_hash,
            "6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85"
        );
        assert_ne!(a, Fingerprint::new("POST", "/b", b"abd"));
    }
}

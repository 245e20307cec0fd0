//! The booking store: one interface, two databases (docs/testbed.md §5). PostgreSQL enforces "no
//! double booking" with claim rows under two exclusion constraints; SQLite with `BEGIN IMMEDIATE`, a
//! conflict query and a trigger backstop. The rules that do not need the database (ownership, the
//! lifecycle, policy, the API views) come from the pure `longhaul-testbed` crate and are applied here,
//! inside each store's writing transaction.

use jiff::{SignedDuration, Timestamp};
use longhaul_testbed::api::{BookingView, CreateBooking, ErrorBody, Note};
use longhaul_testbed::booking::{Actor, Booking, BookingId, LedgerError, Phase, Role, Status};
use longhaul_testbed::idempotency::{Fingerprint, IdempotencyError, IdempotencyKey};
use longhaul_testbed::policy::{Decision, Policy, Request, UserContext};
use longhaul_testbed::resource::{Inventory, ResourceId};
use longhaul_testbed::time::Slot;
use serde::{Deserialize, Serialize};

use crate::{postgres::PgStore, sqlite::SqliteStore};

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
}

/// A change of an existing booking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Confirm a hold.
    Confirm,
    /// Give back the rest of an active booking.
    Release,
    /// Cancel a hold or a booking that has not started.
    Cancel,
}

impl Op {
    /// The path segment and audit action.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Confirm => "confirm",
            Self::Release => "release",
            Self::Cancel => "cancel",
        }
    }
}

/// A booking row in the column names both stores select (`id`, `resource`,
/// `owner`, `start_us`, `end_us`, `status`, `hold_until_us`,
/// `status_at_us`, `preempted_by`, `notice`, `note`, `created_at_us`,
/// `version`).
#[derive(Debug, Clone)]
pub(crate) struct BookingRow {
    pub(crate) id: i64,
    pub(crate) resource: String,
    pub(crate) owner: String,
    pub(crate) start_us: i64,
    pub(crate) end_us: i64,
    pub(crate) status: String,
    pub(crate) hold_until_us: Option<i64>,
    pub(crate) status_at_us: Option<i64>,
    pub(crate) preempted_by: Option<String>,
    pub(crate) notice: Option<String>,
    pub(crate) note: String,
    pub(crate) created_at_us: i64,
    pub(crate) version: i32,
}

fn ts(us: i64) -> Result<Timestamp, StoreError> {
    Timestamp::from_microsecond(us).map_err(|e| StoreError::Corrupt(e.to_string()))
}

impl BookingRow {
    pub(crate) fn into_booking(self) -> Result<Booking, StoreError> {
        let corrupt = |what: &str| StoreError::Corrupt(format!("booking {}: {what}", self.id));
        let at = || -> Result<Timestamp, StoreError> {
            ts(self.status_at_us.ok_or_else(|| corrupt("no status time"))?)
        };
        let status = match self.status.as_str() {
            "held" => Status::Held {
                until: ts(self
                    .hold_until_us
                    .ok_or_else(|| corrupt("held with no hold_until"))?)?,
            },
            "confirmed" => Status::Confirmed,
            "released" => Status::Released { at: at()? },
            "cancelled" => Status::Cancelled { at: at()? },
            "expired" => Status::Expired { at: at()? },
            "preempted" => Status::Preempted {
                at: at()?,
                by: self.preempted_by.clone().unwrap_or_default(),
                notice: self.notice.clone().unwrap_or_default(),
            },
            other => return Err(corrupt(&format!("status {other:?}"))),
        };
        Ok(Booking {
            id: BookingId(u64::try_from(self.id).map_err(|_| corrupt("negative id"))?),
            resource: ResourceId::parse(&self.resource).map_err(|e| corrupt(&e.to_string()))?,
            owner: self.owner,
            slot: Slot::new(ts(self.start_us)?, ts(self.end_us)?)
                .map_err(|e| corrupt(&e.to_string()))?,
            status,
            note: self.note,
            created_at: ts(self.created_at_us)?,
            version: u32::try_from(self.version).unwrap_or(0),
        })
    }
}

/// The columns of a status, for an UPDATE: (status, hold_until_us,
/// status_at_us).
pub(crate) fn status_columns(s: &Status) -> (&'static str, Option<i64>, Option<i64>) {
    match s {
        Status::Held { until } => ("held", Some(until.as_microsecond()), None),
        Status::Confirmed => ("confirmed", None, None),
        Status::Released { at } => ("released", None, Some(at.as_microsecond())),
        Status::Cancelled { at } => ("cancelled", None, Some(at.as_microsecond())),
        Status::Expired { at } => ("expired", None, Some(at.as_microsecond())),
        Status::Preempted { at, .. } => ("preempted", None, Some(at.as_microsecond())),
    }
}

/// Ownership and lifecycle of `op` on `b` by `actor` at `now`, as
/// [`longhaul_testbed::booking::Ledger`] decides them: the new status, or
/// the refusal.
pub(crate) fn transition(
    op: Op,
    b: &Booking,
    actor: &Actor,
    now: Timestamp,
) -> Result<Status, ErrorBody> {
    let refuse = |e: LedgerError| Err(ErrorBody::from(&e));
    if b.owner != actor.user && actor.role != Role::Admin {
        return refuse(LedgerError::NotOwner {
            booking: b.id,
            owner: b.owner.clone(),
        });
    }
    let phase = b.phase(now);
    match op {
        Op::Confirm => match b.status {
            Status::Held { until } if now < until => Ok(Status::Confirmed),
            Status::Held { until } | Status::Expired { at: until } => {
                refuse(LedgerError::HoldExpired(until))
            }
            _ => refuse(LedgerError::InvalidTransition {
                op: "confirm",
                phase,
                hint: "",
            }),
        },
        Op::Release if phase == Phase::Active => Ok(Status::Released { at: now }),
        Op::Release => refuse(LedgerError::InvalidTransition {
            op: "release",
            phase,
            hint: match phase {
                Phase::Upcoming | Phase::Held => "; it has not started: cancel it",
                _ => "",
            },
        }),
        Op::Cancel if matches!(phase, Phase::Held | Phase::Upcoming) => {
            Ok(Status::Cancelled { at: now })
        }
        Op::Cancel => refuse(LedgerError::InvalidTransition {
            op: "cancel",
            phase,
            hint: if phase == Phase::Active {
                "; it has started: release it"
            } else {
                ""
            },
        }),
    }
}

/// The 409 body naming the booking in the way.
pub(crate) fn conflict_reply(resource: &ResourceId, with: &Booking) -> Reply {
    Reply::error(ErrorBody::from(&LedgerError::Conflict {
        with: with.id,
        resource: resource.clone(),
        on: with.resource.clone(),
        slot: with.slot,
    }))
}

/// A 409 when the booking in the way could not be named (it went away
/// between the constraint violation and the look-up).
pub(crate) fn anonymous_conflict(resource: &ResourceId, slot: &Slot) -> Reply {
    Reply::error(ErrorBody {
        code: "conflict".into(),
        message: format!("{resource} is booked during {slot} by another booking"),
        reasons: Vec::new(),
    })
}

/// The checks before any database work: a valid body and a known
/// resource.
pub(crate) fn validate(req: &BookRequest<'_>) -> Result<(ResourceId, Slot), ErrorBody> {
    let (resource, slot) = req.create.validate()?;
    if req.inventory.get(&resource).is_none() {
        return Err(ErrorBody::from(&LedgerError::UnknownResource(resource)));
    }
    Ok((resource, slot))
}

/// The window of a user's bookings that policy looks at around `slot`
/// (the quota week and the stacking gap fit in 8 days either side).
pub(crate) fn policy_window(slot: &Slot) -> (i64, i64) {
    let margin = 8 * 86_400 * 1_000_000;
    (
        slot.start().as_microsecond().saturating_sub(margin),
        slot.end().as_microsecond().saturating_add(margin),
    )
}

/// Policy at booking time: `Ok(warnings)` or the refusal.
pub(crate) fn check_policy(
    req: &BookRequest<'_>,
    resource: &ResourceId,
    slot: &Slot,
    existing: &[Booking],
) -> Result<Vec<Note>, ErrorBody> {
    let request = Request {
        resource: resource.clone(),
        slot: *slot,
        event: req.create.event,
    };
    let user = UserContext {
        user: req.actor.user.clone(),
        role: req.actor.role,
        zone: None,
        override_policy: false,
    };
    let decision = req
        .policy
        .check(&request, &user, req.inventory, existing, req.now);
    match &decision {
        Decision::Allow { warnings } => Ok(warnings.iter().map(Note::from).collect()),
        _ => Err(
            ErrorBody::from_decision(&decision).unwrap_or_else(|| ErrorBody {
                code: "policy".into(),
                message: "refused by policy".into(),
                reasons: Vec::new(),
            }),
        ),
    }
}

/// The new booking's status: held until now + ttl, or confirmed.
pub(crate) fn new_status(req: &BookRequest<'_>) -> Status {
    if req.create.hold {
        Status::Held {
            until: longhaul_testbed::api::hold_until(req.now, req.hold_ttl),
        }
    } else {
        Status::Confirmed
    }
}

/// The refusal for a key used with another request.
pub(crate) fn mismatch(method: String, path: String) -> Reply {
    Reply::error(ErrorBody::from(&IdempotencyError::Mismatch {
        method,
        path,
    }))
}

/// The view of a booking written now, with the policy's warnings.
pub(crate) fn view(b: &Booking, now: Timestamp, warnings: Vec<Note>) -> BookingView {
    let mut v = BookingView::new(b, now, None, &[]);
    v.warnings = warnings;
    v
}

/// A token's role as stored.
pub fn role_name(role: Role) -> &'static str {
    match role {
        Role::User => "user",
        Role::Approver => "approver",
        Role::Admin => "admin",
    }
}

pub(crate) fn parse_role(s: &str) -> Result<Role, StoreError> {
    match s {
        "user" => Ok(Role::User),
        "approver" => Ok(Role::Approver),
        "admin" => Ok(Role::Admin),
        other => Err(StoreError::Corrupt(format!("role {other:?}"))),
    }
}

/// A new random API token (`lh_` + 32 hex digits from the OS).
pub(crate) fn new_token() -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("lh_{hex}"))
}

/// The stored form of a token: its BLAKE3 hash.
pub(crate) fn token_hash(token: &str) -> String {
    blake3::hash(token.as_bytes()).to_hex().to_string()
}

/// Which database, and its pool.
#[derive(Debug, Clone)]
pub enum Store {
    /// SQLite file (the embedded default).
    Sqlite(SqliteStore),
    /// PostgreSQL.
    Postgres(PgStore),
}

/// Whether `url` names PostgreSQL (`postgres://` or `postgresql://`).
pub fn is_postgres(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

impl Store {
    /// Opens `url` (`postgres://…`, `sqlite://PATH` or a plain path; a
    /// SQLite file is created) and runs the embedded migrations.
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        if is_postgres(url) {
            Ok(Self::Postgres(PgStore::open(url).await?))
        } else {
            let path = url.strip_prefix("sqlite://").unwrap_or(url);
            Ok(Self::Sqlite(SqliteStore::open(path).await?))
        }
    }

    /// "sqlite" or "postgres".
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Sqlite(_) => "sqlite",
            Self::Postgres(_) => "postgres",
        }
    }

    /// Writes the inventory's resources (insert or update; removed
    /// resources stay, for history).
    pub async fn sync_inventory(&self, inv: &Inventory) -> Result<(), StoreError> {
        match self {
            Self::Sqlite(s) => s.sync_inventory(inv).await,
            Self::Postgres(s) => s.sync_inventory(inv).await,
        }
    }

    /// Creates a token for `user` with `role`; returns it (shown once).
    pub async fn add_token(
        &self,
        user: &str,
        role: Role,
        now: Timestamp,
    ) -> anyhow::Result<String> {
        let token = new_token()?;
        let hash = token_hash(&token);
        match self {
            Self::Sqlite(s) => s.add_token(&hash, user, role, now).await?,
            Self::Postgres(s) => s.add_token(&hash, user, role, now).await?,
        }
        Ok(token)
    }

    /// The account of a bearer token.
    pub async fn authenticate(&self, token: &str) -> Result<Option<Actor>, StoreError> {
        let hash = token_hash(token);
        match self {
            Self::Sqlite(s) => s.authenticate(&hash).await,
            Self::Postgres(s) => s.authenticate(&hash).await,
        }
    }

    /// Books or holds, exactly once per idempotency key.
    pub async fn book(&self, req: &BookRequest<'_>) -> Result<Reply, StoreError> {
        let (resource, slot) = match validate(req) {
            Ok(v) => v,
            Err(e) => return Ok(Reply::error(e)),
        };
        match self {
            Self::Sqlite(s) => s.book(req, &resource, &slot).await,
            Self::Postgres(s) => s.book(req, &resource, &slot).await,
        }
    }

    /// Confirms, releases or cancels booking `id`.
    pub async fn change(
        &self,
        id: i64,
        op: Op,
        actor: &Actor,
        now: Timestamp,
    ) -> Result<Reply, StoreError> {
        match self {
            Self::Sqlite(s) => s.change(id, op, actor, now).await,
            Self::Postgres(s) => s.change(id, op, actor, now).await,
        }
    }

    /// Bookings (any status) on resources conflicting with `resource` (all
    /// when `None`) overlapping `[from, to)`, by start.
    pub async fn list(
        &self,
        resource: Option<&ResourceId>,
        from: Option<Timestamp>,
        to: Option<Timestamp>,
    ) -> Result<Vec<Booking>, StoreError> {
        let from = from.map_or(i64::MIN, |t| t.as_microsecond());
        let to = to.map_or(i64::MAX, |t| t.as_microsecond());
        let rows = match self {
            Self::Sqlite(s) => s.list(resource, from, to).await?,
            Self::Postgres(s) => s.list(resource, from, to).await?,
        };
        rows.into_iter().map(BookingRow::into_booking).collect()
    }
}

/// Merges busy intervals and returns the gaps of `window` (from `now` on)
/// at least `min` long.
pub fn free_slots(busy: &[Slot], window: &Slot, min: SignedDuration, now: Timestamp) -> Vec<Slot> {
    let mut spans: Vec<(Timestamp, Timestamp)> =
        busy.iter().map(|s| (s.start(), s.end())).collect();
    spans.sort();
    let mut free = Vec::new();
    let mut cursor = window.start().max(now);
    for (a, b) in spans {
        if a > cursor
            && let Ok(s) = Slot::new(cursor, a.min(window.end()))
            && s.length() >= min
        {
            free.push(s);
        }
        cursor = cursor.max(b);
    }
    if let Ok(s) = Slot::new(cursor, window.end())
        && s.length() >= min
    {
        free.push(s);
    }
    free
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(h: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + h * 3600).unwrap()
    }

    #[test]
    fn free_slots_are_the_long_enough_gaps() {
        let window = Slot::new(t(0), t(24)).unwrap();
        let busy = [
            Slot::new(t(2), t(4)).unwrap(),
            Slot::new(t(3), t(6)).unwrap(),
            Slot::new(t(7), t(8)).unwrap(),
        ];
        let free = free_slots(&busy, &window, SignedDuration::from_hours(2), t(0));
        let got: Vec<_> = free.iter().map(|s| (s.start(), s.end())).collect();
        assert_eq!(got, [(t(0), t(2)), (t(8), t(24))]);
        // The past is not offered.
        let later = free_slots(&busy, &window, SignedDuration::from_hours(1), t(9));
        assert_eq!(later.len(), 1);
        assert_eq!(later[0].start(), t(9));
    }

    #[test]
    fn transitions_follow_the_ledger() {
        let now = t(0);
        let b = Booking {
            id: BookingId(1),
            resource: ResourceId::parse("cern").unwrap(),
            owner: "alice".into(),
            slot: Slot::new(t(1), t(2)).unwrap(),
            status: Status::Held {
                until: t(0) + SignedDuration::from_mins(10),
            },
            note: String::new(),
            created_at: now,
            version: 1,
        };
        let bob = Actor::user("bob");
        assert_eq!(
            transition(Op::Cancel, &b, &bob, now).unwrap_err().status(),
            403
        );
        let alice = Actor::user("alice");
        assert_eq!(
            transition(Op::Confirm, &b, &alice, now).unwrap(),
            Status::Confirmed
        );
        let late = t(1);
        assert_eq!(
            transition(Op::Confirm, &b, &alice, late).unwrap_err().code,
            "hold_expired"
        );
        let e = transition(Op::Release, &b, &alice, now).unwrap_err();
        assert!(e.message.contains("cancel it"), "{}", e.message);
        assert!(transition(Op::Cancel, &b, &Actor::admin("root"), now).is_ok());
    }
}

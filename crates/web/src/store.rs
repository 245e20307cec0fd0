//! The booking store: one interface, two databases (docs/testbed.md §5). PostgreSQL enforces "no
//! double booking" with claim rows under two exclusion constraints; SQLite with `BEGIN IMMEDIATE`, a
//! conflict query and a trigger backstop. The rules that do not need the database (ownership, the
//! lifecycle, policy, the API views) come from the pure `longhaul-testbed` crate and are applied here,
//! inside each store's writing transaction.

use jiff::{SignedDuration, Timestamp};
use longhaul_testbed::api::{
    BookingView, CreateBooking, DeclineBooking, ErrorBody, Note, PreemptBooking,
};
use longhaul_testbed::booking::{
    Action, Actor, AuditEvent, Booking, BookingId, LedgerError, Phase, Role, Status,
};
use longhaul_testbed::idempotency::{Fingerprint, IdempotencyError, IdempotencyKey};
use longhaul_testbed::policy::{Decision, Policy, Reason, Request, UserContext};
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
    /// The user's display zone (DST warnings for it).
    pub zone: Option<String>,
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
/// `version`, `approval`, `declined_by`).
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
    pub(crate) approval: Option<String>,
    pub(crate) declined_by: Option<String>,
}

fn ts(us: i64) -> Result<Timestamp, StoreError> {
    Timestamp::from_microsecond(us).map_err(|e| StoreError::Corrupt(e.to_string()))
}

impl BookingRow {
    /// The booking and its approval state (`pending`, `approved`,
    /// `declined` or none).
    pub(crate) fn into_stored(mut self) -> Result<(Booking, Option<String>), StoreError> {
        let approval = self.approval.take();
        let b = self.into_booking()?;
        let approval = match b.status {
            Status::Declined { .. } => Some("declined".to_owned()),
            _ => approval,
        };
        Ok((b, approval))
    }

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
            "cancelled" => match &self.declined_by {
                Some(by) => Status::Declined {
                    at: at()?,
                    by: by.clone(),
                    reason: self.notice.clone().unwrap_or_default(),
                },
                None => Status::Cancelled { at: at()? },
            },
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
        // Stored as cancelled with `declined_by` set (migration 0003: the
        // status CHECK of SQLite cannot change in place).
        Status::Declined { at, .. } => ("cancelled", None, Some(at.as_microsecond())),
    }
}

/// The text columns of a status, for an UPDATE: (preempted_by, notice,
/// declined_by). A decline's reason is the notice its owner reads.
pub(crate) fn status_texts(s: &Status) -> (Option<&str>, Option<&str>, Option<&str>) {
    match s {
        Status::Preempted { by, notice, .. } => (Some(by), Some(notice), None),
        Status::Declined { by, reason, .. } => (None, Some(reason), Some(by)),
        _ => (None, None, None),
    }
}

/// The approval column's value for an approval state: a declined booking
/// keeps `pending` there (it was never approved; `declined_by` says it was
/// declined).
pub(crate) fn stored_approval(approval: Option<&str>) -> Option<&str> {
    match approval {
        Some("declined") => Some("pending"),
        other => other,
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

/// Policy at booking time: `Ok((warnings, needs_approval))` or the
/// refusal. A booking that needs approval (an event beyond the horizon) is
/// made as a pending hold until its start ([`new_status`]).
pub(crate) fn check_policy(
    req: &BookRequest<'_>,
    resource: &ResourceId,
    slot: &Slot,
    existing: &[Booking],
) -> Result<(Vec<Note>, bool), ErrorBody> {
    let request = Request {
        resource: resource.clone(),
        slot: *slot,
        event: req.create.event,
    };
    let user = UserContext {
        user: req.actor.user.clone(),
        role: req.actor.role,
        zone: req.zone.clone(),
        override_policy: false,
    };
    let decision = req
        .policy
        .check(&request, &user, req.inventory, existing, req.now);
    match &decision {
        Decision::Allow { warnings } => Ok((warnings.iter().map(Note::from).collect(), false)),
        Decision::NeedsApproval { reason, warnings } => {
            let mut notes: Vec<Note> = warnings.iter().map(Note::from).collect();
            notes.push(Note {
                code: "needs_approval".into(),
                message: format!(
                    "needs approval: {reason}; held until its start while an approver decides"
                ),
            });
            Ok((notes, true))
        }
        _ => Err(
            ErrorBody::from_decision(&decision).unwrap_or_else(|| ErrorBody {
                code: "policy".into(),
                message: "refused by policy".into(),
                reasons: Vec::new(),
            }),
        ),
    }
}

/// The new booking's status: held until its start when it needs approval,
/// held until now + ttl, or confirmed.
pub(crate) fn new_status(req: &BookRequest<'_>, slot: &Slot, needs_approval: bool) -> Status {
    if needs_approval {
        Status::Held {
            until: slot.start(),
        }
    } else if req.create.hold {
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

/// [`view`] with the approval state.
pub(crate) fn view_with(
    b: &Booking,
    approval: Option<&str>,
    now: Timestamp,
    warnings: Vec<Note>,
) -> BookingView {
    let mut v = view(b, now, warnings);
    v.approval = approval.map(str::to_owned);
    v
}

/// An account: who a token belongs to, and their display zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// User and role.
    pub actor: Actor,
    /// IANA zone for display, when set.
    pub zone: Option<String>,
}

/// A token row as both stores select it (the hash is never shown whole).
#[derive(Debug, Clone)]
pub(crate) struct TokenRow {
    pub(crate) hash: String,
    pub(crate) user: String,
    pub(crate) role: String,
    pub(crate) zone: Option<String>,
    pub(crate) created_at_us: i64,
    pub(crate) revoked_at_us: Option<i64>,
}

/// How many hex digits of a token's stored hash make its id.
pub const TOKEN_ID_LEN: usize = 8;

/// An API token as `token list` shows it: no secret, only a short id (the
/// first [`TOKEN_ID_LEN`] hex digits of its BLAKE3 hash, which reveal
/// nothing of the token).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TokenInfo {
    /// Short id, for `token revoke`.
    pub id: String,
    /// Account name.
    pub user: String,
    /// user, approver or admin.
    pub role: String,
    /// The account's display zone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// When it was created, UTC RFC 3339.
    pub created_at: String,
    /// Whether it was revoked (the service refuses it with 401).
    pub revoked: bool,
    /// When it was revoked, UTC RFC 3339.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<String>,
    /// The whole hash, to revoke exactly this token.
    #[serde(skip)]
    pub(crate) hash: String,
}

impl TokenRow {
    fn into_info(self) -> Result<TokenInfo, StoreError> {
        use longhaul_testbed::time::format_utc;
        Ok(TokenInfo {
            id: self.hash.chars().take(TOKEN_ID_LEN).collect(),
            user: self.user,
            role: self.role,
            zone: self.zone,
            created_at: format_utc(ts(self.created_at_us)?),
            revoked: self.revoked_at_us.is_some(),
            revoked_at: self.revoked_at_us.map(ts).transpose()?.map(format_utc),
            hash: self.hash,
        })
    }
}

/// Which tokens `token revoke` revokes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenSelector<'a> {
    /// The one token whose id (or a longer prefix of its hash) this is.
    Id(&'a str),
    /// Every token of this user.
    User(&'a str),
}

/// A refused revocation (the binary prints it as one line and exits 1).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RevokeError {
    /// No token has this id.
    #[error("no token with id {0:?} (see `longhaul testbed token list`)")]
    UnknownId(String),
    /// More than one token starts with this id.
    #[error("token id {0:?} is ambiguous: give more hex digits of it")]
    Ambiguous(String),
    /// Not a token id.
    #[error(
        "token id {0:?} is not hex digits (at least {TOKEN_ID_LEN}; see `longhaul testbed token list`)"
    )]
    BadId(String),
    /// The user has no token.
    #[error("user {0:?} has no token")]
    UnknownUser(String),
}

/// The tokens `sel` names in `all`, or why it names none.
pub(crate) fn select_tokens<'t>(
    all: &'t [TokenInfo],
    sel: TokenSelector<'_>,
) -> Result<Vec<&'t TokenInfo>, RevokeError> {
    match sel {
        TokenSelector::Id(id) => {
            let id = id.trim().to_ascii_lowercase();
            if id.len() < TOKEN_ID_LEN || !id.chars().all(|c| c.is_ascii_hexdigit()) {
                return Err(RevokeError::BadId(id));
            }
            let found: Vec<_> = all.iter().filter(|t| t.hash.starts_with(&id)).collect();
            match found.len() {
                0 => Err(RevokeError::UnknownId(id)),
                1 => Ok(found),
                _ => Err(RevokeError::Ambiguous(id)),
            }
        }
        TokenSelector::User(user) => {
            let found: Vec<_> = all.iter().filter(|t| t.user == user).collect();
            if found.is_empty() {
                return Err(RevokeError::UnknownUser(user.to_owned()));
            }
            Ok(found)
        }
    }
}

/// The system actor of the hold-expiry sweep.
pub(crate) fn system() -> Actor {
    Actor {
        user: "system".into(),
        role: Role::Admin,
    }
}

/// A change of a stored booking, decided from the booking before.
#[derive(Debug, Clone)]
pub(crate) struct Change {
    /// The booking after (status, slot; the version is bumped by the
    /// store).
    pub(crate) after: Booking,
    /// Its approval state after.
    pub(crate) approval: Option<String>,
    /// What the audit log records.
    pub(crate) action: Action,
    /// Warnings for the response.
    pub(crate) warnings: Vec<Note>,
}

/// Decides a change from (the booking, its approval state, the owner's
/// bookings near it); `Err` is the refusal.
pub(crate) type Decide<'a> =
    dyn Fn(&Booking, Option<&str>, &[Booking]) -> Result<Change, ErrorBody> + Send + Sync + 'a;

fn unchanged(before: &Booking, approval: Option<&str>, action: Action) -> Change {
    Change {
        after: before.clone(),
        approval: approval.map(str::to_owned),
        action,
        warnings: Vec::new(),
    }
}

/// Confirm, release or cancel, as [`transition`] decides; a booking waiting
/// for approval cannot be confirmed by its owner.
pub(crate) fn decide_op(
    op: Op,
    actor: &Actor,
    now: Timestamp,
) -> impl Fn(&Booking, Option<&str>, &[Booking]) -> Result<Change, ErrorBody> + Send + Sync + '_ {
    move |b, approval, _| {
        let status = transition(op, b, actor, now)?;
        if op == Op::Confirm && approval == Some("pending") {
            return Err(ErrorBody {
                code: "awaiting_approval".into(),
                message: format!(
                    "booking {} is waiting for an approver (it starts beyond the booking horizon); \
                     an approver or admin confirms it with `approve`",
                    b.id
                ),
                reasons: Vec::new(),
            });
        }
        let action = match op {
            Op::Confirm => Action::Confirm,
            Op::Release => Action::Release,
            Op::Cancel => Action::Cancel,
        };
        let mut c = unchanged(b, approval, action);
        c.after.status = status;
        Ok(c)
    }
}

/// Extend to `new_end`: the owner (or an admin), a live booking, a later
/// end, and the policy's rules for the longer slot. The database decides
/// whether it collides with the next booking.
pub(crate) fn decide_extend<'a>(
    new_end: Timestamp,
    account: &'a Account,
    policy: &'a Policy,
    inventory: &'a Inventory,
    now: Timestamp,
) -> impl Fn(&Booking, Option<&str>, &[Booking]) -> Result<Change, ErrorBody> + Send + Sync + 'a {
    move |b, approval, mine| {
        let actor = &account.actor;
        let refuse = |e: LedgerError| Err(ErrorBody::from(&e));
        if b.owner != actor.user && actor.role != Role::Admin {
            return refuse(LedgerError::NotOwner {
                booking: b.id,
                owner: b.owner.clone(),
            });
        }
        let phase = b.phase(now);
        if !matches!(phase, Phase::Held | Phase::Upcoming | Phase::Active) {
            return refuse(LedgerError::InvalidTransition {
                op: "extend",
                phase,
                hint: "",
            });
        }
        if new_end <= b.slot.end() {
            return refuse(LedgerError::NotLonger {
                end: b.slot.end(),
                new_end,
            });
        }
        let user = UserContext {
            user: b.owner.clone(),
            role: actor.role,
            zone: account.zone.clone(),
            override_policy: false,
        };
        let slot = Slot::new(b.slot.start(), new_end).map_err(|e| ErrorBody::from(&e))?;
        let warnings = match policy.check_extend(b, new_end, &user, inventory, mine, now) {
            Decision::Allow { warnings } | Decision::NeedsApproval { warnings, .. } => warnings,
            Decision::Refuse { reasons } => {
                // "Stacking" against one of the owner's bookings that the longer slot overlaps
                // is a conflict: the database refuses it with a 409 naming that booking, as it
                // would for anyone's (a conflict comes before policy, as for new bookings).
                let reasons: Vec<Reason> = reasons
                    .into_iter()
                    .filter(|r| !matches!(r, Reason::Stacking { slot: other, .. } if other.overlaps(&slot)))
                    .collect();
                if reasons.is_empty() {
                    Vec::new()
                } else {
                    let d = Decision::Refuse { reasons };
                    return Err(ErrorBody::from_decision(&d).unwrap_or_else(|| ErrorBody {
                        code: "policy".into(),
                        message: "refused by policy".into(),
                        reasons: Vec::new(),
                    }));
                }
            }
        };
        let mut c = unchanged(b, approval, Action::Extend);
        c.after.slot = slot;
        c.warnings = warnings.iter().map(Note::from).collect();
        Ok(c)
    }
}

/// An admin takes a live booking away, with a notice for its owner.
pub(crate) fn decide_preempt<'a>(
    notice: &'a str,
    actor: &'a Actor,
    now: Timestamp,
) -> impl Fn(&Booking, Option<&str>, &[Booking]) -> Result<Change, ErrorBody> + Send + Sync + 'a {
    move |b, approval, _| {
        if actor.role != Role::Admin {
            return Err(ErrorBody::from(&LedgerError::NotAdmin("preempt a booking")));
        }
        if notice.trim().is_empty() {
            return Err(ErrorBody::from(&LedgerError::NoticeRequired));
        }
        let phase = b.phase(now);
        if !matches!(phase, Phase::Held | Phase::Upcoming | Phase::Active) {
            return Err(ErrorBody::from(&LedgerError::InvalidTransition {
                op: "preempt",
                phase,
                hint: "",
            }));
        }
        let mut c = unchanged(b, approval, Action::Preempt);
        c.after.status = Status::Preempted {
            at: now,
            by: actor.user.clone(),
            notice: notice.trim().to_owned(),
        };
        Ok(c)
    }
}

/// The 403 for a user who tries to `op` (approve, decline) a booking.
fn not_approver(op: &str) -> ErrorBody {
    ErrorBody {
        code: "not_approver".into(),
        message: format!("only an approver or an admin can {op} a booking"),
        reasons: Vec::new(),
    }
}

/// An approver or admin approves a booking waiting for approval: it is
/// confirmed. Not their own (403 `self_approval`) unless `allow_self`
/// ([`Policy::allow_self_approval`]): an approval is a second person's
/// decision, or an approver could book past the horizon alone.
pub(crate) fn decide_approve(
    actor: &Actor,
    now: Timestamp,
    allow_self: bool,
) -> impl Fn(&Booking, Option<&str>, &[Booking]) -> Result<Change, ErrorBody> + Send + Sync + '_ {
    move |b, approval, _| {
        if actor.role == Role::User {
            return Err(not_approver("approve"));
        }
        awaiting_approval(b, approval, now)?;
        if b.owner == actor.user && !allow_self {
            return Err(ErrorBody {
                code: "self_approval".into(),
                message: format!(
                    "booking {} is yours: another approver or an admin must approve it \
                     (a testbed with a single approver can run `serve --allow-self-approval`)",
                    b.id
                ),
                reasons: Vec::new(),
            });
        }
        let mut c = unchanged(b, Some("approved"), Action::Approve);
        c.after.status = Status::Confirmed;
        Ok(c)
    }
}

/// Refuses unless `b` is waiting for an approver: approval `pending` and
/// still held (`hold_expired` once its start has passed, `not_pending`
/// otherwise).
fn awaiting_approval(b: &Booking, approval: Option<&str>, now: Timestamp) -> Result<(), ErrorBody> {
    let not_pending = |message: String| ErrorBody {
        code: "not_pending".into(),
        message,
        reasons: Vec::new(),
    };
    if approval != Some("pending") {
        return Err(not_pending(format!(
            "booking {} is not waiting for approval",
            b.id
        )));
    }
    match b.status {
        Status::Held { until } if now < until => Ok(()),
        Status::Held { until } | Status::Expired { at: until } => {
            Err(ErrorBody::from(&LedgerError::HoldExpired(until)))
        }
        _ => Err(not_pending(format!(
            "booking {} is {}, not waiting for approval",
            b.id,
            b.phase(now)
        ))),
    }
}

/// An approver or admin declines a booking waiting for approval, with a
/// reason for its owner (already checked: trimmed, non-blank, bounded, see
/// [`longhaul_testbed::api::DeclineBooking::reason`]): it ends as
/// cancelled, stops blocking its slot, and shows who declined it and why.
/// The refusals are approve's: `not_approver`, `not_pending`,
/// `hold_expired` once its start has passed.
pub(crate) fn decide_decline<'a>(
    reason: &'a str,
    actor: &'a Actor,
    now: Timestamp,
) -> impl Fn(&Booking, Option<&str>, &[Booking]) -> Result<Change, ErrorBody> + Send + Sync + 'a {
    move |b, approval, _| {
        if actor.role == Role::User {
            return Err(not_approver("decline"));
        }
        awaiting_approval(b, approval, now)?;
        let mut c = unchanged(b, Some("declined"), Action::Decline);
        c.after.status = Status::Declined {
            at: now,
            by: actor.user.clone(),
            reason: reason.to_owned(),
        };
        Ok(c)
    }
}

/// The refusal when the database refused a change (an extension into the
/// next booking; a re-claim of a hold someone else took meanwhile).
pub(crate) fn refused_change(before: &Booking, after: &Booking, next: Option<&Booking>) -> Reply {
    if after.slot.end() > before.slot.end() {
        return match next {
            Some(n) => Reply::error(ErrorBody::from(&LedgerError::ExtendConflict {
                new_end: after.slot.end(),
                max_end: n.slot.start().max(before.slot.end()),
                with: n.id,
            })),
            None => anonymous_conflict(&after.resource, &after.slot),
        };
    }
    match next {
        Some(n) => conflict_reply(&after.resource, n),
        None => anonymous_conflict(&after.resource, &after.slot),
    }
}

/// The 404 for an unknown booking id.
pub(crate) fn unknown_booking(id: i64) -> Reply {
    Reply::error(ErrorBody::from(&LedgerError::UnknownBooking(BookingId(
        u64::try_from(id).unwrap_or(0),
    ))))
}

/// An audit row, as both stores select it (`seq`, `at_us`, `actor`,
/// `role`, `action`, `booking`, `before` and `after` as JSON text).
pub(crate) fn audit_event<'r, R: sqlx::Row>(r: &'r R) -> Result<AuditEvent, StoreError>
where
    i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    &'r str: sqlx::ColumnIndex<R>,
{
    let seq: i64 = r.try_get("seq")?;
    let at_us: i64 = r.try_get("at_us")?;
    let actor: String = r.try_get("actor")?;
    let role: String = r.try_get("role")?;
    let action: String = r.try_get("action")?;
    let booking: i64 = r.try_get("booking")?;
    let before: Option<String> = r.try_get("before")?;
    let after: String = r.try_get("after")?;
    let (role, action, before, after) = (&role, &action, before.as_deref(), &after);
    let corrupt = |what: String| StoreError::Corrupt(format!("audit {seq}: {what}"));
    Ok(AuditEvent {
        seq: u64::try_from(seq).map_err(|_| corrupt("negative seq".into()))?,
        at: ts(at_us)?,
        actor,
        role: parse_role(role)?,
        action: serde_json::from_value(serde_json::Value::String(action.to_owned()))
            .map_err(|e| corrupt(e.to_string()))?,
        booking: BookingId(u64::try_from(booking).map_err(|_| corrupt("negative id".into()))?),
        before: before
            .map(serde_json::from_str::<Booking>)
            .transpose()
            .map_err(|e| corrupt(e.to_string()))?,
        after: serde_json::from_str(after).map_err(|e| corrupt(e.to_string()))?,
    })
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

/// The prefix of API tokens.
pub const API_TOKEN_PREFIX: &str = "lh_";

/// The prefix of calendar feed tokens: the service tells them apart from
/// API tokens by it, to refuse each where it does not belong with a message
/// that says why (each is also looked up only in its own table).
pub const FEED_TOKEN_PREFIX: &str = "lhf_";

/// A new random token: `prefix` + 32 hex digits from the OS (fails closed
/// when the OS has none to give).
pub(crate) fn new_token_with(prefix: &str) -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("{prefix}{hex}"))
}

/// A new random API token (`lh_` + 32 hex digits from the OS).
pub(crate) fn new_token() -> std::io::Result<String> {
    new_token_with(API_TOKEN_PREFIX)
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
    /// `zone` (an IANA name, checked by the caller) becomes the display zone
    /// of every token of `user`.
    pub async fn add_token(
        &self,
        user: &str,
        role: Role,
        zone: Option<&str>,
        now: Timestamp,
    ) -> anyhow::Result<String> {
        let token = new_token()?;
        let hash = token_hash(&token);
        match self {
            Self::Sqlite(s) => s.add_token(&hash, user, role, zone, now).await?,
            Self::Postgres(s) => s.add_token(&hash, user, role, zone, now).await?,
        }
        Ok(token)
    }

    /// Every token, oldest first, revoked ones included.
    pub async fn tokens(&self) -> Result<Vec<TokenInfo>, StoreError> {
        let rows = match self {
            Self::Sqlite(s) => s.tokens().await?,
            Self::Postgres(s) => s.tokens().await?,
        };
        rows.into_iter().map(TokenRow::into_info).collect()
    }

    /// Revokes the tokens `sel` names at `now`: the service refuses them
    /// from the next request on (401, as an unknown token). Returns each
    /// named token as it is now, and whether this call revoked it (`false`:
    /// it was revoked already).
    pub async fn revoke_tokens(
        &self,
        sel: TokenSelector<'_>,
        now: Timestamp,
    ) -> anyhow::Result<Vec<(TokenInfo, bool)>> {
        let all = self.tokens().await?;
        let chosen: Vec<TokenInfo> = select_tokens(&all, sel)?.into_iter().cloned().collect();
        let mut out = Vec::with_capacity(chosen.len());
        for t in chosen {
            let revoked = match self {
                Self::Sqlite(s) => s.revoke_token(&t.hash, now).await?,
                Self::Postgres(s) => s.revoke_token(&t.hash, now).await?,
            };
            out.push((t, revoked));
        }
        let after = self.tokens().await?;
        Ok(out
            .into_iter()
            .map(|(t, revoked)| {
                let now = after.iter().find(|a| a.hash == t.hash).cloned();
                (now.unwrap_or(t), revoked)
            })
            .collect())
    }

    /// The account of a bearer token (`None` for an unknown or revoked
    /// one).
    pub async fn account(&self, token: &str) -> Result<Option<Account>, StoreError> {
        let hash = token_hash(token);
        match self {
            Self::Sqlite(s) => s.account(&hash).await,
            Self::Postgres(s) => s.account(&hash).await,
        }
    }

    /// Makes a new calendar feed token for `user` (replacing theirs: the old
    /// one stops working at once) and returns it, shown once and stored as
    /// its BLAKE3 hash; `None` when `user` has no valid API token (a feed
    /// token belongs to an account, and ends with it).
    pub async fn rotate_feed_token(
        &self,
        user: &str,
        now: Timestamp,
    ) -> anyhow::Result<Option<String>> {
        let token = new_token_with(FEED_TOKEN_PREFIX)?;
        let hash = token_hash(&token);
        let made = match self {
            Self::Sqlite(s) => s.set_feed_token(&hash, user, now).await?,
            Self::Postgres(s) => s.set_feed_token(&hash, user, now).await?,
        };
        Ok(made.then_some(token))
    }

    /// Removes `user`'s feed token; whether they had one.
    pub async fn revoke_feed_token(&self, user: &str) -> Result<bool, StoreError> {
        match self {
            Self::Sqlite(s) => s.revoke_feed_token(user).await,
            Self::Postgres(s) => s.revoke_feed_token(user).await,
        }
    }

    /// The user of a calendar feed token (`None` for an unknown one, or one
    /// whose user has no valid API token left: revoking a user's API tokens
    /// ends their feed too). It grants reading feeds, nothing else.
    pub async fn feed_user(&self, token: &str) -> Result<Option<String>, StoreError> {
        let hash = token_hash(token);
        match self {
            Self::Sqlite(s) => s.feed_user(&hash).await,
            Self::Postgres(s) => s.feed_user(&hash).await,
        }
    }

    /// The user and role of a bearer token.
    pub async fn authenticate(&self, token: &str) -> Result<Option<Actor>, StoreError> {
        Ok(self.account(token).await?.map(|a| a.actor))
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

    /// Applies a decided change to booking `id` in one transaction, with
    /// its audit event; the database has the last word on overlaps.
    pub(crate) async fn modify(
        &self,
        id: i64,
        actor: &Actor,
        now: Timestamp,
        decide: &Decide<'_>,
    ) -> Result<Reply, StoreError> {
        match self {
            Self::Sqlite(s) => s.modify(id, actor, now, decide).await,
            Self::Postgres(s) => s.modify(id, actor, now, decide).await,
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
        self.modify(id, actor, now, &decide_op(op, actor, now))
            .await
    }

    /// Moves the end of booking `id` to `new_end`, up to the next booking of
    /// a conflicting resource (409 `extend_conflict` naming it otherwise).
    pub async fn extend(
        &self,
        id: i64,
        new_end: Timestamp,
        account: &Account,
        policy: &Policy,
        inventory: &Inventory,
        now: Timestamp,
    ) -> Result<Reply, StoreError> {
        let decide = decide_extend(new_end, account, policy, inventory, now);
        self.modify(id, &account.actor, now, &decide).await
    }

    /// An admin preempts booking `id` with `notice` for its owner.
    pub async fn preempt(
        &self,
        id: i64,
        notice: &str,
        actor: &Actor,
        now: Timestamp,
    ) -> Result<Reply, StoreError> {
        // As the ledger: who and why before which.
        if actor.role != Role::Admin {
            return Ok(Reply::error(ErrorBody::from(&LedgerError::NotAdmin(
                "preempt a booking",
            ))));
        }
        if notice.trim().is_empty() {
            return Ok(Reply::error(ErrorBody::from(&LedgerError::NoticeRequired)));
        }
        let body = PreemptBooking {
            notice: notice.to_owned(),
        };
        if let Err(e) = body.check_length() {
            return Ok(Reply::error(e));
        }
        self.modify(id, actor, now, &decide_preempt(notice, actor, now))
            .await
    }

    /// An approver approves booking `id`, which was waiting for approval;
    /// their own only when `allow_self` ([`Policy::allow_self_approval`]).
    pub async fn approve(
        &self,
        id: i64,
        actor: &Actor,
        now: Timestamp,
        allow_self: bool,
    ) -> Result<Reply, StoreError> {
        self.modify(id, actor, now, &decide_approve(actor, now, allow_self))
            .await
    }

    /// An approver or admin declines booking `id`, which was waiting for
    /// approval, with a reason for its owner. As for a preemption, who and
    /// why are checked before which: `not_approver` (403), then the reason
    /// ([`DeclineBooking::reason`]: 422 `reason_required` or
    /// `reason_too_long`), then the booking (404, 409 `not_pending`).
    pub async fn decline(
        &self,
        id: i64,
        body: &DeclineBooking,
        actor: &Actor,
        now: Timestamp,
    ) -> Result<Reply, StoreError> {
        if actor.role == Role::User {
            return Ok(Reply::error(not_approver("decline")));
        }
        let reason = match body.reason() {
            Ok(r) => r,
            Err(e) => return Ok(Reply::error(e)),
        };
        self.modify(id, actor, now, &decide_decline(reason, actor, now))
            .await
    }

    /// The audit events of booking `id`, oldest first; `None` when there is
    /// no such booking.
    pub async fn audit(&self, id: i64) -> Result<Option<Vec<AuditEvent>>, StoreError> {
        match self {
            Self::Sqlite(s) => s.audit_of(id).await,
            Self::Postgres(s) => s.audit_of(id).await,
        }
    }

    /// Marks every hold whose time ran out at `now` as expired, audited as
    /// `system`; returns their ids. (They stopped blocking at expiry
    /// already: this makes it visible.)
    pub async fn expire_holds(&self, now: Timestamp) -> Result<Vec<i64>, StoreError> {
        match self {
            Self::Sqlite(s) => s.expire_holds(now).await,
            Self::Postgres(s) => s.expire_holds(now).await,
        }
    }

    /// Every booking of `user` (any status), by start.
    pub async fn of_owner(&self, user: &str) -> Result<Vec<Booking>, StoreError> {
        let rows = match self {
            Self::Sqlite(s) => s.of_owner(user).await?,
            Self::Postgres(s) => s.of_owner(user).await?,
        };
        rows.into_iter().map(BookingRow::into_booking).collect()
    }

    /// [`Store::list`] with each booking's approval state.
    pub async fn list_stored(
        &self,
        resource: Option<&ResourceId>,
        from: Option<Timestamp>,
        to: Option<Timestamp>,
    ) -> Result<Vec<(Booking, Option<String>)>, StoreError> {
        let from = from.map_or(i64::MIN, |t| t.as_microsecond());
        let to = to.map_or(i64::MAX, |t| t.as_microsecond());
        let rows = match self {
            Self::Sqlite(s) => s.list(resource, from, to).await?,
            Self::Postgres(s) => s.list(resource, from, to).await?,
        };
        rows.into_iter().map(BookingRow::into_stored).collect()
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

    fn pending(now: Timestamp) -> Booking {
        Booking {
            id: BookingId(7),
            resource: ResourceId::parse("cern").unwrap(),
            owner: "alice".into(),
            slot: Slot::new(t(24 * 60), t(24 * 60 + 2)).unwrap(),
            status: Status::Held { until: t(24 * 60) },
            note: String::new(),
            created_at: now,
            version: 1,
        }
    }

    #[test]
    fn only_approvers_and_admins_decline() {
        let now = t(0);
        let b = pending(now);
        for who in [Actor::user("alice"), Actor::user("bob")] {
            let e = decide_decline("no", &who, now)(&b, Some("pending"), &[]).unwrap_err();
            assert_eq!((e.code.as_str(), e.status()), ("not_approver", 403));
        }
        let carol = Actor {
            user: "carol".into(),
            role: Role::Approver,
        };
        for who in [carol, Actor::admin("root")] {
            let c = decide_decline("kept for the LSR run", &who, now)(&b, Some("pending"), &[])
                .unwrap();
            assert_eq!(c.action, Action::Decline);
            assert_eq!(c.approval.as_deref(), Some("declined"));
            assert_eq!(
                c.after.status,
                Status::Declined {
                    at: now,
                    by: who.user.clone(),
                    reason: "kept for the LSR run".into()
                }
            );
            assert!(!c.after.is_live(now), "a declined booking frees its slot");
            assert_eq!(c.after.phase(now), Phase::Cancelled);
        }
    }

    #[test]
    fn nobody_approves_their_own_booking_unless_allowed() {
        let now = t(0);
        let mut b = pending(now);
        b.owner = "carol".into();
        let carol = Actor {
            user: "carol".into(),
            role: Role::Approver,
        };
        let e = decide_approve(&carol, now, false)(&b, Some("pending"), &[]).unwrap_err();
        assert_eq!((e.code.as_str(), e.status()), ("self_approval", 403));
        b.owner = "root".into();
        let root = Actor::admin("root");
        let e = decide_approve(&root, now, false)(&b, Some("pending"), &[]).unwrap_err();
        assert_eq!(e.code, "self_approval");
        // Another approver, or the policy switch.
        let c = decide_approve(&carol, now, false)(&b, Some("pending"), &[]).unwrap();
        assert_eq!(c.after.status, Status::Confirmed);
        let c = decide_approve(&root, now, true)(&b, Some("pending"), &[]).unwrap();
        assert_eq!(c.approval.as_deref(), Some("approved"));
    }

    #[test]
    fn decline_needs_a_pending_unexpired_booking() {
        let now = t(0);
        let root = Actor::admin("root");
        let b = pending(now);
        let decline = decide_decline("no", &root, now);
        // Not waiting for approval: an ordinary hold, an approved or a declined booking.
        for approval in [None, Some("approved"), Some("declined")] {
            let e = decline(&b, approval, &[]).unwrap_err();
            assert_eq!(
                (e.code.as_str(), e.status()),
                ("not_pending", 409),
                "{approval:?}"
            );
        }
        // Pending in the column but no longer held (cancelled by its owner).
        let mut cancelled = b.clone();
        cancelled.status = Status::Cancelled { at: now };
        let e = decline(&cancelled, Some("pending"), &[]).unwrap_err();
        assert_eq!(e.code, "not_pending");
        assert!(e.message.contains("cancelled"), "{}", e.message);
        // Its start (the hold's end) has passed.
        let late = t(24 * 60);
        let e = decide_decline("no", &root, late)(&b, Some("pending"), &[]).unwrap_err();
        assert_eq!(e.code, "hold_expired");
        // Approve refuses a declined booking the same way.
        let e = decide_approve(&root, now, false)(&b, Some("declined"), &[]).unwrap_err();
        assert_eq!(e.code, "not_pending");
    }

    #[test]
    fn a_declined_booking_is_stored_as_cancelled_and_read_back() {
        let now = t(0);
        let mut b = pending(now);
        b.status = Status::Declined {
            at: now,
            by: "carol".into(),
            reason: "kept for the LSR run".into(),
        };
        let (name, hold, at) = status_columns(&b.status);
        let (preempted_by, notice, declined_by) = status_texts(&b.status);
        assert_eq!((name, hold, preempted_by), ("cancelled", None, None));
        assert_eq!(stored_approval(Some("declined")), Some("pending"));
        let row = BookingRow {
            id: 7,
            resource: "cern".into(),
            owner: "alice".into(),
            start_us: b.slot.start().as_microsecond(),
            end_us: b.slot.end().as_microsecond(),
            status: name.into(),
            hold_until_us: hold,
            status_at_us: at,
            preempted_by: None,
            notice: notice.map(str::to_owned),
            note: String::new(),
            created_at_us: now.as_microsecond(),
            version: 1,
            approval: stored_approval(Some("declined")).map(str::to_owned),
            declined_by: declined_by.map(str::to_owned),
        };
        let (back, approval) = row.clone().into_stored().unwrap();
        assert_eq!(
            (back.status, approval.as_deref()),
            (b.status, Some("declined"))
        );
        // Without declined_by it is an ordinary cancellation, still pending in the column.
        let row = BookingRow {
            declined_by: None,
            ..row
        };
        let (back, approval) = row.into_stored().unwrap();
        assert_eq!(back.status, Status::Cancelled { at: now });
        assert_eq!(approval.as_deref(), Some("pending"));
    }

    fn token(hash: &str, user: &str) -> TokenInfo {
        TokenRow {
            hash: hash.into(),
            user: user.into(),
            role: "user".into(),
            zone: None,
            created_at_us: 0,
            revoked_at_us: None,
        }
        .into_info()
        .unwrap()
    }

    #[test]
    fn revoke_names_one_token_by_id_or_all_of_a_user() {
        let all = [
            token("0123456789abcdef", "alice"),
            token("0123456799abcdef", "alice"),
            token("fedcba9876543210", "bob"),
        ];
        assert_eq!(all[0].id, "01234567");
        let ids = |sel| {
            select_tokens(&all, sel).map(|v| v.iter().map(|t| t.hash.clone()).collect::<Vec<_>>())
        };
        assert_eq!(
            ids(TokenSelector::Id("FEDCBA98")).unwrap(),
            ["fedcba9876543210"]
        );
        assert_eq!(
            ids(TokenSelector::Id("01234567")),
            Err(RevokeError::Ambiguous("01234567".into()))
        );
        assert_eq!(
            ids(TokenSelector::Id("012345678")).unwrap(),
            ["0123456789abcdef"]
        );
        assert_eq!(
            ids(TokenSelector::Id("deadbeef")),
            Err(RevokeError::UnknownId("deadbeef".into()))
        );
        for bad in ["0123", "lh_01234567", "0123456z"] {
            assert!(
                matches!(ids(TokenSelector::Id(bad)), Err(RevokeError::BadId(_))),
                "{bad}"
            );
        }
        assert_eq!(ids(TokenSelector::User("alice")).unwrap().len(), 2);
        assert_eq!(
            ids(TokenSelector::User("carol")),
            Err(RevokeError::UnknownUser("carol".into()))
        );
    }
}

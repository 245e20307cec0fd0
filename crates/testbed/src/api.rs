//! The bodies of the REST API, shared by JSON and XML ([`crate::xml`]). Times
//! travel as RFC 3339 strings and are validated here, not by serde, so a
//! naive time gets the clear [`crate::time::TimeError`] message in a 400
//! [`ErrorBody`] rather than a generic parse error. Responses echo the
//! *effective* UTC times (GENI #428: "renew returns the requested time"),
//! plus the times in the user's zone when one is known.

use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

use crate::booking::{Approval, Booking, Ledger, LedgerError, Phase, Status};
use crate::idempotency::IdempotencyError;
use crate::policy::{Decision, Reason, Warning};
use crate::resource::{InventoryError, ResourceId};
use crate::time::{Slot, TimeError, format_utc, parse_instant, render_in_zone};

/// `POST /bookings`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateBooking {
    /// Resource id (`cern/starlight-lambda/1g-a`).
    pub resource: String,
    /// RFC 3339 with offset.
    pub start: String,
    /// RFC 3339 with offset.
    pub end: String,
    /// True: a hold that must be confirmed before it expires.
    #[serde(default)]
    pub hold: bool,
    /// A major event, bookable beyond the horizon with approval.
    #[serde(default)]
    pub event: bool,
    /// Free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl CreateBooking {
    /// The longest note, in characters (Unicode scalar values, as JSON Schema's `maxLength` counts
    /// them): a note is a line or a paragraph for the calendar and the audit log; without a bound
    /// only the 2 MiB body limit would stop one user from storing megabytes per booking, shown in
    /// every list and feed.
    pub const NOTE_MAX: usize = 4096;

    fn nul_in_note() -> ErrorBody {
        ErrorBody::bad_request(
            "invalid_body",
            "note: NUL characters are not allowed".into(),
        )
    }

    /// The resource id and slot, or a 400 body.
    pub fn validate(&self) -> Result<(ResourceId, Slot), ErrorBody> {
        let resource = ResourceId::parse(&self.resource).map_err(|e| ErrorBody::from(&e))?;
        let slot = Slot::parse(&self.start, &self.end).map_err(|e| ErrorBody::from(&e))?;
        // PostgreSQL text cannot hold NUL; refuse it on every store alike.
        if let Some(note) = &self.note {
            if note.contains('\0') {
                return Err(Self::nul_in_note());
            }
            too_long("note", "note_too_long", note, Self::NOTE_MAX)?;
        }
        Ok((resource, slot))
    }
}

/// A warning or refusal reason as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Note {
    /// Stable code (`max_contiguous`, `dst_change`, ...).
    pub code: String,
    /// Human message.
    pub message: String,
}

impl From<&Reason> for Note {
    fn from(r: &Reason) -> Self {
        Self {
            code: r.code().into(),
            message: r.to_string(),
        }
    }
}

impl From<&Warning> for Note {
    fn from(w: &Warning) -> Self {
        let code = match w {
            Warning::Degraded { .. } => "degraded",
            Warning::DstChange { .. } => "dst_change",
            Warning::Overridden { .. } => "overridden",
        };
        Self {
            code: code.into(),
            message: w.to_string(),
        }
    }
}

/// Start and end in the user's zone, for display.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocalTimes {
    /// IANA zone.
    pub zone: String,
    /// Start, e.g. `2026-03-29 10:00:00 CEST (+02:00)`.
    pub start: String,
    /// End.
    pub end: String,
}

/// A booking as the API returns it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BookingView {
    /// Id.
    pub id: u64,
    /// Resource id.
    pub resource: String,
    /// Owner.
    pub owner: String,
    /// Effective start, UTC RFC 3339.
    pub start: String,
    /// Effective end, UTC RFC 3339 (the release time once released).
    pub end: String,
    /// Phase at the time of the response.
    pub status: Phase,
    /// Expiry of a hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_until: Option<String>,
    /// Free text.
    #[serde(default)]
    pub note: String,
    /// Version (for If-Match).
    pub version: u32,
    /// Warnings from the policy check (degraded, DST change, override).
    #[serde(default)]
    pub warnings: Vec<Note>,
    /// The times in the user's zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<LocalTimes>,
    /// `pending` while a booking beyond the horizon waits for an approver
    /// (it is held until its start meanwhile), `approved` once approved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<Approval>,
    /// Who preempted it, when preempted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preempted_by: Option<String>,
    /// The notice the preempting admin gave, when preempted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
    /// Who declined it, when an approver declined it (approval `declined`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declined_by: Option<String>,
    /// The approver's reason, when declined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decline_reason: Option<String>,
}

impl BookingView {
    /// The view of `b` at `now`, with `warnings`, localised to `zone` when
    /// given (an unknown zone is left out rather than failing the response).
    pub fn new(b: &Booking, now: Timestamp, zone: Option<&str>, warnings: &[Warning]) -> Self {
        let slot = b.effective_slot().unwrap_or(b.slot);
        let local = zone.and_then(|z| {
            Some(LocalTimes {
                zone: z.to_owned(),
                start: render_in_zone(slot.start(), z).ok()?,
                end: render_in_zone(slot.end(), z).ok()?,
            })
        });
        Self {
            id: b.id.0,
            resource: b.resource.to_string(),
            owner: b.owner.clone(),
            start: format_utc(slot.start()),
            end: format_utc(slot.end()),
            status: b.phase(now),
            hold_until: match b.status {
                Status::Held { until } => Some(format_utc(until)),
                _ => None,
            },
            note: b.note.clone(),
            version: b.version,
            warnings: warnings.iter().map(Note::from).collect(),
            local,
            approval: None,
            preempted_by: match &b.status {
                Status::Preempted { by, .. } => Some(by.clone()),
                _ => None,
            },
            notice: match &b.status {
                Status::Preempted { notice, .. } => Some(notice.clone()),
                _ => None,
            },
            declined_by: match &b.status {
                Status::Declined { by, .. } => Some(by.clone()),
                _ => None,
            },
            decline_reason: match &b.status {
                Status::Declined { reason, .. } => Some(reason.clone()),
                _ => None,
            },
        }
    }
}

/// `POST /bookings/{id}/extend`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtendBooking {
    /// The new end, RFC 3339 with an offset; later than the current end.
    pub end: String,
}

/// A 422 `code` naming `field` when `text` has more than `max` characters (counted as JSON
/// Schema's `maxLength` counts them, untrimmed, so the document's bound and the service's agree).
pub fn too_long(field: &str, code: &str, text: &str, max: usize) -> Result<(), ErrorBody> {
    // Counting stops just past the bound: a 2 MiB text costs no more than a short one.
    let n = text.chars().take(max + 1).count();
    if n > max {
        return Err(ErrorBody::bad_request(
            code,
            format!(
                "{field}: {} characters; at most {max} are allowed",
                text.chars().count()
            ),
        ));
    }
    Ok(())
}

/// `POST /bookings/{id}/preempt`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreemptBooking {
    /// Why, for the owner (required, non-blank, at most
    /// [`PreemptBooking::NOTICE_MAX`] characters): "fibre repair on the
    /// Geneva side, back at 14:00 UTC".
    pub notice: String,
}

impl PreemptBooking {
    /// The longest notice, in characters (as a decline's reason).
    pub const NOTICE_MAX: usize = 1000;

    /// A 422 `notice_too_long` beyond [`Self::NOTICE_MAX`] characters.
    pub fn check_length(&self) -> Result<(), ErrorBody> {
        too_long("notice", "notice_too_long", &self.notice, Self::NOTICE_MAX)
    }
}

/// `POST /api/v1/me/feed-token`: the caller's new calendar feed token
/// (shown once; any earlier one stops working).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeedToken {
    /// Whose feed.
    pub user: String,
    /// The token (`lhf_` and 32 hex digits): it reads the calendar feeds
    /// as `?token=`, and nothing else.
    pub token: String,
    /// The path of the user's feed with the token, to subscribe to.
    pub feed: String,
}

/// `POST /bookings/{id}/decline`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeclineBooking {
    /// Why, for the owner (required, non-blank, at most
    /// [`DeclineBooking::REASON_MAX`] characters once trimmed): "the
    /// March slot is kept for the LSR attempt".
    pub reason: String,
}

impl DeclineBooking {
    /// The longest reason, in characters (Unicode scalar values, as JSON
    /// Schema's `maxLength` counts them).
    pub const REASON_MAX: usize = 1000;

    /// The reason, trimmed; a 422 `reason_required` when blank, a 422
    /// `reason_too_long` beyond [`Self::REASON_MAX`], a 400 `invalid_body`
    /// for control characters other than newline and tab (as a preemption
    /// notice).
    pub fn reason(&self) -> Result<&str, ErrorBody> {
        let r = self.reason.trim();
        if self
            .reason
            .chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t')
        {
            return Err(ErrorBody::bad_request(
                "invalid_body",
                "reason: control characters other than newline and tab are not allowed".into(),
            ));
        }
        if r.is_empty() {
            return Err(ErrorBody::bad_request(
                "reason_required",
                "declining a booking needs a reason for its owner".into(),
            ));
        }
        let n = r.chars().count();
        if n > Self::REASON_MAX {
            return Err(ErrorBody::bad_request(
                "reason_too_long",
                format!(
                    "the reason is {n} characters long; at most {} are allowed",
                    Self::REASON_MAX
                ),
            ));
        }
        Ok(r)
    }
}

/// One audit event as the API shows it: who did what, when, and the
/// booking's phase and times before and after.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditView {
    /// Position in the log.
    pub seq: u64,
    /// When, UTC RFC 3339.
    pub at: String,
    /// Who (`system` for the hold-expiry sweep).
    pub actor: String,
    /// Their role then.
    pub role: String,
    /// What: hold, book, confirm, release, cancel, extend, expire,
    /// preempt, approve, decline.
    pub action: String,
    /// The booking.
    pub booking: u64,
    /// The stored status before (absent for a new booking).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_before: Option<String>,
    /// The stored status after.
    pub status_after: String,
    /// The end before, when the action moved it (extend).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_before: Option<String>,
    /// Start after, UTC.
    pub start: String,
    /// End after, UTC.
    pub end: String,
    /// The preemption notice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
    /// The reason an approver gave when declining.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl AuditView {
    /// The view of `e`.
    pub fn new(e: &crate::booking::AuditEvent) -> Self {
        let name = |s: &Status| {
            serde_json::to_value(s)
                .ok()
                .and_then(|v| v.get("status").and_then(|x| x.as_str()).map(str::to_owned))
                .unwrap_or_default()
        };
        let end_before = e
            .before
            .as_ref()
            .filter(|b| b.slot.end() != e.after.slot.end())
            .map(|b| format_utc(b.slot.end()));
        Self {
            seq: e.seq,
            at: format_utc(e.at),
            actor: e.actor.clone(),
            role: serde_json::to_value(e.role)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
            action: serde_json::to_value(e.action)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
            booking: e.booking.0,
            status_before: e.before.as_ref().map(|b| name(&b.status)),
            status_after: name(&e.after.status),
            end_before,
            start: format_utc(e.after.slot.start()),
            end: format_utc(e.after.slot.end()),
            notice: match &e.after.status {
                Status::Preempted { notice, .. } => Some(notice.clone()),
                _ => None,
            },
            reason: match &e.after.status {
                Status::Declined { reason, .. } => Some(reason.clone()),
                _ => None,
            },
        }
    }
}

/// `GET /bookings/{id}/audit`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditLog {
    /// The booking.
    pub booking: u64,
    /// Its events, oldest first.
    #[serde(default)]
    pub events: Vec<AuditView>,
}

/// `GET /me`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Me {
    /// Account name.
    pub user: String,
    /// user, approver or admin.
    pub role: String,
    /// IANA zone for display, when set (`token add --tz`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
}

/// `GET /current?resource=R`: the live bookings at `now` on `R`, its
/// ancestors and its descendants (what `emulate up` asks before starting).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CurrentBookings {
    /// The resource asked about.
    pub resource: String,
    /// The service's now, UTC.
    pub now: String,
    /// Live bookings covering `now` (held or confirmed).
    #[serde(default)]
    pub bookings: Vec<BookingView>,
}

/// `GET /bookings`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BookingList {
    /// The bookings.
    #[serde(default)]
    pub bookings: Vec<BookingView>,
}

/// `GET /free-busy?resource=…&from=…&to=…&min_length=PT4H`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FreeBusyQuery {
    /// Resource id.
    pub resource: String,
    /// Window start, RFC 3339.
    pub from: String,
    /// Window end, RFC 3339.
    pub to: String,
    /// Shortest free interval wanted, ISO 8601 (`PT4H`) or friendly (`4h`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_length: Option<String>,
}

impl FreeBusyQuery {
    /// Resource, window and minimum length, or a 400 body.
    pub fn validate(&self) -> Result<(ResourceId, Slot, SignedDuration), ErrorBody> {
        let resource = ResourceId::parse(&self.resource).map_err(|e| ErrorBody::from(&e))?;
        let from = parse_instant(&self.from, "from").map_err(|e| ErrorBody::from(&e))?;
        let to = parse_instant(&self.to, "to").map_err(|e| ErrorBody::from(&e))?;
        let window = Slot::new(from, to).map_err(|e| ErrorBody::from(&e))?;
        let min = match &self.min_length {
            None => SignedDuration::from_nanos(1),
            Some(s) => match s.parse::<SignedDuration>() {
                Ok(d) if d > SignedDuration::ZERO => d,
                _ => {
                    return Err(ErrorBody::bad_request(
                        "invalid_duration",
                        format!("min_length: {s:?} is not a positive duration (e.g. PT4H or 4h)"),
                    ));
                }
            },
        };
        Ok((resource, window, min))
    }
}

/// A UTC interval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotView {
    /// Start, UTC RFC 3339.
    pub start: String,
    /// End, UTC RFC 3339.
    pub end: String,
}

impl From<&Slot> for SlotView {
    fn from(s: &Slot) -> Self {
        Self {
            start: format_utc(s.start()),
            end: format_utc(s.end()),
        }
    }
}

/// A busy interval and what makes it busy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BusyView {
    /// Start, UTC.
    pub start: String,
    /// End, UTC.
    pub end: String,
    /// The booking.
    pub booking: u64,
    /// Its resource (the one asked for, an ancestor or a descendant).
    pub resource: String,
}

/// The free/busy answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FreeBusy {
    /// Resource id.
    pub resource: String,
    /// Window start, UTC.
    pub from: String,
    /// Window end, UTC.
    pub to: String,
    /// Live bookings in the window on the resource, its ancestors and
    /// descendants.
    #[serde(default)]
    pub busy: Vec<BusyView>,
    /// Free intervals at least `min_length` long.
    #[serde(default)]
    pub free: Vec<SlotView>,
}

impl FreeBusy {
    /// Answers `query` from `ledger` at `now`.
    pub fn answer(
        ledger: &Ledger,
        query: &FreeBusyQuery,
        now: Timestamp,
    ) -> Result<Self, ErrorBody> {
        let (resource, window, min) = query.validate()?;
        let free = ledger
            .free_slots(&resource, &window, min, now)
            .map_err(|e| ErrorBody::from(&e))?;
        Ok(Self::new(
            &resource,
            &window,
            ledger.busy(&resource, &window, now),
            &free,
        ))
    }

    /// The answer for `resource` over `window`: the live bookings that make it `busy` and the
    /// `free` intervals.
    pub fn new<'a>(
        resource: &ResourceId,
        window: &Slot,
        busy: impl IntoIterator<Item = &'a Booking>,
        free: &[Slot],
    ) -> Self {
        Self {
            resource: resource.to_string(),
            from: format_utc(window.start()),
            to: format_utc(window.end()),
            busy: busy
                .into_iter()
                .map(|b| BusyView {
                    start: format_utc(b.slot.start()),
                    end: format_utc(b.slot.end()),
                    booking: b.id.0,
                    resource: b.resource.to_string(),
                })
                .collect(),
            free: free.iter().map(SlotView::from).collect(),
        }
    }
}

/// Every error response: a code, a message and the reasons (policy
/// refusals list one per rule broken).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// Stable code (`invalid_time`, `conflict`, `policy`, ...).
    pub code: String,
    /// Human message.
    pub message: String,
    /// Details.
    #[serde(default)]
    pub reasons: Vec<Note>,
}

impl ErrorBody {
    fn bad_request(code: &str, message: String) -> Self {
        Self {
            code: code.into(),
            message,
            reasons: Vec::new(),
        }
    }

    /// The HTTP status for this body.
    pub fn status(&self) -> u16 {
        match self.code.as_str() {
            "invalid_time"
            | "invalid_duration"
            | "invalid_resource"
            | "bad_idempotency_key"
            | "invalid_body" => 400,
            "not_owner" | "not_admin" | "not_approver" | "self_approval" | "forbidden" => 403,
            "unknown_resource" | "unknown_booking" => 404,
            "conflict"
            | "extend_conflict"
            | "idempotency_in_flight"
            | "invalid_transition"
            | "hold_expired"
            | "awaiting_approval"
            | "not_pending" => 409,
            _ => 422,
        }
    }

    /// The body for a policy decision that is not `Allow`; `None` for
    /// `Allow`. `NeedsApproval` is not an error (202) but is described the
    /// same way.
    pub fn from_decision(d: &Decision) -> Option<Self> {
        match d {
            Decision::Allow { .. } => None,
            Decision::Refuse { reasons } => Some(Self {
                code: "policy".into(),
                message: format!(
                    "refused by policy: {}",
                    reasons
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
                reasons: reasons.iter().map(Note::from).collect(),
            }),
            Decision::NeedsApproval { reason, .. } => Some(Self {
                code: "needs_approval".into(),
                message: format!("needs approval: {reason}"),
                reasons: vec![Note::from(reason)],
            }),
        }
    }
}

impl From<&TimeError> for ErrorBody {
    fn from(e: &TimeError) -> Self {
        Self::bad_request("invalid_time", e.to_string())
    }
}

impl From<&InventoryError> for ErrorBody {
    fn from(e: &InventoryError) -> Self {
        Self::bad_request("invalid_resource", e.to_string())
    }
}

impl From<&IdempotencyError> for ErrorBody {
    fn from(e: &IdempotencyError) -> Self {
        let code = match e {
            IdempotencyError::BadKey => "bad_idempotency_key",
            IdempotencyError::Mismatch { .. } => "idempotency_mismatch",
            IdempotencyError::InFlight | IdempotencyError::NotStarted => "idempotency_in_flight",
        };
        Self::bad_request(code, e.to_string())
    }
}

impl From<&LedgerError> for ErrorBody {
    fn from(e: &LedgerError) -> Self {
        let code = match e {
            LedgerError::UnknownResource(_) => "unknown_resource",
            LedgerError::UnknownBooking(_) => "unknown_booking",
            LedgerError::Conflict { .. } => "conflict",
            LedgerError::HoldInPast(_) => "invalid_time",
            LedgerError::HoldExpired(_) => "hold_expired",
            LedgerError::NotOwner { .. } => "not_owner",
            LedgerError::NotAdmin(_) => "not_admin",
            LedgerError::NoticeRequired => "notice_required",
            LedgerError::InvalidTransition { .. } => "invalid_transition",
            LedgerError::NotLonger { .. } => "not_longer",
            LedgerError::ExtendConflict { .. } => "extend_conflict",
        };
        Self::bad_request(code, e.to_string())
    }
}

/// The `hold_until` of a new hold: `now + ttl` (the service's setting,
/// e.g. 10 minutes as GENI's Allocate, 15 as OSCARS).
pub fn hold_until(now: Timestamp, ttl: SignedDuration) -> Timestamp {
    crate::time::sat_add(now, ttl)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::booking::{Actor, BookingId, NewBooking};
    use crate::policy::{Policy, Request, UserContext};
    use crate::resource::tests::datatag;

    #[test]
    fn create_booking_refuses_naive_times_with_a_400() {
        let c: CreateBooking = serde_json::from_str(
            r#"{"resource":"cern/starlight-lambda","start":"2026-05-05T08:00:00","end":"2026-05-05T10:00:00Z"}"#,
        )
        .unwrap();
        assert!(!c.hold && c.note.is_none());
        let e = c.validate().unwrap_err();
        assert_eq!((e.code.as_str(), e.status()), ("invalid_time", 400));
        assert!(
            e.message.starts_with("start: ") && e.message.contains("no UTC offset"),
            "{}",
            e.message
        );
        let bad = CreateBooking {
            resource: "CERN".into(),
            ..c.clone()
        };
        assert_eq!(bad.validate().unwrap_err().code, "invalid_resource");
        let nul = CreateBooking {
            start: "2026-05-05T08:00:00Z".into(),
            note: Some("a\0b".into()),
            ..c.clone()
        };
        let e = nul.validate().unwrap_err();
        assert_eq!((e.code.as_str(), e.status()), ("invalid_body", 400));
        let ok = CreateBooking {
            start: "2026-05-05T10:00:00+02:00".into(),
            ..c
        };
        let (r, s) = ok.validate().unwrap();
        assert_eq!(r.as_str(), "cern/starlight-lambda");
        assert_eq!(format_utc(s.start()), "2026-05-05T08:00:00Z");
    }

    #[test]
    fn notes_and_notices_are_bounded_in_characters() {
        let c = |note: String| CreateBooking {
            resource: "cern".into(),
            start: "2026-05-05T08:00:00Z".into(),
            end: "2026-05-05T10:00:00Z".into(),
            hold: false,
            event: false,
            note: Some(note),
        };
        // Characters, not bytes: 4096 two-byte characters are fine.
        assert!(c("é".repeat(CreateBooking::NOTE_MAX)).validate().is_ok());
        let e = c("x".repeat(CreateBooking::NOTE_MAX + 1))
            .validate()
            .unwrap_err();
        assert_eq!((e.code.as_str(), e.status()), ("note_too_long", 422));
        assert_eq!(e.message, "note: 4097 characters; at most 4096 are allowed");
        let p = |notice: String| PreemptBooking { notice };
        assert!(
            p("z".repeat(PreemptBooking::NOTICE_MAX))
                .check_length()
                .is_ok()
        );
        let e = p(" ".repeat(PreemptBooking::NOTICE_MAX + 1))
            .check_length()
            .unwrap_err();
        assert_eq!((e.code.as_str(), e.status()), ("notice_too_long", 422));
        assert!(e.message.starts_with("notice: "), "{}", e.message);
    }

    #[test]
    fn policy_refusal_becomes_a_422_with_every_reason() {
        let now: Timestamp = "2026-05-04T00:00:00Z".parse().unwrap();
        let req = Request {
            resource: ResourceId::parse("cern/host-1").unwrap(),
            slot: Slot::parse("2026-05-04T01:00:00Z", "2026-05-04T10:00:00Z").unwrap(),
            event: false,
        };
        let user = UserContext {
            user: "alice".into(),
            role: crate::booking::Role::User,
            zone: None,
            override_policy: false,
        };
        let d = Policy::default().check(&req, &user, &datatag(), &[], now);
        let e = ErrorBody::from_decision(&d).unwrap();
        assert_eq!(e.status(), 422);
        let codes: Vec<_> = e.reasons.iter().map(|r| r.code.as_str()).collect();
        assert_eq!(codes, ["max_contiguous", "maintenance"]);
        assert!(ErrorBody::from_decision(&Decision::Allow { warnings: vec![] }).is_none());
    }

    #[test]
    fn conflict_is_409_naming_the_booking() {
        let mut l = Ledger::new(datatag());
        let now: Timestamp = "2026-05-04T00:00:00Z".parse().unwrap();
        let slot = Slot::parse("2026-05-04T08:00:00Z", "2026-05-04T10:00:00Z").unwrap();
        let mk = |owner: &str, res: &str| NewBooking {
            resource: ResourceId::parse(res).unwrap(),
            owner: owner.into(),
            slot,
            hold_until: None,
            note: String::new(),
        };
        l.try_book(
            mk("alice", "cern/starlight-lambda/1g-a"),
            &Actor::user("alice"),
            now,
        )
        .unwrap();
        let e = l
            .try_book(mk("bob", "cern/starlight-lambda"), &Actor::user("bob"), now)
            .unwrap_err();
        let body = ErrorBody::from(&e);
        assert_eq!((body.code.as_str(), body.status()), ("conflict", 409));
        assert!(
            body.message
                .contains("booking 1 (on cern/starlight-lambda/1g-a)"),
            "{}",
            body.message
        );
    }

    #[test]
    fn booking_view_shows_effective_utc_and_local_times() {
        let mut l = Ledger::new(datatag());
        let now: Timestamp = "2026-03-27T00:00:00Z".parse().unwrap();
        let id = l
            .try_book(
                NewBooking {
                    resource: ResourceId::parse("cern").unwrap(),
                    owner: "alice".into(),
                    slot: Slot::parse("2026-03-28T23:00:00Z", "2026-03-29T03:00:00Z").unwrap(),
                    hold_until: Some(now + SignedDuration::from_mins(10)),
                    note: "demo".into(),
                },
                &Actor::user("alice"),
                now,
            )
            .unwrap();
        let v = BookingView::new(l.get(id).unwrap(), now, Some("America/Chicago"), &[]);
        assert_eq!(v.status, Phase::Held);
        assert_eq!(v.hold_until.as_deref(), Some("2026-03-27T00:10:00Z"));
        assert_eq!(v.start, "2026-03-28T23:00:00Z");
        let local = v.local.unwrap();
        assert_eq!(local.start, "2026-03-28 18:00:00 CDT (-05:00)");
        let json =
            serde_json::to_value(BookingView::new(l.get(id).unwrap(), now, None, &[])).unwrap();
        assert_eq!(json["status"], "held");
        assert!(json.get("local").is_none());
    }

    /// Alice books `resource` (confirmed, no note) from 2026-05-05 08:00 UTC to `end`, at `now`.
    fn alice_books(l: &mut Ledger, resource: &str, end: &str, now: Timestamp) -> BookingId {
        let booking = NewBooking {
            resource: ResourceId::parse(resource).unwrap(),
            owner: "alice".into(),
            slot: Slot::parse("2026-05-05T08:00:00Z", end).unwrap(),
            hold_until: None,
            note: String::new(),
        };
        l.try_book(booking, &Actor::user("alice"), now).unwrap()
    }

    #[test]
    fn audit_view_shows_who_what_and_the_moved_end() {
        let mut l = Ledger::new(datatag());
        let now: Timestamp = "2026-05-04T00:00:00Z".parse().unwrap();
        let id = alice_books(&mut l, "cern/starlight-lambda", "2026-05-05T10:00:00Z", now);
        let end: Timestamp = "2026-05-05T11:00:00Z".parse().unwrap();
        l.extend(id, end, &Actor::user("alice"), now).unwrap();
        l.preempt(id, &Actor::admin("root"), "fibre cut", now)
            .unwrap();
        let v: Vec<AuditView> = l.audit().iter().map(AuditView::new).collect();
        assert_eq!(
            v.iter()
                .map(|e| (e.action.as_str(), e.actor.as_str(), e.role.as_str()))
                .collect::<Vec<_>>(),
            [
                ("book", "alice", "user"),
                ("extend", "alice", "user"),
                ("preempt", "root", "admin")
            ]
        );
        assert_eq!(v[0].status_before, None);
        assert_eq!(v[0].status_after, "confirmed");
        assert_eq!(v[1].end_before.as_deref(), Some("2026-05-05T10:00:00Z"));
        assert_eq!(v[1].end, "2026-05-05T11:00:00Z");
        assert_eq!(v[2].end_before, None);
        assert_eq!(
            (v[2].status_after.as_str(), v[2].notice.as_deref()),
            ("preempted", Some("fibre cut"))
        );
        let booking = BookingView::new(l.get(id).unwrap(), now, None, &[]);
        assert_eq!(
            (booking.preempted_by.as_deref(), booking.notice.as_deref()),
            (Some("root"), Some("fibre cut"))
        );
    }

    #[test]
    fn a_decline_reason_is_trimmed_required_and_bounded() {
        let d = |r: &str| DeclineBooking { reason: r.into() };
        assert_eq!(
            d("  kept for the LSR run \n").reason().unwrap(),
            "kept for the LSR run"
        );
        assert_eq!(
            d("line one\nline two\t.").reason().unwrap(),
            "line one\nline two\t."
        );
        for blank in ["", "   ", "\n\t "] {
            let e = d(blank).reason().unwrap_err();
            assert_eq!(
                (e.code.as_str(), e.status()),
                ("reason_required", 422),
                "{blank:?}"
            );
        }
        let max = "é".repeat(DeclineBooking::REASON_MAX);
        assert_eq!(d(&format!(" {max} ")).reason().unwrap(), max);
        let e = d(&format!("{max}x")).reason().unwrap_err();
        assert_eq!((e.code.as_str(), e.status()), ("reason_too_long", 422));
        let e = d("bell\u{7}").reason().unwrap_err();
        assert_eq!((e.code.as_str(), e.status()), ("invalid_body", 400));
    }

    #[test]
    fn a_declined_booking_shows_who_and_why() {
        let mut l = Ledger::new(datatag());
        let now: Timestamp = "2026-05-04T00:00:00Z".parse().unwrap();
        let id = alice_books(&mut l, "cern", "2026-05-05T10:00:00Z", now);
        let mut b = l.get(id).unwrap().clone();
        b.status = Status::Declined {
            at: now,
            by: "carol".into(),
            reason: "kept for the LSR run".into(),
        };
        assert!(!b.is_live(now));
        assert_eq!(b.effective_slot(), None);
        let v = BookingView::new(&b, now, None, &[]);
        assert_eq!(v.status, Phase::Cancelled);
        assert_eq!(
            (
                v.declined_by.as_deref(),
                v.decline_reason.as_deref(),
                v.notice.as_deref()
            ),
            (Some("carol"), Some("kept for the LSR run"), None)
        );
    }

    #[test]
    fn free_busy_answer() {
        let mut l = Ledger::new(datatag());
        let now: Timestamp = "2026-05-04T00:00:00Z".parse().unwrap();
        alice_books(
            &mut l,
            "cern/starlight-lambda/1g-a",
            "2026-05-05T16:00:00Z",
            now,
        );
        let q = FreeBusyQuery {
            resource: "cern/starlight-lambda".into(),
            from: "2026-05-05T00:00:00Z".into(),
            to: "2026-05-06T00:00:00Z".into(),
            min_length: Some("PT4H".into()),
        };
        let fb = FreeBusy::answer(&l, &q, now).unwrap();
        assert_eq!(fb.busy.len(), 1);
        assert_eq!(fb.busy[0].resource, "cern/starlight-lambda/1g-a");
        let free: Vec<_> = fb
            .free
            .iter()
            .map(|s| (s.start.as_str(), s.end.as_str()))
            .collect();
        assert_eq!(
            free,
            [
                ("2026-05-05T00:00:00Z", "2026-05-05T08:00:00Z"),
                ("2026-05-05T16:00:00Z", "2026-05-06T00:00:00Z")
            ]
        );
        let q9 = FreeBusyQuery {
            min_length: Some("9h".into()),
            ..q.clone()
        };
        assert!(FreeBusy::answer(&l, &q9, now).unwrap().free.is_empty());
        let bad = FreeBusyQuery {
            min_length: Some("-PT1H".into()),
            ..q.clone()
        };
        assert_eq!(
            FreeBusy::answer(&l, &bad, now).unwrap_err().code,
            "invalid_duration"
        );
        let unknown = FreeBusyQuery {
            resource: "mars".into(),
            ..q
        };
        assert_eq!(
            FreeBusy::answer(&l, &unknown, now).unwrap_err().status(),
            404
        );
    }
}

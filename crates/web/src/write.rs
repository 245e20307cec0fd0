//! The parts of a write that both stores share and that need no database: the checks before the
//! transaction (a valid body, a known resource, policy against the owner's bookings nearby) and the
//! status of a new booking, as [`longhaul_testbed::decide`] decides them for a [`BookRequest`], the
//! window of bookings policy looks at, and the replies after the transaction (views, conflicts,
//! unknown bookings).

use jiff::Timestamp;
use longhaul_testbed::api::{BookingView, ErrorBody, Note};
use longhaul_testbed::booking::{Approval, Booking, BookingId, LedgerError, Status};
use longhaul_testbed::decide;
use longhaul_testbed::idempotency::IdempotencyError;
use longhaul_testbed::policy::Request;
use longhaul_testbed::resource::ResourceId;
use longhaul_testbed::time::Slot;

use crate::reply::{BookRequest, Reply};

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

/// The checks before any database work ([`decide::validate_new`]).
pub(crate) fn validate(req: &BookRequest<'_>) -> Result<(ResourceId, Slot), ErrorBody> {
    decide::validate_new(req.create, req.inventory)
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

/// Policy at booking time for `req` on `resource` during `slot`, against
/// the owner's `existing` bookings nearby ([`decide::check_new`]):
/// `Ok((warnings, needs_approval))` or the refusal.
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
    decide::check_new(
        req.policy,
        req.inventory,
        &request,
        req.actor,
        req.zone.as_deref(),
        existing,
        req.now,
    )
}

/// The new booking's status ([`decide::new_status`]).
pub(crate) fn new_status(req: &BookRequest<'_>, slot: &Slot, needs_approval: bool) -> Status {
    decide::new_status(req.create.hold, slot, needs_approval, req.now, req.hold_ttl)
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
    approval: Option<Approval>,
    now: Timestamp,
    warnings: Vec<Note>,
) -> BookingView {
    let mut v = view(b, now, warnings);
    v.approval = approval;
    v
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

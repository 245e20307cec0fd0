//! The parts of a write that both stores share and that need no database: the checks before the
//! transaction (a valid body, a known resource, policy against the owner's bookings nearby), the
//! status of a new booking, and the replies after it (views, conflicts, unknown bookings). The
//! decisions on an existing booking are [`longhaul_testbed::decide`]'s.

use jiff::Timestamp;
use longhaul_testbed::api::{BookingView, ErrorBody, Note};
use longhaul_testbed::booking::{Approval, Booking, BookingId, LedgerError, Status};
use longhaul_testbed::idempotency::IdempotencyError;
use longhaul_testbed::policy::{Decision, Request, UserContext};
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

//! The service's booking decisions, pure (no I/O, no clock: `now` is passed in): whether a new
//! booking passes (its body, its resource, policy) and the status it starts in; what a change of a
//! stored booking (confirm, release, cancel, extend, preempt, approve, decline) makes of it, or the
//! refusal the API returns; and the free gaps between busy intervals. The database stores run
//! these inside their writing transactions and keep the last word on overlaps (docs/testbed.md §5).
//!
//! The in-memory [`crate::booking::Ledger`] states the same lifecycle rules on its own, on purpose:
//! it is the oracle the stores are checked against, so it must not call what it checks.

use jiff::{SignedDuration, Timestamp};

use crate::api::{CreateBooking, DeclineBooking, ErrorBody, Note, PreemptBooking};
use crate::booking::{Action, Actor, Approval, Booking, LedgerError, Phase, Role, Status};
use crate::policy::{Decision, Policy, Reason, Request, UserContext};
use crate::resource::{Inventory, ResourceId};
use crate::time::Slot;

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

/// A change of a stored booking, decided from the booking before.
#[derive(Debug, Clone)]
pub struct Change {
    /// The booking after (status, slot; the version is bumped by the
    /// store).
    pub after: Booking,
    /// Its approval state after.
    pub approval: Option<Approval>,
    /// What the audit log records.
    pub action: Action,
    /// Warnings for the response.
    pub warnings: Vec<Note>,
}

/// Decides a change from (the booking, its approval state, the owner's
/// bookings near it); `Err` is the refusal.
pub type Decide<'a> = dyn Decider + 'a;

/// A decision function, as the `decide_*` functions return them (and [`Decide`] holds one).
pub trait Decider:
    Fn(&Booking, Option<Approval>, &[Booking]) -> Result<Change, ErrorBody> + Send + Sync
{
}

impl<F> Decider for F where
    F: Fn(&Booking, Option<Approval>, &[Booking]) -> Result<Change, ErrorBody> + Send + Sync
{
}

fn unchanged(before: &Booking, approval: Option<Approval>, action: Action) -> Change {
    Change {
        after: before.clone(),
        approval,
        action,
        warnings: Vec::new(),
    }
}

/// The checks of a new booking before any database work: a valid body and
/// a known resource.
pub fn validate_new(
    create: &CreateBooking,
    inventory: &Inventory,
) -> Result<(ResourceId, Slot), ErrorBody> {
    let (resource, slot) = create.validate()?;
    if inventory.get(&resource).is_none() {
        return Err(ErrorBody::from(&LedgerError::UnknownResource(resource)));
    }
    Ok((resource, slot))
}

/// Policy at booking time for `actor` (display `zone`) asking for
/// `request`, against their `existing` bookings nearby:
/// `Ok((warnings, needs_approval))` or the refusal. A booking that needs
/// approval (an event beyond the horizon) is made as a pending hold until
/// its start ([`new_status`]).
pub fn check_new(
    policy: &Policy,
    inventory: &Inventory,
    request: &Request,
    actor: &Actor,
    zone: Option<&str>,
    existing: &[Booking],
    now: Timestamp,
) -> Result<(Vec<Note>, bool), ErrorBody> {
    let user = UserContext {
        user: actor.user.clone(),
        role: actor.role,
        zone: zone.map(str::to_owned),
        override_policy: false,
    };
    let decision = policy.check(request, &user, inventory, existing, now);
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

/// A new booking's status: held until its start when it needs approval,
/// held for `hold_ttl` from `now` when `hold` was asked for, or confirmed.
pub fn new_status(
    hold: bool,
    slot: &Slot,
    needs_approval: bool,
    now: Timestamp,
    hold_ttl: SignedDuration,
) -> Status {
    if needs_approval {
        Status::Held {
            until: slot.start(),
        }
    } else if hold {
        Status::Held {
            until: crate::api::hold_until(now, hold_ttl),
        }
    } else {
        Status::Confirmed
    }
}

/// Only a booking's owner, or an admin, may change it.
fn check_owner(b: &Booking, actor: &Actor) -> Result<(), ErrorBody> {
    if b.owner != actor.user && actor.role != Role::Admin {
        return Err(ErrorBody::from(&LedgerError::NotOwner {
            booking: b.id,
            owner: b.owner.clone(),
        }));
    }
    Ok(())
}

/// Ownership and lifecycle of `op` on `b` by `actor` at `now`, as
/// [`crate::booking::Ledger`] decides them: the new status, or the refusal.
pub fn transition(op: Op, b: &Booking, actor: &Actor, now: Timestamp) -> Result<Status, ErrorBody> {
    let refuse = |e: LedgerError| Err(ErrorBody::from(&e));
    check_owner(b, actor)?;
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

/// Confirm, release or cancel, as [`transition`] decides; a booking waiting
/// for approval cannot be confirmed by its owner.
pub fn decide_op(op: Op, actor: &Actor, now: Timestamp) -> impl Decider + '_ {
    move |b, approval, _| {
        let status = transition(op, b, actor, now)?;
        if op == Op::Confirm && approval == Some(Approval::Pending) {
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
/// end, and the policy's rules for the longer slot, with the actor's
/// display `zone` (DST warnings). The database decides whether it collides
/// with the next booking.
pub fn decide_extend<'a>(
    new_end: Timestamp,
    actor: &'a Actor,
    zone: Option<&'a str>,
    policy: &'a Policy,
    inventory: &'a Inventory,
    now: Timestamp,
) -> impl Decider + 'a {
    move |b, approval, mine| {
        let refuse = |e: LedgerError| Err(ErrorBody::from(&e));
        check_owner(b, actor)?;
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
            zone: zone.map(str::to_owned),
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

/// Who and why of a preemption, checked before which booking (as the
/// ledger does): an admin (403 `not_admin`), a notice (422
/// `notice_required`) within [`PreemptBooking::NOTICE_MAX`] (422
/// `notice_too_long`).
pub fn check_preempt(notice: &str, actor: &Actor) -> Result<(), ErrorBody> {
    if actor.role != Role::Admin {
        return Err(ErrorBody::from(&LedgerError::NotAdmin("preempt a booking")));
    }
    if notice.trim().is_empty() {
        return Err(ErrorBody::from(&LedgerError::NoticeRequired));
    }
    PreemptBooking {
        notice: notice.to_owned(),
    }
    .check_length()
}

/// An admin takes a live booking away, with a notice for its owner
/// ([`check_preempt`] first).
pub fn decide_preempt<'a>(notice: &'a str, actor: &'a Actor, now: Timestamp) -> impl Decider + 'a {
    move |b, approval, _| {
        check_preempt(notice, actor)?;
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
pub fn decide_approve(actor: &Actor, now: Timestamp, allow_self: bool) -> impl Decider + '_ {
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
        let mut c = unchanged(b, Some(Approval::Approved), Action::Approve);
        c.after.status = Status::Confirmed;
        Ok(c)
    }
}

/// Refuses unless `b` is waiting for an approver: approval `pending` and
/// still held (`hold_expired` once its start has passed, `not_pending`
/// otherwise).
fn awaiting_approval(
    b: &Booking,
    approval: Option<Approval>,
    now: Timestamp,
) -> Result<(), ErrorBody> {
    let not_pending = |message: String| ErrorBody {
        code: "not_pending".into(),
        message,
        reasons: Vec::new(),
    };
    if approval != Some(Approval::Pending) {
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

/// Who and why of a decline, checked before which booking, as for a
/// preemption: an approver or admin (403 `not_approver`), then the reason
/// ([`DeclineBooking::reason`]: 422 `reason_required` or
/// `reason_too_long`); the trimmed reason.
pub fn check_decline<'b>(body: &'b DeclineBooking, actor: &Actor) -> Result<&'b str, ErrorBody> {
    if actor.role == Role::User {
        return Err(not_approver("decline"));
    }
    body.reason()
}

/// An approver or admin declines a booking waiting for approval, with a
/// reason for its owner (already checked: trimmed, non-blank, bounded, see
/// [`crate::api::DeclineBooking::reason`]): it ends as cancelled, stops
/// blocking its slot, and shows who declined it and why. The refusals are
/// approve's: `not_approver`, `not_pending`, `hold_expired` once its start
/// has passed.
pub fn decide_decline<'a>(reason: &'a str, actor: &'a Actor, now: Timestamp) -> impl Decider + 'a {
    move |b, approval, _| {
        if actor.role == Role::User {
            return Err(not_approver("decline"));
        }
        awaiting_approval(b, approval, now)?;
        let mut c = unchanged(b, Some(Approval::Declined), Action::Decline);
        c.after.status = Status::Declined {
            at: now,
            by: actor.user.clone(),
            reason: reason.to_owned(),
        };
        Ok(c)
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
    use crate::booking::BookingId;
    use crate::resource::ResourceId;

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
            let e = decide_decline("no", &who, now)(&b, Some(Approval::Pending), &[]).unwrap_err();
            assert_eq!((e.code.as_str(), e.status()), ("not_approver", 403));
        }
        let carol = Actor {
            user: "carol".into(),
            role: Role::Approver,
        };
        for who in [carol, Actor::admin("root")] {
            let c =
                decide_decline("kept for the LSR run", &who, now)(&b, Some(Approval::Pending), &[])
                    .unwrap();
            assert_eq!(c.action, Action::Decline);
            assert_eq!(c.approval, Some(Approval::Declined));
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
        let e = decide_approve(&carol, now, false)(&b, Some(Approval::Pending), &[]).unwrap_err();
        assert_eq!((e.code.as_str(), e.status()), ("self_approval", 403));
        b.owner = "root".into();
        let root = Actor::admin("root");
        let e = decide_approve(&root, now, false)(&b, Some(Approval::Pending), &[]).unwrap_err();
        assert_eq!(e.code, "self_approval");
        // Another approver, or the policy switch.
        let c = decide_approve(&carol, now, false)(&b, Some(Approval::Pending), &[]).unwrap();
        assert_eq!(c.after.status, Status::Confirmed);
        let c = decide_approve(&root, now, true)(&b, Some(Approval::Pending), &[]).unwrap();
        assert_eq!(c.approval, Some(Approval::Approved));
    }

    #[test]
    fn decline_needs_a_pending_unexpired_booking() {
        let now = t(0);
        let root = Actor::admin("root");
        let b = pending(now);
        let decline = decide_decline("no", &root, now);
        // Not waiting for approval: an ordinary hold, an approved or a declined booking.
        for approval in [None, Some(Approval::Approved), Some(Approval::Declined)] {
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
        let e = decline(&cancelled, Some(Approval::Pending), &[]).unwrap_err();
        assert_eq!(e.code, "not_pending");
        assert!(e.message.contains("cancelled"), "{}", e.message);
        // Its start (the hold's end) has passed.
        let late = t(24 * 60);
        let e = decide_decline("no", &root, late)(&b, Some(Approval::Pending), &[]).unwrap_err();
        assert_eq!(e.code, "hold_expired");
        // Approve refuses a declined booking the same way.
        let e = decide_approve(&root, now, false)(&b, Some(Approval::Declined), &[]).unwrap_err();
        assert_eq!(e.code, "not_pending");
    }
}

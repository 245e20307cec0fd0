//! Who may operate a host (issue 20): power its BMC now, read its console next. Allowed to the
//! holder of an active reservation covering the host (a confirmed booking of the host or of an
//! ancestor, such as its site, whose slot holds `now`), and to an admin who gives a reason; every
//! attempt, allowed or refused, goes to the operations log with who, what, when and the BMC's
//! answer. Pure: the service passes the bookings and the time. The request and log bodies of
//! `/api/v1/power` and `/api/v1/operations` are here too.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::booking::{Actor, Booking, BookingId, Phase, Role};
use crate::resource::ResourceId;
use crate::time::format_utc;

/// The longest reason an admin may give.
pub const MAX_REASON: usize = 1000;

/// Why an operation is allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grant {
    /// The actor holds this active booking, which covers the host.
    Holder(BookingId),
    /// An admin, with this reason.
    Admin(String),
}

impl Grant {
    /// For the log: `booking 12` or `admin: REASON`.
    pub fn describe(&self) -> String {
        match self {
            Self::Holder(id) => format!("booking {id}"),
            Self::Admin(reason) => format!("admin: {reason}"),
        }
    }
}

/// Why an operation is refused (HTTP 403 with this code and message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// `no_reservation` or `reason_required`.
    pub code: &'static str,
    /// For the user.
    pub message: String,
}

/// Decides whether `actor` may operate `host` at `now`. `bookings`: the bookings on the host, its
/// ancestors and descendants around `now` (any owner, any state; only the actor's active ones on
/// the host or an ancestor count). `reason`: an admin's, which admins who hold no booking must
/// give.
pub fn authorize(
    actor: &Actor,
    host: &ResourceId,
    bookings: &[Booking],
    reason: Option<&str>,
    now: Timestamp,
) -> Result<Grant, Refusal> {
    let mine = bookings.iter().filter(|b| b.owner == actor.user);
    if let Some(b) = mine
        .clone()
        .find(|b| b.phase(now) == Phase::Active && b.resource.is_ancestor_or_self_of(host))
    {
        return Ok(Grant::Holder(b.id));
    }
    let reason = reason.map(str::trim).filter(|r| !r.is_empty());
    if actor.role == Role::Admin {
        return match reason {
            Some(r) if r.chars().count() <= MAX_REASON => Ok(Grant::Admin(r.to_owned())),
            Some(_) => Err(Refusal {
                code: "reason_required",
                message: format!("the reason is longer than {MAX_REASON} characters"),
            }),
            None => Err(Refusal {
                code: "reason_required",
                message: format!(
                    "{} holds no active reservation covering {host}: an admin operating it must give \
                     a reason (it goes to the operations log)",
                    actor.user
                ),
            }),
        };
    }
    let next = mine
        .filter(|b| b.phase(now) == Phase::Upcoming && b.resource.is_ancestor_or_self_of(host))
        .min_by_key(|b| b.slot.start());
    let hint = next.map_or_else(String::new, |b| {
        format!(
            " (your booking {} starts at {})",
            b.id,
            format_utc(b.slot.start())
        )
    });
    Err(Refusal {
        code: "no_reservation",
        message: format!(
            "{} holds no active reservation covering {host}: power and console are for the holder \
             of a current booking of the host or its site{hint}",
            actor.user
        ),
    })
}

/// `POST /api/v1/power`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PowerRequest {
    /// The host's resource id.
    pub host: String,
    /// status, on, off, cycle or reset.
    pub action: String,
    /// Why (required of an admin without a booking; kept in the log).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The outcome of a power request, as read back from the BMC.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PowerReply {
    /// The host.
    pub host: String,
    /// What was asked.
    pub action: String,
    /// The power state the BMC reports at the end: on, off, poweringon, poweringoff.
    pub state: String,
    /// The endpoint's protocol: redfish, ipmi or command.
    pub endpoint: String,
    /// The BMC's answers, in order.
    #[serde(default)]
    pub answers: Vec<String>,
    /// How long it took.
    pub millis: u64,
    /// This operation's entry in the operations log.
    pub seq: u64,
}

/// One attempt in the operations log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperationView {
    /// Position in the log.
    pub seq: u64,
    /// When it was asked, UTC RFC 3339.
    pub at: String,
    /// Who.
    pub actor: String,
    /// Their role then.
    pub role: String,
    /// The host.
    pub host: String,
    /// What: `power status`, `power on`, ...
    pub action: String,
    /// The reason given, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Whether it was allowed.
    pub allowed: bool,
    /// Why: `booking 12`, `admin: REASON`, or the refusal.
    pub grounds: String,
    /// The outcome: `ok`, `failed`, `refused`, or `pending` while the BMC works.
    pub result: String,
    /// The state read back, when it succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// The BMC's answers, or the error naming the endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// `GET /api/v1/operations`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperationLog {
    /// Newest first.
    #[serde(default)]
    pub operations: Vec<OperationView>,
}

/// A log entry's time as the API shows it.
pub fn log_time(at: Timestamp) -> String {
    format_utc(at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::booking::Status;
    use crate::time::Slot;
    use jiff::SignedDuration;

    fn booking(
        id: u64,
        owner: &str,
        resource: &str,
        from_h: i64,
        to_h: i64,
        now: Timestamp,
    ) -> Booking {
        Booking {
            id: BookingId(id),
            resource: ResourceId::parse(resource).unwrap(),
            owner: owner.into(),
            slot: Slot::new(
                now + SignedDuration::from_hours(from_h),
                now + SignedDuration::from_hours(to_h),
            )
            .unwrap(),
            status: Status::Confirmed,
            note: String::new(),
            created_at: now,
            version: 1,
        }
    }

    #[test]
    fn the_holder_of_an_active_booking_of_the_host_or_its_site_may_operate_it() {
        let now: Timestamp = "2026-11-29T10:00:00Z".parse().unwrap();
        let host = ResourceId::parse("geneva/pc-1").unwrap();
        let alice = Actor::user("alice");
        let on_host = [booking(1, "alice", "geneva/pc-1", -1, 1, now)];
        assert_eq!(
            authorize(&alice, &host, &on_host, None, now),
            Ok(Grant::Holder(BookingId(1)))
        );
        let on_site = [booking(2, "alice", "geneva", -1, 1, now)];
        assert_eq!(
            authorize(&alice, &host, &on_site, None, now),
            Ok(Grant::Holder(BookingId(2)))
        );
        // Someone else's booking, a booking of a sibling, one that has ended or not started,
        // and a cancelled one give nothing.
        let mut cancelled = booking(7, "alice", "geneva/pc-1", -1, 1, now);
        cancelled.status = Status::Cancelled { at: now };
        let others = [
            booking(3, "bob", "geneva/pc-1", -1, 1, now),
            booking(4, "alice", "geneva/pc-2", -1, 1, now),
            booking(5, "alice", "geneva/pc-1", -3, -1, now),
            booking(6, "alice", "geneva/pc-1", 2, 3, now),
            cancelled,
        ];
        let r = authorize(&alice, &host, &others, None, now).unwrap_err();
        assert_eq!(r.code, "no_reservation");
        assert!(
            r.message
                .ends_with("(your booking 6 starts at 2026-11-29T12:00:00Z)"),
            "{}",
            r.message
        );
    }

    #[test]
    fn an_admin_without_a_booking_must_give_a_reason() {
        let now: Timestamp = "2026-11-29T10:00:00Z".parse().unwrap();
        let host = ResourceId::parse("geneva/pc-1").unwrap();
        let admin = Actor {
            user: "root".into(),
            role: Role::Admin,
        };
        assert_eq!(
            authorize(&admin, &host, &[], None, now).unwrap_err().code,
            "reason_required"
        );
        assert_eq!(
            authorize(&admin, &host, &[], Some("  "), now)
                .unwrap_err()
                .code,
            "reason_required"
        );
        let long = "x".repeat(MAX_REASON + 1);
        assert_eq!(
            authorize(&admin, &host, &[], Some(&long), now)
                .unwrap_err()
                .code,
            "reason_required"
        );
        assert_eq!(
            authorize(&admin, &host, &[], Some(" hung since 09:40 "), now),
            Ok(Grant::Admin("hung since 09:40".into()))
        );
        // A user's reason is no substitute for a booking.
        let r = authorize(&Actor::user("bob"), &host, &[], Some("please"), now).unwrap_err();
        assert_eq!(r.code, "no_reservation");
    }
}

/// One archived console line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsoleLineView {
    /// Position in the archive (the `after` of the next poll).
    pub seq: u64,
    /// When the service read it, UTC RFC 3339.
    pub at: String,
    /// The boot it belongs to (a `Linux version` line starts the next).
    pub boot: u64,
    /// boot, oops or panic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mark: Option<String>,
    /// The text (control characters escaped).
    pub text: String,
}

/// One boot of a host, as its console showed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootView {
    /// Its number (0: lines before the first boot seen).
    pub boot: u64,
    /// Its first line's time.
    pub started: String,
    /// Its last line's time.
    pub last: String,
    /// Lines archived.
    pub lines: u64,
    /// Oopses marked.
    pub oopses: u64,
    /// Panics marked.
    pub panics: u64,
}

/// `GET /api/v1/console`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsoleLog {
    /// The host.
    pub host: String,
    /// Its boots, oldest first.
    #[serde(default)]
    pub boots: Vec<BootView>,
    /// The lines asked for, oldest first.
    #[serde(default)]
    pub lines: Vec<ConsoleLineView>,
    /// The highest line number the archive held when asked (poll with `after` = this).
    pub last_seq: u64,
}

//! Booking-time policy (DataTAG lesson L5: "define policies and enforce them
//! strictly"): every rule is checked when the booking is made, never by a
//! reaper afterwards, and every refusal says why in a typed [`Reason`] with
//! a stable code and a human message. Rules: minimum and maximum contiguous
//! length (8 h by default, the DataTAG limit), no start in the past, a
//! booking horizon (beyond it an *event* booking needs approval, anything
//! else is refused), a weekly quota per user, a minimum gap between one
//! user's bookings of conflicting resources (against stacking), and the
//! resource's state (maintenance refuses, degraded warns). A booking that
//! spans a DST change in the user's or the site's zone is allowed with a
//! warning. An admin may override, and the override is returned as a
//! warning for the audit log.

use std::fmt;

use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

use crate::booking::{Booking, BookingId, Role, Status};
use crate::resource::{Inventory, ResourceId, ResourceState};
use crate::time::{Slot, Transition, dst_warnings, sat_add};

/// The limits. [`Policy::default`] is the DataTAG policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// Longest booking in one piece (8 h).
    pub max_contiguous: SignedDuration,
    /// Shortest booking (15 min).
    pub min_length: SignedDuration,
    /// How far ahead a normal booking may start (90 days).
    pub horizon: SignedDuration,
    /// How far ahead an event booking may start, with approval (365 days).
    pub event_horizon: SignedDuration,
    /// Hours a user may hold per week, Monday 00:00 UTC to Monday (40 h).
    pub weekly_quota: SignedDuration,
    /// Least time between two bookings of one user on conflicting
    /// resources (2 h), so 4 h 30 + 4 h 30 back to back is not a 9 h booking.
    pub min_gap: SignedDuration,
    /// How far in the past a start may be, for clocks and round trips (60 s).
    pub past_grace: SignedDuration,
    /// Whether an approver (or admin) may approve their own booking (false:
    /// approval is a second person's decision; `serve --allow-self-approval`
    /// for a testbed with a single approver).
    pub allow_self_approval: bool,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            max_contiguous: SignedDuration::from_hours(8),
            min_length: SignedDuration::from_mins(15),
            horizon: SignedDuration::from_hours(90 * 24),
            event_horizon: SignedDuration::from_hours(365 * 24),
            weekly_quota: SignedDuration::from_hours(40),
            min_gap: SignedDuration::from_hours(2),
            past_grace: SignedDuration::from_secs(60),
            allow_self_approval: false,
        }
    }
}

/// What is asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The resource.
    pub resource: ResourceId,
    /// The time.
    pub slot: Slot,
    /// A major event (demonstration at a conference): may be booked beyond
    /// the horizon, with approval.
    pub event: bool,
}

/// Who asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserContext {
    /// Account name.
    pub user: String,
    /// Role.
    pub role: Role,
    /// The user's IANA zone, for DST warnings.
    pub zone: Option<String>,
    /// An admin asking to override refusals (audited).
    pub override_policy: bool,
}

/// Why a booking is refused (or needs approval).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "code", rename_all = "snake_case")]
pub enum Reason {
    /// Longer than the contiguous maximum.
    MaxContiguous {
        /// Asked-for length.
        length: SignedDuration,
        /// The limit.
        max: SignedDuration,
    },
    /// Shorter than the minimum.
    MinLength {
        /// Asked-for length.
        length: SignedDuration,
        /// The limit.
        min: SignedDuration,
    },
    /// Starts before now.
    StartInPast {
        /// Asked-for start.
        start: Timestamp,
        /// Now.
        now: Timestamp,
    },
    /// Starts beyond the horizon.
    Horizon {
        /// Asked-for start.
        start: Timestamp,
        /// The last allowed start.
        latest: Timestamp,
    },
    /// Starts beyond even the event horizon.
    EventHorizon {
        /// Asked-for start.
        start: Timestamp,
        /// The last allowed start for events.
        latest: Timestamp,
    },
    /// The week's quota would be exceeded.
    Quota {
        /// Monday 00:00 UTC of the week.
        week: Timestamp,
        /// Already booked that week.
        used: SignedDuration,
        /// This request's part of that week.
        requested: SignedDuration,
        /// The quota.
        quota: SignedDuration,
    },
    /// Too close to another booking of the same user (stacking).
    Stacking {
        /// The other booking.
        other: BookingId,
        /// Its slot.
        slot: Slot,
        /// The required gap.
        min_gap: SignedDuration,
    },
    /// The resource (or an ancestor) is in maintenance.
    Maintenance {
        /// Where and why.
        reason: String,
    },
    /// Not in the inventory.
    UnknownResource {
        /// The id.
        resource: ResourceId,
    },
}

fn hm(d: SignedDuration) -> String {
    let m = d.as_mins();
    if m % 60 == 0 {
        format!("{} h", m / 60)
    } else {
        format!("{} h {} min", m / 60, m % 60)
    }
}

impl Reason {
    /// The stable machine code (`max_contiguous`, `horizon`, ...).
    pub fn code(&self) -> &'static str {
        match self {
            Self::MaxContiguous { .. } => "max_contiguous",
            Self::MinLength { .. } => "min_length",
            Self::StartInPast { .. } => "start_in_past",
            Self::Horizon { .. } => "horizon",
            Self::EventHorizon { .. } => "event_horizon",
            Self::Quota { .. } => "quota",
            Self::Stacking { .. } => "stacking",
            Self::Maintenance { .. } => "maintenance",
            Self::UnknownResource { .. } => "unknown_resource",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::MaxContiguous { length, max } => write!(
                f,
                "{} is longer than the {} allowed in a row; book at most {} (a second booking needs a gap)",
                hm(*length),
                hm(*max),
                hm(*max)
            ),
            Self::MinLength { length, min } => {
                write!(
                    f,
                    "{} is shorter than the minimum of {}",
                    hm(*length),
                    hm(*min)
                )
            }
            Self::StartInPast { start, now } => {
                write!(f, "the start {start} is in the past (now is {now})")
            }
            Self::Horizon { start, latest } => write!(
                f,
                "the start {start} is beyond the booking horizon ({latest}); mark it as an event to ask for approval"
            ),
            Self::EventHorizon { start, latest } => write!(
                f,
                "the start {start} is beyond the horizon even for events ({latest})"
            ),
            Self::Quota {
                week,
                used,
                requested,
                quota,
            } => write!(
                f,
                "the week of {} would have {} booked ({} already + {} asked), over the weekly quota of {}",
                week.strftime("%Y-%m-%d"),
                hm(*used + *requested),
                hm(*used),
                hm(*requested),
                hm(*quota)
            ),
            Self::Stacking {
                other,
                slot,
                min_gap,
            } => write!(
                f,
                "your booking {other} {slot} is less than {} away on a conflicting resource; leave {} between bookings",
                hm(*min_gap),
                hm(*min_gap)
            ),
            Self::Maintenance { reason } => write!(f, "in maintenance: {reason}"),
            Self::UnknownResource { resource } => write!(f, "unknown resource {resource}"),
        }
    }
}

/// Something the user must be told, without refusing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "code", rename_all = "snake_case")]
pub enum Warning {
    /// The resource or part of it is degraded.
    Degraded {
        /// Where and why.
        reason: String,
    },
    /// The slot spans an offset change in the user's or a site's zone.
    DstChange {
        /// The change.
        transition: Transition,
    },
    /// An admin overrode these refusals.
    Overridden {
        /// The refusals.
        reasons: Vec<Reason>,
    },
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Degraded { reason } => write!(f, "degraded: {reason}"),
            Self::DstChange { transition } => {
                write!(f, "daylight saving change inside the booking: {transition}")
            }
            Self::Overridden { reasons } => {
                f.write_str("policy overridden by an admin:")?;
                for r in reasons {
                    write!(f, " [{}] {r}", r.code())?;
                }
                Ok(())
            }
        }
    }
}

/// The verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Decision {
    /// Book it (and show the warnings).
    Allow {
        /// Warnings.
        warnings: Vec<Warning>,
    },
    /// Keep it pending until an approver agrees.
    NeedsApproval {
        /// Why approval is needed.
        reason: Reason,
        /// Warnings.
        warnings: Vec<Warning>,
    },
    /// Refused, with every reason.
    Refuse {
        /// Reasons, in rule order.
        reasons: Vec<Reason>,
    },
}

/// Monday 00:00 UTC of the week holding `t`.
fn week_start(t: Timestamp) -> Timestamp {
    let day = t.as_second().div_euclid(86_400);
    // 1970-01-01 was a Thursday: Monday-based weekday = (day + 3) mod 7.
    let monday = day - (day + 3).rem_euclid(7);
    Timestamp::from_second(monday * 86_400).unwrap_or(t)
}

/// The time a booking counts against its owner's quota.
fn counted(b: &Booking, now: Timestamp) -> Option<Slot> {
    match b.status {
        Status::Held { .. } if !b.is_live(now) => None,
        Status::Preempted { .. } => None,
        _ => b.effective_slot(),
    }
}

impl Policy {
    /// Checks `req` by `user` against the bookings in `existing` (any
    /// status; only those that count are used) at `now`.
    pub fn check(
        &self,
        req: &Request,
        user: &UserContext,
        inventory: &Inventory,
        existing: &[Booking],
        now: Timestamp,
    ) -> Decision {
        let mut reasons = Vec::new();
        let mut warnings = Vec::new();
        let mut approval = None;
        if inventory.get(&req.resource).is_none() {
            return Decision::Refuse {
                reasons: vec![Reason::UnknownResource {
                    resource: req.resource.clone(),
                }],
            };
        }
        let length = req.slot.length();
        if length > self.max_contiguous {
            reasons.push(Reason::MaxContiguous {
                length,
                max: self.max_contiguous,
            });
        }
        if length < self.min_length {
            reasons.push(Reason::MinLength {
                length,
                min: self.min_length,
            });
        }
        if req.slot.start() < sat_add(now, -self.past_grace) {
            reasons.push(Reason::StartInPast {
                start: req.slot.start(),
                now,
            });
        }
        let latest = sat_add(now, self.horizon);
        let event_latest = sat_add(now, self.event_horizon);
        if req.slot.start() > latest {
            if !req.event {
                reasons.push(Reason::Horizon {
                    start: req.slot.start(),
                    latest,
                });
            } else if req.slot.start() > event_latest {
                reasons.push(Reason::EventHorizon {
                    start: req.slot.start(),
                    latest: event_latest,
                });
            } else {
                approval = Some(Reason::Horizon {
                    start: req.slot.start(),
                    latest,
                });
            }
        }
        let mine: Vec<(&Booking, Slot)> = existing
            .iter()
            .filter(|b| b.owner == user.user)
            .filter_map(|b| counted(b, now).map(|s| (b, s)))
            .collect();
        // Quota, per week the request touches, up to the first week over it: one reason names the
        // broken rule. Listing every week would make a slot spanning millennia (well formed, so
        // an API fuzzer sends one) cost a reason per week: 100 MB of refusal, seconds of CPU
        // inside the booking's write transaction.
        let mut week = week_start(req.slot.start());
        while week < req.slot.end() && !reasons.iter().any(|r| matches!(r, Reason::Quota { .. })) {
            let next = sat_add(week, SignedDuration::from_hours(7 * 24));
            if let Ok(w) = Slot::new(week, next) {
                let part = |s: &Slot| {
                    s.intersection(&w)
                        .map_or(SignedDuration::ZERO, |i| i.length())
                };
                let used: SignedDuration = mine.iter().map(|(_, s)| part(s)).sum();
                let requested = part(&req.slot);
                if used + requested > self.weekly_quota {
                    reasons.push(Reason::Quota {
                        week,
                        used,
                        requested,
                        quota: self.weekly_quota,
                    });
                }
            }
            week = next;
        }
        // Stacking: another of the user's live bookings on a conflicting
        // resource closer than min_gap (or overlapping).
        if let Some((b, s)) = mine
            .iter()
            .filter(|(b, _)| b.is_live(now) && b.resource.conflicts_with(&req.resource))
            .find(|(_, s)| {
                sat_add(s.end(), self.min_gap) > req.slot.start()
                    && sat_add(req.slot.end(), self.min_gap) > s.start()
            })
        {
            reasons.push(Reason::Stacking {
                other: b.id,
                slot: *s,
                min_gap: self.min_gap,
            });
        }
        match inventory.effective_state(&req.resource) {
            ResourceState::Maintenance { reason } => reasons.push(Reason::Maintenance { reason }),
            ResourceState::Degraded { reason } => warnings.push(Warning::Degraded { reason }),
            ResourceState::Available => {}
        }
        let mut zones: Vec<String> = user.zone.iter().cloned().collect();
        zones.extend(inventory.zones(&req.resource));
        // Zones were validated when the inventory and account were made; an
        // unknown one here gives no warning rather than a refusal.
        for transition in dst_warnings(&zones, &req.slot).unwrap_or_default() {
            warnings.push(Warning::DstChange { transition });
        }
        if user.role == Role::Admin && user.override_policy {
            let mut all = reasons;
            all.extend(approval);
            if !all.is_empty() {
                warnings.push(Warning::Overridden { reasons: all });
            }
            return Decision::Allow { warnings };
        }
        if !reasons.is_empty() {
            return Decision::Refuse { reasons };
        }
        match approval {
            Some(reason) => Decision::NeedsApproval { reason, warnings },
            None => Decision::Allow { warnings },
        }
    }

    /// Checks extending `booking` to `new_end`: the rules of [`Policy::check`]
    /// for the whole new slot, against the other bookings, except that an
    /// active booking's start may be in the past.
    pub fn check_extend(
        &self,
        booking: &Booking,
        new_end: Timestamp,
        user: &UserContext,
        inventory: &Inventory,
        existing: &[Booking],
        now: Timestamp,
    ) -> Decision {
        let Ok(slot) = Slot::new(booking.slot.start(), new_end) else {
            return Decision::Refuse {
                reasons: vec![Reason::MinLength {
                    length: SignedDuration::ZERO,
                    min: self.min_length,
                }],
            };
        };
        let others: Vec<Booking> = existing
            .iter()
            .filter(|b| b.id != booking.id)
            .cloned()
            .collect();
        let req = Request {
            resource: booking.resource.clone(),
            slot,
            event: false,
        };
        match self.check(&req, user, inventory, &others, now) {
            Decision::Refuse { reasons } => {
                let reasons: Vec<Reason> = reasons
                    .into_iter()
                    .filter(|r| !matches!(r, Reason::StartInPast { .. } | Reason::Horizon { .. }))
                    .collect();
                if reasons.is_empty() {
                    Decision::Allow {
                        warnings: Vec::new(),
                    }
                } else {
                    Decision::Refuse { reasons }
                }
            }
            Decision::NeedsApproval { warnings, .. } => Decision::Allow { warnings },
            d => d,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::booking::{Actor, Ledger, NewBooking};
    use crate::resource::tests::datatag;

    fn t0() -> Timestamp {
        // A Monday.
        "2026-05-04T00:00:00Z".parse().unwrap()
    }

    fn h(n: i64) -> Timestamp {
        t0() + SignedDuration::from_hours(n)
    }

    fn m(n: i64) -> Timestamp {
        t0() + SignedDuration::from_mins(n)
    }

    fn id(s: &str) -> ResourceId {
        ResourceId::parse(s).unwrap()
    }

    fn req(res: &str, a: Timestamp, b: Timestamp) -> Request {
        Request {
            resource: id(res),
            slot: Slot::new(a, b).unwrap(),
            event: false,
        }
    }

    fn alice() -> UserContext {
        UserContext {
            user: "alice".into(),
            role: Role::User,
            zone: None,
            override_policy: false,
        }
    }

    const A: &str = "cern/starlight-lambda/1g-a";

    fn check(r: &Request, existing: &[Booking]) -> Decision {
        Policy::default().check(r, &alice(), &datatag(), existing, t0())
    }

    fn codes(d: &Decision) -> Vec<&'static str> {
        match d {
            Decision::Refuse { reasons } => reasons.iter().map(Reason::code).collect(),
            _ => Vec::new(),
        }
    }

    fn allowed(d: &Decision) -> bool {
        matches!(d, Decision::Allow { .. })
    }

    /// Alice's bookings, made through a ledger.
    fn booked(slots: &[(&str, i64, i64)]) -> Vec<Booking> {
        let mut l = Ledger::new(datatag());
        for (r, a, b) in slots {
            l.try_book(
                NewBooking {
                    resource: id(r),
                    owner: "alice".into(),
                    slot: Slot::new(h(*a), h(*b)).unwrap(),
                    hold_until: None,
                    note: String::new(),
                },
                &Actor::user("alice"),
                t0(),
            )
            .unwrap();
        }
        l.bookings().cloned().collect()
    }

    #[test]
    fn max_contiguous() {
        assert!(allowed(&check(&req(A, h(1), h(9)), &[])));
        let d = check(&req(A, h(1), m(60 + 8 * 60 + 1)), &[]);
        assert_eq!(codes(&d), ["max_contiguous"]);
        let Decision::Refuse { reasons } = d else {
            unreachable!()
        };
        assert_eq!(
            reasons[0].to_string(),
            "8 h 1 min is longer than the 8 h allowed in a row; book at most 8 h (a second booking needs a gap)"
        );
    }

    #[test]
    fn min_length() {
        assert!(allowed(&check(&req(A, h(1), m(75)), &[])));
        assert_eq!(codes(&check(&req(A, h(1), m(74)), &[])), ["min_length"]);
    }

    #[test]
    fn start_in_past() {
        // Within the grace (a script's "now" after a round trip).
        assert!(allowed(&check(
            &req(A, t0() - SignedDuration::from_secs(30), h(1)),
            &[]
        )));
        let d = check(&req(A, t0() - SignedDuration::from_mins(5), h(1)), &[]);
        assert_eq!(codes(&d), ["start_in_past"]);
    }

    #[test]
    fn horizon_refuses_normal_and_asks_approval_for_events() {
        let day = |d: i64| h(24 * d);
        assert!(allowed(&check(
            &req(A, day(89), day(89) + SignedDuration::from_hours(2)),
            &[]
        )));
        let far = req(A, day(120), day(120) + SignedDuration::from_hours(2));
        let d = check(&far, &[]);
        assert_eq!(codes(&d), ["horizon"]);
        assert!(d_msg(&d).contains("mark it as an event"));
        let event = Request { event: true, ..far };
        assert!(matches!(
            check(&event, &[]),
            Decision::NeedsApproval {
                reason: Reason::Horizon { .. },
                ..
            }
        ));
        let too_far = Request {
            event: true,
            ..req(A, day(400), day(400) + SignedDuration::from_hours(2))
        };
        assert_eq!(codes(&check(&too_far, &[])), ["event_horizon"]);
        // An event inside the horizon needs no approval.
        let near = Request {
            event: true,
            ..req(A, h(3), h(5))
        };
        assert!(allowed(&check(&near, &[])));
    }

    fn d_msg(d: &Decision) -> String {
        match d {
            Decision::Refuse { reasons } => reasons
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "),
            _ => String::new(),
        }
    }

    #[test]
    fn weekly_quota() {
        // 4 × 8 h on four days = 32 h, on different resources so the gap
        // rule is not involved.
        let mine = booked(&[
            (A, 1, 9),
            ("cern/starlight-lambda/1g-b", 25, 33),
            (A, 49, 57),
            ("cern/host-1", 73, 81),
        ]);
        assert!(allowed(&check(&req(A, h(97), h(105)), &mine)));
        // 9 h: too long in a row, and 41 h in the week: both reasons given.
        let d = check(&req(A, h(97), h(106)), &mine);
        assert_eq!(codes(&d), ["max_contiguous", "quota"]);
        let mine2 = booked(&[
            (A, 1, 9),
            ("cern/starlight-lambda/1g-b", 25, 33),
            (A, 49, 57),
            ("cern/host-1", 73, 81),
            (A, 97, 105),
        ]);
        let d = check(&req(A, h(121), h(122)), &mine2);
        assert_eq!(codes(&d), ["quota"]);
        assert!(
            d_msg(&d).contains(
                "the week of 2026-05-04 would have 41 h booked (40 h already + 1 h asked)"
            ),
            "{}",
            d_msg(&d)
        );
        // The next week (from Monday 2026-05-11) is fresh.
        assert!(allowed(&check(
            &req(A, h(7 * 24 + 1), h(7 * 24 + 2)),
            &mine2
        )));
        // Someone else's bookings do not count.
        let bob = UserContext {
            user: "bob".into(),
            ..alice()
        };
        assert!(allowed(&Policy::default().check(
            &req(A, h(121), h(122)),
            &bob,
            &datatag(),
            &mine2,
            t0()
        )));
    }

    #[test]
    fn quota_refusal_of_a_slot_spanning_millennia_names_one_week() {
        let slot = Slot::new(
            "0142-10-07T14:34:51Z".parse().unwrap(),
            "8417-10-03T19:36:41Z".parse().unwrap(),
        )
        .unwrap();
        let r = Request {
            resource: id(A),
            slot,
            event: false,
        };
        let d = check(&r, &[]);
        assert_eq!(codes(&d), ["max_contiguous", "start_in_past", "quota"]);
    }

    #[test]
    fn minimum_gap_against_stacking() {
        // Two adjoining 4 h 30 bookings by one user are refused as stacking
        // (docs/testbed.md, the policy table).
        let mine = booked(&[(A, 10, 14)]);
        let d = check(&req(A, h(14), m(14 * 60 + 270)), &mine);
        assert_eq!(codes(&d), ["stacking"]);
        assert!(d_msg(&d).contains("leave 2 h between bookings"));
        // On the parent too (it contains the booked child).
        assert_eq!(
            codes(&check(&req("cern/starlight-lambda", h(15), h(16)), &mine)),
            ["stacking"]
        );
        // 2 h later is fine; a sibling is not a conflicting resource.
        assert!(allowed(&check(&req(A, h(16), h(18)), &mine)));
        assert!(allowed(&check(
            &req("cern/starlight-lambda/1g-b", h(14), h(16)),
            &mine
        )));
    }

    #[test]
    fn maintenance_refuses_degraded_warns() {
        let d = check(&req("cern/host-1", h(1), h(2)), &[]);
        assert_eq!(codes(&d), ["maintenance"]);
        assert!(d_msg(&d).contains("disk swap"));
        match check(&req("cern/starlight-lambda/1g-b", h(1), h(2)), &[]) {
            Decision::Allow { warnings } => {
                assert!(
                    matches!(&warnings[..], [Warning::Degraded { reason }] if reason.contains("CRC"))
                );
            }
            d => panic!("{d:?}"),
        }
        assert!(
            matches!(check(&req(A, h(1), h(2)), &[]), Decision::Allow { warnings } if warnings.is_empty())
        );
    }

    #[test]
    fn dst_change_in_user_or_site_zone_warns() {
        // Site zone Europe/Zurich: 2026-03-29 01:00Z.
        let now: Timestamp = "2026-03-28T00:00:00Z".parse().unwrap();
        let eu = Request {
            resource: id(A),
            slot: Slot::parse("2026-03-28T22:00:00Z", "2026-03-29T04:00:00Z").unwrap(),
            event: false,
        };
        let d = Policy::default().check(&eu, &alice(), &datatag(), &[], now);
        assert!(
            matches!(&d, Decision::Allow { warnings } if matches!(&warnings[..], [Warning::DstChange { transition }] if transition.zone == "Europe/Zurich")),
            "{d:?}"
        );
        // User in Chicago, US change 2026-03-08 08:00Z; the site has none then.
        let now: Timestamp = "2026-03-07T00:00:00Z".parse().unwrap();
        let us = Request {
            resource: id(A),
            slot: Slot::parse("2026-03-08T04:00:00Z", "2026-03-08T10:00:00Z").unwrap(),
            event: false,
        };
        let chicago = UserContext {
            zone: Some("America/Chicago".into()),
            ..alice()
        };
        let d = Policy::default().check(&us, &chicago, &datatag(), &[], now);
        assert!(
            matches!(&d, Decision::Allow { warnings } if warnings.len() == 1),
            "{d:?}"
        );
        let d = Policy::default().check(&us, &alice(), &datatag(), &[], now);
        assert!(
            matches!(&d, Decision::Allow { warnings } if warnings.is_empty()),
            "{d:?}"
        );
    }

    #[test]
    fn several_reasons_are_all_given_and_admins_override() {
        let r = req("cern/host-1", h(1), h(10));
        assert_eq!(codes(&check(&r, &[])), ["max_contiguous", "maintenance"]);
        let admin = UserContext {
            role: Role::Admin,
            override_policy: true,
            ..alice()
        };
        match Policy::default().check(&r, &admin, &datatag(), &[], t0()) {
            Decision::Allow { warnings } => {
                assert!(
                    matches!(&warnings[..], [Warning::Overridden { reasons }] if reasons.len() == 2)
                );
            }
            d => panic!("{d:?}"),
        }
        // An admin who does not ask to override is checked like anyone.
        let plain = UserContext {
            role: Role::Admin,
            ..alice()
        };
        assert!(matches!(
            Policy::default().check(&r, &plain, &datatag(), &[], t0()),
            Decision::Refuse { .. }
        ));
        assert_eq!(
            codes(&check(&req("nope", h(1), h(2)), &[])),
            ["unknown_resource"]
        );
    }

    #[test]
    fn extending_is_checked_for_length_not_for_its_past_start() {
        let mine = booked(&[(A, 1, 5)]);
        let now = h(3);
        let p = Policy::default();
        let d = p.check_extend(&mine[0], h(9), &alice(), &datatag(), &mine, now);
        assert!(allowed(&d), "{d:?}");
        let d = p.check_extend(&mine[0], h(10), &alice(), &datatag(), &mine, now);
        assert_eq!(codes(&d), ["max_contiguous"]);
    }

    #[test]
    fn extreme_times_are_refused_not_panicking() {
        let mine = booked(&[(A, 1, 5)]);
        let end_of_time = Request {
            resource: id(A),
            slot: Slot::new(
                Timestamp::MAX - SignedDuration::from_hours(1),
                Timestamp::MAX,
            )
            .unwrap(),
            event: true,
        };
        assert_eq!(codes(&check(&end_of_time, &mine)), ["event_horizon"]);
        let dawn = Request {
            resource: id(A),
            slot: Slot::new(
                Timestamp::MIN,
                Timestamp::MIN + SignedDuration::from_hours(1),
            )
            .unwrap(),
            event: false,
        };
        assert_eq!(codes(&check(&dawn, &mine)), ["start_in_past"]);
        let late_now = Timestamp::MAX - SignedDuration::from_hours(1);
        let d = Policy::default().check(&end_of_time, &alice(), &datatag(), &mine, late_now);
        assert!(matches!(
            d,
            Decision::Refuse { .. } | Decision::Allow { .. }
        ));
    }

    #[test]
    fn weeks_start_on_monday_utc() {
        let sunday: Timestamp = "2026-05-10T23:59:59Z".parse().unwrap();
        assert_eq!(week_start(sunday), t0());
        assert_eq!(week_start(t0()), t0());
        let before_epoch: Timestamp = "1969-12-31T12:00:00Z".parse().unwrap();
        assert_eq!(
            week_start(before_epoch),
            "1969-12-29T00:00:00Z".parse().unwrap()
        );
    }
}

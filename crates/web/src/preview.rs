//! `GET /api/v1/preview`: a dry run of `POST /api/v1/bookings` for the UI's live conflict preview.
//! It applies the checks a booking gets — the body's validation and the resource's existence
//! (`write::validate`), the hierarchy conflict rule (a live booking of the resource, an
//! ancestor or a descendant overlapping the slot, [`ResourceId::conflicts_with`]) and the policy
//! (`write::check_policy`, against the caller's bookings in the same window the store
//! uses) — and reports *all* of them at once, where a booking stops at the first: every conflicting
//! booking, every rule that would refuse it, and the warnings (degraded resources, a daylight saving
//! change inside the slot in the caller's zone or any site's zone above the resource). Nothing is
//! written. The answer is advice, not a promise: another request may take the slot before the
//! caller books it, and the booking's own transaction decides.

use std::sync::Arc;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use jiff::Timestamp;
use longhaul_testbed::api::{CreateBooking, ErrorBody, Note};
use longhaul_testbed::booking::{Actor, Booking};
use longhaul_testbed::policy::Warning;
use longhaul_testbed::resource::{ResourceId, ResourceState};
use longhaul_testbed::time::{Slot, dst_warnings, format_utc, zone};
use serde::{Deserialize, Serialize};

use crate::reply::BookRequest;
use crate::rows::role_name;
use crate::state::AppState;
use crate::write::{check_policy, policy_window, validate};

/// The query: what would be booked, and the caller's display zone.
#[derive(Debug, Deserialize)]
pub struct PreviewQuery {
    resource: Option<String>,
    start: Option<String>,
    end: Option<String>,
    /// The caller's IANA zone (the UI sends the zone it displays times in):
    /// a DST change there inside the slot is warned about, as the sites'
    /// are.
    zone: Option<String>,
    /// Ask as an event booking (beyond the horizon, with approval).
    #[serde(default)]
    event: bool,
}

/// A live booking in the way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreviewConflict {
    /// Its id.
    pub booking: u64,
    /// Its resource: the one asked for, an ancestor or a descendant.
    pub resource: String,
    /// Start, UTC RFC 3339.
    pub start: String,
    /// End, UTC RFC 3339.
    pub end: String,
    /// Its owner.
    pub user: String,
    /// `held` or `upcoming`/`active` (confirmed).
    pub status: String,
}

/// A policy rule that would refuse the booking.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    /// The rule's code (`max_contiguous`, `stacking`, `quota`, ...).
    pub rule: String,
    /// Why, as the booking's 422 would say it.
    pub reason: String,
}

/// The dry run's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Preview {
    /// True when `POST /api/v1/bookings` would succeed now.
    pub ok: bool,
    /// The resource asked for.
    pub resource: String,
    /// The slot's start, UTC.
    pub start: String,
    /// The slot's end, UTC.
    pub end: String,
    /// Whom the policy was checked for (quota and stacking depend on it).
    pub user: String,
    /// Their role.
    pub role: String,
    /// Live bookings on conflicting resources overlapping the slot, by
    /// start.
    pub conflicts: Vec<PreviewConflict>,
    /// Every policy rule that would refuse it.
    pub refusals: Vec<Refusal>,
    /// What the booking would be warned about.
    pub warnings: Vec<Note>,
}

fn json_error(status: u16, code: &str, message: impl Into<String>) -> Response {
    let body = ErrorBody {
        code: code.into(),
        message: message.into(),
        reasons: Vec::new(),
    };
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, axum::Json(body)).into_response()
}

fn body_error(e: &ErrorBody) -> Response {
    let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::BAD_REQUEST);
    (status, axum::Json(e)).into_response()
}

fn internal(e: &dyn std::fmt::Display) -> Response {
    tracing::error!(target: "longhaul::testbed::http", error = %e, "internal error");
    json_error(500, "internal", "internal error (logged)")
}

/// The caller's account, or the 401 every `/api/v1` endpoint gives.
async fn authenticate(state: &AppState, headers: &HeaderMap) -> Result<Actor, Response> {
    let unauthorized = |msg: &str| {
        let mut r = json_error(401, "unauthorized", msg);
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"longhaul testbed\""),
        );
        r
    };
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    let Some(token) = token else {
        return Err(unauthorized(
            "send Authorization: Bearer TOKEN (create one with `longhaul testbed token add USER`)",
        ));
    };
    match state.store.authenticate(token).await {
        Ok(Some(actor)) => Ok(actor),
        Ok(None) => Err(unauthorized("unknown API token")),
        Err(e) => Err(internal(&e)),
    }
}

/// `GET /api/v1/preview?resource=&start=&end=[&zone=][&event=]`.
pub async fn preview(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    q: Result<Query<PreviewQuery>, QueryRejection>,
) -> Response {
    let actor = match authenticate(&state, &headers).await {
        Ok(a) => a,
        Err(r) => return r,
    };
    // A malformed or repeated parameter: the JSON error body, not axum's plain text.
    let q = match q {
        Ok(Query(q)) => q,
        Err(e) => return json_error(400, "invalid_query", e.body_text()),
    };
    let (Some(resource), Some(start), Some(end)) = (q.resource, q.start, q.end) else {
        return json_error(
            400,
            "missing_parameter",
            "send resource, start and end (RFC 3339 with an offset), e.g. \
             ?resource=cern/starlight-lambda&start=2026-05-05T08:00:00Z&end=2026-05-05T10:00:00Z",
        );
    };
    if let Some(z) = &q.zone
        && let Err(e) = zone(z)
    {
        // Well-formed but not a zone this service knows: 422, as for other semantic refusals.
        return json_error(422, "unknown_zone", format!("zone: {e}"));
    }
    let create = CreateBooking {
        resource,
        start,
        end,
        hold: false,
        event: q.event,
        note: None,
    };
    let req = BookRequest {
        actor: &actor,
        create: &create,
        inventory: &state.inventory(),
        policy: &state.policy,
        now: Timestamp::now(),
        hold_ttl: state.hold_ttl,
        idempotency: None,
        // The user's zone is added below (from `zone=`), with the site's.
        zone: None,
    };
    let (resource, slot) = match validate(&req) {
        Ok(v) => v,
        Err(e) => return body_error(&e),
    };
    let conflicting = match state
        .store
        .list(Some(&resource), Some(slot.start()), Some(slot.end()))
        .await
    {
        Ok(list) => list,
        Err(e) => return internal(&e),
    };
    let (from, to) = policy_window(&slot);
    let mine: Vec<Booking> = match state
        .store
        .list(
            None,
            Timestamp::from_microsecond(from).ok(),
            Timestamp::from_microsecond(to).ok(),
        )
        .await
    {
        Ok(list) => list.into_iter().filter(|b| b.owner == actor.user).collect(),
        Err(e) => return internal(&e),
    };
    let answer = evaluate(
        &req,
        &resource,
        &slot,
        &conflicting,
        &mine,
        q.zone.as_deref(),
    );
    (StatusCode::OK, axum::Json(answer)).into_response()
}

/// The preview of `req` (already validated as `resource` and `slot`)
/// given the bookings overlapping the slot on conflicting resources and
/// the caller's bookings around it (any status: only live ones count).
fn evaluate(
    req: &BookRequest<'_>,
    resource: &ResourceId,
    slot: &Slot,
    overlapping: &[Booking],
    mine: &[Booking],
    user_zone: Option<&str>,
) -> Preview {
    let now = req.now;
    let conflicts: Vec<PreviewConflict> = overlapping
        .iter()
        .filter(|b| b.is_live(now) && b.resource.conflicts_with(resource) && b.slot.overlaps(slot))
        .map(|b| PreviewConflict {
            booking: b.id.0,
            resource: b.resource.to_string(),
            start: format_utc(b.slot.start()),
            end: format_utc(b.slot.end()),
            user: b.owner.clone(),
            status: b.phase(now).to_string(),
        })
        .collect();
    let (refusals, mut warnings) = match check_policy(req, resource, slot, mine) {
        // A booking that needs approval is not refused: its note says so.
        Ok((w, _needs_approval)) => (Vec::new(), w),
        Err(e) if e.reasons.is_empty() => (
            vec![Refusal {
                rule: e.code.clone(),
                reason: e.message.clone(),
            }],
            Vec::new(),
        ),
        Err(e) => (
            e.reasons
                .iter()
                .map(|n| Refusal {
                    rule: n.code.clone(),
                    reason: n.message.clone(),
                })
                .collect(),
            Vec::new(),
        ),
    };
    // A refusal carries no warnings, and the store's policy check knows no
    // user zone: add what the booking would be warned about either way.
    let mut extra = Vec::new();
    if let ResourceState::Degraded { reason } = req.inventory.effective_state(resource) {
        extra.push(Warning::Degraded { reason });
    }
    let mut zones: Vec<String> = user_zone.map(str::to_owned).into_iter().collect();
    zones.extend(req.inventory.zones(resource));
    for transition in dst_warnings(&zones, slot).unwrap_or_default() {
        extra.push(Warning::DstChange { transition });
    }
    for w in &extra {
        let note = Note::from(w);
        if !warnings.contains(&note) {
            warnings.push(note);
        }
    }
    Preview {
        ok: conflicts.is_empty() && refusals.is_empty(),
        resource: resource.to_string(),
        start: format_utc(slot.start()),
        end: format_utc(slot.end()),
        user: req.actor.user.clone(),
        role: role_name(req.actor.role).to_owned(),
        conflicts,
        refusals,
        warnings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::SignedDuration;
    use longhaul_testbed::booking::{BookingId, Status};
    use longhaul_testbed::policy::Policy;
    use longhaul_testbed::resource::Inventory;

    /// The testbed crate's DataTAG inventory: CERN's lambda as two circuits, one degraded.
    const INVENTORY: &str = include_str!("../../testbed/testdata/datatag.toml");

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn booking(id: u64, resource: &str, owner: &str, start: &str, end: &str) -> Booking {
        Booking {
            id: BookingId(id),
            resource: ResourceId::parse(resource).unwrap(),
            owner: owner.into(),
            slot: Slot::new(t(start), t(end)).unwrap(),
            status: Status::Confirmed,
            note: String::new(),
            created_at: t("2026-03-01T00:00:00Z"),
            version: 1,
        }
    }

    /// Runs the preview for `actor` asking `resource` over `[start, end)`
    /// at 2026-03-02 00:00Z with the default policy.
    fn run(
        actor: &Actor,
        resource: &str,
        start: &str,
        end: &str,
        existing: &[Booking],
        user_zone: Option<&str>,
    ) -> Preview {
        let inventory = Inventory::from_toml(INVENTORY, "test.toml").unwrap();
        let policy = Policy::default();
        let create = CreateBooking {
            resource: resource.into(),
            start: start.into(),
            end: end.into(),
            hold: false,
            event: false,
            note: None,
        };
        let req = BookRequest {
            actor,
            create: &create,
            inventory: &inventory,
            policy: &policy,
            now: t("2026-03-02T00:00:00Z"),
            hold_ttl: SignedDuration::from_mins(10),
            idempotency: None,
            zone: None,
        };
        let (r, s) = validate(&req).unwrap();
        let mine: Vec<Booking> = existing
            .iter()
            .filter(|b| b.owner == actor.user)
            .cloned()
            .collect();
        evaluate(&req, &r, &s, existing, &mine, user_zone)
    }

    #[test]
    fn a_child_booking_conflicts_with_its_parent_and_siblings_do_not() {
        let bob = booking(
            7,
            "cern/starlight-lambda/1g-a",
            "bob",
            "2026-03-03T10:00:00Z",
            "2026-03-03T12:00:00Z",
        );
        let alice = Actor::user("alice");
        let p = run(
            &alice,
            "cern/starlight-lambda",
            "2026-03-03T11:00:00Z",
            "2026-03-03T13:00:00Z",
            std::slice::from_ref(&bob),
            None,
        );
        assert!(!p.ok);
        assert_eq!(p.conflicts.len(), 1);
        let c = &p.conflicts[0];
        assert_eq!(
            (c.booking, c.resource.as_str(), c.user.as_str()),
            (7, "cern/starlight-lambda/1g-a", "bob")
        );
        assert_eq!(c.status, "upcoming");
        assert!(p.refusals.is_empty(), "{:?}", p.refusals);
        // The sibling half does not conflict (but it is degraded).
        let p = run(
            &alice,
            "cern/starlight-lambda/1g-b",
            "2026-03-03T11:00:00Z",
            "2026-03-03T13:00:00Z",
            std::slice::from_ref(&bob),
            None,
        );
        assert!(p.ok, "{p:?}");
        assert_eq!(p.warnings.len(), 1, "{:?}", p.warnings);
        assert_eq!(p.warnings[0].code, "degraded");
        assert!(p.warnings[0].message.contains("CRC errors"));
        // Touching is not overlapping.
        let p = run(
            &alice,
            "cern",
            "2026-03-03T12:00:00Z",
            "2026-03-03T13:00:00Z",
            &[bob],
            None,
        );
        assert!(p.conflicts.is_empty(), "{p:?}");
    }

    #[test]
    fn every_broken_rule_is_listed_with_the_conflict() {
        let bob = booking(
            3,
            "cern",
            "bob",
            "2026-03-03T00:00:00Z",
            "2026-03-03T02:00:00Z",
        );
        let mine = booking(
            4,
            "cern/starlight-lambda/1g-b",
            "alice",
            "2026-03-03T12:00:00Z",
            "2026-03-03T13:00:00Z",
        );
        let p = run(
            &Actor::user("alice"),
            "cern/starlight-lambda",
            "2026-03-03T01:00:00Z",
            "2026-03-03T11:00:00Z",
            &[bob, mine],
            None,
        );
        assert!(!p.ok);
        assert_eq!(p.conflicts.len(), 1);
        assert_eq!(p.conflicts[0].booking, 3);
        let rules: Vec<_> = p.refusals.iter().map(|r| r.rule.as_str()).collect();
        assert_eq!(rules, ["max_contiguous", "stacking"]);
        assert!(
            p.refusals[0].reason.contains("longer than the 8 h"),
            "{}",
            p.refusals[0].reason
        );
    }

    #[test]
    fn dst_changes_in_the_users_and_the_sites_zone_are_warned() {
        let alice = Actor::user("alice");
        // 2026-03-08 08:00Z: Chicago goes CST -> CDT; Zurich (the site)
        // changes on 2026-03-29 01:00Z. (1g-a: the lambda is degraded
        // through its other half.)
        let p = run(
            &alice,
            "cern/starlight-lambda/1g-a",
            "2026-03-08T06:00:00Z",
            "2026-03-08T10:00:00Z",
            &[],
            Some("America/Chicago"),
        );
        assert!(p.ok, "{p:?}");
        assert_eq!(p.warnings.len(), 1, "{:?}", p.warnings);
        assert_eq!(p.warnings[0].code, "dst_change");
        assert!(p.warnings[0].message.contains("America/Chicago"));
        let p = run(
            &alice,
            "cern/starlight-lambda/1g-a",
            "2026-03-29T00:00:00Z",
            "2026-03-29T04:00:00Z",
            &[],
            Some("America/Chicago"),
        );
        assert_eq!(p.warnings.len(), 1, "{:?}", p.warnings);
        assert!(p.warnings[0].message.contains("Europe/Zurich"));
        // A refused slot still carries its warnings.
        let p = run(
            &alice,
            "cern/starlight-lambda/1g-a",
            "2026-03-29T00:00:00Z",
            "2026-03-29T09:00:00Z",
            &[],
            None,
        );
        assert!(!p.ok);
        assert_eq!(p.refusals[0].rule, "max_contiguous");
        assert_eq!(p.warnings[0].code, "dst_change");
    }
}

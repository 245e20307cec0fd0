//! The HTTP API (axum): JSON by default, XML when the request says `Accept: application/xml` (or
//! sends an XML body), bearer-token auth with API tokens, and `?token=` with a read-only calendar
//! feed token for the iCal feeds only (calendar applications fetch them by URL, and a URL leaks:
//! it must not be an API credential), booking views localised to the caller's zone, one structured log line
//! per request. The routes are exactly those of `openapi.json`, which the service serves at
//! `/openapi.json`. The extend/approve/decline/preempt/audit/current/iCal handlers take their path and query
//! extractors as `Result`s, so an unreadable request is a 400 or 404 `ErrorBody` there rather than
//! axum's plain-text rejection.

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use jiff::{SignedDuration, Timestamp};
use longhaul_testbed::api::{
    AuditLog, AuditView, BookingList, BookingView, CreateBooking, CurrentBookings, DeclineBooking,
    ErrorBody, ExtendBooking, FeedToken, FreeBusy, FreeBusyQuery, LocalTimes, Me, Note,
    PreemptBooking,
};
use longhaul_testbed::booking::{Approval, Booking};
use longhaul_testbed::idempotency::{Fingerprint, IdempotencyKey};
use longhaul_testbed::policy::Warning;
use longhaul_testbed::resource::{Inventory, ResourceId};
use longhaul_testbed::time::{Slot, dst_warnings, format_utc, parse_instant, render_in_zone};
use longhaul_testbed::xml::from_xml;
use serde::{Deserialize, Serialize};

use crate::reply::{Account, BookRequest, Reply};
use crate::request::{
    account, authenticate, bad_query, bearer, error, internal, now_us, parse_body, respond,
    unauthorized, wants_xml,
};
pub use crate::state::AppState;
use crate::tokens::API_TOKEN_PREFIX;
use longhaul_testbed::decide::{Op, free_slots};

/// The OpenAPI 3.1 document of this API.
pub const OPENAPI: &str = include_str!("../openapi.json");

/// Every route, as (method, path) in OpenAPI's path syntax: the test that the OpenAPI document
/// covers the router reads it.
#[cfg(test)]
pub(crate) const ROUTES: &[(&str, &str)] = &[
    ("get", "/healthz"),
    ("get", "/openapi.json"),
    ("get", "/api/v1/resources"),
    ("post", "/api/v1/bookings"),
    ("get", "/api/v1/bookings"),
    ("post", "/api/v1/bookings/{id}/confirm"),
    ("post", "/api/v1/bookings/{id}/release"),
    ("post", "/api/v1/bookings/{id}/cancel"),
    ("get", "/api/v1/freebusy"),
    ("post", "/api/v1/bookings/{id}/extend"),
    ("post", "/api/v1/bookings/{id}/approve"),
    ("post", "/api/v1/bookings/{id}/decline"),
    ("post", "/api/v1/bookings/{id}/preempt"),
    ("get", "/api/v1/bookings/{id}/audit"),
    ("get", "/api/v1/ical/user/{user}.ics"),
    ("get", "/api/v1/ical/resource/{id}.ics"),
    ("get", "/api/v1/me"),
    ("post", "/api/v1/me/feed-token"),
    ("delete", "/api/v1/me/feed-token"),
    ("get", "/api/v1/current"),
    ("get", "/api/v1/preview"),
    ("get", "/api/v1/power"),
    ("post", "/api/v1/power"),
    ("get", "/api/v1/operations"),
    ("get", "/api/v1/console"),
    ("post", "/api/v1/agent/report"),
    ("get", "/api/v1/hosts"),
    ("get", "/api/v1/hosts/events"),
    ("post", "/api/v1/hosts/accept"),
    ("post", "/api/v1/hosts/forget"),
];

type Shared = Arc<AppState>;

/// The service's routes over `state`.
pub fn router(state: Shared) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/openapi.json", get(openapi))
        .route("/api/v1/resources", get(resources))
        .route("/api/v1/bookings", post(create_booking).get(list_bookings))
        .route("/api/v1/bookings/{id}/confirm", post(confirm))
        .route("/api/v1/bookings/{id}/release", post(release))
        .route("/api/v1/bookings/{id}/cancel", post(cancel))
        .route("/api/v1/freebusy", get(freebusy))
        .route("/api/v1/bookings/{id}/extend", post(extend))
        .route("/api/v1/bookings/{id}/approve", post(approve))
        .route("/api/v1/bookings/{id}/decline", post(decline))
        .route("/api/v1/bookings/{id}/preempt", post(preempt))
        .route("/api/v1/bookings/{id}/audit", get(audit))
        .route("/api/v1/ical/user/{file}", get(ical_user))
        .route("/api/v1/ical/resource/{*file}", get(ical_resource))
        .route("/api/v1/me", get(me))
        .route(
            "/api/v1/me/feed-token",
            post(make_feed_token).delete(drop_feed_token),
        )
        .route("/api/v1/current", get(current))
        .route("/metrics", get(metrics))
        .merge(crate::ui::routes())
        .merge(crate::power::routes())
        .merge(crate::agents::routes())
        .merge(crate::console::routes())
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(
            Arc::clone(&state),
            log_request,
        ))
        .with_state(state)
}

async fn metrics(State(s): State<Shared>) -> Response {
    (
        [(header::CONTENT_TYPE, longhaul_service::CONTENT_TYPE)],
        s.metrics.render(),
    )
        .into_response()
}

async fn log_request(State(s): State<Shared>, req: Request, next: Next) -> Response {
    let (method, path) = (req.method().clone(), req.uri().path().to_owned());
    let route = req
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map(|p| p.as_str().to_owned());
    let started = Instant::now();
    let resp = next.run(req).await;
    s.metrics.request(
        method.as_str(),
        route.as_deref(),
        resp.status().as_u16(),
        started.elapsed(),
    );
    tracing::info!(
        target: "longhaul::testbed::http",
        %method,
        path,
        status = resp.status().as_u16(),
        micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
        "request"
    );
    resp
}

fn reply(r: &Reply, xml: bool) -> Response {
    match &r.body {
        Ok(v) => respond(r.status, v, xml),
        Err(e) => respond(r.status, e, xml),
    }
}

/// Who reads a calendar feed.
enum FeedReader {
    /// An API token in the `Authorization` header: the account's role
    /// applies.
    Api(Account),
    /// A feed token in `?token=`: this user's own feed and the resource
    /// feeds, whatever their role.
    Feed(String),
}

/// The reader of a feed: the bearer API token when the request sends one,
/// otherwise the feed token of `?token=` (never an API token: a URL ends up
/// in calendar settings, sync logs and proxy logs), or a 401 response.
async fn feed_reader(
    state: &AppState,
    headers: &HeaderMap,
    query_token: Option<&str>,
) -> Result<FeedReader, Response> {
    let xml = wants_xml(headers);
    if bearer(headers).is_some() {
        return account(state, headers).await.map(FeedReader::Api);
    }
    let Some(token) = query_token.map(str::trim) else {
        return Err(unauthorized(
            "send Authorization: Bearer TOKEN, or a calendar feed token as ?token= \
             (`longhaul testbed token feed USER` or POST /api/v1/me/feed-token)",
            xml,
        ));
    };
    if token.starts_with(API_TOKEN_PREFIX) {
        return Err(unauthorized(
            "?token= takes a calendar feed token (lhf_...), not an API token, which would make the \
             feed's URL a credential for the whole API; make a feed token with \
             `longhaul testbed token feed USER` or POST /api/v1/me/feed-token",
            xml,
        ));
    }
    match state.store.feed_user(token).await {
        Ok(Some(user)) => Ok(FeedReader::Feed(user)),
        Ok(None) => Err(unauthorized("unknown or revoked feed token", xml)),
        Err(e) => Err(internal(&e, xml)),
    }
}

async fn not_found(headers: HeaderMap) -> Response {
    error(
        404,
        "not_found",
        "no such endpoint; see /openapi.json",
        wants_xml(&headers),
    )
}

#[derive(Serialize)]
struct Health {
    status: &'static str,
    database: &'static str,
    resources: usize,
}

async fn healthz(State(state): State<Shared>) -> Response {
    axum::Json(Health {
        status: "ok",
        database: state.store.kind(),
        resources: state.inventory().len(),
    })
    .into_response()
}

async fn openapi() -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        OPENAPI,
    )
        .into_response()
}

async fn resources(State(state): State<Shared>, headers: HeaderMap) -> Response {
    if let Err(r) = authenticate(&state, &headers).await {
        return r;
    }
    let inventory = state.inventory();
    let list: Vec<_> = inventory.iter().collect();
    axum::Json(serde_json::json!({ "resources": list })).into_response()
}

async fn create_booking(State(state): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let xml = wants_xml(&headers);
    let account = match account(&state, &headers).await {
        Ok(a) => a,
        Err(r) => return r,
    };
    let actor = account.actor.clone();
    let is_xml_body = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("xml"));
    let create: CreateBooking = if is_xml_body {
        match std::str::from_utf8(&body)
            .map_err(|e| e.to_string())
            .and_then(|t| from_xml(t).map_err(|e| e.to_string()))
        {
            Ok(c) => c,
            Err(e) => return error(400, "invalid_body", e, xml),
        }
    } else {
        match serde_json::from_slice(&body) {
            Ok(c) => c,
            Err(e) => return error(400, "invalid_body", format!("JSON body: {e}"), xml),
        }
    };
    let idempotency = match headers.get("idempotency-key") {
        None => None,
        Some(v) => {
            let key = v
                .to_str()
                .map_err(|_| ())
                .and_then(|k| IdempotencyKey::new(&actor.user, k).map_err(|_| ()));
            match key {
                Ok(k) => Some((k, Fingerprint::new("POST", "/api/v1/bookings", &body))),
                Err(()) => {
                    let e = longhaul_testbed::idempotency::IdempotencyError::BadKey;
                    return respond(400, &ErrorBody::from(&e), xml);
                }
            }
        }
    };
    let req = BookRequest {
        actor: &actor,
        create: &create,
        inventory: &state.inventory(),
        policy: &state.policy,
        now: now_us(),
        hold_ttl: state.hold_ttl,
        idempotency,
        zone: account.zone.clone(),
    };
    match state.store.book(&req).await {
        Ok(mut r) => {
            localize_reply(&mut r, &account, &state.inventory());
            if let Ok(v) = &r.body {
                tracing::info!(target: "longhaul::testbed::booking", id = v.id, user = %actor.user,
                    resource = %v.resource, start = %v.start, end = %v.end, status = %v.status, "booked");
            }
            reply(&r, xml)
        }
        Err(e) => internal(&e, xml),
    }
}

async fn change(
    state: Shared,
    headers: HeaderMap,
    id: Result<Path<String>, PathRejection>,
    op: Op,
) -> Response {
    let (xml, account, id) = match booking_target(&state, &headers, id).await {
        Ok(t) => t,
        Err(r) => return r,
    };
    let actor = &account.actor;
    match state.store.change(id, op, actor, now_us()).await {
        Ok(mut r) => {
            localize_reply(&mut r, &account, &state.inventory());
            tracing::info!(target: "longhaul::testbed::booking", id, user = %actor.user,
                op = op.as_str(), status = r.status, "change");
            reply(&r, xml)
        }
        Err(e) => internal(&e, xml),
    }
}

async fn confirm(
    State(s): State<Shared>,
    h: HeaderMap,
    id: Result<Path<String>, PathRejection>,
) -> Response {
    change(s, h, id, Op::Confirm).await
}

async fn release(
    State(s): State<Shared>,
    h: HeaderMap,
    id: Result<Path<String>, PathRejection>,
) -> Response {
    change(s, h, id, Op::Release).await
}

async fn cancel(
    State(s): State<Shared>,
    h: HeaderMap,
    id: Result<Path<String>, PathRejection>,
) -> Response {
    change(s, h, id, Op::Cancel).await
}

/// `GET /api/v1/bookings` parameters.
#[derive(Debug, Deserialize)]
struct ListQuery {
    resource: Option<String>,
    from: Option<String>,
    to: Option<String>,
}

async fn list_bookings(
    State(state): State<Shared>,
    headers: HeaderMap,
    q: Result<Query<ListQuery>, QueryRejection>,
) -> Response {
    let xml = wants_xml(&headers);
    let account = match account(&state, &headers).await {
        Ok(a) => a,
        Err(r) => return r,
    };
    let q = match q {
        Ok(Query(q)) => q,
        Err(e) => return bad_query(&e, xml),
    };
    let resource = match q.resource.as_deref().map(ResourceId::parse).transpose() {
        Ok(r) => r,
        Err(e) => return respond(400, &ErrorBody::from(&e), xml),
    };
    let parse =
        |v: &Option<String>, field| v.as_deref().map(|s| parse_instant(s, field)).transpose();
    let (from, to) = match (parse(&q.from, "from"), parse(&q.to, "to")) {
        (Ok(f), Ok(t)) => (f, t),
        (Err(e), _) | (_, Err(e)) => return respond(400, &ErrorBody::from(&e), xml),
    };
    let now = now_us();
    match state.store.list_stored(resource.as_ref(), from, to).await {
        Ok(list) => respond(
            200,
            &BookingList {
                bookings: list
                    .iter()
                    .map(|(b, approval)| {
                        stored_view(b, approval, now, &account, &state.inventory())
                    })
                    .collect(),
            },
            xml,
        ),
        Err(e) => internal(&e, xml),
    }
}

/// `GET /api/v1/freebusy` parameters.
#[derive(Debug, Deserialize)]
struct FreeBusyParams {
    resource: String,
    from: String,
    to: String,
    length: Option<String>,
}

async fn freebusy(
    State(state): State<Shared>,
    headers: HeaderMap,
    q: Result<Query<FreeBusyParams>, QueryRejection>,
) -> Response {
    let xml = wants_xml(&headers);
    if let Err(r) = authenticate(&state, &headers).await {
        return r;
    }
    let q = match q {
        Ok(Query(q)) => q,
        Err(e) => return bad_query(&e, xml),
    };
    let query = FreeBusyQuery {
        resource: q.resource,
        from: q.from,
        to: q.to,
        min_length: q.length,
    };
    let (resource, window, min) = match query.validate() {
        Ok(v) => v,
        Err(e) => return respond(e.status(), &e, xml),
    };
    if state.inventory().get(&resource).is_none() {
        let e = ErrorBody::from(&longhaul_testbed::booking::LedgerError::UnknownResource(
            resource,
        ));
        return respond(404, &e, xml);
    }
    let now = now_us();
    let busy: Vec<_> = match state
        .store
        .list(Some(&resource), Some(window.start()), Some(window.end()))
        .await
    {
        Ok(list) => list.into_iter().filter(|b| b.is_live(now)).collect(),
        Err(e) => return internal(&e, xml),
    };
    let slots: Vec<_> = busy.iter().map(|b| b.slot).collect();
    let free = free_slots(&slots, &window, min, now);
    respond(200, &FreeBusy::new(&resource, &window, &busy, &free), xml)
}

/// Adds the times in the user's zone and a `dst_change` warning for every
/// offset change inside the booking in the user's zone or the zone of a site
/// above the resource (unless the policy check already gave it).
fn localize(v: &mut BookingView, account: &Account, inventory: &Inventory) {
    let (Ok(start), Ok(end)) = (
        parse_instant(&v.start, "start"),
        parse_instant(&v.end, "end"),
    ) else {
        return;
    };
    if let Some(z) = &account.zone
        && let (Ok(s), Ok(e)) = (render_in_zone(start, z), render_in_zone(end, z))
    {
        v.local = Some(LocalTimes {
            zone: z.clone(),
            start: s,
            end: e,
        });
    }
    let Ok(slot) = Slot::new(start, end) else {
        return;
    };
    let mut zones: Vec<String> = account.zone.iter().cloned().collect();
    if let Ok(r) = ResourceId::parse(&v.resource) {
        zones.extend(inventory.zones(&r));
    }
    for transition in dst_warnings(&zones, &slot).unwrap_or_default() {
        let note = Note::from(&Warning::DstChange { transition });
        if !v.warnings.contains(&note) {
            v.warnings.push(note);
        }
    }
}

fn localize_reply(r: &mut Reply, account: &Account, inventory: &Inventory) {
    if let Ok(v) = &mut r.body {
        localize(v, account, inventory);
    }
}

/// A booking id from the path, or a 404.
/// The booking a `/api/v1/bookings/{id}/...` request is about: whether it wants XML, the caller's
/// account (or the 401), and the id (an id that is not a number names no booking: 404).
async fn booking_target(
    state: &AppState,
    headers: &HeaderMap,
    id: Result<Path<String>, PathRejection>,
) -> Result<(bool, Account, i64), Response> {
    let xml = wants_xml(headers);
    let Path(id) = id.map_err(|e| error(404, "unknown_booking", e.body_text(), xml))?;
    let account = account(state, headers).await?;
    let id = id
        .parse::<i64>()
        .map_err(|_| error(404, "unknown_booking", format!("no booking {id}"), xml))?;
    Ok((xml, account, id))
}

fn log_change(r: &Reply, id: i64, user: &str, op: &str) {
    tracing::info!(target: "longhaul::testbed::booking", id, user, op, status = r.status, "change");
}

async fn extend(
    State(state): State<Shared>,
    headers: HeaderMap,
    id: Result<Path<String>, PathRejection>,
    body: Bytes,
) -> Response {
    let (xml, account, id) = match booking_target(&state, &headers, id).await {
        Ok(t) => t,
        Err(r) => return r,
    };
    let ext: ExtendBooking = match parse_body(&headers, &body) {
        Ok(b) => b,
        Err(e) => return error(400, "invalid_body", e, xml),
    };
    let new_end = match parse_instant(&ext.end, "end") {
        Ok(t) => t,
        Err(e) => return respond(400, &ErrorBody::from(&e), xml),
    };
    let now = now_us();
    let r = state
        .store
        .extend(
            id,
            new_end,
            &account,
            &state.policy,
            &state.inventory(),
            now,
        )
        .await;
    match r {
        Ok(mut r) => {
            log_change(&r, id, &account.actor.user, "extend");
            localize_reply(&mut r, &account, &state.inventory());
            reply(&r, xml)
        }
        Err(e) => internal(&e, xml),
    }
}

async fn approve(
    State(state): State<Shared>,
    headers: HeaderMap,
    id: Result<Path<String>, PathRejection>,
) -> Response {
    let (xml, account, id) = match booking_target(&state, &headers, id).await {
        Ok(t) => t,
        Err(r) => return r,
    };
    match state
        .store
        .approve(
            id,
            &account.actor,
            now_us(),
            state.policy.allow_self_approval,
        )
        .await
    {
        Ok(mut r) => {
            log_change(&r, id, &account.actor.user, "approve");
            localize_reply(&mut r, &account, &state.inventory());
            reply(&r, xml)
        }
        Err(e) => internal(&e, xml),
    }
}

async fn decline(
    State(state): State<Shared>,
    headers: HeaderMap,
    id: Result<Path<String>, PathRejection>,
    body: Bytes,
) -> Response {
    let (xml, account, id) = match booking_target(&state, &headers, id).await {
        Ok(t) => t,
        Err(r) => return r,
    };
    let d: DeclineBooking = match parse_body(&headers, &body) {
        Ok(b) => b,
        Err(e) => return error(400, "invalid_body", e, xml),
    };
    match state.store.decline(id, &d, &account.actor, now_us()).await {
        Ok(mut r) => {
            if r.status == 200 {
                tracing::info!(target: "longhaul::testbed::booking", id,
                    approver = %account.actor.user, reason = %d.reason.trim(), "declined");
            }
            log_change(&r, id, &account.actor.user, "decline");
            localize_reply(&mut r, &account, &state.inventory());
            reply(&r, xml)
        }
        Err(e) => internal(&e, xml),
    }
}

async fn preempt(
    State(state): State<Shared>,
    headers: HeaderMap,
    id: Result<Path<String>, PathRejection>,
    body: Bytes,
) -> Response {
    let (xml, account, id) = match booking_target(&state, &headers, id).await {
        Ok(t) => t,
        Err(r) => return r,
    };
    let p: PreemptBooking = match parse_body(&headers, &body) {
        Ok(b) => b,
        Err(e) => return error(400, "invalid_body", e, xml),
    };
    if p.notice
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return error(
            400,
            "invalid_body",
            "notice: control characters other than newline and tab are not allowed",
            xml,
        );
    }
    match state
        .store
        .preempt(id, &p.notice, &account.actor, now_us())
        .await
    {
        Ok(mut r) => {
            if r.status == 200 {
                tracing::warn!(target: "longhaul::testbed::booking", id, admin = %account.actor.user,
                    notice = %p.notice.trim(), "preempted");
            }
            log_change(&r, id, &account.actor.user, "preempt");
            localize_reply(&mut r, &account, &state.inventory());
            reply(&r, xml)
        }
        Err(e) => internal(&e, xml),
    }
}

async fn audit(
    State(state): State<Shared>,
    headers: HeaderMap,
    id: Result<Path<String>, PathRejection>,
) -> Response {
    let (xml, _account, id) = match booking_target(&state, &headers, id).await {
        Ok(t) => t,
        Err(r) => return r,
    };
    match state.store.audit(id).await {
        Ok(Some(events)) => respond(
            200,
            &AuditLog {
                booking: u64::try_from(id).unwrap_or(0),
                events: events.iter().map(AuditView::new).collect(),
            },
            xml,
        ),
        Ok(None) => error(404, "unknown_booking", format!("no booking {id}"), xml),
        Err(e) => internal(&e, xml),
    }
}

async fn me(State(state): State<Shared>, headers: HeaderMap) -> Response {
    let xml = wants_xml(&headers);
    match account(&state, &headers).await {
        Ok(a) => respond(
            200,
            &Me {
                user: a.actor.user.clone(),
                role: crate::rows::role_name(a.actor.role).to_owned(),
                zone: a.zone,
            },
            xml,
        ),
        Err(r) => r,
    }
}

/// `POST /api/v1/me/feed-token`: a new calendar feed token for the caller
/// (an API token), replacing theirs.
async fn make_feed_token(State(state): State<Shared>, headers: HeaderMap) -> Response {
    let xml = wants_xml(&headers);
    let account = match account(&state, &headers).await {
        Ok(a) => a,
        Err(r) => return r,
    };
    let user = account.actor.user;
    match state.store.rotate_feed_token(&user, now_us()).await {
        Ok(Some(token)) => {
            tracing::info!(target: "longhaul::testbed::token", user, "feed token made");
            let feed = format!("/api/v1/ical/user/{user}.ics?token={token}");
            respond(201, &FeedToken { user, token, feed }, xml)
        }
        // Its API token was revoked between the two queries.
        Ok(None) => unauthorized("unknown API token", xml),
        Err(e) => internal(&e, xml),
    }
}

/// `DELETE /api/v1/me/feed-token`: the caller's feed token stops working
/// (204 whether or not there was one).
async fn drop_feed_token(State(state): State<Shared>, headers: HeaderMap) -> Response {
    let xml = wants_xml(&headers);
    let account = match account(&state, &headers).await {
        Ok(a) => a,
        Err(r) => return r,
    };
    match state.store.revoke_feed_token(&account.actor.user).await {
        Ok(had) => {
            tracing::info!(target: "longhaul::testbed::token", user = %account.actor.user, had,
                "feed token revoked");
            StatusCode::NO_CONTENT.into_response()
        }
        Err(e) => internal(&e, xml),
    }
}

/// `GET /api/v1/current` parameters.
#[derive(Debug, Deserialize)]
struct CurrentQuery {
    resource: String,
}

async fn current(
    State(state): State<Shared>,
    headers: HeaderMap,
    q: Result<Query<CurrentQuery>, QueryRejection>,
) -> Response {
    let xml = wants_xml(&headers);
    let q = match q {
        Ok(Query(q)) => q,
        Err(e) => return error(400, "invalid_query", e.body_text(), xml),
    };
    let account = match account(&state, &headers).await {
        Ok(a) => a,
        Err(r) => return r,
    };
    let resource = match ResourceId::parse(&q.resource) {
        Ok(r) => r,
        Err(e) => return respond(400, &ErrorBody::from(&e), xml),
    };
    if state.inventory().get(&resource).is_none() {
        let e = ErrorBody::from(&longhaul_testbed::booking::LedgerError::UnknownResource(
            resource,
        ));
        return respond(404, &e, xml);
    }
    let now = now_us();
    let until = longhaul_testbed::time::sat_add(now, SignedDuration::from_micros(1));
    match state
        .store
        .list_stored(Some(&resource), Some(now), Some(until))
        .await
    {
        Ok(list) => respond(
            200,
            &CurrentBookings {
                resource: resource.to_string(),
                now: format_utc(now),
                bookings: list
                    .iter()
                    .filter(|(b, _)| b.is_live(now) && b.slot.contains(now))
                    .map(|(b, approval)| {
                        stored_view(b, approval, now, &account, &state.inventory())
                    })
                    .collect(),
            },
            xml,
        ),
        Err(e) => internal(&e, xml),
    }
}

/// A stored booking as the caller sees it: its approval state, times in the caller's zone.
fn stored_view(
    b: &Booking,
    approval: &Option<Approval>,
    now: Timestamp,
    account: &Account,
    inventory: &Inventory,
) -> BookingView {
    let mut v = BookingView::new(b, now, None, &[]);
    v.approval = *approval;
    localize(&mut v, account, inventory);
    v
}

/// `?token=` of the calendar feeds (calendar applications cannot send an
/// `Authorization` header): a feed token, never an API token.
#[derive(Debug, Deserialize)]
struct FeedQuery {
    token: Option<String>,
}

/// The domain of iCal UIDs: the `Host` the client used, without the port.
fn feed_domain(headers: &HeaderMap) -> String {
    headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(|h| h.rsplit_once(':').map_or(h, |(host, _)| host))
        .filter(|h| {
            !h.is_empty()
                && h.chars()
                    .all(|c| c.is_ascii_alphanumeric() || ".-[]".contains(c))
        })
        .unwrap_or("longhaul-testbed")
        .to_owned()
}

fn calendar_response(text: String) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/calendar; charset=utf-8"),
        )],
        text,
    )
        .into_response()
}

async fn ical_user(
    State(state): State<Shared>,
    headers: HeaderMap,
    file: Result<Path<String>, PathRejection>,
    q: Result<Query<FeedQuery>, QueryRejection>,
) -> Response {
    let xml = wants_xml(&headers);
    let file = match file {
        Ok(Path(f)) => f,
        Err(e) => return error(404, "not_found", e.body_text(), xml),
    };
    let q = match q {
        Ok(Query(q)) => q,
        Err(e) => return error(400, "invalid_query", e.body_text(), xml),
    };
    let reader = match feed_reader(&state, &headers, q.token.as_deref()).await {
        Ok(r) => r,
        Err(r) => return r,
    };
    let Some(user) = file.strip_suffix(".ics").filter(|u| !u.is_empty()) else {
        return error(
            404,
            "not_found",
            "the feed is /api/v1/ical/user/USER.ics",
            xml,
        );
    };
    match &reader {
        FeedReader::Api(account)
            if user != account.actor.user
                && account.actor.role == longhaul_testbed::booking::Role::User =>
        {
            return error(
                403,
                "forbidden",
                format!("only {user}, an approver or an admin can read {user}'s feed"),
                xml,
            );
        }
        FeedReader::Feed(owner) if owner != user => {
            return error(
                403,
                "forbidden",
                format!(
                    "a feed token reads its own user's feed and the resource feeds: this one is \
                     {owner}'s, not {user}'s"
                ),
                xml,
            );
        }
        _ => {}
    }
    if user.contains('\0') {
        return error(404, "not_found", "no such user", xml);
    }
    match state.store.of_owner(user).await {
        Ok(list) => calendar_response(longhaul_testbed::ical::calendar(
            &format!("longhaul testbed: {user}"),
            &list,
            now_us(),
            &feed_domain(&headers),
        )),
        Err(e) => internal(&e, xml),
    }
}

async fn ical_resource(
    State(state): State<Shared>,
    headers: HeaderMap,
    file: Result<Path<String>, PathRejection>,
    q: Result<Query<FeedQuery>, QueryRejection>,
) -> Response {
    let xml = wants_xml(&headers);
    let file = match file {
        Ok(Path(f)) => f,
        Err(e) => return error(404, "not_found", e.body_text(), xml),
    };
    let q = match q {
        Ok(Query(q)) => q,
        Err(e) => return error(400, "invalid_query", e.body_text(), xml),
    };
    if let Err(r) = feed_reader(&state, &headers, q.token.as_deref()).await {
        return r;
    }
    let Some(id) = file.strip_suffix(".ics") else {
        return error(
            404,
            "not_found",
            "the feed is /api/v1/ical/resource/ID.ics",
            xml,
        );
    };
    let resource = match ResourceId::parse(id) {
        Ok(r) => r,
        Err(e) => return respond(400, &ErrorBody::from(&e), xml),
    };
    if state.inventory().get(&resource).is_none() {
        let e = ErrorBody::from(&longhaul_testbed::booking::LedgerError::UnknownResource(
            resource,
        ));
        return respond(404, &e, xml);
    }
    match state.store.list(Some(&resource), None, None).await {
        Ok(list) => calendar_response(longhaul_testbed::ical::calendar(
            &format!("longhaul testbed: {resource}"),
            list.iter().filter(|b| b.resource == resource),
            now_us(),
            &feed_domain(&headers),
        )),
        Err(e) => internal(&e, xml),
    }
}

//! Hosts that register themselves (issue 20): `POST /api/v1/agent/report` from `longhaul agent`,
//! authenticated by the host's key (trusted on first use, then pending until an admin accepts
//! it: `POST /api/v1/hosts/accept`), `GET /api/v1/hosts` and `GET /api/v1/hosts/events` for
//! everyone, and the watch that marks an accepted host whose heartbeats stopped unreachable (hung
//! when its console is silent too) and tells the holders of the bookings covering it: an event the
//! UI shows, and the service's webhook. The rules of the facts and their changes are in
//! [`longhaul_testbed::agents`].

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use jiff::Timestamp;
use longhaul_testbed::agents::{
    AgentHostList, AgentHostView, AgentReply, AgentReport, HostEventLog, fingerprint,
    key_is_well_formed,
};
use longhaul_testbed::api::ErrorBody;
use longhaul_testbed::booking::{Phase, Role};
use longhaul_testbed::operations::log_time;
use longhaul_testbed::resource::{Resource, ResourceId, ResourceKind};
use serde::Deserialize;

use crate::agent_store::{AgentRow, NewEvent};
use crate::request::{
    account, bad_query, bearer, error, internal, now_us, parse_body, respond, unauthorized,
    wants_xml,
};
use crate::state::AppState;

type Shared = Arc<AppState>;

/// The most hosts that may wait for acceptance at once: beyond, a new host's report is refused
/// (429) until an admin accepts or forgets some, so strangers cannot fill the table.
pub const MAX_PENDING: u64 = 64;

/// The routes.
pub fn routes() -> Router<Shared> {
    Router::new()
        .route("/api/v1/agent/report", post(report))
        .route("/api/v1/hosts", get(hosts))
        .route("/api/v1/hosts/events", get(events))
        .route("/api/v1/hosts/accept", post(accept))
        .route("/api/v1/hosts/forget", post(forget))
}

/// `?host=H`.
#[derive(Debug, Deserialize)]
pub struct HostQuery {
    host: String,
}

/// `GET /api/v1/hosts/events?host=H&limit=N`.
#[derive(Debug, Deserialize)]
pub struct EventsQuery {
    host: Option<String>,
    limit: Option<u32>,
}

fn key_hash(key: &str) -> String {
    blake3::hash(key.as_bytes()).to_hex().to_string()
}

/// The active bookings covering `host` at `now`, as `booking 12 (alice)`.
async fn covering(state: &AppState, host: &ResourceId, now: Timestamp) -> Vec<String> {
    let until = longhaul_testbed::time::sat_add(now, jiff::SignedDuration::from_micros(1));
    match state.store.list(Some(host), Some(now), Some(until)).await {
        Ok(list) => list
            .iter()
            .filter(|b| b.phase(now) == Phase::Active && b.resource.is_ancestor_or_self_of(host))
            .map(|b| format!("booking {} ({})", b.id, b.owner))
            .collect(),
        Err(e) => {
            tracing::warn!(target: "longhaul::testbed::agents", error = %e, "reading bookings");
            Vec::new()
        }
    }
}

/// Writes an event of `host` with the bookings covering it now; sends it to the webhook when
/// `notify`. Failures are logged: an event lost must not lose the report that caused it.
async fn event(state: &AppState, host: &ResourceId, kind: &str, detail: &str, notify: bool) {
    let now = now_us();
    let bookings = covering(state, host, now).await;
    let ev = NewEvent {
        at_us: now.as_microsecond(),
        host: host.as_str(),
        kind,
        detail,
        bookings: &bookings,
    };
    if let Err(e) = state.store.add_host_event(&ev).await {
        tracing::warn!(target: "longhaul::testbed::agents", error = %e, %host, kind, "writing an event");
    }
    tracing::info!(target: "longhaul::testbed::agents", %host, kind, detail, ?bookings, "host event");
    if notify && let Some(url) = state.webhook.clone() {
        let body = serde_json::json!({
            "event": kind,
            "host": host.as_str(),
            "at": log_time(now),
            "detail": detail,
            "bookings": bookings,
        });
        tokio::task::spawn_blocking(move || send_webhook(&url, &body));
    }
}

/// POSTs `body` to the webhook; a failure is logged, never retried (the event is in the log).
fn send_webhook(url: &str, body: &serde_json::Value) {
    let agent = ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(5))
        .redirects(0)
        .build();
    if let Err(e) = agent.post(url).send_json(body) {
        tracing::warn!(target: "longhaul::testbed::agents", url, error = %e, "webhook failed");
    }
}

async fn report(State(state): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let xml = wants_xml(&headers);
    let Some(key) = bearer(&headers).filter(|k| key_is_well_formed(k)) else {
        return unauthorized(
            "send Authorization: Bearer KEY, the host's agent key (64 hex digits; \
             `longhaul agent` makes it on its first run)",
            xml,
        );
    };
    if body.len() > longhaul_testbed::agents::MAX_REPORT {
        return error(
            413,
            "too_large",
            format!(
                "a report of {} bytes; at most {}",
                body.len(),
                longhaul_testbed::agents::MAX_REPORT
            ),
            xml,
        );
    }
    let report: AgentReport = match parse_body(&headers, &body) {
        Ok(r) => r,
        Err(e) => return error(400, "invalid_body", e, xml),
    };
    if let Err(e) = report.facts.check() {
        return error(400, "invalid_facts", e.0, xml);
    }
    let host = match ResourceId::parse(&report.host) {
        Ok(h) => h,
        Err(e) => return respond(400, &ErrorBody::from(&e), xml),
    };
    let inventory = state.inventory();
    match inventory.get(&host) {
        Some(r) if r.kind != ResourceKind::Host => {
            return error(
                422,
                "not_a_host",
                format!("{host} is a {:?} in the inventory, not a host", r.kind).to_lowercase(),
                xml,
            );
        }
        None if host.parent().is_some_and(|p| inventory.get(&p).is_none()) => {
            return error(
                422,
                "unknown_parent",
                format!(
                    "{host} cannot join the inventory: {} is not in it",
                    host.parent().map(String::from).unwrap_or_default()
                ),
                xml,
            );
        }
        _ => {}
    }
    let now = now_us().as_microsecond();
    let heartbeat_s = state.heartbeat().as_secs().max(1);
    let stored = match state.store.agent_host(host.as_str()).await {
        Ok(s) => s,
        Err(e) => return internal(&e, xml),
    };
    let Some(row) = stored else {
        return register(&state, &host, key, report, now, heartbeat_s, xml).await;
    };
    if row.key_hash != key_hash(key) {
        tracing::warn!(target: "longhaul::testbed::agents", %host, presented = fingerprint(key), "report with a wrong key");
        return error(
            401,
            "wrong_key",
            format!(
                "{host} is registered with another key (fingerprint {}); if the host was \
                 reinstalled, an admin forgets its registration: longhaul testbed hosts forget {host}",
                row.fingerprint
            ),
            xml,
        );
    }
    if let Err(e) = state
        .store
        .agent_seen(host.as_str(), &report.facts, now)
        .await
    {
        return internal(&e, xml);
    }
    let changed = longhaul_testbed::agents::changes(&row.facts, &report.facts);
    if !changed.is_empty() {
        event(&state, &host, "facts_changed", &changed.join("; "), false).await;
    }
    if row.state == "accepted" && !row.reachable {
        let silent = Duration::from_micros(u64::try_from(now - row.last_seen_us).unwrap_or(0));
        let detail = format!("heartbeats again after {} s", silent.as_secs());
        event(&state, &host, "reachable", &detail, true).await;
    }
    respond(
        200,
        &AgentReply {
            state: row.state,
            heartbeat_s,
            fingerprint: row.fingerprint,
        },
        xml,
    )
}

/// The first report of `host`: registered with `key`, pending.
async fn register(
    state: &AppState,
    host: &ResourceId,
    key: &str,
    report: AgentReport,
    now: i64,
    heartbeat_s: u64,
    xml: bool,
) -> Response {
    match state.store.pending_agents().await {
        Ok(n) if n >= MAX_PENDING => {
            return error(
                429,
                "too_many_pending",
                format!(
                    "{n} hosts wait for an admin's acceptance already (at most {MAX_PENDING}); \
                     try again later"
                ),
                xml,
            );
        }
        Ok(_) => {}
        Err(e) => return internal(&e, xml),
    }
    let row = AgentRow {
        host: host.to_string(),
        key_hash: key_hash(key),
        fingerprint: fingerprint(key),
        state: "pending".into(),
        facts: report.facts,
        registered_us: now,
        last_seen_us: now,
        reachable: true,
        hung: false,
    };
    match state.store.register_agent(&row).await {
        Ok(true) => {}
        Ok(false) => {
            return error(
                401,
                "wrong_key",
                format!("{host} was registered with another key a moment ago"),
                xml,
            );
        }
        Err(e) => return internal(&e, xml),
    }
    let detail = format!(
        "key {}; pending an admin's acceptance (longhaul testbed hosts accept {host})",
        row.fingerprint
    );
    event(state, host, "registered", &detail, false).await;
    respond(
        202,
        &AgentReply {
            state: row.state,
            heartbeat_s,
            fingerprint: row.fingerprint,
        },
        xml,
    )
}

fn view(row: AgentRow) -> AgentHostView {
    let time = |us: i64| log_time(Timestamp::from_microsecond(us).unwrap_or(Timestamp::UNIX_EPOCH));
    AgentHostView {
        registered: time(row.registered_us),
        last_seen: time(row.last_seen_us),
        host: row.host,
        state: row.state,
        fingerprint: row.fingerprint,
        reachable: row.reachable,
        hung: row.hung,
        facts: row.facts,
    }
}

async fn hosts(State(state): State<Shared>, headers: HeaderMap) -> Response {
    let xml = wants_xml(&headers);
    if let Err(r) = account(&state, &headers).await {
        return r;
    }
    match state.store.agent_hosts().await {
        Ok(rows) => respond(
            200,
            &AgentHostList {
                host: rows.into_iter().map(view).collect(),
                agent_timeout_s: state.agent_timeout.as_secs(),
            },
            xml,
        ),
        Err(e) => internal(&e, xml),
    }
}

async fn events(
    State(state): State<Shared>,
    headers: HeaderMap,
    q: Result<Query<EventsQuery>, QueryRejection>,
) -> Response {
    let xml = wants_xml(&headers);
    let q = match q {
        Ok(Query(q)) => q,
        Err(e) => return bad_query(&e, xml),
    };
    if let Err(r) = account(&state, &headers).await {
        return r;
    }
    let limit = q.limit.unwrap_or(100).clamp(1, 1000);
    // A host that is no resource id has no events (and its text, NUL bytes and all, never reaches
    // the database).
    if q.host
        .as_deref()
        .is_some_and(|h| ResourceId::parse(h).is_err())
    {
        return respond(200, &HostEventLog { event: Vec::new() }, xml);
    }
    match state.store.host_events(q.host.as_deref(), limit).await {
        Ok(event) => respond(200, &HostEventLog { event }, xml),
        Err(e) => internal(&e, xml),
    }
}

/// The admin's account and the host of `?host=`, or the refusal (401, 403, 400).
async fn admin_and_host(
    state: &AppState,
    headers: &HeaderMap,
    q: Result<Query<HostQuery>, QueryRejection>,
) -> Result<(String, ResourceId), Response> {
    let xml = wants_xml(headers);
    let q = q.map_err(|e| bad_query(&e, xml))?.0;
    let account = account(state, headers).await?;
    if account.actor.role != Role::Admin {
        return Err(error(
            403,
            "admin_only",
            "only an admin accepts or forgets a host",
            xml,
        ));
    }
    let host = ResourceId::parse(&q.host).map_err(|e| respond(400, &ErrorBody::from(&e), xml))?;
    Ok((account.actor.user, host))
}

async fn accept(
    State(state): State<Shared>,
    headers: HeaderMap,
    q: Result<Query<HostQuery>, QueryRejection>,
) -> Response {
    let xml = wants_xml(&headers);
    let (admin, host) = match admin_and_host(&state, &headers, q).await {
        Ok(v) => v,
        Err(r) => return r,
    };
    let row = match state.store.agent_host(host.as_str()).await {
        Ok(Some(row)) if row.state == "pending" => row,
        Ok(_) => {
            return error(
                404,
                "not_pending",
                format!("no host {host} waits for acceptance"),
                xml,
            );
        }
        Err(e) => return internal(&e, xml),
    };
    // A host the inventory does not name joins it (and the database's resources, which bookings
    // refer to), named after its hostname.
    let joined = {
        let mut current = state
            .inventory
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if current.get(&host).is_some() {
            None
        } else {
            let mut next = (**current).clone();
            let mut resource = Resource::new(host.clone(), ResourceKind::Host, host.as_str());
            if let Some(name) = &row.facts.hostname {
                resource.name.clone_from(name);
            }
            if let Err(e) = next.insert(resource) {
                return error(422, "cannot_join", e.to_string(), xml);
            }
            let next = Arc::new(next);
            *current = Arc::clone(&next);
            Some(next)
        }
    };
    if let Some(inventory) = joined
        && let Err(e) = state.store.sync_inventory(&inventory).await
    {
        return internal(&e, xml);
    }
    match state
        .store
        .accept_agent(host.as_str(), now_us().as_microsecond())
        .await
    {
        Ok(true) => {}
        Ok(false) => {
            return error(
                404,
                "not_pending",
                format!("no host {host} waits for acceptance"),
                xml,
            );
        }
        Err(e) => return internal(&e, xml),
    }
    let detail = format!("by {admin}; key {}", row.fingerprint);
    event(&state, &host, "accepted", &detail, false).await;
    tracing::info!(target: "longhaul::testbed::agents", %host, admin, "host accepted");
    match state.store.agent_host(host.as_str()).await {
        Ok(Some(row)) => respond(200, &view(row), xml),
        Ok(None) => error(
            404,
            "not_pending",
            format!("{host} was forgotten meanwhile"),
            xml,
        ),
        Err(e) => internal(&e, xml),
    }
}

async fn forget(
    State(state): State<Shared>,
    headers: HeaderMap,
    q: Result<Query<HostQuery>, QueryRejection>,
) -> Response {
    let xml = wants_xml(&headers);
    let (admin, host) = match admin_and_host(&state, &headers, q).await {
        Ok(v) => v,
        Err(r) => return r,
    };
    match state.store.forget_agent(host.as_str()).await {
        Ok(true) => {}
        Ok(false) => {
            return error(
                404,
                "not_registered",
                format!("no host {host} is registered"),
                xml,
            );
        }
        Err(e) => return internal(&e, xml),
    }
    // It stays in the inventory (bookings name it); its next report registers it anew, pending.
    event(&state, &host, "forgotten", &format!("by {admin}"), false).await;
    axum::http::StatusCode::NO_CONTENT.into_response()
}

/// The hosts' watch: every heartbeat interval, an accepted host silent for the agent timeout is
/// marked unreachable — **hung** when its console (if the BMC file gives it one) has been silent
/// as long, then or later (a kernel that panicked says so on its console after its last
/// heartbeat) — and the holders of the bookings covering it are told.
pub async fn watch(state: Shared) {
    let mut tick = tokio::time::interval(state.heartbeat().min(Duration::from_secs(5)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let timeout = state.agent_timeout;
        let now = now_us();
        let cutoff = now.as_microsecond() - i64::try_from(timeout.as_micros()).unwrap_or(i64::MAX);
        let silent = match state.store.silent_agents(cutoff).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(target: "longhaul::testbed::agents", error = %e, "reading the hosts");
                continue;
            }
        };
        for row in silent {
            let Ok(host) = ResourceId::parse(&row.host) else {
                continue;
            };
            let console = console_silence(&state, &row.host, cutoff).await;
            let hung = console == Some(true);
            if !row.reachable && !hung {
                // Unreachable already; its console still speaks (or it has none).
                continue;
            }
            match state.store.mark_silent(&row.host, hung, cutoff).await {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => {
                    tracing::warn!(target: "longhaul::testbed::agents", error = %e, "marking a host");
                    continue;
                }
            }
            let quiet = Duration::from_micros(
                u64::try_from(now.as_microsecond() - row.last_seen_us).unwrap_or(0),
            );
            let heartbeat = format!(
                "no heartbeat for {} s (agent timeout {} s)",
                quiet.as_secs(),
                timeout.as_secs()
            );
            let (kind, detail) = match console {
                Some(true) => (
                    "hung",
                    format!("{heartbeat} and its console silent as long"),
                ),
                Some(false) => (
                    "unreachable",
                    format!("{heartbeat}; its console still speaks"),
                ),
                None => ("unreachable", heartbeat),
            };
            event(&state, &host, kind, &detail, true).await;
        }
    }
}

/// Whether `host`'s console has been silent since before `cutoff_us`; `None` when it has no
/// console the service reads.
async fn console_silence(state: &AppState, host: &str, cutoff_us: i64) -> Option<bool> {
    let declared = state.power.get(host)?;
    if declared.console.is_none() && declared.netconsole.is_none() {
        return None;
    }
    let boots = state.store.console_boots(host).await.ok()?;
    let last = boots
        .last()
        .and_then(|b| b.last.parse::<Timestamp>().ok())
        .map(Timestamp::as_microsecond);
    Some(last.is_none_or(|us| us < cutoff_us))
}

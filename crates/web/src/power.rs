//! `GET`/`POST /api/v1/power` and `GET /api/v1/operations` (issue 20): a host's power through the
//! BMC the service's BMC file names ([`longhaul_power`]), for the holder of an active reservation
//! covering the host or an admin with a reason ([`longhaul_testbed::operations::authorize`]), and
//! the log of every attempt. The BMC is asked on a blocking thread; one change at a time per host
//! (a second gets 409 while the first runs); the answer is the state read back from the BMC, or a
//! 502 naming the host and the endpoint. Credentials stay in the BMC file: neither the replies,
//! the log nor the service's own log lines carry them.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::get;
use jiff::Timestamp;
use longhaul_power::PowerAction;
use longhaul_testbed::api::ErrorBody;
use longhaul_testbed::booking::{LedgerError, Role};
use longhaul_testbed::operations::{
    Grant, OperationLog, PowerReply, PowerRequest, Refusal, authorize,
};
use longhaul_testbed::resource::{ResourceId, ResourceKind};
use serde::Deserialize;

use crate::oplog::NewOperation;
use crate::reply::Account;
use crate::request::{account, bad_query, error, internal, now_us, parse_body, respond, wants_xml};
use crate::state::AppState;

type Shared = Arc<AppState>;

/// The routes.
pub fn routes() -> Router<Shared> {
    Router::new()
        .route("/api/v1/power", get(power_status).post(power_action))
        .route("/api/v1/operations", get(operations))
}

/// `GET /api/v1/power?host=H`.
#[derive(Debug, Deserialize)]
pub struct HostQuery {
    host: String,
}

/// `GET /api/v1/operations?host=H&limit=N`.
#[derive(Debug, Deserialize)]
pub struct OperationsQuery {
    host: Option<String>,
    limit: Option<u32>,
}

async fn power_status(
    State(state): State<Shared>,
    headers: HeaderMap,
    q: Result<Query<HostQuery>, QueryRejection>,
) -> Response {
    let xml = wants_xml(&headers);
    match q {
        Ok(Query(q)) => operate(&state, &headers, &q.host, "status", None).await,
        Err(e) => bad_query(&e, xml),
    }
}

async fn power_action(State(state): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let xml = wants_xml(&headers);
    match parse_body::<PowerRequest>(&headers, &body) {
        Ok(r) => operate(&state, &headers, &r.host, &r.action, r.reason.as_deref()).await,
        Err(e) => error(400, "invalid_body", e, xml),
    }
}

/// Forgets a host's busy mark when the operation ends, however it ends.
struct Busy<'a> {
    state: &'a AppState,
    host: String,
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        if let Ok(mut set) = self.state.power_busy.lock() {
            set.remove(&self.host);
        }
    }
}

/// The caller's account and the host `host` names, or the response refusing the request: 401, 400
/// for an invalid id, 404 for an unknown resource, 422 for one that is not a host.
pub(crate) async fn account_and_host(
    state: &AppState,
    headers: &HeaderMap,
    host: &str,
) -> Result<(Account, ResourceId), Response> {
    let xml = wants_xml(headers);
    let account = account(state, headers).await?;
    let host_id = ResourceId::parse(host).map_err(|e| respond(400, &ErrorBody::from(&e), xml))?;
    match state.inventory().get(&host_id) {
        None => Err(respond(
            404,
            &ErrorBody::from(&LedgerError::UnknownResource(host_id)),
            xml,
        )),
        Some(r) if r.kind != ResourceKind::Host => Err(error(
            422,
            "not_a_host",
            format!("{host_id} is a {:?}, not a host", r.kind).to_lowercase(),
            xml,
        )),
        Some(_) => Ok((account, host_id)),
    }
}

/// Decides whether `account` may do `what` to `host` now ([`authorize`]) and logs the attempt:
/// refused, it is logged and answered 403; allowed, it is logged with `result` (`pending` until
/// [`crate::store::Store::finish_operation`], or `ok`). The log's sequence number and the grant.
/// Whether `account` may operate `host` now ([`authorize`] over the bookings covering it then),
/// without logging: a follower's console polls, whose reading was logged at its start.
pub(crate) async fn decide(
    state: &AppState,
    account: &Account,
    host: &ResourceId,
    reason: Option<&str>,
    xml: bool,
) -> Result<(Timestamp, Result<Grant, Refusal>), Response> {
    let now = now_us();
    let until = longhaul_testbed::time::sat_add(now, jiff::SignedDuration::from_micros(1));
    let bookings = state
        .store
        .list(Some(host), Some(now), Some(until))
        .await
        .map_err(|e| internal(&e, xml))?;
    Ok((now, authorize(&account.actor, host, &bookings, reason, now)))
}

pub(crate) async fn admit(
    state: &AppState,
    account: &Account,
    host: &ResourceId,
    what: &str,
    reason: Option<&str>,
    result: &str,
    xml: bool,
) -> Result<(u64, Grant), Response> {
    let (now, decision) = decide(state, account, host, reason, xml).await?;
    let grounds = match &decision {
        Ok(g) => g.describe(),
        Err(r) => format!("{}: {}", r.code, r.message),
    };
    let seq = state
        .store
        .log_operation(&NewOperation {
            at: now,
            actor: &account.actor,
            host: host.as_str(),
            action: what,
            reason: reason.map(str::trim).filter(|r| !r.is_empty()),
            allowed: decision.is_ok(),
            grounds: &grounds,
            result: if decision.is_ok() { result } else { "refused" },
        })
        .await
        .map_err(|e| internal(&e, xml))?;
    let user = &account.actor.user;
    match decision {
        Ok(grant) => {
            if let Grant::Admin(reason) = &grant {
                tracing::warn!(target: "longhaul::testbed::operations", user, %host, what, reason, seq, "admin operates a host without a booking");
            }
            Ok((seq, grant))
        }
        Err(r) => {
            tracing::info!(target: "longhaul::testbed::operations", user, %host, what, code = r.code, seq, "refused");
            Err(error(403, r.code, r.message, xml))
        }
    }
}

async fn operate(
    state: &AppState,
    headers: &HeaderMap,
    host: &str,
    action: &str,
    reason: Option<&str>,
) -> Response {
    let xml = wants_xml(headers);
    let (account, host_id) = match account_and_host(state, headers, host).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    let Some(action) = PowerAction::parse(action) else {
        return error(
            400,
            "invalid_action",
            format!("unknown power action {action:?}: use status, on, off, cycle or reset"),
            xml,
        );
    };
    let Some((endpoint, wait)) = state
        .power
        .get(host)
        .and_then(|h| Some((h.endpoint.clone()?, h.wait)))
    else {
        return error(
            404,
            "no_power_endpoint",
            format!("{host_id} has no power endpoint (the service's --bmc file names none for it)"),
            xml,
        );
    };
    let seq = match admit(
        state,
        &account,
        &host_id,
        &format!("power {action}"),
        reason,
        "pending",
        xml,
    )
    .await
    {
        Ok((seq, _)) => seq,
        Err(r) => return r,
    };
    let kind = endpoint.kind();
    match carry_out(state, &host_id, endpoint, wait, action, seq).await {
        Ok(out) => {
            tracing::info!(target: "longhaul::testbed::power", user = %account.actor.user, host, %action, state = %out.state, millis = out.millis, seq, "done");
            respond(
                200,
                &PowerReply {
                    host: host.to_owned(),
                    action: action.as_str().to_owned(),
                    state: out.state.as_str().to_owned(),
                    endpoint: kind.to_owned(),
                    answers: out.answers,
                    millis: out.millis,
                    seq,
                },
                xml,
            )
        }
        Err(Failure::Busy(msg)) => error(409, "busy", msg, xml),
        Err(Failure::Bmc(msg)) => {
            tracing::warn!(target: "longhaul::testbed::power", user = %account.actor.user, host, %action, error = %msg, seq, "BMC failed");
            error(502, "bmc_error", msg, xml)
        }
        Err(Failure::Store(e)) => internal(&e, xml),
    }
}

/// Why an operation admitted to the log did not happen.
pub(crate) enum Failure {
    /// Another change of the host is under way.
    Busy(String),
    /// The BMC failed: the message names the host and the endpoint.
    Bmc(String),
    /// The log could not be written.
    Store(crate::reply::StoreError),
}

/// Does `action` through `endpoint` for the logged operation `seq` (pending) and completes its
/// log entry: one change at a time per host, the BMC asked on a blocking thread, the outcome read
/// back.
pub(crate) async fn carry_out(
    state: &AppState,
    host: &ResourceId,
    endpoint: longhaul_power::Endpoint,
    wait: longhaul_power::Wait,
    action: PowerAction,
    seq: u64,
) -> Result<longhaul_power::Outcome, Failure> {
    let _busy = if action.changes() {
        let free = state
            .power_busy
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(host.to_string());
        if !free {
            let msg =
                format!("another power operation on {host} is under way: try again when it ends");
            let _ = state
                .store
                .finish_operation(seq, "failed", None, &msg)
                .await;
            return Err(Failure::Busy(msg));
        }
        Some(Busy {
            state,
            host: host.to_string(),
        })
    } else {
        None
    };
    let kind = endpoint.kind();
    let ran = tokio::task::spawn_blocking(move || endpoint.run(action, wait)).await;
    let ran = match ran {
        Ok(r) => r,
        Err(e) => Err(longhaul_power::PowerError {
            endpoint: kind.into(),
            message: format!("the BMC call failed: {e}"),
        }),
    };
    match ran {
        Ok(out) => {
            let detail = out.answers.join("; ");
            state
                .store
                .finish_operation(seq, "ok", Some(out.state.as_str()), &detail)
                .await
                .map_err(Failure::Store)?;
            Ok(out)
        }
        Err(e) => {
            let msg = format!("{host}: {e}");
            state
                .store
                .finish_operation(seq, "failed", None, &msg)
                .await
                .map_err(Failure::Store)?;
            Err(Failure::Bmc(msg))
        }
    }
}

async fn operations(
    State(state): State<Shared>,
    headers: HeaderMap,
    q: Result<Query<OperationsQuery>, QueryRejection>,
) -> Response {
    let xml = wants_xml(&headers);
    let q = match q {
        Ok(Query(q)) => q,
        Err(e) => return bad_query(&e, xml),
    };
    let account = match account(&state, &headers).await {
        Ok(a) => a,
        Err(r) => return r,
    };
    // Admins read every attempt; others their own.
    let actor = (account.actor.role != Role::Admin).then_some(account.actor.user.as_str());
    let limit = q.limit.unwrap_or(100).clamp(1, 1000);
    // A host that is no resource id has no operations (and its text, NUL bytes and all, never
    // reaches the database).
    if q.host
        .as_deref()
        .is_some_and(|h| ResourceId::parse(h).is_err())
    {
        return respond(
            200,
            &OperationLog {
                operations: Vec::new(),
            },
            xml,
        );
    }
    match state
        .store
        .operations(q.host.as_deref(), actor, limit)
        .await
    {
        Ok(operations) => respond(200, &OperationLog { operations }, xml),
        Err(e) => internal(&e, xml),
    }
}

//! What the monitor serves over HTTP (`monitor run --listen`): `/metrics` for Prometheus, and a
//! read-only JSON API over the archive for dashboards and scripts:
//!
//! - `GET /api/v1/mesh`: the hosts, the tests and their pairs;
//! - `GET /api/v1/results?since=SECONDS`: results that started in the last SECONDS (default a day);
//! - `GET /api/v1/events?since=SECONDS`: events (path changes, alerts fired and cleared) likewise;
//! - `GET /api/v1/alerts`: the alerts firing now;
//! - `GET /healthz`: `ok`.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use longhaul_engine::job::unix_ns;
use longhaul_monitor::Mesh;
use serde::Deserialize;
use serde_json::json;

use crate::archive::Archive;
use crate::metrics::MonitorMetrics;

/// What the handlers share.
#[derive(Clone)]
pub struct Shared {
    /// The mesh.
    pub mesh: Arc<Mesh>,
    /// The archive (read only here).
    pub archive: Archive,
    /// The metrics the runner updates.
    pub metrics: Arc<MonitorMetrics>,
    /// The alerts firing now.
    pub firing: crate::runner::Firing,
}

/// Longest look back a request may ask (a year).
const MAX_SINCE_S: u64 = 366 * 86_400;

#[derive(Deserialize)]
struct Since {
    since: Option<u64>,
}

impl Since {
    fn cut_ns(&self) -> u64 {
        let s = self.since.unwrap_or(86_400).min(MAX_SINCE_S);
        unix_ns(std::time::SystemTime::now()).saturating_sub(s * 1_000_000_000)
    }
}

/// The monitor's routes.
pub fn router(shared: Shared) -> axum::Router {
    let metrics = Arc::clone(&shared.metrics);
    axum::Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/api/v1/mesh", get(mesh))
        .route("/api/v1/results", get(results))
        .route("/api/v1/events", get(events))
        .route("/api/v1/alerts", get(alerts))
        .with_state(shared)
        .merge(longhaul_metrics::route(Arc::new(move || metrics.render())))
}

fn archive_error(e: crate::ArchiveError) -> Response {
    tracing::warn!("monitor API: {e}");
    (
        StatusCode::SERVICE_UNAVAILABLE,
        Json(json!({"error": "the archive could not be read"})),
    )
        .into_response()
}

async fn mesh(State(s): State<Shared>) -> Json<serde_json::Value> {
    let m = &s.mesh;
    Json(json!({
        "name": m.name,
        "hosts": m.hosts.iter().map(|h| json!({
            "name": h.name, "address": h.address, "port": h.port, "groups": h.groups,
        })).collect::<Vec<_>>(),
        "tests": m.tests.iter().map(|t| json!({
            "name": t.name,
            "kind": t.kind.as_str(),
            "every_ns": t.every.0,
            "slip_ns": t.slip.0,
            "pairs": t.pairs.iter().map(|&(f, d)| [&m.hosts[f].name, &m.hosts[d].name])
                .collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    }))
}

async fn results(State(s): State<Shared>, Query(q): Query<Since>) -> Response {
    match s.archive.results(&s.mesh.name, q.cut_ns()).await {
        Ok(rows) => Json(rows).into_response(),
        Err(e) => archive_error(e),
    }
}

async fn events(State(s): State<Shared>, Query(q): Query<Since>) -> Response {
    match s.archive.events(&s.mesh.name, q.cut_ns()).await {
        Ok(rows) => Json(rows).into_response(),
        Err(e) => archive_error(e),
    }
}

async fn alerts(State(s): State<Shared>) -> Json<serde_json::Value> {
    let firing = s.firing.lock().expect("firing lock").clone();
    Json(json!(firing))
}

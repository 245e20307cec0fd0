//! What the monitor serves over HTTP (`monitor run --listen`): `/metrics` for Prometheus, and a
//! read-only JSON API over the archive for dashboards and scripts:
//!
//! - `GET /api/v1/mesh`: the hosts, the tests and their pairs;
//! - `GET /api/v1/results?since=SECONDS`: results that started in the last SECONDS (default a day);
//! - `GET /api/v1/events?since=SECONDS`: events (path changes, alerts fired and cleared) likewise;
//! - `GET /api/v1/alerts`: the alerts firing now;
//! - `GET /api/v1/live`: server-sent events, one `result` event per archived result as it comes
//!   (the JSON of `monitor run --json`);
//! - `GET /`: the dashboard (`ui/`: a grid of sources × destinations, each pair's time series with
//!   its path changes and their traceroutes side by side, a map; live);
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

use longhaul_service::assets::asset;

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
    /// Each archived result as JSON, as it comes.
    pub live: tokio::sync::broadcast::Sender<String>,
}

/// The dashboard page.
pub const INDEX_HTML: &str = include_str!("../ui/index.html");
/// Its script.
pub const DASHBOARD_JS: &str = include_str!("../ui/dashboard.js");
/// Its style sheet.
pub const STYLE_CSS: &str = include_str!("../ui/style.css");

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
        .route("/api/v1/live", get(live))
        .route(
            "/",
            get(|| async { asset("text/html; charset=utf-8", INDEX_HTML) }),
        )
        .route(
            "/ui/dashboard.js",
            get(|| async { asset("text/javascript; charset=utf-8", DASHBOARD_JS) }),
        )
        .route(
            "/ui/style.css",
            get(|| async { asset("text/css; charset=utf-8", STYLE_CSS) }),
        )
        .with_state(shared)
        .merge(longhaul_service::route(Arc::new(move || metrics.render())))
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
            "lat": h.lat_lon.map(|p| p.0), "lon": h.lat_lon.map(|p| p.1),
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

/// Server-sent events: each archived result as a `result` event; a comment every 15 s keeps
/// proxies from closing an idle stream.
async fn live(
    State(s): State<Shared>,
) -> axum::response::Sse<
    impl futures_util::Stream<Item = Result<axum::response::sse::Event, std::convert::Infallible>>,
> {
    use axum::response::sse::{Event, KeepAlive, Sse};
    use tokio::sync::broadcast::error::RecvError;
    let rx = s.live.subscribe();
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        loop {
            match rx.recv().await {
                Ok(json) => return Some((Ok(Event::default().event("result").data(json)), rx)),
                // A slow reader misses some results; it reloads them from the API if it cares.
                Err(RecvError::Lagged(_)) => continue,
                Err(RecvError::Closed) => return None,
            }
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::new().interval(std::time::Duration::from_secs(15)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dashboard_loads_only_its_own_assets_and_builds_no_markup_from_data() {
        assert!(INDEX_HTML.contains(r#"<script src="/ui/dashboard.js" defer></script>"#));
        assert!(INDEX_HTML.contains(r#"<link rel="stylesheet" href="/ui/style.css">"#));
        longhaul_service::assets::page_keeps_to_the_csp(INDEX_HTML).unwrap();
        assert!(
            !DASHBOARD_JS.contains("innerHTML") && !DASHBOARD_JS.contains("insertAdjacentHTML")
        );
        assert!(!DASHBOARD_JS.contains("eval("));
    }
}

//! The web UI: pages served beside the API (the UI helper fills this in).

use std::sync::Arc;

use axum::Router;
use axum::response::Html;
use axum::routing::get;

use crate::http::AppState;

/// The UI's routes.
pub fn routes() -> Router<Arc<AppState>> {
    Router::new().route(
        "/",
        get(|| async { Html("<!doctype html><title>longhaul testbed</title>") }),
    )
}

//! The web UI: one static page (`crates/web/ui/`: vanilla HTML, CSS and JavaScript, no build step,
//! embedded in the binary) that talks to the public `/api/v1` endpoints with the user's bearer
//! token, plus the dry-run endpoint behind its live conflict preview ([`crate::preview`]). The page
//! is served with a strict Content-Security-Policy: scripts, styles and API calls from this origin
//! only, no inline script or style, no frames, no forms posting elsewhere, so an injected booking
//! note cannot run code or exfiltrate the token.

use std::sync::Arc;

use axum::Router;
use axum::routing::get;

use crate::state::AppState;

/// The page.
pub const INDEX_HTML: &str = include_str!("../ui/index.html");
/// Its script.
pub const APP_JS: &str = include_str!("../ui/app.js");
/// Its style sheet.
pub const STYLE_CSS: &str = include_str!("../ui/style.css");

pub use longhaul_service::assets::CSP;
use longhaul_service::assets::asset;

/// The UI's routes: the page at `/`, its assets under `/ui/`, and
/// `GET /api/v1/preview`.
pub fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route(
            "/",
            get(|| async { asset("text/html; charset=utf-8", INDEX_HTML) }),
        )
        .route(
            "/ui/app.js",
            get(|| async { asset("text/javascript; charset=utf-8", APP_JS) }),
        )
        .route(
            "/ui/style.css",
            get(|| async { asset("text/css; charset=utf-8", STYLE_CSS) }),
        )
        .route("/api/v1/preview", get(crate::preview::preview))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_loads_only_its_own_assets() {
        assert!(INDEX_HTML.contains(r#"<script src="/ui/app.js" defer></script>"#));
        assert!(INDEX_HTML.contains(r#"<link rel="stylesheet" href="/ui/style.css">"#));
        // The CSP forbids inline script and style: the page must have none.
        longhaul_service::assets::page_keeps_to_the_csp(INDEX_HTML).unwrap();
        assert!(
            !APP_JS.contains("innerHTML"),
            "app.js builds the DOM, not HTML strings"
        );
        assert!(!APP_JS.contains("eval("));
    }
}

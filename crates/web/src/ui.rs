//! The web UI: one static page (`crates/web/ui/`: vanilla HTML, CSS and JavaScript, no build step,
//! embedded in the binary) that talks to the public `/api/v1` endpoints with the user's bearer
//! token, plus the dry-run endpoint behind its live conflict preview ([`crate::preview`]). The page
//! is served with a strict Content-Security-Policy: scripts, styles and API calls from this origin
//! only, no inline script or style, no frames, no forms posting elsewhere, so an injected booking
//! note cannot run code or exfiltrate the token.

use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderName, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::state::AppState;

/// The page.
pub const INDEX_HTML: &str = include_str!("../ui/index.html");
/// Its script.
pub const APP_JS: &str = include_str!("../ui/app.js");
/// Its style sheet.
pub const STYLE_CSS: &str = include_str!("../ui/style.css");

/// The Content-Security-Policy of every UI response.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; \
    frame-ancestors 'none'";

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

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let headers = [
        (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
        (
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CSP),
        ),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
        (
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ),
        // The assets are compiled in: a new binary serves new ones, so
        // browsers revalidate rather than keep an old script.
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        (
            HeaderName::from_static("cross-origin-opener-policy"),
            HeaderValue::from_static("same-origin"),
        ),
    ];
    (headers, body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_loads_only_its_own_assets() {
        assert!(INDEX_HTML.contains(r#"<script src="/ui/app.js" defer></script>"#));
        assert!(INDEX_HTML.contains(r#"<link rel="stylesheet" href="/ui/style.css">"#));
        // The CSP forbids inline script and style: the page must have none.
        assert!(!INDEX_HTML.contains("<script>"), "inline script");
        assert!(!INDEX_HTML.contains("<style"), "inline style");
        assert!(!INDEX_HTML.contains(" style="), "inline style attribute");
        let handler = INDEX_HTML.match_indices(" on").any(|(i, _)| {
            let rest = &INDEX_HTML[i + 3..];
            let name = rest.trim_start_matches(|c: char| c.is_ascii_lowercase());
            name.len() < rest.len() && name.starts_with('=')
        });
        assert!(!handler, "inline event handler");
        assert!(
            !APP_JS.contains("innerHTML"),
            "app.js builds the DOM, not HTML strings"
        );
        assert!(!APP_JS.contains("eval("));
        assert!(CSP.contains("script-src 'self'") && !CSP.contains("unsafe"));
    }

    #[test]
    fn assets_carry_their_type_and_the_csp() {
        let r = asset("text/css; charset=utf-8", STYLE_CSS);
        let h = r.headers();
        assert_eq!(h[header::CONTENT_TYPE], "text/css; charset=utf-8");
        assert_eq!(h[header::CONTENT_SECURITY_POLICY], CSP);
        assert_eq!(h[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    }
}

//! A web UI's static files (vanilla HTML, CSS and JavaScript compiled into the binary), served with
//! a strict Content-Security-Policy: scripts, styles and API calls from the page's own origin only,
//! no inline script or style, no frames, no forms posting elsewhere, so text from the API (a booking
//! note, a host name) cannot run code or send anything away.

use axum::http::{HeaderName, HeaderValue, header};
use axum::response::{IntoResponse, Response};

/// The Content-Security-Policy of every UI response.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; \
    frame-ancestors 'none'";

/// `body` as a UI asset of `content_type`.
pub fn asset(content_type: &'static str, body: &'static str) -> Response {
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
        // The assets are compiled in: a new binary serves new ones, so browsers revalidate
        // rather than keep an old script.
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        (
            HeaderName::from_static("cross-origin-opener-policy"),
            HeaderValue::from_static("same-origin"),
        ),
    ];
    (headers, body).into_response()
}

/// Whether a page keeps to [`CSP`]: no inline script, style or event handler (the tests of each
/// UI call it on their pages).
pub fn page_keeps_to_the_csp(html: &str) -> Result<(), &'static str> {
    if html.contains("<script>") {
        return Err("inline script");
    }
    if html.contains("<style") || html.contains(" style=") {
        return Err("inline style");
    }
    let handler = html.match_indices(" on").any(|(i, _)| {
        let rest = &html[i + 3..];
        let name = rest.trim_start_matches(|c: char| c.is_ascii_lowercase());
        name.len() < rest.len() && name.starts_with('=')
    });
    if handler {
        return Err("inline event handler");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assets_carry_their_type_and_the_csp() {
        let r = asset("text/css; charset=utf-8", "body {}");
        let h = r.headers();
        assert_eq!(h[header::CONTENT_TYPE], "text/css; charset=utf-8");
        assert_eq!(h[header::CONTENT_SECURITY_POLICY], CSP);
        assert_eq!(h[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        assert!(CSP.contains("script-src 'self'") && !CSP.contains("unsafe"));
    }

    #[test]
    fn inline_code_breaks_the_csp() {
        assert!(page_keeps_to_the_csp("<p>ok</p><script src=\"/a.js\"></script>").is_ok());
        assert!(page_keeps_to_the_csp("<script>alert(1)</script>").is_err());
        assert!(page_keeps_to_the_csp("<p style=\"x\">").is_err());
        assert!(page_keeps_to_the_csp("<a onclick=\"x()\">").is_err());
    }
}

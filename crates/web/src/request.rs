//! What every handler does with a request and its answer: the caller's account from the bearer
//! token (API tokens only; a calendar feed token is refused here), JSON or XML by `Accept` and
//! `Content-Type`, the error bodies (and axum's rejections turned into them), and the service's
//! clock. The routes (`http`, `power`, `console`, `preview`) all answer through it.

use axum::extract::rejection::QueryRejection;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use jiff::Timestamp;
use longhaul_testbed::api::ErrorBody;
use longhaul_testbed::booking::Actor;
use longhaul_testbed::xml::{XmlBody, from_xml, to_xml};

use crate::reply::Account;
use crate::state::AppState;
use crate::tokens::FEED_TOKEN_PREFIX;

pub(crate) fn wants_xml(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/xml") || v.contains("text/xml"))
}

pub(crate) fn respond<T: XmlBody>(status: u16, value: &T, xml: bool) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if xml && let Ok(text) = to_xml(value) {
        return (
            status,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/xml"),
            )],
            text,
        )
            .into_response();
    }
    (status, axum::Json(value)).into_response()
}

pub(crate) fn error(status: u16, code: &str, message: impl Into<String>, xml: bool) -> Response {
    let body = ErrorBody {
        code: code.into(),
        message: message.into(),
        reasons: Vec::new(),
    };
    respond(status, &body, xml)
}

/// A query string that does not deserialize (a missing or repeated parameter): 400 with the usual
/// error body, not axum's plain-text rejection, so every 4xx has the documented content type.
pub(crate) fn bad_query(e: &QueryRejection, xml: bool) -> Response {
    error(400, "invalid_query", e.body_text(), xml)
}

pub(crate) fn internal(e: &dyn std::fmt::Display, xml: bool) -> Response {
    tracing::error!(target: "longhaul::testbed::http", error = %e, "internal error");
    error(500, "internal", "internal error (logged)", xml)
}

/// The service's clock, truncated to the microsecond: the API refuses times with more than six
/// fractional digits (the stores keep microseconds), so every time it writes (a free interval
/// starting now, a hold's end) must be one it would read back.
pub(crate) fn now_us() -> Timestamp {
    let t = Timestamp::now();
    Timestamp::from_microsecond(t.as_microsecond()).unwrap_or(t)
}

/// The user and role of the request's bearer token, or a 401 response.
pub(crate) async fn authenticate(state: &AppState, headers: &HeaderMap) -> Result<Actor, Response> {
    account(state, headers).await.map(|a| a.actor)
}

/// A 401 with `msg` and the `WWW-Authenticate` challenge.
pub(crate) fn unauthorized(msg: &str, xml: bool) -> Response {
    let mut r = error(401, "unauthorized", msg, xml);
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"longhaul testbed\""),
    );
    r
}

/// The request's bearer token, if it sent one.
pub(crate) fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
}

/// The account of the request's bearer token (an API token), or a 401
/// response. A calendar feed token is refused here (it reads the feeds,
/// nothing else), with a message saying so.
pub(crate) async fn account(state: &AppState, headers: &HeaderMap) -> Result<Account, Response> {
    let xml = wants_xml(headers);
    let Some(token) = bearer(headers) else {
        return Err(unauthorized(
            "send Authorization: Bearer TOKEN (create one with `longhaul testbed token add USER`)",
            xml,
        ));
    };
    if token.starts_with(FEED_TOKEN_PREFIX) {
        return Err(unauthorized(
            "this is a calendar feed token: it only reads the iCal feeds, as ?token= in their URL; \
             the API needs an API token (`longhaul testbed token add USER`)",
            xml,
        ));
    }
    match state.store.account(token).await {
        Ok(Some(account)) => Ok(account),
        Ok(None) => Err(unauthorized("unknown API token", xml)),
        Err(e) => Err(internal(&e, xml)),
    }
}

/// A JSON body, or an XML one when the request says `Content-Type: …xml`.
pub(crate) fn parse_body<T: XmlBody>(headers: &HeaderMap, body: &[u8]) -> Result<T, String> {
    let is_xml_body = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("xml"));
    if is_xml_body {
        std::str::from_utf8(body)
            .map_err(|e| e.to_string())
            .and_then(|t| from_xml(t).map_err(|e| e.to_string()))
    } else {
        serde_json::from_slice(body).map_err(|e| format!("JSON body: {e}"))
    }
}

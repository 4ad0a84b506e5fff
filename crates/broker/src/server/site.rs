//! The cross-site rules: what a web page in the user's browser could send is refused.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::{ApiError, BrokerState, Shared};

/// CORS for the origins `MQLITE_CORS` allows: a preflight (`OPTIONS` with an allowed
/// `Origin`) is answered 204 with what a browser needs to send a JSON POST with a bearer
/// token, and every answer to an allowed origin carries `Access-Control-Allow-Origin`.
/// Any other request goes on as it came (another origin meets [`same_site`]).
pub(super) async fn cors(State(s): State<BrokerState>, req: Request, next: Next) -> Response {
    let allowed = req
        .headers()
        .get(header::ORIGIN)
        .and_then(|o| o.to_str().ok())
        .and_then(|o| s.cors.allow(o))
        .and_then(|v| HeaderValue::from_str(&v).ok());
    let Some(allowed) = allowed else {
        return next.run(req).await;
    };
    let mut response = if req.method() == Method::OPTIONS {
        let mut r = StatusCode::NO_CONTENT.into_response();
        let h = r.headers_mut();
        h.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static("POST, GET, OPTIONS"),
        );
        h.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static("authorization, content-type"),
        );
        h.insert(
            header::ACCESS_CONTROL_MAX_AGE,
            HeaderValue::from_static("600"),
        );
        r
    } else {
        next.run(req).await
    };
    let h = response.headers_mut();
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, allowed);
    h.insert(header::VARY, HeaderValue::from_static("Origin"));
    response
}

/// Refuses what a web page in the user's browser could send to the broker behind their
/// back: a body that is not declared JSON (an HTML form or a "simple" fetch cannot
/// declare it without a CORS preflight, which the broker does not grant), a request
/// from another origin, and, with auth off on a loopback address, a `Host` that is not
/// a loopback name (DNS rebinding).
pub(super) fn same_site(s: &Shared, headers: &HeaderMap) -> Result<(), ApiError> {
    same_site_as(s, headers, "application/json")
}

/// [`same_site`] for a body of the media type `kind` (the SQS endpoint's is
/// `application/x-amz-json-1.0`, which a page can no more send without a preflight).
pub(super) fn same_site_as(s: &Shared, headers: &HeaderMap, kind: &str) -> Result<(), ApiError> {
    let declared = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|t| t.trim().eq_ignore_ascii_case(kind));
    if !declared {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "invalid_argument",
            format!("this body is {kind}: send Content-Type: {kind}"),
        ));
    }
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or_default();
        let origin_host = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"));
        if (origin_host.is_none() || origin_host != host) && s.cors.allow(origin).is_none() {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "permission_denied",
                format!(
                    "a request from the web origin {origin:?} is refused: only the broker's own pages may call it from a browser"
                ),
            ));
        }
    }
    if s.loopback_only && !host.is_some_and(loopback_host) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "permission_denied",
            format!(
                "Host {:?} is not a loopback name: with auth off the broker answers only \
                 requests addressed to localhost or a loopback address",
                host.unwrap_or_default()
            ),
        ));
    }
    Ok(())
}

/// Whether a `Host` header names this machine's loopback: `localhost`, 127.0.0.0/8 or
/// `[::1]`, with or without a port.
fn loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(n, _)| n),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

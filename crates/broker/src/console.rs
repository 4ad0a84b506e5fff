//! The web console at `/ui`: three assets compiled into the binary (no CDN, nothing
//! downloaded at run time), served only when the broker was started with the console
//! on. The page calls the broker's own RPCs with the operator's token, so every action
//! passes the same auth and permission checks as any client's.

use axum::Router;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;

/// The console's page.
const INDEX: &str = include_str!("../ui/index.html");
/// Its script.
const SCRIPT: &str = include_str!("../ui/app.js");
/// Its style sheet.
const STYLE: &str = include_str!("../ui/app.css");

/// Bytes the console's assets add to the binary.
pub const ASSET_BYTES: usize = INDEX.len() + SCRIPT.len() + STYLE.len();

// The console's budget is 1 MB of binary; the build fails long before the assets near it.
const _: () = assert!(
    ASSET_BYTES < 200 * 1024,
    "the console's assets passed 200 KiB"
);

/// What the page may load and where it may connect: only this origin, no inline
/// script or style, no framing. Message bodies are put into the page as text, and
/// this policy stops a script even if one slipped through.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; \
frame-ancestors 'none'";

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut response = (StatusCode::OK, body).into_response();
    let h = response.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(POLICY),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// The console's routes, merged into the broker's router when it is on.
pub(crate) fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route(
            "/ui",
            get(|| async { asset("text/html; charset=utf-8", INDEX) }),
        )
        .route("/ui/", get(|| async { Redirect::permanent("/ui") }))
        .route(
            "/ui/app.js",
            get(|| async { asset("text/javascript; charset=utf-8", SCRIPT) }),
        )
        .route(
            "/ui/app.css",
            get(|| async { asset("text/css; charset=utf-8", STYLE) }),
        )
}

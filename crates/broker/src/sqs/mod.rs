//! The SQS endpoint: Amazon SQS's AWS JSON 1.0 protocol on the broker's own address
//! (`POST /` with `X-Amz-Target: AmazonSQS.<Action>` and `Content-Type:
//! application/x-amz-json-1.0`), so that an AWS SDK is a client of the queue.
//!
//! SQS and mqlite mean almost the same things: a visibility timeout is the lease, a
//! receipt handle is the sequence number and lock token, DeleteMessage is Complete,
//! ChangeMessageVisibility is Renew (the queue's timeout) or Abandon (0), message
//! attributes are properties. docs/sqs.md has the mapping field by field; every request
//! field is honoured or refused with the error an SDK expects, never ignored.
//!
//! With the broker's auth on, a request is signed (Signature Version 4) with the key id
//! `admin` and an administrator token as the secret, or with an access key's id and
//! the secret derived for it, or carries a bearer token. A redrive policy is the
//! queue's `dead_letter_target`: a read of the dead-letter queue gathers its sources'
//! dead letters first.

mod actions;
mod attributes;
mod error;
mod sigv4;

use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use tokio::sync::watch;

use mqlite::{AnyEngine, Permission};

use crate::auth::Auth;

pub(crate) use error::SqsError;
pub(crate) use sigv4::key_secret;

/// The media type of the protocol's requests and answers.
pub(crate) const CONTENT_TYPE: &str = "application/x-amz-json-1.0";

/// The `X-Amz-Target` prefix of every action.
const TARGET_PREFIX: &str = "AmazonSQS.";

/// The account id in queue URLs and ARNs: one broker is one account.
const ACCOUNT: &str = "000000000000";

/// The region in ARNs.
const REGION: &str = "mqlite";

/// What an action needs: the broker's state and the request's headers.
pub(crate) struct Ctx<'a> {
    pub(crate) engine: &'a AnyEngine,
    pub(crate) auth: &'a Auth,
    pub(crate) headers: &'a HeaderMap,
    /// The request's path and query, which a signature covers.
    pub(crate) uri: &'a axum::http::Uri,
    /// Set when the broker shuts down: a parked long-poll answers at once.
    pub(crate) draining: watch::Receiver<bool>,
}

impl Ctx<'_> {
    /// The base of this broker's queue URLs, as the client addressed it (`Host`), so
    /// the URLs it is given lead back here (the JavaScript SDK sends a request to its
    /// QueueUrl's origin).
    fn base_url(&self) -> String {
        let host = self
            .headers
            .get(axum::http::header::HOST)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("localhost");
        format!("http://{host}/{ACCOUNT}")
    }

    fn queue_url(&self, name: &str) -> String {
        format!("{}/{name}", self.base_url())
    }
}

/// The action `X-Amz-Target` names, if it is an SQS one.
pub(crate) fn action(headers: &HeaderMap) -> Option<&str> {
    headers
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .and_then(|t| t.strip_prefix(TARGET_PREFIX))
}

/// Serves one request whose body has been read.
pub(crate) async fn serve(ctx: Ctx<'_>, body: &[u8]) -> Response {
    match run(&ctx, body).await {
        Ok(answer) => error::answer(&answer),
        Err(e) => e.into_response(),
    }
}

async fn run(ctx: &Ctx<'_>, body: &[u8]) -> Result<Value, SqsError> {
    let Some(name) = action(ctx.headers) else {
        return Err(SqsError::unknown_operation(
            "POST / is the SQS endpoint: send X-Amz-Target: AmazonSQS.<Action>",
        ));
    };
    let action = actions::Action::parse(name)?;
    authorize(ctx, action.needs(), body).await?;
    let input: Value = if body.is_empty() {
        Value::Object(Default::default())
    } else {
        serde_json::from_slice(body)
            .map_err(|e| SqsError::serialization(format!("the request body is not JSON: {e}")))?
    };
    let Value::Object(input) = input else {
        return Err(SqsError::serialization("the request body is a JSON object"));
    };
    actions::run(ctx, action, &input).await
}

/// With the broker's auth off, anyone. With it on: a request signed with AWS Signature
/// Version 4, under the key id `admin` with an administrator token as its secret (every
/// action), or under an mqlite access key's id with the secret the broker derives for it
/// ([`key_secret`], answered by CreateKey; the key's permissions apply); or one carrying
/// the broker's own `Authorization: Bearer <token>` (a key's permissions apply).
async fn authorize(ctx: &Ctx<'_>, needs: Permission, body: &[u8]) -> Result<(), SqsError> {
    if !ctx.auth.is_on() {
        return Ok(());
    }
    let header = ctx
        .headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let Some(signed) = sigv4::parse(header) else {
        return ctx
            .auth
            .check(ctx.engine, ctx.headers, Some(needs))
            .await
            .map(|_| ())
            .map_err(|e| {
                if e.status == axum::http::StatusCode::FORBIDDEN {
                    SqsError::auth("AccessDenied", e.message)
                } else {
                    SqsError::auth("MissingAuthenticationToken", e.message)
                }
            });
    };
    let signed = signed?;
    let request = sigv4::Request {
        method: "POST",
        path: ctx.uri.path(),
        query: ctx.uri.query().unwrap_or(""),
        headers: ctx.headers,
        body,
    };
    let tokens = ctx.auth.admin_tokens();
    if tokens.is_empty() {
        return Err(SqsError::auth(
            "InvalidClientTokenId",
            "no administrator token is set (MQLITE_TOKENS): SQS requests are signed with \
             one, or with a secret derived from one",
        ));
    }
    let now = ctx.engine.clock().now_ms();
    if signed.key_id == "admin" {
        return signed.verify(&request, tokens, now);
    }
    let unknown = || {
        SqsError::auth(
            "InvalidClientTokenId",
            format!(
                "the access key id {:?} is not an mqlite access key that is live (unknown, \
                 revoked or expired): sign with `admin` and an administrator token, or \
                 with a key's id and the SQS secret CreateKey answered for it",
                signed.key_id
            ),
        )
    };
    let key = ctx
        .engine
        .key(&signed.key_id)
        .await?
        .filter(|k| k.is_live(now))
        .ok_or_else(unknown)?;
    let secrets: Vec<String> = tokens.iter().map(|t| key_secret(t, &key.id)).collect();
    signed.verify(&request, &secrets, now)?;
    if key.allows(needs) {
        Ok(())
    } else {
        Err(SqsError::auth(
            "AccessDenied",
            format!(
                "access key {} lacks the `{needs}` permission this action needs",
                key.id
            ),
        ))
    }
}

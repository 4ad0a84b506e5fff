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
//! This first part serves standard queues with auth off. With the broker's auth on,
//! requests are refused until Signature Version 4 is verified (they carry no bearer
//! token); FIFO queues, redrive policies and the dead-letter actions are refused by
//! name.

mod actions;
mod attributes;
mod error;

use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use tokio::sync::watch;

use mqlite::{AnyEngine, Permission};

use crate::auth::Auth;

pub(crate) use error::SqsError;

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
    let name = name.to_owned();
    let action = actions::Action::parse(&name)?;
    authorize(ctx, action.needs()).await?;
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

/// With the broker's auth off, anyone; with it on, a bearer token or key with the
/// permission (Signature Version 4, what the SDKs send, is not verified yet).
async fn authorize(ctx: &Ctx<'_>, needs: Permission) -> Result<(), SqsError> {
    if !ctx.auth.is_on() {
        return Ok(());
    }
    let signed = ctx
        .headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("AWS4-HMAC-SHA256"));
    if signed {
        return Err(SqsError::auth(
            "InvalidClientTokenId",
            "this broker does not verify AWS Signature Version 4 yet: run it with auth \
             off (MQLITE_TOKENS=off, loopback only) for SQS clients, or send \
             Authorization: Bearer <token>",
        ));
    }
    ctx.auth
        .check(ctx.engine, ctx.headers, Some(needs))
        .await
        .map(|_| ())
        .map_err(|e| SqsError::auth("MissingAuthenticationToken", e.message))
}

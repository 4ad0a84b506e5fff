//! The mqlite v1 wire types: every request and response body of the broker, shared by
//! the broker (crate mqlite-broker) and the client ([`super::Http`], [`super::Client`]) so the two cannot drift.
//!
//! Field names are the contract's. Unknown fields are ignored; absent fields take their
//! defaults, and the engine judges them (an empty queue name is `invalid_argument`, not
//! a parse error). `body` fields are base64; times and durations are integer
//! milliseconds. Empty fields are left out of responses.

mod admin;
mod auth;
mod queue;

pub use admin::*;
pub use auth::*;
pub use queue::*;

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};

use crate::{Error, EventIdentity, Message, OutMessage, Result};

/// Whether a string is empty (for `skip_serializing_if`).
pub(crate) fn empty(s: &str) -> bool {
    s.is_empty()
}

pub(crate) fn zero(n: &i64) -> bool {
    *n == 0
}

/// A message as sent (`messages[]` of Send) and as received or peeked.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct WireMessage {
    /// The payload, base64.
    #[serde(skip_serializing_if = "empty")]
    pub body: String,
    /// The producer's id (dedup).
    #[serde(skip_serializing_if = "empty")]
    pub message_id: String,
    /// The ordering group.
    #[serde(skip_serializing_if = "empty")]
    pub group_id: String,
    /// Free-form subject.
    #[serde(skip_serializing_if = "empty")]
    pub subject: String,
    /// Correlation id.
    #[serde(skip_serializing_if = "empty")]
    pub correlation_id: String,
    /// Reply-to address.
    #[serde(skip_serializing_if = "empty")]
    pub reply_to: String,
    /// Content type of the body.
    #[serde(skip_serializing_if = "empty")]
    pub content_type: String,
    /// Application properties.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub properties: BTreeMap<String, String>,
    /// Priority 0 ..= 9, higher handed out first on a standard queue (mqlite
    /// extension; absent: 0).
    #[serde(skip_serializing_if = "zero")]
    pub priority: i64,
    /// Sequence number (out).
    #[serde(skip_serializing_if = "zero")]
    pub seq_number: i64,
    /// Claims so far (out).
    #[serde(skip_serializing_if = "zero")]
    pub delivery_count: i64,
    /// The fencing token, 32 hex characters (out, peek-lock receives).
    #[serde(skip_serializing_if = "empty")]
    pub lock_token: String,
    /// The state (out, Peek).
    #[serde(skip_serializing_if = "empty")]
    pub state: String,
    /// When it was sent (out).
    #[serde(skip_serializing_if = "zero")]
    pub enqueued_at_ms: i64,
    /// When it expires, 0 = never (out).
    #[serde(skip_serializing_if = "zero")]
    pub expires_at_ms: i64,
    /// When it is visible (out).
    #[serde(skip_serializing_if = "zero")]
    pub visible_at_ms: i64,
    /// When the lease ends (out).
    #[serde(skip_serializing_if = "zero")]
    pub locked_until_ms: i64,
    /// Why it was dead-lettered (out).
    #[serde(skip_serializing_if = "empty")]
    pub dead_letter_reason: String,
    /// The dead-letter description (out).
    #[serde(skip_serializing_if = "empty")]
    pub dead_letter_description: String,
    /// The CloudEvents `source` of the event's identity (mqlite extension; with
    /// `event_id`, the message's dedup key).
    #[serde(skip_serializing_if = "empty")]
    pub event_source: String,
    /// The CloudEvents `id` of the event's identity (mqlite extension).
    #[serde(skip_serializing_if = "empty")]
    pub event_id: String,
    /// The CloudEvents `type` (mqlite extension).
    #[serde(skip_serializing_if = "empty")]
    pub event_type: String,
    /// The CloudEvents `specversion` (mqlite extension).
    #[serde(skip_serializing_if = "empty")]
    pub event_specversion: String,
    /// The CloudEvents `time` (mqlite extension).
    #[serde(skip_serializing_if = "empty")]
    pub event_time: String,
}

/// The identity of a wire message: none without `event_source` and `event_id`; one
/// of them alone, or the other attributes without them, is `invalid_argument`.
fn wire_event(w: &mut WireMessage) -> Result<Option<EventIdentity>> {
    let (source, id) = (
        std::mem::take(&mut w.event_source),
        std::mem::take(&mut w.event_id),
    );
    let (kind, spec, time) = (
        some(std::mem::take(&mut w.event_type)),
        some(std::mem::take(&mut w.event_specversion)),
        some(std::mem::take(&mut w.event_time)),
    );
    if source.is_empty() && id.is_empty() {
        if kind.is_some() || spec.is_some() || time.is_some() {
            return Err(Error::invalid(
                "event_type, event_specversion and event_time need event_source and event_id",
            ));
        }
        return Ok(None);
    }
    if source.is_empty() || id.is_empty() {
        return Err(Error::invalid(
            "an event identity needs both event_source and event_id",
        ));
    }
    Ok(Some(EventIdentity {
        source,
        id,
        kind,
        specversion: spec,
        time,
    }))
}

fn some(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

impl WireMessage {
    /// A message to send with this body (encoded here).
    pub fn with_body(body: impl AsRef<[u8]>) -> Self {
        WireMessage {
            body: STANDARD.encode(body),
            ..Default::default()
        }
    }

    /// The decoded body.
    pub fn decoded_body(&self) -> Result<Vec<u8>> {
        STANDARD
            .decode(&self.body)
            .map_err(|e| Error::invalid(format!("body is not valid base64: {e}")))
    }

    /// The message to send.
    pub fn into_out(mut self) -> Result<OutMessage> {
        let event = wire_event(&mut self)?;
        let priority = mqlite_contract::limits::priority(self.priority)?;
        Ok(OutMessage {
            priority,
            event,
            body: self.decoded_body()?,
            message_id: some(self.message_id),
            group_id: some(self.group_id),
            subject: some(self.subject),
            correlation_id: some(self.correlation_id),
            reply_to: some(self.reply_to),
            content_type: some(self.content_type),
            properties: self.properties,
        })
    }

    /// A message's content in the wire's form (no number, token or times).
    pub fn from_content(c: OutMessage) -> Self {
        let e = c.event.unwrap_or_default();
        WireMessage {
            event_source: e.source,
            event_id: e.id,
            event_type: e.kind.unwrap_or_default(),
            event_specversion: e.specversion.unwrap_or_default(),
            event_time: e.time.unwrap_or_default(),
            body: STANDARD.encode(&c.body),
            message_id: c.message_id.unwrap_or_default(),
            group_id: c.group_id.unwrap_or_default(),
            subject: c.subject.unwrap_or_default(),
            correlation_id: c.correlation_id.unwrap_or_default(),
            reply_to: c.reply_to.unwrap_or_default(),
            content_type: c.content_type.unwrap_or_default(),
            properties: c.properties,
            priority: i64::from(c.priority),
            ..Default::default()
        }
    }

    /// A received or peeked message; `with_state` adds its state (Peek).
    pub fn from_message(m: Message, with_state: bool) -> Self {
        WireMessage {
            seq_number: m.seq.0,
            delivery_count: m.delivery_count,
            lock_token: m.lock_token.map(|t| t.to_string()).unwrap_or_default(),
            state: if with_state {
                m.state.as_str().to_owned()
            } else {
                String::new()
            },
            enqueued_at_ms: m.enqueued_at_ms,
            expires_at_ms: m.expires_at_ms,
            visible_at_ms: m.visible_at_ms,
            locked_until_ms: m.locked_until_ms,
            dead_letter_reason: m.dead_letter_reason.unwrap_or_default(),
            dead_letter_description: m.dead_letter_description.unwrap_or_default(),
            ..WireMessage::from_content(m.content)
        }
    }
}

/// The error envelope.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ErrorBody {
    /// The machine-readable code (`invalid_argument`, `lock_lost`, ...).
    pub code: String,
    /// What happened, for a person.
    pub message: String,
}

/// The discovery card (`GET /`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct DiscoveryCard {
    /// "mqlite".
    pub name: String,
    /// The broker's version.
    pub version: String,
    /// One line on what it is.
    pub description: String,
    /// "ok".
    pub status: String,
    /// bearer or none.
    pub auth: String,
    /// Where the docs are.
    pub docs: String,
    /// Every RPC path served.
    pub endpoints: Vec<String>,
    /// The health route.
    pub health: String,
    /// The metrics route.
    pub metrics: String,
    /// The console route, when enabled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ui: Option<String>,
}

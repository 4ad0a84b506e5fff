//! The mqlite v1 wire types: every request and response body of the broker, shared by
//! the server and the client ([`crate::client`]) so the two cannot drift.
//!
//! Field names are the contract's. Unknown fields are ignored; absent fields take their
//! defaults, and the engine judges them (an empty queue name is `invalid_argument`, not
//! a parse error). `body` fields are base64; times and durations are integer
//! milliseconds. Empty fields are left out of responses.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};

use mqlite::{
    AccessKey, BatchResult, Error, EventIdentity, LockToken, Message, OutMessage, QueueInfo,
    QueueStats, Result,
};

/// Whether a string is empty (for `skip_serializing_if`).
fn empty(s: &str) -> bool {
    s.is_empty()
}

fn zero(n: &i64) -> bool {
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
        Ok(OutMessage {
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

    /// A received or peeked message; `with_state` adds its state (Peek).
    pub fn from_message(m: Message, with_state: bool) -> Self {
        let c = m.content;
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
        }
    }
}

/// Send and Schedule.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct SendRequest {
    /// The queue (or topic).
    pub queue: String,
    /// The messages, 1..=1000.
    pub messages: Vec<WireMessage>,
    /// Deliver no earlier than this epoch-ms time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduled_enqueue_time_ms: Option<i64>,
    /// Time to live, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<i64>,
}

/// The sequence numbers of a send, positional (0 for a dedup conflict in a batch).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct SendResponse {
    /// One per message sent.
    pub seq_numbers: Vec<i64>,
}

/// Receive.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ReceiveRequest {
    /// The queue.
    pub queue: String,
    /// At most this many (default 1, max 256).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_messages: Option<i64>,
    /// Long-poll up to this long, ms (max 20000).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait_time_ms: Option<i64>,
    /// 0 peek-lock, 1 receive-and-delete.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receive_mode: Option<i64>,
    /// Replays a retried receive.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receive_attempt_id: Option<String>,
}

/// Messages (Receive, ReceiveDeferred, Peek).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct MessagesResponse {
    /// The messages.
    pub messages: Vec<WireMessage>,
}

/// One message by number and token (settlements, batch items).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LockItem {
    /// Its sequence number.
    pub seq_number: i64,
    /// The token of the receive, 32 hex characters.
    pub lock_token: String,
}

impl LockItem {
    /// The engine's lock reference.
    pub fn lock(&self) -> Result<mqlite::LockRef> {
        let token: LockToken = self.lock_token.parse()?;
        Ok(mqlite::LockRef {
            seq: mqlite::SeqNumber(self.seq_number),
            token,
        })
    }
}

/// Complete, Abandon, Reject, Defer, Renew.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct SettleRequest {
    /// The queue.
    pub queue: String,
    /// Its sequence number.
    pub seq_number: i64,
    /// The token of the receive.
    pub lock_token: String,
    /// Abandon: redeliver after this long, ms.
    #[serde(skip_serializing_if = "zero")]
    pub delay_ms: i64,
    /// Reject: the dead-letter reason.
    #[serde(skip_serializing_if = "empty")]
    pub dead_letter_reason: String,
    /// Reject: the dead-letter description.
    #[serde(skip_serializing_if = "empty")]
    pub dead_letter_description: String,
}

/// `{ok}` (settlements, Cancel); Renew adds the new lease end.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct OkResponse {
    /// Whether it took effect.
    pub ok: bool,
    /// Renew: the committed lease end.
    #[serde(skip_serializing_if = "zero")]
    pub locked_until_ms: i64,
}

/// CompleteBatch and RenewBatch.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct BatchRequest {
    /// The queue.
    pub queue: String,
    /// The messages.
    pub messages: Vec<LockItem>,
}

/// One item of a batch's answer.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct BatchItem {
    /// Its sequence number.
    pub seq_number: i64,
    /// Whether it took effect.
    pub ok: bool,
    /// RenewBatch: the committed lease end.
    #[serde(skip_serializing_if = "zero")]
    pub locked_until_ms: i64,
}

impl From<BatchResult> for BatchItem {
    fn from(r: BatchResult) -> Self {
        BatchItem {
            seq_number: r.seq.0,
            ok: r.ok,
            locked_until_ms: r.locked_until_ms,
        }
    }
}

/// The answer of a batch.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct BatchResponse {
    /// One per item, in order.
    pub results: Vec<BatchItem>,
}

/// ReceiveDeferred.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ReceiveDeferredRequest {
    /// The queue.
    pub queue: String,
    /// The deferred messages' numbers.
    pub seq_numbers: Vec<i64>,
}

/// Cancel.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct CancelRequest {
    /// The queue.
    pub queue: String,
    /// The scheduled message.
    pub seq_number: i64,
}

/// Peek.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct PeekRequest {
    /// The queue.
    pub queue: String,
    /// Start here (inclusive).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_seq: Option<i64>,
    /// Only this state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// At most this many (default 32, max 1000).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<i64>,
}

/// Stats (request).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct QueueRequest {
    /// The queue.
    pub queue: String,
}

/// Stats (response).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct StatsResponse {
    /// The queue.
    pub queue: String,
    /// Active messages.
    pub active: u64,
    /// Locked messages.
    pub locked: u64,
    /// Deferred messages.
    pub deferred: u64,
    /// Scheduled messages.
    pub scheduled: u64,
    /// Dead letters.
    pub dead_lettered: u64,
    /// All of the above.
    pub total: u64,
    /// Age of the oldest message, ms.
    pub oldest_message_age_ms: i64,
}

impl StatsResponse {
    /// The wire form of a queue's counts.
    pub fn of(queue: String, s: QueueStats) -> Self {
        StatsResponse {
            queue,
            active: s.active,
            locked: s.locked,
            deferred: s.deferred,
            scheduled: s.scheduled,
            dead_lettered: s.dead_lettered,
            total: s.total,
            oldest_message_age_ms: s.oldest_message_age_ms,
        }
    }
}

/// A queue's configuration as CreateQueue takes it (absent fields: the defaults).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct WireQueueConfig {
    /// queue (default) or topic.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Lease length, ms (30000).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lock_duration_ms: Option<i64>,
    /// Delivery bound (10).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_delivery_count: Option<i64>,
    /// Default TTL, ms (0 = none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_ttl_ms: Option<i64>,
    /// Dead-letter expired messages (true) or discard them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dead_letter_on_expire: Option<bool>,
    /// Dedup window, ms (0 = off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dedup_window_ms: Option<i64>,
    /// standard, group_fifo or strict_fifo.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ordering_mode: Option<String>,
    /// Dead-letter retention by age, ms (0 inherit, -1 unbounded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dlq_max_age_ms: Option<i64>,
    /// Dead-letter retention by count.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dlq_max_count: Option<i64>,
    /// Dead-letter retention by bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dlq_max_bytes: Option<i64>,
}

/// CreateQueue.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct CreateQueueRequest {
    /// The name.
    pub name: String,
    /// Its configuration.
    pub config: WireQueueConfig,
}

/// An empty object (`{}`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Empty {}

/// Subscribe.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct SubscribeRequest {
    /// The topic.
    pub topic: String,
    /// The subscription's name.
    pub name: String,
    /// Its filter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filter: Option<FilterSpec>,
}

/// A filter expression.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct FilterSpec {
    /// The expression text.
    pub expr: String,
}

/// Unsubscribe (an extension beyond the contract: the subscription and its backing
/// queue with its messages are deleted).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct UnsubscribeRequest {
    /// The topic.
    pub topic: String,
    /// The subscription's name.
    pub name: String,
}

/// TestFilter: whether a filter is valid and, given a sample message, whether it
/// matches. Nothing is stored.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct TestFilterRequest {
    /// The filter expression.
    pub expr: String,
    /// A sample message to evaluate it on (its body base64, as in Send).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<WireMessage>,
}

/// TestFilter's answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TestFilterResponse {
    /// Whether Subscribe would accept the filter.
    pub valid: bool,
    /// Why it is not valid, or why its evaluation on the sample failed.
    #[serde(skip_serializing_if = "empty")]
    pub error: String,
    /// Whether the sample message was evaluated.
    pub ran: bool,
    /// Whether the sample matched (false when it did not run or failed).
    pub matched: bool,
}

impl From<mqlite::FilterTest> for TestFilterResponse {
    fn from(t: mqlite::FilterTest) -> Self {
        TestFilterResponse {
            valid: t.valid,
            error: t.error.unwrap_or_default(),
            ran: t.ran,
            matched: t.matched,
        }
    }
}

/// One subscription.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct WireSubscription {
    /// The topic.
    pub topic: String,
    /// The name.
    pub name: String,
    /// Its filter expression (empty: every message).
    pub expr: String,
}

/// ListSubscriptions.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct SubscriptionsResponse {
    /// Every subscription.
    pub subscriptions: Vec<WireSubscription>,
}

/// One queue of ListQueues.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct WireQueue {
    /// The name.
    pub name: String,
    /// queue, topic or subscription.
    pub kind: String,
    /// Lease length, ms.
    pub lock_duration_ms: i64,
    /// Delivery bound.
    pub max_delivery_count: i64,
    /// Default TTL, ms.
    pub default_ttl_ms: i64,
    /// Dedup window, ms.
    pub dedup_window_ms: i64,
}

impl From<QueueInfo> for WireQueue {
    fn from(q: QueueInfo) -> Self {
        WireQueue {
            kind: q.kind.as_str().to_owned(),
            lock_duration_ms: q.config.lock_ms(),
            max_delivery_count: q.config.max_delivery_count,
            default_ttl_ms: q.config.default_ttl_ms(),
            dedup_window_ms: q.config.dedup_window_ms(),
            name: q.name,
        }
    }
}

/// ListQueues.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct QueuesResponse {
    /// Every queue, topic and subscription.
    pub queues: Vec<WireQueue>,
}

/// Redrive.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RedriveRequest {
    /// The queue whose dead letters move.
    pub queue: String,
    /// Move them here instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// At most this many (0 = all).
    pub max: i64,
    /// Only dead letters at least this old, ms.
    pub older_than_ms: i64,
    /// At most this many per second (0 = unthrottled).
    pub rate_per_sec: i64,
    /// Only these dead letters (an extension; empty or absent: any).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub seq_numbers: Vec<i64>,
}

/// Redrive's answer.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RedriveResponse {
    /// How many moved.
    pub moved: u64,
}

/// Purge.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct PurgeRequest {
    /// The queue whose dead letters go.
    pub queue: String,
    /// At most this many (0 = all).
    pub max: i64,
    /// Only dead letters at least this old, ms.
    pub older_than_ms: i64,
}

/// Purge's answer.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct PurgeResponse {
    /// How many were deleted.
    pub purged: u64,
}

/// Status.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct StatusResponse {
    /// The broker's version.
    pub version: String,
    /// memory, local file or remote libSQL/Turso.
    pub backend: String,
    /// Whether the data is on another machine.
    pub remote: bool,
    /// Where the data lives (remote hosts masked, never a secret).
    pub location: String,
    /// The schema token.
    pub schema_version: String,
    /// How long the store took to answer, ms.
    pub ping_ms: i64,
    /// The data's size, bytes (0 when the store cannot tell).
    pub db_size_bytes: u64,
    /// Queues.
    pub queues: u64,
    /// Topics (beyond the contract's fields; clients ignore unknown fields).
    pub topics: u64,
    /// Subscriptions.
    pub subscriptions: u64,
    /// Since the broker started, ms.
    pub uptime_ms: i64,
    /// bearer or none.
    pub auth: String,
    /// Relay intents in the served database not yet published (mqlite extension).
    pub relay_pending: u64,
    /// The age of the oldest of them, ms; 0 without one (mqlite extension).
    pub relay_oldest_pending_ms: i64,
}

/// CreateKey.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct CreateKeyRequest {
    /// The public id, 32 hex characters (absent: a random one).
    #[serde(skip_serializing_if = "empty")]
    pub id: String,
    /// A human name.
    pub name: String,
    /// send, listen, manage.
    pub permissions: Vec<String>,
    /// When it stops working, epoch ms (0 = never).
    #[serde(skip_serializing_if = "zero")]
    pub expires_at_ms: i64,
}

/// A key as listed (never its token).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct WireKey {
    /// The public id.
    pub id: String,
    /// The name.
    pub name: String,
    /// Its permissions.
    pub permissions: Vec<String>,
    /// The token, on CreateKey only: shown once.
    #[serde(skip_serializing_if = "empty")]
    pub token: String,
    /// When it was created.
    pub created_at_ms: i64,
    /// When it stops working (0 = never).
    pub expires_at_ms: i64,
    /// When it was revoked (0 = not).
    #[serde(skip_serializing_if = "zero")]
    pub revoked_at_ms: i64,
}

impl From<AccessKey> for WireKey {
    fn from(k: AccessKey) -> Self {
        WireKey {
            permissions: k
                .permissions
                .iter()
                .map(|p| p.as_str().to_owned())
                .collect(),
            id: k.id,
            name: k.name,
            token: String::new(),
            created_at_ms: k.created_at_ms,
            expires_at_ms: k.expires_at_ms,
            revoked_at_ms: k.revoked_at_ms,
        }
    }
}

/// ListKeys.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ListKeysRequest {
    /// Start after this id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after_id: Option<String>,
    /// At most this many (default 100, max 1000).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<i64>,
}

/// ListKeys' answer.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ListKeysResponse {
    /// The keys.
    pub keys: Vec<WireKey>,
    /// Where the next page starts (empty: no more).
    #[serde(skip_serializing_if = "empty")]
    pub next_after_id: String,
}

/// RevokeKey.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RevokeKeyRequest {
    /// The key's id.
    pub id: String,
}

/// WhoAmI (an extension beyond the contract): who the credential is and what it may
/// do, so a console shows only the actions the caller is allowed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct WhoAmIResponse {
    /// `admin` (an administrator token), `key` (an access key) or `anyone` (auth off).
    pub principal: String,
    /// The access key's id (keys only).
    #[serde(skip_serializing_if = "empty")]
    pub id: String,
    /// The access key's name (keys only).
    #[serde(skip_serializing_if = "empty")]
    pub name: String,
    /// What it may do: `send`, `listen`, `manage`.
    pub permissions: Vec<String>,
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

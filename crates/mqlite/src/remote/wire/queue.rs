//! The QueueService's bodies: send, receive, settle, peek, stats.

use serde::{Deserialize, Serialize};

use crate::{BatchResult, Error, LockToken, QueueStats, Result};

use super::{WireMessage, empty, zero};

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
    /// At most this many, 1 when unset or 0; more than 256 is taken as 256.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_messages: Option<i64>,
    /// Long-poll up to this long, ms (0 when unset: answer at once); more than 20000 is
    /// taken as 20000.
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
    /// The lock it names. A token that is not a lock token can hold no lease: it is
    /// `LockLost` (409 `lock_lost`, as the wire contract answers any wrong token), not
    /// a malformed request.
    pub fn lock(&self) -> Result<crate::LockRef> {
        let token: LockToken = self.lock_token.parse().map_err(|_| Error::LockLost {
            reason: crate::LockLostReason::NotIssued,
        })?;
        Ok(crate::LockRef {
            seq: crate::SeqNumber(self.seq_number),
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
    /// At most this many, 32 when unset or 0; more than 1000 is taken as 1000.
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

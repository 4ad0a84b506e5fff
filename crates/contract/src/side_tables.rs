//! What the stores keep beside the queue for the boundaries no transaction spans
//! (17.2–17.4, the relay, the trace): the consumer inbox's markers and the producer's
//! relay intents. Each table is created by the store on first use, in the database the
//! application's transaction runs in; the semantics over them live in the engine crate's
//! `inbox`, `relay` and `trace` modules.

use crate::event::Fingerprint;
use crate::types::{Message, OutMessage, SeqNumber};

/// One consumer's record that it applied one event: written in the same transaction
/// as the consumer's effect (17.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboxMarker {
    /// The consumer (an inbox is scoped by it, 17.2).
    pub consumer: String,
    /// The event's source.
    pub source: String,
    /// The event's id.
    pub id: String,
    /// The fingerprint of the envelope it applied (17.4).
    pub fingerprint: Fingerprint,
    /// When the effect committed (epoch ms, the store's clock).
    pub applied_at_ms: i64,
}

/// An intent to send, written in the producer's transaction and sent by the relay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayIntent {
    /// Its position in the producer's outbox (the relay sends in this order).
    pub seq: i64,
    /// The target queue.
    pub queue: String,
    /// The message, identity included.
    pub message: OutMessage,
    /// When the producer's transaction wrote it.
    pub created_at_ms: i64,
    /// When the relay marked it published, once it has.
    pub published_at_ms: Option<i64>,
    /// When the target refused it as a dedup conflict (the queue holds its identity
    /// with another payload), if it did: the relay sends it no more, and it waits for
    /// an operator (the backlog counts it).
    pub refused_at_ms: Option<i64>,
}

/// The relay's backlog: intents not yet published.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelayBacklog {
    /// Intents waiting to be sent.
    pub pending: u64,
    /// When the oldest of them was written.
    pub oldest_created_at_ms: Option<i64>,
    /// Intents the target refused as a dedup conflict, kept for an operator.
    pub refused: u64,
}

/// What a queue holds about a message id: its dedup entry and, while the row lives,
/// the message.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SentEvidence {
    /// The dedup entry's sequence number and expiry, while the entry is kept.
    pub dedup: Option<(SeqNumber, i64)>,
    /// The message row (any state), while it exists.
    pub message: Option<Message>,
}

/// What a sweep of the side tables removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SideSweep {
    /// Inbox markers past retention.
    pub markers: u64,
    /// Published relay intents past retention.
    pub intents: u64,
}

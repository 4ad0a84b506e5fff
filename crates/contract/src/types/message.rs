//! Messages: what a send takes, what the store did with it, and what a receive or a
//! peek returns.

use std::collections::BTreeMap;
use std::time::Duration;

use super::*;

/// A message to send.
///
/// ```
/// use mqlite_contract::OutMessage;
/// let m = OutMessage::new(r#"{"order":42}"#)
///     .with_id("order-42")          // dedup key, within the queue's window
///     .with_group("customer-7")     // FIFO among this customer's messages
///     .with_property("kind", "order.created");
/// assert_eq!(m.group_id.as_deref(), Some("customer-7"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutMessage {
    /// The payload.
    pub body: Vec<u8>,
    /// The producer's id, used for dedup when the queue has a window.
    pub message_id: Option<String>,
    /// The ordering group.
    pub group_id: Option<String>,
    /// Free-form subject.
    pub subject: Option<String>,
    /// Correlation id.
    pub correlation_id: Option<String>,
    /// Reply-to address.
    pub reply_to: Option<String>,
    /// Content type of the body.
    pub content_type: Option<String>,
    /// Application properties.
    pub properties: BTreeMap<String, String>,
    /// The event's CloudEvents identity, when it carries one: then `(source, id)` is its
    /// dedup key and `message_id` is derived from it (17.1, 4.1).
    pub event: Option<crate::event::EventIdentity>,
    /// Its priority, 0 (the default) ..= [`crate::limits::MAX_PRIORITY`]: on a standard
    /// queue a higher priority is handed out first, in sequence order within one
    /// priority; inside an ordering line (a group, a strict_fifo queue) sequence order
    /// rules and the line's head competes with its own priority (promise 20).
    pub priority: u8,
}

impl OutMessage {
    /// A message with this body and nothing else.
    pub fn new(body: impl Into<Vec<u8>>) -> Self {
        OutMessage {
            body: body.into(),
            ..Default::default()
        }
    }

    /// Sets the producer's message id.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.message_id = Some(id.into());
        self
    }

    /// Sets the subject (what filters usually route on).
    pub fn with_subject(mut self, subject: impl Into<String>) -> Self {
        self.subject = Some(subject.into());
        self
    }

    /// Sets the ordering group.
    pub fn with_group(mut self, group: impl Into<String>) -> Self {
        self.group_id = Some(group.into());
        self
    }

    /// The id the queue deduplicates this message by: the event identity's key, else
    /// the producer's message id.
    pub fn dedup_key(&self) -> Option<String> {
        match &self.event {
            Some(e) => Some(e.dedup_key()),
            None => self.message_id.clone(),
        }
    }

    /// Gives the message an event identity (see [`crate::event`]).
    pub fn with_event(mut self, event: crate::event::EventIdentity) -> Self {
        self.event = Some(event);
        self
    }

    /// Sets the priority (0 ..= 9; higher is handed out first on a standard queue).
    pub fn with_priority(mut self, priority: u8) -> Self {
        self.priority = priority;
        self
    }

    /// Adds an application property.
    pub fn with_property(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.properties.insert(key.into(), value.into());
        self
    }
}

/// When and for how long a send is visible.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendOptions {
    /// Deliver no earlier than this epoch-ms time (scheduled send).
    pub scheduled_at_ms: Option<i64>,
    /// Time to live from the visible time (overrides the queue default; zero = none).
    pub ttl: Option<Duration>,
}

impl SendOptions {
    /// When a send at `now` becomes visible, epoch ms: its scheduled time, else now.
    pub fn visible_at(&self, now: i64) -> i64 {
        self.scheduled_at_ms.unwrap_or(now).max(0)
    }
}

/// What the store did with one message of a send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnqueueSlot {
    /// Stored under this sequence number.
    Enqueued(SeqNumber),
    /// A repeat inside the dedup window: collapsed into this earlier message (4.1).
    Duplicate(SeqNumber),
    /// The id was seen in the window with another body (4.2, 4.3).
    Conflict,
    /// Sent to a topic, and no subscription's filter took it: nothing was stored
    /// (11.4). Reported as sequence number 0.
    Unrouted,
}

impl EnqueueSlot {
    /// The sequence number reported to the producer: 0 for a conflict.
    pub fn seq(&self) -> SeqNumber {
        match self {
            EnqueueSlot::Enqueued(s) | EnqueueSlot::Duplicate(s) => *s,
            EnqueueSlot::Conflict | EnqueueSlot::Unrouted => SeqNumber(0),
        }
    }
}

/// A message as received or peeked. A peek-locked one carries its lease's end
/// (`locked_until_ms`) and its fencing token; settle it with the token before then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Its sequence number (the settlement handle).
    pub seq: SeqNumber,
    /// Claims so far, this one included.
    pub delivery_count: i64,
    /// The fencing token (peek-lock receives only).
    pub lock_token: Option<LockToken>,
    /// Its state (as of the read).
    pub state: MessageState,
    /// When it was sent, epoch ms.
    pub enqueued_at_ms: i64,
    /// When it expires, epoch ms (0 = never).
    pub expires_at_ms: i64,
    /// When it became (or becomes) visible, epoch ms.
    pub visible_at_ms: i64,
    /// When the lease ends, epoch ms (0 without a lease).
    pub locked_until_ms: i64,
    /// Why it was dead-lettered.
    pub dead_letter_reason: Option<String>,
    /// The dead-letter description.
    pub dead_letter_description: Option<String>,
    /// The payload and metadata as sent.
    pub content: OutMessage,
}

impl Message {
    /// The payload.
    pub fn body(&self) -> &[u8] {
        &self.content.body
    }

    /// The lock token of a peek-lock receive. A receive-and-delete message has none and
    /// yields the all-zero token, which no store ever accepts.
    pub fn token(&self) -> LockToken {
        self.lock_token.unwrap_or(LockToken(0))
    }
}

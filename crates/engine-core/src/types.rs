//! Domain types: what goes into a queue, what comes out, and how a queue is configured.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::error::{Error, Result};

/// The default lock (lease) duration of a queue.
pub const DEFAULT_LOCK_DURATION: Duration = Duration::from_secs(30);
/// The longest lock (lease) a queue may configure.
pub const MAX_LOCK_DURATION: Duration = Duration::from_secs(24 * 3600);
/// The longest TTL or dedup window a queue may configure, and the longest age bound of a
/// redrive or purge: about a hundred years, so a time plus a span never overflows.
pub const MAX_SPAN: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
/// The default delivery bound of a queue.
pub const DEFAULT_MAX_DELIVERY_COUNT: i64 = 10;
/// How long a settlement receipt or a receive attempt replays (promises 3.2, 3.3).
pub const RECEIPT_TTL_MS: i64 = 30 * 60 * 1000;
/// The reason written on a message dead-lettered by the delivery bound (promise 6.1).
pub const REASON_MAX_DELIVERY: &str = "MaxDeliveryCountExceeded";
/// The reason written on a message dead-lettered by its TTL (promise 7.2).
pub const REASON_TTL_EXPIRED: &str = "TTLExpiredException";

/// A message's sequence number: strictly increasing per database, never reused (G1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct SeqNumber(pub i64);

impl fmt::Display for SeqNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A 128-bit random fencing token handed to the claimer of a message (promise 1.1).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct LockToken(u128);

impl LockToken {
    /// A fresh token from the operating system's random source.
    pub fn random() -> Self {
        let mut buf = [0u8; 16];
        // The OS random source failing is not recoverable in any useful way: a token that
        // is not random would silently break fencing, so refuse to go on.
        getrandom::fill(&mut buf).expect("the OS random source failed");
        LockToken(u128::from_be_bytes(buf))
    }

    /// `n` fresh tokens from one read of the operating system's random source.
    pub fn random_batch(n: usize) -> Vec<Self> {
        let mut buf = vec![0u8; n * 16];
        // As in `random`: a token that is not random would silently break fencing.
        getrandom::fill(&mut buf).expect("the OS random source failed");
        buf.chunks_exact(16)
            .map(|c| {
                let mut b = [0u8; 16];
                b.copy_from_slice(c);
                LockToken(u128::from_be_bytes(b))
            })
            .collect()
    }

    /// The token's 128 bits.
    pub fn as_u128(&self) -> u128 {
        self.0
    }

    /// A token from its 128 bits.
    pub fn from_u128(v: u128) -> Self {
        LockToken(v)
    }
}

impl fmt::Display for LockToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

impl fmt::Debug for LockToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LockToken({self})")
    }
}

impl FromStr for LockToken {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        if s.len() != 32 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Error::invalid("a lock token is 32 hexadecimal characters"));
        }
        u128::from_str_radix(s, 16)
            .map(LockToken)
            .map_err(|_| Error::invalid("a lock token is 32 hexadecimal characters"))
    }
}

macro_rules! string_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name { $($(#[$vm])* $variant),+ }

        impl $name {
            /// The canonical text, as stored and as spoken on the wire.
            pub fn as_str(&self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = Error;
            fn from_str(s: &str) -> Result<Self> {
                match s {
                    $($text => Ok($name::$variant),)+
                    other => Err(Error::invalid(format!(
                        concat!("unknown ", stringify!($name), " {:?}"), other))),
                }
            }
        }
    };
}

string_enum! {
    /// How a queue orders the messages it hands out (promises 5.1–5.3).
    OrderingMode {
        /// Groups are FIFO among themselves; ungrouped messages are unordered.
        Standard => "standard",
        /// As standard, and every message must carry a group id.
        GroupFifo => "group_fifo",
        /// One line for the whole queue: at most one message in flight.
        StrictFifo => "strict_fifo",
    }
}

string_enum! {
    /// The state column of a message.
    MessageState {
        /// Waiting to be received.
        Active => "active",
        /// Claimed under a lease.
        Locked => "locked",
        /// Set aside; only ReceiveDeferred returns it.
        Deferred => "deferred",
        /// Hidden until its visible time.
        Scheduled => "scheduled",
        /// Settled (rows are deleted on completion; the state exists for the schema).
        Completed => "completed",
        /// In the dead-letter state.
        DeadLettered => "dead_lettered",
    }
}

string_enum! {
    /// What a queue name denotes (queues, topics and subscriptions share one namespace).
    QueueKind {
        /// A plain queue.
        Queue => "queue",
        /// A topic (fans out to subscriptions).
        Topic => "topic",
        /// A subscription of a topic.
        Subscription => "subscription",
    }
}

/// Per-queue configuration, with the defaults of the wire contract.
///
/// ```
/// use std::time::Duration;
/// use mqlite_engine_core::{OrderingMode, QueueConfig};
/// let orders = QueueConfig {
///     lock_duration: Duration::from_secs(60), // a handler has a minute before redelivery
///     max_delivery_count: 5,                  // the fifth failed delivery dead-letters
///     dedup_window: Duration::from_secs(600), // a resend within 10 minutes collapses
///     ordering_mode: OrderingMode::GroupFifo,
///     ..Default::default()
/// };
/// assert!(orders.validate().is_ok());
/// assert!(QueueConfig { lock_duration: Duration::ZERO, ..Default::default() }.validate().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueConfig {
    /// Lease length of a claim (default 30 s, at most [`MAX_LOCK_DURATION`]).
    pub lock_duration: Duration,
    /// Claims allowed before dead-lettering (default 10).
    pub max_delivery_count: i64,
    /// TTL applied to sends without one ([`Duration::ZERO`] = none).
    pub default_ttl: Duration,
    /// Whether an expired message is dead-lettered (true) or discarded.
    pub dead_letter_on_expire: bool,
    /// Producer dedup window ([`Duration::ZERO`] = off).
    pub dedup_window: Duration,
    /// The ordering mode.
    pub ordering_mode: OrderingMode,
    /// Dead-letter retention by age, in milliseconds because it is three-valued like its
    /// two siblings: 0 inherits the engine default, > 0 bounds, < 0 is unbounded.
    pub dlq_max_age_ms: i64,
    /// Dead-letter retention by count (0 inherit, > 0 bound, < 0 unbounded).
    pub dlq_max_count: i64,
    /// Dead-letter retention by body bytes (0 inherit, > 0 bound, < 0 unbounded).
    pub dlq_max_bytes: i64,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            lock_duration: DEFAULT_LOCK_DURATION,
            max_delivery_count: DEFAULT_MAX_DELIVERY_COUNT,
            default_ttl: Duration::ZERO,
            dead_letter_on_expire: true,
            dedup_window: Duration::ZERO,
            ordering_mode: OrderingMode::Standard,
            dlq_max_age_ms: 0,
            dlq_max_count: 0,
            dlq_max_bytes: 0,
        }
    }
}

impl QueueConfig {
    /// Checks the ranges a queue configuration must respect.
    pub fn validate(&self) -> Result<()> {
        if self.lock_duration < Duration::from_millis(1) {
            return Err(Error::invalid("lock_duration must be at least 1 ms"));
        }
        if self.lock_duration > MAX_LOCK_DURATION {
            return Err(Error::invalid("lock_duration must be at most one day"));
        }
        if self.max_delivery_count < 1 {
            return Err(Error::invalid("max_delivery_count must be >= 1"));
        }
        if self.default_ttl > MAX_SPAN {
            return Err(Error::invalid("default_ttl must be at most 100 years"));
        }
        if self.dedup_window > MAX_SPAN {
            return Err(Error::invalid("dedup_window must be at most 100 years"));
        }
        Ok(())
    }

    /// The lease length in milliseconds, as stores record it.
    pub fn lock_ms(&self) -> i64 {
        millis(self.lock_duration)
    }

    /// The default TTL in milliseconds (0 = none), as stores record it.
    pub fn default_ttl_ms(&self) -> i64 {
        millis(self.default_ttl)
    }

    /// The dedup window in milliseconds (0 = off), as stores record it.
    pub fn dedup_window_ms(&self) -> i64 {
        millis(self.dedup_window)
    }
}

/// Whole milliseconds of a duration, saturating at `i64::MAX`: the unit stores record.
pub fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// The duration of `ms` recorded milliseconds; a negative count is zero.
pub fn from_millis(ms: i64) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// A queue's name, kind and configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueInfo {
    /// The queue's name.
    pub name: String,
    /// What the name denotes.
    pub kind: QueueKind,
    /// Its configuration.
    pub config: QueueConfig,
}

/// A message to send.
///
/// ```
/// use mqlite_engine_core::OutMessage;
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

/// A message as received or peeked.
///
/// ```no_run
/// # async fn demo(mq: mqlite_engine_core::Engine<impl mqlite_engine_core::Store>)
/// # -> mqlite_engine_core::Result<()> {
/// if let Some(m) = mq.receive_one("jobs").await? {
///     println!("#{} delivery {}: {:?}", m.seq, m.delivery_count, m.body());
///     // The lease ends at m.locked_until_ms; settle with the token before then.
///     mq.complete("jobs", &m).await?;
/// }
/// # Ok(()) }
/// ```
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

/// How a receive hands messages out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReceiveMode {
    /// Claim under a lease; settle later (promise 1.1).
    #[default]
    PeekLock,
    /// Delete in the claim's own transaction; no lease (promise 1.7).
    ReceiveAndDelete,
}

/// Parameters of a receive.
///
/// ```
/// use std::time::Duration;
/// use mqlite_engine_core::{ReceiveMode, ReceiveOptions};
/// // Up to 32 messages, waiting up to 5 s for the first one.
/// let batch = ReceiveOptions { wait: Duration::from_secs(5), ..ReceiveOptions::batch(32) };
/// assert_eq!(batch.mode, ReceiveMode::PeekLock);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiveOptions {
    /// At most this many messages (1..=256, default 1).
    pub max_messages: u32,
    /// Long-poll for up to this long (at most 20 s, default zero: no wait).
    pub wait: Duration,
    /// Peek-lock or receive-and-delete.
    pub mode: ReceiveMode,
    /// A client-chosen id that makes retries of this receive replay it (promise 3.3).
    pub attempt_id: Option<String>,
}

impl Default for ReceiveOptions {
    fn default() -> Self {
        ReceiveOptions {
            max_messages: 1,
            wait: Duration::ZERO,
            mode: ReceiveMode::PeekLock,
            attempt_id: None,
        }
    }
}

impl ReceiveOptions {
    /// A batch of up to `n` messages.
    pub fn batch(n: u32) -> Self {
        ReceiveOptions {
            max_messages: n,
            ..Default::default()
        }
    }
}

/// The claim parameters a store sees (validated by the engine).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimSpec {
    /// At most this many messages.
    pub max_messages: u32,
    /// Peek-lock or receive-and-delete.
    pub mode: ReceiveMode,
    /// Replay key for retries.
    pub attempt_id: Option<String>,
}

/// A settlement verb with its effect-bearing arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settlement {
    /// Delete the message (2.1).
    Complete,
    /// Return it to active, or park it for `delay` (2.2).
    Abandon {
        /// Backoff before redelivery (zero = now).
        delay: Duration,
    },
    /// Dead-letter it with the caller's reason (2.3).
    Reject {
        /// The dead-letter reason.
        reason: String,
        /// The dead-letter description.
        description: String,
    },
    /// Set it aside for ReceiveDeferred (2.4).
    Defer,
}

impl Settlement {
    /// The operation name, as recorded in receipts.
    pub fn op(&self) -> &'static str {
        match self {
            Settlement::Complete => "complete",
            Settlement::Abandon { .. } => "abandon",
            Settlement::Reject { .. } => "reject",
            Settlement::Defer => "defer",
        }
    }

    /// The effect-bearing arguments, canonically encoded for the receipt key (3.2).
    pub fn receipt_args(&self) -> String {
        match self {
            Settlement::Complete | Settlement::Defer => String::new(),
            Settlement::Abandon { delay } => millis(*delay).to_string(),
            // A length prefix keeps ("a:b", "c") and ("a", "b:c") apart.
            Settlement::Reject {
                reason,
                description,
            } => format!("{}:{reason}{description}", reason.len()),
        }
    }
}

/// One message addressed by its sequence number and lock token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockRef {
    /// Sequence number.
    pub seq: SeqNumber,
    /// Lock token presented.
    pub token: LockToken,
}

impl From<&Message> for LockRef {
    fn from(m: &Message) -> Self {
        LockRef {
            seq: m.seq,
            token: m.token(),
        }
    }
}

/// The outcome of one item of a batch settlement or renewal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchResult {
    /// Sequence number of the item.
    pub seq: SeqNumber,
    /// Whether it took effect (or replayed).
    pub ok: bool,
    /// The committed lease end (renewals; 0 otherwise or when not ok).
    pub locked_until_ms: i64,
    /// Why it was not ok (None when ok).
    pub lost: Option<crate::error::LockLostReason>,
}

/// Parameters of a Peek.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeekOptions {
    /// Start at this sequence number (inclusive).
    pub from_seq: Option<SeqNumber>,
    /// Only messages in this state.
    pub state: Option<MessageState>,
    /// At most this many (1..=1000, default 32).
    pub max: u32,
}

impl Default for PeekOptions {
    fn default() -> Self {
        PeekOptions {
            from_seq: None,
            state: None,
            max: 32,
        }
    }
}

/// Counts per state of one queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueStats {
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
    /// Age of the oldest non-dead-lettered message, ms (0 when none).
    pub oldest_message_age_ms: i64,
}

/// Parameters of a Redrive (promise 6.2).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RedriveOptions {
    /// Move to this queue instead of back to the source.
    pub target: Option<String>,
    /// At most this many (0 = all).
    pub max: u64,
    /// Only dead letters at least this old (zero = any).
    pub older_than: Duration,
    /// At most this many per second (0 = unthrottled).
    pub rate_per_sec: u64,
    /// Only these dead letters (empty = any). A number that is not a dead letter of
    /// the queue, or not old enough, is left alone; the bounds above still apply.
    pub seq_numbers: Vec<SeqNumber>,
}

/// Parameters of a Purge (promise 6.2).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PurgeOptions {
    /// At most this many (0 = all).
    pub max: u64,
    /// Only dead letters at least this old (zero = any).
    pub older_than: Duration,
}

/// Engine-wide dead-letter retention defaults (promise 8.3); 0 means unbounded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetentionDefaults {
    /// Maximum age of a dead letter (zero = unbounded).
    pub max_age: Duration,
    /// Maximum dead letters per queue.
    pub max_count: i64,
    /// Maximum dead-letter body bytes per queue.
    pub max_bytes: i64,
}

impl RetentionDefaults {
    /// The age bound in milliseconds, as [`RetentionDefaults::resolve`] takes it.
    pub fn max_age_ms(&self) -> i64 {
        millis(self.max_age)
    }

    /// Resolves a queue's bound against the engine default: 0 inherits, > 0 overrides,
    /// < 0 is explicitly unbounded. The result is 0 for "no bound".
    pub fn resolve(queue_value: i64, engine_default: i64) -> i64 {
        match queue_value {
            0 => engine_default.max(0),
            v if v > 0 => v,
            _ => 0,
        }
    }
}

/// One background recovery task a store runs on request (the `recover` boundary).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecoverTask {
    /// Open: every locked row is an orphan of a previous process (3.1).
    Orphans,
    /// Expired leases back to active, or dead-lettered at the bound (1.4).
    Reaper,
    /// Due scheduled rows to active (7.1).
    Scheduler,
    /// Expired messages dead-lettered or discarded (7.2).
    Ttl,
    /// Dead-letter retention with these engine defaults (8.1–8.3).
    Retention(RetentionDefaults),
    /// Expired receipts, receive attempts and dedup entries pruned.
    Janitor,
}

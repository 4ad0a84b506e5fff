//! A queue's configuration and what the store says of one: info, counts, the
//! parameters of the operator's calls (peek, redrive, purge), retention, recovery.

use std::time::Duration;

use crate::error::{Error, Result};

use super::*;

/// Per-queue configuration, with the defaults of the wire contract.
///
/// ```
/// use std::time::Duration;
/// use mqlite_contract::OrderingMode;
/// use mqlite_contract::QueueConfig;
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
    /// Where this queue's dead letters go (None: they stay here, in the dead-letter
    /// state). With a target, a dead letter is moved to that queue as an active message
    /// (delivery count reset, as a redrive to a target does) by every sweep, and at once
    /// by `Engine::forward_dead_letters`: the shape of
    /// SQS's separate dead-letter queue. The target must be a queue, not this one.
    pub dead_letter_target: Option<String>,
    /// Refuse a send without a message id (`InvalidArgument`), for producers that must
    /// name each message: an SQS FIFO queue without ContentBasedDeduplication. False by
    /// default: an id-less message is deduplicated by its body's digest (4.1).
    pub require_message_id: bool,
    /// Whether the queue takes sends and hands out messages (default
    /// [`QueueStatus::Active`]); pause and resume with `Engine::set_queue_status`.
    pub status: QueueStatus,
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
            dead_letter_target: None,
            require_message_id: false,
            status: QueueStatus::Active,
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
        if self.dead_letter_target.as_deref() == Some("") {
            return Err(Error::invalid(
                "dead_letter_target is a queue's name (None keeps dead letters here)",
            ));
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
    /// Only these dead letters (`None`, the default: any). A selection moves only what
    /// it names — an empty one moves nothing, so a filter that matched nothing never
    /// redrives the whole queue. A number that is not a dead letter of the queue, or not
    /// old enough, is left alone; the bounds above still apply.
    pub seq_numbers: Option<Vec<SeqNumber>>,
}

impl RedriveOptions {
    /// Every dead letter of the queue, back to it (the bounds at their defaults).
    pub fn all() -> Self {
        RedriveOptions::default()
    }

    /// Only these dead letters, back to the queue (none when `seqs` is empty).
    pub fn only(seqs: impl IntoIterator<Item = SeqNumber>) -> Self {
        RedriveOptions {
            seq_numbers: Some(seqs.into_iter().collect()),
            ..Default::default()
        }
    }
}

/// Parameters of a Purge (promise 6.2).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PurgeOptions {
    /// At most this many (0 = all).
    pub max: u64,
    /// Only dead letters at least this old (zero = any).
    pub older_than: Duration,
    /// Every message of the queue in any state, not only its dead letters (SQS's
    /// PurgeQueue): active, scheduled, deferred and locked ones too; a lock held on one
    /// of them is lost. `max` and `older_than` must then be zero.
    pub every_state: bool,
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
    /// Free pages given back to the file system, at most `max_pages` of them: a local
    /// SQLite file in `auto_vacuum = INCREMENTAL` mode (every file this version creates)
    /// truncates its free list. Asked only of a store whose
    /// [`Store::reclaims_pages`](crate::Store::reclaims_pages) says yes; redb answers 0.
    Vacuum {
        /// The most pages one step frees (bounds the step's time).
        max_pages: u32,
    },
}

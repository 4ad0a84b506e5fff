//! What a handler answers and what the worker does with it: handler errors, the retry
//! policy with its backoff, and the worker's report.

use std::time::Duration;

use mqlite_contract::error::Error;

/// What a handler says about a message it could not process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandlerError {
    /// Try again later (with backoff), dead-lettering at the attempt bound.
    Retry(String),
    /// Never try again: dead-letter it now with this text.
    Permanent(String),
    /// Never try again: dead-letter it now under this reason (the consumer inbox's
    /// `InboxConflict`, say) and description.
    DeadLetter {
        /// The dead-letter reason.
        reason: String,
        /// What happened.
        description: String,
    },
}

impl HandlerError {
    /// A failure worth retrying.
    pub fn retry(cause: impl std::fmt::Display) -> Self {
        HandlerError::Retry(cause.to_string())
    }

    /// A failure no retry will cure.
    pub fn permanent(cause: impl std::fmt::Display) -> Self {
        HandlerError::Permanent(cause.to_string())
    }
}

impl From<Error> for HandlerError {
    fn from(e: Error) -> Self {
        HandlerError::Retry(e.to_string())
    }
}

/// How a failed message is retried. The default: 1 s before the second delivery,
/// doubling up to 300 s, with up to 20 % added at random, and 10 attempts before a
/// retryable failure dead-letters the message ([`REASON_RETRIES_EXHAUSTED`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// The delay before the second delivery (default 1 s).
    pub initial_backoff: Duration,
    /// The longest delay (default 300 s).
    pub max_backoff: Duration,
    /// Each retry waits this many times longer than the one before (default 2).
    pub multiplier: f64,
    /// Up to this fraction of each delay is added at random, so failing consumers do
    /// not retry in step (0 = none; default 0.2).
    pub jitter: f64,
    /// After this many deliveries a retryable failure dead-letters the message with the
    /// error's text (default 10; the queue's own max_delivery_count still applies).
    pub max_attempts: i64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(300),
            multiplier: 2.0,
            jitter: 0.2,
            max_attempts: 10,
        }
    }
}

impl RetryPolicy {
    /// The delay before the delivery after `delivery_count`, jitter included.
    pub fn backoff(&self, delivery_count: i64) -> Duration {
        let exponent = i32::try_from(delivery_count.saturating_sub(1).clamp(0, 64)).unwrap_or(64);
        let base = self.initial_backoff.as_secs_f64() * self.multiplier.max(1.0).powi(exponent);
        let capped = base.min(self.max_backoff.as_secs_f64());
        let jitter = if self.jitter > 0.0 {
            capped * self.jitter.min(1.0) * unit_random()
        } else {
            0.0
        };
        Duration::from_secs_f64((capped + jitter).min(self.max_backoff.as_secs_f64() * 2.0))
    }
}

/// A number in [0, 1) from the operating system's random source.
fn unit_random() -> f64 {
    let bits = mqlite_contract::types::LockToken::random().as_u128() as u64 >> 11;
    bits as f64 / (1u64 << 53) as f64
}

/// What a worker did, returned when it stops.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerReport {
    /// Messages handled and completed.
    pub completed: u64,
    /// Messages abandoned for a retry after a retryable failure.
    pub retried: u64,
    /// Messages dead-lettered: a permanent failure or the attempt bound.
    pub dead_lettered: u64,
    /// Handlers that panicked (their messages were abandoned for a retry).
    pub panicked: u64,
    /// Handlers still running when the grace period ended (their messages were
    /// abandoned, for another consumer).
    pub abandoned_at_shutdown: u64,
    /// Settlements refused with LockLost (the lease was lost despite renewals).
    pub lock_lost: u64,
    /// Prefetched messages never handed to a handler: abandoned at shutdown for another
    /// consumer, or whose lease was lost while they waited in the buffer.
    pub returned_unstarted: u64,
    /// Handlers dropped at the maximum runtime (their messages given back).
    pub timed_out: u64,
    /// Handlers dropped for showing no progress within the heartbeat timeout (their
    /// messages given back).
    pub stalled: u64,
}

/// The reason a worker writes on a message whose handler failed permanently
/// ([`HandlerError::Permanent`]); the description is the handler's error.
pub const REASON_HANDLER_FAILED: &str = "HandlerFailed";

/// The reason a worker writes on a message whose retryable failures used up the
/// policy's attempts ([`RetryPolicy::max_attempts`]); the description is the last
/// error.
pub const REASON_RETRIES_EXHAUSTED: &str = "RetriesExhausted";

//! Receives and settlements: the receive's parameters, the claim a store sees, the
//! settlement verbs, locks and batch outcomes.

use std::time::Duration;

use super::*;

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
/// use mqlite_contract::{ReceiveMode, ReceiveOptions};
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

//! Memory bounds: a global budget for the request bodies and answers in flight, and a
//! cap on one answer's size.
//!
//! - A request body takes its `Content-Length` (or the request limit, when the length is
//!   not declared) from the budget before it is read, and gives it back when the request
//!   is answered: concurrent large sends wait their turn instead of growing the heap.
//! - A Receive or Peek answer stops adding messages before it passes
//!   [`MemoryLimits::max_answer_bytes`], returning what fits (at least one message).
//!   Peek reads page by page and cuts the answer where it is full. Receive cannot claim
//!   a message it then leaves out (the message would stay locked, its delivery counted),
//!   so when `max_messages` messages could pass the cap it claims in rounds sized by the
//!   largest message the broker accepts, and stops when the next round might not fit.
//!   The first round (after it has claimed: a parked long-poll holds nothing) and the
//!   first Peek page wait for their share of the budget; later rounds and pages are
//!   read only if their share is free at once, else the answer ends there. A request
//!   thus waits for the budget at most once after its body's share, and requests that
//!   hold shares never wait on each other.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The default budget for request bodies and answers in flight (48 MiB: one largest
/// request and one largest answer at a time; a request costs a few times its size in
/// memory while it is parsed and decoded).
pub const DEFAULT_MEMORY_BUDGET_BYTES: usize = 48 << 20;
/// The default cap on one Receive or Peek answer (16 MiB).
pub const DEFAULT_MAX_ANSWER_BYTES: usize = 16 << 20;
/// What a message's fields other than its body may add to its answer at most, as
/// counted here: 64 properties of typical size and the fixed fields.
const FIELDS_ALLOWANCE: usize = 16 << 10;

/// The broker's memory bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryLimits {
    /// Request bodies and answers in flight, bytes (`MQLITE_MEMORY_BUDGET_BYTES`); at
    /// least the request limit and the answer cap.
    pub budget_bytes: usize,
    /// The largest Receive or Peek answer, bytes (`MQLITE_MAX_ANSWER_BYTES`).
    pub max_answer_bytes: usize,
}

impl Default for MemoryLimits {
    fn default() -> Self {
        MemoryLimits {
            budget_bytes: DEFAULT_MEMORY_BUDGET_BYTES,
            max_answer_bytes: DEFAULT_MAX_ANSWER_BYTES,
        }
    }
}

/// The budget: a semaphore of KiB.
pub(crate) struct Budget {
    kib: Arc<Semaphore>,
    total_kib: u32,
}

/// A share of the budget, given back when dropped.
pub(crate) struct Share(Option<OwnedSemaphorePermit>);

impl Share {
    /// Gives back what exceeds `bytes` (a round taken for its worst case, once its
    /// messages are read).
    pub(crate) fn shrink_to(&mut self, bytes: usize) {
        let keep = bytes.div_ceil(1024).max(1);
        if let Some(permit) = &mut self.0
            && permit.num_permits() > keep
        {
            drop(permit.split(permit.num_permits() - keep));
        }
    }
}

impl Budget {
    pub(crate) fn new(bytes: usize) -> Self {
        let total_kib = u32::try_from(bytes.div_ceil(1024))
            .unwrap_or(u32::MAX)
            .clamp(1, Semaphore::MAX_PERMITS as u32);
        Budget {
            kib: Arc::new(Semaphore::new(total_kib as usize)),
            total_kib,
        }
    }

    /// Waits for `bytes` of the budget (a share larger than the whole budget takes the
    /// whole budget, so it waits for everything else but is never refused).
    pub(crate) async fn take(&self, bytes: usize) -> Share {
        let kib = u32::try_from(bytes.div_ceil(1024))
            .unwrap_or(u32::MAX)
            .clamp(1, self.total_kib);
        Share(self.kib.clone().acquire_many_owned(kib).await.ok())
    }
}

impl Budget {
    /// `bytes` of the budget if they are free now. A request waits for the budget at
    /// most once (its first share after its body's): more shares are only taken when
    /// free, so requests holding shares never wait on each other.
    pub(crate) fn try_take(&self, bytes: usize) -> Option<Share> {
        let kib = u32::try_from(bytes.div_ceil(1024))
            .unwrap_or(u32::MAX)
            .clamp(1, self.total_kib);
        self.kib
            .clone()
            .try_acquire_many_owned(kib)
            .ok()
            .map(|p| Share(Some(p)))
    }
}

/// The most an answer may hold of one message: its body in base64 and its fields.
pub(crate) fn worst_message(max_message_bytes: usize) -> usize {
    max_message_bytes.div_ceil(3) * 4 + FIELDS_ALLOWANCE
}

/// How many bytes a message takes in an answer, about: its body in base64 and its
/// fields.
pub(crate) fn answer_bytes(m: &mqlite::Message) -> usize {
    let c = &m.content;
    let text = |v: &Option<String>| v.as_ref().map_or(0, String::len);
    let properties: usize = c
        .properties
        .iter()
        .map(|(k, v)| k.len() + v.len() + 8)
        .sum();
    c.body.len().div_ceil(3) * 4
        + text(&c.message_id)
        + text(&c.group_id)
        + text(&c.subject)
        + text(&c.correlation_id)
        + text(&c.reply_to)
        + text(&c.content_type)
        + text(&m.dead_letter_reason)
        + text(&m.dead_letter_description)
        + properties
        + 512
}

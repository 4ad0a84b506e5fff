//! What an enqueue decides before any store writes, the same for every store: when a
//! send becomes visible and expires (7.1, 7.2), which slot of a batch is fresh, a
//! duplicate or a conflict (4.1–4.3), and which line each fresh message joins and
//! whether it waits there (the line rule in [`mqlite_contract::store`]). The stores only look up
//! what these need (live dedup entries, busy lines) and write the result.

use std::collections::{BTreeSet, HashMap, HashSet};

use mqlite_contract::dedup::dedup_key;
use mqlite_contract::types::{
    EnqueueSlot, MessageState, OrderingMode, OutMessage, QueueConfig, SendOptions, SeqNumber,
};

/// When a send becomes visible, in which state it is stored, and when it expires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// Scheduled (future visible time) or active.
    pub state: MessageState,
    /// The visible time, epoch ms.
    pub visible_at: i64,
    /// The TTL deadline, anchored at the visible time (0 = none).
    pub expires_at: i64,
}

impl Timing {
    /// The timing of a send at `now` with `options` into a queue of `config`.
    pub fn of(now: i64, options: &SendOptions, config: &QueueConfig) -> Self {
        let visible_at = options.visible_at(now);
        let ttl = options
            .ttl
            .map_or_else(|| config.default_ttl_ms(), mqlite_contract::types::millis);
        Timing {
            state: if visible_at > now {
                MessageState::Scheduled
            } else {
                MessageState::Active
            },
            visible_at,
            expires_at: if ttl > 0 {
                visible_at.saturating_add(ttl)
            } else {
                0
            },
        }
    }
}

/// A paused queue takes no send (19.1), a group_fifo queue no message without a group
/// (5.2), and a queue that requires message ids none without an id: the whole send is
/// refused.
pub fn require_groups(
    queue: &str,
    config: &QueueConfig,
    messages: &[OutMessage],
) -> mqlite_contract::Result<()> {
    if !config.status.takes_sends() {
        return Err(mqlite_contract::Error::QueuePaused {
            queue: queue.to_owned(),
            status: config.status,
        });
    }
    for m in messages {
        mqlite_contract::limits::priority(i64::from(m.priority))?;
    }
    if config.ordering_mode == OrderingMode::GroupFifo
        && messages
            .iter()
            .any(|m| m.group_id.as_deref().is_none_or(str::is_empty))
    {
        return Err(mqlite_contract::Error::GroupRequired {
            queue: queue.to_owned(),
        });
    }
    if config.require_message_id
        && messages
            .iter()
            .any(|m| m.message_id.as_deref().is_none_or(str::is_empty) && m.event.is_none())
    {
        return Err(mqlite_contract::Error::invalid(format!(
            "queue {queue:?} requires a message id on every send (require_message_id)"
        )));
    }
    Ok(())
}

/// What becomes of one message of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Stored afresh, with its dedup entry `(key, body hash)` when the queue dedups.
    Insert {
        /// The dedup key and body hash to record.
        key: Option<(String, String)>,
    },
    /// A repeat of this live earlier message (4.1).
    Duplicate(SeqNumber),
    /// A repeat of the message at this index of the same batch.
    DuplicateOf(usize),
    /// Its id was seen with another body (4.2, 4.3).
    Conflict,
}

/// The slots of a batch its plan stores afresh, and the line each joins (5.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fresh {
    /// The fresh slots' indexes in the batch, in order.
    pub slots: Vec<usize>,
    /// The line of each fresh slot (None: no line), in the same order.
    pub lines: Vec<Option<String>>,
}

impl Fresh {
    /// The fresh slots of `plans` and their lines in a queue of `mode`.
    pub fn of(plans: &[Plan], messages: &[OutMessage], mode: OrderingMode) -> Self {
        let slots: Vec<usize> = (0..messages.len())
            .filter(|i| matches!(plans[*i], Plan::Insert { .. }))
            .collect();
        let lines = slots
            .iter()
            .map(|i| line_of(mode, messages[*i].group_id.as_deref()))
            .collect();
        Fresh { slots, lines }
    }

    /// The distinct lines the fresh slots join (the ones whose busyness to look up).
    pub fn distinct_lines(&self) -> BTreeSet<String> {
        self.lines.iter().flatten().cloned().collect()
    }
}

/// What the store did with each slot, once the fresh slots are stored under `seqs`
/// (slot index -> sequence number).
pub fn slots(plans: &[Plan], seqs: &HashMap<usize, SeqNumber>) -> Vec<EnqueueSlot> {
    plans
        .iter()
        .enumerate()
        .map(|(i, plan)| match plan {
            Plan::Insert { .. } => EnqueueSlot::Enqueued(seqs[&i]),
            Plan::Duplicate(seq) => EnqueueSlot::Duplicate(*seq),
            Plan::DuplicateOf(j) => EnqueueSlot::Duplicate(seqs[j]),
            Plan::Conflict => EnqueueSlot::Conflict,
        })
        .collect()
}

/// The dedup keys of a batch: `(key, body hash)` per message when the queue has a
/// window, else None.
pub fn dedup_keys(messages: &[OutMessage], config: &QueueConfig) -> Vec<Option<(String, String)>> {
    messages
        .iter()
        .map(|m| (!config.dedup_window.is_zero()).then(|| dedup_key(m)))
        .collect()
}

/// The plan of every slot, given the live dedup entries (`key -> (seq, body hash)`):
/// against those first, then against earlier slots of the same batch.
pub fn plan(
    keys: &[Option<(String, String)>],
    live: &HashMap<String, (SeqNumber, String)>,
) -> Vec<Plan> {
    let mut first: HashMap<&str, (usize, &str)> = HashMap::new();
    keys.iter()
        .enumerate()
        .map(|(i, key)| match key {
            None => Plan::Insert { key: None },
            Some((k, hash)) => match (live.get(k), first.get(k.as_str())) {
                (Some((seq, h)), _) if h == hash => Plan::Duplicate(*seq),
                (Some(_), _) => Plan::Conflict,
                (None, Some((j, h))) if h == hash => Plan::DuplicateOf(*j),
                (None, Some(_)) => Plan::Conflict,
                (None, None) => {
                    first.insert(k, (i, hash));
                    Plan::Insert {
                        key: Some((k.clone(), hash.clone())),
                    }
                }
            },
        })
        .collect()
}

/// The line of a message with `group` on a queue of `mode`: the group on standard and
/// group_fifo, `""` (one line for the queue) on strict_fifo, none when ungrouped.
pub fn line_of(mode: OrderingMode, group: Option<&str>) -> Option<String> {
    match mode {
        OrderingMode::StrictFifo => Some(String::new()),
        OrderingMode::Standard | OrderingMode::GroupFifo => {
            group.filter(|g| !g.is_empty()).map(str::to_owned)
        }
    }
}

/// Whether each of `lines` (in the order the messages take their sequence numbers)
/// waits: its line is busy already, or an earlier one of these joined it first.
pub fn waiting_flags(lines: &[Option<String>], busy: &HashSet<String>) -> Vec<bool> {
    let mut seen: HashSet<&str> = HashSet::new();
    lines
        .iter()
        .map(|line| match line {
            None => false,
            Some(l) => busy.contains(l) || !seen.insert(l.as_str()),
        })
        .collect()
}

//! The reference model of one queue: its messages, their lines and their states, written
//! from the spec.

use super::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum St {
    Active,
    Locked { token: LockToken, until: i64 },
    Scheduled,
    Deferred,
    Dead,
}

impl St {
    pub(super) fn public(self) -> MessageState {
        match self {
            St::Active => MessageState::Active,
            St::Locked { .. } => MessageState::Locked,
            St::Scheduled => MessageState::Scheduled,
            St::Deferred => MessageState::Deferred,
            St::Dead => MessageState::DeadLettered,
        }
    }
}

#[derive(Debug, Clone)]
pub(super) struct Msg {
    pub(super) state: St,
    pub(super) delivery_count: i64,
    pub(super) body: Vec<u8>,
    pub(super) message_id: Option<String>,
    pub(super) group: Option<String>,
    pub(super) priority: u8,
    pub(super) line: Option<String>,
    pub(super) enqueued_at: i64,
    pub(super) visible_at: i64,
    pub(super) expires_at: i64,
    pub(super) dead_at: i64,
    pub(super) reason: Option<String>,
    /// None: written by the store itself (not checked); Some: exactly this.
    pub(super) description: Option<Option<String>>,
}

/// What the test compares of one message. `None` in `state`, `visible_at` or
/// `description` means "not checked here": a receive-and-delete response's state, a dead
/// letter's visible time and a store-written dead-letter description are not promised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct View {
    pub(super) seq: SeqNumber,
    pub(super) state: Option<MessageState>,
    pub(super) delivery_count: i64,
    pub(super) enqueued_at: i64,
    pub(super) visible_at: Option<i64>,
    pub(super) expires_at: i64,
    pub(super) locked_until: i64,
    pub(super) reason: Option<String>,
    pub(super) description: Option<Option<String>>,
    pub(super) body: Vec<u8>,
    pub(super) message_id: Option<String>,
    pub(super) group: Option<String>,
    pub(super) priority: u8,
}

impl View {
    /// The view of a stored message, leaving out what `like` does not check.
    pub(super) fn of(m: &Message, like: Option<&View>) -> View {
        let mut v = View {
            seq: m.seq,
            state: Some(m.state),
            delivery_count: m.delivery_count,
            enqueued_at: m.enqueued_at_ms,
            visible_at: Some(m.visible_at_ms),
            expires_at: m.expires_at_ms,
            locked_until: m.locked_until_ms,
            reason: m.dead_letter_reason.clone(),
            description: Some(m.dead_letter_description.clone()),
            body: m.content.body.clone(),
            message_id: m.content.message_id.clone(),
            group: m.content.group_id.clone(),
            priority: m.content.priority,
        };
        if let Some(e) = like {
            if e.state.is_none() {
                v.state = None;
            }
            if e.visible_at.is_none() {
                v.visible_at = None;
            }
            if e.description.is_none() {
                v.description = None;
            }
        }
        v
    }

    /// Stored messages as views shaped like the expected ones.
    pub(super) fn all(got: &[Message], expected: &[View]) -> Vec<View> {
        got.iter()
            .enumerate()
            .map(|(i, m)| View::of(m, expected.get(i)))
            .collect()
    }
}

impl Msg {
    pub(super) fn view(&self, seq: SeqNumber) -> View {
        View {
            seq,
            state: Some(self.state.public()),
            delivery_count: self.delivery_count,
            enqueued_at: self.enqueued_at,
            visible_at: (self.state != St::Dead).then_some(self.visible_at),
            expires_at: self.expires_at,
            locked_until: match self.state {
                St::Locked { until, .. } => until,
                _ => 0,
            },
            reason: self.reason.clone(),
            description: self.description.clone(),
            body: self.body.clone(),
            message_id: self.message_id.clone(),
            group: self.group.clone(),
            priority: self.priority,
        }
    }

    pub(super) fn expired(&self, now: i64) -> bool {
        self.expires_at > 0 && self.expires_at <= now
    }
}

pub(super) fn line_of(mode: OrderingMode, group: &Option<String>) -> Option<String> {
    match mode {
        OrderingMode::StrictFifo => Some(String::new()),
        OrderingMode::Standard | OrderingMode::GroupFifo => group.clone(),
    }
}

/// One queue of the model.
#[derive(Debug)]
pub(super) struct MQueue {
    pub(super) cfg: QueueConfig,
    pub(super) msgs: BTreeMap<SeqNumber, Msg>,
    /// The head of every line that has a message in play.
    pub(super) heads: BTreeMap<String, SeqNumber>,
    /// Dedup key -> (sequence number, body, expiry).
    pub(super) dedup: HashMap<String, (SeqNumber, Vec<u8>, i64)>,
    /// Attempt id -> (mode, response, expiry).
    pub(super) attempts: HashMap<String, (ReceiveMode, Vec<Message>, i64)>,
}

impl MQueue {
    pub(super) fn new(cfg: QueueConfig) -> Self {
        MQueue {
            cfg,
            msgs: BTreeMap::new(),
            heads: BTreeMap::new(),
            dedup: HashMap::new(),
            attempts: HashMap::new(),
        }
    }

    pub(super) fn is_head(&self, seq: SeqNumber, m: &Msg) -> bool {
        m.line
            .as_ref()
            .is_none_or(|l| self.heads.get(l) == Some(&seq))
    }

    pub(super) fn claimable(&self, seq: SeqNumber, m: &Msg, now: i64) -> bool {
        m.state == St::Active && m.visible_at <= now && !m.expired(now) && self.is_head(seq, m)
    }

    /// A message entered play: it heads its line if the line was idle, else it waits.
    pub(super) fn join(&mut self, seq: SeqNumber) {
        if let Some(line) = self.msgs.get(&seq).and_then(|m| m.line.clone()) {
            self.heads.entry(line).or_insert(seq);
        }
    }

    /// The oldest message in play of `line`, if any.
    pub(super) fn oldest_in_play(&self, line: &str) -> Option<SeqNumber> {
        self.msgs
            .iter()
            .find(|(_, m)| m.state != St::Dead && m.line.as_deref() == Some(line))
            .map(|(s, _)| *s)
    }

    /// `seq` (of `line`) left play: if it was the head, the oldest message in play of the
    /// line becomes head.
    pub(super) fn release(&mut self, seq: SeqNumber, line: Option<String>) {
        let Some(line) = line else { return };
        if self.heads.get(&line) != Some(&seq) {
            return;
        }
        self.heads.remove(&line);
        if let Some(next) = self.oldest_in_play(&line) {
            self.heads.insert(line, next);
        }
    }

    pub(super) fn remove(&mut self, seq: SeqNumber) {
        if let Some(m) = self.msgs.remove(&seq) {
            self.release(seq, m.line);
        }
    }

    pub(super) fn dead_letter(
        &mut self,
        seq: SeqNumber,
        reason: &str,
        description: Option<Option<String>>,
        now: i64,
    ) {
        let Some(m) = self.msgs.get_mut(&seq) else {
            return;
        };
        m.state = St::Dead;
        m.reason = Some(reason.to_owned());
        m.description = description;
        m.dead_at = now;
        let line = m.line.clone();
        self.release(seq, line);
    }

    /// A lease ended without a settlement (reaper, orphan sweep): back to active, or
    /// dead-lettered at the delivery bound.
    pub(super) fn lease_lapsed(&mut self, seq: SeqNumber, now: i64) {
        let max = self.cfg.max_delivery_count;
        let Some(m) = self.msgs.get_mut(&seq) else {
            return;
        };
        if m.delivery_count >= max {
            self.dead_letter(seq, REASON_MAX_DELIVERY, None, now);
        } else {
            m.state = St::Active;
        }
    }

    /// Claims up to `n` messages: the oldest claimable each time; receive-and-delete
    /// removes each at once, so the next of its line may follow in the same batch.
    pub(super) fn claim(&mut self, now: i64, n: u32, delete: bool) -> Vec<View> {
        let mut out = Vec::new();
        for _ in 0..n {
            // Claim order (20.1): the highest priority first, then the oldest.
            let Some(seq) = self
                .msgs
                .iter()
                .filter(|(s, m)| self.claimable(**s, m, now))
                .min_by_key(|(s, m)| (std::cmp::Reverse(m.priority), **s))
                .map(|(s, _)| *s)
            else {
                break;
            };
            let until = now + self.cfg.lock_ms();
            let Some(m) = self.msgs.get_mut(&seq) else {
                break;
            };
            m.delivery_count += 1;
            m.state = St::Locked {
                token: unseen(),
                until,
            };
            let mut v = m.view(seq);
            if delete {
                v.state = None;
                v.locked_until = 0;
                self.remove(seq);
            }
            out.push(v);
        }
        out
    }

    pub(super) fn in_play(&self) -> bool {
        self.msgs.values().any(|m| m.state != St::Dead)
    }

    /// Dead letters at least `older_than` old, oldest dead-lettering first, at most `max`.
    pub(super) fn dead_letters(&self, now: i64, max: u64, older_than: i64) -> Vec<SeqNumber> {
        let cutoff = now - older_than;
        let mut dead: Vec<(i64, SeqNumber)> = self
            .msgs
            .iter()
            .filter(|(_, m)| m.state == St::Dead && m.dead_at <= cutoff)
            .map(|(s, m)| (m.dead_at, *s))
            .collect();
        dead.sort();
        if max > 0 {
            dead.truncate(max as usize);
        }
        dead.into_iter().map(|(_, s)| s).collect()
    }

    pub(super) fn stats(&self, now: i64) -> QueueStats {
        let count = |st: MessageState| {
            self.msgs
                .values()
                .filter(|m| m.state.public() == st)
                .count() as u64
        };
        QueueStats {
            active: count(MessageState::Active),
            locked: count(MessageState::Locked),
            deferred: count(MessageState::Deferred),
            scheduled: count(MessageState::Scheduled),
            dead_lettered: count(MessageState::DeadLettered),
            total: self.msgs.len() as u64,
            oldest_message_age_ms: self
                .msgs
                .values()
                .filter(|m| m.state != St::Dead)
                .map(|m| m.enqueued_at)
                .min()
                .map_or(0, |t| (now - t).max(0)),
        }
    }

    /// The model's own invariant: a line has a head exactly while it has a message in
    /// play, and the head is in play.
    pub(super) fn check_heads(&self) -> Result<(), String> {
        let mut lines: HashSet<&str> = HashSet::new();
        for m in self.msgs.values().filter(|m| m.state != St::Dead) {
            if let Some(l) = &m.line {
                lines.insert(l);
            }
        }
        for (line, head) in &self.heads {
            match self.msgs.get(head) {
                Some(m) if m.state != St::Dead && m.line.as_ref() == Some(line) => {}
                _ => {
                    return Err(format!(
                        "model: head {head} of line {line:?} is not in play"
                    ));
                }
            }
        }
        if lines.len() != self.heads.len() {
            return Err(format!("model: lines {lines:?} but heads {:?}", self.heads));
        }
        Ok(())
    }
}

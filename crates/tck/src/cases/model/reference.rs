//! The reference model of the three queues and the clock: what every call must return.

use super::*;

/// How often each situation worth reaching came up (`MQLITE_MODEL_COVERAGE=1` prints the
/// totals of a run), so that a generator change that stops reaching one is seen.
pub(super) type Coverage = BTreeMap<&'static str, u64>;

pub(super) fn hit(cov: &mut Coverage, what: &'static str) {
    *cov.entry(what).or_default() += 1;
}

/// The reference: three queues, the receipts, and what the test has handed out.
#[derive(Debug)]
pub(super) struct Model {
    pub(super) cov: Coverage,
    pub(super) queues: Vec<MQueue>,
    /// (queue, seq, token, request) -> expiry.
    pub(super) receipts: HashMap<(usize, SeqNumber, LockToken, String), i64>,
    /// Every lock a claim handed out, with its queue.
    pub(super) handed_out: Vec<(usize, LockRef)>,
    pub(super) tokens: HashSet<LockToken>,
    /// Every sequence number ever enqueued.
    pub(super) known: Vec<SeqNumber>,
    pub(super) last_seq: i64,
}

impl Model {
    pub(super) fn live_lease(&self, q: usize, lock: LockRef, now: i64) -> bool {
        matches!(self.queues[q].msgs.get(&lock.seq), Some(Msg { state: St::Locked { token, until }, .. })
            if *token == lock.token && *until > now)
    }

    /// Settlement (2.6, 3.2): the effect on a live lease with a receipt, else a replay of
    /// an identical live receipt, else LockLost.
    pub(super) fn settle(&mut self, q: usize, lock: LockRef, verb: Verb, now: i64) -> bool {
        let key = match verb {
            Verb::Complete => "complete".to_owned(),
            Verb::Abandon(d) => format!("abandon:{d}"),
            Verb::Reject(r) => format!("reject:{}\u{0}{}", REASONS[r].0, REASONS[r].1),
            Verb::Defer => "defer".to_owned(),
        };
        let receipt = (q, lock.seq, lock.token, key);
        if !self.live_lease(q, lock, now) {
            let replay = self.receipts.get(&receipt).copied();
            hit(
                &mut self.cov,
                match replay {
                    Some(exp) if exp > now => "settle: identical request replayed",
                    Some(_) => "settle: receipt expired, LockLost",
                    None => match self.queues[q].msgs.get(&lock.seq).map(|m| m.state) {
                        Some(St::Locked { token, until })
                            if token == lock.token && until == now =>
                        {
                            "settle: LockLost, the lease ends exactly now"
                        }
                        Some(St::Locked { token, .. }) if token == lock.token => {
                            "settle: LockLost, lease lapsed"
                        }
                        Some(St::Locked { .. }) => "settle: LockLost, other token",
                        Some(_) => "settle: LockLost, not locked",
                        None => "settle: LockLost, gone",
                    },
                },
            );
            return replay.is_some_and(|exp| exp > now);
        }
        hit(
            &mut self.cov,
            match verb {
                Verb::Complete => "settle: complete",
                Verb::Abandon(0) => "settle: abandon",
                Verb::Abandon(_) => "settle: abandon with delay",
                Verb::Reject(_) => "settle: reject",
                Verb::Defer => "settle: defer",
            },
        );
        let queue = &mut self.queues[q];
        let seq = lock.seq;
        match verb {
            Verb::Complete => queue.remove(seq),
            Verb::Abandon(delay) => {
                let max = queue.cfg.max_delivery_count;
                if let Some(m) = queue.msgs.get_mut(&seq) {
                    if m.delivery_count >= max {
                        hit(&mut self.cov, "settle: abandon at the bound dead-letters");
                        queue.dead_letter(seq, REASON_MAX_DELIVERY, None, now);
                    } else if delay > 0 {
                        m.state = St::Scheduled;
                        m.visible_at = now + delay;
                    } else {
                        m.state = St::Active;
                    }
                }
            }
            Verb::Reject(r) => {
                let (reason, description) = REASONS[r];
                queue.dead_letter(seq, reason, Some(Some(description.to_owned())), now);
            }
            Verb::Defer => {
                if let Some(m) = queue.msgs.get_mut(&seq) {
                    m.state = St::Deferred;
                }
            }
        }
        self.receipts.insert(receipt, now + RECEIPT_TTL_MS);
        true
    }

    /// Renewal (2.5): a live lease to max(locked_until, now + lock); None if refused.
    pub(super) fn renew(&mut self, q: usize, lock: LockRef, now: i64) -> Option<i64> {
        if !self.live_lease(q, lock, now) {
            return None;
        }
        let lock_ms = self.queues[q].cfg.lock_ms();
        match self.queues[q].msgs.get_mut(&lock.seq) {
            Some(Msg {
                state: St::Locked { until, .. },
                ..
            }) => {
                *until = (*until).max(now + lock_ms);
                Some(*until)
            }
            _ => None,
        }
    }

    /// The reaper (cutoff = now) and the orphan sweep at open (cutoff = MAX).
    pub(super) fn reap(&mut self, cutoff: i64, now: i64) {
        for queue in &mut self.queues {
            let lapsed: Vec<SeqNumber> = queue
                .msgs
                .iter()
                .filter(|(_, m)| matches!(m.state, St::Locked { until, .. } if until <= cutoff))
                .map(|(s, _)| *s)
                .collect();
            for seq in lapsed {
                let at_bound = queue
                    .msgs
                    .get(&seq)
                    .is_some_and(|m| m.delivery_count >= queue.cfg.max_delivery_count);
                hit(
                    &mut self.cov,
                    match (cutoff == i64::MAX, at_bound) {
                        (false, false) => "sweep: lease back to active",
                        (false, true) => "sweep: lease dead-lettered",
                        (true, false) => "reopen: orphan back to active",
                        (true, true) => "reopen: orphan dead-lettered",
                    },
                );
                queue.lease_lapsed(seq, now);
            }
        }
    }

    /// One pass of run_sweeps: reaper, scheduler, TTL (the janitor only prunes what the
    /// lookups already ignore).
    pub(super) fn sweep(&mut self, now: i64) {
        self.reap(now, now);
        for queue in &mut self.queues {
            for m in queue.msgs.values_mut() {
                if m.state == St::Scheduled && m.visible_at <= now {
                    hit(&mut self.cov, "sweep: scheduled activated");
                    m.state = St::Active;
                }
            }
        }
        for queue in &mut self.queues {
            let expired: Vec<SeqNumber> = queue
                .msgs
                .iter()
                .filter(|(_, m)| m.state != St::Dead && m.expired(now))
                .map(|(s, _)| *s)
                .collect();
            for seq in expired {
                if let Some(m) = queue.msgs.get(&seq) {
                    hit(
                        &mut self.cov,
                        match m.state {
                            St::Active => "sweep: TTL of an active message",
                            St::Locked { .. } => "sweep: TTL of a locked message",
                            St::Scheduled => "sweep: TTL of a scheduled message",
                            St::Deferred => "sweep: TTL of a deferred message",
                            St::Dead => "sweep: TTL of a dead letter (wrong)",
                        },
                    );
                }
                if queue.cfg.dead_letter_on_expire {
                    queue.dead_letter(seq, REASON_TTL_EXPIRED, None, now);
                } else {
                    queue.remove(seq);
                }
            }
        }
    }

    /// Redrive (6.2, DECISIONS 2 and 3); Err(()) is GroupRequired.
    pub(super) fn redrive(
        &mut self,
        from: usize,
        to: usize,
        max: u64,
        older_than: i64,
        now: i64,
    ) -> Result<u64, ()> {
        let chosen = self.queues[from].dead_letters(now, max, older_than);
        let mode = self.queues[to].cfg.ordering_mode;
        let ungrouped = chosen.iter().any(|s| {
            self.queues[from]
                .msgs
                .get(s)
                .is_some_and(|m| m.group.is_none())
        });
        if mode == OrderingMode::GroupFifo && ungrouped {
            hit(
                &mut self.cov,
                "redrive: ungrouped into group_fifo (DECISION 3)",
            );
            // 5.9: GroupRequired, and nothing moves.
            return Err(());
        }
        if !chosen.is_empty() {
            hit(&mut self.cov, "redrive: moved some");
            if from != to {
                hit(&mut self.cov, "redrive: into another queue");
            }
        }
        // Where DECISION 2 matters: two dead letters of one idle line whose moving order
        // (dead-lettering time) is not their sequence order.
        let mut first_of_line: HashMap<String, SeqNumber> = HashMap::new();
        for seq in &chosen {
            if let Some(line) = self.queues[from]
                .msgs
                .get(seq)
                .and_then(|m| line_of(mode, &m.group))
            {
                if self.queues[to].heads.contains_key(&line) {
                    hit(&mut self.cov, "redrive: into a busy line");
                } else if let Some(first) = first_of_line.get(&line) {
                    hit(&mut self.cov, "redrive: two into one idle line");
                    if seq < first {
                        hit(
                            &mut self.cov,
                            "redrive: idle line, moving order != seq order (DECISION 2)",
                        );
                    }
                } else {
                    hit(&mut self.cov, "redrive: into an idle line");
                    first_of_line.insert(line, *seq);
                }
            }
        }
        for seq in &chosen {
            let Some(mut m) = self.queues[from].msgs.remove(seq) else {
                continue;
            };
            m.state = St::Active;
            m.delivery_count = 0;
            m.visible_at = now;
            m.expires_at = 0;
            m.dead_at = 0;
            m.reason = None;
            m.description = Some(None);
            m.line = line_of(mode, &m.group);
            self.queues[to].msgs.insert(*seq, m);
        }
        // 5.8: all re-enter at their own sequence numbers: an idle line is headed by the
        // oldest of them; a busy line keeps its head.
        let target = &mut self.queues[to];
        for seq in &chosen {
            if let Some(line) = target.msgs.get(seq).and_then(|m| m.line.clone())
                && !target.heads.contains_key(&line)
                && let Some(head) = target.oldest_in_play(&line)
            {
                target.heads.insert(line, head);
            }
        }
        Ok(chosen.len() as u64)
    }

    /// A lock chosen by `pick`: mostly one the model holds as locked now (lease
    /// live or lapsed), else one of the latest four handed out, sometimes any.
    pub(super) fn pick(&self, pick: usize) -> Option<(usize, LockRef)> {
        let n = self.handed_out.len();
        if n == 0 {
            return None;
        }
        let (choice, pick) = (pick % 8, pick / 8);
        if choice >= 2 {
            let held: Vec<(usize, LockRef)> = self
                .handed_out
                .iter()
                .filter(|(q, l)| {
                    matches!(self.queues[*q].msgs.get(&l.seq), Some(Msg { state: St::Locked { token, .. }, .. }) if *token == l.token)
                })
                .copied()
                .collect();
            if !held.is_empty() {
                return Some(held[pick % held.len()]);
            }
        }
        let i = if choice == 0 {
            pick % n
        } else {
            n - 1 - pick % n.min(4)
        };
        Some(self.handed_out[i])
    }

    /// `pick` spoiled as `tamper` says: (queue to present it on, lock).
    pub(super) fn spoil(&self, (q, lock): (usize, LockRef), tamper: Tamper) -> (usize, LockRef) {
        match tamper {
            Tamper::None => (q, lock),
            Tamper::Token => (
                q,
                LockRef {
                    seq: lock.seq,
                    token: LockToken::random(),
                },
            ),
            Tamper::Queue => ((q + 1) % QUEUES.len(), lock),
        }
    }
}

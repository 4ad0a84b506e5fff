//! The calls a step makes on both sides, and the comparison of what each holds.

use super::*;

impl<F: Access> Run<'_, F> {
    pub(super) async fn send(
        &mut self,
        q: usize,
        specs: &[SendSpec],
        sched: Option<i64>,
        ttl: Option<i64>,
        missing_group: bool,
        ctx: &(dyn Fn(&str) -> String + Sync),
    ) -> Result<(), TestCaseError> {
        let now = self.clock.now();
        let mode = self.model.queues[q].cfg.ordering_mode;
        let messages: Vec<OutMessage> = specs
            .iter()
            .map(|s| {
                let mut m = OutMessage::new(vec![b'a' + s.body]).with_priority(s.priority);
                if let Some(id) = s.id {
                    m = m.with_id(format!("m{id}"));
                }
                match s.group {
                    Some(g) => m.with_group(format!("g{g}")),
                    None if mode == OrderingMode::GroupFifo && !missing_group => m.with_group("g0"),
                    None => m,
                }
            })
            .collect();
        let options = SendOptions {
            scheduled_at_ms: sched.map(|d| now + d),
            ttl: ttl.map(from_millis),
        };
        let got: Result<Vec<EnqueueSlot>, Error> = if messages.len() == 1 {
            // A single send reports a conflict as DedupConflict (4.2).
            match self
                .mq
                .send_with(QUEUES[q], messages[0].clone(), options)
                .await
            {
                Ok(seq) => Ok(vec![EnqueueSlot::Enqueued(seq)]),
                Err(Error::DedupConflict { .. }) => Ok(vec![EnqueueSlot::Conflict]),
                Err(e) => Err(e),
            }
        } else {
            self.mq
                .send_batch_with(QUEUES[q], messages.clone(), options)
                .await
        };
        let status = self.model.queues[q].cfg.status;
        if !status.takes_sends() {
            hit(&mut self.model.cov, "send: refused, paused");
            prop_assert!(
                matches!(&got, Err(Error::QueuePaused { status: s, .. }) if *s == status),
                "{}: {:?}",
                ctx("a paused queue refuses the whole send"),
                got
            );
            return Ok(());
        }
        if mode == OrderingMode::GroupFifo && messages.iter().any(|m| m.group_id.is_none()) {
            hit(&mut self.model.cov, "send: GroupRequired");
            prop_assert!(
                matches!(got, Err(Error::GroupRequired { .. })),
                "{}: {:?}",
                ctx("group_fifo refuses the whole send"),
                got
            );
            return Ok(());
        }
        let got = got.map_err(|e| fail(ctx(&e.to_string())))?;
        prop_assert_eq!(got.len(), messages.len(), "{}", ctx("one slot a message"));
        let visible_at = options.scheduled_at_ms.unwrap_or(now).max(0);
        let queue = &mut self.model.queues[q];
        let ttl = ttl.unwrap_or(queue.cfg.default_ttl_ms());
        let expires_at = if ttl > 0 { visible_at + ttl } else { 0 };
        let window = queue.cfg.dedup_window_ms();
        let before = self.model.last_seq;
        for (i, (m, slot)) in messages.into_iter().zip(got).enumerate() {
            let key = match &m.message_id {
                Some(id) => format!("id:{id}"),
                None => format!("body:{:?}", m.body),
            };
            let seen = (window > 0)
                .then(|| queue.dedup.get(&key).filter(|e| e.2 > now).cloned())
                .flatten();
            let what = ctx(&format!("slot {i}"));
            match (seen, slot) {
                (Some((seq, body, _)), slot) if body == m.body => {
                    hit(
                        &mut self.model.cov,
                        if seq.0 > before {
                            "send: duplicate inside one batch"
                        } else {
                            "send: duplicate"
                        },
                    );
                    // A single send cannot tell a duplicate from an enqueue: both are Ok.
                    prop_assert!(
                        slot == EnqueueSlot::Duplicate(seq) || slot == EnqueueSlot::Enqueued(seq),
                        "{}: duplicate of {} expected, got {:?}",
                        what,
                        seq,
                        slot
                    );
                }
                (Some(_), slot) => {
                    hit(
                        &mut self.model.cov,
                        if specs.len() == 1 {
                            "send: DedupConflict"
                        } else {
                            "send: conflict slot in a batch"
                        },
                    );
                    prop_assert_eq!(slot, EnqueueSlot::Conflict, "{}", what);
                }
                (None, EnqueueSlot::Enqueued(seq)) => {
                    prop_assert!(
                        seq.0 > self.model.last_seq,
                        "{}: sequence {} after {}",
                        what,
                        seq,
                        self.model.last_seq
                    );
                    self.model.last_seq = seq.0;
                    self.model.known.push(seq);
                    if window > 0 {
                        queue.dedup.insert(key, (seq, m.body.clone(), now + window));
                    }
                    let line = line_of(mode, &m.group_id);
                    let busy = line.as_ref().is_some_and(|l| queue.heads.contains_key(l));
                    queue.msgs.insert(
                        seq,
                        Msg {
                            state: if visible_at > now {
                                St::Scheduled
                            } else {
                                St::Active
                            },
                            delivery_count: 0,
                            body: m.body,
                            message_id: m.message_id,
                            group: m.group_id,
                            priority: m.priority,
                            line,
                            enqueued_at: now,
                            visible_at,
                            expires_at,
                            dead_at: 0,
                            reason: None,
                            description: Some(None),
                        },
                    );
                    // DECISION 1: a scheduled send takes its place in line at once.
                    queue.join(seq);
                    hit(&mut self.model.cov, "send: enqueued");
                    if busy {
                        hit(&mut self.model.cov, "send: waits behind its line's head");
                    }
                    if visible_at > now {
                        hit(&mut self.model.cov, "send: scheduled");
                    }
                    if expires_at > 0 {
                        hit(&mut self.model.cov, "send: with a TTL");
                    }
                }
                (None, slot) => {
                    return Err(fail(format!(
                        "{what}: a fresh enqueue expected, got {slot:?}"
                    )));
                }
            }
        }
        Ok(())
    }

    pub(super) async fn receive(
        &mut self,
        q: usize,
        n: u32,
        delete: bool,
        attempt: Option<u8>,
        ctx: &(dyn Fn(&str) -> String + Sync),
    ) -> Result<(), TestCaseError> {
        let mode = if delete {
            ReceiveMode::ReceiveAndDelete
        } else {
            ReceiveMode::PeekLock
        };
        let attempt_id = attempt.map(|a| format!("attempt-{a}"));
        let options = ReceiveOptions {
            max_messages: n,
            wait: from_millis(0),
            mode,
            attempt_id: attempt_id.clone(),
        };
        let got = self.mq.receive(QUEUES[q], options.clone()).await;
        self.check_receive(q, options, got, ctx).await
    }

    /// Checks a receive's answer `got` against the model, which claims as it does.
    pub(super) async fn check_receive(
        &mut self,
        q: usize,
        options: ReceiveOptions,
        got: mqlite_contract::Result<Vec<Message>>,
        ctx: &(dyn Fn(&str) -> String + Sync),
    ) -> Result<(), TestCaseError> {
        let now = self.clock.now();
        let mode = options.mode;
        let delete = mode == ReceiveMode::ReceiveAndDelete;
        let n = options.max_messages;
        let attempt_id = options.attempt_id;
        let recorded = attempt_id
            .as_ref()
            .and_then(|a| self.model.queues[q].attempts.get(a))
            .filter(|(_, _, exp)| *exp > now)
            .cloned();
        if let Some((recorded_mode, response, _)) = recorded {
            if recorded_mode != mode {
                hit(
                    &mut self.model.cov,
                    "receive: attempt id with the other mode",
                );
                prop_assert!(
                    matches!(got, Err(Error::InvalidArgument(_))),
                    "{}: {:?}",
                    ctx("the attempt id was used with the other mode"),
                    got
                );
            } else {
                hit(&mut self.model.cov, "receive: attempt replayed");
                let got = got.map_err(|e| fail(ctx(&e.to_string())))?;
                prop_assert_eq!(got, response, "{}", ctx("the attempt replays"));
            }
            return Ok(());
        }
        let got = got.map_err(|e| fail(ctx(&e.to_string())))?;
        if !self.model.queues[q].cfg.status.hands_out() {
            hit(&mut self.model.cov, "receive: paused, nothing handed out");
            prop_assert!(
                got.is_empty(),
                "{}: {:?}",
                ctx("a paused queue hands out nothing"),
                got
            );
            return Ok(());
        }
        self.blocked_lines(q, now);
        let lines: HashMap<SeqNumber, Option<String>> = self.model.queues[q]
            .msgs
            .iter()
            .map(|(s, m)| (*s, m.line.clone()))
            .collect();
        let expected = self.model.queues[q].claim(now, n, delete);
        let claimed_lines: Vec<&Option<String>> =
            expected.iter().filter_map(|v| lines.get(&v.seq)).collect();
        if claimed_lines
            .iter()
            .enumerate()
            .any(|(i, l)| l.is_some() && claimed_lines[..i].contains(l))
        {
            hit(
                &mut self.model.cov,
                "receive: one batch took a line's next message",
            );
        }
        if expected.len() > 1 {
            hit(&mut self.model.cov, "receive: a batch of several");
        }
        hit(
            &mut self.model.cov,
            match (delete, expected.is_empty()) {
                (_, true) => "receive: nothing eligible",
                (false, false) => "receive: peek-lock claimed",
                (true, false) => "receive: receive-and-delete claimed",
            },
        );
        if delete {
            prop_assert_eq!(
                View::all(&got, &expected),
                expected,
                "{}",
                ctx("received and deleted")
            );
            prop_assert!(
                got.iter().all(|m| m.lock_token.is_none()),
                "{}",
                ctx("no token without a lease")
            );
        } else {
            self.take_locks(q, &got, &expected, ctx)?;
        }
        if let Some(a) = attempt_id
            && !got.is_empty()
        {
            self.model.queues[q]
                .attempts
                .insert(a, (mode, got, now + RECEIPT_TTL_MS));
        }
        Ok(())
    }

    /// Counts which holds keep a waiting message from being claimed right now.
    pub(super) fn blocked_lines(&mut self, q: usize, now: i64) {
        let queue = &self.model.queues[q];
        let mut holds = Vec::new();
        for (seq, m) in &queue.msgs {
            let Some(line) = &m.line else { continue };
            let Some(head) = queue.heads.get(line).and_then(|h| queue.msgs.get(h)) else {
                continue;
            };
            if queue.heads.get(line) == Some(seq) || m.state != St::Active || m.expired(now) {
                continue;
            }
            holds.push(match head.state {
                St::Active if head.expired(now) => "receive: an expired head holds its line",
                St::Active => "receive: a successor waits behind an active head",
                St::Locked { until, .. } if until <= now => {
                    "receive: an unreaped expired lease holds its line"
                }
                St::Locked { .. } => "receive: a locked head holds its line",
                St::Scheduled if head.delivery_count == 0 => {
                    "receive: a scheduled send holds its line (DECISION 1)"
                }
                St::Scheduled => "receive: a parked head holds its line",
                St::Deferred => "receive: a deferred head holds its line",
                St::Dead => "receive: a dead head (wrong)",
            });
        }
        holds.sort();
        holds.dedup();
        for what in holds {
            hit(&mut self.model.cov, what);
        }
    }

    /// Checks a peek-lock response against the model's claims and records its tokens.
    pub(super) fn take_locks(
        &mut self,
        q: usize,
        got: &[Message],
        expected: &[View],
        ctx: &(dyn Fn(&str) -> String + Sync),
    ) -> Result<(), TestCaseError> {
        prop_assert_eq!(View::all(got, expected), expected, "{}", ctx("claimed"));
        for m in got {
            let token = m
                .lock_token
                .ok_or_else(|| fail(ctx("a peek-lock claim has a token")))?;
            prop_assert!(self.model.tokens.insert(token), "{}", ctx("a fresh token"));
            if let Some(Msg {
                state: St::Locked { token: t, .. },
                ..
            }) = self.model.queues[q].msgs.get_mut(&m.seq)
            {
                *t = token;
            }
            self.model.handed_out.push((q, LockRef::from(m)));
        }
        Ok(())
    }

    /// After every step every queue's messages and counts equal the model's.
    pub(super) async fn compare(
        &self,
        ctx: &(dyn Fn(&str) -> String + Sync),
    ) -> Result<(), TestCaseError> {
        let now = self.clock.now();
        for (q, name) in QUEUES.iter().enumerate() {
            let queue = &self.model.queues[q];
            queue.check_heads().map_err(|e| fail(ctx(&e)))?;
            let stored = self
                .mq
                .peek(
                    name,
                    PeekOptions {
                        max: 1000,
                        ..Default::default()
                    },
                )
                .await
                .map_err(|e| fail(ctx(&e.to_string())))?;
            let expected: Vec<View> = queue.msgs.iter().map(|(s, m)| m.view(*s)).collect();
            prop_assert_eq!(
                View::all(&stored, &expected),
                expected,
                "{}",
                ctx(&format!("stored messages of {name}"))
            );
            let stats = self
                .mq
                .stats(name)
                .await
                .map_err(|e| fail(ctx(&e.to_string())))?;
            prop_assert_eq!(
                stats,
                queue.stats(now),
                "{}",
                ctx(&format!("stats of {name}"))
            );
        }
        Ok(())
    }
}

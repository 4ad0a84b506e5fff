//! One run: the engine and the model side by side, one operation at a time.

use super::*;

pub(super) fn fail(msg: String) -> TestCaseError {
    TestCaseError::fail(msg)
}

pub(super) fn lost<T: std::fmt::Debug>(r: &Result<T, Error>) -> bool {
    matches!(r, Err(Error::LockLost { .. }))
}

pub(super) async fn open<F: Access>(
    factory: &F,
    dir: &std::path::Path,
    clock: &ManualClock,
) -> Result<Engine<F::Store>, TestCaseError> {
    let store = factory
        .open(dir, clock.shared())
        .await
        .map_err(|e| fail(format!("open: {e}")))?;
    Engine::with_store(
        store,
        EngineOptions {
            background: false,
            ..Default::default()
        },
    )
    .await
    .map_err(|e| fail(format!("engine: {e}")))
}

/// One run: the engine under test, its clock and the model.
pub(super) struct Run<'a, F: Access> {
    pub(super) factory: &'a F,
    pub(super) dir: &'a std::path::Path,
    pub(super) clock: ManualClock,
    pub(super) mq: Engine<F::Store>,
    pub(super) model: Model,
    pub(super) can_reopen: bool,
}

pub(super) async fn check_run<F: Access>(
    factory: &F,
    dir: &std::path::Path,
    cfgs: &[CfgSpec],
    ops: &[Op],
    can_reopen: bool,
    coverage: &std::sync::Mutex<Coverage>,
) -> Result<(), TestCaseError> {
    let clock = ManualClock::new(START_MS);
    let mq = open(factory, dir, &clock).await?;
    let mut queues = Vec::new();
    for (i, name) in QUEUES.iter().enumerate() {
        let config = cfgs[i].config(MODES[i]);
        mq.create_queue(name, config.clone())
            .await
            .map_err(|e| fail(e.to_string()))?;
        queues.push(MQueue::new(config));
    }
    let mut run = Run {
        factory,
        dir,
        clock,
        mq,
        model: Model {
            cov: Coverage::new(),
            queues,
            receipts: HashMap::new(),
            handed_out: Vec::new(),
            tokens: HashSet::new(),
            known: Vec::new(),
            last_seq: 0,
        },
        can_reopen,
    };
    for (step, op) in ops.iter().enumerate() {
        let ctx = |what: &str| format!("step {step} {op:?}: {what}");
        run.step(op, &ctx).await?;
        run.compare(&ctx).await?;
    }
    run.mq.close().await;
    for (what, n) in run.model.cov {
        *coverage
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(what)
            .or_default() += n;
    }
    Ok(())
}

impl<F: Access> Run<'_, F> {
    pub(super) async fn step(
        &mut self,
        op: &Op,
        ctx: &(dyn Fn(&str) -> String + Sync),
    ) -> Result<(), TestCaseError> {
        let now = self.clock.now();
        match op {
            Op::Send {
                q,
                msgs,
                sched,
                ttl,
                missing_group,
            } => {
                self.send(*q, msgs, *sched, *ttl, *missing_group, ctx)
                    .await?
            }
            Op::Receive {
                q,
                n,
                delete,
                attempt,
            } => self.receive(*q, *n, *delete, *attempt, ctx).await?,
            Op::Settle { pick, verb, tamper } => {
                let Some(picked) = self.model.pick(*pick) else {
                    return Ok(());
                };
                let (q, lock) = self.model.spoil(picked, *tamper);
                let name = QUEUES[q];
                let got = match *verb {
                    Verb::Complete => self.mq.complete(name, lock).await,
                    Verb::Abandon(delay) => self.mq.abandon(name, lock, from_millis(delay)).await,
                    Verb::Reject(r) => self.mq.reject(name, lock, REASONS[r].0, REASONS[r].1).await,
                    Verb::Defer => self.mq.defer(name, lock).await,
                };
                let ok = self.model.settle(q, lock, *verb, now);
                prop_assert_eq!(got.is_ok(), ok, "{}: {:?}", ctx("settle"), got);
                prop_assert!(ok || lost(&got), "{}", ctx("a refusal is LockLost"));
            }
            Op::Renew { pick, tamper } => {
                let Some(picked) = self.model.pick(*pick) else {
                    return Ok(());
                };
                let (q, lock) = self.model.spoil(picked, *tamper);
                let got = self.mq.renew(QUEUES[q], lock).await;
                match self.model.renew(q, lock, now) {
                    Some(until) => {
                        hit(&mut self.model.cov, "renew: extended");
                        prop_assert_eq!(got.ok(), Some(until), "{}", ctx("renewed"));
                    }
                    None => {
                        hit(&mut self.model.cov, "renew: LockLost");
                        prop_assert!(lost(&got), "{}: {:?}", ctx("renew refused"), got);
                    }
                }
            }
            Op::CompleteBatch { picks, .. } | Op::RenewBatch { picks } => {
                let locks: Vec<(usize, LockRef)> = picks
                    .iter()
                    .filter_map(|(p, forged)| {
                        let tamper = if *forged { Tamper::Token } else { Tamper::None };
                        self.model.pick(*p).map(|l| self.model.spoil(l, tamper))
                    })
                    .collect();
                let Some((q, _)) = locks.first().copied() else {
                    return Ok(());
                };
                let refs: Vec<LockRef> = locks.iter().map(|(_, l)| *l).collect();
                let renewing = matches!(op, Op::RenewBatch { .. });
                let and_receive = match op {
                    Op::CompleteBatch { and_receive, .. } => *and_receive,
                    _ => None,
                };
                let receive = and_receive.map(|n| ReceiveOptions {
                    max_messages: n,
                    wait: from_millis(0),
                    ..Default::default()
                });
                let mut received = None;
                let got = if renewing {
                    self.mq.renew_batch(QUEUES[q], &refs).await
                } else if let Some(options) = &receive {
                    self.mq
                        .complete_and_receive(QUEUES[q], &refs, options.clone())
                        .await
                        .map(|(done, got)| {
                            received = Some(got);
                            done
                        })
                } else {
                    self.mq.complete_batch(QUEUES[q], &refs).await
                }
                .map_err(|e| fail(ctx(&e.to_string())))?;
                let expected: Vec<(SeqNumber, bool, i64)> = refs
                    .iter()
                    .map(|l| {
                        if renewing {
                            let until = self.model.renew(q, *l, now);
                            (l.seq, until.is_some(), until.unwrap_or(0))
                        } else {
                            (l.seq, self.model.settle(q, *l, Verb::Complete, now), 0)
                        }
                    })
                    .collect();
                let got: Vec<(SeqNumber, bool, i64)> = got
                    .iter()
                    .map(|r| (r.seq, r.ok, r.locked_until_ms))
                    .collect();
                if expected.iter().any(|e| e.1) && expected.iter().any(|e| !e.1) {
                    hit(
                        &mut self.model.cov,
                        if renewing {
                            "renew_batch: good and stale items"
                        } else {
                            "complete_batch: good and stale items"
                        },
                    );
                }
                prop_assert_eq!(got, expected, "{}", ctx("per-item results"));
                // The claim of a complete-and-receive sees what the completions freed.
                if let (Some(options), Some(got)) = (receive, received) {
                    hit(&mut self.model.cov, "complete_and_receive");
                    self.check_receive(q, options, Ok(got), ctx).await?;
                }
            }
            Op::ReceiveDeferred { q, picks, any } => {
                let queue = &self.model.queues[*q];
                let deferred: Vec<SeqNumber> = queue
                    .msgs
                    .iter()
                    .filter(|(_, m)| m.state == St::Deferred)
                    .map(|(s, _)| *s)
                    .collect();
                let pool = if *any || deferred.is_empty() {
                    &self.model.known
                } else {
                    &deferred
                };
                if pool.is_empty() {
                    return Ok(());
                }
                let seqs: Vec<SeqNumber> = picks.iter().map(|p| pool[p % pool.len()]).collect();
                let got = self
                    .mq
                    .receive_deferred(QUEUES[*q], &seqs)
                    .await
                    .map_err(|e| fail(ctx(&e.to_string())))?;
                let queue = &mut self.model.queues[*q];
                if !queue.cfg.status.hands_out() {
                    hit(&mut self.model.cov, "receive_deferred: paused");
                    prop_assert!(
                        got.is_empty(),
                        "{}",
                        ctx("a paused queue hands out nothing")
                    );
                    return Ok(());
                }
                let until = now + queue.cfg.lock_ms();
                let mut expected = Vec::new();
                for seq in &seqs {
                    if let Some(m) = queue.msgs.get_mut(seq)
                        && m.state == St::Deferred
                    {
                        if m.expired(now) {
                            hit(&mut self.model.cov, "receive_deferred: expired, skipped");
                            continue;
                        }
                        hit(&mut self.model.cov, "receive_deferred: claimed");
                        if m.delivery_count >= queue.cfg.max_delivery_count {
                            hit(
                                &mut self.model.cov,
                                "receive_deferred: delivers past the bound",
                            );
                        }
                        m.delivery_count += 1;
                        m.state = St::Locked {
                            token: unseen(),
                            until,
                        };
                        expected.push(m.view(*seq));
                    }
                }
                self.take_locks(*q, &got, &expected, ctx)?;
            }
            Op::Cancel { q, pick, any } => {
                let queue = &self.model.queues[*q];
                let scheduled: Vec<SeqNumber> = queue
                    .msgs
                    .iter()
                    .filter(|(_, m)| m.state == St::Scheduled)
                    .map(|(s, _)| *s)
                    .collect();
                let pool = if *any || scheduled.is_empty() {
                    &self.model.known
                } else {
                    &scheduled
                };
                if pool.is_empty() {
                    return Ok(());
                }
                let seq = pool[pick % pool.len()];
                let got = self
                    .mq
                    .cancel(QUEUES[*q], seq)
                    .await
                    .map_err(|e| fail(ctx(&e.to_string())))?;
                let queue = &mut self.model.queues[*q];
                let expected = queue
                    .msgs
                    .get(&seq)
                    .is_some_and(|m| m.state == St::Scheduled && m.delivery_count == 0);
                if expected {
                    hit(&mut self.model.cov, "cancel: deleted");
                    queue.remove(seq);
                }
                prop_assert_eq!(got, expected, "{}", ctx("cancel"));
            }
            Op::Redrive {
                from,
                to,
                max,
                older,
            } => {
                let older_than = if *older { OLDER_THAN_MS } else { 0 };
                let options = RedriveOptions {
                    target: to.map(|t| QUEUES[t].to_owned()),
                    max: *max,
                    older_than: from_millis(older_than),
                    rate_per_sec: 0,
                    seq_numbers: None,
                };
                let got = self.mq.redrive(QUEUES[*from], options).await;
                let target = to.unwrap_or(*from);
                match self.model.redrive(*from, target, *max, older_than, now) {
                    Ok(n) => prop_assert_eq!(got.ok(), Some(n), "{}", ctx("redriven")),
                    Err(()) => prop_assert!(
                        matches!(got, Err(Error::GroupRequired { .. })),
                        "{}: {:?}",
                        ctx("GroupRequired"),
                        got
                    ),
                }
            }
            Op::Purge { q, max, older } => {
                let older_than = if *older { OLDER_THAN_MS } else { 0 };
                let options = PurgeOptions {
                    max: *max,
                    older_than: from_millis(older_than),
                    every_state: false,
                };
                let got = self
                    .mq
                    .purge(QUEUES[*q], options)
                    .await
                    .map_err(|e| fail(ctx(&e.to_string())))?;
                let queue = &mut self.model.queues[*q];
                let chosen = queue.dead_letters(now, *max, older_than);
                for seq in &chosen {
                    hit(&mut self.model.cov, "purge: deleted");
                    queue.msgs.remove(seq);
                }
                prop_assert_eq!(got, chosen.len() as u64, "{}", ctx("purged"));
            }
            Op::Status { q, status } => {
                let status = STATUSES[*status];
                self.mq
                    .set_queue_status(QUEUES[*q], status)
                    .await
                    .map_err(|e| fail(ctx(&e.to_string())))?;
                let queue = &mut self.model.queues[*q];
                hit(
                    &mut self.model.cov,
                    if status == queue.cfg.status {
                        "status: unchanged"
                    } else if status == QueueStatus::Active {
                        "status: resumed"
                    } else {
                        "status: paused"
                    },
                );
                queue.cfg.status = status;
                let listed = self
                    .mq
                    .list_queues()
                    .await
                    .map_err(|e| fail(ctx(&e.to_string())))?;
                let stored = listed
                    .iter()
                    .find(|i| i.name == QUEUES[*q])
                    .map(|i| &i.config);
                prop_assert_eq!(
                    stored,
                    Some(&self.model.queues[*q].cfg),
                    "{}",
                    ctx("status")
                );
            }
            Op::Update { q, cfg, mode } => {
                let queue = &mut self.model.queues[*q];
                let mode = mode.map_or(queue.cfg.ordering_mode, |m| MODES[m]);
                let config = cfg.config(mode);
                let got = self.mq.update_queue(QUEUES[*q], config.clone()).await;
                if mode != queue.cfg.ordering_mode && queue.in_play() {
                    hit(&mut self.model.cov, "update: mode change refused");
                    prop_assert!(
                        matches!(got, Err(Error::InvalidArgument(_))),
                        "{}: {:?}",
                        ctx("the mode is fixed while in play"),
                        got
                    );
                } else {
                    got.map_err(|e| fail(ctx(&e.to_string())))?;
                    hit(&mut self.model.cov, "update: applied");
                    if mode != queue.cfg.ordering_mode {
                        hit(&mut self.model.cov, "update: mode changed");
                    }
                    queue.cfg = config;
                }
                let listed: Vec<(String, QueueConfig)> = self
                    .mq
                    .list_queues()
                    .await
                    .map_err(|e| fail(ctx(&e.to_string())))?
                    .into_iter()
                    .map(|info| (info.name, info.config))
                    .collect();
                let mut expected: Vec<(String, QueueConfig)> = QUEUES
                    .iter()
                    .zip(&self.model.queues)
                    .map(|(name, queue)| ((*name).to_owned(), queue.cfg.clone()))
                    .collect();
                expected.sort_by(|a, b| a.0.cmp(&b.0));
                prop_assert_eq!(listed, expected, "{}", ctx("list_queues"));
            }
            Op::Peek {
                q,
                from,
                state,
                max,
            } => {
                let from = from
                    .filter(|_| !self.model.known.is_empty())
                    .map(|p| self.model.known[p % self.model.known.len()]);
                let state = state.map(|s| PEEK_STATES[s]);
                let options = PeekOptions {
                    from_seq: from,
                    state,
                    max: *max,
                };
                let got = self
                    .mq
                    .peek(QUEUES[*q], options)
                    .await
                    .map_err(|e| fail(ctx(&e.to_string())))?;
                let expected: Vec<View> = self.model.queues[*q]
                    .msgs
                    .iter()
                    .filter(|(s, m)| {
                        from.is_none_or(|f| **s >= f)
                            && state.is_none_or(|st| m.state.public() == st)
                    })
                    .take(*max as usize)
                    .map(|(s, m)| m.view(*s))
                    .collect();
                prop_assert_eq!(View::all(&got, &expected), expected, "{}", ctx("peek"));
                prop_assert!(
                    got.iter().all(|m| m.lock_token.is_none()),
                    "{}",
                    ctx("peek hands out no token")
                );
            }
            Op::Advance { ms } => self.clock.advance(*ms),
            Op::Sweep => {
                self.mq
                    .run_sweeps()
                    .await
                    .map_err(|e| fail(ctx(&e.to_string())))?;
                self.model.sweep(now);
            }
            Op::Reopen => {
                if !self.can_reopen {
                    return Ok(());
                }
                self.mq.close().await;
                self.mq = open(self.factory, self.dir, &self.clock).await?;
                self.model.reap(i64::MAX, now);
            }
        }
        Ok(())
    }
}

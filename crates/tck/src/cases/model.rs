//! Section 3 (3.4): a model-based property test. proptest drives random sequences of
//! sends (with and without ids), receives, renewals, settlements with good and stale
//! tokens, clock moves, sweeps and reopens against the store and against a small
//! in-memory reference model, comparing every observable result.
//!
//! The default run is short; a long run: `MQLITE_MODEL_CASES=10000 cargo test -p
//! mqlite-store-sqlite --test tck -- p3_4_store_matches_the_reference_model`. Failing
//! sequences are kept in `crates/tck/proptest-regressions/model.txt` and replayed first.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, TestCaseError, TestRunner};

use mqlite_engine_core::{
    Engine, EngineOptions, Error, LockRef, LockToken, ManualClock, MessageState, OutMessage,
    PeekOptions, QueueConfig, ReceiveOptions, SeqNumber,
};

use crate::harness::{Access, Ctx, START_MS, TckResult};

const Q: &str = "model";
const LOCK_MS: i64 = 5_000;
const MAX_DELIVERY: i64 = 3;
const DEDUP_MS: i64 = 10_000;

/// One step of a run.
#[derive(Debug, Clone)]
enum Op {
    Send { id: Option<u8>, body: u8 },
    Receive { n: u32 },
    Complete { pick: usize },
    Abandon { pick: usize, delay: bool },
    Defer { pick: usize },
    Renew { pick: usize },
    Forged { pick: usize },
    Advance { ms: i64 },
    Sweep,
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (proptest::option::of(0u8..4), 0u8..3).prop_map(|(id, body)| Op::Send { id, body }),
        4 => (1u32..4).prop_map(|n| Op::Receive { n }),
        3 => any::<usize>().prop_map(|pick| Op::Complete { pick }),
        2 => (any::<usize>(), any::<bool>()).prop_map(|(pick, delay)| Op::Abandon { pick, delay }),
        1 => any::<usize>().prop_map(|pick| Op::Defer { pick }),
        2 => any::<usize>().prop_map(|pick| Op::Renew { pick }),
        1 => any::<usize>().prop_map(|pick| Op::Forged { pick }),
        3 => (0i64..4_000).prop_map(|ms| Op::Advance { ms }),
        2 => Just(Op::Sweep),
        1 => Just(Op::Reopen),
    ]
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum St {
    Active,
    Locked { token: LockToken, until: i64 },
    Scheduled { at: i64 },
    Deferred,
    Dead,
}

#[derive(Debug, Clone)]
struct Msg {
    state: St,
    delivery_count: i64,
    body: Vec<u8>,
}

/// The reference: a standard queue without groups or TTL, written from the spec alone.
#[derive(Debug, Default)]
struct Model {
    msgs: BTreeMap<SeqNumber, Msg>,
    dedup: HashMap<String, (SeqNumber, Vec<u8>, i64)>,
    receipts: HashMap<(SeqNumber, LockToken, String), i64>,
    handed_out: Vec<LockRef>,
    last_seq: i64,
}

impl Model {
    fn live_lease(&self, lock: LockRef, now: i64) -> bool {
        matches!(self.msgs.get(&lock.seq), Some(Msg { state: St::Locked { token, until }, .. })
            if *token == lock.token && *until > now)
    }

    fn settle(
        &mut self,
        lock: LockRef,
        now: i64,
        key: String,
        effect: impl FnOnce(&mut Self),
    ) -> bool {
        if self.live_lease(lock, now) {
            effect(self);
            self.receipts.insert(
                (lock.seq, lock.token, key),
                now + mqlite_engine_core::RECEIPT_TTL_MS,
            );
            true
        } else {
            self.receipts
                .get(&(lock.seq, lock.token, key))
                .is_some_and(|exp| *exp > now)
        }
    }

    fn requeue(&mut self, seq: SeqNumber, delay: i64, now: i64) {
        if let Some(m) = self.msgs.get_mut(&seq) {
            m.state = if m.delivery_count >= MAX_DELIVERY {
                St::Dead
            } else if delay > 0 {
                St::Scheduled { at: now + delay }
            } else {
                St::Active
            };
        }
    }

    fn reap(&mut self, cutoff: i64) {
        for m in self.msgs.values_mut() {
            if let St::Locked { until, .. } = m.state
                && until <= cutoff
            {
                m.state = if m.delivery_count >= MAX_DELIVERY {
                    St::Dead
                } else {
                    St::Active
                };
            }
        }
    }

    fn sweep(&mut self, now: i64) {
        self.reap(now);
        for m in self.msgs.values_mut() {
            if let St::Scheduled { at } = m.state
                && at <= now
            {
                m.state = St::Active;
            }
        }
    }

    fn pick(&self, pick: usize) -> Option<LockRef> {
        (!self.handed_out.is_empty()).then(|| self.handed_out[pick % self.handed_out.len()])
    }
}

fn fail(msg: String) -> TestCaseError {
    TestCaseError::fail(msg)
}

fn lost<T: std::fmt::Debug>(r: &Result<T, Error>) -> bool {
    matches!(r, Err(Error::LockLost))
}

async fn open<F: Access>(
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

async fn check_run<F: Access>(
    factory: &F,
    dir: &std::path::Path,
    ops: &[Op],
    can_reopen: bool,
) -> Result<(), TestCaseError> {
    let clock = ManualClock::new(START_MS);
    let mut mq = open(factory, dir, &clock).await?;
    let config = QueueConfig {
        lock_duration_ms: LOCK_MS,
        max_delivery_count: MAX_DELIVERY,
        dedup_window_ms: DEDUP_MS,
        ..Default::default()
    };
    mq.create_queue(Q, config)
        .await
        .map_err(|e| fail(e.to_string()))?;
    let mut model = Model::default();
    for (step, op) in ops.iter().enumerate() {
        let now = clock.now();
        let ctx = |what: &str| format!("step {step} {op:?}: {what}");
        match op {
            Op::Send { id, body } => {
                let body_bytes = vec![b'a' + body];
                let mut msg = OutMessage::new(body_bytes.clone());
                let key = match id {
                    Some(i) => format!("id:{i}"),
                    None => format!("body:{body}"),
                };
                if let Some(i) = id {
                    msg = msg.with_id(format!("m{i}"));
                }
                let got = mq.send(Q, msg).await;
                match model
                    .dedup
                    .get(&key)
                    .filter(|(_, _, exp)| *exp > now)
                    .cloned()
                {
                    Some((seq, seen, _)) if seen == body_bytes => {
                        prop_assert_eq!(got.ok(), Some(seq), "{}", ctx("duplicate collapses"));
                    }
                    Some(_) => {
                        prop_assert!(
                            matches!(got, Err(Error::DedupConflict { .. })),
                            "{}",
                            ctx("conflict")
                        );
                    }
                    None => {
                        let seq = got.map_err(|e| fail(ctx(&e.to_string())))?;
                        prop_assert!(
                            seq.0 > model.last_seq,
                            "{}",
                            ctx("sequence strictly increases")
                        );
                        model.last_seq = seq.0;
                        model
                            .dedup
                            .insert(key, (seq, body_bytes.clone(), now + DEDUP_MS));
                        model.msgs.insert(
                            seq,
                            Msg {
                                state: St::Active,
                                delivery_count: 0,
                                body: body_bytes,
                            },
                        );
                    }
                }
            }
            Op::Receive { n } => {
                let got = mq
                    .receive(Q, ReceiveOptions::batch(*n))
                    .await
                    .map_err(|e| fail(ctx(&e.to_string())))?;
                let expected: Vec<SeqNumber> = model
                    .msgs
                    .iter()
                    .filter(|(_, m)| m.state == St::Active)
                    .map(|(s, _)| *s)
                    .take(*n as usize)
                    .collect();
                let seqs: Vec<SeqNumber> = got.iter().map(|m| m.seq).collect();
                prop_assert_eq!(&seqs, &expected, "{}", ctx("oldest active first"));
                for m in got {
                    let entry = model
                        .msgs
                        .get_mut(&m.seq)
                        .ok_or_else(|| fail(ctx("unknown seq")))?;
                    entry.delivery_count += 1;
                    prop_assert_eq!(m.delivery_count, entry.delivery_count, "{}", ctx("count"));
                    prop_assert_eq!(&m.content.body, &entry.body, "{}", ctx("body intact"));
                    prop_assert_eq!(m.locked_until_ms, now + LOCK_MS, "{}", ctx("lease"));
                    entry.state = St::Locked {
                        token: m.token(),
                        until: m.locked_until_ms,
                    };
                    model.handed_out.push(LockRef::from(&m));
                }
            }
            Op::Complete { pick } => {
                let Some(lock) = model.pick(*pick) else {
                    continue;
                };
                let got = mq.complete(Q, lock).await;
                let ok = model.settle(lock, now, "complete".into(), |m| {
                    m.msgs.remove(&lock.seq);
                });
                prop_assert_eq!(got.is_ok(), ok, "{}: {:?}", ctx("complete"), got);
                prop_assert!(ok || lost(&got), "{}", ctx("a refusal is LockLost"));
            }
            Op::Abandon { pick, delay } => {
                let Some(lock) = model.pick(*pick) else {
                    continue;
                };
                let delay_ms = if *delay { 1_000 } else { 0 };
                let got = mq.abandon(Q, lock, delay_ms).await;
                let ok = model.settle(lock, now, format!("abandon{delay_ms}"), |m| {
                    m.requeue(lock.seq, delay_ms, now)
                });
                prop_assert_eq!(got.is_ok(), ok, "{}: {:?}", ctx("abandon"), got);
                prop_assert!(ok || lost(&got), "{}", ctx("a refusal is LockLost"));
            }
            Op::Defer { pick } => {
                let Some(lock) = model.pick(*pick) else {
                    continue;
                };
                let got = mq.defer(Q, lock).await;
                let ok = model.settle(lock, now, "defer".into(), |m| {
                    if let Some(msg) = m.msgs.get_mut(&lock.seq) {
                        msg.state = St::Deferred;
                    }
                });
                prop_assert_eq!(got.is_ok(), ok, "{}: {:?}", ctx("defer"), got);
            }
            Op::Renew { pick } => {
                let Some(lock) = model.pick(*pick) else {
                    continue;
                };
                let got = mq.renew(Q, lock).await;
                if model.live_lease(lock, now) {
                    let until = got.map_err(|e| fail(ctx(&e.to_string())))?;
                    if let Some(Msg {
                        state: St::Locked { until: u, .. },
                        ..
                    }) = model.msgs.get_mut(&lock.seq)
                    {
                        *u = (*u).max(now + LOCK_MS);
                        prop_assert_eq!(until, *u, "{}", ctx("renewed lease"));
                    }
                } else {
                    prop_assert!(lost(&got), "{}: {:?}", ctx("renew refused"), got);
                }
            }
            Op::Forged { pick } => {
                let Some(lock) = model.pick(*pick) else {
                    continue;
                };
                let forged = LockRef {
                    seq: lock.seq,
                    token: LockToken::random(),
                };
                prop_assert!(
                    lost(&mq.complete(Q, forged).await),
                    "{}",
                    ctx("forged token")
                );
            }
            Op::Advance { ms } => clock.advance(*ms),
            Op::Sweep => {
                mq.run_sweeps()
                    .await
                    .map_err(|e| fail(ctx(&e.to_string())))?;
                model.sweep(now);
            }
            Op::Reopen => {
                if !can_reopen {
                    continue;
                }
                mq.close().await;
                mq = open(factory, dir, &clock).await?;
                model.reap(i64::MAX);
            }
        }
        // After every step the stored states equal the model's.
        let stored = mq
            .peek(
                Q,
                PeekOptions {
                    max: 1000,
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| fail(ctx(&e.to_string())))?;
        let stored: Vec<(SeqNumber, MessageState, i64)> = stored
            .iter()
            .map(|m| (m.seq, m.state, m.delivery_count))
            .collect();
        let expected: Vec<(SeqNumber, MessageState, i64)> = model
            .msgs
            .iter()
            .map(|(s, m)| {
                let st = match m.state {
                    St::Active => MessageState::Active,
                    St::Locked { .. } => MessageState::Locked,
                    St::Scheduled { .. } => MessageState::Scheduled,
                    St::Deferred => MessageState::Deferred,
                    St::Dead => MessageState::DeadLettered,
                };
                (*s, st, m.delivery_count)
            })
            .collect();
        prop_assert_eq!(stored, expected, "{}", ctx("stored states"));
    }
    mq.close().await;
    Ok(())
}

/// 3.4 Model-based: random operation sequences give the same observable results on the
/// store as on the in-memory reference model.
pub async fn p3_4_store_matches_the_reference_model<F: Access>(ctx: Ctx<F>) -> TckResult {
    let cases = std::env::var("MQLITE_MODEL_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(48);
    let can_reopen = ctx
        .factory
        .unsupported(crate::harness::Capability::Reopen)
        .is_none();
    let factory = ctx.factory.clone();
    let root = ctx.dir.path().to_path_buf();
    let handle = tokio::runtime::Handle::current();
    let outcome = tokio::task::spawn_blocking(move || {
        let config = Config {
            cases,
            failure_persistence: Some(Box::new(FileFailurePersistence::Direct(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/proptest-regressions/model.txt"
            )))),
            ..Config::default()
        };
        let mut runner = TestRunner::new(config);
        let counter = Arc::new(AtomicU64::new(0));
        runner
            .run(&proptest::collection::vec(op(), 1..60), |ops| {
                let dir = root.join(format!("run-{}", counter.fetch_add(1, Ordering::Relaxed)));
                std::fs::create_dir_all(&dir).map_err(|e| fail(e.to_string()))?;
                let result = handle.block_on(check_run(&*factory, &dir, &ops, can_reopen));
                let _ = std::fs::remove_dir_all(&dir);
                result
            })
            .map_err(|e| e.to_string())
    })
    .await?;
    outcome.map_err(|e| format!("the store diverged from the model: {e}").into())
}

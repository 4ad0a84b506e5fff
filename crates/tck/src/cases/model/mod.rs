//! Section 3 (3.4): a model-based property test. proptest drives random sequences of
//! operations through the public [`Engine`] API against three queues at once (standard,
//! group_fifo and strict_fifo, each with a random configuration), and runs the same
//! sequence through an in-memory reference model written from the spec. After every step
//! every queue's stored messages (Peek: sequence, state, delivery count, times, dead-letter
//! reason, body and metadata) and its Stats must equal the model's, and every call must
//! return what the model says.
//!
//! The operations: send batches of 1..=4 (repeated ids inside one batch, dedup window on
//! and off, conflicts, groups, missing groups, scheduled sends, per-send TTL over a queue
//! default), receive batches of 1..=5 in peek-lock and receive-and-delete with and without
//! attempt ids, complete / abandon (with and without delay) / reject / defer with good,
//! stale, forged and wrong-queue tokens, renew, complete_batch and renew_batch mixing good
//! and forged items, receive_deferred, cancel, redrive (same queue and another, with max and
//! age), purge, peek with filters, update_queue (ordering mode changes only while idle),
//! priorities (0, 4 and 9: claims take the highest first, sequence order inside a line),
//! pause and resume (each status: a paused send is refused whole, a paused receive and
//! receive_deferred answer nothing, held leases settle as ever),
//! clock moves across lease, TTL, dedup and receipt deadlines (equality included), sweeps
//! and reopen (orphan recovery).
//!
//! The ordering rule the model encodes: a message's line is its group on standard and
//! group_fifo queues, one line for the whole queue on strict_fifo, none for an ungrouped
//! message on a standard queue. Each line has one head: the oldest message in play
//! (active, locked, deferred, scheduled) when the line last changed hands. Only a head is
//! claimed; it stays head while locked, deferred or parked; when it leaves play the oldest
//! message still in play becomes head. The three cases the line rule decides (the module
//! docs of `mqlite_contract::store`) are modelled as decided: a message sent scheduled
//! holds its line from the send (DECISION 1, 5.7); a redriven dead letter re-enters its
//! line at its own sequence number, never preempting the current head and going ahead of
//! younger waiting messages (DECISION 2, 5.8); redriving an ungrouped dead letter into a
//! group_fifo queue is GroupRequired and moves nothing (DECISION 3, 5.9).
//!
//! Besides the spec, the model pins a few details of today's store that a rewrite should
//! keep or consciously change here: abandon without delay, the reaper and the orphan sweep
//! leave visible_at as it was; TTL stays anchored at the send's visible time (a delayed
//! abandon does not move it; redrive clears it); a dead letter keeps its expires_at;
//! receive_deferred skips an expired deferred message; a scheduled message becomes active
//! only through the scheduler sweep. Not checked: a dead letter's visible_at, the
//! description the store writes on its own dead letters, and the state field of a
//! receive-and-delete response.
//!
//! `MQLITE_MODEL_COVERAGE=1` prints how often each situation worth reaching came up (with
//! `--nocapture`), so that a generator change that stops reaching one is noticed.
//!
//! The default run is short; a long run: `MQLITE_MODEL_CASES=10000
//! MQLITE_TCK_TIMEOUT_SECS=7200 cargo test --release -p mqlite-testbed --test tck --
//! p3_4_store_matches_the_reference_model`. Failing
//! sequences are kept in `crates/tck/proptest-regressions/model.txt` and replayed first.

use mqlite_contract::{
    EnqueueSlot, Error, LockRef, LockToken, ManualClock, Message, MessageState, OrderingMode,
    OutMessage, PeekOptions, PurgeOptions, QueueConfig, QueueStats, QueueStatus,
    REASON_MAX_DELIVERY, REASON_TTL_EXPIRED, RECEIPT_TTL_MS, ReceiveMode, ReceiveOptions,
    RedriveOptions, SendOptions, SeqNumber, from_millis,
};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, TestCaseError, TestRunner};

use mqlite_engine::{Engine, EngineOptions};

use crate::harness::{Access, Ctx, START_MS, TckResult};

mod calls;
mod ops;
mod queue;
mod reference;
mod run;

use ops::*;
use queue::*;
use reference::*;
use run::*;

/// The queues of a run, with the ordering mode each starts in.
pub(super) const QUEUES: [&str; 3] = ["std", "grp", "fifo"];
pub(super) const MODES: [OrderingMode; 3] = [
    OrderingMode::Standard,
    OrderingMode::GroupFifo,
    OrderingMode::StrictFifo,
];
/// Reject arguments: (reason, description).
pub(super) const REASONS: [(&str, &str); 3] =
    [("poison", ""), ("poison", "bad body"), ("late", "x")];
/// The states a filtered Peek asks for.
pub(super) const PEEK_STATES: [MessageState; 5] = [
    MessageState::Active,
    MessageState::Locked,
    MessageState::Deferred,
    MessageState::Scheduled,
    MessageState::DeadLettered,
];
/// A redrive or purge with `older` set takes dead letters at least this old.
pub(super) const OLDER_THAN_MS: i64 = 2_000;
/// The token the model writes on a claim before it has seen the store's.
pub(super) fn unseen() -> LockToken {
    LockToken::from_u128(0)
}

/// Sequences run before the random ones on every run: the shortest one that shows each
/// decision, so that a switch turned on is checked even where random runs rarely reach
/// its situation (two dead letters of one idle line, out of sequence order, are rare).
fn pinned() -> Vec<(&'static str, Vec<CfgSpec>, Vec<Op>)> {
    let cfg = CfgSpec {
        lock_ms: 2_000,
        max_delivery: 1,
        default_ttl_ms: 0,
        dead_letter_on_expire: true,
        dedup_ms: 0,
    };
    let cfgs = vec![cfg.clone(), cfg.clone(), cfg];
    let send = |q: usize, group: Option<u8>, sched: Option<i64>, ttl: Option<i64>| Op::Send {
        q,
        msgs: vec![SendSpec {
            id: None,
            body: 0,
            group,
            priority: 0,
        }],
        sched,
        ttl,
        missing_group: true,
    };
    let receive = |q: usize| Op::Receive {
        q,
        n: 1,
        delete: false,
        attempt: None,
    };
    vec![
        (
            // A scheduled send heads its idle line; the later send waits behind it.
            "DECISION 1",
            cfgs.clone(),
            vec![
                send(1, Some(1), Some(5_000), None),
                send(1, Some(1), None, None),
                receive(1),
                Op::Advance { ms: 5_000 },
                Op::Sweep,
                receive(1),
            ],
        ),
        (
            // g1: seq 1 then seq 2; seq 2 dies first (TTL), seq 1 later (reject). Redriven
            // together into the idle line, seq 1 heads it again.
            "DECISION 2",
            cfgs.clone(),
            vec![
                send(0, Some(1), None, None),
                send(0, Some(1), None, Some(1_500)),
                Op::Advance { ms: 2_000 },
                Op::Sweep,
                receive(0),
                Op::Advance { ms: 1 },
                Op::Settle {
                    pick: 1,
                    verb: Verb::Reject(0),
                    tamper: Tamper::None,
                },
                Op::Redrive {
                    from: 0,
                    to: None,
                    max: 0,
                    older: false,
                },
                receive(0),
            ],
        ),
        (
            // An ungrouped dead letter redriven into the group_fifo queue.
            "DECISION 3",
            cfgs,
            vec![
                send(0, None, None, Some(1_500)),
                Op::Advance { ms: 2_000 },
                Op::Sweep,
                Op::Redrive {
                    from: 0,
                    to: Some(1),
                    max: 0,
                    older: false,
                },
                receive(1),
            ],
        ),
    ]
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
        let coverage = std::sync::Mutex::new(Coverage::new());
        for (name, cfgs, ops) in pinned() {
            let dir = root.join(format!("pinned-{}", name.replace(' ', "-")));
            std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
            handle
                .block_on(check_run(
                    &*factory, &dir, &cfgs, &ops, can_reopen, &coverage,
                ))
                .map_err(|e| format!("pinned sequence {name}: {e}"))?;
            let _ = std::fs::remove_dir_all(&dir);
        }
        let input = (
            proptest::collection::vec(cfg_spec(), QUEUES.len()),
            proptest::collection::vec(op(), 1..250),
        );
        runner
            .run(&input, |(cfgs, ops)| {
                let dir = root.join(format!("run-{}", counter.fetch_add(1, Ordering::Relaxed)));
                std::fs::create_dir_all(&dir).map_err(|e| fail(e.to_string()))?;
                let result = handle.block_on(check_run(
                    &*factory, &dir, &cfgs, &ops, can_reopen, &coverage,
                ));
                let _ = std::fs::remove_dir_all(&dir);
                result
            })
            .map_err(|e| e.to_string())?;
        if std::env::var_os("MQLITE_MODEL_COVERAGE").is_some() {
            let coverage = coverage.into_inner().unwrap_or_else(|e| e.into_inner());
            for (what, n) in coverage {
                eprintln!("model coverage: {n:>8}  {what}");
            }
        }
        Ok::<(), String>(())
    })
    .await?;
    outcome.map_err(|e| format!("the store diverged from the model: {e}").into())
}

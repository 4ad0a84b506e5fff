//! Section 14: concurrency under real parallelism (a multi-threaded runtime; the manual
//! clock stands still unless a case moves it).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mqlite_contract::{
    Error, LockRef, MessageState, OrderingMode, OutMessage, PurgeOptions, QueueConfig,
    ReceiveOptions, SeqNumber, from_millis,
};

use super::cancellation::poll_once;
use super::{config, parked_receiver, peek_all, receive_one, send_n, state_of};
use crate::harness::{Access, Capability, Ctx, TckResult};

const Q: &str = "q";

/// 14.1 Exclusive delivery under real parallelism: no two live leases on one message.
pub async fn p14_1_exclusive_delivery_under_parallelism<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, config(600_000, 10)).await?;
    let n = 200;
    send_n(&mq, Q, "m", n).await?;
    let seen = Arc::new(Mutex::new(HashMap::new()));
    let mut tasks = Vec::new();
    for worker in 0..4 {
        let (mq, seen) = (mq.clone(), seen.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let got = mq.receive(Q, ReceiveOptions::batch(7)).await?;
                if got.is_empty() {
                    return Ok::<_, Error>(());
                }
                for m in got {
                    let prev = seen
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(m.seq, (worker, m.token()));
                    assert!(prev.is_none(), "{} claimed twice under live leases", m.seq);
                }
            }
        }));
    }
    for t in tasks {
        t.await??;
    }
    let seen = seen.lock().unwrap_or_else(|e| e.into_inner());
    assert_eq!(seen.len(), n, "every message claimed exactly once");
    let tokens: HashSet<_> = seen.values().map(|(_, t)| *t).collect();
    assert_eq!(tokens.len(), n);
    Ok(())
}

/// 14.2 The fence fences: after reassignment, the old holder's settles fail and the new
/// holder's succeed, even when both race.
pub async fn p14_2_fence_holds_under_parallel_settles<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, config(1_000, 10)).await?;
    let n = 50;
    send_n(&mq, Q, "m", n).await?;
    let old = mq.receive(Q, ReceiveOptions::batch(n as u32)).await?;
    ctx.clock.advance(1_000);
    mq.run_sweeps().await?;
    let new = mq.receive(Q, ReceiveOptions::batch(n as u32)).await?;
    assert_eq!(new.len(), n);
    let settle_all = |locks: Vec<LockRef>| {
        let mq = mq.clone();
        tokio::spawn(async move {
            let mut oks = 0;
            for l in locks {
                match mq.complete(Q, l).await {
                    Ok(()) => oks += 1,
                    Err(Error::LockLost { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(oks)
        })
    };
    let a = settle_all(old.iter().map(LockRef::from).collect());
    let b = settle_all(new.iter().map(LockRef::from).collect());
    assert_eq!(a.await??, 0, "the previous holder is fenced");
    assert_eq!(b.await??, n, "the new holder settles everything");
    assert!(peek_all(&mq, Q).await?.is_empty());
    Ok(())
}

/// 14.3 A completed message is never delivered again, across sweeps and reopen.
pub async fn p14_3_completed_message_is_never_redelivered<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, config(1_000, 10)).await?;
    let seqs = send_n(&mq, Q, "m", 3).await?;
    let m = receive_one(&mq, Q).await?;
    mq.complete(Q, &m).await?;
    ctx.clock.advance(3_600_000);
    mq.run_sweeps().await?;
    mq.close().await;
    let mq = ctx.engine().await?;
    let mut got = Vec::new();
    while let Some(m) = mq.receive_one(Q).await? {
        got.push(m.seq);
        mq.complete(Q, &m).await?;
    }
    assert_eq!(got, seqs[1..].to_vec());
    assert!(!got.contains(&m.seq));
    Ok(())
}

/// 14.3 (G1) Sequence numbers never repeat: not after the largest is completed, deleted
/// by a receive-and-delete or with its queue, and not across a reopen — a number handed
/// out once can never fence or settle another message.
pub async fn p14_3_sequence_numbers_never_repeat<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, config(30_000, 10)).await?;
    let mut highest = *send_n(&mq, Q, "a", 3).await?.last().expect("three");
    // The largest completed: the next send still goes above it.
    while let Some(m) = mq.receive_one(Q).await? {
        mq.complete(Q, &m).await?;
    }
    let next = mq.send(Q, OutMessage::new("b")).await?;
    assert!(next > highest, "{next} after {highest}");
    highest = next;
    // The largest taken by receive-and-delete.
    let gone = mq
        .receive(
            Q,
            ReceiveOptions {
                mode: mqlite_contract::ReceiveMode::ReceiveAndDelete,
                ..Default::default()
            },
        )
        .await?;
    assert_eq!(gone[0].seq, highest);
    // The largest deleted with its queue, then the store reopened.
    mq.create_queue("other", config(30_000, 10)).await?;
    highest = mq.send("other", OutMessage::new("c")).await?;
    mq.delete_queue("other").await?;
    mq.close().await;
    let mq = ctx.engine().await?;
    let after = mq.send(Q, OutMessage::new("d")).await?;
    assert!(
        after > highest,
        "{after} after {highest}, across delete and reopen"
    );
    let batch = send_n(&mq, Q, "e", 3).await?;
    assert!(batch.windows(2).all(|w| w[0] < w[1]) && batch[0] > after);
    Ok(())
}

/// 14.3 (G1) Nor after the largest is deleted any other way a message leaves: a
/// batch's completion, a completion in a line, a purge of dead letters, a TTL discard,
/// dead-letter retention, a cancel. Each way below deletes the newest message of the
/// store, and the next send must still go above it (each way has a queue of its own, so
/// the sends in between stay out of its receives).
pub async fn p14_3_sequence_numbers_never_repeat_after_any_delete<F: Access>(
    ctx: Ctx<F>,
) -> TckResult {
    let mq = ctx.engine().await?;

    // A batch's completion.
    mq.create_queue("batch", config(30_000, 10)).await?;
    let sent = send_n(&mq, "batch", "b", 3).await?;
    let got = mq.receive("batch", ReceiveOptions::batch(3)).await?;
    assert_eq!(got.len(), 3);
    let locks: Vec<LockRef> = got.iter().map(LockRef::from).collect();
    let done = mq.complete_batch("batch", &locks).await?;
    assert!(done.iter().all(|r| r.ok), "{done:?}");
    above(&mq, "batch", sent[2], "a batch's completion").await?;

    // A completion in a line (a FIFO queue's message).
    mq.create_queue(
        "fifo",
        QueueConfig {
            ordering_mode: OrderingMode::GroupFifo,
            ..config(30_000, 10)
        },
    )
    .await?;
    let seq = mq
        .send("fifo", OutMessage::new("f").with_group("g"))
        .await?;
    let m = receive_one(&mq, "fifo").await?;
    assert_eq!(m.seq, seq);
    mq.complete("fifo", &m).await?;
    above(&mq, "fifo", seq, "a completion in a line").await?;

    // A purge of dead letters. (Dead-lettered by its TTL here and below, not by a
    // Reject, so that a store whose Reject is broken fails this case for nothing else.)
    let expiring = QueueConfig {
        default_ttl: from_millis(1_000),
        ..config(30_000, 10)
    };
    mq.create_queue("dlq", expiring.clone()).await?;
    let seq = past_ttl(&mq, &ctx.clock, "dlq").await?;
    assert_eq!(
        state_of(&mq, "dlq", seq).await?,
        Some(MessageState::DeadLettered)
    );
    assert_eq!(mq.purge("dlq", PurgeOptions::default()).await?, 1);
    above(&mq, "dlq", seq, "a purge").await?;

    // A TTL discard.
    mq.create_queue(
        "drop",
        QueueConfig {
            dead_letter_on_expire: false,
            ..expiring.clone()
        },
    )
    .await?;
    let seq = past_ttl(&mq, &ctx.clock, "drop").await?;
    assert_eq!(state_of(&mq, "drop", seq).await?, None, "discarded");
    above(&mq, "drop", seq, "a TTL discard").await?;

    // Dead-letter retention.
    mq.create_queue(
        "kept",
        QueueConfig {
            dlq_max_age_ms: 1_000,
            ..expiring
        },
    )
    .await?;
    let seq = past_ttl(&mq, &ctx.clock, "kept").await?;
    assert_eq!(
        state_of(&mq, "kept", seq).await?,
        Some(MessageState::DeadLettered)
    );
    ctx.clock.advance(1_001);
    mq.run_sweeps().await?;
    assert_eq!(state_of(&mq, "kept", seq).await?, None, "past retention");
    above(&mq, "kept", seq, "retention").await?;

    // A cancel.
    mq.create_queue("sched", config(30_000, 10)).await?;
    let seq = mq
        .schedule("sched", OutMessage::new("s"), ctx.clock.now() + 10_000)
        .await?;
    assert!(mq.cancel("sched", seq).await?);
    above(&mq, "sched", seq, "a cancel").await?;
    Ok(())
}

/// Sends one message to `queue`, whose TTL is 1 s, and sweeps once it has passed.
async fn past_ttl<S: mqlite_contract::Store>(
    mq: &mqlite_engine::Engine<S>,
    clock: &mqlite_contract::ManualClock,
    queue: &str,
) -> mqlite_contract::Result<SeqNumber> {
    let seq = mq.send(queue, OutMessage::new("ttl")).await?;
    clock.advance(1_000);
    mq.run_sweeps().await?;
    Ok(seq)
}

/// Sends one message to `queue` and checks that its number is above `gone`, the
/// largest number the store handed out, just deleted by `how`.
async fn above<S: mqlite_contract::Store>(
    mq: &mqlite_engine::Engine<S>,
    queue: &str,
    gone: SeqNumber,
    how: &str,
) -> mqlite_contract::Result<()> {
    // With a group, which a FIFO queue requires and the others accept.
    let next = mq
        .send(queue, OutMessage::new("next").with_group("g"))
        .await?;
    assert!(next > gone, "{next} after {gone}, deleted by {how}");
    Ok(())
}

/// 14.4 Every message sent is eventually completed, with consumers that abandon and let
/// leases lapse along the way.
pub async fn p14_4_every_message_is_eventually_completed<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, config(1_000, 1_000)).await?;
    let n = 300;
    let sent: HashSet<_> = send_n(&mq, Q, "m", n).await?.into_iter().collect();
    let done = Arc::new(Mutex::new(Vec::new()));
    for round in 0..100 {
        let mut tasks = Vec::new();
        for worker in 0..3u64 {
            let (mq, done) = (mq.clone(), done.clone());
            tasks.push(tokio::spawn(async move {
                let got = mq.receive(Q, ReceiveOptions::batch(16)).await?;
                for (i, m) in got.iter().enumerate() {
                    // A deterministic mix: complete most, abandon some, drop some.
                    match (m.seq.0 as u64 + worker + round) % 5 {
                        0 => mq.abandon(Q, m, Duration::ZERO).await?,
                        1 if i % 2 == 0 => {} // the consumer "dies": the lease lapses
                        _ => {
                            mq.complete(Q, m).await?;
                            done.lock().unwrap_or_else(|e| e.into_inner()).push(m.seq);
                        }
                    }
                }
                Ok::<_, Error>(())
            }));
        }
        for t in tasks {
            t.await??;
        }
        ctx.clock.advance(1_000);
        mq.run_sweeps().await?;
        if mq.stats(Q).await?.total == 0 {
            break;
        }
    }
    let done = done.lock().unwrap_or_else(|e| e.into_inner());
    let completed: HashSet<_> = done.iter().copied().collect();
    assert_eq!(completed.len(), done.len(), "nothing completed twice");
    assert_eq!(completed, sent, "every message completed");
    Ok(())
}

/// 14.5 Close stops admission first (later work is Closed, even while admitted work
/// still runs), wakes long-polling receivers with Closed, lets admitted work finish, and
/// only then releases the database. Sends racing the close are each either committed
/// (and present after reopen) or refused with Closed (and absent).
pub async fn p14_5_close_stops_admission_and_wakes_long_polls<F: Access>(ctx: Ctx<F>) -> TckResult {
    const OTHER: &str = "other";
    let mq = ctx.engine_with_queue(Q, config(30_000, 10)).await?;
    mq.create_queue(OTHER, config(30_000, 10)).await?;
    let waiter = parked_receiver(&mq, Q).await?;

    // Admitted work in flight: a transaction that has sent and holds the writer until
    // the case lets it go.
    let (inside_tx, inside) = tokio::sync::oneshot::channel::<()>();
    let (go_on, go_on_rx) = std::sync::mpsc::channel::<()>();
    let admitted = {
        let mq = mq.clone();
        tokio::spawn(async move {
            mq.tx::<F::Native, _, _>(async move |tx| {
                let seq = tx.send(Q, OutMessage::new("admitted")).await?;
                let _ = inside_tx.send(());
                // Blocking the writer thread is the point: the work is still running.
                let _ = go_on_rx.recv();
                Ok::<_, Error>(seq)
            })
            .await
        })
    };
    inside.await?;

    // Sends racing the close, to both queues.
    let racing: Vec<_> = (0..20)
        .map(|i| {
            let queue = if i % 2 == 0 { Q } else { OTHER };
            let body = format!("race-{i}");
            let mq = mq.clone();
            let send = {
                let body = body.clone();
                tokio::spawn(async move { mq.send(queue, OutMessage::new(body)).await })
            };
            (queue, body, send)
        })
        .collect();

    let mut closing = Box::pin(mq.close());
    tokio::select! {
        biased;
        () = &mut closing => {
            return Err("close finished while admitted work was still running".into());
        }
        () = std::future::ready(()) => {}
    }
    assert!(mq.is_closed());
    // Admission stopped first: while the admitted transaction still runs, new work is
    // refused at once (not queued behind the close) and the long-poll is woken with
    // Closed.
    assert!(
        matches!(
            poll_once(mq.send(Q, OutMessage::new("late"))).await,
            Some(Err(Error::Closed))
        ),
        "a send after close is refused at once"
    );
    assert!(
        matches!(poll_once(mq.receive_one(Q)).await, Some(Err(Error::Closed))),
        "a receive after close is refused at once"
    );
    match waiter.await? {
        Err(Error::Closed) => {}
        other => return Err(format!("long-poll should end with Closed, got {other:?}").into()),
    }
    assert!(
        !admitted.is_finished(),
        "the admitted work is still running"
    );
    if ctx.factory.unsupported(Capability::FileLock).is_none() {
        match ctx.store().await {
            Err(Error::DbLocked { .. }) => {}
            Err(e) => return Err(format!("expected DbLocked while closing, got {e}").into()),
            Ok(_) => return Err("the database was released before admitted work finished".into()),
        }
    }
    go_on.send(())?;
    closing.await;
    let admitted = admitted
        .await?
        .map_err(|e| format!("the admitted transaction must commit, got {e}"))?;

    let mut expected: HashMap<(&str, Vec<u8>), SeqNumber> = HashMap::new();
    expected.insert((Q, b"admitted".to_vec()), admitted);
    let mut refused = 0;
    for (queue, body, send) in racing {
        match send.await? {
            Ok(seq) => {
                expected.insert((queue, body.into_bytes()), seq);
            }
            Err(Error::Closed) => refused += 1,
            Err(e) => return Err(format!("a racing send is committed or Closed, got {e}").into()),
        }
    }
    assert!(matches!(
        mq.send(OTHER, OutMessage::new("late")).await,
        Err(Error::Closed)
    ));

    // The database is released: it reopens holding exactly the committed sends.
    let mq = ctx.engine().await?;
    let mut found = HashMap::new();
    for queue in [Q, OTHER] {
        for m in peek_all(&mq, queue).await? {
            found.insert((queue, m.content.body), m.seq);
        }
    }
    assert_eq!(
        found, expected,
        "committed sends present, refused ones ({refused}) and late ones absent"
    );
    Ok(())
}

/// 14.6 Calls that may share a commit stay independent: among concurrent sends, a
/// send to a queue that does not exist and settlements with forged tokens fail alone;
/// every other send is committed and acknowledged, and the failures change nothing.
pub async fn p14_6_a_failing_call_leaves_its_neighbours_committed<F: Access>(
    ctx: Ctx<F>,
) -> TckResult {
    let mq = ctx.engine_with_queue(Q, config(600_000, 10)).await?;
    send_n(&mq, Q, "held", 1).await?;
    let held = receive_one(&mq, Q).await?;
    let forged = LockRef {
        seq: held.seq,
        token: mqlite_contract::LockToken::random(),
    };
    let mut calls = Vec::new();
    for round in 0..8 {
        for i in 0..6 {
            let mq = mq.clone();
            calls.push(tokio::spawn(async move {
                mq.send(Q, OutMessage::new(format!("r{round}-{i}")))
                    .await
                    .map(|_| "sent")
            }));
        }
        let mq2 = mq.clone();
        calls.push(tokio::spawn(async move {
            mq2.send("missing", OutMessage::new("nowhere"))
                .await
                .map(|_| "sent to missing")
        }));
        let mq3 = mq.clone();
        calls.push(tokio::spawn(async move {
            mq3.complete(Q, forged).await.map(|()| "forged complete")
        }));
    }
    let mut sent = 0;
    for c in calls {
        match c.await? {
            Ok("sent") => sent += 1,
            Ok(other) => return Err(format!("{other} succeeded").into()),
            Err(Error::NotFound { .. } | Error::LockLost { .. }) => {}
            Err(e) => return Err(format!("unexpected error: {e}").into()),
        }
    }
    assert_eq!(sent, 48);
    let all = peek_all(&mq, Q).await?;
    assert_eq!(all.len(), 49, "48 sends and the held message");
    let locked: Vec<_> = all
        .iter()
        .filter(|m| m.state == mqlite_contract::MessageState::Locked)
        .map(|m| m.seq)
        .collect();
    assert_eq!(
        locked,
        vec![held.seq],
        "the forged completes changed nothing"
    );
    mq.complete(Q, &held).await?;
    Ok(())
}

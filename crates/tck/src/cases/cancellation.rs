//! Section 13: cancellation. In Rust, dropping a call's future is its cancellation.

use std::future::Future;
use std::pin::pin;
use std::time::Duration;

use std::collections::{HashMap, HashSet};

use mqlite_contract::{
    AdminOps, Error, Message, MessageOps, MessageState, OutMessage, QueueConfig, ReceiveOptions,
    SeqNumber, Store,
};
use mqlite_engine::Engine;

use super::{config, peek_all, send_n};
use crate::harness::{Access, Ctx, TckResult};

const Q: &str = "q";

/// Polls `fut` exactly once; returns its output if it finished, else drops it (the
/// caller's cancellation).
pub async fn poll_once<T>(fut: impl Future<Output = T>) -> Option<T> {
    let mut fut = pin!(fut);
    tokio::select! {
        biased;
        out = &mut fut => Some(out),
        () = std::future::ready(()) => None,
    }
}

/// Handed to a transaction body: [`Pause::here`] tells the test the body is inside the
/// transaction, then blocks the writer thread until the test has dropped the call.
pub struct Pause {
    inside: tokio::sync::oneshot::Sender<()>,
    go_on: std::sync::mpsc::Receiver<()>,
}

impl Pause {
    /// Signals "inside" and waits until the caller is gone.
    pub fn here(self) {
        let _ = self.inside.send(());
        let _ = self.go_on.recv();
    }
}

/// Starts the call `start` builds, waits until its transaction body reaches
/// [`Pause::here`], drops the call (the caller's cancellation), then lets the body go on.
pub async fn cancel_at_pause<Fut: Future>(
    start: impl FnOnce(Pause) -> Fut,
) -> std::result::Result<(), Box<dyn std::error::Error>> {
    let (inside, inside_rx) = tokio::sync::oneshot::channel();
    let (go_on_tx, go_on) = std::sync::mpsc::channel();
    let mut fut = Box::pin(start(Pause { inside, go_on }));
    tokio::select! {
        biased;
        _ = &mut fut => return Err("the transaction cannot finish before it is released".into()),
        _ = inside_rx => {}
    }
    drop(fut);
    go_on_tx.send(())?;
    Ok(())
}

/// Occupies the store's writer with an application transaction until `release` fires.
async fn block_writer<F: Access>(
    mq: &Engine<F::Store>,
) -> (
    std::sync::mpsc::Sender<()>,
    tokio::task::JoinHandle<mqlite_contract::Result<()>>,
) {
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
    let blocker = {
        let mq = mq.clone();
        tokio::spawn(async move {
            mq.tx::<F::Native, _, _>(async move |_tx| {
                let _ = started_tx.send(());
                // Waiting inside the writer thread is the point: it is busy.
                let _ = release_rx.recv();
                Ok::<_, Error>(())
            })
            .await
        })
    };
    let _ = started_rx.await;
    (release_tx, blocker)
}

/// 13.1 A call cancelled before it runs executes nothing — at the engine (a dropped
/// call never reaches the store) and at the store boundary (a store that queues work as
/// soon as it is called drops it unexecuted).
pub async fn p13_1_cancelled_before_running_executes_nothing<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, QueueConfig::default()).await?;
    drop(mq.send(Q, OutMessage::new("never")));
    drop(mq.send_batch(Q, vec![OutMessage::new("never")]));
    // A store may queue work the moment it is called: with the writer busy, the call is
    // certainly dropped before its work could start.
    let (release, blocker) = block_writer::<F>(&mq).await;
    let store = mq.store();
    drop(store.enqueue(
        Q.to_owned(),
        vec![OutMessage::new("never")],
        Default::default(),
    ));
    drop(store.upsert_queue(
        "never-created".to_owned(),
        mqlite_contract::QueueKind::Queue,
        QueueConfig::default(),
        false,
    ));
    release.send(())?;
    blocker.await??;
    assert!(peek_all(&mq, Q).await?.is_empty());
    assert!(
        !mq.list_queues()
            .await?
            .iter()
            .any(|q| q.name == "never-created")
    );
    Ok(())
}

/// 13.2 Cancelling a call while it waits for the writer returns promptly and mutates
/// nothing.
pub async fn p13_2_cancelled_while_waiting_for_the_writer_mutates_nothing<F: Access>(
    ctx: Ctx<F>,
) -> TckResult {
    let mq = ctx.engine_with_queue(Q, QueueConfig::default()).await?;
    let kept = mq.send(Q, OutMessage::new("kept")).await?;
    let (release, blocker) = block_writer::<F>(&mq).await;
    for i in 0..10 {
        // Queued behind the busy writer, then dropped: the caller is gone.
        assert!(
            poll_once(mq.send(Q, OutMessage::new(format!("dropped-{i}"))))
                .await
                .is_none()
        );
    }
    assert!(
        poll_once(mq.create_queue("dropped-queue", QueueConfig::default()))
            .await
            .is_none()
    );
    assert!(poll_once(mq.receive_one(Q)).await.is_none());
    release.send(())?;
    blocker.await??;
    let all = peek_all(&mq, Q).await?;
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].seq, kept);
    assert_eq!(
        all[0].delivery_count, 0,
        "the dropped receive claimed nothing"
    );
    assert!(
        !mq.list_queues()
            .await?
            .iter()
            .any(|q| q.name == "dropped-queue")
    );
    Ok(())
}

/// 13.3 A statement already executing finishes; the database stays usable after any
/// storm of cancellations.
pub async fn p13_3_database_usable_after_a_cancellation_storm<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, QueueConfig::default()).await?;
    let mut tasks = Vec::new();
    for i in 0..200u32 {
        let mq = mq.clone();
        tasks.push(tokio::spawn(async move {
            let fut = mq.send(Q, OutMessage::new(format!("storm-{i}")));
            let answered = if i % 3 == 0 {
                Some(fut.await)
            } else {
                poll_once(fut).await
            };
            answered.transpose().map(|seq| seq.map(|seq| (seq, i)))
        }));
        if i % 7 == 0 {
            tokio::task::yield_now().await;
        }
    }
    let mut acknowledged = Vec::new();
    for t in tasks {
        if let Some(ack) = t.await?? {
            acknowledged.push(ack);
        }
    }
    assert!(
        acknowledged.len() >= 67,
        "every awaited send (one in three) is acknowledged"
    );
    let stored: HashMap<SeqNumber, Vec<u8>> = peek_all(&mq, Q)
        .await?
        .into_iter()
        .map(|m| (m.seq, m.content.body))
        .collect();
    for (seq, i) in &acknowledged {
        assert_eq!(
            stored.get(seq).map(Vec::as_slice),
            Some(format!("storm-{i}").as_bytes()),
            "acknowledged send {i} is stored as {seq}"
        );
    }
    let mut bodies: Vec<&Vec<u8>> = stored.values().collect();
    bodies.sort();
    bodies.dedup();
    assert_eq!(bodies.len(), stored.len(), "no send stored twice");
    for body in bodies {
        let i = std::str::from_utf8(body)?
            .strip_prefix("storm-")
            .and_then(|i| i.parse::<u32>().ok());
        assert!(i.is_some_and(|i| i < 200), "no torn row: {body:?}");
    }
    let seq = mq.send(Q, OutMessage::new("after")).await?;
    let mut after = None;
    while let Some(m) = mq.receive_one(Q).await? {
        let last = m.seq == seq;
        mq.complete(Q, &m).await?;
        if last {
            after = Some(m);
        }
    }
    assert!(
        after.is_some(),
        "the store stays usable: the later send is received"
    );
    assert!(
        peek_all(&mq, Q).await?.is_empty(),
        "and everything completes"
    );
    Ok(())
}

/// 13.4 Inside a transaction, cancellation stops the next statement and rolls the
/// transaction back; abandoned work never commits.
pub async fn p13_4_cancelled_transaction_rolls_back<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, QueueConfig::default()).await?;
    let (result_tx, result_rx) = std::sync::mpsc::channel::<String>();
    cancel_at_pause(|pause| {
        mq.tx::<F::Native, _, _>(async move |tx| {
            tx.send(Q, OutMessage::new("first")).await?;
            pause.here();
            let next = tx.send(Q, OutMessage::new("second")).await;
            let _ = result_tx.send(format!("{next:?}"));
            next.map(|_| ())
        })
    })
    .await?;
    let next = tokio::task::spawn_blocking(move || result_rx.recv()).await??;
    assert!(
        next.contains("Cancelled"),
        "the next statement is stopped: {next}"
    );
    assert!(peek_all(&mq, Q).await?.is_empty(), "rolled back");

    // A callback that ignores the cancellation and returns Ok is rolled back too.
    cancel_at_pause(|pause| {
        mq.tx::<F::Native, _, _>(async move |tx| {
            tx.send(Q, OutMessage::new("stubborn")).await?;
            pause.here();
            Ok::<_, Error>(())
        })
    })
    .await?;
    // The writer is free once the next call is answered.
    assert!(
        peek_all(&mq, Q).await?.is_empty(),
        "never commits abandoned work"
    );
    Ok(())
}

/// A dropped call must be gone at once: dropping it never waits for the server. The
/// bound is wall time (the manual clock stands still) and generous: a drop takes
/// microseconds.
const PROMPT: std::time::Duration = std::time::Duration::from_secs(2);

/// The queue of the marker sends [`cut`] times its cancellations by.
const MARKS: &str = "marks";

/// Runs call `k` of a storm and cancels it (drops it) at a point that varies with `k`,
/// from before its request leaves to after it committed; returns its answer if it
/// answered first. One call in five is awaited to its answer; two in five are polled
/// 1, 2, 4, ... 128 times with a yield between polls; two in five go right behind a
/// marker send and are dropped when the marker answers (plus 0–3 yields), which cancels
/// them while the store is reaching or running them. Fails if a drop is not prompt.
async fn cut<S: Store, T>(
    mq: &Engine<S>,
    k: usize,
    call: impl Future<Output = T>,
) -> Result<Option<T>, String> {
    let mut call = Box::pin(call);
    match k % 5 {
        4 => return Ok(Some(call.await)),
        0 | 1 => {
            for i in 0..1usize << (k % 8) {
                if i > 0 {
                    tokio::task::yield_now().await;
                }
                if let Some(out) = poll_once(call.as_mut()).await {
                    return Ok(Some(out));
                }
            }
        }
        _ => {
            let mut marker = Box::pin(mq.send(MARKS, OutMessage::new("mark")));
            // The marker's request leaves first, the call's right behind it.
            let marked = poll_once(marker.as_mut()).await;
            if let Some(out) = poll_once(call.as_mut()).await {
                return Ok(Some(out));
            }
            let marked = match marked {
                Some(m) => m,
                None => tokio::select! {
                    biased;
                    out = call.as_mut() => return Ok(Some(out)),
                    m = marker.as_mut() => m,
                },
            };
            marked.map_err(|e| format!("marker send: {e}"))?;
            for _ in 0..(k / 5) % 4 {
                tokio::task::yield_now().await;
                if let Some(out) = poll_once(call.as_mut()).await {
                    return Ok(Some(out));
                }
            }
        }
    }
    let started = std::time::Instant::now();
    drop(call);
    let took = started.elapsed();
    if took > PROMPT {
        return Err(format!("dropping call {k} took {took:?}"));
    }
    Ok(None)
}

/// 13.5 Remote statements can be cancelled for real: a dropped call returns at once and
/// has its whole effect or none of it, never part; a call that answered Ok is stored;
/// the store stays usable (run only by stores with remote statements).
pub async fn p13_5_remote_statements_can_be_cancelled<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, config(600_000, 100)).await?;
    const RECV: &str = "recv";
    mq.create_queue(RECV, config(600_000, 100)).await?;
    mq.create_queue(MARKS, QueueConfig::default()).await?;

    // Sends of multi-message batches, dropped at varying points.
    const BATCHES: usize = 32;
    const SIZE: usize = 5;
    let mut acked: HashMap<usize, Vec<SeqNumber>> = HashMap::new();
    for b in 0..BATCHES {
        let batch = (0..SIZE)
            .map(|i| OutMessage::new(format!("b{b}-{i}")))
            .collect();
        match cut(&mq, b, mq.send_batch(Q, batch)).await? {
            None => {}
            Some(Ok(seqs)) => {
                acked.insert(b, seqs);
            }
            Some(Err(e)) => return Err(format!("batch {b} answered {e}").into()),
        }
    }
    // A committed write is ordered after every write the store may still be finishing
    // (one writer per database, 10.1): after it, nothing dropped can still land.
    mq.send(MARKS, OutMessage::new("barrier")).await?;
    let stored = peek_all(&mq, Q).await?;
    let mut batches: HashMap<usize, Vec<(usize, SeqNumber)>> = HashMap::new();
    for m in &stored {
        let body = std::str::from_utf8(m.body())?;
        let (b, i) = body
            .strip_prefix('b')
            .and_then(|rest| rest.split_once('-'))
            .ok_or_else(|| format!("a stored body no batch sent: {body:?}"))?;
        batches
            .entry(b.parse()?)
            .or_default()
            .push((i.parse()?, m.seq));
    }
    for (b, rows) in &batches {
        let indexes: Vec<usize> = rows.iter().map(|(i, _)| *i).collect();
        assert_eq!(
            indexes,
            (0..SIZE).collect::<Vec<_>>(),
            "batch {b}: all of it, in order, once — never part"
        );
        let seqs: Vec<SeqNumber> = rows.iter().map(|(_, s)| *s).collect();
        assert!(
            seqs.windows(2).all(|w| w[1].0 == w[0].0 + 1),
            "batch {b}: contiguous sequence numbers (one transaction): {seqs:?}"
        );
        if let Some(answered) = acked.get(b) {
            assert_eq!(&seqs, answered, "batch {b}: stored as answered");
        }
    }
    for b in acked.keys() {
        assert!(
            batches.contains_key(b),
            "batch {b} answered Ok but is not stored"
        );
    }

    // Settlements of every verb, dropped at varying points: each message is either
    // settled as asked or still locked under the same token.
    let mut held = Vec::new();
    loop {
        let got = mq.receive(Q, ReceiveOptions::batch(256)).await?;
        if got.is_empty() {
            break;
        }
        held.extend(got);
    }
    assert_eq!(held.len(), stored.len(), "every stored message received");
    let mut settled_ok = HashSet::new();
    for (j, m) in held.iter().enumerate() {
        let out = match j % 4 {
            0 => cut(&mq, j, mq.complete(Q, m)).await?,
            1 => cut(&mq, j, mq.abandon(Q, m, Duration::ZERO)).await?,
            2 => cut(&mq, j, mq.reject(Q, m, "Dropped", "by 13.5")).await?,
            _ => cut(&mq, j, mq.defer(Q, m)).await?,
        };
        match out {
            None => {}
            Some(Ok(())) => {
                settled_ok.insert(m.seq);
            }
            Some(Err(e)) => return Err(format!("settling {} answered {e}", m.seq).into()),
        }
    }
    mq.send(MARKS, OutMessage::new("barrier")).await?;
    let now: HashMap<SeqNumber, Message> = peek_all(&mq, Q)
        .await?
        .into_iter()
        .map(|m| (m.seq, m))
        .collect();
    for (j, m) in held.iter().enumerate() {
        let after = now.get(&m.seq);
        if let Some(a) = after.filter(|a| a.state == MessageState::Locked) {
            assert!(
                !settled_ok.contains(&m.seq),
                "{}: settled Ok, yet still locked",
                m.seq
            );
            assert_eq!(
                (a.locked_until_ms, a.delivery_count),
                (m.locked_until_ms, m.delivery_count),
                "{}: untouched",
                m.seq
            );
            mq.renew(Q, m)
                .await
                .map_err(|e| format!("{}: no longer under its token: {e}", m.seq))?;
            continue;
        }
        let settled = match (j % 4, after) {
            (0, None) => true,
            (1, Some(a)) => a.state == MessageState::Active && a.delivery_count == m.delivery_count,
            (2, Some(a)) => {
                a.state == MessageState::DeadLettered
                    && a.dead_letter_reason.as_deref() == Some("Dropped")
                    && a.dead_letter_description.as_deref() == Some("by 13.5")
            }
            (3, Some(a)) => a.state == MessageState::Deferred,
            _ => false,
        };
        assert!(
            settled,
            "{}: neither settled as asked nor locked: {after:?}",
            m.seq
        );
        assert!(
            matches!(mq.renew(Q, m).await, Err(Error::LockLost { .. })),
            "{}: settled, so its lease is gone",
            m.seq
        );
    }

    // Batch receives, dropped at varying points: a claim is whole (locked and counted
    // once) or absent (active, uncounted); a claim that answered holds its messages.
    send_n(&mq, RECV, "r", 100).await?;
    let mut claimed = Vec::new();
    for k in 0..30 {
        match cut(&mq, k, mq.receive(RECV, ReceiveOptions::batch(3))).await? {
            None => {}
            Some(Ok(got)) => claimed.extend(got),
            Some(Err(e)) => return Err(format!("receive {k} answered {e}").into()),
        }
    }
    mq.send(MARKS, OutMessage::new("barrier")).await?;
    let rows: HashMap<SeqNumber, Message> = peek_all(&mq, RECV)
        .await?
        .into_iter()
        .map(|m| (m.seq, m))
        .collect();
    assert_eq!(rows.len(), 100, "a dropped claim deletes nothing");
    for row in rows.values() {
        match row.state {
            MessageState::Active => assert_eq!(row.delivery_count, 0, "{}: counted", row.seq),
            MessageState::Locked => assert_eq!(row.delivery_count, 1, "{}: one claim", row.seq),
            other => return Err(format!("{}: a claim left it {other:?}", row.seq).into()),
        }
    }
    for m in &claimed {
        mq.renew(RECV, m)
            .await
            .map_err(|e| format!("{}: claimed Ok, but not held: {e}", m.seq))?;
    }

    // The store stays usable.
    let seq = mq.send(Q, OutMessage::new("after")).await?;
    assert!(
        peek_all(&mq, Q).await?.iter().any(|m| m.seq == seq),
        "the store stays usable"
    );
    let seq = mq.send(RECV, OutMessage::new("after")).await?;
    let mut found = None;
    while let Some(m) = mq.receive_one(RECV).await? {
        if m.seq == seq {
            found = Some(m);
            break;
        }
    }
    let m = found.ok_or("the message sent after the storm was never received")?;
    mq.complete(RECV, &m).await?;
    assert_eq!(super::state_of(&mq, RECV, seq).await?, None);
    Ok(())
}

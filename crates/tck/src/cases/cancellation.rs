//! Section 13: cancellation. In Rust, dropping a call's future is its cancellation.

use std::future::Future;
use std::pin::pin;

use mqlite_engine_core::{Engine, Error, OutMessage, QueueConfig, Store};

use super::peek_all;
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
    tokio::task::JoinHandle<mqlite_engine_core::Result<()>>,
) {
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
    let blocker = {
        let mq = mq.clone();
        tokio::spawn(async move {
            mq.tx_via::<F::Native, _, _>(async move |_tx| {
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
        mqlite_engine_core::QueueKind::Queue,
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
    let mut acknowledged = 0usize;
    let mut tasks = Vec::new();
    for i in 0..200u32 {
        let mq = mq.clone();
        tasks.push(tokio::spawn(async move {
            let fut = mq.send(Q, OutMessage::new(format!("storm-{i}")));
            if i % 3 == 0 {
                fut.await.map(|_| true)
            } else {
                Ok(poll_once(fut).await.is_some())
            }
        }));
        if i % 7 == 0 {
            tokio::task::yield_now().await;
        }
    }
    for t in tasks {
        if t.await?? {
            acknowledged += 1;
        }
    }
    let stored = peek_all(&mq, Q).await?;
    assert!(
        stored.len() >= acknowledged,
        "every acknowledged send is stored"
    );
    assert!(stored.len() <= 200);
    for m in &stored {
        assert!(m.body().starts_with(b"storm-"), "no torn row");
    }
    let seq = mq.send(Q, OutMessage::new("after")).await?;
    let got = mq.receive_one(Q).await?.ok_or("nothing to receive")?;
    mq.complete(Q, &got).await?;
    assert!(seq.0 > 0);
    Ok(())
}

/// 13.4 Inside a transaction, cancellation stops the next statement and rolls the
/// transaction back; abandoned work never commits.
pub async fn p13_4_cancelled_transaction_rolls_back<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, QueueConfig::default()).await?;
    let (result_tx, result_rx) = std::sync::mpsc::channel::<String>();
    cancel_at_pause(|pause| {
        mq.tx_via::<F::Native, _, _>(async move |tx| {
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
        mq.tx_via::<F::Native, _, _>(async move |tx| {
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

/// 13.5 Remote statements can be cancelled for real: a dropped remote call returns at
/// once and the store stays usable (run only by stores with remote statements).
pub async fn p13_5_remote_statements_can_be_cancelled<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, QueueConfig::default()).await?;
    for i in 0..20 {
        let dropped = poll_once(mq.send(Q, OutMessage::new(format!("dropped-{i}")))).await;
        assert!(dropped.is_none() || dropped.is_some_and(|r| r.is_ok()));
    }
    let seq = mq.send(Q, OutMessage::new("after")).await?;
    let stored = peek_all(&mq, Q).await?;
    assert!(
        stored.iter().any(|m| m.seq == seq),
        "the store stays usable"
    );
    Ok(())
}

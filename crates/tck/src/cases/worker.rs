//! Section 18: the worker's proof of life (18.1), on every store. The two scenarios are
//! generic over the worker's source, so the `mqlite` crate's tests run them through a
//! broker too (the remote client as the source).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use mqlite_contract::{
    ManualClock, Message, MessageState, OutMessage, PeekOptions, QueueConfig, Store,
};
use mqlite_engine::worker::{REASON_MAX_RUNTIME, RetryPolicy, Source, Worker, heartbeat};
use mqlite_engine::{Engine, EngineOptions};
use tokio::sync::Notify;

use crate::harness::{Access, Ctx, TckResult};

/// The queue the scenarios work on.
pub const Q: &str = "jobs";

/// The queue as the scenarios expect it: this lease, a delivery bound that never ends a
/// scenario early.
pub fn queue(lock_ms: u64) -> QueueConfig {
    QueueConfig {
        lock_duration: Duration::from_millis(lock_ms),
        max_delivery_count: 100,
        ..Default::default()
    }
}

/// The only message of [`Q`], if any.
pub async fn only_message<S: Store>(mq: &Engine<S>) -> Option<Message> {
    mq.peek(Q, PeekOptions::default())
        .await
        .expect("peek")
        .into_iter()
        .next()
}

/// Waits, yielding, until `check` holds; a bound on iterations, not on time.
pub async fn eventually<Fut: Future<Output = bool>>(what: &str, mut check: impl FnMut() -> Fut) {
    for _ in 0..2_000_000 {
        if check().await {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("never happened: {what}");
}

/// Sets a flag when dropped: the handler's future was dropped.
pub struct Dropped(pub Arc<std::sync::atomic::AtomicBool>);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// No retry delay, no jitter: a handler dropped by the worker gives its message back at
/// once.
pub fn at_once(max_attempts: i64) -> RetryPolicy {
    RetryPolicy {
        initial_backoff: Duration::ZERO,
        jitter: 0.0,
        max_attempts,
        ..Default::default()
    }
}

/// A handler that hangs for ever: its lease is renewed until the maximum runtime, then
/// the handler is dropped and its message given back (dead-lettered with
/// MaxRuntimeExceeded on its last attempt).
pub async fn a_hung_handler_is_dropped_at_its_maximum_runtime<S: Store, C: Source>(
    clock: &ManualClock,
    mq: &Engine<S>,
    source: C,
) {
    mq.send(Q, OutMessage::new("hangs")).await.expect("send");
    let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let started = Arc::new(Notify::new());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = {
        let (dropped, started) = (dropped.clone(), started.clone());
        let w = Worker::new(source.clone(), Q, move |_m| {
            let guard = Dropped(dropped.clone());
            let started = started.clone();
            async move {
                let _guard = guard;
                started.notify_one();
                std::future::pending::<()>().await;
                Ok(())
            }
        })
        .max_runtime(Duration::from_millis(2_500))
        .retry(at_once(1));
        tokio::spawn(w.run_until(async {
            let _ = stopped.await;
        }))
    };
    started.notified().await;
    let start = clock.now();
    // Renewed like any handler's until the bound (the lease is 1 s): after each step
    // the lease reaches past the next renewal point.
    while clock.now() < start + 2_400 {
        clock.advance(100);
        eventually("the lease is renewed until the maximum runtime", || async {
            only_message(mq).await.is_some_and(|m| {
                m.state == MessageState::Locked && m.locked_until_ms - clock.now() > 300
            })
        })
        .await;
    }
    clock.advance(200);
    eventually("the hung handler's message is dead-lettered", || async {
        only_message(mq)
            .await
            .is_some_and(|m| m.state == MessageState::DeadLettered)
    })
    .await;
    let m = only_message(mq).await.expect("kept");
    assert_eq!(m.dead_letter_reason.as_deref(), Some(REASON_MAX_RUNTIME));
    eventually("the handler's future is dropped", || async {
        dropped.load(std::sync::atomic::Ordering::SeqCst)
    })
    .await;
    stop.send(()).expect("stop");
    let report = worker.await.expect("join").expect("worker");
    assert_eq!(
        (report.timed_out, report.dead_lettered),
        (1, 1),
        "{report:?}"
    );
}

/// A handler that keeps showing progress keeps its lease for ten lease lengths; one that
/// stops loses it at the next renewal point and its message goes back.
pub async fn only_a_handler_showing_progress_keeps_its_lease<S: Store, C: Source>(
    clock: &ManualClock,
    mq: &Engine<S>,
    source: C,
) {
    mq.send(Q, OutMessage::new("works")).await.expect("send");
    let beat = Arc::new(Notify::new());
    let started = Arc::new(Notify::new());
    let beats = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let finish = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = {
        let (beat, beats, finish, dropped, started) = (
            beat.clone(),
            beats.clone(),
            finish.clone(),
            dropped.clone(),
            started.clone(),
        );
        let w = Worker::new(source.clone(), Q, move |_m| {
            let (beat, beats, finish) = (beat.clone(), beats.clone(), finish.clone());
            let guard = Dropped(dropped.clone());
            let started = started.clone();
            async move {
                let _guard = guard;
                started.notify_one();
                // Beats each time the test says it made progress, until it is done.
                while !finish.load(std::sync::atomic::Ordering::SeqCst) {
                    beat.notified().await;
                    assert!(heartbeat(), "inside a worker's handler");
                    beats.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
                Ok(())
            }
        })
        .heartbeat_timeout(Duration::from_millis(500))
        .retry(at_once(10));
        tokio::spawn(w.run_until(async {
            let _ = stopped.await;
        }))
    };
    // The first handler has started (its lease's renewal points count from there).
    started.notified().await;
    let start = clock.now();
    // Ten lease lengths, a heartbeat every 200 ms: the lease stays ahead of the clock.
    let mut sent = 0;
    while clock.now() < start + 10_000 {
        clock.advance(100);
        if (clock.now() - start) % 200 == 0 {
            beat.notify_one();
            sent += 1;
            eventually("the handler shows progress", || async {
                beats.load(std::sync::atomic::Ordering::SeqCst) >= sent
            })
            .await;
        }
        eventually("a progressing handler's lease is renewed", || async {
            only_message(mq)
                .await
                .is_some_and(|m| m.delivery_count == 1 && m.locked_until_ms - clock.now() > 300)
        })
        .await;
    }
    // It stops beating: at the next renewal point the message goes back. The clock
    // stops moving once it has, so the next delivery is not left to stall too.
    for _ in 0..20 {
        clock.advance(100);
        let now = clock.now();
        let given_back = |m: &Message| m.state == MessageState::Active || m.delivery_count >= 2;
        eventually("a renewal point keeps or gives back the lease", || async {
            only_message(mq)
                .await
                .is_some_and(|m| given_back(&m) || m.locked_until_ms - now > 300)
        })
        .await;
        if only_message(mq).await.is_some_and(|m| given_back(&m)) {
            break;
        }
    }
    eventually("the stalled handler's message is given back", || async {
        only_message(mq)
            .await
            .is_some_and(|m| m.state == MessageState::Active || m.delivery_count >= 2)
    })
    .await;
    eventually("the stalled handler's future is dropped", || async {
        dropped.load(std::sync::atomic::Ordering::SeqCst)
    })
    .await;
    // The next delivery beats and finishes.
    finish.store(true, std::sync::atomic::Ordering::SeqCst);
    beat.notify_one();
    eventually("the second delivery completes", || async {
        only_message(mq).await.is_none()
    })
    .await;
    stop.send(()).expect("stop");
    let report = worker.await.expect("join").expect("worker");
    assert_eq!((report.stalled, report.completed), (1, 1), "{report:?}");
}

/// An engine on the case's store and clock, background loops off, long-polls
/// re-checking every 100 ms, with [`Q`] leased for one second.
async fn worker_engine<F: Access>(ctx: &Ctx<F>) -> mqlite_contract::Result<Engine<F::Store>> {
    let mq = ctx
        .engine_with(EngineOptions {
            background: false,
            long_poll_recheck: Duration::from_millis(100),
            ..Default::default()
        })
        .await?;
    mq.create_queue(Q, queue(1_000)).await?;
    Ok(mq)
}

/// 18.1 A hung handler is renewed until its maximum runtime, then dropped (its
/// future's drop observed) and its message dead-lettered as MaxRuntimeExceeded at the
/// attempt bound; the worker's report counts it.
pub async fn p18_1_a_hung_handler_is_dropped_at_its_maximum_runtime<F: Access>(
    ctx: Ctx<F>,
) -> TckResult {
    let mq = worker_engine(&ctx).await?;
    a_hung_handler_is_dropped_at_its_maximum_runtime(&ctx.clock, &mq, mq.clone()).await;
    mq.close().await;
    Ok(())
}

/// 18.1 A handler that shows progress keeps its lease for ten lease lengths; when it
/// stops, it loses the lease at the next renewal point, its future is dropped, and the
/// redelivery completes.
pub async fn p18_1_only_a_handler_showing_progress_keeps_its_lease<F: Access>(
    ctx: Ctx<F>,
) -> TckResult {
    let mq = worker_engine(&ctx).await?;
    only_a_handler_showing_progress_keeps_its_lease(&ctx.clock, &mq, mq.clone()).await;
    mq.close().await;
    Ok(())
}

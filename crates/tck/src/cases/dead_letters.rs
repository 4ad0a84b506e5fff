//! Section 6: dead letters.

use mqlite_contract::{
    Clock, Error, ManualClock, MessageState, OrderingMode, OutMessage, PeekOptions, PurgeOptions,
    QueueConfig, REASON_MAX_DELIVERY, RedriveOptions, SendOptions, SeqNumber, Store,
    clock::BoxFuture, from_millis,
};
use std::sync::Arc;
use std::time::Duration;

use mqlite_engine::{Engine, EngineOptions};
use tokio::sync::watch;

use super::{config, peek_all, receive_one, send_n, state_of};
use crate::harness::{Access, Ctx, TckResult};

const Q: &str = "q";

/// 6.1 Reaching max_delivery_count dead-letters with reason MaxDeliveryCountExceeded.
pub async fn p6_1_delivery_bound_dead_letters<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, config(30_000, 3)).await?;
    let seq = mq.send(Q, OutMessage::new("x")).await?;
    for n in 1..=3 {
        let m = receive_one(&mq, Q).await?;
        assert_eq!(m.delivery_count, n);
        mq.abandon(Q, &m, Duration::ZERO).await?;
    }
    assert!(mq.receive_one(Q).await?.is_none(), "no fourth delivery");
    let all = peek_all(&mq, Q).await?;
    assert_eq!(
        (all[0].seq, all[0].state),
        (seq, MessageState::DeadLettered)
    );
    assert_eq!(
        all[0].dead_letter_reason.as_deref(),
        Some(REASON_MAX_DELIVERY)
    );
    assert_eq!(mq.stats(Q).await?.dead_lettered, 1);
    Ok(())
}

async fn dead_letter_n<F: Access>(
    ctx: &Ctx<F>,
    mq: &Engine<F::Store>,
    n: usize,
) -> Result<Vec<SeqNumber>, Box<dyn std::error::Error>> {
    dead_letter_n_in(ctx, mq, Q, n).await
}

/// Sends `n` messages to `queue` and dead-letters each, a clock second apart.
async fn dead_letter_n_in<F: Access>(
    ctx: &Ctx<F>,
    mq: &Engine<F::Store>,
    queue: &str,
    n: usize,
) -> Result<Vec<SeqNumber>, Box<dyn std::error::Error>> {
    let seqs = send_n(mq, queue, "dead", n).await?;
    for _ in 0..n {
        let m = receive_one(mq, queue).await?;
        mq.reject(queue, &m, "Test", "").await?;
        // Spread the dead-lettering times so age bounds can tell them apart.
        ctx.clock.advance(1_000);
    }
    Ok(seqs)
}

/// 6.2 Redrive moves dead letters back to active with delivery_count reset, bounded by
/// max and older_than; Purge deletes them, bounded by max and older_than; Peek browses
/// any state without locking.
pub async fn p6_2_redrive_purge_and_peek<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, config(30_000, 5)).await?;
    let seqs = dead_letter_n(&ctx, &mq, 4).await?;
    let live = mq.send(Q, OutMessage::new("live")).await?;
    // Peek: state filter, from_seq, no locking.
    let dead = mq
        .peek(
            Q,
            PeekOptions {
                state: Some(MessageState::DeadLettered),
                ..Default::default()
            },
        )
        .await?;
    assert_eq!(dead.iter().map(|m| m.seq).collect::<Vec<_>>(), seqs);
    let from = mq
        .peek(
            Q,
            PeekOptions {
                from_seq: Some(seqs[2]),
                max: 2,
                ..Default::default()
            },
        )
        .await?;
    assert_eq!(
        from.iter().map(|m| m.seq).collect::<Vec<_>>(),
        seqs[2..4].to_vec()
    );
    assert_eq!(receive_one(&mq, Q).await?.seq, live, "peek locked nothing");

    // Redrive: only the two oldest (older_than 2.5 s), then at most one.
    let moved = mq
        .redrive(
            Q,
            RedriveOptions {
                older_than: from_millis(2_500),
                max: 1,
                ..Default::default()
            },
        )
        .await?;
    assert_eq!(moved, 1);
    let m = receive_one(&mq, Q).await?;
    assert_eq!(
        (m.seq, m.delivery_count),
        (seqs[0], 1),
        "count reset by redrive"
    );
    assert!(m.dead_letter_reason.is_none());
    let moved = mq
        .redrive(
            Q,
            RedriveOptions {
                older_than: from_millis(2_500),
                ..Default::default()
            },
        )
        .await?;
    assert_eq!(moved, 1, "only seqs[1] is old enough");
    assert_eq!(state_of(&mq, Q, seqs[1]).await?, Some(MessageState::Active));
    for young in &seqs[2..] {
        assert_eq!(
            state_of(&mq, Q, *young).await?,
            Some(MessageState::DeadLettered),
            "{young} is younger than older_than"
        );
    }

    // Purge: bounded by age, then by max, then all.
    assert_eq!(
        mq.purge(
            Q,
            PurgeOptions {
                older_than: from_millis(60_000),
                ..Default::default()
            }
        )
        .await?,
        0
    );
    assert_eq!(
        mq.purge(
            Q,
            PurgeOptions {
                max: 1,
                ..Default::default()
            }
        )
        .await?,
        1
    );
    assert_eq!(mq.stats(Q).await?.dead_lettered, 1);
    assert_eq!(mq.purge(Q, PurgeOptions::default()).await?, 1);
    let left = peek_all(&mq, Q).await?;
    assert!(left.iter().all(|m| m.state != MessageState::DeadLettered));
    assert_eq!(
        left.iter().map(|m| m.seq).collect::<Vec<_>>(),
        vec![seqs[0], seqs[1], live],
        "purge touched only dead letters"
    );
    Ok(())
}

/// 6.2 A purge of every state (SQS's PurgeQueue) deletes every message of the queue —
/// active, scheduled, locked, waiting in a line, dead-lettered — and nothing of another
/// queue; the lock held on a purged message no longer settles; the lines start afresh.
pub async fn p6_2_purge_every_state_empties_the_queue<F: Access>(ctx: Ctx<F>) -> TckResult {
    let grouped = QueueConfig {
        ordering_mode: OrderingMode::GroupFifo,
        ..config(30_000, 5)
    };
    let mq = ctx.engine_with_queue(Q, grouped).await?;
    mq.create_queue("other", config(30_000, 5)).await?;
    let kept = mq.send("other", OutMessage::new("kept")).await?;
    // A dead letter, a locked head of a line with one waiting behind it, a scheduled
    // message and a plain active one.
    mq.send(Q, OutMessage::new("dl").with_group("d")).await?;
    let m = receive_one(&mq, Q).await?;
    mq.reject(Q, &m, "Test", "").await?;
    assert_eq!(mq.stats(Q).await?.dead_lettered, 1);
    mq.send(Q, OutMessage::new("head").with_group("g")).await?;
    mq.send(Q, OutMessage::new("behind").with_group("g"))
        .await?;
    let locked = receive_one(&mq, Q).await?;
    let later = ctx.clock.now() + 60_000;
    mq.send_with(
        Q,
        OutMessage::new("later").with_group("s"),
        SendOptions {
            scheduled_at_ms: Some(later),
            ..Default::default()
        },
    )
    .await?;
    mq.send(Q, OutMessage::new("plain").with_group("p")).await?;

    let every = PurgeOptions {
        every_state: true,
        ..Default::default()
    };
    assert_eq!(mq.purge(Q, every.clone()).await?, 5);
    assert!(peek_all(&mq, Q).await?.is_empty(), "nothing is left");
    assert!(
        mq.complete(Q, &locked).await.is_err(),
        "a purged message's lock does not settle"
    );
    assert_eq!(
        peek_all(&mq, "other")
            .await?
            .iter()
            .map(|m| m.seq)
            .collect::<Vec<_>>(),
        vec![kept],
        "another queue is untouched"
    );
    // The line of the purged head is free: a new message of its group is delivered.
    mq.send(Q, OutMessage::new("fresh").with_group("g")).await?;
    assert_eq!(receive_one(&mq, Q).await?.body(), b"fresh");
    // An empty queue purges nothing; bounds are refused with every state.
    mq.purge("other", every.clone()).await?;
    assert_eq!(mq.purge("other", every).await?, 0);
    let bounded = mq
        .purge(
            Q,
            PurgeOptions {
                every_state: true,
                max: 1,
                ..Default::default()
            },
        )
        .await;
    assert!(
        matches!(bounded, Err(Error::InvalidArgument(_))),
        "{bounded:?}"
    );
    Ok(())
}

/// 6.3 A queue with a dead-letter target: its dead letters move there as active
/// messages (delivery count reset) on every sweep and at once on forward_dead_letters;
/// the target must be another queue that exists; the setting reads back from the store;
/// a deleted target leaves the dead letters where they are.
pub async fn p6_3_dead_letter_target_forwards<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine().await?;
    let forwarding = QueueConfig {
        dead_letter_target: Some("dlq".into()),
        ..config(30_000, 5)
    };
    // The target must exist, and be another queue.
    let missing = mq.create_queue(Q, forwarding.clone()).await;
    assert!(
        matches!(missing, Err(Error::NotFound { .. })),
        "{missing:?}"
    );
    mq.create_queue("dlq", config(30_000, 5)).await?;
    let itself = QueueConfig {
        dead_letter_target: Some(Q.into()),
        ..config(30_000, 5)
    };
    let looped = mq.create_queue(Q, itself).await;
    assert!(
        matches!(looped, Err(Error::InvalidArgument(_))),
        "{looped:?}"
    );
    mq.create_queue(Q, forwarding).await?;
    let listed = mq.list_queues().await?;
    assert!(
        listed
            .iter()
            .any(|q| q.name == Q && q.config.dead_letter_target.as_deref() == Some("dlq"))
    );

    // At once, on request.
    let first = dead_letter_n(&ctx, &mq, 1).await?;
    assert_eq!(mq.forward_dead_letters(Q).await?, 1);
    let m = receive_one(&mq, "dlq").await?;
    assert_eq!(
        (m.seq, m.delivery_count, m.body()),
        (first[0], 1, &b"dead-0"[..])
    );
    mq.complete("dlq", &m).await?;
    // By the sweep.
    let second = dead_letter_n(&ctx, &mq, 1).await?;
    assert_eq!(mq.run_sweeps().await?.forwarded, 1);
    assert_eq!(
        state_of(&mq, "dlq", second[0]).await?,
        Some(MessageState::Active)
    );
    assert_eq!(mq.stats(Q).await?.dead_lettered, 0);
    // A deleted target: the sweep goes on, the dead letters stay.
    mq.delete_queue("dlq").await?;
    let third = dead_letter_n(&ctx, &mq, 1).await?;
    assert_eq!(mq.run_sweeps().await?.forwarded, 0);
    assert_eq!(
        state_of(&mq, Q, third[0]).await?,
        Some(MessageState::DeadLettered)
    );
    Ok(())
}

/// 6.2 A selected redrive moves only the named dead letters: a number that is live,
/// unknown or of another queue is left alone, and max and older_than still bound it.
pub async fn p6_2_redrive_selected_moves_only_those<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, config(30_000, 5)).await?;
    mq.create_queue("other", config(30_000, 5)).await?;
    let seqs = dead_letter_n(&ctx, &mq, 4).await?;
    let elsewhere = dead_letter_n_in(&ctx, &mq, "other", 1).await?;
    let live = mq.send(Q, OutMessage::new("live")).await?;
    let select = RedriveOptions::only;
    // An empty selection moves nothing (not every dead letter).
    assert_eq!(mq.redrive(Q, select(Vec::new())).await?, 0);
    let picked = vec![seqs[3], seqs[1], live, elsewhere[0], SeqNumber(9_999_999)];
    assert_eq!(mq.redrive(Q, select(picked)).await?, 2);
    let states = [
        (seqs[0], MessageState::DeadLettered),
        (seqs[1], MessageState::Active),
        (seqs[2], MessageState::DeadLettered),
        (seqs[3], MessageState::Active),
        (live, MessageState::Active),
    ];
    for (seq, want) in states {
        assert_eq!(state_of(&mq, Q, seq).await?, Some(want), "{seq}");
    }
    assert_eq!(
        state_of(&mq, "other", elsewhere[0]).await?,
        Some(MessageState::DeadLettered),
        "another queue's dead letter stays"
    );
    // Bounds: max keeps the oldest dead-lettered of the selection; older_than skips
    // the young.
    let bounded = RedriveOptions {
        max: 1,
        ..select(vec![seqs[2], seqs[0]])
    };
    assert_eq!(mq.redrive(Q, bounded).await?, 1);
    assert_eq!(state_of(&mq, Q, seqs[0]).await?, Some(MessageState::Active));
    let aged = RedriveOptions {
        older_than: from_millis(60_000),
        ..select(vec![seqs[2]])
    };
    assert_eq!(mq.redrive(Q, aged).await?, 0, "seqs[2] is too young");
    assert_eq!(
        state_of(&mq, Q, seqs[2]).await?,
        Some(MessageState::DeadLettered)
    );
    Ok(())
}

/// 6.2 Redrive to a target queue moves the dead letters there, active, count reset; a
/// missing target is NotFound and moves nothing.
pub async fn p6_2_redrive_to_target_queue<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, config(30_000, 5)).await?;
    mq.create_queue("target", config(30_000, 5)).await?;
    let seqs = dead_letter_n(&ctx, &mq, 2).await?;
    let moved = mq
        .redrive(
            Q,
            RedriveOptions {
                target: Some("target".into()),
                ..Default::default()
            },
        )
        .await?;
    assert_eq!(moved, 2);
    assert!(peek_all(&mq, Q).await?.is_empty());
    let there = peek_all(&mq, "target").await?;
    assert_eq!(there.iter().map(|m| m.seq).collect::<Vec<_>>(), seqs);
    for m in &there {
        assert_eq!(m.state, MessageState::Active);
        assert_eq!(m.delivery_count, 0, "count reset");
        assert!(m.dead_letter_reason.is_none() && m.dead_letter_description.is_none());
    }
    let m = receive_one(&mq, "target").await?;
    assert_eq!((m.seq, m.delivery_count), (seqs[0], 1));

    let stay = dead_letter_n(&ctx, &mq, 1).await?;
    let missing = mq
        .redrive(
            Q,
            RedriveOptions {
                target: Some("missing".into()),
                ..Default::default()
            },
        )
        .await;
    assert!(
        matches!(missing, Err(Error::NotFound { .. })),
        "a missing target is NotFound, got {missing:?}"
    );
    assert_eq!(
        state_of(&mq, Q, stay[0]).await?,
        Some(MessageState::DeadLettered),
        "and nothing moved"
    );
    Ok(())
}

/// The case's manual clock, recording every deadline something parks on. With the
/// background loops off, the only sleeper is a rate-bounded redrive, which parks after
/// each slice: a new deadline tells the case, without sleeping or polling, that a slice
/// has run and when the next may.
#[derive(Debug)]
struct ParkingClock {
    time: ManualClock,
    parked: watch::Sender<Vec<i64>>,
}

impl Clock for ParkingClock {
    fn now_ms(&self) -> i64 {
        self.time.now()
    }

    fn sleep_until(&self, deadline_ms: i64) -> BoxFuture<'static, ()> {
        self.parked.send_modify(|d| d.push(deadline_ms));
        Clock::sleep_until(&self.time, deadline_ms)
    }
}

/// Waits until the redrive `task` has parked `n` times on the clock and returns the
/// deadline of the n-th park; fails if the redrive finished instead (it never waited).
async fn park<T: std::fmt::Debug>(
    parked: &mut watch::Receiver<Vec<i64>>,
    n: usize,
    task: &mut tokio::task::JoinHandle<T>,
) -> Result<i64, Box<dyn std::error::Error>> {
    tokio::select! {
        biased;
        waiting = parked.wait_for(|d| d.len() >= n) => {
            waiting?;
        }
        done = task => {
            return Err(format!("the redrive finished without waiting for the clock: {done:?}").into());
        }
    }
    Ok(parked.borrow()[n - 1])
}

/// Dead-lettered and active sequence numbers of a queue.
async fn dead_and_active<S: Store>(
    mq: &Engine<S>,
    queue: &str,
) -> mqlite_contract::Result<(Vec<SeqNumber>, Vec<SeqNumber>)> {
    let all = peek_all(mq, queue).await?;
    let of = |state| {
        all.iter()
            .filter(|m| m.state == state)
            .map(|m| m.seq)
            .collect::<Vec<_>>()
    };
    Ok((of(MessageState::DeadLettered), of(MessageState::Active)))
}

/// 6.2 Redrive's rate bounds the moves per second of the engine's clock: 7 dead letters
/// at 3 per second move oldest first in slices of 3, 3 and 1, a clock second apart, and
/// with max 5 no more than 5 move however long the clock runs.
pub async fn p6_2_redrive_rate_bounds_moves_per_second<F: Access>(ctx: Ctx<F>) -> TckResult {
    let clock = Arc::new(ParkingClock {
        time: ctx.clock.clone(),
        parked: watch::Sender::new(Vec::new()),
    });
    let mut parked = clock.parked.subscribe();
    let store = ctx.factory.open(ctx.dir.path(), clock.clone()).await?;
    let mq = Engine::with_store(
        store,
        EngineOptions {
            background: false,
            ..Default::default()
        },
    )
    .await?;
    mq.create_queue(Q, config(30_000, 5)).await?;
    mq.create_queue("capped", config(30_000, 5)).await?;
    let seqs = dead_letter_n(&ctx, &mq, 7).await?;
    let capped = dead_letter_n_in(&ctx, &mq, "capped", 7).await?;
    let redrive = |queue: &'static str, max| {
        let mq = mq.clone();
        tokio::spawn(async move {
            let options = RedriveOptions {
                max,
                rate_per_sec: 3,
                ..Default::default()
            };
            mq.redrive(queue, options).await
        })
    };
    assert!(parked.borrow().is_empty());

    // Slice 1 at t0: the three oldest move, then the redrive waits for the next second.
    let t0 = ctx.clock.now();
    let mut task = redrive(Q, 0);
    let first = park(&mut parked, 1, &mut task).await?;
    assert!(first >= t0 + 1_000, "the next slice waits a clock second");
    assert_eq!(
        dead_and_active(&mq, Q).await?,
        (seqs[3..].to_vec(), seqs[..3].to_vec())
    );
    // Still inside the first second: nothing more moves.
    ctx.clock.set(first - 1);
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert_eq!(mq.stats(Q).await?.dead_lettered, 4);
    assert_eq!(parked.borrow().len(), 1);
    assert!(!task.is_finished());

    // Slice 2 a second later: three more.
    ctx.clock.set(first);
    let second = park(&mut parked, 2, &mut task).await?;
    assert!(second >= first + 1_000, "one slice per clock second");
    assert_eq!(
        dead_and_active(&mq, Q).await?,
        (seqs[6..].to_vec(), seqs[..6].to_vec())
    );

    // Slice 3: the last one, fewer than the rate, ends the redrive.
    ctx.clock.set(second);
    assert_eq!(task.await??, 7);
    assert_eq!(parked.borrow().len(), 2, "three slices, two waits");
    let all = peek_all(&mq, Q).await?;
    assert_eq!(all.iter().map(|m| m.seq).collect::<Vec<_>>(), seqs);
    for m in &all {
        assert_eq!((m.state, m.delivery_count), (MessageState::Active, 0));
    }

    // max still bounds the total: 3, then 2, then nothing more, however long it runs.
    let mut task = redrive("capped", 5);
    let third = park(&mut parked, 3, &mut task).await?;
    assert_eq!(
        dead_and_active(&mq, "capped").await?,
        (capped[3..].to_vec(), capped[..3].to_vec())
    );
    ctx.clock.set(third);
    let finished = tokio::select! {
        moved = &mut task => Some(moved??),
        waiting = parked.wait_for(|d| d.len() >= 4) => {
            waiting?;
            None
        }
    };
    let moved = match finished {
        Some(moved) => moved,
        None => {
            // The redrive may wait once more before it sees that max is reached.
            let next = parked.borrow()[3];
            assert_eq!(mq.stats("capped").await?.dead_lettered, 2);
            ctx.clock.set(next);
            task.await??
        }
    };
    assert_eq!(moved, 5);
    ctx.clock.advance(10_000);
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert_eq!(
        dead_and_active(&mq, "capped").await?,
        (capped[5..].to_vec(), capped[..5].to_vec()),
        "max bounds the total"
    );
    Ok(())
}

//! Section 5: ordering modes and the line of a group.

use mqlite_contract::{
    Error, MessageState, OrderingMode, OutMessage, QueueConfig, ReceiveOptions, SeqNumber,
    from_millis,
};
use std::time::Duration;

use super::{receive_one, state_of};
use crate::harness::{Access, Ctx, TckResult};

const Q: &str = "q";

fn mode(ordering_mode: OrderingMode, lock_ms: i64, max_delivery: i64) -> QueueConfig {
    QueueConfig {
        ordering_mode,
        lock_duration: from_millis(lock_ms),
        max_delivery_count: max_delivery,
        ..Default::default()
    }
}

fn grouped(body: &str, group: &str) -> OutMessage {
    OutMessage::new(body).with_group(group)
}

async fn seqs_of<S: mqlite_contract::Store>(
    mq: &mqlite_engine::Engine<S>,
    n: u32,
) -> mqlite_contract::Result<Vec<SeqNumber>> {
    Ok(mq
        .receive(Q, ReceiveOptions::batch(n))
        .await?
        .iter()
        .map(|m| m.seq)
        .collect())
}

/// 5.1 standard: a group is FIFO among itself, groups run in parallel, ungrouped
/// messages are unordered.
pub async fn p5_1_standard_groups_are_fifo_and_parallel<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx
        .engine_with_queue(Q, mode(OrderingMode::Standard, 30_000, 10))
        .await?;
    let a1 = mq.send(Q, grouped("a1", "A")).await?;
    let a2 = mq.send(Q, grouped("a2", "A")).await?;
    let b1 = mq.send(Q, grouped("b1", "B")).await?;
    let u1 = mq.send(Q, OutMessage::new("u1")).await?;
    let u2 = mq.send(Q, OutMessage::new("u2")).await?;
    let first = mq.receive(Q, ReceiveOptions::batch(10)).await?;
    let got: Vec<_> = first.iter().map(|m| m.seq).collect();
    assert_eq!(
        got,
        vec![a1, b1, u1, u2],
        "a2 waits behind a1; the rest flow"
    );
    mq.complete(Q, &first[0]).await?;
    assert_eq!(seqs_of(&mq, 10).await?, vec![a2]);
    Ok(())
}

/// 5.2 group_fifo: as standard, and a send without group_id is GroupRequired.
pub async fn p5_2_group_fifo_requires_a_group<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx
        .engine_with_queue(Q, mode(OrderingMode::GroupFifo, 30_000, 10))
        .await?;
    assert!(matches!(
        mq.send(Q, OutMessage::new("no group")).await,
        Err(Error::GroupRequired { .. })
    ));
    let batch = mq
        .send_batch(Q, vec![grouped("ok", "A"), OutMessage::new("no group")])
        .await;
    assert!(matches!(batch, Err(Error::GroupRequired { .. })));
    assert_eq!(mq.stats(Q).await?.total, 0, "nothing stored");
    let a1 = mq.send(Q, grouped("a1", "A")).await?;
    mq.send(Q, grouped("a2", "A")).await?;
    let b1 = mq.send(Q, grouped("b1", "B")).await?;
    assert_eq!(seqs_of(&mq, 10).await?, vec![a1, b1]);
    Ok(())
}

/// 5.3 strict_fifo: one line for the whole queue, at most one message in flight; a
/// deferred head holds the whole queue.
pub async fn p5_3_strict_fifo_one_in_flight<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx
        .engine_with_queue(Q, mode(OrderingMode::StrictFifo, 30_000, 10))
        .await?;
    let m1 = mq.send(Q, grouped("m1", "A")).await?;
    let m2 = mq.send(Q, grouped("m2", "B")).await?;
    let m3 = mq.send(Q, OutMessage::new("m3")).await?;
    let got = mq.receive(Q, ReceiveOptions::batch(3)).await?;
    assert_eq!(got.iter().map(|m| m.seq).collect::<Vec<_>>(), vec![m1]);
    mq.abandon(Q, &got[0], Duration::ZERO).await?;
    let again = receive_one(&mq, Q).await?;
    assert_eq!((again.seq, again.delivery_count), (m1, 2));
    mq.complete(Q, &again).await?;
    let second = receive_one(&mq, Q).await?;
    assert_eq!(second.seq, m2);
    mq.defer(Q, &second).await?;
    assert!(
        seqs_of(&mq, 3).await?.is_empty(),
        "a deferred head holds the queue"
    );
    let d = mq.receive_deferred(Q, &[m2]).await?;
    mq.complete(Q, &d[0]).await?;
    assert_eq!(seqs_of(&mq, 3).await?, vec![m3]);
    Ok(())
}

/// 5.4 The line survives lease expiry: an expired, unreaped lease still blocks its
/// group; after the reaper the head is redelivered first, or dead-lettered, which
/// unblocks the group.
pub async fn p5_4_line_survives_lease_expiry<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx
        .engine_with_queue(Q, mode(OrderingMode::GroupFifo, 1_000, 2))
        .await?;
    let g1 = mq.send(Q, grouped("g1", "G")).await?;
    let g2 = mq.send(Q, grouped("g2", "G")).await?;
    assert_eq!(receive_one(&mq, Q).await?.seq, g1);
    ctx.clock.advance(5_000);
    assert!(
        seqs_of(&mq, 2).await?.is_empty(),
        "expired but unreaped: still the line"
    );
    mq.run_sweeps().await?;
    let head = receive_one(&mq, Q).await?;
    assert_eq!((head.seq, head.delivery_count), (g1, 2), "the head first");
    assert!(seqs_of(&mq, 2).await?.is_empty());
    ctx.clock.advance(1_000);
    mq.run_sweeps().await?;
    assert_eq!(
        state_of(&mq, Q, g1).await?,
        Some(MessageState::DeadLettered)
    );
    assert_eq!(
        seqs_of(&mq, 2).await?,
        vec![g2],
        "the dead-lettered head unblocks"
    );
    Ok(())
}

/// 5.5 The line survives a backoff: an Abandon with delay keeps successors behind the
/// parked head until it is redelivered.
pub async fn p5_5_line_survives_backoff<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx
        .engine_with_queue(Q, mode(OrderingMode::Standard, 30_000, 10))
        .await?;
    let g1 = mq.send(Q, grouped("g1", "G")).await?;
    let g2 = mq.send(Q, grouped("g2", "G")).await?;
    let other = mq.send(Q, grouped("h1", "H")).await?;
    let head = receive_one(&mq, Q).await?;
    mq.abandon(Q, &head, from_millis(10_000)).await?;
    assert_eq!(
        seqs_of(&mq, 5).await?,
        vec![other],
        "g2 stays behind the parked g1"
    );
    ctx.clock.advance(10_000);
    mq.run_sweeps().await?;
    let next = mq.receive(Q, ReceiveOptions::batch(5)).await?;
    assert_eq!(next.iter().map(|m| m.seq).collect::<Vec<_>>(), vec![g1]);
    mq.complete(Q, &next[0]).await?;
    assert_eq!(seqs_of(&mq, 5).await?, vec![g2]);
    Ok(())
}

/// 5.6 A claim behind a 20,000-message blocked group backlog finds the next eligible
/// message (its speed is pinned by the plan tests and the benchmark, not here).
pub async fn p5_6_claim_behind_a_blocked_backlog<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx
        .engine_with_queue(Q, mode(OrderingMode::Standard, 30_000, 10))
        .await?;
    let head = mq.send(Q, grouped("head", "A")).await?;
    assert_eq!(receive_one(&mq, Q).await?.seq, head);
    for chunk in 0..20 {
        let batch = (0..1000)
            .map(|i| grouped(&format!("a-{chunk}-{i}"), "A"))
            .collect();
        mq.send_batch(Q, batch).await?;
    }
    let free = mq.send(Q, grouped("b", "B")).await?;
    assert_eq!(seqs_of(&mq, 5).await?, vec![free]);
    assert_eq!(mq.stats(Q).await?.active, 20_000);
    Ok(())
}

/// 5.1–5.3 A queue's ordering mode changes only while it holds no message in play:
/// messages are lined up by the mode they were sent under.
pub async fn p5_1_ordering_mode_changes_only_when_idle<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx
        .engine_with_queue(Q, mode(OrderingMode::Standard, 30_000, 10))
        .await?;
    mq.send(Q, OutMessage::new("u1")).await?;
    let strict = mode(OrderingMode::StrictFifo, 30_000, 10);
    assert!(matches!(
        mq.update_queue(Q, strict.clone()).await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        mq.create_queue(Q, strict.clone()).await,
        Err(Error::InvalidArgument(_))
    ));
    // Other settings change freely.
    mq.update_queue(Q, mode(OrderingMode::Standard, 10_000, 5))
        .await?;
    let m = receive_one(&mq, Q).await?;
    mq.reject(Q, &m, "done", "").await?;
    // Only a dead letter left: the queue is idle, the mode may change.
    mq.update_queue(Q, strict).await?;
    let info = mq.list_queues().await?;
    assert_eq!(info[0].config.ordering_mode, OrderingMode::StrictFifo);
    assert!(matches!(
        mq.update_queue("missing", QueueConfig::default()).await,
        Err(Error::NotFound { .. })
    ));
    Ok(())
}

/// 5.1–5.5 Every way a line's head leaves play lets the next message of the line go:
/// reject, abandon at the bound, TTL (dead-lettered or discarded), cancel,
/// receive-and-delete; and a dead letter redriven into a busy line waits its turn.
pub async fn p5_1_every_exit_from_play_releases_the_line<F: Access>(ctx: Ctx<F>) -> TckResult {
    use mqlite_contract::{ReceiveMode, RedriveOptions, SendOptions};
    let mq = ctx.engine().await?;
    let queue = |name: &'static str, max: i64, expire_to_dlq: bool| {
        let mq = mq.clone();
        async move {
            let config = QueueConfig {
                max_delivery_count: max,
                dead_letter_on_expire: expire_to_dlq,
                ..mode(OrderingMode::GroupFifo, 30_000, max)
            };
            mq.create_queue(name, config).await
        }
    };
    let next_of = |name: &'static str| {
        let mq = mq.clone();
        async move {
            mq.receive(name, ReceiveOptions::batch(10))
                .await
                .map(|got| {
                    got.iter()
                        .map(|m| m.content.body.clone())
                        .collect::<Vec<_>>()
                })
        }
    };
    let ttl = SendOptions {
        scheduled_at_ms: None,
        ttl: Some(from_millis(1_000)),
    };
    let later = SendOptions {
        scheduled_at_ms: Some(ctx.clock.now() + 3_600_000),
        ttl: None,
    };
    for (name, max, to_dlq) in [
        ("reject", 10, true),
        ("bound", 1, true),
        ("ttl-dlq", 10, true),
        ("ttl-drop", 10, false),
        ("cancel", 10, true),
        ("rad", 10, true),
    ] {
        queue(name, max, to_dlq).await?;
    }
    // Heads: two are received and settled out of play, two expire, one is scheduled
    // and cancelled, one is received-and-deleted.
    for name in ["reject", "bound", "rad"] {
        mq.send(name, grouped("head", "G")).await?;
    }
    for name in ["ttl-dlq", "ttl-drop"] {
        mq.send_with(name, grouped("head", "G"), ttl).await?;
    }
    let cancelled = mq.send_with("cancel", grouped("head", "G"), later).await?;
    for name in ["reject", "bound", "ttl-dlq", "ttl-drop", "cancel", "rad"] {
        mq.send(name, grouped("next", "G")).await?;
    }
    let head = receive_one(&mq, "reject").await?;
    assert!(
        next_of("reject").await?.is_empty(),
        "next waits behind the head"
    );
    mq.reject("reject", &head, "r", "").await?;
    let head = receive_one(&mq, "bound").await?;
    mq.abandon("bound", &head, Duration::ZERO).await?;
    assert!(mq.cancel("cancel", cancelled).await?);
    let rad = mq
        .receive(
            "rad",
            ReceiveOptions {
                mode: ReceiveMode::ReceiveAndDelete,
                ..Default::default()
            },
        )
        .await?;
    assert_eq!(rad[0].body(), b"head");
    ctx.clock.advance(1_000);
    mq.run_sweeps().await?;
    for name in ["bound", "ttl-dlq", "ttl-drop", "cancel", "rad"] {
        assert_eq!(
            next_of(name).await?,
            vec![b"next".to_vec()],
            "{name}: the line moved on"
        );
    }
    let in_flight = receive_one(&mq, "reject").await?;
    assert_eq!(in_flight.body(), b"next", "reject: the line moved on");
    // The rejected head, redriven while "next" is in flight, waits behind it.
    let moved = mq.redrive("reject", RedriveOptions::default()).await?;
    assert_eq!(moved, 1);
    assert!(
        next_of("reject").await?.is_empty(),
        "a redriven row joins the line"
    );
    mq.complete("reject", &in_flight).await?;
    assert_eq!(next_of("reject").await?, vec![b"head".to_vec()]);
    Ok(())
}

/// 5.1 Two messages of one group sent in one batch line up behind each other, in batch
/// order; a group already in play holds both.
pub async fn p5_1_a_batch_lines_up_behind_itself<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx
        .engine_with_queue(Q, mode(OrderingMode::Standard, 30_000, 10))
        .await?;
    let seqs = mq
        .send_batch(
            Q,
            vec![
                grouped("a1", "A"),
                grouped("b1", "B"),
                grouped("a2", "A"),
                grouped("a3", "A"),
            ],
        )
        .await?;
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "batch order: {seqs:?}"
    );
    let first = mq.receive(Q, ReceiveOptions::batch(10)).await?;
    assert_eq!(
        first.iter().map(|m| m.seq).collect::<Vec<_>>(),
        vec![seqs[0], seqs[1]],
        "one head per group"
    );
    mq.complete(Q, &first[0]).await?;
    assert_eq!(seqs_of(&mq, 10).await?, vec![seqs[2]], "a2 follows a1");
    // A batch into a line already in play waits behind it entirely.
    let more = mq
        .send_batch(Q, vec![grouped("b2", "B"), grouped("b3", "B")])
        .await?;
    assert!(
        seqs_of(&mq, 10).await?.is_empty(),
        "B's head is still locked"
    );
    mq.complete(Q, &first[1]).await?;
    assert_eq!(seqs_of(&mq, 10).await?, vec![more[0]]);
    Ok(())
}

/// 5.7 A message scheduled at send time holds its group's line until it is due,
/// delivered and settled: later messages of the group wait; other groups flow.
pub async fn p5_7_scheduled_at_send_holds_its_line<F: Access>(ctx: Ctx<F>) -> TckResult {
    use mqlite_contract::SendOptions;
    let mq = ctx
        .engine_with_queue(Q, mode(OrderingMode::Standard, 30_000, 10))
        .await?;
    let later = SendOptions {
        scheduled_at_ms: Some(ctx.clock.now() + 60_000),
        ttl: None,
    };
    let s = mq.send_with(Q, grouped("tomorrow", "A"), later).await?;
    let a2 = mq.send(Q, grouped("a2", "A")).await?;
    let b1 = mq.send(Q, grouped("b1", "B")).await?;
    let b = mq.receive(Q, ReceiveOptions::batch(10)).await?;
    assert_eq!(
        b.iter().map(|m| m.seq).collect::<Vec<_>>(),
        vec![b1],
        "A waits for its scheduled head; B flows"
    );
    mq.complete(Q, &b[0]).await?;
    ctx.clock.advance(60_000);
    mq.run_sweeps().await?;
    let due = receive_one(&mq, Q).await?;
    assert_eq!(due.seq, s, "the scheduled head is delivered first once due");
    assert!(
        seqs_of(&mq, 10).await?.is_empty(),
        "a2 waits while the head is locked"
    );
    mq.complete(Q, &due).await?;
    assert_eq!(seqs_of(&mq, 10).await?, vec![a2]);
    Ok(())
}

/// 5.8 A redriven dead letter re-enters its line by its sequence number: it never
/// preempts the current head, and it goes ahead of younger members that still wait.
pub async fn p5_8_redrive_rejoins_its_line_by_sequence<F: Access>(ctx: Ctx<F>) -> TckResult {
    use mqlite_contract::RedriveOptions;
    let mq = ctx
        .engine_with_queue(Q, mode(OrderingMode::Standard, 30_000, 10))
        .await?;
    let old = mq.send(Q, grouped("old", "A")).await?;
    let m = receive_one(&mq, Q).await?;
    mq.reject(Q, &m, "poison", "").await?;
    let head = mq.send(Q, grouped("head", "A")).await?;
    let waiting = mq.send(Q, grouped("waiting", "A")).await?;
    let claimed = receive_one(&mq, Q).await?;
    assert_eq!(claimed.seq, head);
    assert_eq!(mq.redrive(Q, RedriveOptions::default()).await?, 1);
    assert!(
        seqs_of(&mq, 10).await?.is_empty(),
        "the redriven message does not preempt the locked head"
    );
    mq.complete(Q, &claimed).await?;
    assert_eq!(
        seqs_of(&mq, 10).await?,
        vec![old],
        "then it goes ahead of the younger member that waited"
    );
    assert_eq!(state_of(&mq, Q, waiting).await?, Some(MessageState::Active));
    Ok(())
}

/// 5.9 Redrive into a group_fifo queue of a dead letter without a group is GroupRequired
/// for the whole call, and nothing moves.
pub async fn p5_9_redrive_into_group_fifo_needs_a_group<F: Access>(ctx: Ctx<F>) -> TckResult {
    use mqlite_contract::RedriveOptions;
    let mq = ctx
        .engine_with_queue(Q, mode(OrderingMode::Standard, 30_000, 10))
        .await?;
    mq.create_queue("fifo", mode(OrderingMode::GroupFifo, 30_000, 10))
        .await?;
    let grouped_dead = mq.send(Q, grouped("g", "A")).await?;
    let plain_dead = mq.send(Q, OutMessage::new("no group")).await?;
    for _ in 0..2 {
        let m = receive_one(&mq, Q).await?;
        mq.reject(Q, &m, "r", "").await?;
    }
    let to_fifo = RedriveOptions {
        target: Some("fifo".into()),
        ..Default::default()
    };
    assert!(matches!(
        mq.redrive(Q, to_fifo.clone()).await,
        Err(Error::GroupRequired { .. })
    ));
    for seq in [grouped_dead, plain_dead] {
        assert_eq!(
            state_of(&mq, Q, seq).await?,
            Some(MessageState::DeadLettered)
        );
    }
    assert_eq!(mq.stats("fifo").await?.total, 0, "nothing moved");
    // Only the grouped one: it moves.
    let one = RedriveOptions { max: 1, ..to_fifo };
    assert_eq!(mq.redrive(Q, one).await?, 1);
    assert_eq!(receive_one(&mq, "fifo").await?.seq, grouped_dead);
    Ok(())
}

/// 5.6 (and 1.5) The work of a claim does not grow with a blocked backlog or with
/// expired leases: the store's work counter (rows or index entries visited) reads the
/// same for a claim behind 100 and behind 2,000 blocked messages and beside as many
/// expired, unreaped leases. Stores that cannot count skip it ([`WorkCounter`]).
///
/// [`WorkCounter`]: crate::Capability::WorkCounter
pub async fn p5_6_claim_work_is_flat_in_the_backlog<F: Access>(ctx: Ctx<F>) -> TckResult {
    use mqlite_contract::Store;
    let mut visits = Vec::new();
    for (round, backlog) in [100usize, 2_000].into_iter().enumerate() {
        let mq = ctx.engine().await?;
        let q = format!("q{round}");
        mq.create_queue(&q, mode(OrderingMode::Standard, 1_000, 10))
            .await?;
        // A blocked group: its head locked, `backlog` members waiting.
        mq.send(&q, grouped("head", "A")).await?;
        mq.receive(&q, ReceiveOptions::batch(1)).await?;
        for chunk in (0..backlog).step_by(500) {
            let batch = (chunk..(chunk + 500).min(backlog))
                .map(|i| grouped(&format!("a{i}"), "A"))
                .collect();
            mq.send_batch(&q, batch).await?;
        }
        // As many leases, expired and not yet reaped.
        for chunk in (0..backlog).step_by(500) {
            let batch = (chunk..(chunk + 500).min(backlog))
                .map(|i| OutMessage::new(format!("l{i}")))
                .collect();
            mq.send_batch(&q, batch).await?;
        }
        while !mq.receive(&q, ReceiveOptions::batch(256)).await?.is_empty() {}
        ctx.clock.advance(1_000);
        let free = mq.send(&q, grouped("free", "B")).await?;
        let before = mq
            .store()
            .work()
            .ok_or("the store claims a work counter but reports none")?;
        let got = mq.receive(&q, ReceiveOptions::batch(1)).await?;
        let spent = mq.store().work().unwrap_or_default() - before;
        assert_eq!(got.iter().map(|m| m.seq).collect::<Vec<_>>(), vec![free]);
        visits.push(spent.visits);
        mq.close().await;
    }
    super::assert_flat(&visits, "behind 100 vs 2,000");
    Ok(())
}

//! Section 1: the peek-lock lifecycle.

use mqlite_contract::{
    ClaimSpec, Error, LockRef, MessageState, OutMessage, REASON_MAX_DELIVERY, ReceiveMode,
    ReceiveOptions, SendOptions, from_millis,
};
use std::collections::HashSet;
use std::time::Duration;

use super::{config, parked_receiver, peek_all, receive_one, send_n, state_of};
use crate::harness::{Access, Ctx, TckResult};

const Q: &str = "q";

/// 1.1 Receive claims the oldest eligible message, locks it for the lock duration and
/// returns a fresh 128-bit random token.
pub async fn p1_1_receive_claims_oldest_eligible_with_fresh_token<F: Access>(
    ctx: Ctx<F>,
) -> TckResult {
    let mq = ctx.engine_with_queue(Q, config(30_000, 10)).await?;
    let now = ctx.clock.now();
    // Not eligible: scheduled in the future, and already expired.
    mq.send_with(
        Q,
        OutMessage::new("later"),
        SendOptions {
            scheduled_at_ms: Some(now + 60_000),
            ttl: None,
        },
    )
    .await?;
    let expired = mq
        .send_with(
            Q,
            OutMessage::new("expiring"),
            SendOptions {
                scheduled_at_ms: None,
                ttl: Some(from_millis(1)),
            },
        )
        .await?;
    ctx.clock.advance(5);
    let seqs = send_n(&mq, Q, "m", 3).await?;
    let first = receive_one(&mq, Q).await?;
    assert_eq!(
        first.seq, seqs[0],
        "oldest eligible first, skipping expired {expired}"
    );
    assert_eq!(first.body(), b"m-0");
    assert_eq!(first.state, MessageState::Locked);
    assert_eq!(first.locked_until_ms, ctx.clock.now() + 30_000);
    let second = receive_one(&mq, Q).await?;
    assert_eq!(second.seq, seqs[1]);
    let (t1, t2) = (first.token(), second.token());
    assert_ne!(t1, t2, "every claim gets a fresh token");
    assert_eq!(t1.to_string().len(), 32, "128 bits as 32 hex characters");
    assert_ne!(t1.as_u128(), 0);
    assert_eq!(
        state_of(&mq, Q, first.seq).await?,
        Some(MessageState::Locked)
    );
    Ok(())
}

/// 1.2 A locked message is invisible to every other Receive until settled or expired.
pub async fn p1_2_locked_message_is_invisible_until_settled_or_expired<F: Access>(
    ctx: Ctx<F>,
) -> TckResult {
    let mq = ctx.engine_with_queue(Q, config(10_000, 10)).await?;
    let seq = mq.send(Q, OutMessage::new("only")).await?;
    let m = receive_one(&mq, Q).await?;
    assert_eq!(m.seq, seq);
    for _ in 0..3 {
        assert!(mq.receive_one(Q).await?.is_none(), "held by a live lease");
    }
    ctx.clock.advance(9_999);
    mq.run_sweeps().await?;
    assert!(
        mq.receive_one(Q).await?.is_none(),
        "lease still live at 9.999 s"
    );
    ctx.clock.advance(1);
    mq.run_sweeps().await?;
    let again = receive_one(&mq, Q).await?;
    assert_eq!(
        again.seq, seq,
        "visible again once the lease expired and was reaped"
    );
    assert_ne!(again.token(), m.token());
    mq.abandon(Q, &again, Duration::ZERO).await?;
    let third = receive_one(&mq, Q).await?;
    assert_eq!(third.seq, seq, "visible again once settled");
    Ok(())
}

/// 1.3 Every claim increments delivery_count inside the claim itself.
pub async fn p1_3_every_claim_counts_a_delivery<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, config(10_000, 10)).await?;
    mq.send(Q, OutMessage::new("x")).await?;
    for expected in 1..=4 {
        let m = receive_one(&mq, Q).await?;
        assert_eq!(m.delivery_count, expected);
        let peeked = peek_all(&mq, Q).await?;
        assert_eq!(
            peeked[0].delivery_count, expected,
            "counted in the stored row"
        );
        if expected % 2 == 0 {
            mq.abandon(Q, &m, Duration::ZERO).await?;
        } else {
            ctx.clock.advance(10_000);
            mq.run_sweeps().await?;
        }
    }
    Ok(())
}

/// 1.4 An expired lease is returned to active by the reaper, or dead-lettered with
/// MaxDeliveryCountExceeded once delivery_count >= max_delivery_count.
pub async fn p1_4_reaper_reactivates_or_dead_letters_expired_leases<F: Access>(
    ctx: Ctx<F>,
) -> TckResult {
    let mq = ctx.engine_with_queue(Q, config(1_000, 2)).await?;
    let seq = mq.send(Q, OutMessage::new("x")).await?;
    receive_one(&mq, Q).await?;
    ctx.clock.advance(1_000);
    let report = mq.run_sweeps().await?;
    assert_eq!(report.reaped, 1);
    assert_eq!(state_of(&mq, Q, seq).await?, Some(MessageState::Active));
    let m = receive_one(&mq, Q).await?;
    assert_eq!(m.delivery_count, 2);
    ctx.clock.advance(1_000);
    mq.run_sweeps().await?;
    let dead = peek_all(&mq, Q).await?;
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].state, MessageState::DeadLettered);
    assert_eq!(
        dead[0].dead_letter_reason.as_deref(),
        Some(REASON_MAX_DELIVERY)
    );
    assert!(mq.receive_one(Q).await?.is_none());
    Ok(())
}

/// 1.5 The claim does not reclaim expired leases (the reaper does); an expired, unreaped
/// lease is not handed out again by a claim.
pub async fn p1_5_claim_never_reclaims_an_expired_lease<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, config(1_000, 10)).await?;
    mq.send(Q, OutMessage::new("x")).await?;
    let m = receive_one(&mq, Q).await?;
    ctx.clock.advance(5_000);
    assert!(
        mq.receive_one(Q).await?.is_none(),
        "claim must not reclaim the expired lease itself"
    );
    assert_eq!(state_of(&mq, Q, m.seq).await?, Some(MessageState::Locked));
    mq.run_sweeps().await?;
    assert_eq!(receive_one(&mq, Q).await?.seq, m.seq);
    Ok(())
}

/// 1.6 A batch Receive of N claims up to N messages, oldest first, in one transaction.
pub async fn p1_6_batch_receive_claims_oldest_n<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, config(30_000, 10)).await?;
    let seqs = send_n(&mq, Q, "m", 5).await?;
    let batch = mq.receive(Q, ReceiveOptions::batch(3)).await?;
    let got: Vec<_> = batch.iter().map(|m| m.seq).collect();
    assert_eq!(got, seqs[..3].to_vec());
    let tokens: HashSet<_> = batch.iter().map(|m| m.token()).collect();
    assert_eq!(tokens.len(), 3, "one token per message");
    let rest = mq.receive(Q, ReceiveOptions::batch(10)).await?;
    assert_eq!(rest.len(), 2, "up to N: only what is eligible");
    assert!(mq.receive(Q, ReceiveOptions::batch(256)).await?.is_empty());
    let too_many = mq.receive(Q, ReceiveOptions::batch(257)).await;
    assert!(matches!(too_many, Err(Error::InvalidArgument(_))));
    // The store refuses it too, for a caller of the store alone: nothing claimed.
    use mqlite_contract::MessageOps;
    send_n(&mq, Q, "more", 1).await?;
    let spec = ClaimSpec {
        max_messages: 257,
        mode: ReceiveMode::PeekLock,
        attempt_id: None,
    };
    let store_too_many = mq.store().claim(Q.into(), spec).await;
    assert!(
        matches!(store_too_many, Err(Error::InvalidArgument(_))),
        "the store's claim of 257: {store_too_many:?}"
    );
    assert_eq!(mq.stats(Q).await?.active, 1, "nothing claimed");
    let stats = mq.stats(Q).await?;
    assert_eq!(stats.locked, 5);
    Ok(())
}

/// 1.7 Receive-and-delete removes the rows in the claim's transaction: no token, zero
/// locked_until.
pub async fn p1_7_receive_and_delete_grants_no_lease<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, config(30_000, 10)).await?;
    send_n(&mq, Q, "m", 3).await?;
    let got = mq
        .receive(
            Q,
            ReceiveOptions {
                max_messages: 2,
                mode: ReceiveMode::ReceiveAndDelete,
                ..Default::default()
            },
        )
        .await?;
    assert_eq!(got.len(), 2);
    for m in &got {
        assert!(m.lock_token.is_none());
        assert_eq!(m.locked_until_ms, 0);
        assert_eq!(m.delivery_count, 1);
        let settle = mq.complete(Q, LockRef::from(m)).await;
        assert!(matches!(settle, Err(Error::LockLost { .. })));
    }
    let left = peek_all(&mq, Q).await?;
    assert_eq!(left.len(), 1, "the two received rows are gone");
    assert_eq!(mq.stats(Q).await?.total, 1);
    Ok(())
}

/// 1.8 Long-poll: a Receive with a wait time returns as soon as a send makes a message
/// eligible.
pub async fn p1_8_long_poll_wakes_on_send<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, config(30_000, 10)).await?;
    // The manual clock never moves, so only the send's wake-up can end the wait.
    let waiter = parked_receiver(&mq, Q).await?;
    let seq = mq.send(Q, OutMessage::new("wake")).await?;
    let got = waiter.await??;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].seq, seq);
    Ok(())
}

/// 1.8 Long-poll: with nothing to receive, the wait returns empty at its deadline.
pub async fn p1_8_long_poll_returns_empty_at_deadline<F: Access>(ctx: Ctx<F>) -> TckResult {
    // No periodic re-check inside the wait: only a send or the deadline can end it.
    let mq = ctx
        .engine_with(mqlite_engine::EngineOptions {
            background: false,
            long_poll_recheck: from_millis(60_000),
            ..Default::default()
        })
        .await?;
    mq.create_queue(Q, config(30_000, 10)).await?;
    let waiter = {
        let mq = mq.clone();
        tokio::spawn(async move {
            mq.receive(
                Q,
                ReceiveOptions {
                    wait: from_millis(2_000),
                    ..Default::default()
                },
            )
            .await
        })
    };
    mq.long_poll_waiters().wait_for(|n| *n >= 1).await?;
    ctx.clock.advance(1_999);
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    assert!(
        !waiter.is_finished(),
        "still waiting 1 ms before its deadline"
    );
    ctx.clock.advance(1);
    let got = waiter.await??;
    assert!(got.is_empty(), "empty at the deadline");
    Ok(())
}

/// 1.4 The background reaper runs on the injected clock: moving a manual clock past a
/// lease lets the loop reclaim it, with no sleeping anywhere.
pub async fn p1_4_background_reaper_follows_the_manual_clock<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx
        .engine_with(mqlite_engine::EngineOptions::default())
        .await?;
    mq.create_queue(Q, config(2_000, 10)).await?;
    let seq = mq.send(Q, OutMessage::new("x")).await?;
    receive_one(&mq, Q).await?;
    ctx.clock.advance(2_000);
    let target = ctx.clock.now();
    // The reaper ticks every second of the manual clock; wait for a pass at or after now.
    let mut progress = mq.loop_progress(mqlite_engine::LoopKind::Reaper);
    progress.wait_for(|t| *t >= target).await?;
    assert_eq!(state_of(&mq, Q, seq).await?, Some(MessageState::Active));
    mq.close().await;
    Ok(())
}

/// 1.7 Receive-and-delete leaves nothing in flight, so one batch drains a FIFO line in
/// order: the head, then each next member, while each is eligible.
pub async fn p1_7_receive_and_delete_drains_a_line_in_order<F: Access>(ctx: Ctx<F>) -> TckResult {
    use mqlite_contract::OrderingMode;
    use mqlite_contract::{QueueConfig, ReceiveMode, SendOptions};
    let mq = ctx.engine().await?;
    let strict = QueueConfig {
        ordering_mode: OrderingMode::StrictFifo,
        ..Default::default()
    };
    mq.create_queue(Q, strict).await?;
    let seqs = send_n(&mq, Q, "m", 5).await?;
    let parked = SendOptions {
        scheduled_at_ms: Some(ctx.clock.now() + 1_000),
        ttl: None,
    };
    let late = mq.send_with(Q, OutMessage::new("later"), parked).await?;
    let after = mq.send(Q, OutMessage::new("after")).await?;
    let rad = |n| ReceiveOptions {
        max_messages: n,
        mode: ReceiveMode::ReceiveAndDelete,
        ..Default::default()
    };
    let got = mq.receive(Q, rad(3)).await?;
    assert_eq!(
        got.iter().map(|m| m.seq).collect::<Vec<_>>(),
        seqs[..3].to_vec()
    );
    assert!(
        got.iter()
            .all(|m| m.lock_token.is_none() && m.locked_until_ms == 0)
    );
    assert!(got.iter().all(|m| m.delivery_count == 1));
    let got = mq.receive(Q, rad(10)).await?;
    assert_eq!(
        got.iter().map(|m| m.seq).collect::<Vec<_>>(),
        seqs[3..].to_vec(),
        "the line stops at its scheduled member"
    );
    ctx.clock.advance(1_000);
    mq.run_sweeps().await?;
    let got = mq.receive(Q, rad(10)).await?;
    assert_eq!(
        got.iter().map(|m| m.seq).collect::<Vec<_>>(),
        vec![late, after]
    );
    assert_eq!(mq.stats(Q).await?.total, 0);
    Ok(())
}

/// 1.8 A settlement or a redrive that makes a message eligible wakes a long-poll at
/// once, as a send does: an abandon, a completed or dead-lettered line head, a redrive.
/// The manual clock never moves, so only the wake-up can end each wait.
pub async fn p1_8_long_poll_wakes_when_work_is_freed<F: Access>(ctx: Ctx<F>) -> TckResult {
    use mqlite_contract::RedriveOptions;
    let mq = ctx.engine_with_queue(Q, config(30_000, 10)).await?;
    let take = |got: mqlite_contract::Result<Vec<mqlite_contract::Message>>| {
        got.map_err(|e| e.to_string())
            .and_then(|mut v| v.pop().ok_or_else(|| "woken with nothing".to_owned()))
    };

    // Abandon: the message itself comes back.
    let m = mq.send(Q, OutMessage::new("abandoned")).await?;
    let held = receive_one(&mq, Q).await?;
    let waiter = parked_receiver(&mq, Q).await?;
    mq.abandon(Q, &held, Duration::ZERO).await?;
    let got = take(waiter.await?)?;
    assert_eq!(got.seq, m, "abandon wakes");
    mq.complete(Q, &got).await?;

    // A completed head hands its line on.
    mq.send(Q, OutMessage::new("a1").with_group("A")).await?;
    let a2 = mq.send(Q, OutMessage::new("a2").with_group("A")).await?;
    let head = receive_one(&mq, Q).await?;
    let waiter = parked_receiver(&mq, Q).await?;
    mq.complete(Q, &head).await?;
    let got = take(waiter.await?)?;
    assert_eq!(got.seq, a2, "a completed head wakes");
    mq.complete(Q, &got).await?;

    // A dead-lettered head hands its line on.
    mq.send(Q, OutMessage::new("b1").with_group("B")).await?;
    let b2 = mq.send(Q, OutMessage::new("b2").with_group("B")).await?;
    let head = receive_one(&mq, Q).await?;
    let waiter = parked_receiver(&mq, Q).await?;
    mq.reject(Q, &head, "poison", "").await?;
    let got = take(waiter.await?)?;
    assert_eq!(got.seq, b2, "a dead-lettered head wakes");
    mq.complete(Q, &got).await?;

    // A redrive brings the dead letter back.
    let waiter = parked_receiver(&mq, Q).await?;
    assert_eq!(mq.redrive(Q, RedriveOptions::default()).await?, 1);
    let got = take(waiter.await?)?;
    assert_eq!(got.seq, head.seq, "a redrive wakes");
    Ok(())
}

/// 1.8 A message that becomes eligible on a timer — a scheduled send, an abandon with
/// a delay, a lease that lapses (at the end its last renewal set) — wakes a long-poll parked on its queue when its time
/// comes, without waiting for a sweep: the background loops are off and the long-poll
/// has no periodic re-check, so only the engine's own wake-up can end each wait.
pub async fn p1_8_long_poll_wakes_when_a_timer_comes_due<F: Access>(ctx: Ctx<F>) -> TckResult {
    use mqlite_contract::SendOptions;
    let mq = ctx
        .engine_with(mqlite_engine::EngineOptions {
            background: false,
            long_poll_recheck: from_millis(600_000),
            ..Default::default()
        })
        .await?;
    mq.create_queue(Q, config(2_000, 10)).await?;
    let take = |got: mqlite_contract::Result<Vec<mqlite_contract::Message>>| {
        got.map_err(|e| e.to_string())
            .and_then(|mut v| v.pop().ok_or_else(|| "woken with nothing".to_owned()))
    };

    // A scheduled send.
    let later = SendOptions {
        scheduled_at_ms: Some(ctx.clock.now() + 5_000),
        ttl: None,
    };
    let seq = mq.send_with(Q, OutMessage::new("scheduled"), later).await?;
    let waiter = parked_receiver(&mq, Q).await?;
    ctx.clock.advance(4_999);
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    assert!(!waiter.is_finished(), "not before its time");
    ctx.clock.advance(1);
    let got = take(waiter.await?)?;
    assert_eq!(got.seq, seq, "a scheduled send wakes at its time");

    // An abandon with a delay.
    mq.abandon(Q, &got, Duration::from_millis(3_000)).await?;
    let waiter = parked_receiver(&mq, Q).await?;
    ctx.clock.advance(3_000);
    let got = take(waiter.await?)?;
    assert_eq!(got.seq, seq, "a delayed abandon wakes at its time");
    assert_eq!(got.delivery_count, 2);

    // A lease that lapses (the queue's lock is 2 s): the message comes back to the
    // parked receiver with its next delivery.
    let waiter = parked_receiver(&mq, Q).await?;
    ctx.clock.advance(2_000);
    let got = take(waiter.await?)?;
    assert_eq!(got.seq, seq, "a lapsed lease wakes at its time");
    assert_eq!(got.delivery_count, 3);

    // A renewed lease lapses at its new end, not at the one its claim handed out.
    ctx.clock.advance(1_000);
    let until = mq.renew(Q, &got).await?;
    let waiter = parked_receiver(&mq, Q).await?;
    ctx.clock.advance(1_000);
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    assert!(!waiter.is_finished(), "the renewed lease still holds");
    ctx.clock.advance(until - ctx.clock.now());
    let got = take(waiter.await?)?;
    assert_eq!(got.seq, seq, "a renewed lease wakes at its new end");
    assert_eq!(got.delivery_count, 4);
    Ok(())
}

/// 2.7 CompleteBatch is not capped at 512: 2,000 items settle in one call, one
/// transaction.
pub async fn p2_7_complete_batch_takes_thousands<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, config(30_000, 10)).await?;
    for chunk in 0..2 {
        let batch = (0..1000)
            .map(|i| OutMessage::new(format!("m{chunk}-{i}")))
            .collect();
        mq.send_batch(Q, batch).await?;
    }
    let mut locks = Vec::new();
    for _ in 0..8 {
        locks.extend(
            mq.receive(Q, ReceiveOptions::batch(256))
                .await?
                .iter()
                .map(mqlite_contract::LockRef::from),
        );
    }
    assert_eq!(locks.len(), 2_000);
    let results = mq.complete_batch(Q, &locks).await?;
    assert!(results.iter().all(|r| r.ok));
    assert_eq!(mq.stats(Q).await?.total, 0);
    Ok(())
}

//! Section 7: scheduling, deferral, TTL.

use mqlite_contract::{
    MessageState, OutMessage, QueueConfig, REASON_TTL_EXPIRED, SendOptions, from_millis,
};
use std::time::Duration;

use super::{config, peek_all, receive_one, state_of};
use crate::harness::{Access, Ctx, TckResult};

const Q: &str = "q";

/// 7.1 A scheduled message stays hidden until its time, then becomes active; Cancel
/// deletes a scheduled message never delivered, but not a backoff-parked redelivery.
pub async fn p7_1_scheduled_hidden_until_due_and_cancellable<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, config(30_000, 10)).await?;
    let at = ctx.clock.now() + 10_000;
    let seq = mq.schedule(Q, OutMessage::new("later"), at).await?;
    let gone = mq.schedule(Q, OutMessage::new("cancel me"), at).await?;
    assert_eq!(state_of(&mq, Q, seq).await?, Some(MessageState::Scheduled));
    ctx.clock.advance(9_999);
    mq.run_sweeps().await?;
    assert!(mq.receive_one(Q).await?.is_none(), "hidden before its time");
    assert!(mq.cancel(Q, gone).await?, "never delivered: cancellable");
    assert_eq!(state_of(&mq, Q, gone).await?, None);
    ctx.clock.advance(1);
    mq.run_sweeps().await?;
    let m = receive_one(&mq, Q).await?;
    assert_eq!(m.seq, seq);
    assert_eq!(m.visible_at_ms, at);
    mq.abandon(Q, &m, from_millis(60_000)).await?;
    assert_eq!(state_of(&mq, Q, seq).await?, Some(MessageState::Scheduled));
    assert!(
        !mq.cancel(Q, seq).await?,
        "a backoff-parked redelivery is not cancellable"
    );
    assert_eq!(state_of(&mq, Q, seq).await?, Some(MessageState::Scheduled));
    assert!(!mq.cancel(Q, seq).await?);
    Ok(())
}

/// 7.2 TTL, anchored at visible_at: an expired message, from any non-terminal state
/// including scheduled, is dead-lettered when dead_letter_on_expire (the default), else
/// discarded.
pub async fn p7_2_ttl_dead_letters_or_discards<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, config(30_000, 10)).await?;
    mq.create_queue(
        "drop",
        QueueConfig {
            dead_letter_on_expire: false,
            default_ttl: from_millis(1_000),
            ..Default::default()
        },
    )
    .await?;
    let now = ctx.clock.now();
    let ttl = |ms| SendOptions {
        scheduled_at_ms: None,
        ttl: Some(from_millis(ms)),
    };
    let active = mq.send_with(Q, OutMessage::new("a"), ttl(1_000)).await?;
    let locked = mq.send_with(Q, OutMessage::new("l"), ttl(1_000)).await?;
    let scheduled = mq
        .send_with(
            Q,
            OutMessage::new("s"),
            SendOptions {
                scheduled_at_ms: Some(now + 5_000),
                ttl: Some(from_millis(1_000)),
            },
        )
        .await?;
    let forever = mq.send(Q, OutMessage::new("f")).await?;
    let discarded = mq.send("drop", OutMessage::new("d")).await?;
    let held = mq.receive_one(Q).await?;
    assert_eq!(held.as_ref().map(|m| m.seq), Some(active));
    let held2 = receive_one(&mq, Q).await?;
    assert_eq!(held2.seq, locked);
    mq.abandon(Q, &held.expect("received"), Duration::ZERO)
        .await?;

    ctx.clock.advance(1_000);
    mq.run_sweeps().await?;
    let all = peek_all(&mq, Q).await?;
    let state = |seq| all.iter().find(|m| m.seq == seq).map(|m| m.state);
    assert_eq!(state(active), Some(MessageState::DeadLettered));
    assert_eq!(
        state(locked),
        Some(MessageState::DeadLettered),
        "even while locked"
    );
    assert_eq!(
        state(scheduled),
        Some(MessageState::Scheduled),
        "anchored at visible_at"
    );
    assert_eq!(state(forever), Some(MessageState::Active));
    let reason = all
        .iter()
        .find(|m| m.seq == active)
        .and_then(|m| m.dead_letter_reason.clone());
    assert_eq!(reason.as_deref(), Some(REASON_TTL_EXPIRED));
    assert!(
        peek_all(&mq, "drop").await?.is_empty(),
        "discarded, {discarded} gone"
    );

    ctx.clock.advance(5_000);
    mq.run_sweeps().await?;
    assert_eq!(
        state_of(&mq, Q, scheduled).await?,
        Some(MessageState::DeadLettered),
        "a scheduled message expires at visible_at + ttl"
    );
    assert_eq!(receive_one(&mq, Q).await?.seq, forever);

    // Straight from scheduled: a backoff that outlasts the TTL. The scheduler never
    // activates it (not due), the TTL sweep dead-letters it where it is.
    let parked = mq.send_with(Q, OutMessage::new("p"), ttl(2_000)).await?;
    let m = receive_one(&mq, Q).await?;
    assert_eq!(m.seq, parked);
    mq.abandon(Q, &m, from_millis(60_000)).await?;
    ctx.clock.advance(2_000);
    assert_eq!(
        state_of(&mq, Q, parked).await?,
        Some(MessageState::Scheduled)
    );
    mq.run_sweeps().await?;
    assert_eq!(
        state_of(&mq, Q, parked).await?,
        Some(MessageState::DeadLettered),
        "expired while scheduled"
    );
    Ok(())
}

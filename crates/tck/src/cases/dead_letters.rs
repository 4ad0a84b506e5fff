//! Section 6: dead letters.

use mqlite_engine_core::{
    MessageState, OutMessage, PeekOptions, PurgeOptions, REASON_MAX_DELIVERY, RedriveOptions,
};

use super::{config, peek_all, receive_one, send_n};
use crate::harness::{Access, Ctx, TckResult};

const Q: &str = "q";

/// 6.1 Reaching max_delivery_count dead-letters with reason MaxDeliveryCountExceeded.
pub async fn p6_1_delivery_bound_dead_letters<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, config(30_000, 3)).await?;
    let seq = mq.send(Q, OutMessage::new("x")).await?;
    for n in 1..=3 {
        let m = receive_one(&mq, Q).await?;
        assert_eq!(m.delivery_count, n);
        mq.abandon(Q, &m, 0).await?;
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
    mq: &mqlite_engine_core::Engine<F::Store>,
    n: usize,
) -> Result<Vec<mqlite_engine_core::SeqNumber>, Box<dyn std::error::Error>> {
    let seqs = send_n(mq, Q, "dead", n).await?;
    for _ in 0..n {
        let m = receive_one(mq, Q).await?;
        mq.reject(Q, &m, "Test", "").await?;
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
                older_than_ms: 2_500,
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
                older_than_ms: 2_500,
                ..Default::default()
            },
        )
        .await?;
    assert_eq!(moved, 1, "only seqs[1] is old enough");

    // Purge: bounded by age, then by max, then all.
    assert_eq!(
        mq.purge(
            Q,
            PurgeOptions {
                older_than_ms: 60_000,
                max: 0
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
                older_than_ms: 0
            }
        )
        .await?,
        1
    );
    assert_eq!(mq.purge(Q, PurgeOptions::default()).await?, 1);
    let left = peek_all(&mq, Q).await?;
    assert!(left.iter().all(|m| m.state != MessageState::DeadLettered));
    assert_eq!(left.len(), 3, "purge touched only dead letters");
    Ok(())
}

/// 6.2 Redrive to a target queue moves the dead letters there, active, count reset.
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
    let m = receive_one(&mq, "target").await?;
    assert_eq!((m.seq, m.delivery_count), (seqs[0], 1));
    assert!(
        mq.redrive(
            Q,
            RedriveOptions {
                target: Some("missing".into()),
                ..Default::default()
            }
        )
        .await
        .is_err(),
        "a missing target is refused"
    );
    Ok(())
}

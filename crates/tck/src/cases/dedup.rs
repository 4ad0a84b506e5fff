//! Section 4: producer deduplication.

use mqlite_contract::{
    EnqueueSlot, Error, OutMessage, QueueConfig, SendOptions, SeqNumber, from_millis,
};

use super::peek_all;
use crate::harness::{Access, Ctx, TckResult};

const Q: &str = "q";

fn windowed(ms: i64) -> QueueConfig {
    QueueConfig {
        dedup_window: from_millis(ms),
        ..Default::default()
    }
}

/// 4.1 Inside the window a repeated message_id (empty id: the body's SHA-256) collapses
/// into the original and returns its sequence number; with the window at 0 the id is
/// plain metadata.
pub async fn p4_1_repeat_inside_window_collapses<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, windowed(60_000)).await?;
    let a = mq.send(Q, OutMessage::new("one").with_id("x")).await?;
    ctx.clock.advance(59_999);
    assert_eq!(mq.send(Q, OutMessage::new("one").with_id("x")).await?, a);
    let b = mq.send(Q, OutMessage::new("same body")).await?;
    assert_eq!(
        mq.send(Q, OutMessage::new("same body")).await?,
        b,
        "content key"
    );
    assert_eq!(
        mq.send(Q, OutMessage::new("same body").with_id("")).await?,
        b
    );
    assert_eq!(mq.stats(Q).await?.total, 2);
    ctx.clock.advance(1);
    let c = mq.send(Q, OutMessage::new("one").with_id("x")).await?;
    assert!(c > a, "outside the window it is a new message");

    mq.create_queue("plain", QueueConfig::default()).await?;
    let p1 = mq
        .send("plain", OutMessage::new("one").with_id("x"))
        .await?;
    let p2 = mq
        .send("plain", OutMessage::new("one").with_id("x"))
        .await?;
    assert_ne!(p1, p2, "window 0: message_id is metadata");
    let stored = peek_all(&mq, "plain").await?;
    assert_eq!(stored[0].content.message_id.as_deref(), Some("x"));
    Ok(())
}

/// 4.2 A single Send whose id repeats with another body fails with DedupConflict.
pub async fn p4_2_single_send_conflict<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, windowed(60_000)).await?;
    mq.send(Q, OutMessage::new("one").with_id("x")).await?;
    match mq.send(Q, OutMessage::new("two").with_id("x")).await {
        Err(Error::DedupConflict { message_id }) => assert_eq!(message_id, "x"),
        other => return Err(format!("expected DedupConflict, got {other:?}").into()),
    }
    let stored = peek_all(&mq, Q).await?;
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].body(), b"one", "never a silent overwrite");
    Ok(())
}

/// 4.3 In a multi-message Send a conflicting slot returns sequence number 0 and the rest
/// commits.
pub async fn p4_3_batch_conflict_slot_is_zero<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, windowed(60_000)).await?;
    let a = mq.send(Q, OutMessage::new("one").with_id("x")).await?;
    let seqs = mq
        .send_batch(
            Q,
            vec![
                OutMessage::new("new").with_id("y"),
                OutMessage::new("two").with_id("x"),
                OutMessage::new("one").with_id("x"),
                OutMessage::new("new").with_id("y"),
            ],
        )
        .await?;
    assert_eq!(seqs[1], SeqNumber(0), "conflict slot");
    assert_eq!(seqs[2], a, "duplicate slot");
    assert_eq!(
        seqs[3], seqs[0],
        "a repeat inside the same batch collapses too"
    );
    assert!(seqs[0] > a);
    let slots = mq
        .send_batch_with(
            Q,
            vec![OutMessage::new("two").with_id("x")],
            SendOptions::default(),
        )
        .await?;
    assert_eq!(slots, vec![EnqueueSlot::Conflict]);
    assert_eq!(mq.stats(Q).await?.total, 2);
    Ok(())
}

/// 4.4 Dedup is per queue.
pub async fn p4_4_dedup_is_per_queue<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, windowed(60_000)).await?;
    mq.create_queue("other", windowed(60_000)).await?;
    let a = mq.send(Q, OutMessage::new("one").with_id("x")).await?;
    let b = mq
        .send("other", OutMessage::new("two").with_id("x"))
        .await?;
    assert_ne!(a, b);
    assert_eq!(mq.stats(Q).await?.total, 1);
    assert_eq!(mq.stats("other").await?.total, 1);
    Ok(())
}

/// 4.1–4.3 A repeated id inside one batch collapses into its first occurrence (the same
/// sequence number); the same id with another body in the batch is a conflict slot.
pub async fn p4_1_repeat_inside_one_batch_collapses<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, windowed(60_000)).await?;
    let slots = mq
        .send_batch(
            Q,
            vec![
                OutMessage::new("a").with_id("x"),
                OutMessage::new("b").with_id("y"),
                OutMessage::new("a").with_id("x"),
                OutMessage::new("other").with_id("x"),
                OutMessage::new("same body, no id"),
                OutMessage::new("same body, no id"),
            ],
        )
        .await?;
    assert_eq!(slots[2], slots[0], "a repeat collapses into the first");
    assert_eq!(
        slots[3],
        SeqNumber(0),
        "another body under the id is a conflict"
    );
    assert_eq!(slots[5], slots[4], "no id: the body's digest keys it");
    assert!(slots[0] < slots[1] && slots[1] < slots[4]);
    assert_eq!(mq.stats(Q).await?.total, 3, "three rows stored");
    // The window holds across calls too.
    assert_eq!(
        mq.send(Q, OutMessage::new("a").with_id("x")).await?,
        slots[0]
    );
    Ok(())
}

/// 4.5 A queue that requires message ids refuses a send with an id-less message: the
/// whole batch, InvalidArgument, nothing stored; the setting reads back from the store.
pub async fn p4_5_required_message_id_refuses_idless_sends<F: Access>(ctx: Ctx<F>) -> TckResult {
    let strict = QueueConfig {
        require_message_id: true,
        ..windowed(60_000)
    };
    let mq = ctx.engine_with_queue(Q, strict).await?;
    let listed = mq.list_queues().await?;
    assert!(
        listed
            .iter()
            .any(|q| q.name == Q && q.config.require_message_id)
    );
    let one = mq.send(Q, OutMessage::new("no id")).await;
    assert!(matches!(one, Err(Error::InvalidArgument(_))), "{one:?}");
    let batch = mq
        .send_batch(
            Q,
            vec![
                OutMessage::new("named").with_id("a"),
                OutMessage::new("nameless"),
            ],
        )
        .await;
    assert!(matches!(batch, Err(Error::InvalidArgument(_))), "{batch:?}");
    assert!(peek_all(&mq, Q).await?.is_empty(), "nothing stored");
    mq.send(Q, OutMessage::new("named").with_id("a")).await?;
    assert_eq!(peek_all(&mq, Q).await?.len(), 1);
    Ok(())
}

//! Section 19: a queue's status (pause and resume).

use mqlite_contract::store::Store;
use mqlite_contract::{
    Error, OutMessage, QueueConfig, QueueStatus, ReceiveMode, ReceiveOptions, from_millis,
};
use mqlite_engine::Engine;

use super::{config, parked_receiver, peek_all, send_n};
use crate::harness::{Access, Ctx, TckResult};

const Q: &str = "q";

/// The status `queue` reads back with.
async fn status_of<S: Store>(mq: &Engine<S>, queue: &str) -> mqlite_contract::Result<QueueStatus> {
    let all = mq.list_queues().await?;
    all.into_iter()
        .find(|q| q.name == queue)
        .map(|q| q.config.status)
        .ok_or_else(|| Error::queue_not_found(queue))
}

fn paused(r: &mqlite_contract::Result<impl std::fmt::Debug>, status: QueueStatus) -> bool {
    matches!(r, Err(Error::QueuePaused { queue, status: s }) if queue == Q && *s == status)
}

/// 19.1 A queue paused for sends (send_disabled or disabled) refuses every send — a
/// single one, a batch, one inside the application's transaction — with QueuePaused,
/// and stores nothing; receive_disabled takes sends; a resume takes them again. The
/// status reads back from the store and the rest of the configuration is kept.
pub async fn p19_1_paused_sends_are_refused_and_store_nothing<F: Access>(ctx: Ctx<F>) -> TckResult {
    let cfg = config(45_000, 3);
    let mq = ctx.engine_with_queue(Q, cfg.clone()).await?;
    let before = mq.send(Q, OutMessage::new("before")).await?;
    for status in [QueueStatus::SendDisabled, QueueStatus::Disabled] {
        mq.set_queue_status(Q, status).await?;
        let listed = mq.list_queues().await?;
        let q = listed.iter().find(|q| q.name == Q).ok_or("the queue")?;
        assert_eq!(
            q.config,
            QueueConfig {
                status,
                ..cfg.clone()
            }
        );
        let one = mq.send(Q, OutMessage::new("refused")).await;
        assert!(paused(&one, status), "{one:?}");
        let batch = mq
            .send_batch(Q, vec![OutMessage::new("a"), OutMessage::new("b")])
            .await;
        assert!(paused(&batch, status), "{batch:?}");
        let in_tx = mq
            .tx::<F::Native, _, _>(async |tx| tx.send(Q, OutMessage::new("outbox")).await)
            .await;
        assert!(paused(&in_tx, status), "{in_tx:?}");
        let stored: Vec<_> = peek_all(&mq, Q).await?.iter().map(|m| m.seq).collect();
        assert_eq!(stored, vec![before], "nothing stored while paused");
    }
    mq.set_queue_status(Q, QueueStatus::ReceiveDisabled).await?;
    let taken = mq.send(Q, OutMessage::new("while receives pause")).await?;
    mq.set_queue_status(Q, QueueStatus::Active).await?;
    let after = mq.send(Q, OutMessage::new("after")).await?;
    assert!(before < taken && taken < after);
    assert_eq!(status_of(&mq, Q).await?, QueueStatus::Active);
    Ok(())
}

/// 19.2 A queue paused for receives (receive_disabled or disabled) hands out nothing:
/// a receive in either mode and a receive of deferred messages get nothing and change
/// nothing; a long-poll waits, and the resume hands it the message. Peek and stats see
/// the messages throughout.
pub async fn p19_2_paused_receives_get_nothing_until_resume<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, config(30_000, 10)).await?;
    let seqs = send_n(&mq, Q, "m", 2).await?;
    let set_aside = mq.receive_one(Q).await?.ok_or("a message to defer")?;
    mq.defer(Q, &set_aside).await?;
    for status in [QueueStatus::ReceiveDisabled, QueueStatus::Disabled] {
        mq.set_queue_status(Q, status).await?;
        assert!(mq.receive_one(Q).await?.is_none());
        let deleting = mq
            .receive(
                Q,
                ReceiveOptions {
                    mode: ReceiveMode::ReceiveAndDelete,
                    ..Default::default()
                },
            )
            .await?;
        assert!(deleting.is_empty());
        assert!(
            mq.receive_deferred(Q, &[set_aside.seq]).await?.is_empty(),
            "a deferred message is not handed out either"
        );
        let stats = mq.stats(Q).await?;
        assert_eq!((stats.active, stats.deferred, stats.locked), (1, 1, 0));
        assert_eq!(peek_all(&mq, Q).await?.len(), 2);
    }
    // The manual clock never moves: only the resume can end this wait.
    let waiter = parked_receiver(&mq, Q).await?;
    mq.set_queue_status(Q, QueueStatus::SendDisabled).await?;
    let got = waiter.await??;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].seq, seqs[1]);
    assert_eq!(got[0].delivery_count, 1);
    assert_eq!(mq.receive_deferred(Q, &[set_aside.seq]).await?.len(), 1);
    Ok(())
}

/// 19.3 Leases held across a pause still settle and renew: complete, renew, abandon
/// and dead-letter work on a disabled queue; an abandoned message waits, unhanded,
/// for the resume.
pub async fn p19_3_leases_held_across_a_pause_settle<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, config(30_000, 10)).await?;
    let seqs = send_n(&mq, Q, "m", 3).await?;
    let held = mq
        .receive(
            Q,
            ReceiveOptions {
                max_messages: 3,
                ..Default::default()
            },
        )
        .await?;
    assert_eq!(held.len(), 3);
    mq.set_queue_status(Q, QueueStatus::Disabled).await?;
    ctx.clock.advance(1_000);
    let renewed = mq.renew(Q, &held[0]).await?;
    assert_eq!(renewed, held[0].locked_until_ms + 1_000);
    mq.complete(Q, &held[0]).await?;
    mq.reject(Q, &held[1], "bad input", "while paused").await?;
    mq.abandon(Q, &held[2], std::time::Duration::ZERO).await?;
    assert!(
        mq.receive_one(Q).await?.is_none(),
        "the abandoned one waits"
    );
    let stats = mq.stats(Q).await?;
    assert_eq!((stats.active, stats.dead_lettered, stats.total), (1, 1, 2));
    mq.set_queue_status(Q, QueueStatus::Active).await?;
    let again = mq
        .receive_one(Q)
        .await?
        .ok_or("handed out after the resume")?;
    assert_eq!((again.seq, again.delivery_count), (seqs[2], 2));
    Ok(())
}

/// 19.4 A status is kept by the store across a restart; a subscription's receives can
/// be paused but not its sends; a topic has no status; an unknown queue is NotFound.
pub async fn p19_4_status_survives_restart_and_fits_the_kind<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx
        .engine_with_queue(
            Q,
            QueueConfig {
                lock_duration: from_millis(10_000),
                ..Default::default()
            },
        )
        .await?;
    mq.set_queue_status(Q, QueueStatus::Disabled).await?;
    mq.create_topic("t").await?;
    mq.subscribe("t", "s", "", QueueConfig::default()).await?;
    mq.set_queue_status("s", QueueStatus::ReceiveDisabled)
        .await?;
    for (name, status) in [
        ("s", QueueStatus::SendDisabled),
        ("s", QueueStatus::Disabled),
        ("t", QueueStatus::ReceiveDisabled),
    ] {
        let r = mq.set_queue_status(name, status).await;
        assert!(
            matches!(r, Err(Error::InvalidArgument(_))),
            "{name} {status}: {r:?}"
        );
    }
    let missing = mq.set_queue_status("nope", QueueStatus::Disabled).await;
    assert!(
        matches!(missing, Err(Error::NotFound { .. })),
        "{missing:?}"
    );
    // Publishes still fill a subscription whose receives are paused.
    mq.publish("t", vec![OutMessage::new("fan out")], Default::default())
        .await?;
    assert!(mq.receive_one("s").await?.is_none());
    mq.close().await;

    let mq = ctx.engine().await?;
    assert_eq!(status_of(&mq, Q).await?, QueueStatus::Disabled);
    assert_eq!(status_of(&mq, "s").await?, QueueStatus::ReceiveDisabled);
    let refused = mq.send(Q, OutMessage::new("after restart")).await;
    assert!(paused(&refused, QueueStatus::Disabled), "{refused:?}");
    mq.set_queue_status("s", QueueStatus::Active).await?;
    assert!(mq.receive_one("s").await?.is_some());
    Ok(())
}

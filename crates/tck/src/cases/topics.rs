//! Sections 11 and 12 as far as they are defined today: one namespace for queues,
//! topics and subscriptions, and publish writing one copy per subscription in one
//! transaction. Filters come with the topics work.

use mqlite_engine_core::from_millis;
use mqlite_engine_core::{EnqueueSlot, Error, OutMessage, QueueConfig, QueueKind, SendOptions};

use super::{peek_all, receive_one};
use crate::harness::{Access, Ctx, TckResult};

/// 12.1 Queue, topic and subscription names share one namespace: every cross-kind
/// collision is NameConflict at creation and leaves nothing behind.
pub async fn p12_1_one_namespace_and_a_failed_creation_leaves_nothing<F: Access>(
    ctx: Ctx<F>,
) -> TckResult {
    let mq = ctx
        .engine_with_queue("orders", QueueConfig::default())
        .await?;
    mq.create_topic("events").await?;
    mq.subscribe("events", "audit", "", QueueConfig::default())
        .await?;
    let before = mq.list_queues().await?;
    let conflict = |r: mqlite_engine_core::Result<()>| matches!(r, Err(Error::NameConflict { .. }));
    assert!(
        conflict(mq.create_topic("orders").await),
        "topic over a queue"
    );
    assert!(
        conflict(mq.create_queue("events", QueueConfig::default()).await),
        "queue over a topic"
    );
    assert!(
        conflict(mq.create_queue("audit", QueueConfig::default()).await),
        "queue over a subscription"
    );
    assert!(
        conflict(mq.create_topic("audit").await),
        "topic over a subscription"
    );
    assert!(
        conflict(
            mq.subscribe("events", "orders", "", QueueConfig::default())
                .await
        ),
        "subscription over a queue"
    );
    mq.create_topic("other").await?;
    assert!(
        conflict(
            mq.subscribe("other", "audit", "", QueueConfig::default())
                .await
        ),
        "a subscription's name belongs to its topic"
    );
    let after: Vec<_> = mq
        .list_queues()
        .await?
        .into_iter()
        .filter(|q| q.name != "other")
        .collect();
    assert_eq!(after, before, "the failed creations left nothing behind");
    assert_eq!(mq.list_subscriptions(None).await?.len(), 1);
    let kinds: Vec<_> = after.iter().map(|q| (q.name.as_str(), q.kind)).collect();
    assert_eq!(
        kinds,
        vec![
            ("audit", QueueKind::Subscription),
            ("events", QueueKind::Topic),
            ("orders", QueueKind::Queue)
        ]
    );
    // A topic holds no messages of its own.
    assert!(matches!(
        mq.send("events", OutMessage::new("x")).await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        mq.subscribe("missing", "s", "", QueueConfig::default())
            .await,
        Err(Error::NotFound { .. })
    ));
    Ok(())
}

/// 11.2 (empty filters): a publish writes one copy per subscription, with the
/// subscription queue's own dedup and order, all in one transaction; an unknown topic
/// is NotFound.
pub async fn p11_2_publish_copies_to_every_subscription<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine().await?;
    mq.create_topic("events").await?;
    mq.subscribe("events", "billing", "", QueueConfig::default())
        .await?;
    let dedup = QueueConfig {
        dedup_window: from_millis(60_000),
        ..Default::default()
    };
    mq.subscribe("events", "shipping", "", dedup).await?;
    let batch = vec![
        OutMessage::new("o1").with_id("1"),
        OutMessage::new("o2").with_id("2"),
    ];
    let copies = mq
        .publish("events", batch.clone(), SendOptions::default())
        .await?;
    assert_eq!(
        copies.iter().map(|(s, _)| s.as_str()).collect::<Vec<_>>(),
        vec!["billing", "shipping"]
    );
    for (_, slots) in &copies {
        assert_eq!(slots.len(), 2);
        assert!(slots.iter().all(|s| matches!(s, EnqueueSlot::Enqueued(_))));
    }
    // Publishing again: billing takes new copies, shipping's window collapses them.
    let again = mq.publish("events", batch, SendOptions::default()).await?;
    assert!(
        again[0]
            .1
            .iter()
            .all(|s| matches!(s, EnqueueSlot::Enqueued(_)))
    );
    assert!(
        again[1]
            .1
            .iter()
            .all(|s| matches!(s, EnqueueSlot::Duplicate(_)))
    );
    assert_eq!(peek_all(&mq, "billing").await?.len(), 4);
    assert_eq!(peek_all(&mq, "shipping").await?.len(), 2);
    let m = receive_one(&mq, "shipping").await?;
    assert_eq!(m.body(), b"o1");
    mq.complete("shipping", &m).await?;
    assert!(matches!(
        mq.publish(
            "missing",
            vec![OutMessage::new("x")],
            SendOptions::default()
        )
        .await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        mq.subscribe(
            "events",
            "filtered",
            "subject == 'x'",
            QueueConfig::default()
        )
        .await,
        Err(Error::InvalidArgument(_))
    ));
    Ok(())
}

/// 11.4 (empty filters) Publishing to a topic that routes nowhere is a valid no-op: no
/// error, no copy, nothing stored anywhere.
pub async fn p11_4_publish_that_routes_nowhere_is_a_no_op<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx
        .engine_with_queue("orders", QueueConfig::default())
        .await?;
    mq.create_topic("events").await?;
    let copies = mq
        .publish(
            "events",
            vec![OutMessage::new("nobody")],
            SendOptions::default(),
        )
        .await?;
    assert!(copies.is_empty(), "no subscription: no copy");
    assert!(
        peek_all(&mq, "orders").await?.is_empty(),
        "nothing stored elsewhere"
    );
    let names: Vec<_> = mq
        .list_queues()
        .await?
        .into_iter()
        .map(|q| q.name)
        .collect();
    assert_eq!(names, vec!["events", "orders"]);
    Ok(())
}

//! Sections 11 and 12: one namespace for queues, topics and subscriptions; publish
//! writing a copy to every subscription whose filter holds, in one transaction; filters
//! checked at Subscribe and failing closed; Send resolving a topic first.

use mqlite_contract::{
    EnqueueSlot, Error, OutMessage, QueueConfig, QueueKind, SendOptions, from_millis,
};

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
    let conflict = |r: mqlite_contract::Result<()>| matches!(r, Err(Error::NameConflict { .. }));
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
    // A topic holds no messages of its own: a send to it publishes (12.2).
    let seq = mq.send("events", OutMessage::new("x")).await?;
    assert!(seq.0 > 0);
    assert_eq!(peek_all(&mq, "audit").await?.len(), 1);
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
        mq.subscribe("events", "filtered", "subject ==", QueueConfig::default())
            .await,
        Err(Error::InvalidArgument(_))
    ));
    Ok(())
}

fn payment(amount: i64, kind: &str) -> OutMessage {
    OutMessage {
        subject: Some(format!("payment.{kind}")),
        content_type: Some("application/json".into()),
        ..OutMessage::new(format!(r#"{{"amount":{amount},"currency":"EUR"}}"#))
    }
    .with_property("region", if amount > 100 { "eu" } else { "us" })
}

fn bodies(messages: &[mqlite_contract::Message]) -> Vec<String> {
    messages
        .iter()
        .map(|m| String::from_utf8_lossy(m.body()).into_owned())
        .collect()
}

/// 11.1 Subscribe compiles and checks a filter: malformed, unknown names, non-boolean
/// results, over-long or over-deep text and unbounded constructs are InvalidArgument
/// and store nothing; a valid filter is stored and listed as written; an update
/// replaces it.
pub async fn p11_1_filters_are_checked_at_subscribe<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine().await?;
    mq.create_topic("payments").await?;
    let before = mq.list_queues().await?;
    let deep = format!("{}true{}", "(".repeat(40), ")".repeat(40));
    let long = format!("subject == \"{}\"", "x".repeat(3000));
    for bad in [
        "subject ==",
        "subject startsWith",
        "amount > 100",
        "subject",
        "body_size + 1",
        "properties",
        "len(subject_parts) > (1..100000)[0]",
        "repeat(subject, 1000000) == ''",
        deep.as_str(),
        long.as_str(),
    ] {
        let r = mq
            .subscribe("payments", "s", bad, QueueConfig::default())
            .await;
        assert!(
            matches!(r, Err(Error::InvalidArgument(_))),
            "{bad:?} must be refused, got {r:?}"
        );
    }
    assert_eq!(
        mq.list_queues().await?,
        before,
        "a refused filter stored nothing"
    );
    assert!(mq.list_subscriptions(None).await?.is_empty());
    mq.subscribe(
        "payments",
        "big",
        "  body_json.amount > 100  ",
        QueueConfig::default(),
    )
    .await?;
    let subs = mq.list_subscriptions(Some("payments")).await?;
    assert_eq!(subs.len(), 1);
    assert_eq!(subs[0].filter, "body_json.amount > 100");
    // An update replaces the filter.
    mq.subscribe(
        "payments",
        "big",
        r#"subject startsWith "payment.""#,
        QueueConfig::default(),
    )
    .await?;
    let subs = mq.list_subscriptions(Some("payments")).await?;
    assert_eq!(subs[0].filter, r#"subject startsWith "payment.""#);
    mq.publish("payments", vec![payment(5, "card")], SendOptions::default())
        .await?;
    assert_eq!(
        peek_all(&mq, "big").await?.len(),
        1,
        "the new filter routes"
    );
    Ok(())
}

/// 11.2 Publishing routes one copy to every subscription whose filter holds, seeing the
/// message's fields, properties and body; the empty filter takes everything.
pub async fn p11_2_publish_routes_by_filter<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine().await?;
    mq.create_topic("payments").await?;
    for (name, filter) in [
        ("all", ""),
        ("large", "body_json.amount > 100"),
        ("cards", r#"subject startsWith "payment.card""#),
        ("eu", r#"properties.region == "eu""#),
        ("text", r#"body_text contains "EUR" && body_size < 100"#),
        ("none", r#"subject_parts[0] == "refund""#),
    ] {
        mq.subscribe("payments", name, filter, QueueConfig::default())
            .await?;
    }
    let batch = vec![
        payment(50, "card"),
        payment(500, "card"),
        payment(700, "wire"),
        payment(10, "wire"),
    ];
    let copies = mq
        .publish("payments", batch, SendOptions::default())
        .await?;
    let routed: Vec<(&str, usize)> = copies.iter().map(|(s, v)| (s.as_str(), v.len())).collect();
    assert_eq!(
        routed,
        vec![
            ("all", 4),
            ("cards", 2),
            ("eu", 2),
            ("large", 2),
            ("text", 4)
        ]
    );
    let amounts = |v: Vec<String>| -> Vec<String> {
        v.into_iter()
            .map(|b| {
                b.split(',')
                    .next()
                    .unwrap_or("")
                    .replace(r#"{"amount":"#, "")
            })
            .collect()
    };
    assert_eq!(
        amounts(bodies(&peek_all(&mq, "all").await?)),
        ["50", "500", "700", "10"]
    );
    assert_eq!(
        amounts(bodies(&peek_all(&mq, "large").await?)),
        ["500", "700"]
    );
    assert_eq!(
        amounts(bodies(&peek_all(&mq, "cards").await?)),
        ["50", "500"]
    );
    assert_eq!(amounts(bodies(&peek_all(&mq, "eu").await?)), ["500", "700"]);
    assert!(peek_all(&mq, "none").await?.is_empty());
    // Each copy is its queue's own message: settled there, independently.
    let m = receive_one(&mq, "large").await?;
    mq.complete("large", &m).await?;
    assert_eq!(peek_all(&mq, "all").await?.len(), 4);
    Ok(())
}

/// 11.3 Evaluation fails closed: a filter that fails on a message routes that message
/// nowhere, routes the others, leaves the other subscriptions alone, and the engine
/// goes on serving.
pub async fn p11_3_filter_evaluation_fails_closed<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine().await?;
    mq.create_topic("t").await?;
    // int("abc") fails at run time; body_json.n > 1 fails on a string n.
    mq.subscribe(
        "t",
        "numeric",
        "int(properties.n) > 1",
        QueueConfig::default(),
    )
    .await?;
    mq.subscribe("t", "json", "body_json.n > 1", QueueConfig::default())
        .await?;
    mq.subscribe("t", "all", "", QueueConfig::default()).await?;
    let batch = vec![
        OutMessage::new(r#"{"n":5}"#).with_property("n", "5"),
        OutMessage::new(r#"{"n":"five"}"#).with_property("n", "five"),
        OutMessage::new(r#"{"n":7}"#).with_property("n", "7"),
    ];
    let copies = mq.publish("t", batch, SendOptions::default()).await?;
    let routed: Vec<(&str, usize)> = copies.iter().map(|(s, v)| (s.as_str(), v.len())).collect();
    assert_eq!(routed, vec![("all", 3), ("json", 2), ("numeric", 2)]);
    assert_eq!(
        bodies(&peek_all(&mq, "numeric").await?),
        [r#"{"n":5}"#, r#"{"n":7}"#]
    );
    // The engine still serves.
    let m = receive_one(&mq, "all").await?;
    mq.complete("all", &m).await?;
    mq.send("t", OutMessage::new(r#"{"n":9}"#).with_property("n", "9"))
        .await?;
    assert_eq!(peek_all(&mq, "numeric").await?.len(), 3);
    Ok(())
}

/// 11.4 A publish that no subscription's filter accepts is a valid no-op: no copy,
/// nothing stored, and a send to the topic reports sequence number 0.
pub async fn p11_4_a_publish_no_filter_accepts_is_a_no_op<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine().await?;
    mq.create_topic("t").await?;
    mq.subscribe(
        "t",
        "refunds",
        r#"subject == "refund""#,
        QueueConfig::default(),
    )
    .await?;
    mq.subscribe("t", "never", "false", QueueConfig::default())
        .await?;
    let copies = mq
        .publish("t", vec![payment(1, "card")], SendOptions::default())
        .await?;
    assert!(copies.is_empty());
    let slots = mq
        .send_batch_with("t", vec![payment(2, "card")], SendOptions::default())
        .await?;
    assert_eq!(slots, vec![EnqueueSlot::Unrouted]);
    assert_eq!(mq.send("t", payment(3, "card")).await?.0, 0);
    assert!(peek_all(&mq, "refunds").await?.is_empty());
    assert!(peek_all(&mq, "never").await?.is_empty());
    Ok(())
}

/// 12.2 Send resolves a name as a topic first, then as a queue (a subscription's
/// backing queue included), and otherwise fails with NotFound.
pub async fn p12_2_send_resolves_topic_then_queue<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx
        .engine_with_queue("orders", QueueConfig::default())
        .await?;
    mq.create_topic("events").await?;
    mq.subscribe("events", "audit", "", QueueConfig::default())
        .await?;
    mq.subscribe("events", "big", "body_size > 3", QueueConfig::default())
        .await?;
    // The topic: published, one copy per matching subscription.
    let slots = mq
        .send_batch_with(
            "events",
            vec![OutMessage::new("ab"), OutMessage::new("abcdef")],
            SendOptions::default(),
        )
        .await?;
    assert!(slots.iter().all(|s| matches!(s, EnqueueSlot::Enqueued(_))));
    assert_eq!(peek_all(&mq, "audit").await?.len(), 2);
    assert_eq!(bodies(&peek_all(&mq, "big").await?), ["abcdef"]);
    // A queue, and a subscription's backing queue: stored there directly.
    mq.send("orders", OutMessage::new("o")).await?;
    assert_eq!(peek_all(&mq, "orders").await?.len(), 1);
    mq.send("audit", OutMessage::new("direct")).await?;
    assert_eq!(peek_all(&mq, "audit").await?.len(), 3);
    assert_eq!(peek_all(&mq, "big").await?.len(), 1);
    // Neither.
    assert!(matches!(
        mq.send("missing", OutMessage::new("x")).await,
        Err(Error::NotFound { .. })
    ));
    // A deleted topic is no longer resolved as one.
    assert!(mq.delete_queue("events").await?);
    assert!(matches!(
        mq.send("events", OutMessage::new("x")).await,
        Err(Error::NotFound { .. })
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

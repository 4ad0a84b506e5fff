//! Section 17: event identity, the consumer inbox and the relay (the outbox/inbox lab).
//! The consumer's database here is the case's own store; the lab tests in
//! `crates/mqlite/tests/lab.rs` put producer, queue and consumer in three files.

use std::time::Duration;

use mqlite_contract::{
    Error, EventIdentity, MessageState, OutMessage, QueueConfig, ReceiveOptions, StoreTx,
};
use mqlite_engine::inbox::{Inbox, Processed, REASON_INBOX_CONFLICT, settle};
use mqlite_engine::{Engine, relay::Relay};

use super::peek_all;
use crate::harness::{Access, Ctx, TckResult};

const Q: &str = "orders";

fn deduped() -> QueueConfig {
    QueueConfig {
        dedup_window: Duration::from_secs(3600),
        ..Default::default()
    }
}

fn event(id: &str, body: &str) -> OutMessage {
    let mut m = OutMessage::new(body.to_owned()).with_event(
        EventIdentity::new("https://shop.example/orders", id)
            .with_type("order.created")
            .with_time("2026-11-30T10:00:00Z"),
    );
    m.content_type = Some("application/json".into());
    m
}

fn inbox<F: Access>(mq: &Engine<F::Store>) -> Inbox<F::Store, F::Native> {
    Inbox::new(mq.clone())
}

async fn business_rows<F: Access>(mq: &Engine<F::Store>) -> mqlite_contract::Result<Vec<i64>> {
    mq.tx::<F::Native, _, _>(async |tx| F::business_rows(tx.native()).await)
        .await
}

/// 17.1 An event's identity is (source, id); a transport attempt never changes it: a
/// redelivery, a dead letter, a sender's repeat and a relay's repeat after a crash
/// between send and mark all carry the identity as sent, and the queue collapses the
/// repeats into one message (4.1). The relay refuses a queue without a dedup window.
pub async fn p17_1_identity_survives_every_transport_attempt<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, deduped()).await?;
    let sent = event("evt-1", r#"{"total":7}"#);
    // As sent, with the CloudEvents version the send fills in.
    let mut want = sent.event.clone();
    if let Some(e) = want.as_mut() {
        e.specversion = Some("1.0".into());
    }
    let seq = mq.send(Q, sent.clone()).await?;

    // Redelivery: the attempt changes (delivery count, token), the identity does not.
    let first = mq.receive_one(Q).await?.expect("delivered");
    assert_eq!(first.content.event, want);
    mq.abandon(Q, &first, Duration::ZERO).await?;
    let second = mq.receive_one(Q).await?.expect("redelivered");
    assert_eq!((second.seq, second.delivery_count), (seq, 2));
    assert_eq!(second.content.event, want);
    // The sender's repeat collapses into the original.
    assert_eq!(mq.send(Q, sent.clone()).await?, seq);
    // A dead letter keeps it.
    mq.reject(Q, &second, "poison", "").await?;
    let dead = peek_all(&mq, Q).await?;
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].state, MessageState::DeadLettered);
    assert_eq!(dead[0].content.event, want);

    // The relay: the intent commits with the producer's row; a crash between send and
    // mark repeats the send, and the queue absorbs it.
    mq.create_queue("shipments", deduped()).await?;
    mq.tx::<F::Native, _, _>(async |tx| {
        F::insert_business_row(tx.native(), 1).await?;
        tx.relay("shipments", event("evt-2", r#"{"ship":1}"#)).await
    })
    .await?;
    let relay: Relay<F::Store, F::Store, F::Native> = Relay::new(mq.clone(), mq.clone());
    assert_eq!(relay.backlog().await?.pending, 1);
    let status = mq.status().await?.relay;
    assert_eq!(
        (status.pending, status.oldest_created_at_ms),
        (1, Some(ctx.clock.now())),
        "status shows the stuck intent"
    );
    let sent_once = relay.send_pending().await?;
    assert_eq!(sent_once.accepted.len(), 1);
    // ... the relay dies here, before the mark; its successor sends again.
    let round = relay.run_once().await?;
    assert_eq!((round.published, round.repeats), (1, 1));
    assert_eq!(relay.backlog().await?.pending, 0);
    assert_eq!(mq.status().await?.relay.pending, 0);
    // Published intents stay for the trace until their retention passes.
    let relay = relay.retention(Duration::from_secs(60));
    assert_eq!(relay.sweep().await?, 0);
    ctx.clock.advance(60_001);
    assert_eq!(relay.sweep().await?, 1);
    let found = mq
        .tx::<F::Native, _, _>(async |tx| {
            tx.native()
                .relay_find("https://shop.example/orders", "evt-2")
                .await
        })
        .await?;
    assert!(found.is_empty(), "swept: {found:?}");
    let shipped = peek_all(&mq, "shipments").await?;
    assert_eq!(shipped.len(), 1, "two sends, one message");
    assert_eq!(
        shipped[0].content.event.as_ref().map(|e| e.id.as_str()),
        Some("evt-2")
    );

    // Without a dedup window a repeat would be a second message: refused, saying why.
    mq.create_queue("plain", QueueConfig::default()).await?;
    mq.tx::<F::Native, _, _>(async |tx| tx.relay("plain", event("evt-3", "{}")).await)
        .await?;
    let refused = relay.run_once().await;
    assert!(
        matches!(&refused, Err(Error::InvalidArgument(why)) if why.contains("dedup window")),
        "{refused:?}"
    );
    assert!(peek_all(&mq, "plain").await?.is_empty());
    Ok(())
}

/// 17.1 The relay keeps each identity's one delivery: what a target accepted is marked
/// even when a later send of the round fails (so it is not sent again), the failing
/// intent and those after it wait in order, and an intent the queue refuses as a
/// conflict (its identity there with another payload) is marked refused, sent no more
/// and counted for an operator, instead of blocking the intents behind it.
pub async fn p17_1_the_relay_marks_what_it_sent_and_refuses_conflicts<F: Access>(
    ctx: Ctx<F>,
) -> TckResult {
    let mq = ctx.engine_with_queue(Q, deduped()).await?;
    mq.send(Q, event("evt-1", r#"{"total":7}"#)).await?;
    mq.tx::<F::Native, _, _>(async |tx| {
        tx.relay(Q, event("evt-1", r#"{"total":9}"#)).await?;
        tx.relay(Q, event("evt-2", "{}")).await?;
        tx.relay("missing", event("evt-3", "{}")).await?;
        tx.relay(Q, event("evt-4", "{}")).await
    })
    .await?;
    let relay: Relay<F::Store, F::Store, F::Native> = Relay::new(mq.clone(), mq.clone());
    let round = relay.run_once().await;
    assert!(matches!(round, Err(Error::NotFound { .. })), "{round:?}");
    let backlog = relay.backlog().await?;
    assert_eq!(
        (backlog.pending, backlog.refused),
        (2, 1),
        "evt-2 marked, evt-1 refused; evt-3 and evt-4 wait"
    );
    mq.create_queue("missing", deduped()).await?;
    let round = relay.run_once().await?;
    assert_eq!((round.published, round.repeats, round.conflicts), (2, 0, 0));
    let bodies: Vec<_> = peek_all(&mq, Q)
        .await?
        .into_iter()
        .map(|m| m.content.event.map(|e| e.id))
        .collect();
    assert_eq!(
        bodies,
        [
            Some("evt-1".into()),
            Some("evt-2".into()),
            Some("evt-4".into())
        ],
        "each once, evt-2 not sent again"
    );
    let refused = mq
        .tx::<F::Native, _, _>(async |tx| {
            tx.native()
                .relay_find("https://shop.example/orders", "evt-1")
                .await
        })
        .await?;
    assert!(refused[0].refused_at_ms.is_some() && refused[0].published_at_ms.is_none());
    let backlog = relay.backlog().await?;
    assert_eq!((backlog.pending, backlog.refused), (0, 1));
    Ok(())
}

/// 17.2 The inbox marker is scoped by consumer: two consumers of one event each apply
/// it once, and each one's repeat is a duplicate.
pub async fn p17_2_each_consumer_applies_once<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, deduped()).await?;
    mq.send(Q, event("evt-1", r#"{"total":7}"#)).await?;
    let m = mq.receive_one(Q).await?.expect("delivered");
    let inbox = inbox::<F>(&mq);
    let mut applied = Vec::new();
    for (consumer, row) in [
        ("projection-v1", 1),
        ("projection-v2", 2),
        ("projection-v1", 3),
    ] {
        let outcome = inbox
            .process(consumer, &m, async move |tx| {
                F::insert_business_row(tx.native(), row).await
            })
            .await?;
        applied.push(matches!(outcome, Processed::Applied(())));
    }
    assert_eq!(applied, [true, true, false]);
    assert_eq!(business_rows::<F>(&mq).await?, vec![1, 2]);
    let markers = inbox
        .markers("https://shop.example/orders", "evt-1")
        .await?;
    let consumers: Vec<_> = markers.iter().map(|m| m.consumer.as_str()).collect();
    assert_eq!(consumers, ["projection-v1", "projection-v2"]);

    // Retention bounds what Duplicate can detect: past it the markers are swept, and a
    // repeat is applied again (the documented limit, not a silent one).
    let inbox = inbox.retention(Duration::from_secs(60));
    ctx.clock.advance(59_999);
    assert_eq!(inbox.sweep().await?.markers, 0, "not yet");
    ctx.clock.advance(2);
    assert_eq!(inbox.sweep().await?.markers, 2);
    let outcome = inbox
        .process("projection-v1", &m, async |tx| {
            F::insert_business_row(tx.native(), 4).await
        })
        .await?;
    assert_eq!(outcome, Processed::Applied(()));
    Ok(())
}

/// 17.3 The marker commits in the same transaction as the consumer's effect: a failure
/// after the marker rolls both back and a later attempt applies; a repeat after the
/// commit reports Duplicate and applies nothing.
pub async fn p17_3_marker_commits_with_the_effect<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, deduped()).await?;
    mq.send(Q, event("evt-1", r#"{"total":7}"#)).await?;
    let m = mq.receive_one(Q).await?.expect("delivered");
    let inbox = inbox::<F>(&mq);

    let failed = inbox
        .process("projection", &m, async |tx| {
            F::insert_business_row(tx.native(), 1).await?;
            Err::<(), _>(Error::invalid("the projection's write failed"))
        })
        .await;
    assert!(matches!(failed, Err(Error::InvalidArgument(_))));
    assert!(business_rows::<F>(&mq).await?.is_empty(), "no effect");
    assert!(
        inbox
            .markers("https://shop.example/orders", "evt-1")
            .await?
            .is_empty(),
        "no marker"
    );

    let outcome = inbox
        .process("projection", &m, async |tx| {
            F::insert_business_row(tx.native(), 7).await
        })
        .await?;
    assert_eq!(outcome, Processed::Applied(()));
    // The same delivery again, and a redelivery: applied nothing.
    let again = inbox
        .process("projection", &m, async |tx| {
            F::insert_business_row(tx.native(), 8).await
        })
        .await?;
    assert!(matches!(again, Processed::Duplicate(ref mk) if mk.consumer == "projection"));
    mq.abandon(Q, &m, Duration::ZERO).await?;
    let redelivered = mq.receive_one(Q).await?.expect("redelivered");
    let again = inbox
        .process("projection", &redelivered, async |tx| {
            F::insert_business_row(tx.native(), 9).await
        })
        .await?;
    assert!(matches!(again, Processed::Duplicate(_)));
    settle(&mq, Q, &redelivered, &again).await?;
    assert_eq!(business_rows::<F>(&mq).await?, vec![7], "one application");
    assert!(
        peek_all(&mq, Q).await?.is_empty(),
        "the duplicate is completed"
    );

    // A message without an identity is refused before anything runs.
    mq.send(Q, OutMessage::new("anonymous")).await?;
    let anonymous = mq
        .receive(Q, ReceiveOptions::default())
        .await?
        .pop()
        .expect("delivered");
    let refused = inbox
        .process("projection", &anonymous, async |tx| {
            F::insert_business_row(tx.native(), 10).await
        })
        .await;
    assert!(matches!(refused, Err(Error::InvalidArgument(_))));
    assert_eq!(business_rows::<F>(&mq).await?, vec![7]);
    Ok(())
}

/// 17.4 The same identity with a different payload fingerprint is Conflict, never a
/// silent correction: nothing is applied and the delivery is dead-lettered with the
/// reason.
pub async fn p17_4_same_identity_other_payload_is_conflict<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, deduped()).await?;
    mq.create_queue("late", deduped()).await?;
    mq.send(Q, event("evt-1", r#"{"total":7}"#)).await?;
    // The same identity with another payload, through another queue (this one's
    // dedup window would refuse it as a conflict already, 4.2).
    mq.send("late", event("evt-1", r#"{"total":9}"#)).await?;
    let inbox = inbox::<F>(&mq);

    let m = mq.receive_one(Q).await?.expect("delivered");
    let first = inbox
        .process("projection", &m, async |tx| {
            F::insert_business_row(tx.native(), 7).await
        })
        .await?;
    settle(&mq, Q, &m, &first).await?;

    let other = mq.receive_one("late").await?.expect("delivered");
    let outcome = inbox
        .process("projection", &other, async |tx| {
            F::insert_business_row(tx.native(), 9).await
        })
        .await?;
    let Processed::Conflict { applied, incoming } = &outcome else {
        panic!("expected a conflict, got {outcome:?}");
    };
    assert_ne!(applied.fingerprint, *incoming);
    settle(&mq, "late", &other, &outcome).await?;
    assert_eq!(business_rows::<F>(&mq).await?, vec![7], "nothing corrected");
    let dead = peek_all(&mq, "late").await?;
    assert_eq!(dead[0].state, MessageState::DeadLettered);
    assert_eq!(
        dead[0].dead_letter_reason.as_deref(),
        Some(REASON_INBOX_CONFLICT)
    );
    // The queue's own dedup window refuses the other payload at the door (4.2).
    let refused = mq.send(Q, event("evt-1", r#"{"total":9}"#)).await;
    assert!(matches!(refused, Err(Error::DedupConflict { .. })));
    Ok(())
}

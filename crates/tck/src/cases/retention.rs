//! Section 8: dead-letter retention.

use mqlite_contract::{
    MessageState, OutMessage, QueueConfig, RetentionDefaults, Store, from_millis,
};
use mqlite_engine::{Engine, EngineOptions};
use std::time::Duration;

use super::{peek_all, receive_one};
use crate::harness::{Access, Ctx, TckResult};

async fn dead_letter<S: Store>(
    mq: &Engine<S>,
    queue: &str,
    body: &str,
) -> mqlite_contract::Result<mqlite_contract::SeqNumber> {
    let seq = mq.send(queue, OutMessage::new(body)).await?;
    loop {
        let m = receive_one(mq, queue).await?;
        if m.seq == seq {
            mq.reject(queue, &m, "Test", "").await?;
            return Ok(seq);
        }
        mq.abandon(queue, &m, Duration::ZERO).await?;
    }
}

fn dead_seqs(all: &[mqlite_contract::Message]) -> Vec<mqlite_contract::SeqNumber> {
    all.iter()
        .filter(|m| m.state == MessageState::DeadLettered)
        .map(|m| m.seq)
        .collect()
}

/// 8.1 With a bound set (age, count, bytes), the sweep drops the oldest dead letters
/// first and touches nothing but dead letters.
pub async fn p8_1_retention_drops_oldest_dead_letters_only<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine().await?;
    let bounded = |age, count, bytes| QueueConfig {
        dlq_max_age_ms: age,
        dlq_max_count: count,
        dlq_max_bytes: bytes,
        ..Default::default()
    };
    mq.create_queue("count", bounded(0, 2, 0)).await?;
    mq.create_queue("age", bounded(10_000, 0, 0)).await?;
    mq.create_queue("bytes", bounded(0, 0, 10)).await?;
    let mut counted = Vec::new();
    for i in 0..4 {
        counted.push(dead_letter(&mq, "count", &format!("c{i}")).await?);
        ctx.clock.advance(1_000);
    }
    let live = mq.send("count", OutMessage::new("live")).await?;
    let old = dead_letter(&mq, "age", "old").await?;
    ctx.clock.advance(6_000);
    let young = dead_letter(&mq, "age", "young").await?;
    let b1 = dead_letter(&mq, "bytes", "12345").await?;
    ctx.clock.advance(1);
    let b2 = dead_letter(&mq, "bytes", "123456").await?;
    ctx.clock.advance(1);
    let b3 = dead_letter(&mq, "bytes", "1234").await?;
    ctx.clock.advance(4_000);
    let report = mq.run_sweeps().await?;
    let count_left = peek_all(&mq, "count").await?;
    assert_eq!(
        dead_seqs(&count_left),
        counted[2..].to_vec(),
        "the oldest went first"
    );
    assert!(
        count_left.iter().any(|m| m.seq == live),
        "live messages untouched"
    );
    assert_eq!(
        dead_seqs(&peek_all(&mq, "age").await?),
        vec![young],
        "{old} aged out"
    );
    assert_eq!(
        dead_seqs(&peek_all(&mq, "bytes").await?),
        vec![b2, b3],
        "{b1}, the oldest, dropped until the rest fit in 10 bytes"
    );
    assert_eq!(report.retention_dropped, 2 + 1 + 1);
    Ok(())
}

/// 8.2 With no bound (the default) nothing is auto-deleted.
pub async fn p8_2_no_bound_keeps_every_dead_letter<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue("q", QueueConfig::default()).await?;
    for i in 0..5 {
        dead_letter(&mq, "q", &format!("d{i}")).await?;
    }
    ctx.clock.advance(365 * 24 * 3_600_000);
    let report = mq.run_sweeps().await?;
    assert_eq!(report.retention_dropped, 0);
    assert_eq!(mq.stats("q").await?.dead_lettered, 5);
    Ok(())
}

/// 8.3 A queue's bound resolves against the engine default: 0 inherits, > 0 overrides,
/// < 0 is explicitly unbounded.
pub async fn p8_3_queue_bound_resolves_against_engine_default<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx
        .engine_with(EngineOptions {
            background: false,
            retention: RetentionDefaults {
                max_age: from_millis(0),
                max_count: 1,
                max_bytes: 0,
            },
            ..Default::default()
        })
        .await?;
    let with_count = |n| QueueConfig {
        dlq_max_count: n,
        ..Default::default()
    };
    mq.create_queue("inherit", with_count(0)).await?;
    mq.create_queue("override", with_count(3)).await?;
    mq.create_queue("unbounded", with_count(-1)).await?;
    for q in ["inherit", "override", "unbounded"] {
        for i in 0..4 {
            dead_letter(&mq, q, &format!("{q}{i}")).await?;
        }
    }
    mq.run_sweeps().await?;
    assert_eq!(mq.stats("inherit").await?.dead_lettered, 1);
    assert_eq!(mq.stats("override").await?.dead_lettered, 3);
    assert_eq!(mq.stats("unbounded").await?.dead_lettered, 4);
    Ok(())
}

//! Section 20: message priorities.

use mqlite_contract::{
    Error, Message, OrderingMode, OutMessage, QueueConfig, ReceiveMode, ReceiveOptions,
    RedriveOptions,
};

use super::peek_all;
use crate::harness::{Access, Ctx, TckResult};

const Q: &str = "q";

fn at(body: &str, priority: u8) -> OutMessage {
    OutMessage::new(body).with_priority(priority)
}

fn queue(mode: OrderingMode) -> QueueConfig {
    QueueConfig {
        ordering_mode: mode,
        max_delivery_count: 1,
        ..Default::default()
    }
}

fn bodies(got: &[Message]) -> Vec<String> {
    got.iter()
        .map(|m| String::from_utf8_lossy(&m.content.body).into_owned())
        .collect()
}

fn batch(n: u32, mode: ReceiveMode) -> ReceiveOptions {
    ReceiveOptions {
        max_messages: n,
        mode,
        ..Default::default()
    }
}

/// 20.1 On a standard queue the highest priority is handed out first and, within one
/// priority, the oldest: one at a time, in a batch (which comes back in that order) and
/// in receive-and-delete alike.
pub async fn p20_1_higher_priority_first_oldest_within<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx
        .engine_with_queue(Q, queue(OrderingMode::Standard))
        .await?;
    let send_all = async || -> mqlite_contract::Result<()> {
        mq.send(Q, at("a0", 0)).await?;
        mq.send_batch(Q, vec![at("b5", 5), at("c0", 0), at("d9", 9)])
            .await?;
        mq.send(Q, at("e5", 5)).await?;
        Ok(())
    };
    let order = ["d9", "b5", "e5", "a0", "c0"];
    send_all().await?;
    let mut one_by_one = Vec::new();
    while let Some(m) = mq.receive_one(Q).await? {
        one_by_one.push(m);
    }
    assert_eq!(bodies(&one_by_one), order);
    for m in &one_by_one {
        mq.complete(Q, m).await?;
    }
    for mode in [ReceiveMode::PeekLock, ReceiveMode::ReceiveAndDelete] {
        send_all().await?;
        let got = mq.receive(Q, batch(5, mode)).await?;
        assert_eq!(bodies(&got), order, "{mode:?}");
        if mode == ReceiveMode::PeekLock {
            let locks: Vec<_> = got.iter().map(mqlite_contract::LockRef::from).collect();
            mq.complete_batch(Q, &locks).await?;
        }
    }
    // A batch smaller than the backlog takes the front of that order.
    send_all().await?;
    let front = mq.receive(Q, batch(2, ReceiveMode::PeekLock)).await?;
    assert_eq!(bodies(&front), ["d9", "b5"]);
    Ok(())
}

/// 20.2 Inside an ordering line sequence order rules: a later member of higher
/// priority waits for its line's head, and the head competes with other heads (and
/// ungrouped messages) by its own priority. A strict_fifo queue (one line) hands out in
/// sequence order whatever the priorities.
pub async fn p20_2_a_line_keeps_sequence_order<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine().await?;
    for mode in [OrderingMode::Standard, OrderingMode::GroupFifo] {
        let name = format!("lines-{mode}");
        mq.create_queue(&name, queue(mode)).await?;
        mq.send(&name, at("a0", 0).with_group("A")).await?;
        mq.send(&name, at("a9", 9).with_group("A")).await?;
        mq.send(&name, at("b5", 5).with_group("B")).await?;
        let mut order = Vec::new();
        while let Some(m) = mq.receive_one(&name).await? {
            order.push(m);
        }
        // b5 leads (its head's priority beats a0's); a9 waits behind a0, its head.
        assert_eq!(bodies(&order), ["b5", "a0"], "{mode}");
        let a0 = order.iter().find(|m| m.content.body == b"a0").ok_or("a0")?;
        mq.complete(&name, a0).await?;
        let next = mq.receive_one(&name).await?.ok_or("a9 after its head")?;
        assert_eq!(next.content.body, b"a9");
    }
    mq.create_queue("strict", queue(OrderingMode::StrictFifo))
        .await?;
    mq.send_batch("strict", vec![at("s0", 0), at("s9", 9), at("s5", 5)])
        .await?;
    let mut order = Vec::new();
    while let Some(m) = mq.receive_one("strict").await? {
        mq.complete("strict", &m).await?;
        order.push(m);
    }
    assert_eq!(bodies(&order), ["s0", "s9", "s5"]);
    Ok(())
}

/// 20.3 A priority travels with its message — peek, receive, a replayed receive attempt,
/// a dead letter and its redrive (which again takes precedence), a publish's copies — and
/// one above 9 is InvalidArgument for the whole send, which stores nothing.
pub async fn p20_3_priority_travels_and_is_bounded<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx
        .engine_with_queue(Q, queue(OrderingMode::Standard))
        .await?;
    for refused in [
        mq.send(Q, at("too high", 10)).await.map(|_| ()),
        mq.send_batch(Q, vec![at("fine", 1), at("too high", 255)])
            .await
            .map(|_| ()),
    ] {
        assert!(
            matches!(refused, Err(Error::InvalidArgument(_))),
            "{refused:?}"
        );
    }
    assert!(peek_all(&mq, Q).await?.is_empty(), "nothing stored");

    // An older message of priority 0 stays behind the urgent one throughout.
    let plain = mq.send(Q, OutMessage::new("plain")).await?;
    let urgent = mq.send(Q, at("urgent", 7)).await?;
    let stored = peek_all(&mq, Q).await?;
    assert_eq!(
        stored
            .iter()
            .map(|m| (m.seq, m.content.priority))
            .collect::<Vec<_>>(),
        [(plain, 0), (urgent, 7)]
    );
    let attempt = ReceiveOptions {
        attempt_id: Some("a1".into()),
        ..Default::default()
    };
    let got = mq.receive(Q, attempt.clone()).await?;
    let replayed = mq.receive(Q, attempt).await?;
    assert_eq!(got, replayed);
    assert_eq!((got[0].seq, got[0].content.priority), (urgent, 7));
    mq.reject(Q, &got[0], "later", "").await?;
    let dead = peek_all(&mq, Q).await?;
    assert_eq!((dead[1].seq, dead[1].content.priority), (urgent, 7));
    // Redriven, it goes ahead of the older message of priority 0 again.
    assert_eq!(mq.redrive(Q, RedriveOptions::all()).await?, 1);
    let first = mq.receive_one(Q).await?.ok_or("a message")?;
    assert_eq!((first.seq, first.content.priority), (urgent, 7));

    mq.create_topic("t").await?;
    mq.subscribe("t", "s", "", QueueConfig::default()).await?;
    mq.publish("t", vec![at("fan out", 3)], Default::default())
        .await?;
    let copy = mq.receive_one("s").await?.ok_or("the copy")?;
    assert_eq!(copy.content.priority, 3);
    Ok(())
}

/// 20.4 The claim's work does not grow with a backlog spread over every priority: the
/// store's work counter reads the same for a claim over 1,000 and over 100,000 messages
/// of priorities 0 ..= 9 (the plan pins of the SQL stores hold its seeks). Stores that
/// cannot count skip it.
pub async fn p20_4_claim_work_is_flat_across_priorities<F: Access>(ctx: Ctx<F>) -> TckResult {
    use mqlite_contract::Store;
    let mut visits = Vec::new();
    for (round, backlog) in [1_000usize, 100_000].into_iter().enumerate() {
        let mq = ctx.engine().await?;
        let q = format!("q{round}");
        mq.create_queue(&q, queue(OrderingMode::Standard)).await?;
        for chunk in (0..backlog).step_by(1_000) {
            let batch = (chunk..(chunk + 1_000).min(backlog))
                .map(|i| at(&format!("m{i}"), (i % 10) as u8))
                .collect();
            mq.send_batch(&q, batch).await?;
        }
        let before = mq
            .store()
            .work()
            .ok_or("the store claims a work counter but reports none")?;
        let got = mq.receive(&q, batch(1, ReceiveMode::PeekLock)).await?;
        let spent = mq.store().work().unwrap_or_default() - before;
        // The oldest of the highest priority: message 9.
        assert_eq!(got[0].content.body, b"m9");
        visits.push(spent.visits);
        mq.close().await;
    }
    super::assert_flat(&visits, "over 1,000 vs 100,000");
    Ok(())
}

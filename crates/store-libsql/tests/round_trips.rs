//! Round trips per operation do not grow with the batch size: each request to the
//! server is counted by `LibsqlStore::statements_sent`, at N = 1 and 64 for a send, a
//! receive (peek-lock and receive-and-delete), a renew and a complete. BEGIN and the
//! epoch check go with the first statement, COMMIT with the last; an operation of one
//! statement is one request (BEGIN, the epoch guard, the statement, COMMIT). The counts
//! are printed; docs/libsql.md records them. A queue's row is read once and then known
//! to its owner, until a flow changes a queue. A receive of one, whose one request asks
//! for every column of the row (`CLAIM_ONE_OWNED_ALL`), answers each field of the
//! message as it was sent. A send of one right after a send of one goes at the number
//! the owner learnt from the first (no read of the next number); any other request between
//! the two makes the second read it, and no number is ever handed out twice (G1).

mod support;

use std::time::Duration;

use libtest_mimic::Arguments;

use mqlite_contract::{
    LockRef, ManualClock, OrderingMode, OutMessage, QueueConfig, ReceiveMode, ReceiveOptions,
};
use mqlite_engine::Engine;
use mqlite_store_libsql::LibsqlStore;
use mqlite_testbed::libsql::Sqld;
use support::{Outcome, trial};

fn main() {
    let args = Arguments::from_args();
    let trials = vec![
        trial(
            "round_trips::per_operation_do_not_grow_with_batch_size",
            |d| Box::pin(flat(d)),
        ),
        trial("round_trips::a_changed_queue_is_read_again", |d| {
            Box::pin(changed(d))
        }),
        trial(
            "round_trips::a_receive_of_one_answers_every_field_of_the_message",
            |d| Box::pin(every_field(d)),
        ),
        trial(
            "round_trips::a_send_of_one_after_a_send_of_one_goes_at_the_number_known",
            |d| {
                Box::pin(a_send_of_one_after_a_send_of_one_goes_at_the_number_known(
                    d,
                ))
            },
        ),
    ];
    libtest_mimic::run(&args, trials).exit();
}

/// The statements (round trips) `op` sent.
async fn sent<T>(mq: &Engine<LibsqlStore>, op: impl Future<Output = T>) -> (u64, T) {
    let before = mq.store().statements_sent();
    let out = op.await;
    (mq.store().statements_sent() - before, out)
}

/// `what` took the expected round trips at N = 1 and at N = 64.
fn check(what: &str, (one, many): (u64, u64), expected: (u64, u64)) -> Outcome {
    println!("{what}: round trips at N = 1: {one}, at N = 64: {many}");
    if (one, many) != expected {
        return Err(format!(
            "{what} took {one} round trips at N = 1 and {many} at N = 64, not {} and {}",
            expected.0, expected.1
        )
        .into());
    }
    Ok(())
}

async fn flat(dir: tempfile::TempDir) -> Outcome {
    let server = Sqld::start(&dir.path().join("sqld"))?;
    let clock = ManualClock::new(1_700_000_000_000).shared();
    // A long lease: no renewal lands inside a measurement.
    let mq = support::engine(server.url(), clock, Duration::from_secs(600)).await?;
    mq.create_queue("q", QueueConfig::default()).await?;
    let strict = QueueConfig {
        ordering_mode: OrderingMode::StrictFifo,
        ..Default::default()
    };
    mq.create_queue("line", strict).await?;

    let batch = |tag: &str, n: usize| -> Vec<OutMessage> {
        (0..n)
            .map(|i| OutMessage::new(format!("{tag}-{i}")))
            .collect()
    };
    // The first operation on a queue reads its row (create_queue made the owner forget
    // every row): BEGIN, the epoch check and that read, then the insert with COMMIT.
    let (first, _) = sent(&mq, mq.send_batch("q", batch("a", 1))).await;
    check("the first send", (first, first), (2, 2))?;
    // A send of one to a known queue is one request: its insert takes the next number
    // itself. A send of 64 reads the number first, then inserts with COMMIT.
    let (one, _) = sent(&mq, mq.send_batch("q", batch("a", 1))).await;
    let (many, _) = sent(&mq, mq.send_batch("q", batch("b", 64))).await;
    check("send_batch", (one, many), (1, 2))?;
    mq.send_batch("q", batch("c", 64)).await?;

    // A receive of one is one statement (the pick inside the lock), so one request; of
    // 64, the pick and then the lock with COMMIT.
    let (one, a) = sent(&mq, mq.receive("q", ReceiveOptions::batch(1))).await;
    let (many, b) = sent(&mq, mq.receive("q", ReceiveOptions::batch(64))).await;
    let (a, b) = (a?, b?);
    if (a.len(), b.len()) != (1, 64) {
        return Err(format!("received {} and {}", a.len(), b.len()).into());
    }
    check("receive (peek-lock)", (one, many), (1, 2))?;

    let a: Vec<LockRef> = a.iter().map(LockRef::from).collect();
    let b: Vec<LockRef> = b.iter().map(LockRef::from).collect();
    let (one, _) = sent(&mq, mq.renew_batch("q", &a)).await;
    let (many, _) = sent(&mq, mq.renew_batch("q", &b)).await;
    // The renewal, a check that every lock was renewed, and COMMIT: one request (a lost
    // item's reason would be read before the commit, the usual way).
    check("renew_batch", (one, many), (1, 1))?;
    // The receipts, the check that every lock completes, the fenced delete and COMMIT:
    // one request.
    let (one, _) = sent(&mq, mq.complete_batch("q", &a)).await;
    let (many, r) = sent(&mq, mq.complete_batch("q", &b)).await;
    if !r?.iter().all(|r| r.ok) {
        return Err("a complete of the batch failed".into());
    }
    check("complete_batch", (one, many), (1, 1))?;
    // A single completion takes the same way.
    mq.send_batch("q", batch("e", 1)).await?;
    let m = mq.receive_one("q").await?.ok_or("a message to complete")?;
    let (single, done) = sent(&mq, mq.complete("q", &m)).await;
    done?;
    check("complete", (single, single), (1, 1))?;
    // A batch with a lock that no longer holds goes the usual way after the refused
    // check: the request, its rollback, then a transaction of its own with the delete,
    // the receipts and the look for replays and reasons.
    mq.send_batch("q", batch("d", 2)).await?;
    let got = mq.receive("q", ReceiveOptions::batch(2)).await?;
    let locks: Vec<LockRef> = got.iter().map(LockRef::from).collect();
    mq.complete_batch("q", &locks[1..]).await?;
    let (mixed, r) = sent(&mq, mq.complete_batch("q", &locks)).await;
    let oks: Vec<bool> = r?.iter().map(|r| r.ok).collect();
    // The second one was completed before: its receipt replays it (3.2).
    if oks != [true, true] {
        return Err(format!("a batch with an earlier completion answered {oks:?}").into());
    }
    println!("complete_batch with a completed lock: {mixed} round trips");
    if mixed > 6 {
        return Err(format!("{mixed} round trips for a batch going the usual way").into());
    }

    // On a FIFO queue every message is in a line: a completion goes the usual way at
    // once (the opening with the delete, the release of the line's next head, the
    // receipt with COMMIT), without first trying the one-request form.
    mq.send_batch("line", batch("k", 1)).await?;
    let m = mq
        .receive_one("line")
        .await?
        .ok_or("a message of the line")?;
    let (fifo, done) = sent(&mq, mq.complete("line", &m)).await;
    done?;
    check("complete on a FIFO queue", (fifo, fifo), (3, 3))?;

    mq.send_batch("line", batch("l", 65)).await?;
    let delete = |n: u32| ReceiveOptions {
        max_messages: n,
        mode: ReceiveMode::ReceiveAndDelete,
        ..Default::default()
    };
    let (one, _) = sent(&mq, mq.receive("line", delete(1))).await;
    let (many, got) = sent(&mq, mq.receive("line", delete(64))).await;
    if got?.len() != 64 {
        return Err("receive-and-delete took less than the line".into());
    }
    check("receive (receive-and-delete)", (one, many), (one, one))?;

    // A receive of one carries the owner's check inside its claim, which fails for a
    // deposed owner whether or not the queue holds a message: a receive from an empty
    // queue is one request too. (The first receive reads the new queue's row.)
    mq.create_queue("none", QueueConfig::default()).await?;
    mq.receive_one("none").await?;
    let (empty, got) = sent(&mq, mq.receive_one("none")).await;
    if got?.is_some() {
        return Err("a message from an empty queue".into());
    }
    check("receive of one from an empty queue", (empty, empty), (1, 1))?;
    mq.close().await;
    Ok(())
}

/// The owner remembers a queue's row, and forgets it when a flow changes a queue: an
/// update's new lock duration applies to the next claim, and a deleted queue refuses the
/// next receive.
async fn changed(dir: tempfile::TempDir) -> Outcome {
    let server = Sqld::start(&dir.path().join("sqld"))?;
    let clock = ManualClock::new(1_700_000_000_000);
    let mq = support::engine(server.url(), clock.shared(), Duration::from_secs(600)).await?;
    let lock = |s: u64| QueueConfig {
        lock_duration: Duration::from_secs(s),
        ..Default::default()
    };
    mq.create_queue("q", lock(30)).await?;
    mq.send_batch("q", vec![OutMessage::new("a"), OutMessage::new("b")])
        .await?;
    let got = mq.receive("q", ReceiveOptions::batch(1)).await?;
    if got[0].locked_until_ms != clock.now() + 30_000 {
        return Err("the first lease is not the queue's 30 s".into());
    }
    // Only the update comes between this claim and the last: a claim that used the row
    // it knew would lease for 30 s.
    mq.update_queue("q", lock(90)).await?;
    let got = mq.receive("q", ReceiveOptions::batch(1)).await?;
    if got[0].locked_until_ms != clock.now() + 90_000 {
        return Err(format!(
            "after the update the lease ends at +{} ms, not +90 s: the old row was used",
            got[0].locked_until_ms - clock.now()
        )
        .into());
    }
    mq.delete_queue("q").await?;
    match mq.receive("q", ReceiveOptions::batch(1)).await {
        Err(mqlite_contract::Error::NotFound { kind: "queue", .. }) => {}
        other => return Err(format!("a receive from the deleted queue gave {other:?}").into()),
    }
    mq.close().await;
    Ok(())
}

async fn every_field(dir: tempfile::TempDir) -> Outcome {
    let server = Sqld::start(&dir.path().join("sqld"))?;
    let clock = ManualClock::new(1_700_000_000_000);
    let mq = support::engine(server.url(), clock.shared(), Duration::from_secs(600)).await?;
    mq.create_queue(
        "q",
        QueueConfig {
            default_ttl: Duration::from_secs(3_600),
            ..Default::default()
        },
    )
    .await?;
    let mut out = OutMessage::new(vec![7u8; 300]);
    out.message_id = Some("the id".into());
    out.subject = Some("a subject".into());
    out.correlation_id = Some("a correlation".into());
    out.reply_to = Some("a reply-to".into());
    out.content_type = Some("text/plain".into());
    out.properties.insert("k".into(), "v".into());
    out.priority = 3;
    let seq = mq.send("q", out.clone()).await?;
    let (trips, got) = sent(&mq, mq.receive_one("q")).await;
    let got = got?.ok_or("the message")?;
    if trips != 1 {
        return Err(format!("the receive took {trips} requests").into());
    }
    let now = clock.now();
    let expected = (seq, 1, now, now + 3_600_000, now, now + 30_000);
    let found = (
        got.seq,
        got.delivery_count,
        got.enqueued_at_ms,
        got.expires_at_ms,
        got.visible_at_ms,
        got.locked_until_ms,
    );
    if found != expected || got.content != out || got.lock_token.is_none() {
        return Err(format!("received {got:?}, sent {out:?} under {seq:?}").into());
    }
    mq.complete("q", &got).await?;
    mq.close().await;
    Ok(())
}

/// A send of one message of only a body right after another goes at the number the
/// owner learnt from the first's answer; any other request between them (a receive, a
/// completion that deletes the largest number, a batch, an application's transaction)
/// makes the next send read the number on the server. Every number is above every
/// number handed out before it (G1), and the sends at a number known are counted.
async fn a_send_of_one_after_a_send_of_one_goes_at_the_number_known(
    dir: tempfile::TempDir,
) -> Outcome {
    let server = Sqld::start(&dir.path().join("sqld"))?;
    let clock = ManualClock::new(1_700_000_000_000).shared();
    let mq = support::engine(server.url(), clock, Duration::from_secs(600)).await?;
    mq.create_queue("q", QueueConfig::default()).await?;
    mq.create_queue("r", QueueConfig::default()).await?;
    let store = mq.store();
    // Every number handed out, in the order of the sends.
    let mut numbers = Vec::new();
    // Each queue's first send reads its row, so its insert is not the opening request.
    send(&mq, &mut numbers, "r", "r-first").await?;
    send(&mq, &mut numbers, "q", "q-first").await?;
    let at = |n: u64| -> Outcome {
        let used = store.sends_at_known_number();
        if used != n {
            return Err(format!("{used} sends went at a number known, not {n}").into());
        }
        Ok(())
    };
    at(0)?;
    // Learnt from the send before: each goes at the number after, to either queue.
    let b = send(&mq, &mut numbers, "q", "b").await?;
    let c = send(&mq, &mut numbers, "r", "c").await?;
    let d = send(&mq, &mut numbers, "q", "d").await?;
    at(2)?;
    if (c, d) != (b + 1, b + 2) {
        return Err(format!("numbers {b}, {c}, {d} in a row").into());
    }
    // A receive and the completion of every message, the largest number among them:
    // the next send reads the number (the floor keeps it above `d`), the one after
    // goes at the number known again.
    for queue in ["q", "r"] {
        let got = mq.receive(queue, ReceiveOptions::batch(10)).await?;
        let locks: Vec<LockRef> = got.iter().map(LockRef::from).collect();
        mq.complete_batch(queue, &locks).await?;
    }
    let e = send(&mq, &mut numbers, "q", "e").await?;
    at(2)?;
    let f = send(&mq, &mut numbers, "q", "f").await?;
    at(3)?;
    if e <= d || f != e + 1 {
        return Err(format!("after {d} deleted: {e}, then {f}").into());
    }
    // A batch takes numbers the owner does not learn: the next send reads the number.
    let batch = mq
        .send_batch("q", vec![OutMessage::new("g1"), OutMessage::new("g2")])
        .await?;
    numbers.extend(batch.iter().map(|s| s.0));
    let h = send(&mq, &mut numbers, "q", "h").await?;
    at(3)?;
    // So does an application's transaction that sends.
    let in_tx = mq
        .tx(async |tx| tx.send("q", OutMessage::new("i")).await)
        .await?
        .0;
    numbers.push(in_tx);
    let j = send(&mq, &mut numbers, "q", "j").await?;
    at(3)?;
    let k = send(&mq, &mut numbers, "q", "k").await?;
    at(4)?;
    // A message with a header goes in the full form, at the next number read; it does
    // not teach the owner the number.
    let mut headed = OutMessage::new("l");
    headed.subject = Some("headed".into());
    let l = mq.send("q", headed).await?.0;
    numbers.push(l);
    let m = send(&mq, &mut numbers, "q", "m").await?;
    at(4)?;
    if !(h > f && in_tx > h && j > in_tx && k == j + 1 && l > k && m > l) {
        return Err(format!("numbers {numbers:?}").into());
    }
    // Never one number twice, and each above every number before it.
    if numbers.windows(2).any(|w| w[1] <= w[0]) {
        return Err(format!("numbers out of order or repeated: {numbers:?}").into());
    }
    let stored = mq
        .peek("q", mqlite_contract::PeekOptions::default())
        .await?;
    let bodies: Vec<&[u8]> = stored.iter().map(|m| m.body()).collect();
    let expected: Vec<&[u8]> = vec![b"e", b"f", b"g1", b"g2", b"h", b"i", b"j", b"k", b"l", b"m"];
    if bodies != expected {
        return Err(format!("stored {} bodies, not the ten sent", bodies.len()).into());
    }
    Ok(())
}

/// Sends one message of only a body, noting its number.
async fn send(
    mq: &Engine<LibsqlStore>,
    numbers: &mut Vec<i64>,
    queue: &str,
    body: &str,
) -> Result<i64, Box<dyn std::error::Error>> {
    let seq = mq.send(queue, OutMessage::new(body)).await?.0;
    numbers.push(seq);
    Ok(seq)
}

//! Every operation costs a fixed number of statements, whatever its batch size
//! (promise 1.6, and the reason a remote store can be fast at all: each statement is a
//! round trip there). The store counts the statements it runs (`Store::work`); this
//! test reads the count around receive at N = 1, 64 and 256 (peek-lock and
//! receive-and-delete), around send at N = 1, 64, 300 and 1,000, and around
//! complete_batch and renew_batch at N = 1, 64 and 512, and fails if the count grows
//! with N — and if the work inside the statements (SQLite VM steps) grows faster than N.

use mqlite_contract::{
    LockRef, LockToken, ManualClock, OrderingMode, OutMessage, QueueConfig, ReceiveMode,
    ReceiveOptions, Store, from_millis,
};
use mqlite_engine::Engine;
use mqlite_store_sqlite::SqliteStore;

use crate::support;

async fn engine(dir: &tempfile::TempDir) -> Engine<SqliteStore> {
    let path = dir.path().join("mq.db").to_string_lossy().into_owned();
    support::engine_at(&path, ManualClock::new(1_700_000_000_000).shared()).await
}

/// An engine over `dir` with the queue "q" (default settings) holding `n` messages
/// `m0`, `m1`, ….
async fn queue_of(dir: &tempfile::TempDir, n: usize) -> Engine<SqliteStore> {
    let mq = engine(dir).await;
    mq.create_queue("q", QueueConfig::default())
        .await
        .expect("queue");
    let batch = (0..n).map(|i| OutMessage::new(format!("m{i}"))).collect();
    mq.send_batch("q", batch).await.expect("send");
    mq
}

/// Statements the store ran during `op`.
async fn statements<T>(mq: &Engine<SqliteStore>, op: impl Future<Output = T>) -> (u64, T) {
    let ((count, _), out) = work(mq, op).await;
    (count, out)
}

/// Statements and SQLite VM steps (the work inside them) the store ran during `op`.
async fn work<T>(mq: &Engine<SqliteStore>, op: impl Future<Output = T>) -> ((u64, u64), T) {
    let before = mq.store().work().expect("the SQLite store counts");
    let out = op.await;
    let after = mq.store().work().expect("the SQLite store counts");
    (
        (
            after.statements - before.statements,
            after.visits - before.visits,
        ),
        out,
    )
}

/// The VM steps per item at the largest N are at most twice those at the middle N: the
/// work inside the statements grows with the batch linearly, not faster (a correlated
/// subquery over the batch's items once made a complete_batch of N cost N² steps).
fn assert_linear(what: &str, steps: &[(usize, u64)]) {
    println!("{what}: (N, VM steps) = {steps:?}");
    let per_item = |(n, s): (usize, u64)| s as f64 / n as f64;
    let (mid, last) = (per_item(steps[1]), per_item(steps[steps.len() - 1]));
    assert!(
        last <= 2.0 * mid,
        "{what}: VM steps per item grow with N ({mid:.0} at {}, {last:.0} at {}): {steps:?}",
        steps[1].0,
        steps[steps.len() - 1].0
    );
}

/// A message in its own group with an id: every step of a send is exercised (dedup
/// lookup and insert, busy lines, the insert).
fn message(i: usize) -> OutMessage {
    OutMessage::new(format!("body-{i}"))
        .with_id(format!("id-{i}"))
        .with_group(format!("g{}", i % 7))
}

/// The count at every N is at most the count at the smallest N (a step that only some
/// items need, such as promoting a line's next head, may be skipped), give or take
/// `slack` statements that only a batch of more than one spends, and small.
fn assert_flat(what: &str, counts: &[(usize, u64)], slack: u64) {
    println!("{what}: (N, statements) = {counts:?}");
    let first = counts[0].1;
    assert!(
        counts.iter().all(|(_, c)| *c <= first + slack),
        "{what}: statements per operation grow with N: {counts:?}"
    );
    assert!(
        first <= 8,
        "{what}: {first} statements is not a small fixed number"
    );
}

#[tokio::test]
async fn statements_per_operation_do_not_grow_with_batch_size() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mq = engine(&dir).await;
    let config = QueueConfig {
        dedup_window: from_millis(60_000),
        ..Default::default()
    };
    mq.create_queue("q", config).await.expect("queue");

    let mut sends = Vec::new();
    let mut send_steps = Vec::new();
    let mut next = 0usize;
    // 300 is not a size of the multi-row insert: its spare rows are bound and left out.
    for n in [1usize, 64, 300, 1000] {
        let batch = (next..next + n).map(message).collect();
        next += n;
        let ((count, steps), seqs) = work(&mq, mq.send_batch("q", batch)).await;
        assert_eq!(seqs.expect("send").len(), n);
        sends.push((n, count));
        send_steps.push((n, steps));
    }
    assert_flat("send_batch", &sends, 0);
    assert_linear("send_batch", &send_steps);

    // Ungrouped messages so that a claim can take N at once.
    for round in 0..3 {
        // Distinct bodies: the queue's dedup window keys id-less messages by body.
        let batch = (0..300)
            .map(|i| OutMessage::new(format!("free-{round}-{i}")))
            .collect();
        mq.send_batch("q", batch).await.expect("backlog");
    }
    let mut receives = Vec::new();
    let mut receive_steps = Vec::new();
    let mut held = Vec::new();
    for n in [1u32, 64, 256] {
        let ((count, steps), got) = work(&mq, mq.receive("q", ReceiveOptions::batch(n))).await;
        let got = got.expect("receive");
        assert_eq!(got.len(), n as usize);
        receives.push((n as usize, count));
        receive_steps.push((n as usize, steps));
        held.push(got);
    }
    // One message is one statement (the pick inside the lock); a batch picks, then locks.
    assert_eq!(receives[0].1, 1, "a receive of one message: {receives:?}");
    assert_flat("receive (peek-lock)", &receives[1..], 0);
    assert_linear("receive (peek-lock)", &receive_steps);

    let mut renews = Vec::new();
    let mut completes = Vec::new();
    let (mut renew_steps, mut complete_steps) = (Vec::new(), Vec::new());
    // 1, 64 and 256 held; a batch of 512 renews and completes two receives' worth.
    let more = mq
        .receive("q", ReceiveOptions::batch(256))
        .await
        .expect("more");
    let all: Vec<LockRef> = held
        .iter()
        .flatten()
        .chain(&more)
        .map(LockRef::from)
        .collect();
    for (n, locks) in [(1, &all[..1]), (64, &all[1..65]), (512, &all[65..577])] {
        let ((count, steps), r) = work(&mq, mq.renew_batch("q", locks)).await;
        assert!(r.expect("renew").iter().all(|r| r.ok));
        renews.push((n, count));
        renew_steps.push((n, steps));
        let ((count, steps), r) = work(&mq, mq.complete_batch("q", locks)).await;
        assert!(r.expect("complete").iter().all(|r| r.ok));
        completes.push((n, count));
        complete_steps.push((n, steps));
    }
    assert_flat("renew_batch", &renews, 0);
    // A batch of several locks on a queue without FIFO lines first tries its delete in a
    // savepoint (`settle::AT_ONCE`). The batch of 64 holds the heads of the seven lines
    // among messages in none: the delete takes the others, is taken back and released
    // (three statements), and the usual way follows.
    assert_flat("complete_batch", &completes, 3);
    assert_linear("renew_batch", &renew_steps);
    assert_linear("complete_batch", &complete_steps);
    mq.close().await;
}

/// Receive-and-delete drains a FIFO line in order, and still at a fixed cost.
#[tokio::test]
async fn receive_and_delete_does_not_grow_with_batch_size() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mq = engine(&dir).await;
    let strict = QueueConfig {
        ordering_mode: OrderingMode::StrictFifo,
        ..Default::default()
    };
    mq.create_queue("line", strict).await.expect("queue");
    let batch = (0..400).map(|i| OutMessage::new(format!("m{i}"))).collect();
    mq.send_batch("line", batch).await.expect("send");
    let mut counts = Vec::new();
    let mut last = None;
    for n in [1u32, 64, 256] {
        let options = ReceiveOptions {
            max_messages: n,
            mode: ReceiveMode::ReceiveAndDelete,
            ..Default::default()
        };
        let (count, got) = statements(&mq, mq.receive("line", options)).await;
        let got = got.expect("receive");
        assert_eq!(got.len(), n as usize, "the whole line, in one batch");
        for m in &got {
            assert!(last < Some(m.seq), "in order");
            last = Some(m.seq);
        }
        counts.push((n as usize, count));
    }
    assert_flat("receive (receive-and-delete)", &counts, 0);
    mq.close().await;
}

/// A complete_batch past the locks a statement binds by position (1,024) takes the JSON
/// form: still the same statements, every item completed, a stale item failing alone.
#[tokio::test]
async fn a_complete_batch_past_the_bound_pairs_keeps_its_cost_and_its_items() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mq = engine(&dir).await;
    mq.create_queue("q", QueueConfig::default())
        .await
        .expect("queue");
    for _ in 0..3 {
        let batch = (0..1000)
            .map(|i| OutMessage::new(format!("m{i}")))
            .collect();
        mq.send_batch("q", batch).await.expect("send");
    }
    let mut locks = Vec::new();
    while locks.len() < 3000 {
        let got = mq
            .receive("q", ReceiveOptions::batch(256))
            .await
            .expect("receive");
        locks.extend(got.iter().map(LockRef::from));
    }
    let (small, rest) = locks.split_at(100);
    let (count_small, r) = statements(&mq, mq.complete_batch("q", small)).await;
    assert!(r.expect("complete 100").iter().all(|r| r.ok));
    // A live message's number under a token never issued: it fails alone, beside the
    // same message under its own token (2.8).
    let forged = LockRef {
        seq: rest[0].seq,
        token: LockToken::random_batch(1)[0],
    };
    let mut big = vec![forged];
    big.extend_from_slice(&rest[..2000]);
    let (count_big, r) = statements(&mq, mq.complete_batch("q", &big)).await;
    let r = r.expect("complete 2,001");
    assert!(!r[0].ok, "a forged token completes nothing");
    assert!(r[1..].iter().all(|r| r.ok), "every live lock completes");
    assert!(
        count_big <= count_small + 2,
        "{count_big} statements for 2,001 items, {count_small} for 100 (a stale item adds its lookups)"
    );
    let left = mq.stats("q").await.expect("stats");
    assert_eq!(left.locked, 3000 - 100 - 2000);
    mq.close().await;
}

/// A completion whose every lock is live and in no line is the delete of the locks in no
/// line, in a savepoint kept when it took them all, then the receipts from the locks
/// given, one entry per page of 32 sequence numbers: four statements, two of them the
/// savepoint's. With one stale lock among them the delete is taken back and the batch
/// goes the usual way: the live locks complete and replay as before, the stale one fails
/// alone (2.7, 3.2).
#[tokio::test]
async fn a_completion_counts_its_locks_with_the_receipts_and_a_stale_one_goes_the_usual_way() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mq = queue_of(&dir, 8).await;
    let got = mq
        .receive("q", ReceiveOptions::batch(8))
        .await
        .expect("receive");
    let locks: Vec<LockRef> = got.iter().map(LockRef::from).collect();

    let (all_live, r) = statements(&mq, mq.complete_batch("q", &locks[..3])).await;
    assert!(r.expect("complete").iter().all(|r| r.ok));
    assert_eq!(
        all_live, 4,
        "the savepoint, the delete, the savepoint's release, the receipts"
    );

    let forged = LockRef {
        seq: locks[4].seq,
        token: LockToken::random_batch(1)[0],
    };
    let mixed = [locks[3], forged, locks[5]];
    let (usual, r) = statements(&mq, mq.complete_batch("q", &mixed)).await;
    let r = r.expect("complete");
    assert_eq!(
        r.iter().map(|r| r.ok).collect::<Vec<_>>(),
        [true, false, true],
        "the forged token fails alone"
    );
    assert_eq!(
        usual, 8,
        "the savepoint, the delete in no line, taken back and released, then the usual \
         way: the delete, the receipts, the replays' lookup, the stale lock's state"
    );
    // Both ways left receipts: each batch replays as it was answered.
    for (again, want) in [
        (&locks[..3], vec![true; 3]),
        (&mixed[..], vec![true, false, true]),
    ] {
        let r = mq.complete_batch("q", again).await.expect("replay");
        assert_eq!(r.iter().map(|r| r.ok).collect::<Vec<_>>(), want);
    }
    let left = mq.stats("q").await.expect("stats");
    assert_eq!(
        left.locked, 3,
        "the forged token's message and two untouched"
    );
    assert_eq!(left.total, 3);
    mq.close().await;
    // One receipt entry per completion (the eight messages share a page), keyed by its
    // first lock and holding every completed lock's 24 bytes, of the same form whichever
    // way completed the lock.
    let file = rusqlite::Connection::open(dir.path().join("mq.db")).expect("open");
    let entries: Vec<(i64, String, String, String, Vec<u8>)> = file
        .prepare("SELECT seq, lock_token, op, args, items FROM mqlite_receipts")
        .expect("prepare")
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .expect("receipts")
        .collect::<Result<_, _>>()
        .expect("rows");
    assert_eq!(entries.len(), 2, "one entry per completion: {entries:?}");
    let mut receipts: Vec<(i64, String, String, String)> = Vec::new();
    for (seq, token, op, args, items) in entries {
        assert_eq!(items.len() % 24, 0, "24 bytes a lock");
        let first = (
            i64::from_be_bytes(items[..8].try_into().expect("8 bytes")),
            LockToken::from_u128(u128::from_be_bytes(items[8..24].try_into().expect("16"))),
        );
        assert_eq!(
            (first.0, first.1.to_string()),
            (seq, token),
            "keyed by its first lock"
        );
        for item in items.chunks(24) {
            let seq = i64::from_be_bytes(item[..8].try_into().expect("8 bytes"));
            let token = u128::from_be_bytes(item[8..].try_into().expect("16 bytes"));
            receipts.push((
                seq,
                LockToken::from_u128(token).to_string(),
                op.clone(),
                args.clone(),
            ));
        }
    }
    let mut want: Vec<_> = [locks[0], locks[1], locks[2], locks[3], locks[5]]
        .iter()
        .map(|l| {
            (
                l.seq.0,
                l.token.to_string(),
                "complete".to_owned(),
                String::new(),
            )
        })
        .collect();
    receipts.sort();
    want.sort();
    assert_eq!(receipts, want);
    let expiries: i64 = file
        .query_row(
            "SELECT count(DISTINCT expires_at) FROM mqlite_receipts",
            [],
            |r| r.get(0),
        )
        .expect("expiries");
    assert_eq!(
        expiries, 1,
        "the manual clock never moved: one expiry for both ways"
    );
}

/// The store is its file's one writer, so a receive or a settlement on a queue whose row
/// a committed transaction read skips that read: one statement fewer each. A change of
/// the queue is seen by the very next call, which reads the row again.
#[tokio::test]
async fn a_known_queue_is_not_read_again_until_it_changes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mq = queue_of(&dir, 3).await;
    let (send, seq) = statements(&mq, mq.send("q", OutMessage::new("m3"))).await;
    assert_eq!(
        send, 1,
        "a single send to a known queue: the insert takes its own number"
    );
    assert!(seq.expect("send").0 > 3, "after the batch's numbers");

    let one = ReceiveOptions::batch(1);
    let (first, got) = statements(&mq, mq.receive("q", one.clone())).await;
    let held = got.expect("receive");
    let (second, got) = statements(&mq, mq.receive("q", one.clone())).await;
    let held2 = got.expect("receive");
    assert_eq!(
        (first, second),
        (1, 1),
        "the pick inside the lock: the send's read of the queue's row serves them"
    );
    let (settle, r) = statements(&mq, mq.complete_batch("q", &[LockRef::from(&held[0])])).await;
    assert!(r.expect("complete")[0].ok);
    assert_eq!(settle, 2, "the completion and its receipt, no queue read");

    // A longer lease: the next receive reads the row again and locks for the new time.
    let longer = QueueConfig {
        lock_duration: from_millis(600_000),
        ..Default::default()
    };
    mq.update_queue("q", longer).await.expect("update");
    let (after, got) = statements(&mq, mq.receive("q", one.clone())).await;
    let m = &got.expect("receive")[0];
    assert_eq!(after, 2, "the changed row is read again");
    assert_eq!(
        m.locked_until_ms - held2[0].locked_until_ms,
        600_000 - QueueConfig::default().lock_duration.as_millis() as i64,
        "the new lock duration holds at once"
    );
    mq.close().await;
}

/// A settlement finds its rows by sequence number, whatever else is in flight: its work
/// with 2,000 other leases held is what it is with none (the fence's terms would match
/// the lease index, whose walk grows with the leases held).
#[tokio::test]
async fn a_settlement_does_not_walk_the_leases_in_flight() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mq = engine(&dir).await;
    mq.create_queue("q", QueueConfig::default())
        .await
        .expect("queue");
    for round in 0..3 {
        let batch = (0..700)
            .map(|i| OutMessage::new(format!("m{round}-{i}")))
            .collect();
        mq.send_batch("q", batch).await.expect("send");
    }
    let one = ReceiveOptions::batch(1);
    let settle_one = async || {
        let got = mq.receive("q", one.clone()).await.expect("receive");
        let lock = [LockRef::from(&got[0])];
        let ((_, renew), r) = work(&mq, mq.renew_batch("q", &lock)).await;
        assert!(r.expect("renew")[0].ok);
        let ((_, complete), r) = work(&mq, mq.complete_batch("q", &lock)).await;
        assert!(r.expect("complete")[0].ok);
        (renew, complete)
    };
    let alone = settle_one().await;
    let mut held = 0;
    while held < 2000 {
        held += mq
            .receive("q", ReceiveOptions::batch(250))
            .await
            .expect("hold")
            .len();
    }
    let crowded = settle_one().await;
    println!("(renew, complete) VM steps: alone {alone:?}, beside 2,000 leases {crowded:?}");
    assert!(
        crowded.0 <= 2 * alone.0 && crowded.1 <= 2 * alone.1,
        "a settlement's work grew with the leases in flight: alone {alone:?}, beside 2,000 {crowded:?}"
    );
    mq.close().await;
}

/// A WAL commit writes every page it dirtied, so pages per operation are its cost on
/// disk: a receive of one message dirties the row's page, the claimable index and the
/// lease index; its completion the row's page, the lease index and the receipt's page.
/// Fifty of each, counted as frames appended to the WAL (4 KiB pages, a 24-byte header
/// each), stay within eight frames per message (6.5 now; 8.5 with a locked row also in
/// `mqlite_msg_rest`, as before `mqlite-rs/12`). The count is an upper bound: a
/// checkpoint in between would only make it smaller.
#[tokio::test]
async fn a_receive_and_its_completion_dirty_a_handful_of_pages() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mq = engine(&dir).await;
    mq.create_queue("q", QueueConfig::default())
        .await
        .expect("queue");
    let batch = (0..60)
        .map(|i| OutMessage::new(vec![i as u8; 256]))
        .collect();
    mq.send_batch("q", batch).await.expect("send");
    let wal = dir.path().join("mq.db-wal");
    let size = || std::fs::metadata(&wal).map_or(0, |m| m.len());
    let before = size();
    const ROUNDS: u64 = 50;
    for _ in 0..ROUNDS {
        let m = mq.receive_one("q").await.expect("receive").expect("one");
        mq.complete("q", &m).await.expect("complete");
    }
    let frames = (size() - before) / (4096 + 24);
    println!("{frames} WAL frames for {ROUNDS} receives and completions");
    assert!(
        frames <= 8 * ROUNDS,
        "{frames} WAL frames for {ROUNDS} receives and completions: more pages per message"
    );
    mq.close().await;
}

/// A completion of one live lock in no line is two statements, and the message is looked
/// up once: the fenced delete, then the receipt from the lock given (3.2). A wrong token
/// deletes nothing and goes the usual way to `LockLost`; the same completion retried
/// replays from that receipt; a message in a line goes the usual way and releases the
/// line's next head (1.8).
#[tokio::test]
async fn a_completion_of_one_lock_deletes_first_and_writes_its_receipt_from_the_lock() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mq = queue_of(&dir, 2).await;
    let got = mq
        .receive("q", ReceiveOptions::batch(2))
        .await
        .expect("receive");
    let (first, second) = (LockRef::from(&got[0]), LockRef::from(&got[1]));
    let ((count, steps), r) = work(&mq, mq.complete("q", first)).await;
    r.expect("complete");
    assert_eq!(count, 2, "the delete and the receipt");
    // Before, the receipt read the row first: 146 steps (the receipt's look-up and the
    // delete's); the delete first and the receipt from its bound values: 125; the
    // receipt entry's page and items (`mqlite-rs/15`): 130.
    assert!(steps <= 132, "{steps} VM steps for one completion");
    let (again, r) = statements(&mq, mq.complete("q", first)).await;
    r.expect("a retried completion replays its receipt");
    assert!(again <= 4, "{again} statements for a replay");
    let forged = LockRef {
        seq: second.seq,
        token: LockToken::random_batch(1)[0],
    };
    let err = mq.complete("q", forged).await.expect_err("a wrong token");
    assert!(
        matches!(err, mqlite_contract::Error::LockLost { .. }),
        "{err:?}"
    );
    mq.complete("q", second).await.expect("its own token");
    assert_eq!(mq.stats("q").await.expect("stats").total, 0);

    // A message in a line on a standard queue (its group is its line), where the delete
    // first is tried: the delete in no line deletes nothing, and the usual way completes
    // it and hands the line to the next member. (A FIFO queue goes the usual way at once.)
    mq.create_queue("lined", QueueConfig::default())
        .await
        .expect("queue");
    for i in 0..2 {
        mq.send("lined", OutMessage::new(format!("m{i}")).with_group("g"))
            .await
            .expect("send");
    }
    let head = mq
        .receive_one("lined")
        .await
        .expect("receive")
        .expect("head");
    assert!(
        mq.receive_one("lined").await.expect("receive").is_none(),
        "the line waits for its head"
    );
    let (lined, r) = statements(&mq, mq.complete("lined", LockRef::from(&head))).await;
    r.expect("complete");
    assert!(
        lined > 2,
        "{lined} statements: the delete in no line, then the usual way"
    );
    let next = mq
        .receive_one("lined")
        .await
        .expect("receive")
        .expect("next");
    assert_eq!(next.body(), b"m1");
    mq.close().await;
}

//! Group commit: calls waiting for the writer share one transaction, each in its own
//! savepoint. The writer is held by an application transaction while the calls queue
//! up (the store submits a call to the writer when the call is made), so the grouping
//! is deterministic: counted, not timed.

use mqlite_contract::{
    ClaimSpec, EnqueueSlot, Error, LockRef, LockToken, MessageOps, OutMessage, ReceiveMode,
    SendOptions, SeqNumber, Settlement,
};
use mqlite_store_sqlite::SqliteStore;
use std::sync::Arc;

use crate::support;
use support::{hold_writer, open_with_queue};

async fn store(dir: &tempfile::TempDir) -> Arc<SqliteStore> {
    Arc::new(open_with_queue(dir, |o| o).await)
}

fn send<'a>(
    store: &'a SqliteStore,
    queue: &str,
    body: &str,
) -> impl Future<Output = mqlite_contract::Result<Vec<EnqueueSlot>>> + use<'a> {
    store.enqueue(
        queue.into(),
        vec![OutMessage::new(body)],
        SendOptions::default(),
    )
}

/// A peek-lock receive of at most `max` messages of `queue`.
fn receive<'a>(
    store: &'a SqliteStore,
    queue: &str,
    max: u32,
) -> impl Future<Output = mqlite_contract::Result<Vec<mqlite_contract::Message>>> + use<'a> {
    store.claim(
        queue.into(),
        ClaimSpec {
            max_messages: max,
            mode: ReceiveMode::PeekLock,
            attempt_id: None,
        },
    )
}

/// The completion of `lock` on `queue`.
fn complete<'a>(
    store: &'a SqliteStore,
    queue: &str,
    lock: LockRef,
) -> impl Future<Output = mqlite_contract::Result<()>> + use<'a> {
    store.settle(queue.into(), lock, Settlement::Complete)
}

/// The sequence number each of `calls`, sends of one message, was given, in order.
async fn numbers(
    calls: impl IntoIterator<Item = impl Future<Output = mqlite_contract::Result<Vec<EnqueueSlot>>>>,
) -> Vec<i64> {
    let mut numbers = Vec::new();
    for c in calls {
        match c.await.expect("send")[..] {
            [EnqueueSlot::Enqueued(seq)] => numbers.push(seq.0),
            ref other => panic!("one slot expected: {other:?}"),
        }
    }
    numbers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_waiting_for_the_writer_share_one_commit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store(&dir).await;
    let (release, holder) = hold_writer(&store).await;
    let before = store.group_commits();
    let calls: Vec<_> = (0..50)
        .map(|i| send(&store, "q", &format!("m{i}")))
        .collect();
    release.send(()).expect("release");
    holder.await.expect("holder");
    for c in calls {
        let slots = c.await.expect("send");
        assert!(matches!(slots[0], EnqueueSlot::Enqueued(_)));
    }
    assert_eq!(
        store.group_commits() - before,
        1,
        "50 calls that waited for the writer share one commit"
    );
    let n = support::stored(&store).await;
    assert_eq!(n, 50);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_call_leaves_its_neighbours_committed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store(&dir).await;
    // One message held under a real token, to be settled with a forged one.
    send(&store, "q", "held").await.expect("send");
    let held = receive(&store, "q", 1).await.expect("claim").remove(0);
    let (release, holder) = hold_writer(&store).await;
    let before = store.group_commits();
    let first = send(&store, "q", "before");
    let missing = send(&store, "missing", "nowhere");
    let forged = complete(
        &store,
        "q",
        LockRef {
            seq: held.seq,
            token: LockToken::random(),
        },
    );
    let gone = store.settle(
        "q".into(),
        LockRef {
            seq: SeqNumber(999),
            token: LockToken::random(),
        },
        Settlement::Abandon {
            delay: std::time::Duration::ZERO,
        },
    );
    let last = send(&store, "q", "after");
    release.send(()).expect("release");
    holder.await.expect("holder");
    assert!(first.await.is_ok());
    assert!(matches!(missing.await, Err(Error::NotFound { .. })));
    assert!(matches!(forged.await, Err(Error::LockLost { .. })));
    assert!(matches!(gone.await, Err(Error::LockLost { .. })));
    assert!(last.await.is_ok());
    assert_eq!(store.group_commits() - before, 1, "one shared commit");
    // The neighbours committed; the failures changed nothing: the held message is
    // still locked under its own token and settles with it.
    let bodies = store
        .query_i64("SELECT count(*) FROM mqlite_messages WHERE state = 0")
        .await
        .expect("count");
    assert_eq!(bodies, 2, "`before` and `after` committed");
    complete(&store, "q", LockRef::from(&held))
        .await
        .expect("the real token still settles");
}

/// Caps the store's file at the pages it holds now (SQLITE_FULL for what needs more);
/// the cap.
async fn cap_pages(store: &SqliteStore) -> i64 {
    let pages = store
        .query_i64("PRAGMA page_count")
        .await
        .expect("page_count");
    store
        .query_i64(&format!("PRAGMA max_page_count = {pages}"))
        .await
        .expect("cap");
    pages
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_transaction_fails_every_call_of_its_group_and_shows_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store(&dir).await;
    // A database that cannot grow, so a large send fails with SQLITE_FULL inside the
    // group.
    cap_pages(&store).await;
    let (release, holder) = hold_writer(&store).await;
    let small = send(&store, "q", "small");
    let big = store.enqueue(
        "q".into(),
        vec![OutMessage::new(vec![7u8; 512 * 1024])],
        SendOptions::default(),
    );
    let after = send(&store, "q", "after");
    release.send(()).expect("release");
    holder.await.expect("holder");
    let (small, big, after) = (small.await, big.await, after.await);
    assert!(big.is_err(), "the send that does not fit fails: {big:?}");
    // Whatever SQLite did with the transaction after SQLITE_FULL (kept it, or rolled
    // it back), what was answered Ok is there, and what is there was answered Ok.
    let stored = support::stored(&store).await;
    let acknowledged = [small.is_ok(), after.is_ok()]
        .iter()
        .filter(|ok| **ok)
        .count() as i64;
    assert_eq!(stored, acknowledged, "small {small:?}, after {after:?}");
    for r in [&small, &after] {
        if let Err(e) = r {
            // Merged into the INSERT that failed, it hears why (the file is full);
            // run after it, that the group's transaction was lost.
            assert!(
                matches!(e, Error::StorageFull { .. } | Error::Backend { .. }),
                "a call that lost its group hears why, or gets a backend error: {e:?}"
            );
        }
    }
}

/// A statement that fails is not run again (10.3): a send too large for the file
/// (SQLITE_FULL, its page count capped) runs its statement once and fails with
/// `StorageFull`, alone on its caller's thread and in a group on the writer alike;
/// nothing of it is stored, and the store goes on once there is room. (The store counts
/// a statement whether it succeeded or failed; a send of one message to a queue it knows
/// is one statement.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_statement_is_not_run_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store(&dir).await;
    let big = || {
        store.enqueue(
            "q".into(),
            vec![OutMessage::new(vec![7u8; 512 * 1024])],
            SendOptions::default(),
        )
    };
    send(&store, "q", "first")
        .await
        .expect("the queue's row, read once");
    let before = statements(&store);
    big().await.expect("a large send that fits");
    assert_eq!(
        statements(&store) - before,
        1,
        "a send that fits: one statement"
    );

    let pages = cap_pages(&store).await;
    // Alone on its caller's thread.
    let before = statements(&store);
    let alone = big().await;
    assert!(
        matches!(alone, Err(Error::StorageFull { .. })),
        "the send that does not fit fails: {alone:?}"
    );
    assert_eq!(statements(&store) - before, 1, "its statement ran once");
    // Queued behind the writer, then run in its group.
    let (release, holder) = hold_writer(&store).await;
    let before = statements(&store);
    let grouped = big();
    release.send(()).expect("release");
    holder.await.expect("holder");
    let grouped = grouped.await;
    // (SQLite rolls the group's transaction back on SQLITE_FULL here: the store runs
    // nothing more in it, and the sends of the INSERT that failed hear why.)
    assert!(
        matches!(grouped, Err(Error::StorageFull { .. })),
        "in a group too: {grouped:?}"
    );
    assert_eq!(statements(&store) - before, 1, "its statement ran once");
    assert_eq!(
        support::stored(&store).await,
        2,
        "neither failed send stored a row"
    );

    store
        .query_i64(&format!("PRAGMA max_page_count = {}", pages * 16))
        .await
        .expect("room");
    let before = statements(&store);
    big().await.expect("with room, a send goes through");
    assert_eq!(statements(&store) - before, 1);
    assert_eq!(support::stored(&store).await, 3, "and only it was added");
}

/// The statements the store has run so far.
fn statements(store: &SqliteStore) -> u64 {
    use mqlite_contract::Store;
    store
        .work()
        .expect("the SQLite store counts its work")
        .statements
}

/// Sends of one message that wait for the writer are two statements for every 1,024 of
/// them (the largest merged INSERT's text), however many: the next number
/// (`SELECT_NEXT_SEQ`), then ONE merged INSERT numbering the rows from it
/// (`INSERT_ROWS`), contiguously in the order made (G1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sends_of_one_message_waiting_for_the_writer_are_one_insert() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store(&dir).await;
    // The queue's row, read once and then known: a send to it reads nothing first.
    send(&store, "q", "first").await.expect("send");
    for n in [2usize, 50, 300, 2_500] {
        let (release, holder) = hold_writer(&store).await;
        let (commits, before) = (store.group_commits(), statements(&store));
        let calls: Vec<_> = (0..n)
            .map(|i| send(&store, "q", &format!("{n}-{i}")))
            .collect();
        release.send(()).expect("release");
        holder.await.expect("holder");
        let numbers = numbers(calls).await;
        assert_eq!(store.group_commits() - commits, 1, "{n} sends, one commit");
        assert_eq!(
            statements(&store) - before,
            2 * n.div_ceil(1024) as u64,
            "{n} sends of one message to a known queue: the next number, then one INSERT, \
             for each 1,024"
        );
        assert!(
            numbers.windows(2).all(|w| w[1] == w[0] + 1),
            "contiguous, in the order made: {numbers:?}"
        );
        // And each is the number of its own row (the store counts them on from the
        // number it read).
        for (i, seq) in numbers.iter().enumerate() {
            let hex: String = format!("{n}-{i}")
                .bytes()
                .map(|b| format!("{b:02x}"))
                .collect();
            let sql = format!("SELECT id FROM mqlite_messages WHERE body = X'{hex}'");
            let id = store.query_i64(&sql).await.expect("the row's id");
            assert_eq!(id, *seq, "the number {n}-{i} was given is its row's");
        }
    }
}

/// A send of one message made while the store was idle tries its caller's thread when
/// first polled; one that then finds the store held joins the merged INSERT, as if it
/// had found the store busy when made, instead of queueing a call (a statement and a
/// savepoint) of its own. And one never polled runs nothing (13.2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sends_that_lose_the_idle_store_join_the_merged_insert() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store(&dir).await;
    send(&store, "q", "first").await.expect("send");
    // Made while the store is idle: each would run on this thread.
    let calls: Vec<_> = (0..5)
        .map(|i| send(&store, "q", &format!("late-{i}")))
        .collect();
    let dropped = send(&store, "q", "never polled");
    let (release, holder) = hold_writer(&store).await;
    let (commits, before) = (store.group_commits(), statements(&store));
    drop(dropped);
    // First polled while the writer is held: they find it busy.
    let mut calls: Vec<_> = calls.into_iter().map(Box::pin).collect();
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    for c in &mut calls {
        assert!(c.as_mut().poll(&mut cx).is_pending(), "the writer is held");
    }
    release.send(()).expect("release");
    holder.await.expect("holder");
    assert_eq!(numbers(calls).await.len(), 5);
    assert_eq!(store.group_commits() - commits, 1, "5 sends, one commit");
    assert_eq!(
        statements(&store) - before,
        2,
        "5 sends that lost the idle store: the next number and one merged INSERT, not a \
         statement each"
    );
    assert_eq!(
        support::stored(&store).await,
        6,
        "the dropped send ran nothing"
    );
}

/// A send whose caller left before the writer took it runs nothing (13.2); a send the
/// merge cannot take (a queue with a dedup window) runs its own flow beside the merged
/// ones; one refused (a queue that does not exist) fails alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_merged_send_fails_or_leaves_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store(&dir).await;
    use mqlite_contract::{AdminOps, QueueConfig, QueueKind};
    store
        .upsert_queue(
            "dedup".into(),
            QueueKind::Queue,
            QueueConfig {
                dedup_window: std::time::Duration::from_secs(60),
                ..QueueConfig::default()
            },
            false,
        )
        .await
        .expect("queue");
    let (release, holder) = hold_writer(&store).await;
    let first = send(&store, "q", "first");
    let left = send(&store, "q", "left");
    let missing = send(&store, "missing", "nowhere");
    let keyed = send(&store, "dedup", "keyed");
    let again = send(&store, "dedup", "keyed");
    let last = send(&store, "q", "last");
    drop(left);
    release.send(()).expect("release");
    holder.await.expect("holder");
    let seq = |r: mqlite_contract::Result<Vec<EnqueueSlot>>| match r.expect("send")[..] {
        [EnqueueSlot::Enqueued(s)] | [EnqueueSlot::Duplicate(s)] => s.0,
        ref other => panic!("one slot expected: {other:?}"),
    };
    let (first, last) = (seq(first.await), seq(last.await));
    assert_eq!(last, first + 1, "the send that left took no number");
    assert!(matches!(missing.await, Err(Error::NotFound { .. })));
    let keyed = keyed.await.expect("keyed");
    assert!(matches!(keyed[..], [EnqueueSlot::Enqueued(_)]), "{keyed:?}");
    let again = again.await.expect("again");
    assert!(
        matches!(again[..], [EnqueueSlot::Duplicate(_)]),
        "{again:?}"
    );
    let stored = support::stored(&store).await;
    assert_eq!(stored, 3, "first, last and one keyed: nothing of `left`");
}

/// A merged INSERT the database refuses inserted nothing: each of its rows is then
/// inserted alone, so the refusal stays with its own send and its neighbours commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_merged_insert_goes_row_by_row() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store(&dir).await;
    // A temporary trigger (this connection only; the file's schema is unchanged)
    // refuses one subject.
    use mqlite_contract::OutboxStore;
    store
        .in_tx(async |tx| -> Result<(), Error> {
            tx.sql()?
                .execute_batch(
                    "CREATE TEMP TRIGGER refuse BEFORE INSERT ON main.mqlite_messages
                     WHEN NEW.subject = 'refused' BEGIN SELECT RAISE(ABORT, 'refused'); END",
                )
                .map_err(|e| Error::invalid(e.to_string()))
        })
        .await
        .expect("trigger");
    let (release, holder) = hold_writer(&store).await;
    let before = send(&store, "q", "before");
    let mut message = OutMessage::new("refused");
    message.subject = Some("refused".into());
    let refused = store.enqueue("q".into(), vec![message], SendOptions::default());
    let after = send(&store, "q", "after");
    release.send(()).expect("release");
    holder.await.expect("holder");
    assert!(before.await.is_ok());
    assert!(refused.await.is_err(), "the refused row fails its own send");
    assert!(after.await.is_ok());
    let stored = support::stored(&store).await;
    assert_eq!(stored, 2);
}

/// `n` messages sent and claimed at once: their locks, in order.
async fn locked(store: &SqliteStore, n: usize) -> Vec<LockRef> {
    for i in 0..n {
        send(store, "q", &format!("m{i}")).await.expect("send");
    }
    let got = receive(store, "q", n as u32).await.expect("claim");
    assert_eq!(got.len(), n);
    got.iter().map(LockRef::from).collect()
}

/// Completions of one lock each that wait for the writer complete together: one
/// fenced delete of every lock and their receipts, four statements however many (the
/// savepoint that holds the delete, the delete, the receipts, the savepoint's release),
/// where each ran its own delete and receipt. Each caller is answered Ok, the messages
/// are gone, and a retry of any of them finds its receipt (3.2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_of_one_lock_waiting_for_the_writer_are_one_delete() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store(&dir).await;
    for n in [2usize, 16, 100] {
        let locks = locked(&store, n).await;
        let (release, holder) = hold_writer(&store).await;
        let (commits, before) = (store.group_commits(), statements(&store));
        let calls: Vec<_> = locks.iter().map(|l| complete(&store, "q", *l)).collect();
        release.send(()).expect("release");
        holder.await.expect("holder");
        for c in calls {
            c.await.expect("completed");
        }
        assert_eq!(
            store.group_commits() - commits,
            1,
            "{n} completions, one commit"
        );
        assert_eq!(
            statements(&store) - before,
            4,
            "{n} completions of one lock on a known queue: one delete and the receipts"
        );
        assert_eq!(support::stored(&store).await, 0, "every message completed");
        for l in &locks {
            complete(&store, "q", *l)
                .await
                .expect("a retry replays the receipt");
        }
    }
}

/// When the merged delete does not take every lock, it is taken back and each
/// completion goes its own way: a lock given twice completes once and its second
/// caller finds the receipt (Ok), a stale token is `LockLost` and changes nothing, a
/// queue that does not exist is `NotFound`, and the others complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merged_completions_that_miss_a_lock_go_each_their_own_way() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store(&dir).await;
    let locks = locked(&store, 4).await;
    let stale = LockRef {
        seq: locks[3].seq,
        token: LockToken::random(),
    };
    let (release, holder) = hold_writer(&store).await;
    let first = complete(&store, "q", locks[0]);
    let twice = [
        complete(&store, "q", locks[1]),
        complete(&store, "q", locks[1]),
    ];
    let forged = complete(&store, "q", stale);
    let elsewhere = complete(&store, "missing", locks[2]);
    let third = complete(&store, "q", locks[2]);
    release.send(()).expect("release");
    holder.await.expect("holder");
    first.await.expect("first");
    for t in twice {
        t.await.expect("a lock completed twice: Ok both times");
    }
    assert!(matches!(forged.await, Err(Error::LockLost { .. })));
    assert!(matches!(elsewhere.await, Err(Error::NotFound { .. })));
    third.await.expect("third");
    assert_eq!(
        support::stored(&store).await,
        1,
        "the message under the stale token is still there"
    );
    complete(&store, "q", locks[3])
        .await
        .expect("its own token still completes it");
}

/// Receives that wait for the writer run as one claim of as many messages as they ask
/// for in all, at most 64 a claim (two statements each: the pick and the lock), and
/// each gets as many as it asked for, in claim order; those past the backlog get
/// none. A receive whose caller left first claims nothing (13.2); one of a queue that
/// does not exist fails alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receives_waiting_for_the_writer_are_one_claim() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store(&dir).await;
    for i in 0..110 {
        send(&store, "q", &format!("m{i}")).await.expect("send");
    }
    let (release, holder) = hold_writer(&store).await;
    let (commits, before) = (store.group_commits(), statements(&store));
    let left = receive(&store, "q", 1);
    let elsewhere = receive(&store, "missing", 1);
    let mut calls: Vec<_> = (0..60).map(|_| receive(&store, "q", 1)).collect();
    calls.push(receive(&store, "q", 3));
    calls.extend((0..10).map(|_| receive(&store, "q", 4)));
    drop(left);
    release.send(()).expect("release");
    holder.await.expect("holder");
    let mut seqs = Vec::new();
    let mut sizes = Vec::new();
    for c in calls {
        let got = c.await.expect("receive");
        sizes.push(got.len());
        seqs.extend(got.iter().map(|m| m.seq.0));
    }
    assert!(matches!(elsewhere.await, Err(Error::NotFound { .. })));
    assert_eq!(store.group_commits() - commits, 1, "one commit");
    assert_eq!(
        statements(&store) - before,
        5,
        "103 messages asked for: a claim of 63 and one of 40, two statements each; the \
         receive of a queue that does not exist reads its row and fails alone"
    );
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "distinct messages, in claim order: {seqs:?}"
    );
    assert_eq!(seqs.len(), 103, "each message once");
    let expected: Vec<usize> = std::iter::repeat_n(1, 60)
        .chain([3])
        .chain(std::iter::repeat_n(4, 10))
        .collect();
    assert_eq!(sizes, expected, "as many as each asked for");
    let locked = store
        .query_i64("SELECT count(*) FROM mqlite_messages WHERE state = 1")
        .await
        .expect("count");
    assert_eq!(locked, 103, "nothing locked for the receive that left");
    // Past the backlog: the last receives get fewer, then none.
    let (release, holder) = hold_writer(&store).await;
    let calls: Vec<_> = (0..4).map(|_| receive(&store, "q", 4)).collect();
    release.send(()).expect("release");
    holder.await.expect("holder");
    let mut sizes = Vec::new();
    for c in calls {
        sizes.push(c.await.expect("receive").len());
    }
    assert_eq!(sizes, [4, 3, 0, 0], "the 7 left, in claim order");
}

/// A receive whose caller leaves while the merged claim runs would hold locks nobody
/// hears of, each a delivery counted: the claim is taken back and runs again for the
/// receives still waiting, so the message it would have held stays active, its
/// delivery count untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receive_that_leaves_while_the_merged_claim_runs_holds_nothing() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store(&dir).await;
    for i in 0..3 {
        send(&store, "q", &format!("m{i}")).await.expect("send");
    }
    // The first row the claim locks stops the writer thread until the test says go.
    let (paused, is_paused) = std::sync::mpsc::channel::<()>();
    let (go, wait_go) = std::sync::mpsc::channel::<()>();
    let fired = AtomicBool::new(false);
    use mqlite_contract::OutboxStore;
    store
        .in_tx(async move |tx| -> Result<(), Error> {
            tx.sql()?.update_hook(Some(
                move |_: rusqlite::hooks::Action, _: &str, table: &str, _: i64| {
                    if table == "mqlite_messages" && !fired.swap(true, Ordering::SeqCst) {
                        let _ = paused.send(());
                        let _ = wait_go.recv();
                    }
                },
            ));
            Ok(())
        })
        .await
        .expect("hook");
    let (release, holder) = hold_writer(&store).await;
    let first = receive(&store, "q", 1);
    let leaving = receive(&store, "q", 1);
    let last = receive(&store, "q", 1);
    release.send(()).expect("release");
    tokio::task::spawn_blocking(move || is_paused.recv().expect("the claim runs"))
        .await
        .expect("paused");
    drop(leaving);
    go.send(()).expect("go");
    holder.await.expect("holder");
    let first = first.await.expect("first");
    let last = last.await.expect("last");
    assert_eq!((first.len(), last.len()), (1, 1));
    assert_ne!(first[0].seq, last[0].seq);
    let count = |sql: &'static str| {
        let store = store.clone();
        async move { store.query_i64(sql).await.expect("count") }
    };
    assert_eq!(
        count("SELECT count(*) FROM mqlite_messages WHERE state = 1 AND delivery_count = 1").await,
        2,
        "the two receives still there hold one message each"
    );
    assert_eq!(
        count("SELECT count(*) FROM mqlite_messages WHERE state = 0 AND delivery_count = 0").await,
        1,
        "the one the leaving receive would have held is active, never delivered"
    );
}

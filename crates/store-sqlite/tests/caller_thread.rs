//! Where the SQLite store's work runs (docs/internals.md, "Where store work runs"): a
//! short call that finds the store idle runs on its caller's thread under
//! `synchronous=NORMAL`; under FULL, with `caller_thread(false)`, for a batch over the
//! inline bound, for a scan, and while the writer thread has work queued, the call goes
//! to the writer thread. Checkpoints, which fsync, run on the checkpoint thread and the
//! writer thread: the WAL stays bounded though no commit on a caller's thread
//! checkpoints. Counted, not timed.

use mqlite_contract::{
    AdminOps, ClaimSpec, EnqueueSlot, Error, MessageOps, OutMessage, OutboxStore, ReceiveMode,
    SendOptions, Settlement, Store, StoreTx,
};
use std::sync::Arc;

use mqlite_store_sqlite::{SqliteOptions, SqliteStore, Synchronous};

use crate::support;
use support::{hold_writer, open_with_queue};

async fn open(
    dir: &tempfile::TempDir,
    options: impl FnOnce(SqliteOptions) -> SqliteOptions,
) -> SqliteStore {
    open_with_queue(dir, |o| options(o.synchronous(Synchronous::Normal))).await
}

/// A send of `n` messages, made (and so placed) when this is called, not when awaited.
fn send(
    store: &SqliteStore,
    n: usize,
) -> impl Future<Output = mqlite_contract::Result<Vec<EnqueueSlot>>> + use<'_> {
    let messages = (0..n).map(|i| OutMessage::new(format!("m{i}"))).collect();
    store.enqueue("q".into(), messages, SendOptions::default())
}

/// Caps the database file at the pages it has now.
async fn cap_pages(store: &SqliteStore) {
    let pages = store.query_i64("PRAGMA page_count").await.expect("pages");
    store
        .query_i64(&format!("PRAGMA max_page_count = {pages}"))
        .await
        .expect("cap");
}

/// A send of a message too large for the capped file ([`cap_pages`]): it fails.
async fn send_what_does_not_fit(store: &SqliteStore) {
    let big = store
        .enqueue(
            "q".into(),
            vec![OutMessage::new(vec![7u8; 512 * 1024])],
            SendOptions::default(),
        )
        .await;
    assert!(big.is_err(), "the send that does not fit fails: {big:?}");
}

fn spec(n: u32) -> ClaimSpec {
    ClaimSpec {
        max_messages: n,
        mode: ReceiveMode::PeekLock,
        attempt_id: None,
    }
}

#[tokio::test]
async fn a_short_call_on_an_idle_store_runs_on_the_callers_thread() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(&dir, |o| o).await;
    let (calls, commits) = (store.caller_thread_calls(), store.group_commits());
    let held = store.caller_thread_hold();
    send(&store, 1).await.expect("send");
    let m = store
        .claim("q".into(), spec(1))
        .await
        .expect("claim")
        .remove(0);
    store
        .settle("q".into(), (&m).into(), Settlement::Complete)
        .await
        .expect("complete");
    assert_eq!(
        store.caller_thread_calls() - calls,
        3,
        "send, claim, settle"
    );
    assert_eq!(store.group_commits() - commits, 3, "each its own commit");
    // Each of the three counted how long it held its caller's thread.
    let holds = store.caller_thread_hold().since(&held);
    assert_eq!(holds.holds(), 3);
    assert!(holds.max().is_some() && holds.quantile(0.5) <= holds.max());

    // A call on the writer thread holds no caller's thread: not counted.
    let other = tempfile::tempdir().expect("tempdir");
    let writer = open(&other, |o| o.caller_thread(false)).await;
    let held = writer.caller_thread_hold();
    send(&writer, 1).await.expect("send");
    assert_eq!(writer.caller_thread_hold().since(&held).holds(), 0);
}

/// A call alone on its caller's thread whose one statement is also its last (a send of
/// a queue the store knows, a one-message receive) runs that statement by itself,
/// committed with it: no `BEGIN IMMEDIATE` and `COMMIT` around it. A call of more
/// statements opens its transaction at its first; a lone statement that fails keeps
/// nothing.
#[tokio::test]
async fn a_lone_call_of_one_statement_runs_no_transaction_statements() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(&dir, |o| o).await;
    let tx = |store: &SqliteStore| store.transaction_statements();
    let at = tx(&store);
    send(&store, 1).await.expect("send");
    assert_eq!(
        tx(&store) - at,
        2,
        "the first send reads the queue's row too"
    );
    let (at, commits) = (tx(&store), store.group_commits());
    send(&store, 1).await.expect("send");
    let m = store.claim("q".into(), spec(1)).await.expect("claim");
    assert_eq!(m.len(), 1);
    assert_eq!(
        tx(&store) - at,
        0,
        "a send and a receive, one statement each"
    );
    assert_eq!(store.group_commits() - commits, 2, "each committed");
    let at = tx(&store);
    send(&store, 3).await.expect("send");
    assert_eq!(
        tx(&store) - at,
        2,
        "a batch reads its first number, then inserts"
    );
    let at = tx(&store);
    store
        .settle("q".into(), (&m[0]).into(), Settlement::Complete)
        .await
        .expect("complete");
    assert_eq!(
        tx(&store) - at,
        2,
        "a completion and its receipt: BEGIN, COMMIT"
    );
    assert_eq!(support::stored(&store).await, 4);

    // A lone statement that fails keeps nothing, and the store goes on.
    cap_pages(&store).await;
    let at = tx(&store);
    send_what_does_not_fit(&store).await;
    assert_eq!(tx(&store) - at, 0, "it ran by itself");
    assert_eq!(support::stored(&store).await, 4, "nothing of it is stored");
    store
        .query_i64("PRAGMA max_page_count = 1000000")
        .await
        .expect("uncap");
    send(&store, 1).await.expect("the next call commits");
    assert_eq!(support::stored(&store).await, 5);
}

#[tokio::test]
async fn the_first_call_on_a_fresh_store_runs_on_the_callers_thread() {
    // The writer thread put the connection in place at open; it does not hold it. The
    // queue's creation is the store's first call.
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(&dir, |o| o).await;
    assert_eq!(store.caller_thread_calls(), 1);
}

#[tokio::test]
async fn full_sync_and_caller_thread_off_send_every_call_to_the_writer() {
    for (what, options) in [
        (
            "FULL",
            (|o: SqliteOptions| o.synchronous(Synchronous::Full)) as fn(_) -> _,
        ),
        ("caller_thread(false)", |o: SqliteOptions| {
            o.caller_thread(false)
        }),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = open(&dir, options).await;
        send(&store, 1).await.expect("send");
        store.claim("q".into(), spec(1)).await.expect("claim");
        assert_eq!(store.caller_thread_calls(), 0, "{what}");
    }
}

#[tokio::test]
async fn long_calls_run_on_the_writer_thread() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(&dir, |o| o).await;
    let before = store.caller_thread_calls();
    send(&store, 64).await.expect("a batch at the bound");
    assert_eq!(store.caller_thread_calls(), before + 1, "64 items is short");
    send(&store, 65).await.expect("a batch over the bound");
    store.stats("q".into()).await.expect("stats: a scan");
    store.status().await.expect("status: a scan");
    assert_eq!(
        store.caller_thread_calls(),
        before + 1,
        "none of these on the caller's thread"
    );
    assert_eq!(store.stats("q".into()).await.expect("stats").active, 129);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_made_while_the_writer_is_busy_queue_for_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(open(&dir, |o| o).await);
    let (release, holder) = hold_writer(&store).await;
    let before = store.caller_thread_calls();
    let calls: Vec<_> = (0..10).map(|_| send(&store, 1)).collect();
    release.send(()).expect("release");
    holder.await.expect("holder");
    for c in calls {
        c.await.expect("send");
    }
    assert_eq!(
        store.caller_thread_calls(),
        before,
        "they queued for the writer"
    );
    // Idle again: calls run on the caller's thread. (The first may still find the
    // writer thread letting go of the handle after answering the last of them; then it
    // runs there, alone, which ends the contention.)
    for _ in 0..2 {
        send(&store, 1).await.expect("send");
    }
    assert!(
        store.caller_thread_calls() > before,
        "idle again: calls run on the caller's thread"
    );
}

#[tokio::test]
async fn the_engine_called_inside_its_own_transaction_body_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(open(&dir, |o| o).await);
    let inner = store.clone();
    let out = store
        .in_tx(async move |tx| -> Result<(), Error> {
            tx.enqueue("q", vec![OutMessage::new("mine")], SendOptions::default())
                .await?;
            // The engine, not the transaction's handle: it would wait for this body.
            let nested = send(&inner, 1).await;
            assert!(
                matches!(nested, Err(Error::InvalidArgument(_))),
                "{nested:?}"
            );
            Ok(())
        })
        .await;
    out.expect("the body's own send commits");
    assert_eq!(store.stats("q".into()).await.expect("stats").active, 1);
}

#[tokio::test]
async fn a_failed_commit_on_the_callers_thread_keeps_nothing_and_the_store_goes_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(&dir, |o| o).await;
    cap_pages(&store).await;
    let before = store.caller_thread_calls();
    send_what_does_not_fit(&store).await;
    assert_eq!(
        store.caller_thread_calls(),
        before + 1,
        "it ran on this thread"
    );
    let stored = support::stored(&store).await;
    assert_eq!(stored, 0, "nothing of it is visible");
    store
        .query_i64("PRAGMA max_page_count = 1000000")
        .await
        .expect("uncap");
    send(&store, 1).await.expect("the next call commits");
}

/// Checkpoints run on a thread of their own (docs/internals.md, "Where store work
/// runs"), from 500 WAL frames on; at 1,000 the writer checkpoints what is left on its
/// own connection, which restarts the WAL. The sends keep their own thread, and the WAL
/// stays as small as SQLite's automatic checkpoint keeps it.
#[tokio::test]
async fn checkpoints_run_on_their_own_thread_and_the_wal_stays_bounded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(&dir, |o| o).await;
    let wal = dir.path().join("q.db-wal");
    // About four WAL frames a send: 3,000 sends would leave a WAL of ~12,000 frames
    // (~48 MB) without a checkpoint.
    for _ in 0..3000 {
        send(&store, 1).await.expect("send");
    }
    let calls = store.caller_thread_calls();
    assert!(calls >= 2900, "the sends ran on this thread: {calls}");
    let (thread, writer) = store.checkpoints();
    assert!(thread >= 1, "the checkpoint thread ran: {thread}");
    assert!(writer >= 1, "the writer restarted the WAL: {writer}");
    let size = std::fs::metadata(&wal).expect("the WAL").len();
    assert!(
        size < 8 * 1024 * 1024,
        "the WAL is checkpointed and reused: {size} bytes"
    );
    assert_eq!(store.stats("q".into()).await.expect("stats").active, 3000);
    // Closed, the last connection out (the writer's, after the checkpoint thread's)
    // checkpoints the WAL and removes it.
    store.close().await;
    assert!(!wal.exists(), "the WAL is removed at close");
}

/// Under commits without a pause (16 producers at once, on the writer thread), the
/// checkpoint thread's passes cannot restart the WAL; the writer checkpoints on its own
/// connection at 1,000 frames, and the WAL stays as small.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_continuous_commits_the_writer_restarts_the_wal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(open(&dir, |o| o).await);
    let wal = dir.path().join("q.db-wal");
    let producers: Vec<_> = (0..16)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move {
                for _ in 0..600 {
                    send(&store, 1).await.expect("send");
                }
            })
        })
        .collect();
    for p in producers {
        p.await.expect("producer");
    }
    let (thread, writer) = store.checkpoints();
    assert!(thread + writer >= 1, "checkpoints ran: {thread} + {writer}");
    let size = std::fs::metadata(&wal).expect("the WAL").len();
    assert!(
        size < 8 * 1024 * 1024,
        "the WAL is checkpointed and reused: {size} bytes ({thread} + {writer} checkpoints)"
    );
    assert_eq!(store.stats("q".into()).await.expect("stats").active, 9600);
}

/// A send's future is small: the caller's own future holds it and moves it at each
/// await, and its ways together took about 4 KiB before they were boxed (a profile of a
/// single send had 7 % of its time in that copy).
#[tokio::test]
async fn a_send_future_is_small() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(&dir, |o| o).await;
    let f = send(&store, 1);
    assert!(
        std::mem::size_of_val(&f) <= 64,
        "a send's future takes {} bytes",
        std::mem::size_of_val(&f)
    );
    f.await.expect("send");
}

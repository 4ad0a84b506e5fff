//! The WAL index's locks kept from one transaction to the next (docs/internals.md,
//! "The WAL index's locks"): the store's sends, receives and completions take the
//! `-shm` file's locks a few times in a hundred transactions (two for each move of the
//! read mark, every 64 WAL frames, and a few around each checkpoint), where SQLite's own
//! VFS takes them about six times a transaction; and a connection through SQLite's own
//! VFS (its locks kept apart from the store's by the kernel, as another process's would
//! be, e.g. `mqlite backup`) reads the queue while the store keeps them. Kept in its own
//! test binary: the hold is process-wide.

use std::time::Duration;

use mqlite_contract::{ClaimSpec, MessageOps, OutMessage, ReceiveMode, SendOptions, Settlement};
use mqlite_sqlite_vfs::shm;
use mqlite_store_sqlite::{SqliteStore, Synchronous};

mod support;

async fn open(dir: &tempfile::TempDir) -> SqliteStore {
    support::open_with_queue(dir, |o| o.synchronous(Synchronous::Normal)).await
}

/// Sends `n` messages one by one, receives them in one call and completes each one:
/// the file's lock calls they made, and the checkpoints that ran meanwhile.
async fn round(store: &SqliteStore, n: usize) -> (u64, u64) {
    let before = shm::file_lock_calls();
    let ran = checkpoints(store);
    for i in 0..n {
        store
            .enqueue(
                "q".into(),
                vec![OutMessage::new(vec![i as u8; 256])],
                SendOptions::default(),
            )
            .await
            .expect("send");
    }
    let spec = ClaimSpec {
        max_messages: n as u32,
        mode: ReceiveMode::PeekLock,
        attempt_id: None,
    };
    let got = store.claim("q".into(), spec).await.expect("claim");
    assert_eq!(got.len(), n);
    for m in &got {
        store
            .settle("q".into(), m.into(), Settlement::Complete)
            .await
            .expect("complete");
    }
    (shm::file_lock_calls() - before, checkpoints(store) - ran)
}

/// Checkpoints run so far, by either thread.
fn checkpoints(store: &SqliteStore) -> u64 {
    let (thread, writer) = store.checkpoints();
    thread + writer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stores_transactions_take_the_files_locks_a_few_times_in_a_hundred() {
    if !cfg!(target_os = "linux") {
        eprintln!("skipped: the locks are kept on Linux only");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(&dir).await;
    shm::set_hold(Duration::from_secs(3600));
    round(&store, 4).await;
    // 201 transactions, then 501: no call for a transaction (the write lock and the read
    // mark the store shares stay kept), two for each move of the mark (once it is
    // `shm::MOVE_FRAMES` behind the WAL's end: the hold does not run out), and a few for
    // each checkpoint (every 500 WAL frames or so), which takes locks a transaction does
    // not (the checkpointer's, read mark 0's) and moves the marks. A claim takes at most
    // 256.
    for n in [100, 250] {
        let (calls, checkpoints) = round(&store, n).await;
        eprintln!("{n}: {calls} lock calls, {checkpoints} checkpoints");
        let transactions = 2 * n as u64 + 1;
        assert!(
            calls <= 12 * checkpoints + 4 + transactions / 4,
            "{calls} lock calls for {transactions} transactions and {checkpoints} checkpoints"
        );
    }

    // A connection through SQLite's own VFS reads meanwhile, and sees what commits.
    let path = dir.path().join("q.db");
    let other = rusqlite::Connection::open(&path).expect("open plainly");
    let before: i64 = other
        .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
        .expect("the other process reads");
    assert!(before > 0);

    // With no hold, as SQLite's own VFS: about six calls a transaction.
    shm::set_hold(Duration::ZERO);
    let (plain, _) = round(&store, 100).await;
    eprintln!("100 with no hold: {plain} lock calls");
    assert!(plain >= 5 * 201, "{plain} lock calls with no hold");
    shm::set_hold(shm::HOLD);
    drop(store);
}

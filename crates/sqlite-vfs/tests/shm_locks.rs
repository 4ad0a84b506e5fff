//! The WAL index's locks kept from one transaction to the next
//! (`mqlite_sqlite_vfs::shm`): a run of commits takes the file's locks a bounded number
//! of times; connections of this process exclude each other as with SQLite's own VFS;
//! and a connection through SQLite's own VFS (whose locks the kernel keeps apart from
//! the VFS's, as another process's) reads throughout, is shut out of writing only while
//! a lock is kept, and gets in once it is let go.
//!
//! The hold is process-wide, so the cases take turns.

use std::sync::Mutex;
use std::time::Duration;

use mqlite_sqlite_vfs::shm;
use rusqlite::{Connection, ErrorCode};

mod common;
use common::{count, insert, integrity, open};

/// The cases take turns: each sets the process's hold.
static TURN: Mutex<()> = Mutex::new(());

fn turn() -> std::sync::MutexGuard<'static, ()> {
    TURN.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Whether `result` is SQLite's "database is locked".
fn busy<T: std::fmt::Debug>(result: rusqlite::Result<T>) -> bool {
    match result {
        Err(rusqlite::Error::SqliteFailure(e, _)) => e.code == ErrorCode::DatabaseBusy,
        other => panic!("expected busy, got {other:?}"),
    }
}

/// A connection through SQLite's own VFS, which waits `wait` for a lock.
fn plain(path: &std::path::Path, wait: Duration) -> Connection {
    let conn = Connection::open(path).expect("open plainly");
    conn.busy_timeout(wait).expect("busy timeout");
    conn
}

/// Runs a truncating checkpoint on `conn`: whether a reader stopped it (SQLite's
/// "busy" column).
fn truncating_checkpoint(conn: &Connection) -> i64 {
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))
        .expect("checkpoint")
}

#[test]
fn a_run_of_commits_takes_the_files_locks_a_bounded_number_of_times() {
    let _turn = turn();
    if !cfg!(target_os = "linux") {
        eprintln!("skipped: the locks are kept on Linux only");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let conn = open(&dir.path().join("n.db"));
    // A checkpoint takes locks a commit does not (counted apart, in the store's tests).
    conn.execute_batch("PRAGMA wal_autocheckpoint = 0")
        .expect("no checkpoints");
    shm::set_hold(Duration::from_secs(3600));
    insert(&conn, 1, 64);
    for n in [100, 1_000] {
        let before = shm::file_lock_calls();
        for _ in 0..n {
            insert(&conn, 1, 64);
        }
        let calls = shm::file_lock_calls() - before;
        // The locks a commit takes are kept from the first commit on: no call grows
        // with the commits.
        assert!(calls <= 2, "{calls} lock calls for {n} commits");
    }
    // With no hold, as SQLite's own VFS: several calls a commit.
    shm::set_hold(Duration::ZERO);
    let before = shm::file_lock_calls();
    for _ in 0..100 {
        insert(&conn, 1, 64);
    }
    let calls = shm::file_lock_calls() - before;
    assert!(
        calls >= 200,
        "{calls} lock calls for 100 commits with no hold"
    );
    assert_eq!(count(&conn), 1_201);
    assert_eq!(integrity(&conn), "ok");
    shm::set_hold(shm::HOLD);
}

#[test]
fn connections_of_this_process_exclude_each_other_as_sqlite_does() {
    let _turn = turn();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("x.db");
    let a = open(&path);
    let b = open(&path);
    let reader = open(&path);
    shm::set_hold(Duration::from_secs(3600));
    insert(&a, 3, 64);

    // A writes: B cannot, and a reader keeps its snapshot.
    reader.execute_batch("BEGIN").expect("begin read");
    assert_eq!(count(&reader), 3);
    a.execute_batch("BEGIN IMMEDIATE; INSERT INTO t (body) VALUES (x'01')")
        .expect("a writes");
    b.busy_timeout(Duration::ZERO).expect("no wait");
    assert!(busy(b.execute_batch("BEGIN IMMEDIATE")));
    a.execute_batch("COMMIT").expect("a commits");
    assert_eq!(count(&reader), 3, "the reader's snapshot holds");

    // A let go: B takes the write lock the file kept.
    b.execute_batch("BEGIN IMMEDIATE; INSERT INTO t (body) VALUES (x'02'); COMMIT")
        .expect("b writes once a let go");

    // The reader's mark holds the WAL: a checkpoint that must pass it cannot (and does
    // not wait for it).
    a.busy_timeout(Duration::ZERO).expect("no wait");
    let busy_ckpt = truncating_checkpoint(&a);
    assert_eq!(
        busy_ckpt, 1,
        "a reader's snapshot stops a truncating checkpoint"
    );
    assert_eq!(count(&reader), 3);
    reader.execute_batch("COMMIT").expect("end read");
    assert_eq!(count(&reader), 5);
    let busy_ckpt = truncating_checkpoint(&a);
    assert_eq!(busy_ckpt, 0, "with no reader the checkpoint passes");
    assert_eq!(count(&b), 5);
    assert_eq!(integrity(&b), "ok");
    shm::set_hold(shm::HOLD);
}

#[test]
fn another_process_reads_throughout_and_writes_once_the_kept_lock_is_let_go() {
    let _turn = turn();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("p.db");
    let ours = open(&path);
    shm::set_hold(Duration::from_secs(3600));
    insert(&ours, 2, 64);

    // SQLite's own VFS: its locks are the process's, which the kernel keeps apart from
    // the VFS's, as it keeps another process's.
    let other = plain(&path, Duration::ZERO);
    assert_eq!(count(&other), 2, "it reads while the write lock is kept");
    insert(&ours, 1, 64);
    assert_eq!(count(&other), 3, "and reads what commits after");
    other.execute_batch("BEGIN").expect("begin read");
    assert_eq!(count(&other), 3);
    insert(&ours, 1, 64);
    assert_eq!(
        count(&other),
        3,
        "its snapshot holds while this process writes"
    );
    other.execute_batch("COMMIT").expect("end read");

    // The write lock is kept: the other cannot write until it is let go.
    if cfg!(target_os = "linux") {
        assert!(busy(other.execute_batch(
            "BEGIN IMMEDIATE; INSERT INTO t (body) VALUES (x'03'); COMMIT"
        )));
        other.execute_batch("ROLLBACK").ok();
    }
    shm::release_kept();
    other
        .execute_batch("BEGIN IMMEDIATE; INSERT INTO t (body) VALUES (x'03'); COMMIT")
        .expect("the other writes once the lock is let go");
    assert_eq!(count(&ours), 5);
    insert(&ours, 1, 64);
    assert_eq!(count(&other), 6);
    assert_eq!(integrity(&other), "ok");
    shm::set_hold(shm::HOLD);
}

#[test]
fn an_idle_process_lets_go_of_its_kept_locks_by_itself() {
    let _turn = turn();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("i.db");
    let ours = open(&path);
    shm::set_hold(shm::HOLD);
    insert(&ours, 1, 64);
    // No call comes after the commit: the module's thread lets the lock go within the
    // hold or so; the other process waits for it as for any writer.
    let other = plain(&path, Duration::from_secs(30));
    other
        .execute_batch("BEGIN IMMEDIATE; INSERT INTO t (body) VALUES (x'04'); COMMIT")
        .expect("the other writes once this process is idle");
    assert_eq!(count(&ours), 2);
}

//! The gathering VFS (`mqlite_sqlite_vfs`): a commit reaches the WAL in one write, and
//! every connection, through this VFS or SQLite's own, reads what was committed.

use rusqlite::Connection;

mod common;
use common::{count, insert, open};

/// Writes are counted process-wide, so the counting cases share one test.
#[test]
fn a_commit_reaches_the_wal_in_one_write_and_sqlites_own_connections_read_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("g.db");
    let conn = open(&path);
    conn.execute_batch("PRAGMA wal_autocheckpoint = 0")
        .expect("no checkpoints");
    // Fifty rows of 1 KiB: a commit of about fifteen pages, 30 writes for SQLite alone.
    let before = mqlite_sqlite_vfs::wal_writes();
    insert(&conn, 50, 1024);
    assert_eq!(
        mqlite_sqlite_vfs::wal_writes() - before,
        1,
        "one write per commit"
    );
    // One row: one write, where SQLite alone makes four or more.
    let before = mqlite_sqlite_vfs::wal_writes();
    insert(&conn, 1, 100);
    assert_eq!(mqlite_sqlite_vfs::wal_writes() - before, 1);

    // A connection through SQLite's own VFS sees every committed row, while this one is
    // still open (it reads the frames from the file, pointed by the shared index).
    let plain = Connection::open(&path).expect("open plainly");
    assert_eq!(count(&plain), 51);
    // And rows committed after it opened.
    insert(&conn, 10, 5000);
    assert_eq!(count(&plain), 61);
    drop(plain);

    // A commit larger than what is held is written in pieces of about that size, and
    // is whole.
    let rows = 100;
    let before = mqlite_sqlite_vfs::wal_writes();
    insert(&conn, rows, 4000);
    let writes = mqlite_sqlite_vfs::wal_writes() - before;
    let pieces = (rows * 4120).div_ceil(mqlite_sqlite_vfs::MAX_GATHERED) as u64;
    assert!(
        (pieces..=pieces * 2 + 2).contains(&writes),
        "{writes} writes for {rows} pages"
    );
    assert_eq!(count(&conn), 61 + rows as i64);
}

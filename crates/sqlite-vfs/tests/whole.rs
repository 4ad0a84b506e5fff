//! A database written through the gathering VFS (`mqlite_sqlite_vfs`), with
//! checkpoints and deletions between its commits, reopens whole under SQLite alone.
//! (Kept apart from `one_write.rs`, whose counts are process-wide.)

use rusqlite::Connection;

mod common;
use common::{connect, count, insert, integrity, open};

#[test]
fn a_database_written_through_the_vfs_checkpoints_and_reopens_whole() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("c.db");
    {
        let conn = open(&path);
        for round in 0..200 {
            insert(&conn, 1 + round % 7, 300 + round * 13);
            if round % 50 == 49 {
                conn.execute_batch("PRAGMA wal_checkpoint(PASSIVE)")
                    .expect("checkpoint");
            }
            if round % 20 == 0 {
                conn.execute("DELETE FROM t WHERE id % 5 = 0", [])
                    .expect("delete");
            }
        }
    }
    let expected: i64 = {
        let conn = open(&path);
        count(&conn)
    };
    // Reopened by SQLite alone: the same rows, and a sound file.
    let plain = Connection::open(&path).expect("reopen plainly");
    assert_eq!(count(&plain), expected);
    assert_eq!(integrity(&plain), "ok");
}

/// The largest pages SQLite has (64 KiB): a frame of one page and its header still fits
/// what is held, and the file reopens whole.
#[test]
fn the_largest_pages_go_through_whole() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("big.db");
    {
        // Before WAL mode: the file is rewritten with the new page size.
        connect(&path)
            .execute_batch("PRAGMA page_size = 65536; VACUUM")
            .expect("page size");
        let conn = open(&path);
        for round in 0..20 {
            insert(&conn, 3, 50_000 + round * 1000);
        }
    }
    let plain = Connection::open(&path).expect("reopen plainly");
    let size: i64 = plain
        .query_row("PRAGMA page_size", [], |r| r.get(0))
        .expect("page size");
    assert_eq!(size, 65536);
    assert_eq!(count(&plain), 60);
    assert_eq!(integrity(&plain), "ok");
}

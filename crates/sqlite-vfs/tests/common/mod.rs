//! What the VFS's tests share: a WAL database opened through the VFS, with table `t`.

#![allow(dead_code, unreachable_pub)]

use rusqlite::{Connection, OpenFlags};

/// A connection to the database at `path` through the VFS, as it is.
pub fn connect(path: &std::path::Path) -> Connection {
    mqlite_sqlite_vfs::register().expect("register");
    Connection::open_with_flags_and_vfs(path, OpenFlags::default(), mqlite_sqlite_vfs::NAME)
        .expect("open through the VFS")
}

/// The database at `path`, through the VFS, in WAL mode, with table `t`.
pub fn open(path: &std::path::Path) -> Connection {
    let conn = connect(path);
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;
         CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, body BLOB NOT NULL);",
    )
    .expect("schema");
    conn
}

/// Inserts `rows` rows of `size` bytes in one transaction.
pub fn insert(conn: &Connection, rows: usize, size: usize) {
    let tx = conn.unchecked_transaction().expect("begin");
    for i in 0..rows {
        conn.execute("INSERT INTO t (body) VALUES (?1)", [vec![i as u8; size]])
            .expect("insert");
    }
    tx.commit().expect("commit");
}

/// The rows of `t`.
pub fn count(conn: &Connection) -> i64 {
    conn.query_row("SELECT count(*) FROM t", [], |r| r.get(0))
        .expect("count")
}

/// What SQLite's integrity check says of the database `conn` reads ("ok" when sound).
pub fn integrity(conn: &Connection) -> String {
    conn.query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .expect("integrity")
}

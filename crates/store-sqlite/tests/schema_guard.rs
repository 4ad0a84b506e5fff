//! The schema guard (promise 10.2): open refuses a database that carries another schema
//! token, or is not a SQLite database at all, and leaves its main file byte-for-byte as
//! it was; a database that holds only the application's own tables is adopted.

use std::path::{Path, PathBuf};

use mqlite_engine_core::{Error, ManualClock, Store};
use mqlite_sql as sql;
use mqlite_store_sqlite::{SqliteOptions, SqliteStore};
use rusqlite::Connection;

async fn open(path: &Path) -> mqlite_engine_core::Result<SqliteStore> {
    let clock = ManualClock::new(1_700_000_000_000).shared();
    SqliteStore::open(SqliteOptions::new(path.to_str().expect("utf-8 path")).clock(clock)).await
}

/// Creates a fresh store at `dir/mq.db` and closes it.
async fn fresh_database(dir: &Path) -> PathBuf {
    let path = dir.join("mq.db");
    open(&path).await.expect("open fresh store").close().await;
    path
}

/// Opens `path`, expecting a refusal naming `found`, and checks the file was not touched.
async fn assert_refused_untouched(path: &Path, found: &str) {
    let before = std::fs::read(path).expect("read db before");
    match open(path).await {
        Err(Error::SchemaVersionMismatch {
            found: got,
            expected,
        }) => {
            assert_eq!(got, found, "the refusal should name the token it found");
            assert_eq!(expected, sql::SCHEMA_TOKEN);
        }
        Err(other) => panic!("expected SchemaVersionMismatch, got {other:?}"),
        Ok(store) => {
            store.close().await;
            panic!("open accepted a database that is not ours");
        }
    }
    let after = std::fs::read(path).expect("read db after");
    assert!(
        before == after,
        "the refused database's main file changed ({} bytes before, {} after)",
        before.len(),
        after.len()
    );
}

/// Another schema token is refused and the file is left as it was (10.2).
#[tokio::test]
async fn foreign_schema_token_is_refused_and_file_untouched() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = fresh_database(dir.path()).await;
    {
        let conn = Connection::open(&path).expect("open with rusqlite");
        let changed = conn
            .execute(
                "UPDATE meta SET value = 'someone-else/9' WHERE key = 'schema_token'",
                [],
            )
            .expect("rewrite token");
        assert_eq!(changed, 1);
        // Closing the last connection checkpoints the WAL into the main file.
    }
    assert_refused_untouched(&path, "someone-else/9").await;

    // Still the other binary's database.
    let conn = Connection::open(&path).expect("reopen with rusqlite");
    let token: String = conn
        .query_row(
            "SELECT value FROM meta WHERE key = 'schema_token'",
            [],
            |r| r.get(0),
        )
        .expect("token");
    assert_eq!(token, "someone-else/9");
}

/// A file that is not a SQLite database is refused and left as it was (10.2).
#[tokio::test]
async fn non_database_file_is_refused_and_file_untouched() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("mq.db");
    std::fs::write(&path, vec![0x42u8; 4096]).expect("write junk");
    assert_refused_untouched(&path, "").await;
    assert_eq!(std::fs::read(&path).expect("read"), vec![0x42u8; 4096]);
}

/// A database holding only the application's own tables gets the mqlite schema and
/// keeps the application's rows.
#[tokio::test]
async fn application_database_without_mqlite_schema_is_adopted() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("app.db");
    {
        let conn = Connection::open(&path).expect("create with rusqlite");
        conn.execute_batch(
            "CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL, qty INTEGER NOT NULL);
             INSERT INTO orders (id, item, qty) VALUES (7, 'widget', 3);",
        )
        .expect("application schema");
    }

    let store = open(&path).await.expect("open an application database");
    let orders = store
        .query_i64("SELECT count(*) FROM orders WHERE id = 7 AND item = 'widget' AND qty = 3")
        .await
        .expect("count orders");
    assert_eq!(
        orders, 1,
        "the application's row is visible through the store"
    );
    store.close().await;

    let conn = Connection::open(&path).expect("reopen with rusqlite");
    let row: (i64, String, i64) = conn
        .query_row("SELECT id, item, qty FROM orders", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .expect("the application's row survives");
    assert_eq!(row, (7, "widget".to_owned(), 3));
    let token: String = conn
        .query_row(
            "SELECT value FROM meta WHERE key = 'schema_token'",
            [],
            |r| r.get(0),
        )
        .expect("token");
    assert_eq!(token, sql::SCHEMA_TOKEN);

    // And it opens again as ours.
    drop(conn);
    open(&path).await.expect("reopen as mqlite").close().await;
}

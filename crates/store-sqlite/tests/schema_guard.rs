//! The schema guard (promise 10.2): open refuses a database that carries another schema
//! token, or is not a SQLite database at all, and leaves its main file byte-for-byte as
//! it was; a database that holds only the application's own tables is adopted.

use std::path::{Path, PathBuf};

use mqlite_contract::{Error, ManualClock, Store};
use mqlite_sql as sql;
use mqlite_store_sqlite::{SqliteOptions, SqliteStore};
use rusqlite::Connection;

async fn open(path: &Path) -> mqlite_contract::Result<SqliteStore> {
    let clock = ManualClock::new(1_700_000_000_000).shared();
    SqliteStore::open(SqliteOptions::new(path.to_str().expect("utf-8 path")).clock(clock)).await
}

/// Creates a fresh store at `dir/mq.db` and closes it.
async fn fresh_database(dir: &Path) -> PathBuf {
    let path = dir.join("mq.db");
    open(&path).await.expect("open fresh store").close().await;
    path
}

/// Opens `path`, expecting the refusal `expected` accepts, and checks the file was not
/// touched.
async fn assert_refused_untouched(path: &Path, expected: impl Fn(&Error) -> bool) {
    let before = std::fs::read(path).expect("read db before");
    match open(path).await {
        Err(e) if expected(&e) => {}
        Err(other) => panic!("unexpected refusal {other:?} ({other})"),
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
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    assert!(
        std::fs::metadata(&wal).map_or(true, |m| m.len() == 0),
        "a refused file got a WAL"
    );
}

/// A refusal for another schema token, naming the token found and what to do.
fn mismatch(found: &'static str) -> impl Fn(&Error) -> bool {
    move |e| match e {
        Error::SchemaVersionMismatch {
            found: got,
            expected,
        } => {
            let text = e.to_string();
            got == found
                && *expected == sql::SCHEMA_TOKEN
                && text.contains(found)
                && text.contains("never migrated")
        }
        _ => false,
    }
}

/// A refusal as not-a-database whose message names `cause`.
fn not_a_database(cause: &'static str) -> impl Fn(&Error) -> bool {
    move |e| matches!(e, Error::NotADatabase { .. }) && e.to_string().contains(cause)
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
                "UPDATE mqlite_meta SET value = 'someone-else/9' WHERE key = 'schema_token'",
                [],
            )
            .expect("rewrite token");
        assert_eq!(changed, 1);
        // Closing the last connection checkpoints the WAL into the main file.
    }
    assert_refused_untouched(&path, mismatch("someone-else/9")).await;

    // Still the other binary's database.
    let conn = Connection::open(&path).expect("reopen with rusqlite");
    let token: String = conn
        .query_row(
            "SELECT value FROM mqlite_meta WHERE key = 'schema_token'",
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
    assert_refused_untouched(&path, not_a_database("not a SQLite database")).await;
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
            "SELECT value FROM mqlite_meta WHERE key = 'schema_token'",
            [],
            |r| r.get(0),
        )
        .expect("token");
    assert_eq!(token, sql::SCHEMA_TOKEN);

    // And it opens again as ours.
    drop(conn);
    open(&path).await.expect("reopen as mqlite").close().await;
}

/// A file of an earlier mqlite layout (its token in an unprefixed `meta` table) is
/// refused with a message naming its token and what to do, never treated as fresh beside
/// its old tables.
#[tokio::test]
async fn earlier_layout_is_refused_naming_its_token() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("old.db");
    {
        let conn = Connection::open(&path).expect("create");
        conn.execute_batch(
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT;
             INSERT INTO meta VALUES ('schema_token', 'mqlite-rs/1');
             CREATE TABLE messages (id INTEGER PRIMARY KEY, body BLOB);",
        )
        .expect("an mqlite-rs/1 file");
    }
    assert_refused_untouched(&path, mismatch("mqlite-rs/1")).await;
}

/// mqlite's tables live under the `mqlite_` prefix: an application database with its
/// own `messages`, `meta`, `queues` and `dedup` tables is adopted and keeps them.
#[tokio::test]
async fn application_tables_named_like_the_old_ones_are_adopted() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("app.db");
    {
        let conn = Connection::open(&path).expect("create");
        conn.execute_batch(
            "CREATE TABLE messages (id INTEGER PRIMARY KEY, text TEXT);
             CREATE TABLE meta (k TEXT, v TEXT);
             CREATE TABLE queues (name TEXT);
             CREATE TABLE dedup (x INTEGER);
             INSERT INTO messages (text) VALUES ('hello');",
        )
        .expect("application schema");
    }
    open(&path).await.expect("adopted").close().await;
    let conn = Connection::open(&path).expect("reopen");
    let text: String = conn
        .query_row("SELECT text FROM messages", [], |r| r.get(0))
        .expect("the application's row");
    assert_eq!(text, "hello");
}

/// A database whose own objects take mqlite's names, without mqlite's token, is refused
/// naming them, untouched.
#[tokio::test]
async fn objects_under_mqlite_names_are_refused_naming_them() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("clash.db");
    {
        let conn = Connection::open(&path).expect("create");
        conn.execute_batch("CREATE TABLE mqlite_messages (x INTEGER);")
            .expect("a clashing table");
    }
    assert_refused_untouched(&path, not_a_database("mqlite_messages")).await;
}

/// A directory is refused before anything is created in it or beside it.
#[tokio::test]
async fn a_directory_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    match open(dir.path()).await {
        Err(e @ Error::NotADatabase { .. }) => assert!(e.to_string().contains("directory"), "{e}"),
        other => panic!("expected NotADatabase, got {other:?}"),
    }
    assert_eq!(std::fs::read_dir(dir.path()).expect("list").count(), 0);
}

//! The whole DDL is pinned (promise 10.2): a layout change must be deliberate, show up in
//! review as a diff of `crates/sql/golden/schema.sql` (the one golden file of the SQL
//! stores; the libSQL store checks the server's copy against it too), and come with a
//! new schema token.
//!
//! Run with `MQLITE_BLESS=1` to rewrite the golden file from what a fresh store creates.

use std::path::{Path, PathBuf};

use mqlite_contract::{ManualClock, Store};
use mqlite_sql as sql;
use mqlite_sql::golden::{self, ddl_only, render, token_line};
use mqlite_store_sqlite::{SqliteOptions, SqliteStore};
use rusqlite::Connection;

fn golden_path() -> PathBuf {
    PathBuf::from(golden::PATH)
}

/// Creates a fresh store at `dir/mq.db` with the side tables of first use (the inbox,
/// the relay outbox), closes it, and returns the file's path.
async fn fresh_database(dir: &Path) -> PathBuf {
    let path = dir.join("mq.db");
    let clock = ManualClock::new(1_700_000_000_000).shared();
    let store =
        SqliteStore::open(SqliteOptions::new(path.to_str().expect("utf-8 path")).clock(clock))
            .await
            .expect("open store");
    store.close().await;
    let conn = Connection::open(&path).expect("open with rusqlite");
    for ddl in sql::side_tables::DDL {
        conn.execute(ddl, []).expect("side table DDL");
    }
    path
}

/// Every schema object outside SQLite's own, as (type, name, sql).
fn schema_rows(path: &Path) -> Vec<(String, String, Option<String>)> {
    let conn = Connection::open(path).expect("open with rusqlite");
    let mut stmt = conn.prepare(golden::OBJECTS).expect("prepare");
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .expect("query")
        .collect::<rusqlite::Result<Vec<_>>>()
        .expect("rows")
}

/// A fresh database's DDL equals the checked-in golden file, byte for byte, and the
/// golden file names this binary's schema token (10.2). The two move together: a DDL
/// change cannot be blessed under the token of the old DDL, so every layout change
/// carries a new token and old files are refused, never misread.
#[tokio::test]
async fn fresh_schema_matches_golden_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = fresh_database(dir.path()).await;
    let actual = render(&schema_rows(&path));
    let golden = golden_path();

    if std::env::var_os("MQLITE_BLESS").is_some_and(|v| v == "1") {
        if let Ok(old) = std::fs::read_to_string(&golden) {
            assert!(
                ddl_only(&old) == ddl_only(&actual)
                    || !old.contains(&token_line(sql::SCHEMA_TOKEN)),
                "the DDL changed but sql::SCHEMA_TOKEN ({}) did not: change the token first, \
                 then bless",
                sql::SCHEMA_TOKEN
            );
        }
        std::fs::write(&golden, &actual).expect("write golden file");
        return;
    }
    let expected = std::fs::read_to_string(&golden).unwrap_or_else(|e| {
        panic!(
            "cannot read {}: {e}; run with MQLITE_BLESS=1 to create it",
            golden.display()
        )
    });
    assert!(
        actual == expected,
        "the schema differs from {}; if the change is deliberate, change \
         mqlite_sql::SCHEMA_TOKEN and rerun with MQLITE_BLESS=1.\n--- expected\n{expected}\n--- actual\n{actual}",
        golden.display()
    );
}

/// The database holds exactly the statements of `sql::SCHEMA` and `sql::side_tables::DDL`,
/// verbatim, and nothing else.
#[tokio::test]
async fn fresh_schema_is_exactly_the_canonical_text() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = fresh_database(dir.path()).await;
    let mut stored: Vec<String> = schema_rows(&path)
        .into_iter()
        .map(|(kind, name, text)| text.unwrap_or_else(|| panic!("{kind} {name} has no sql")))
        .collect();
    let mut canonical: Vec<String> = sql::SCHEMA
        .iter()
        .chain(sql::side_tables::DDL)
        // SQLite keeps a statement's text without its IF NOT EXISTS.
        .map(|s| s.replace(" IF NOT EXISTS", ""))
        .collect();
    stored.sort();
    canonical.sort();
    assert_eq!(stored, canonical);
}

/// The meta row carries this binary's schema token (10.2).
#[tokio::test]
async fn fresh_schema_carries_the_schema_token() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = fresh_database(dir.path()).await;
    let conn = Connection::open(&path).expect("open with rusqlite");
    let token: String = conn
        .query_row(
            "SELECT value FROM mqlite_meta WHERE key = 'schema_token'",
            [],
            |r| r.get(0),
        )
        .expect("schema_token row");
    assert_eq!(token, sql::SCHEMA_TOKEN);
}

//! The schema a fresh libSQL database gets is the SQL stores' one golden DDL
//! (`crates/sql/golden/schema.sql`, 10.2), read back from the server's `sqlite_master`
//! (up to the space the libsql client's parser puts before `(`), and the meta row
//! carries the schema token.

mod support;

use libtest_mimic::Arguments;

use mqlite_contract::{ManualClock, OutboxStore, Store, StoreTx};
use mqlite_sql::golden;
use mqlite_store_libsql::{LibsqlOptions, LibsqlStore};
use mqlite_testbed::libsql::Sqld;
use support::{Outcome, trial};

fn main() {
    let args = Arguments::from_args();
    let trials = vec![trial("schema::fresh_schema_matches_the_golden_file", |d| {
        Box::pin(matches_golden(d))
    })];
    libtest_mimic::run(&args, trials).exit();
}

async fn matches_golden(dir: tempfile::TempDir) -> Outcome {
    let server = Sqld::start(&dir.path().join("sqld"))?;
    let clock = ManualClock::new(1_700_000_000_000).shared();
    let store = LibsqlStore::open(LibsqlOptions::new(server.url()).clock(clock)).await?;
    let status = store.status().await?;
    // The side tables appear on first use (here, a relay mark of nothing: a write).
    store
        .in_tx(async |tx| tx.relay_mark(&[]).await.map(drop))
        .await?;
    store.close().await;
    if status.schema_token != mqlite_sql::SCHEMA_TOKEN {
        return Err(format!("schema token {:?}", status.schema_token).into());
    }
    let conn = libsql::Builder::new_remote(server.url().to_owned(), String::new())
        .build()
        .await?
        .connect()?;
    let mut rows = conn.query(golden::OBJECTS, ()).await?;
    let mut objects = Vec::new();
    while let Some(r) = rows.next().await? {
        objects.push((
            r.get::<String>(0)?,
            r.get::<String>(1)?,
            r.get::<Option<String>>(2)?,
        ));
    }
    // The client re-renders each statement it sends (`ON t (c)` for `ON t(c)`); the
    // DDL is otherwise the golden file's, byte for byte.
    let actual = golden::without_space_before_parens(&golden::render(&objects));
    let expected = golden::without_space_before_parens(&std::fs::read_to_string(golden::PATH)?);
    if actual != expected {
        return Err(format!(
            "the server's schema differs from {}:\n--- expected\n{expected}\n--- actual\n{actual}",
            golden::PATH
        )
        .into());
    }
    Ok(())
}

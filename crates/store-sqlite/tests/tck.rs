//! Runs every case of the conformance kit against the SQLite store.

use std::path::Path;

use mqlite_engine_core::{Error, Result, SharedClock};
use mqlite_store_sqlite::{SqliteOptions, SqliteStore};
use mqlite_tck::{Capability, StoreFactory};

struct Sqlite;

impl StoreFactory for Sqlite {
    type Store = SqliteStore;

    async fn open(&self, dir: &Path, clock: SharedClock) -> Result<SqliteStore> {
        let path = dir.join("mq.db").to_string_lossy().into_owned();
        SqliteStore::open(SqliteOptions::new(path).clock(clock)).await
    }

    fn unsupported(&self, _: Capability) -> Option<&'static str> {
        None
    }

    fn set_schema_token(&self, dir: &Path, token: &str) -> Result<()> {
        let conn = rusqlite::Connection::open(dir.join("mq.db"))
            .map_err(|e| Error::backend("sqlite", e))?;
        conn.execute(
            "UPDATE meta SET value = ?1 WHERE key = 'schema_token'",
            [token],
        )
        .map_err(|e| Error::backend("sqlite", e))?;
        Ok(())
    }
}

fn main() {
    mqlite_tck::run(Sqlite)
}

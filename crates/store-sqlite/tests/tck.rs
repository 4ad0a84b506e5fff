//! Runs every case of the conformance kit against the SQLite store.

use std::path::Path;

use mqlite_engine_core::{Error, Result, SharedClock};
use mqlite_store_sqlite::{SqliteOptions, SqliteStore, SqliteTx};
use mqlite_tck::{Capability, StoreFactory};

struct Sqlite;

impl StoreFactory for Sqlite {
    type Store = SqliteStore;

    async fn open(&self, dir: &Path, clock: SharedClock) -> Result<SqliteStore> {
        let path = dir.join("mq.db").to_string_lossy().into_owned();
        SqliteStore::open(SqliteOptions::new(path).clock(clock)).await
    }

    fn unsupported(&self, cap: Capability) -> Option<&'static str> {
        match cap {
            Capability::RemoteCancel => {
                Some("a local SQLite statement is never interrupted; it finishes (13.3)")
            }
            Capability::Reopen | Capability::FileLock | Capability::SchemaGuard => None,
        }
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

    fn insert_business_row(tx: &mut SqliteTx<'_>, id: i64) -> Result<()> {
        let sql = tx.sql()?;
        sql.execute(
            "CREATE TABLE IF NOT EXISTS business (id INTEGER PRIMARY KEY) STRICT",
            [],
        )
        .map_err(|e| Error::backend("sqlite", e))?;
        sql.execute("INSERT INTO business (id) VALUES (?1)", [id])
            .map_err(|e| Error::backend("sqlite", e))?;
        Ok(())
    }

    fn business_rows(tx: &mut SqliteTx<'_>) -> Result<Vec<i64>> {
        let sql = tx.sql()?;
        let exists: bool = sql
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE name = 'business')",
                [],
                |r| r.get(0),
            )
            .map_err(|e| Error::backend("sqlite", e))?;
        if !exists {
            return Ok(Vec::new());
        }
        let mut stmt = sql
            .prepare("SELECT id FROM business ORDER BY id")
            .map_err(|e| Error::backend("sqlite", e))?;
        let ids = stmt
            .query_map([], |r| r.get(0))
            .map_err(|e| Error::backend("sqlite", e))?
            .collect::<rusqlite::Result<Vec<i64>>>()
            .map_err(|e| Error::backend("sqlite", e))?;
        Ok(ids)
    }
}

fn main() {
    mqlite_tck::run(Sqlite)
}

//! The conformance kit's factory for the SQLite store: where a case's database lives,
//! what the store cannot do, and the hooks that reach past the store (the
//! application's own table, the schema token, `PRAGMA integrity_check`).

use std::path::{Path, PathBuf};

use mqlite_contract::{Error, OutboxStore, Result, SharedClock};
use mqlite_store_sqlite::{SqliteOptions, SqliteStore, rusqlite};
use mqlite_tck::{Capability, StoreFactory};

use crate::Tested;

fn db(e: rusqlite::Error) -> Error {
    Error::backend("sqlite", e)
}

impl Tested for SqliteStore {
    type Factory = SqliteFactory;
}

/// Opens `<dir>/mq.db`.
#[derive(Debug, Clone, Copy, Default)]
pub struct SqliteFactory;

impl SqliteFactory {
    /// The database file in a case's directory.
    pub fn db_path(dir: &Path) -> PathBuf {
        dir.join("mq.db")
    }
}

#[allow(
    clippy::future_not_send,
    reason = "runs on the writer thread, which owns the connection; never on the executor"
)]
impl StoreFactory for SqliteFactory {
    type Store = SqliteStore;

    async fn open(&self, dir: &Path, clock: SharedClock) -> Result<SqliteStore> {
        let path = Self::db_path(dir).to_string_lossy().into_owned();
        // `MQLITE_SQLITE_CALLER_THREAD=0`: every call on the writer thread, where every
        // send of one message goes through the merge (docs/operations.md, long checks).
        let caller_thread =
            std::env::var_os("MQLITE_SQLITE_CALLER_THREAD").is_none_or(|v| v != "0");
        SqliteStore::open(
            SqliteOptions::new(path)
                .clock(clock)
                .caller_thread(caller_thread),
        )
        .await
    }

    fn unsupported(&self, cap: Capability) -> Option<&'static str> {
        match cap {
            Capability::RemoteCancel => {
                Some("a local SQLite statement is never interrupted; it finishes (13.3)")
            }
            Capability::Reopen
            | Capability::FileLock
            | Capability::SchemaGuard
            | Capability::WorkCounter
            | Capability::LocalFile => None,
        }
    }

    fn db_file(&self, dir: &Path) -> Option<PathBuf> {
        Some(Self::db_path(dir))
    }

    fn set_schema_token(&self, dir: &Path, token: &str) -> Result<()> {
        let conn = rusqlite::Connection::open(Self::db_path(dir)).map_err(db)?;
        conn.execute(
            "UPDATE mqlite_meta SET value = ?1 WHERE key = 'schema_token'",
            [token],
        )
        .map_err(db)?;
        Ok(())
    }

    async fn insert_business_row(
        tx: &mut <SqliteStore as OutboxStore>::Tx<'_>,
        id: i64,
    ) -> Result<()> {
        let sql = tx.sql()?;
        sql.execute(
            "CREATE TABLE IF NOT EXISTS business (id INTEGER PRIMARY KEY) STRICT",
            [],
        )
        .map_err(db)?;
        sql.execute("INSERT INTO business (id) VALUES (?1)", [id])
            .map_err(db)?;
        Ok(())
    }

    async fn business_rows(tx: &mut <SqliteStore as OutboxStore>::Tx<'_>) -> Result<Vec<i64>> {
        let sql = tx.sql()?;
        let exists: bool = sql
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE name = 'business')",
                [],
                |r| r.get(0),
            )
            .map_err(db)?;
        if !exists {
            return Ok(Vec::new());
        }
        let mut stmt = sql
            .prepare("SELECT id FROM business ORDER BY id")
            .map_err(db)?;
        stmt.query_map([], |r| r.get(0))
            .map_err(db)?
            .collect::<rusqlite::Result<Vec<i64>>>()
            .map_err(db)
    }

    async fn plan_pins(&self, dir: &Path) -> Vec<(String, std::result::Result<(), String>)> {
        let path = Self::db_path(dir).to_string_lossy().into_owned();
        let store = match SqliteStore::open(SqliteOptions::new(path)).await {
            Ok(s) => s,
            Err(e) => return vec![("plans".into(), Err(format!("open: {e}")))],
        };
        let verdicts =
            mqlite_sql::plan::judge_all(|sql| store.explain(sql, mqlite_sql::plan::realistic))
                .await;
        mqlite_contract::Store::close(&store).await;
        verdicts
    }

    fn integrity_check(&self, dir: &Path) -> Result<Option<String>> {
        if !Self::db_path(dir).exists() {
            return Ok(None);
        }
        let conn = rusqlite::Connection::open_with_flags(
            Self::db_path(dir),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .map_err(db)?;
        let verdict: String = conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .map_err(db)?;
        Ok(Some(verdict))
    }
}

//! The conformance kit's factory for the redb store: where a case's database lives, what
//! the store cannot do, and the hooks that reach past the store (the application's own
//! table, the schema token, the file check).

use std::path::{Path, PathBuf};

use mqlite_contract::{Error, OutboxStore, Result, SharedClock};
use mqlite_store_redb::redb::{self, ReadableTable, TableDefinition};
use mqlite_store_redb::{RedbOptions, RedbStore};
use mqlite_tck::{Capability, StoreFactory};

use crate::Tested;

fn db(e: impl Into<redb::Error>) -> Error {
    Error::backend("redb", e.into())
}

impl Tested for RedbStore {
    type Factory = RedbFactory;
}

/// The application's own table in the outbox cases.
const BUSINESS: TableDefinition<i64, ()> = TableDefinition::new("business");

/// Opens `<dir>/mq.redb`.
#[derive(Debug, Clone, Copy, Default)]
pub struct RedbFactory;

impl RedbFactory {
    /// The database file in a case's directory.
    pub fn db_path(dir: &Path) -> PathBuf {
        dir.join("mq.redb")
    }
}

#[allow(
    clippy::future_not_send,
    reason = "runs on the writer thread, which owns the transaction; never on the executor"
)]
impl StoreFactory for RedbFactory {
    type Store = RedbStore;

    async fn open(&self, dir: &Path, clock: SharedClock) -> Result<RedbStore> {
        RedbStore::open(RedbOptions::new(Self::db_path(dir)).clock(clock)).await
    }

    fn unsupported(&self, cap: Capability) -> Option<&'static str> {
        match cap {
            Capability::RemoteCancel => {
                Some("a local redb transaction is never interrupted; it finishes (13.3)")
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
        mqlite_store_redb::set_schema_token(&Self::db_path(dir), token)
    }

    async fn insert_business_row(
        tx: &mut <RedbStore as OutboxStore>::Tx<'_>,
        id: i64,
    ) -> Result<()> {
        let mut table = tx.redb()?.open_table(BUSINESS).map_err(db)?;
        table.insert(id, ()).map_err(db)?;
        Ok(())
    }

    async fn business_rows(tx: &mut <RedbStore as OutboxStore>::Tx<'_>) -> Result<Vec<i64>> {
        let table = tx.redb()?.open_table(BUSINESS).map_err(db)?;
        let mut out = Vec::new();
        for e in table.iter().map_err(db)? {
            out.push(e.map_err(db)?.0.value());
        }
        Ok(out)
    }

    fn integrity_check(&self, dir: &Path) -> Result<Option<String>> {
        let path = Self::db_path(dir);
        if !path.exists() {
            return Ok(None);
        }
        // A store dropped without close() releases the file when its writer thread
        // ends, a moment after the drop: wait for that (bounded), never for a holder
        // that stays.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            match mqlite_store_redb::check_file(&path) {
                Err(Error::DbLocked { .. }) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                other => return other.map(Some),
            }
        }
    }
}

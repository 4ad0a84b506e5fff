//! Every case of the conformance kit against the template store, through the typed and
//! the run-time engine: `cargo test -p mqlite-store-template --test tck`. The factory
//! is what a new store writes beside its crate: where a case's data lives, what the
//! store cannot do, and the hooks that reach past the store. The template stands on
//! the SQLite store, so it lends the SQLite factory's hooks.

use std::path::{Path, PathBuf};

use mqlite_contract::{OutboxStore, Result, SharedClock, StoreKind};
use mqlite_store_template::TemplateStore;
use mqlite_tck::{Capability, StoreFactory};
use mqlite_testbed::sqlite::SqliteFactory;

/// Opens the template store over `<dir>/mq.db`.
#[derive(Debug, Clone, Copy, Default)]
struct TemplateFactory;

#[allow(
    clippy::future_not_send,
    reason = "the SQLite store's transaction runs on its writer thread, never on the executor"
)]
impl StoreFactory for TemplateFactory {
    type Store = TemplateStore;

    async fn open(&self, dir: &Path, clock: SharedClock) -> Result<TemplateStore> {
        TemplateStore::open_at(&SqliteFactory::db_path(dir).to_string_lossy(), clock).await
    }

    fn unsupported(&self, cap: Capability) -> Option<&'static str> {
        SqliteFactory.unsupported(cap)
    }

    fn db_file(&self, dir: &Path) -> Option<PathBuf> {
        SqliteFactory.db_file(dir)
    }

    fn set_schema_token(&self, dir: &Path, token: &str) -> Result<()> {
        SqliteFactory.set_schema_token(dir, token)
    }

    async fn insert_business_row(
        tx: &mut <TemplateStore as OutboxStore>::Tx<'_>,
        id: i64,
    ) -> Result<()> {
        SqliteFactory::insert_business_row(tx, id).await
    }

    async fn business_rows(tx: &mut <TemplateStore as OutboxStore>::Tx<'_>) -> Result<Vec<i64>> {
        SqliteFactory::business_rows(tx).await
    }

    fn integrity_check(&self, dir: &Path) -> Result<Option<String>> {
        SqliteFactory.integrity_check(dir)
    }
}

fn main() {
    mqlite_tck::run(TemplateStore::NAME, TemplateFactory)
}

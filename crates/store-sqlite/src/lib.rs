//! mqlite's default store: one local SQLite file through rusqlite.
//!
//! One writer thread owns the connection and runs every statement (no lock contention,
//! nothing blocking the async executor); the file is in WAL mode, `synchronous=NORMAL`
//! by default and FULL on request; advisory locks on `<db>.lock` and on a rendezvous
//! file named after the database's inode keep every other writer out, whatever name it
//! uses (10.1). The SQL text is the canonical text of `mqlite_engine_core::sql`.

mod admin;
mod claim;
mod enqueue;
mod lock;
mod rows;
mod schema;
mod settle;
mod sweeps;
#[cfg(feature = "tck")]
pub mod tck;
mod tx;
mod writer;

use std::path::PathBuf;

use mqlite_engine_core::{
    BatchResult, ClaimSpec, EnqueueSlot, Error, LockRef, Message, OpenStore, OutMessage,
    PeekOptions, PurgeOptions, QueueConfig, QueueInfo, QueueKind, QueueStats, RecoverTask,
    RedriveOptions, Result, SendOptions, SeqNumber, Settlement, SharedClock, Store, SystemClock,
};

pub use tx::SqliteTx;

/// The rusqlite version this store links, for the application's own statements in
/// [`SqliteTx::sql`].
pub use rusqlite;

use schema::Location;
use writer::Writer;

/// The backend name in errors.
const BACKEND: &str = "sqlite";

/// Converts a rusqlite error into the boundary's error.
pub(crate) fn db(e: rusqlite::Error) -> Error {
    Error::backend(BACKEND, e)
}

/// The durability point (10.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Synchronous {
    /// `synchronous=NORMAL` in WAL mode: a commit survives a process crash; the last
    /// commits may be lost on power failure.
    #[default]
    Normal,
    /// `synchronous=FULL`: an fsync per commit.
    Full,
}

impl Synchronous {
    /// Reads `MQLITE_SYNC` (`normal` | `full`); anything else is the default.
    pub fn from_env() -> Self {
        match std::env::var("MQLITE_SYNC") {
            Ok(v) if v.eq_ignore_ascii_case("full") => Synchronous::Full,
            _ => Synchronous::Normal,
        }
    }
}

/// How to open a SQLite store.
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    /// A file path, or `:memory:`.
    pub location: String,
    /// The durability point.
    pub synchronous: Synchronous,
    /// The clock every statement reads.
    pub clock: SharedClock,
}

impl SqliteOptions {
    /// Options for `location` with the system clock and `MQLITE_SYNC`.
    pub fn new(location: impl Into<String>) -> Self {
        SqliteOptions {
            location: location.into(),
            synchronous: Synchronous::from_env(),
            clock: SystemClock::shared(),
        }
    }

    /// Uses this clock.
    pub fn clock(mut self, clock: SharedClock) -> Self {
        self.clock = clock;
        self
    }

    /// Uses this durability point.
    pub fn synchronous(mut self, s: Synchronous) -> Self {
        self.synchronous = s;
        self
    }
}

/// The SQLite store.
pub struct SqliteStore {
    writer: Writer,
    clock: SharedClock,
    path: Option<PathBuf>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish()
    }
}

impl SqliteStore {
    /// Opens (creating if needed) the database; `DbLocked` if another writer holds it,
    /// `SchemaVersionMismatch` if it carries another schema token.
    pub async fn open(options: SqliteOptions) -> Result<Self> {
        let location = if options.location == ":memory:" {
            Location::Memory
        } else {
            let path = std::path::Path::new(&options.location);
            Location::File(lock::canonical_db_path(path)?)
        };
        let path = match &location {
            Location::File(p) => Some(p.clone()),
            Location::Memory => None,
        };
        let sync = options.synchronous;
        let writer = Writer::start(options.clock.clone(), move || {
            // The lock comes first: nothing, not even the guard check, reads a file that
            // another writer holds.
            let guard = match &location {
                Location::File(p) => Some(lock::lock_db(p)?),
                Location::Memory => None,
            };
            let conn = schema::open_connection(&location, sync)?;
            Ok((conn, guard))
        })
        .await?;
        Ok(SqliteStore {
            writer,
            clock: options.clock,
            path,
        })
    }

    /// The canonical path of the database file (None for `:memory:`).
    pub fn path(&self) -> Option<&std::path::Path> {
        self.path.as_deref()
    }

    /// Runs `EXPLAIN QUERY PLAN` for `sql` on the writer's connection (plan pins).
    /// Every named parameter is bound to NULL; only the plan matters.
    pub async fn explain(&self, sql: &str) -> Result<Vec<String>> {
        let text = format!("EXPLAIN QUERY PLAN {sql}");
        self.writer
            .run(move |conn, _| {
                let mut stmt = conn.prepare(&text).map_err(db)?;
                // `query_map([])` would refuse a statement that has parameters; bind each
                // to NULL by index and use the raw interface, which skips that check.
                for i in 1..=stmt.parameter_count() {
                    stmt.raw_bind_parameter(i, rusqlite::types::Null)
                        .map_err(db)?;
                }
                let rows = stmt
                    .raw_query()
                    .mapped(|r| r.get::<_, String>(3))
                    .collect::<rusqlite::Result<Vec<_>>>()
                    .map_err(db)?;
                Ok(rows)
            })
            .await
    }

    /// Runs a read-only query returning one integer (tests and diagnostics).
    pub async fn query_i64(&self, sql: &str) -> Result<i64> {
        let text = sql.to_owned();
        self.writer
            .run(move |conn, _| conn.query_row(&text, [], |r| r.get(0)).map_err(db))
            .await
    }
}

impl OpenStore for SqliteStore {
    async fn open_at(location: &str, clock: SharedClock) -> Result<Self> {
        SqliteStore::open(SqliteOptions::new(location).clock(clock)).await
    }
}

impl Store for SqliteStore {
    type Tx<'t> = SqliteTx<'t>;

    fn backend(&self) -> &'static str {
        BACKEND
    }

    fn clock(&self) -> &SharedClock {
        &self.clock
    }

    fn upsert_queue(
        &self,
        name: String,
        kind: QueueKind,
        config: QueueConfig,
        update_only: bool,
    ) -> impl Future<Output = Result<()>> + Send {
        self.writer
            .run_tx(move |tx, now| admin::upsert_queue(tx, now, &name, kind, &config, update_only))
    }

    fn delete_queue(&self, name: String) -> impl Future<Output = Result<bool>> + Send {
        self.writer
            .run_tx(move |tx, _| admin::delete_queue(tx, &name))
    }

    fn list_queues(&self) -> impl Future<Output = Result<Vec<QueueInfo>>> + Send {
        self.writer.run(|conn, _| admin::list_queues(conn))
    }

    fn enqueue(
        &self,
        queue: String,
        messages: Vec<OutMessage>,
        options: SendOptions,
    ) -> impl Future<Output = Result<Vec<EnqueueSlot>>> + Send {
        self.writer
            .run_tx(move |tx, now| enqueue::enqueue(tx, now, &queue, messages, options))
    }

    fn claim(
        &self,
        queue: String,
        spec: ClaimSpec,
    ) -> impl Future<Output = Result<Vec<Message>>> + Send {
        self.writer
            .run_tx(move |tx, now| claim::claim(tx, now, &queue, &spec))
    }

    fn settle(
        &self,
        queue: String,
        lock: LockRef,
        settlement: Settlement,
    ) -> impl Future<Output = Result<()>> + Send {
        self.writer
            .run_tx(move |tx, now| settle::settle(tx, now, &queue, lock, &settlement))
    }

    fn complete_batch(
        &self,
        queue: String,
        locks: Vec<LockRef>,
    ) -> impl Future<Output = Result<Vec<BatchResult>>> + Send {
        let clock = self.clock.clone();
        self.writer
            .run_tx(move |tx, _| settle::complete_batch(tx, &clock, &queue, &locks))
    }

    fn renew_batch(
        &self,
        queue: String,
        locks: Vec<LockRef>,
    ) -> impl Future<Output = Result<Vec<BatchResult>>> + Send {
        self.writer
            .run_tx(move |tx, now| settle::renew_batch(tx, now, &queue, &locks))
    }

    fn receive_deferred(
        &self,
        queue: String,
        seqs: Vec<SeqNumber>,
    ) -> impl Future<Output = Result<Vec<Message>>> + Send {
        self.writer
            .run_tx(move |tx, now| claim::receive_deferred(tx, now, &queue, &seqs))
    }

    fn cancel(&self, queue: String, seq: SeqNumber) -> impl Future<Output = Result<bool>> + Send {
        self.writer
            .run_tx(move |tx, _| admin::cancel(tx, &queue, seq))
    }

    fn peek(
        &self,
        queue: String,
        options: PeekOptions,
    ) -> impl Future<Output = Result<Vec<Message>>> + Send {
        self.writer
            .run(move |conn, _| admin::peek(conn, &queue, &options))
    }

    fn stats(&self, queue: String) -> impl Future<Output = Result<QueueStats>> + Send {
        self.writer
            .run(move |conn, now| admin::stats(conn, now, &queue))
    }

    fn redrive(
        &self,
        queue: String,
        options: RedriveOptions,
    ) -> impl Future<Output = Result<u64>> + Send {
        self.writer
            .run_tx(move |tx, now| admin::redrive(tx, now, &queue, &options))
    }

    fn purge(
        &self,
        queue: String,
        options: PurgeOptions,
    ) -> impl Future<Output = Result<u64>> + Send {
        self.writer
            .run_tx(move |tx, now| admin::purge(tx, now, &queue, &options))
    }

    fn recover(&self, task: RecoverTask) -> impl Future<Output = Result<u64>> + Send {
        self.writer
            .run_tx(move |tx, now| sweeps::recover(tx, now, task))
    }

    fn in_tx<R, E, F>(&self, f: F) -> impl Future<Output = Result<R, E>> + Send
    where
        F: for<'t> FnOnce(&mut Self::Tx<'t>) -> Result<R, E> + Send + 'static,
        R: Send + 'static,
        E: From<Error> + Send + 'static,
    {
        self.writer.run_app_tx(move |tx, now, gone| {
            let mut stx = SqliteTx { tx, now, gone };
            let out = f(&mut stx)?;
            // Cancelled before commit: dropping the transaction rolls it back (13.4, 16.1).
            if gone() {
                return Err(E::from(Error::Cancelled));
            }
            stx.tx.commit().map_err(|e| E::from(db(e)))?;
            Ok(out)
        })
    }

    fn close(&self) -> impl Future<Output = ()> + Send {
        self.writer.close()
    }
}

//! mqlite on redb: one local file of an embedded key-value engine, with the queue's
//! lookups built by hand as index tables (see `tables`), written in the same write
//! transaction as the rows they index.
//!
//! One writer thread owns the `redb::Database` and runs every transaction (nothing
//! blocks the async executor); every acknowledged commit is durable (redb's
//! `Durability::Immediate`). There is no group commit: each call commits on its own,
//! because redb offers no savepoint once a table is open in a transaction, so one
//! call's refusal inside a shared commit could not be undone alone. redb locks the file, so a second open anywhere is
//! `DbLocked` (10.1), which is also how this store owns its data
//! ([`Ownership::Exclusive`]). A file with another schema token, or one that is not a
//! redb database, is refused after a read-only look and left byte-for-byte unchanged
//! (10.2). The outbox hands the application redb's own `WriteTransaction` (16.1).

mod enc;
mod flows;
mod side_tables;
mod tables;
mod tx;
mod writer;

mod open;

pub use open::{check_file, set_schema_token};
use open::{display_path, open_database, open_paths};

use std::path::{Path, PathBuf};
use std::sync::Arc;

use mqlite_contract::{
    AccessKey, AdminOps, BatchResult, ClaimSpec, EnqueueSlot, Error, KeyOps, LockRef, Message,
    MessageOps, OutMessage, OutboxStore, Ownership, PeekOptions, PurgeOptions, QueueConfig,
    QueueInfo, QueueKind, QueueStats, RecoverTask, RedriveOptions, Result, Route, Schedule,
    ScheduleFire, ScheduleSpec, SendOptions, SeqNumber, Settlement, SharedClock, Store, StoreKind,
    StoreStatus, Subscription, SystemClock, TopicOps, WorkStats,
};
use mqlite_kit::{blocking::block_on, reserve::Reserve};

pub use tx::RedbTx;

/// The redb version this store links, for the application's own tables in
/// [`RedbTx::redb`].
pub use redb;

use tables::{Tables, WorkCounter};
use writer::Writer;

/// The backend name in errors.
const BACKEND: &str = "redb";

/// The schema guard token of this store's layout (10.2). An incompatible change of the
/// tables or their encodings must change it.
pub const SCHEMA_TOKEN: &str = "mqlite-redb/2";

/// The meta key of the schema token.
const TOKEN_KEY: &str = "schema_token";

/// Converts a redb error into the boundary's error.
pub(crate) fn db(e: impl Into<redb::Error>) -> Error {
    match e.into() {
        // The store names its file on the way out (`Error::at_location`).
        redb::Error::Io(io) if io.kind() == std::io::ErrorKind::StorageFull => Error::StorageFull {
            backend: BACKEND,
            location: String::new(),
        },
        other => Error::backend(BACKEND, other),
    }
}

/// How to open a redb store.
#[derive(Debug, Clone)]
pub struct RedbOptions {
    /// The database file (with [`RedbOptions::backend`], only its name in errors and
    /// status).
    pub path: PathBuf,
    /// The clock every transaction reads.
    pub clock: SharedClock,
    /// The storage under the database instead of the file at `path` (tests and tools).
    backend: Option<Arc<dyn redb::StorageBackend>>,
}

impl RedbOptions {
    /// Options for the file at `path` with the system clock.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        RedbOptions {
            path: path.into(),
            clock: SystemClock::shared(),
            backend: None,
        }
    }

    /// Puts the database on `backend` instead of the file at `path`, which then only
    /// names it. For tests and tools, such as the power-cut test that drops every write
    /// not yet synced: the file guards of 10.1 and 10.2 do not run (there is no file to
    /// look at or lock; a database holding another schema token is still refused), and
    /// the caller keeps a second open of the same storage out.
    pub fn backend(mut self, backend: Arc<dyn redb::StorageBackend>) -> Self {
        self.backend = Some(backend);
        self
    }

    /// Uses this clock.
    pub fn clock(mut self, clock: SharedClock) -> Self {
        self.clock = clock;
        self
    }
}

/// The redb store.
pub struct RedbStore {
    writer: Writer,
    /// The full-disk reserve (see [`mqlite_kit::reserve`]).
    reserve: Arc<Reserve>,
    clock: SharedClock,
    backend: Option<Arc<dyn redb::StorageBackend>>,
    path: PathBuf,
    work: Arc<WorkCounter>,
}

impl std::fmt::Debug for RedbStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedbStore")
            .field("path", &self.path)
            .finish()
    }
}

impl RedbStore {
    /// Opens (creating if needed) the database; `DbLocked` if another writer holds it,
    /// `SchemaVersionMismatch` if it carries another schema token or is not a redb
    /// database.
    pub async fn open(options: RedbOptions) -> Result<Self> {
        let path = options.path.clone();
        let p = path.clone();
        let backend = options.backend.clone();
        // A file on disk is checked before every commit; a backend of the caller's has
        // no path to check.
        let file = options.backend.is_none().then(|| path.clone());
        let reserve = Arc::new(Reserve::beside(
            file.as_deref(),
            BACKEND,
            display_path(&path).into(),
            options.clock.clone(),
        ));
        let writer = Writer::start(options.clock.clone(), file, reserve.clone(), move || {
            open_database(&p, backend.clone())
        })
        .await?;
        open_paths()
            .get_or_insert_with(Default::default)
            .insert(display_path(&path));
        Ok(RedbStore {
            writer,
            reserve,
            clock: options.clock,
            backend: options.backend,
            path,
            work: Arc::new(WorkCounter::default()),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` over every table in one write transaction on the writer thread.
    fn tx<R, F>(&self, f: F) -> impl Future<Output = Result<R>> + Send + 'static
    where
        R: Send + 'static,
        F: FnOnce(&mut Tables<'_>, i64) -> Result<R> + Send + 'static,
    {
        let work = self.work.clone();
        self.writer.run_tx(move |txn, now| {
            let mut t = Tables::open(txn, &work)?;
            f(&mut t, now)
        })
    }

    /// [`RedbStore::tx`] for the flows that add messages (send, publish): refused at
    /// once with `StorageFull` while the disk is full and the reserve is given up to
    /// the drain; when a retry is due, the writer first compacts the database and tries
    /// to put the reserve back, and the flow runs behind that only if it is.
    fn tx_growing<R, F>(&self, f: F) -> impl Future<Output = Result<R>> + Send + 'static
    where
        R: Send + 'static,
        F: FnOnce(&mut Tables<'_>, i64) -> Result<R> + Send + 'static,
    {
        let make_room = |reserve| self.writer.make_room(reserve);
        let write = |reserve: Arc<Reserve>| {
            self.tx(move |t, now| {
                reserve.ensure_armed()?;
                f(t, now)
            })
        };
        self.reserve.growing(make_room, write)
    }

    /// The consistency check on the open store: "ok" when every index entry matches
    /// its row and every row has its entries, else the first disagreement.
    pub async fn check_consistency(&self) -> Result<String> {
        self.tx(|t, _| t.check()).await
    }
}

/// The redb store's registration: `redb:<path>`.
impl StoreKind for RedbStore {
    const NAME: &'static str = BACKEND;
    const SCHEMES: &'static [&'static str] = &["redb"];
    const LOCAL_FILE: bool = true;

    async fn open_at(location: &str, clock: SharedClock) -> Result<Self> {
        RedbStore::open(RedbOptions::new(location).clock(clock)).await
    }
}

impl Store for RedbStore {
    fn backend(&self) -> &'static str {
        BACKEND
    }

    fn clock(&self) -> &SharedClock {
        &self.clock
    }

    fn ownership(&self) -> Ownership {
        // redb's file lock is held from open to close.
        Ownership::Exclusive
    }

    fn work(&self) -> Option<WorkStats> {
        Some(self.work.get())
    }

    fn status(&self) -> impl Future<Output = Result<StoreStatus>> + Send {
        let location = display_path(&self.path);
        let size_bytes = match &self.backend {
            Some(backend) => backend.len().ok(),
            None => std::fs::metadata(&self.path).ok().map(|m| m.len()),
        };
        let work = self.work.clone();
        self.writer.run_tx(move |txn, _| {
            let t = Tables::open(txn, &work)?;
            let token = redb::ReadableTable::get(&t.meta, TOKEN_KEY)
                .map_err(db)?
                .map(|v| String::from_utf8_lossy(v.value()).into_owned())
                .unwrap_or_default();
            let (queues, topics, subscriptions) = flows::counts(&t)?;
            drop(t);
            let relay = side_tables::relay_backlog(txn)?;
            Ok(StoreStatus {
                relay,
                backend: BACKEND,
                location,
                remote: false,
                schema_token: token,
                size_bytes,
                queues,
                topics,
                subscriptions,
            })
        })
    }

    fn close(&self) -> impl Future<Output = ()> + Send {
        let key = display_path(&self.path);
        let closing = self.writer.close();
        async move {
            closing.await;
            if let Some(set) = open_paths().as_mut() {
                set.remove(&key);
            }
        }
    }
}

impl MessageOps for RedbStore {
    fn enqueue(
        &self,
        queue: String,
        messages: Vec<OutMessage>,
        options: SendOptions,
    ) -> impl Future<Output = Result<Vec<EnqueueSlot>>> + Send {
        self.tx_growing(move |t, now| flows::enqueue(t, now, &queue, messages, options))
    }

    fn claim(
        &self,
        queue: String,
        spec: ClaimSpec,
    ) -> impl Future<Output = Result<Vec<Message>>> + Send {
        self.tx(move |t, now| flows::claim(t, now, &queue, &spec))
    }

    fn settle(
        &self,
        queue: String,
        lock: LockRef,
        settlement: Settlement,
    ) -> impl Future<Output = Result<()>> + Send {
        self.tx(move |t, now| flows::settle(t, now, &queue, lock, &settlement))
    }

    fn complete_batch(
        &self,
        queue: String,
        locks: Vec<LockRef>,
    ) -> impl Future<Output = Result<Vec<BatchResult>>> + Send {
        self.tx(move |t, now| flows::complete_batch(t, now, &queue, &locks))
    }

    fn complete_and_claim(
        &self,
        queue: String,
        locks: Vec<LockRef>,
        spec: ClaimSpec,
    ) -> impl Future<Output = Result<(Vec<BatchResult>, Vec<Message>)>> + Send {
        self.tx(move |t, now| {
            let done = flows::complete_batch(t, now, &queue, &locks)?;
            let got = flows::claim(t, now, &queue, &spec)?;
            Ok((done, got))
        })
    }

    fn renew_batch(
        &self,
        queue: String,
        locks: Vec<LockRef>,
    ) -> impl Future<Output = Result<Vec<BatchResult>>> + Send {
        self.tx(move |t, now| flows::renew_batch(t, now, &queue, &locks))
    }

    fn receive_deferred(
        &self,
        queue: String,
        seqs: Vec<SeqNumber>,
    ) -> impl Future<Output = Result<Vec<Message>>> + Send {
        self.tx(move |t, now| flows::receive_deferred(t, now, &queue, &seqs))
    }

    fn cancel(&self, queue: String, seq: SeqNumber) -> impl Future<Output = Result<bool>> + Send {
        self.tx(move |t, _| flows::cancel(t, &queue, seq))
    }
}

impl AdminOps for RedbStore {
    fn upsert_queue(
        &self,
        name: String,
        kind: QueueKind,
        config: QueueConfig,
        update_only: bool,
    ) -> impl Future<Output = Result<()>> + Send {
        self.tx(move |t, now| flows::upsert_queue(t, now, &name, kind, &config, update_only))
    }

    fn delete_queue(&self, name: String) -> impl Future<Output = Result<bool>> + Send {
        self.tx(move |t, _| flows::delete_queue(t, &name))
    }

    fn list_queues(&self) -> impl Future<Output = Result<Vec<QueueInfo>>> + Send {
        self.tx(|t, _| flows::list_queues(t))
    }

    fn peek(
        &self,
        queue: String,
        options: PeekOptions,
    ) -> impl Future<Output = Result<Vec<Message>>> + Send {
        self.tx(move |t, _| flows::peek(t, &queue, &options))
    }

    fn stats(&self, queue: String) -> impl Future<Output = Result<QueueStats>> + Send {
        self.tx(move |t, now| flows::stats(t, now, &queue))
    }

    fn redrive(
        &self,
        queue: String,
        options: RedriveOptions,
    ) -> impl Future<Output = Result<u64>> + Send {
        self.tx(move |t, now| flows::redrive(t, now, &queue, &options))
    }

    fn purge(
        &self,
        queue: String,
        options: PurgeOptions,
    ) -> impl Future<Output = Result<u64>> + Send {
        self.tx(move |t, now| flows::purge(t, now, &queue, &options))
    }

    fn recover(&self, task: RecoverTask) -> impl Future<Output = Result<u64>> + Send {
        self.tx(move |t, now| flows::recover(t, now, task))
    }

    fn put_schedule(
        &self,
        spec: ScheduleSpec,
        next_at_ms: i64,
    ) -> impl Future<Output = Result<Schedule>> + Send {
        self.tx(move |t, now| flows::put_schedule(t, now, &spec, next_at_ms))
    }

    fn list_schedules(&self) -> impl Future<Output = Result<Vec<Schedule>>> + Send {
        self.tx(|t, _| flows::list_schedules(t))
    }

    fn delete_schedule(&self, name: String) -> impl Future<Output = Result<bool>> + Send {
        self.tx(move |t, _| flows::delete_schedule(t, &name))
    }

    fn fire_schedule(&self, fire: ScheduleFire) -> impl Future<Output = Result<bool>> + Send {
        self.tx(move |t, now| flows::fire_schedule(t, now, fire))
    }
}

impl KeyOps for RedbStore {
    fn create_key(&self, key: AccessKey) -> impl Future<Output = Result<()>> + Send {
        self.tx(move |t, _| flows::create_key(t, &key))
    }

    fn list_keys(
        &self,
        after_id: Option<String>,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<AccessKey>>> + Send {
        self.tx(move |t, _| flows::list_keys(t, after_id.as_deref(), limit))
    }

    fn revoke_key(&self, id: String) -> impl Future<Output = Result<bool>> + Send {
        self.tx(move |t, now| flows::revoke_key(t, now, &id))
    }

    fn key_by_digest(
        &self,
        digest: String,
    ) -> impl Future<Output = Result<Option<AccessKey>>> + Send {
        self.tx(move |t, _| flows::key_by_digest(t, &digest))
    }
}

impl TopicOps for RedbStore {
    fn upsert_subscription(
        &self,
        subscription: Subscription,
        config: QueueConfig,
    ) -> impl Future<Output = Result<()>> + Send {
        self.tx(move |t, now| flows::upsert_subscription(t, now, &subscription, &config))
    }

    fn list_subscriptions(
        &self,
        topic: Option<String>,
    ) -> impl Future<Output = Result<Vec<Subscription>>> + Send {
        self.tx(move |t, _| flows::list_subscriptions(t, topic.as_deref()))
    }

    fn publish(
        &self,
        topic: String,
        routes: Vec<Route>,
        options: SendOptions,
    ) -> impl Future<Output = Result<Vec<Vec<EnqueueSlot>>>> + Send {
        self.tx_growing(move |t, now| flows::publish(t, now, &topic, routes, options))
    }
}

impl Drop for RedbStore {
    fn drop(&mut self) {
        if let Some(set) = open_paths().as_mut() {
            set.remove(&display_path(&self.path));
        }
    }
}

impl OutboxStore for RedbStore {
    type Tx<'t> = RedbTx<'t>;

    fn in_tx<R, E, F>(&self, f: F) -> impl Future<Output = Result<R, E>> + Send
    where
        F: for<'a, 't> AsyncFnOnce(&'a mut Self::Tx<'t>) -> Result<R, E> + Send + 'static,
        R: Send + 'static,
        E: From<Error> + Send + 'static,
    {
        // The body may await tokio timers or channels: it runs on the writer thread
        // inside the caller's runtime.
        let runtime = tokio::runtime::Handle::try_current().ok();
        let work = self.work.clone();
        let file = self.writer.file();
        self.writer.run_app_tx(move |txn, now, gone| {
            let mut stx = RedbTx {
                txn,
                now,
                gone,
                work: &work,
            };
            let out = block_on(runtime.as_ref(), f(&mut stx))?;
            // Cancelled before commit: dropping the transaction aborts it (13.4, 16.1).
            if gone() {
                return Err(E::from(Error::Cancelled));
            }
            // Never committed into a file that was deleted or replaced.
            file.check().map_err(E::from)?;
            stx.txn
                .commit()
                .map_err(|e| E::from(db(e).at_location(&file.location())))?;
            Ok(out)
        })
    }
}

//! mqlite's default store: one local SQLite file through rusqlite.
//!
//! One connection, owned by a writer thread: a short call that finds the store idle
//! runs on its caller's thread (a WAL commit under `synchronous=NORMAL` does not
//! fsync), while contended calls, long ones and FULL commits run on the writer thread
//! (the store kit's `writer/`), and checkpoints mostly on a thread of their own
//! (`checkpoint.rs`; docs/internals.md, "Where store work runs"). The file is in WAL
//! mode, `synchronous=NORMAL` by default and FULL on request; advisory locks on
//! `<db>.lock` and on a rendezvous file named after the database's inode keep every
//! other writer out, whatever name it uses (10.1), which is also how this store owns
//! its data ([`Ownership::Exclusive`]).
//!
//! The statements and the flows between them are `mqlite_sql`'s, shared with every SQL
//! store; this crate supplies the connection, the thread and the lock.

mod checkpoint;
mod exec;
mod lock;
mod merge;
mod migrate;
mod schema;
mod tx;
mod writer;

pub use mqlite_kit::reserve::RESERVE_BYTES;
use mqlite_kit::writer::Merge;
pub use mqlite_kit::writer::{HoldBound, HoldSnapshot};
use mqlite_kit::{blocking::block_on, reserve::Reserve};

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use mqlite_contract::{
    ClaimSpec, EnqueueSlot, Error, LockRef, Message, OutMessage, OutboxStore, Ownership, Result,
    SendOptions, Settlement, SharedClock, Store, StoreKind, StoreStatus, SystemClock, WorkStats,
};
use mqlite_sql as sql;
use mqlite_sql::KnownQueues;

pub use migrate::{MigrationReport, migrate};
pub use tx::SqliteTx;

/// The rusqlite version this store links, for the application's own statements in
/// [`SqliteTx::sql`].
pub use rusqlite;

use exec::{Exec, WorkCounter};
use schema::DbPath;
use writer::Writer;

/// The backend name in errors.
const BACKEND: &str = "sqlite";

/// The most items (messages, locks) a call may carry and still run on its caller's
/// thread: a send of 64 takes well under the executor's 1 ms budget, measured by the
/// benches' lateness probe (docs/benchmark.md).
const INLINE_ITEMS: usize = 64;

/// Converts a rusqlite error into the boundary's error.
pub(crate) fn db(e: rusqlite::Error) -> Error {
    match &e {
        // The store names its file on the way out (`Error::at_location`).
        rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::DiskFull => {
            Error::StorageFull {
                backend: BACKEND,
                location: String::new(),
            }
        }
        _ => Error::backend(BACKEND, e),
    }
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
    /// `synchronous=OFF`: no fsync at all. A commit survives a process crash; an
    /// operating-system crash or a power failure may lose commits or damage the file.
    Off,
    /// `synchronous=EXTRA`: FULL, and the directory synced too where SQLite deletes a
    /// journal (in WAL mode, FULL's durability).
    Extra,
}

impl Synchronous {
    /// Reads `MQLITE_SYNC` (`normal` | `full` | `off` | `extra`); anything else is the
    /// default.
    pub fn from_env() -> Self {
        std::env::var("MQLITE_SYNC")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or_default()
    }

    /// The value of SQLite's `PRAGMA synchronous`.
    pub fn pragma(self) -> &'static str {
        match self {
            Synchronous::Normal => "NORMAL",
            Synchronous::Full => "FULL",
            Synchronous::Off => "OFF",
            Synchronous::Extra => "EXTRA",
        }
    }

    /// Whether a commit waits for the disk (an fsync): FULL and EXTRA.
    pub fn fsyncs(self) -> bool {
        matches!(self, Synchronous::Full | Synchronous::Extra)
    }
}

impl std::str::FromStr for Synchronous {
    type Err = Error;

    /// `normal`, `full`, `off` or `extra`, in any case.
    fn from_str(text: &str) -> Result<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "normal" => Ok(Synchronous::Normal),
            "full" => Ok(Synchronous::Full),
            "off" => Ok(Synchronous::Off),
            "extra" => Ok(Synchronous::Extra),
            _ => Err(Error::invalid(format!(
                "sync {text:?} is not understood: normal, full, off or extra"
            ))),
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
    /// Whether a short call that finds the store idle runs on its caller's thread
    /// (default: yes under `synchronous=NORMAL`, where a commit does not fsync). Off,
    /// every call goes to the writer thread and back — the measured alternative
    /// (docs/benchmark.md), for a program that wants its executor threads to run no
    /// SQLite at all.
    pub caller_thread: bool,
    /// Whether the write-ahead log takes each commit's frames in one write (default:
    /// yes), through the VFS of `mqlite-sqlite-vfs`, where SQLite alone makes two
    /// writes per page (docs/internals.md, "One write per commit"), and whose WAL
    /// index's locks are kept between transactions ("The WAL index's locks, kept
    /// between transactions"). Off, the connections use SQLite's default VFS unchanged.
    pub gather_wal_writes: bool,
}

impl SqliteOptions {
    /// Options for `location` with the system clock and `MQLITE_SYNC`.
    pub fn new(location: impl Into<String>) -> Self {
        SqliteOptions {
            location: location.into(),
            synchronous: Synchronous::from_env(),
            clock: SystemClock::shared(),
            caller_thread: true,
            gather_wal_writes: true,
        }
    }

    /// Whether short calls may run on the caller's thread (see
    /// [`SqliteOptions::caller_thread`]).
    pub fn caller_thread(mut self, on: bool) -> Self {
        self.caller_thread = on;
        self
    }

    /// Whether commits reach the WAL in one write (see
    /// [`SqliteOptions::gather_wal_writes`]).
    pub fn gather_wal_writes(mut self, on: bool) -> Self {
        self.gather_wal_writes = on;
        self
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
    work: Arc<WorkCounter>,
    /// The database's path as errors name it (`:memory:` for a private one).
    location: Arc<str>,
    reserve: Arc<Reserve>,
    /// The queue rows this store vouches for (it is the file's one writer).
    known: Arc<KnownQueues>,
    /// Set once this store is closing or dropped: an open of the same file in this
    /// process then waits for the release instead of failing with `DbLocked`.
    releasing: Arc<AtomicBool>,
    /// Sends of one message that wait for the writer, merged into one INSERT
    /// ([`merge`]).
    sends: Arc<merge::Sends>,
    /// Completions of one lock that wait for the writer, merged into one delete
    /// ([`merge`]).
    completes: Arc<merge::Completes>,
    /// Receives that wait for the writer, merged into one claim ([`merge`]).
    claims: Arc<merge::Claims>,
}

impl Drop for SqliteStore {
    fn drop(&mut self) {
        // The writer thread finishes the queued work, closes the connection and releases
        // the lock after this; a reopen meanwhile waits for it.
        self.releasing.store(true, Ordering::Release);
    }
}

/// Runs a shared flow on the writer's connection (in the transaction its caller
/// opened), counting its statements in `work`.
fn run_flow<R>(
    conn: &mut writer::Conn,
    work: &WorkCounter,
    now: i64,
    f: impl for<'a, 'c> AsyncFnOnce(&'a mut Exec<'c>, i64) -> Result<R>,
) -> Result<R> {
    // The flows' futures are ready at once: rusqlite answers synchronously.
    block_on(None, f(&mut conn.exec(work), now))
}

/// A store call's future, boxed: the ways a call may run take kilobytes together, which
/// every caller's future would otherwise hold and move at each await.
type Boxed<R> = std::pin::Pin<Box<dyn Future<Output = Result<R>> + Send + 'static>>;

/// Which way a send runs ([`SqliteStore::sql_enqueue`]).
enum Way<M, F, A> {
    /// One message, merged with the others waiting for the writer thread.
    Merged(M),
    /// One message, on the caller's thread if the store is still idle when polled, else
    /// merged.
    First(F),
    /// Any other send: a call of its own.
    Alone(A),
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
            DbPath::Memory
        } else {
            let path = std::path::Path::new(&options.location);
            // Refused before any lock or file is made beside it.
            if path.is_dir() {
                return Err(Error::NotADatabase {
                    path: options.location.clone(),
                    detail: "it is a directory; name a file inside it, such as app.db".into(),
                });
            }
            DbPath::File(lock::canonical_db_path(path)?)
        };
        let path = match &location {
            DbPath::File(p) => Some(p.clone()),
            DbPath::Memory => None,
        };
        let sync = options.synchronous;
        let releasing = Arc::new(AtomicBool::new(false));
        let flag = releasing.clone();
        // A WAL commit under NORMAL does not fsync: short calls may run on their
        // caller's thread. Under FULL every commit does, so every call goes to the
        // writer thread, where waiting calls share one commit and its fsync.
        let inline = options.caller_thread && !sync.fsyncs();
        let gather = options.gather_wal_writes;
        let file = path.clone();
        let known = Arc::new(KnownQueues::default());
        let writer = Writer::start(
            options.clock.clone(),
            inline,
            sync,
            file,
            gather,
            known.clone(),
            move || {
                // The lock comes first: nothing, not even the guard check, reads a file that
                // another writer holds.
                let guard = match &location {
                    DbPath::File(p) => Some(lock::lock_db(p, flag)?),
                    DbPath::Memory => None,
                };
                let conn = schema::open_connection(&location, sync, gather)?;
                Ok((conn, guard))
            },
        )
        .await?;
        let location: Arc<str> = path
            .as_ref()
            .map_or_else(|| ":memory:".into(), |p| p.display().to_string().into());
        let reserve = Arc::new(Reserve::beside(
            path.as_deref(),
            BACKEND,
            location.clone(),
            options.clock.clone(),
        ));
        let work = Arc::new(WorkCounter::default());
        Ok(SqliteStore {
            writer,
            clock: options.clock,
            location,
            sends: Arc::new(merge::sends(work.clone(), reserve.clone())),
            completes: Arc::new(merge::completes(work.clone())),
            claims: Arc::new(merge::claims(work.clone())),
            reserve,
            known,
            path,
            work,
            releasing,
        })
    }

    /// Runs a shared flow over `items` items (messages, locks) in one IMMEDIATE
    /// transaction, with the statement-time clock reading, counting its statements. A
    /// flow over at most [`INLINE_ITEMS`] items is short: it runs on the caller's thread
    /// when the store is idle; a longer one (and every scan: stats, purge, sweeps) runs
    /// on the writer thread, so it never holds an executor thread past the budget.
    fn sql_tx_sized<R, F>(
        &self,
        items: usize,
        f: F,
    ) -> impl Future<Output = Result<R>> + Send + 'static
    where
        R: Send + 'static,
        F: for<'a, 'c> AsyncFnOnce(&'a mut Exec<'c>, i64) -> Result<R> + Send + 'static,
    {
        let work = self.work.clone();
        let run = self.writer.run_tx(items <= INLINE_ITEMS, move |conn, now| {
            run_flow(conn, &work, now, f)
        });
        self.finish(run)
    }

    /// What every write's caller hears: a full disk gives the reserve up to the drain
    /// ([`mqlite_kit::reserve`]), and an error names the database.
    fn finish<R>(
        &self,
        run: impl Future<Output = Result<R>> + Send + 'static,
    ) -> impl Future<Output = Result<R>> + Send + 'static {
        let reserve = self.reserve.clone();
        let location = self.location.clone();
        async move {
            run.await.map_err(|e| {
                if matches!(e, Error::StorageFull { .. }) {
                    reserve.release();
                }
                e.at_location(&location)
            })
        }
    }

    /// [`store_ops!`](sql::store_ops)'s entry for the flows that add messages (send,
    /// publish): refused at once with `StorageFull` while the disk is full and the
    /// reserve is given up to the drain (see [`mqlite_kit::reserve`]). When a retry is due, the
    /// writer first truncates the WAL and tries to put the reserve back; the flow is
    /// queued behind that and runs only if it succeeded. A refused flow is never
    /// handed to the writer.
    fn sql_tx_growing<R, F>(
        &self,
        items: usize,
        f: F,
    ) -> impl Future<Output = Result<R>> + Send + 'static
    where
        R: Send + 'static,
        F: for<'a, 'c> AsyncFnOnce(&'a mut Exec<'c>, i64) -> Result<R> + Send + 'static,
    {
        self.growing(move |reserve: Arc<Reserve>| {
            self.sql_tx_sized(items, async move |x: &mut Exec<'_>, now: i64| {
                reserve.ensure_armed()?;
                f(x, now).await
            })
        })
    }

    /// Runs `write`, a write that adds messages, behind the full-disk reserve
    /// ([`Reserve::growing`]): refused at once while the disk is full, and when a retry
    /// is due, queued behind a truncation of the WAL that gives its space back.
    fn growing<R, Run>(
        &self,
        write: impl FnOnce(Arc<Reserve>) -> Run,
    ) -> impl Future<Output = Result<R>> + Send + 'static
    where
        R: Send + 'static,
        Run: Future<Output = Result<R>> + Send + 'static,
    {
        let make_room = |reserve: Arc<Reserve>| {
            self.writer.run_conn(move |conn| {
                match conn.truncate_wal() {
                    Ok(true) => {}
                    Ok(false) => tracing::warn!(
                        "truncating the WAL on a full disk found it in use by another process"
                    ),
                    Err(e) => {
                        tracing::warn!(error = %e, "truncating the WAL on a full disk failed")
                    }
                }
                reserve.rearm();
                Ok(())
            })
        };
        self.reserve.growing(make_room, write)
    }

    /// [`store_ops!`](sql::store_ops)'s send. A send of one message that finds the store
    /// busy (callers contend, or commits fsync) is merged with the others waiting into
    /// one INSERT ([`merge`]); any other send runs its flow in a call of its own.
    fn sql_enqueue(
        &self,
        queue: String,
        mut messages: Vec<OutMessage>,
        options: SendOptions,
    ) -> impl Future<Output = Result<Vec<EnqueueSlot>>> + Send + 'static {
        let way = match messages.pop() {
            Some(message) if messages.is_empty() => {
                let send = merge::OneSend {
                    queue,
                    message,
                    options,
                };
                if self.writer.idle() {
                    let work = self.work.clone();
                    Way::First(self.finish(self.growing(|reserve| {
                        self.writer.run_alone_or_merged(
                            &self.sends,
                            send,
                            move |send, conn, now| {
                                reserve.ensure_armed()?;
                                let merge::OneSend {
                                    queue,
                                    message,
                                    options,
                                } = send;
                                run_flow(conn, &work, now, async move |x, now| {
                                    let messages = vec![message];
                                    sql::enqueue::enqueue(x, now, &queue, messages, options, true)
                                        .await
                                })
                            },
                        )
                    })))
                } else {
                    Way::Merged(
                        self.finish(self.growing(|_| self.writer.run_merged(&self.sends, send))),
                    )
                }
            }
            last => {
                messages.extend(last);
                Way::Alone(self.sql_tx_growing(messages.len(), async move |x, now| {
                    sql::enqueue::enqueue(x, now, &queue, messages, options, true).await
                }))
            }
        };
        // Boxed: the ways' futures together take about 4 KiB, which every caller's
        // future would hold and move at each await (a profile of a single send had
        // 7 % of its time in that memcpy).
        Box::pin(async move {
            match way {
                Way::Merged(f) => f.await,
                Way::First(f) => f.await,
                Way::Alone(f) => f.await,
            }
        })
    }

    /// [`store_ops!`](sql::store_ops)'s receive. A peek-lock receive of at most
    /// [`merge::MERGED_CLAIM`] messages without a receive attempt may merge with the
    /// others waiting into one claim ([`Self::one_or_merged`]); any other receive runs
    /// its flow in a call of its own.
    fn sql_claim(&self, queue: String, spec: ClaimSpec) -> Boxed<Vec<Message>> {
        if !merge::OneClaim::merges(&spec) {
            return Box::pin(
                self.sql_tx_sized(spec.max_messages as usize, async move |x, now| {
                    sql::claim::claim(x, now, &queue, &spec).await
                }),
            );
        }
        self.one_or_merged(
            &self.claims,
            merge::OneClaim { queue, spec },
            |one, x, now| block_on(None, sql::claim::claim(x, now, &one.queue, &one.spec)),
        )
    }

    /// [`store_ops!`](sql::store_ops)'s settlement of one lock. A completion may merge
    /// with the others waiting into one delete ([`Self::one_or_merged`]); any other
    /// settlement runs its flow in a call of its own.
    fn sql_settle(&self, queue: String, lock: LockRef, settlement: Settlement) -> Boxed<()> {
        if settlement != Settlement::Complete {
            return Box::pin(self.sql_tx_sized(1, async move |x, now| {
                sql::settle::settle(x, now, &queue, lock, &settlement).await
            }));
        }
        self.one_or_merged(
            &self.completes,
            merge::OneComplete { queue, lock },
            |one, x, now| {
                block_on(
                    None,
                    sql::settle::settle(x, now, &one.queue, one.lock, &Settlement::Complete),
                )
            },
        )
    }

    /// A call of one item that may merge ([`merge`]): made while the store is idle, it
    /// runs `alone` on its caller's thread if the store is still idle when it is first
    /// polled, and joins the merged call if not; made while the store is busy (callers
    /// contend, or commits fsync), it joins the merged call.
    fn one_or_merged<I: Send + 'static, R: Send + 'static>(
        &self,
        merge: &Arc<Merge<writer::Conn, I, R>>,
        item: I,
        alone: impl FnOnce(I, &mut Exec<'_>, i64) -> Result<R> + Send + 'static,
    ) -> Boxed<R> {
        if !self.writer.idle() {
            return Box::pin(self.finish(self.writer.run_merged(merge, item)));
        }
        let work = self.work.clone();
        Box::pin(
            self.finish(
                self.writer
                    .run_alone_or_merged(merge, item, move |item, conn, now| {
                        alone(item, &mut conn.exec(&work), now)
                    }),
            ),
        )
    }

    /// How many group commits the writer has made: calls waiting for the writer share
    /// one (tests count them; see the store kit's writer).
    pub fn group_commits(&self) -> u64 {
        self.writer.commits()
    }

    /// How many WAL checkpoints have run: on the checkpoint thread, and on the writer's
    /// own connection, which restarts the WAL at 1,000 frames (tests count them;
    /// docs/internals.md, "Where store work runs").
    pub fn checkpoints(&self) -> (u64, u64) {
        self.writer.checkpoints()
    }

    /// How many transaction statements (`BEGIN IMMEDIATE`, `COMMIT`, `ROLLBACK`, the
    /// savepoints') the store has run: a call alone on its caller's thread whose one
    /// statement is its last runs none (tests count them).
    pub fn transaction_statements(&self) -> u64 {
        self.writer.tx_statements()
    }

    /// How many calls have run on their caller's thread instead of the writer thread
    /// ([`SqliteOptions::caller_thread`]; tests count them).
    pub fn caller_thread_calls(&self) -> u64 {
        self.writer.caller_thread_calls()
    }

    /// How long the calls that ran on their callers' threads held them, from taking the
    /// connection to the answer: the store's own share of an executor's lateness
    /// (docs/internals.md, "Where store work runs"). Two snapshots subtract
    /// ([`HoldSnapshot::since`]) to the holds between them.
    pub fn caller_thread_hold(&self) -> HoldSnapshot {
        self.writer.caller_thread_hold()
    }

    /// The canonical path of the database file (None for `:memory:`).
    pub fn path(&self) -> Option<&std::path::Path> {
        self.path.as_deref()
    }

    /// Runs `EXPLAIN QUERY PLAN` for `sql` on the writer's connection (plan pins), with
    /// each named parameter bound by `bind` (a realistic value: the bundled SQLite keeps
    /// STAT4 statistics, so a plan can depend on the values).
    pub async fn explain(
        &self,
        sql: &str,
        bind: impl Fn(&str) -> sql::Value + Send + 'static,
    ) -> Result<Vec<String>> {
        let text = format!("EXPLAIN QUERY PLAN {sql}");
        self.writer
            .run(move |conn, _| {
                let mut stmt = conn.prepare(&text).map_err(db)?;
                for i in 1..=stmt.parameter_count() {
                    let name = stmt.parameter_name(i).unwrap_or_default().to_owned();
                    match bind(&name) {
                        sql::Value::Null => stmt.raw_bind_parameter(i, rusqlite::types::Null),
                        sql::Value::Int(v) => stmt.raw_bind_parameter(i, v),
                        sql::Value::Real(v) => stmt.raw_bind_parameter(i, v),
                        sql::Value::Text(v) => stmt.raw_bind_parameter(i, v),
                        sql::Value::Blob(v) => stmt.raw_bind_parameter(i, v),
                    }
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

    /// Gives the file's free pages back to the file system, on the writer thread outside
    /// any transaction (what `mqlite vacuum` runs), then checkpoints the WAL so the file
    /// on disk shrinks now.
    ///
    /// Incremental (`full = false`): frees every page on the free list of a file in
    /// `auto_vacuum = INCREMENTAL` mode (every file this version creates); a file made
    /// without it frees nothing, and the report says so. Full: rewrites the whole file
    /// (`VACUUM`), converting it to incremental mode on the way; it needs free disk
    /// space about the size of the file, and holds the writer for its whole run.
    pub async fn vacuum(&self, full: bool) -> Result<VacuumReport> {
        self.writer
            .run_conn(move |c| {
                let conn = &c.conn;
                let pages = |c: &rusqlite::Connection| -> Result<(u64, u64)> {
                    let n: i64 = c
                        .query_row("PRAGMA page_count", [], |r| r.get(0))
                        .map_err(db)?;
                    let free: i64 = c
                        .query_row("PRAGMA freelist_count", [], |r| r.get(0))
                        .map_err(db)?;
                    Ok((n.max(0).cast_unsigned(), free.max(0).cast_unsigned()))
                };
                let page_size: i64 = conn
                    .query_row("PRAGMA page_size", [], |r| r.get(0))
                    .map_err(db)?;
                let (pages_before, free_before) = pages(conn)?;
                if full {
                    conn.execute_batch("PRAGMA auto_vacuum = INCREMENTAL; VACUUM;")
                        .map_err(db)?;
                } else {
                    // It frees one page per step (a row each): step to the end.
                    let mut stmt = conn.prepare("PRAGMA incremental_vacuum").map_err(db)?;
                    let mut rows = stmt.raw_query();
                    while rows.next().map_err(db)?.is_some() {}
                }
                // Copies the WAL back and truncates it, so the file shrinks on disk now
                // (an ordinary checkpoint would also do it, later).
                c.truncate_wal()?;
                let (pages_after, free_after) = pages(conn)?;
                let mode: i64 = conn
                    .query_row("PRAGMA auto_vacuum", [], |r| r.get(0))
                    .map_err(db)?;
                Ok(VacuumReport {
                    full,
                    page_size: page_size.max(0).cast_unsigned(),
                    pages_before,
                    free_pages_before: free_before,
                    pages_after,
                    free_pages_after: free_after,
                    incremental: mode == 2,
                })
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

/// What [`SqliteStore::vacuum`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct VacuumReport {
    /// Whether it rewrote the whole file.
    pub full: bool,
    /// Bytes per page.
    pub page_size: u64,
    /// The file's pages before.
    pub pages_before: u64,
    /// Of those, free.
    pub free_pages_before: u64,
    /// The file's pages after.
    pub pages_after: u64,
    /// Of those, free (an incremental vacuum of a file not in incremental mode frees
    /// none).
    pub free_pages_after: u64,
    /// Whether the file now gives free pages back incrementally (the janitor's step).
    pub incremental: bool,
}

impl VacuumReport {
    /// The file's size before, bytes.
    pub fn bytes_before(&self) -> u64 {
        self.pages_before * self.page_size
    }

    /// The file's size after, bytes.
    pub fn bytes_after(&self) -> u64 {
        self.pages_after * self.page_size
    }
}

/// The SQLite store's registration: a path without a scheme (the default store),
/// `sqlite:<path>`, `file:<path>` or `:memory:`.
impl StoreKind for SqliteStore {
    const NAME: &'static str = BACKEND;
    const SCHEMES: &'static [&'static str] = &["sqlite", "file"];
    const LOCAL_FILE: bool = true;

    /// `sqlite:///srv/q.db` and `file:///srv/q.db` name `/srv/q.db`.
    fn target(_scheme: &str, rest: &str) -> String {
        rest.strip_prefix("//").unwrap_or(rest).to_owned()
    }

    async fn open_at(location: &str, clock: SharedClock) -> Result<Self> {
        SqliteStore::open(SqliteOptions::new(location).clock(clock)).await
    }
}

mqlite_sql::store_ops!(SqliteStore);

impl Store for SqliteStore {
    fn backend(&self) -> &'static str {
        BACKEND
    }

    fn clock(&self) -> &SharedClock {
        &self.clock
    }

    /// A file, yes (made in incremental auto-vacuum mode); `:memory:` has no file.
    fn reclaims_pages(&self) -> bool {
        self.path.is_some()
    }

    fn ownership(&self) -> Ownership {
        // A file is held under the one-writer lock from open to close; `:memory:` is
        // private to this store.
        Ownership::Exclusive
    }

    fn work(&self) -> Option<WorkStats> {
        Some(self.work.get())
    }

    fn status(&self) -> impl Future<Output = Result<StoreStatus>> + Send {
        let location = self.location.to_string();
        self.sql_tx_sized(sql::LONG, async move |x, _| {
            sql::admin::status(x, BACKEND, location, false).await
        })
    }

    fn close(&self) -> impl Future<Output = ()> + Send {
        self.releasing.store(true, Ordering::Release);
        self.writer.close()
    }
}

impl OutboxStore for SqliteStore {
    type Tx<'t> = SqliteTx<'t>;

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
        let known = self.known.clone();
        let file = self.writer.file();
        self.writer.run_app_tx(move |tx, now, gone| {
            let mut stx = SqliteTx {
                tx,
                now,
                gone,
                work: &work,
                known: &known,
            };
            let out = block_on(runtime.as_ref(), f(&mut stx))?;
            // Cancelled before commit: dropping the transaction rolls it back (13.4, 16.1).
            if gone() {
                return Err(E::from(Error::Cancelled));
            }
            // Never committed into a file that was deleted or replaced.
            file.check().map_err(E::from)?;
            stx.tx
                .commit()
                .map_err(|e| E::from(db(e).at_location(&file.location())))?;
            Ok(out)
        })
    }
}

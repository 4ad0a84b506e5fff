//! The SQLite store's transactions on the store kit's writer, which owns the connection
//! (and, after it, the file lock): no two statements ever overlap and the claim needs
//! no locking beyond SQLite's own. Under `synchronous=NORMAL` a WAL commit does not
//! fsync, so a short call that finds the store idle runs on its caller's thread; the
//! checkpoints, which do fsync, run off the callers' threads (on the checkpoint thread,
//! [`crate::checkpoint`], and at [`CHECKPOINT_FRAMES`] on the writer): the connection's
//! WAL hook replaces SQLite's automatic checkpoint (which would run inside whichever
//! commit crossed the threshold, on whichever thread made it).

use std::cell::Cell;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rusqlite::{Connection, Transaction, TransactionBehavior};

use mqlite_contract::{Error, Result, SharedClock};
use mqlite_kit::file::FileIdentity;
use mqlite_kit::writer::{GroupCommit, Merge, WriterThread};
use mqlite_sql::{KnownQueues, QueueRow};

use crate::checkpoint::{ASK_FRAMES, Checkpointer};
use crate::exec::{Exec, WorkCounter};
use crate::{Synchronous, db};

/// The WAL size, in frames, at which the writer checkpoints on its own connection:
/// SQLite's own default for its automatic checkpoint. Before that, the checkpoint thread
/// copies most of the log ([`crate::checkpoint`], from [`ASK_FRAMES`]).
pub(crate) const CHECKPOINT_FRAMES: i32 = 1000;

thread_local! {
    /// The WAL's frames after the last commit made on this thread, left by the WAL hook
    /// (SQLite calls it inside COMMIT, on the committing thread) and taken right after.
    static WAL_FRAMES: Cell<i32> = const { Cell::new(0) };
}

fn note_wal_frames(_: &rusqlite::hooks::Wal, frames: std::ffi::c_int) -> rusqlite::Result<()> {
    WAL_FRAMES.set(frames);
    Ok(())
}

/// Installs the WAL hook on a new connection: SQLite's automatic checkpoint stops, and
/// the checkpoint thread and the writer checkpoint instead ([`Conn::maintain`]).
pub(crate) fn hook_wal(conn: &Connection) {
    conn.wal_hook(Some(note_wal_frames));
}

/// Where the transaction of a call alone on its caller's thread stands
/// ([`GroupCommit::begin_alone`]): opened at its first statement, unless that statement
/// is also its last, which then runs by itself and commits with its own end (SQLite
/// runs a statement outside a transaction atomically: all of it or none). A one-row
/// send or a one-message receive of a known queue is one statement, which saves it the
/// two statements `BEGIN IMMEDIATE` and `COMMIT`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Deferred {
    /// No deferred transaction: the group's was opened by `BEGIN IMMEDIATE`, or none.
    No,
    /// Begun, but no statement has run yet.
    Pending,
    /// Its one statement ran by itself and committed.
    Committed,
}

/// The deferred transaction of a call alone, as its statements see it ([`Exec`]).
#[derive(Clone, Copy)]
pub(crate) struct Lazy<'c> {
    state: &'c Cell<Deferred>,
    file: &'c FileIdentity,
    tx_statements: &'c AtomicU64,
}

impl Lazy<'_> {
    /// Before a statement (`last`: the flow's last, see `SqlExec::query_last`): a
    /// pending transaction opens, unless this statement is the last, which then runs by
    /// itself (after the check that the file is still the one opened, which every
    /// commit makes first: 10.6). Returns whether it runs by itself; [`Lazy::ran`]
    /// must follow it then.
    pub(crate) fn before(&self, conn: &Connection, last: bool) -> Result<bool> {
        match self.state.get() {
            Deferred::No => Ok(false),
            Deferred::Pending if last => {
                self.file.check()?;
                Ok(true)
            }
            Deferred::Pending => {
                run_counted(conn, self.tx_statements, "BEGIN IMMEDIATE")?;
                self.state.set(Deferred::No);
                Ok(false)
            }
            // The flows send nothing after their last statement (`SqlExec::query_last`):
            // one that did would run outside the committed call's atomicity.
            Deferred::Committed => Err(Error::backend(crate::BACKEND, AfterLast)),
        }
    }

    /// The statement that ran by itself succeeded: its work is committed.
    pub(crate) fn ran(&self) {
        self.state.set(Deferred::Committed);
    }
}

/// A flow ran a statement after its last one.
#[derive(Debug)]
struct AfterLast;

impl std::fmt::Display for AfterLast {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a statement after the flow's last one (a defect of the flow): refused")
    }
}

impl std::error::Error for AfterLast {}

/// The writer thread's connection, with the group commit's statements (one IMMEDIATE
/// transaction per group, a savepoint per call) and a count of group commits.
pub(crate) struct Conn {
    /// The checkpoint thread (a file database's): first, so that it ends and closes its
    /// connection before `conn` closes, which then checkpoints and removes the WAL.
    checkpointer: Option<Checkpointer>,
    pub(crate) conn: Connection,
    file: FileIdentity,
    /// The deferred transaction of a call alone on its caller's thread.
    deferred: Cell<Deferred>,
    commits: Arc<AtomicU64>,
    /// The transaction statements run (`BEGIN`, `COMMIT`, the savepoints'), counted for
    /// the tests.
    tx_statements: Arc<AtomicU64>,
    /// The WAL's frames after the last commit.
    wal_frames: i32,
    /// Whether each commit fsyncs (`synchronous=FULL` or `EXTRA`).
    fsyncs: bool,
    /// A checkpoint was asked of the writer thread and has not run yet.
    checkpoint_asked: bool,
    /// Checkpoints the writer ran on its own connection.
    writer_checkpoints: Arc<AtomicU64>,
    /// How many multiples of [`ASK_FRAMES`] the WAL held when the checkpoint thread was
    /// last asked (0 once the WAL restarted).
    asked_step: i32,
    /// The queue rows the store vouches for, shared with its application transactions.
    known: Arc<KnownQueues>,
    /// The queue rows the open transaction's calls read: remembered in `known` once it
    /// commits, dropped when it rolls back or a new one begins.
    read: Vec<(String, QueueRow)>,
}

impl Conn {
    /// Runs the shared flows' statements in the open transaction, counted in `work`.
    pub(crate) fn exec<'a>(&'a mut self, work: &'a WorkCounter) -> Exec<'a> {
        Exec {
            conn: &self.conn,
            work,
            known: &self.known,
            read: Some(&mut self.read),
            lazy: Some(Lazy {
                state: &self.deferred,
                file: &self.file,
                tx_statements: &self.tx_statements,
            }),
        }
    }

    /// Reads what the WAL hook left on this thread after a commit.
    pub(crate) fn note_commit(&mut self) {
        let frames = WAL_FRAMES.take();
        if frames > 0 {
            if frames < self.wal_frames {
                // The WAL restarted.
                self.asked_step = 0;
            }
            self.wal_frames = frames;
        }
    }

    fn run(&self, sql: &str) -> Result<()> {
        run_counted(&self.conn, &self.tx_statements, sql)
    }

    /// Copies the whole WAL into the database file and truncates it (a TRUNCATE
    /// checkpoint), after the checkpoint thread's pass if one is under way: a checkpoint
    /// that finds another holding it answers busy at once and leaves the WAL as it was
    /// (a vacuum's file then kept its old size). Returns whether it ran to the end
    /// (false: another process held the checkpoint, or its readers kept the WAL in use).
    pub(crate) fn truncate_wal(&self) -> Result<bool> {
        let truncate = || {
            self.conn
                .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
                    r.get::<_, i64>(0)
                })
                .map(|busy| busy == 0)
                .map_err(db)
        };
        let ran = truncate()?;
        match &self.checkpointer {
            Some(thread) if !ran => {
                thread.quiesce();
                truncate()
            }
            _ => Ok(ran),
        }
    }
}

/// Runs a transaction statement (`BEGIN`, `COMMIT`, a savepoint's), counted in `count`.
fn run_counted(conn: &Connection, count: &AtomicU64, sql: &str) -> Result<()> {
    count.fetch_add(1, Ordering::Relaxed);
    run_sql(conn, sql)
}

/// Runs a statement of no parameters (prepared once): the transaction's and the
/// savepoints' own statements.
pub(crate) fn run_sql(conn: &Connection, sql: &str) -> Result<()> {
    conn.prepare_cached(sql)
        .and_then(|mut s| s.execute([]))
        .map(|_| ())
        .map_err(db)
}

impl GroupCommit for Conn {
    const BACKEND: &'static str = crate::BACKEND;

    fn begin(&mut self) -> Result<()> {
        // Reads of a transaction the database rolled back by itself are not vouched for.
        self.read.clear();
        self.deferred.set(Deferred::No);
        self.run("BEGIN IMMEDIATE")
    }

    fn begin_alone(&mut self) -> Result<()> {
        self.read.clear();
        // A hook value left by another connection's commit on this thread is not ours.
        WAL_FRAMES.set(0);
        self.deferred.set(Deferred::Pending);
        Ok(())
    }

    fn commit(&mut self) -> Result<()> {
        match self.deferred.replace(Deferred::No) {
            // No statement ran: nothing to commit.
            Deferred::Pending => return Ok(()),
            // Its one statement committed by itself (after the file's check).
            Deferred::Committed => {}
            Deferred::No => {
                WAL_FRAMES.set(0);
                self.file.check()?;
                self.run("COMMIT")
                    .map_err(|e| e.at_location(&self.file.location()))?;
            }
        }
        self.note_commit();
        self.commits.fetch_add(1, Ordering::Relaxed);
        self.known.remember(self.read.drain(..));
        Ok(())
    }

    fn rollback(&mut self) {
        self.read.clear();
        // A deferred transaction that never opened has nothing to roll back, nor has one
        // whose statement committed by itself (its call failed after that statement,
        // and the work stays committed: see `SqlExec::query_last`).
        if self.deferred.replace(Deferred::No) != Deferred::No || self.conn.is_autocommit() {
            return;
        }
        if let Err(e) = self.run("ROLLBACK") {
            tracing::error!(error = %e, "rolling back a failed group commit failed");
        }
    }

    fn in_transaction(&self) -> bool {
        self.deferred.get() != Deferred::No || !self.conn.is_autocommit()
    }

    fn savepoint(&mut self) -> Result<()> {
        self.run("SAVEPOINT mqlite_call")
    }

    fn release(&mut self) -> Result<()> {
        self.run("RELEASE mqlite_call")
    }

    fn undo(&mut self) -> Result<()> {
        self.run("ROLLBACK TO mqlite_call")?;
        self.run("RELEASE mqlite_call")
    }

    fn gathers(&self) -> bool {
        self.fsyncs
    }

    fn maintenance_due(&mut self) -> bool {
        if self.wal_frames < ASK_FRAMES {
            return false;
        }
        if let Some(thread) = &self.checkpointer
            && self.wal_frames < CHECKPOINT_FRAMES
        {
            // Once per ASK_FRAMES the WAL grew: a checkpoint that runs beside the
            // commits copies what they left, and asking after every commit would keep
            // the thread (and the disk) checkpointing without pause.
            let step = self.wal_frames / ASK_FRAMES;
            if step > self.asked_step {
                self.asked_step = step;
                thread.ask();
            }
            return false;
        }
        if self.wal_frames < CHECKPOINT_FRAMES || self.checkpoint_asked {
            return false;
        }
        self.checkpoint_asked = true;
        true
    }

    /// A passive checkpoint on the writer's own connection: copies the WAL into the
    /// database file as far as no reader needs it, and fsyncs. The next commit after a
    /// complete one restarts the WAL, which the checkpoint thread's passes, running
    /// beside the commits, rarely can; they leave this one little to copy and sync.
    fn maintain(&mut self) {
        self.checkpoint_asked = false;
        if self.wal_frames < CHECKPOINT_FRAMES {
            return;
        }
        match crate::checkpoint::passive(&self.conn) {
            Ok(true) => {
                self.wal_frames = 0;
                self.asked_step = 0;
                self.writer_checkpoints.fetch_add(1, Ordering::Relaxed);
            }
            // The checkpoint thread holds the checkpoint: the next commit asks again.
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(error = %e, "a WAL checkpoint failed; the next commit retries")
            }
        }
    }
}

/// The handle to the writer thread.
pub(crate) struct Writer {
    thread: WriterThread<Conn>,
    commits: Arc<AtomicU64>,
    /// Checkpoints by the checkpoint thread, and by the writer on its own connection.
    checkpoints: (Arc<AtomicU64>, Arc<AtomicU64>),
    tx_statements: Arc<AtomicU64>,
    file: FileIdentity,
}

impl Writer {
    /// Starts the writer thread; `open` runs on it and its error is returned here. The
    /// connection closes (checkpointing the WAL) before the guard is released. `inline`:
    /// short calls may run on their callers' threads; `fsyncs`: every commit fsyncs (the
    /// writer then gathers its callers before a group); `through_vfs`: the checkpoint
    /// thread's connection opens through the store's VFS, as `open`'s does.
    pub(crate) async fn start<T: 'static>(
        clock: SharedClock,
        inline: bool,
        sync: Synchronous,
        path: Option<PathBuf>,
        through_vfs: bool,
        known: Arc<KnownQueues>,
        open: impl FnOnce() -> Result<(Connection, T)> + Send + 'static,
    ) -> Result<Self> {
        let commits = Arc::new(AtomicU64::new(0));
        let counter = commits.clone();
        let tx_statements = Arc::new(AtomicU64::new(0));
        let tx_counter = tx_statements.clone();
        let fsyncs = sync.fsyncs();
        let checkpoints = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let (passes, writer_checkpoints) = checkpoints.clone();
        let (tell, told) = std::sync::mpsc::channel();
        let thread = WriterThread::start("mqlite-sqlite-writer", clock, move || {
            let (conn, guard) = open()?;
            // A file database's checkpoints run on a thread of their own.
            let checkpointer = match &path {
                Some(p) => Some(Checkpointer::start(p, sync, through_vfs, passes)?),
                None => None,
            };
            // Taken once the file exists (the connection made it).
            let file = FileIdentity::of(path, crate::BACKEND)?;
            let _ = tell.send(file.clone());
            Ok((
                Conn {
                    checkpointer,
                    conn,
                    file,
                    deferred: Cell::new(Deferred::No),
                    commits: counter,
                    tx_statements: tx_counter,
                    wal_frames: 0,
                    fsyncs,
                    checkpoint_asked: false,
                    writer_checkpoints,
                    asked_step: 0,
                    known,
                    read: Vec::new(),
                },
                guard,
            ))
        })
        .await?;
        thread.set_inline(inline);
        let file = told.recv().unwrap_or_else(|_| FileIdentity::none());
        Ok(Writer {
            thread,
            commits,
            checkpoints,
            tx_statements,
            file,
        })
    }

    /// The database file as opened.
    pub(crate) fn file(&self) -> FileIdentity {
        self.file.clone()
    }

    /// Whether a short call made now would run on its caller's thread (the store is
    /// idle and commits cannot fsync); sends of one message merge when it would not.
    pub(crate) fn idle(&self) -> bool {
        self.thread.idle()
    }

    /// Leaves a call of one item (a send of one message, a completion of one lock) in
    /// `merge` for the merged call (see [`crate::merge`]).
    pub(crate) fn run_merged<I: Send + 'static, R: Send + 'static>(
        &self,
        merge: &Arc<Merge<Conn, I, R>>,
        item: I,
    ) -> impl Future<Output = Result<R>> + Send + 'static {
        self.thread.run_merged(merge, item)
    }

    /// A call of one item on its caller's thread if the store is idle when first
    /// polled (`alone`, a call alone, see [`Writer::run_tx`]), else left in `merge`:
    /// a call that lost the race for the idle store joins the merged call instead of
    /// queueing its own.
    pub(crate) fn run_alone_or_merged<I: Send + 'static, R: Send + 'static>(
        &self,
        merge: &Arc<Merge<Conn, I, R>>,
        item: I,
        alone: impl FnOnce(I, &mut Conn, i64) -> Result<R> + Send + 'static,
    ) -> impl Future<Output = Result<R>> + Send + 'static {
        self.thread.run_alone_or_merged(merge, item, alone)
    }

    /// Calls run on their caller's thread so far.
    pub(crate) fn caller_thread_calls(&self) -> u64 {
        self.thread.inline_calls()
    }

    /// How long those calls held their callers' threads.
    pub(crate) fn caller_thread_hold(&self) -> mqlite_kit::writer::HoldSnapshot {
        self.thread.inline_hold()
    }

    /// Checkpoints so far: by the checkpoint thread, and by the writer on its own
    /// connection.
    pub(crate) fn checkpoints(&self) -> (u64, u64) {
        (
            self.checkpoints.0.load(Ordering::Relaxed),
            self.checkpoints.1.load(Ordering::Relaxed),
        )
    }

    /// Group commits so far.
    pub(crate) fn commits(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }

    /// Transaction statements run so far (`BEGIN`, `COMMIT`, the savepoints').
    pub(crate) fn tx_statements(&self) -> u64 {
        self.tx_statements.load(Ordering::Relaxed)
    }

    /// Runs `f` on the writer thread with the statement-time clock reading. If the
    /// caller's future is dropped before the writer reaches the job, the job is skipped:
    /// nothing executes (13.1, 13.2).
    pub(crate) fn run<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection, i64) -> Result<R> + Send + 'static,
    ) -> impl Future<Output = Result<R>> + Send + 'static {
        self.thread.run(move |c, now, _| f(&mut c.conn, now))
    }

    /// Runs `f` on the writer thread with its whole connection ([`Conn::truncate_wal`]).
    pub(crate) fn run_conn<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Conn) -> Result<R> + Send + 'static,
    ) -> impl Future<Output = Result<R>> + Send + 'static {
        self.thread.run(move |c, _, _| f(c))
    }

    /// Runs `f` in a group commit (see the store kit's writer): its own savepoint inside
    /// the group's IMMEDIATE transaction, answered after the commit; `f` also gets the
    /// list where the queue rows it reads wait for that commit. A `short` call
    /// that finds the store idle runs on the caller's thread, alone in its transaction.
    /// A statement already running finishes (13.3), but work nobody will hear about is
    /// undone, never committed (13.4) — a receive-and-delete whose caller is gone must
    /// not delete.
    pub(crate) fn run_tx<R: Send + 'static>(
        &self,
        short: bool,
        f: impl FnOnce(&mut Conn, i64) -> Result<R> + Send + 'static,
    ) -> impl Future<Output = Result<R>> + Send + 'static {
        self.thread.run_grouped(short, f)
    }

    /// Runs an application transaction: `f` gets the transaction, the statement time and
    /// a probe telling whether the caller went away. A panic in `f` rolls back and is
    /// re-raised in the caller's task (16.1).
    pub(crate) fn run_app_tx<R, E>(
        &self,
        f: impl FnOnce(Transaction<'_>, i64, &dyn Fn() -> bool) -> Result<R, E> + Send + 'static,
    ) -> impl Future<Output = Result<R, E>> + Send + 'static
    where
        R: Send + 'static,
        E: From<Error> + Send + 'static,
    {
        self.thread.run_catching(move |c, now, gone| {
            let t = c
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(|e| E::from(db(e)))?;
            let out = f(t, now, gone);
            // Already on the writer thread: a checkpoint due runs here.
            c.note_commit();
            if c.maintenance_due() {
                c.maintain();
            }
            out
        })
    }

    /// Lets the queued jobs finish, then closes the connection and releases the lock.
    pub(crate) async fn close(&self) {
        self.thread.close().await;
    }
}

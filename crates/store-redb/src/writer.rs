//! The redb store's transactions on the store kit's one writer thread, which owns the
//! `redb::Database`: a write transaction per job, committed durably (redb's default
//! `Durability::Immediate`) unless the caller went away first (13.4: dropping an
//! uncommitted redb transaction aborts it).
//!
//! A full disk: redb refuses every transaction after a write failed on an I/O error,
//! until the database is opened again. The writer gives the full-disk reserve up
//! ([`Reserve`]), drops the database, and the next job opens it anew (redb repairs it
//! from its last commit), so receives and settlements drain on the reserve's space.

use std::path::PathBuf;
use std::sync::Arc;

use redb::{Database, WriteTransaction};

use mqlite_contract::{Error, Result, SharedClock};
use mqlite_kit::{file::FileIdentity, reserve::Reserve, writer::WriterThread};

use crate::db;

/// The database the writer thread owns (None after an I/O failure, until the next job
/// opens it again), and how to open it.
pub(crate) struct Held {
    database: Option<Database>,
    open: Box<dyn Fn() -> Result<Database> + Send>,
}

impl Held {
    /// The open database, opened again first if a failure dropped it.
    fn database(&mut self) -> Result<&mut Database> {
        if self.database.is_none() {
            self.database = Some((self.open)()?);
            tracing::info!("the redb database is open again after an I/O failure");
        }
        self.database.as_mut().ok_or(Error::Closed)
    }

    /// After a job failed (`full`: with a full disk): a database that refuses a new
    /// transaction (redb latches an I/O failure) is dropped, for the next job to open
    /// again; on a full disk the reserve is given up first, so that there is room to.
    fn after_failure(&mut self, full: bool, reserve: &Reserve) {
        let latched = self
            .database
            .as_ref()
            .is_some_and(|d| d.begin_write().is_err());
        if full || latched {
            reserve.release();
        }
        if latched {
            tracing::warn!("the redb database failed an I/O operation: opening it again");
            self.database = None;
        }
    }
}

/// The handle to the writer thread, the file it checks before each commit, and the
/// full-disk reserve.
pub(crate) struct Writer {
    thread: WriterThread<Held>,
    file: FileIdentity,
    reserve: Arc<Reserve>,
}

impl Writer {
    /// Starts the writer thread; `open` runs on it (again after an I/O failure) and the
    /// first open's error is returned here. `path` is the database file to check
    /// before each commit (None: no file).
    pub(crate) async fn start(
        clock: SharedClock,
        path: Option<PathBuf>,
        reserve: Arc<Reserve>,
        open: impl Fn() -> Result<Database> + Send + 'static,
    ) -> Result<Self> {
        let (tell, told) = std::sync::mpsc::channel();
        let thread = WriterThread::start("mqlite-redb-writer", clock, move || {
            let database = open()?;
            // Taken once the file exists (the open made it).
            let _ = tell.send(FileIdentity::of(path, crate::BACKEND)?);
            let held = Held {
                database: Some(database),
                open: Box::new(open),
            };
            Ok((held, ()))
        })
        .await?;
        let file = told.recv().unwrap_or_else(|_| FileIdentity::none());
        Ok(Writer {
            thread,
            file,
            reserve,
        })
    }

    /// The database file as opened.
    pub(crate) fn file(&self) -> FileIdentity {
        self.file.clone()
    }

    /// Runs `f` inside one write transaction with the statement-time clock reading;
    /// commits on Ok unless the caller went away meanwhile.
    pub(crate) fn run_tx<R: Send + 'static>(
        &self,
        f: impl FnOnce(&WriteTransaction, i64) -> Result<R> + Send + 'static,
    ) -> impl Future<Output = Result<R>> + Send + 'static {
        let (file, reserve) = (self.file.clone(), self.reserve.clone());
        self.thread.run(move |held, now, gone| {
            let done = held.database().and_then(|database| {
                let txn = database.begin_write().map_err(db)?;
                let out = f(&txn, now)?;
                if gone() {
                    return Err(Error::Cancelled);
                }
                // Never committed into a file that was deleted or replaced.
                file.check()?;
                txn.commit().map_err(db)?;
                Ok(out)
            });
            done.map_err(|e| {
                // Only redb's own errors can carry an I/O failure; a refusal of the
                // queue's (a lost lock, a missing queue) needs no probe of the database.
                if matches!(e, Error::StorageFull { .. } | Error::Backend { .. }) {
                    held.after_failure(matches!(e, Error::StorageFull { .. }), &reserve);
                }
                e.at_location(&file.location())
            })
        })
    }

    /// Runs an application transaction: `f` gets the open write transaction, the
    /// statement time and the caller probe, and commits it itself; a panic aborts it
    /// and is re-raised in the caller's task (16.1).
    pub(crate) fn run_app_tx<R, E>(
        &self,
        f: impl FnOnce(WriteTransaction, i64, &dyn Fn() -> bool) -> Result<R, E> + Send + 'static,
    ) -> impl Future<Output = Result<R, E>> + Send + 'static
    where
        R: Send + 'static,
        E: From<Error> + Send + 'static,
    {
        let reserve = self.reserve.clone();
        self.thread.run_catching(move |held, now, gone| {
            let database = held.database().map_err(E::from)?;
            let txn = database.begin_write().map_err(|e| E::from(db(e)))?;
            let done = f(txn, now, gone);
            if done.is_err() {
                // The application's error type does not say whether the disk is full;
                // a latched I/O failure gives the reserve up if it is.
                held.after_failure(false, &reserve);
            }
            done
        })
    }

    /// A send found the reserve given up and a retry is due: compacts the database
    /// (the drain's freed pages go back to the disk), then tries the reserve again.
    pub(crate) fn make_room(
        &self,
        reserve: Arc<Reserve>,
    ) -> impl Future<Output = Result<()>> + Send + 'static {
        self.thread.run(move |held, _, _| {
            if let Ok(database) = held.database()
                && let Err(e) = database.compact()
            {
                tracing::warn!(error = %e, "compacting the redb database on a full disk failed");
            }
            reserve.rearm();
            Ok(())
        })
    }

    /// Lets the queued jobs finish, then closes the database and releases its lock.
    pub(crate) async fn close(&self) {
        self.thread.close().await;
    }
}

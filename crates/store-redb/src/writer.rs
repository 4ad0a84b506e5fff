//! The redb store's transactions on engine-core's one writer thread, which owns the
//! `redb::Database`: a write transaction per job, committed durably (redb's default
//! `Durability::Immediate`) unless the caller went away first (13.4: dropping an
//! uncommitted redb transaction aborts it).

use std::path::PathBuf;

use redb::{Database, WriteTransaction};

use mqlite_engine_core::file::FileIdentity;
use mqlite_engine_core::writer::WriterThread;
use mqlite_engine_core::{Error, Result, SharedClock};

use crate::db;

/// The handle to the writer thread, and the file it checks before each commit.
pub(crate) struct Writer(WriterThread<Database>, FileIdentity);

impl Writer {
    /// Starts the writer thread; `open` runs on it and its error is returned here. `path`
    /// is the database file to check before each commit (None: no file).
    pub(crate) async fn start(
        clock: SharedClock,
        path: Option<PathBuf>,
        open: impl FnOnce() -> Result<Database> + Send + 'static,
    ) -> Result<Self> {
        let (tell, told) = std::sync::mpsc::channel();
        let thread = WriterThread::start("mqlite-redb-writer", clock, move || {
            let database = open()?;
            // Taken once the file exists (the open made it).
            let _ = tell.send(FileIdentity::of(path, crate::BACKEND)?);
            Ok((database, ()))
        })
        .await?;
        let file = told.recv().unwrap_or_else(|_| FileIdentity::none());
        Ok(Writer(thread, file))
    }

    /// The database file as opened.
    pub(crate) fn file(&self) -> FileIdentity {
        self.1.clone()
    }

    /// Runs `f` inside one write transaction with the statement-time clock reading;
    /// commits on Ok unless the caller went away meanwhile.
    pub(crate) fn run_tx<R: Send + 'static>(
        &self,
        f: impl FnOnce(&WriteTransaction, i64) -> Result<R> + Send + 'static,
    ) -> impl Future<Output = Result<R>> + Send + 'static {
        let file = self.1.clone();
        self.0.run(move |database, now, gone| {
            let txn = database.begin_write().map_err(db)?;
            let out = f(&txn, now)?;
            if gone() {
                return Err(Error::Cancelled);
            }
            // Never committed into a file that was deleted or replaced.
            file.check()?;
            txn.commit()
                .map_err(|e| db(e).at_location(&file.location()))?;
            Ok(out)
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
        self.0.run_catching(move |database, now, gone| {
            let txn = database.begin_write().map_err(|e| E::from(db(e)))?;
            f(txn, now, gone)
        })
    }

    /// Lets the queued jobs finish, then closes the database and releases its lock.
    pub(crate) async fn close(&self) {
        self.0.close().await;
    }
}

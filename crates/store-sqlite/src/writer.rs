//! The SQLite store's transactions on engine-core's one writer thread, which owns the
//! connection (and, after it, the file lock): no two statements ever overlap and the
//! claim needs no locking beyond SQLite's own.

use rusqlite::{Connection, Transaction, TransactionBehavior};

use mqlite_engine_core::writer::WriterThread;
use mqlite_engine_core::{Error, Result, SharedClock};

use crate::db;

/// The handle to the writer thread.
pub(crate) struct Writer(WriterThread<Connection>);

impl Writer {
    /// Starts the writer thread; `open` runs on it and its error is returned here. The
    /// connection closes (checkpointing the WAL) before the guard is released.
    pub(crate) async fn start<T: 'static>(
        clock: SharedClock,
        open: impl FnOnce() -> Result<(Connection, T)> + Send + 'static,
    ) -> Result<Self> {
        WriterThread::start("mqlite-sqlite-writer", clock, open)
            .await
            .map(Writer)
    }

    /// Runs `f` on the writer thread with the statement-time clock reading. If the
    /// caller's future is dropped before the writer reaches the job, the job is skipped:
    /// nothing executes (13.1, 13.2).
    pub(crate) fn run<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection, i64) -> Result<R> + Send + 'static,
    ) -> impl Future<Output = Result<R>> + Send + 'static {
        self.0.run(move |conn, now, _| f(conn, now))
    }

    /// Runs `f` inside one IMMEDIATE transaction on the writer thread; commits on Ok,
    /// unless the caller went away meanwhile: a statement already running finishes
    /// (13.3), but work nobody will hear about is rolled back, never committed (13.4) —
    /// a receive-and-delete whose caller is gone must not delete.
    pub(crate) fn run_tx<R: Send + 'static>(
        &self,
        f: impl FnOnce(&Transaction<'_>, i64) -> Result<R> + Send + 'static,
    ) -> impl Future<Output = Result<R>> + Send + 'static {
        self.0.run(move |conn, now, gone| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(db)?;
            let out = f(&tx, now)?;
            if gone() {
                return Err(Error::Cancelled);
            }
            tx.commit().map_err(db)?;
            Ok(out)
        })
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
        self.0.run_catching(move |conn, now, gone| {
            let t = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(|e| E::from(db(e)))?;
            f(t, now, gone)
        })
    }

    /// Lets the queued jobs finish, then closes the connection and releases the lock.
    pub(crate) async fn close(&self) {
        self.0.close().await;
    }
}

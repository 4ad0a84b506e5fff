//! The application's transaction (16.1, 16.2): the native rusqlite transaction, shared
//! with the engine's sends, committed once.

use rusqlite::Transaction;

use mqlite_contract::{Error, Result, StoreTx};
use mqlite_kit::blocking::block_on;

use crate::exec::{Exec, WorkCounter};

/// The SQLite store's handle inside the engine's `Engine::tx`.
pub struct SqliteTx<'t> {
    pub(crate) tx: Transaction<'t>,
    pub(crate) now: i64,
    pub(crate) gone: &'t dyn Fn() -> bool,
    pub(crate) work: &'t WorkCounter,
    pub(crate) known: &'t mqlite_sql::KnownQueues,
}

impl<'t> SqliteTx<'t> {
    /// The native rusqlite transaction, for the application's own tables. Fails with
    /// `Cancelled` once the caller has gone away, so the next statement never runs and
    /// the transaction rolls back (13.4).
    pub fn sql(&self) -> Result<&Transaction<'t>> {
        self.check_cancelled()?;
        Ok(&self.tx)
    }

    /// The statement time of this transaction (epoch ms, from the store's clock).
    pub fn now_ms(&self) -> i64 {
        self.now
    }
}

#[allow(
    clippy::future_not_send,
    reason = "runs on the writer thread, which owns the connection; never on the executor"
)]
impl StoreTx for SqliteTx<'_> {
    mqlite_sql::side_tx_ops!();

    fn check_cancelled(&self) -> Result<()> {
        if (self.gone)() {
            Err(Error::Cancelled)
        } else {
            Ok(())
        }
    }
}

#[allow(
    clippy::future_not_send,
    reason = "runs on the writer thread, which owns the connection; never on the executor"
)]
impl SqliteTx<'_> {
    /// Runs one shared flow in this transaction. Already on the writer thread: the flow
    /// answers at once.
    async fn flow<R>(&mut self, op: impl AsyncFnOnce(&mut Exec<'_>) -> Result<R>) -> Result<R> {
        self.check_cancelled()?;
        let mut x = Exec {
            conn: &self.tx,
            work: self.work,
            known: self.known,
            read: None,
            lazy: None,
        };
        block_on(None, op(&mut x))
    }
}

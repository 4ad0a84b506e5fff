//! The application's transaction (16.1, 16.2): the native libsql transaction, shared
//! with the engine's sends, committed once. sqld steals a write lock held longer than
//! 5 seconds, after which this transaction's COMMIT fails: keep the body short.

use std::sync::atomic::{AtomicBool, Ordering};

use mqlite_contract::{Error, Result, StoreTx};

use crate::exec::{Exec, Sent};

/// The libSQL store's handle inside the engine's `Engine::tx`.
pub struct LibsqlTx<'t> {
    pub(crate) tx: &'t libsql::Transaction,
    pub(crate) now: i64,
    pub(crate) sent: &'t Sent,
    pub(crate) gone: &'t AtomicBool,
}

impl<'t> LibsqlTx<'t> {
    /// The native libsql transaction, for the application's own tables. Fails with
    /// `Cancelled` once the caller has gone away, so the next statement never runs and
    /// the transaction rolls back (13.4).
    pub fn sql(&self) -> Result<&'t libsql::Transaction> {
        self.check_cancelled()?;
        Ok(self.tx)
    }

    /// The statement time of this transaction (epoch ms, from the store's clock).
    pub fn now_ms(&self) -> i64 {
        self.now
    }
}

#[allow(
    clippy::future_not_send,
    reason = "the application's transaction runs on a blocking thread of its own, never on \
              the executor"
)]
impl StoreTx for LibsqlTx<'_> {
    mqlite_sql::side_tx_ops!();

    fn check_cancelled(&self) -> Result<()> {
        if self.gone.load(Ordering::Acquire) {
            Err(Error::Cancelled)
        } else {
            Ok(())
        }
    }
}

#[allow(
    clippy::future_not_send,
    reason = "the application's transaction runs on a blocking thread of its own, never on \
              the executor"
)]
impl LibsqlTx<'_> {
    /// Runs one shared flow in this transaction.
    async fn flow<R>(&mut self, op: impl AsyncFnOnce(&mut Exec<'_>) -> Result<R>) -> Result<R> {
        self.check_cancelled()?;
        let mut x = Exec {
            conn: self.tx,
            parked: false,
            parks: false,
            sent: self.sent,
            opening: None,
            retries: None,
            committed: false,
            queues: None,
            read: Vec::new(),
            changed: false,
            seat: None,
            next: None,
        };
        op(&mut x).await
    }
}

//! The application's transaction (16.1, 16.2): redb's own `WriteTransaction`, in which
//! the application opens its tables and the engine enqueues, committed once.

use redb::WriteTransaction;

use mqlite_engine_core::{EnqueueSlot, Error, OutMessage, Result, SendOptions, StoreTx};

use crate::flows;
use crate::tables::{Tables, WorkCounter};

/// The redb store's handle inside [`mqlite_engine_core::Engine::tx`].
pub struct RedbTx<'t> {
    pub(crate) txn: WriteTransaction,
    pub(crate) now: i64,
    pub(crate) gone: &'t dyn Fn() -> bool,
    pub(crate) work: &'t WorkCounter,
}

impl RedbTx<'_> {
    /// The native redb write transaction, for the application's own tables (any name
    /// not starting with `mq_` or `ix_`). Fails with `Cancelled` once the caller has gone
    /// away, so nothing more is written and the transaction is aborted (13.4).
    pub fn redb(&self) -> Result<&WriteTransaction> {
        self.check_cancelled()?;
        Ok(&self.txn)
    }

    /// The statement time of this transaction (epoch ms, from the store's clock).
    pub fn now_ms(&self) -> i64 {
        self.now
    }
}

#[allow(
    clippy::future_not_send,
    reason = "runs on the writer thread, which owns the transaction; never on the executor"
)]
impl StoreTx for RedbTx<'_> {
    async fn enqueue(
        &mut self,
        queue: &str,
        messages: Vec<OutMessage>,
        options: SendOptions,
    ) -> Result<Vec<EnqueueSlot>> {
        self.check_cancelled()?;
        let mut t = Tables::open(&self.txn, self.work)?;
        flows::enqueue(&mut t, self.now, queue, messages, options)
    }

    fn check_cancelled(&self) -> Result<()> {
        if (self.gone)() {
            Err(Error::Cancelled)
        } else {
            Ok(())
        }
    }
}

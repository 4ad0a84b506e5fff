//! The application's transaction (16.1, 16.2): redb's own `WriteTransaction`, in which
//! the application opens its tables and the engine enqueues, committed once.

use redb::WriteTransaction;

use mqlite_contract::{
    EnqueueSlot, Error, InboxMarker, OutMessage, RelayBacklog, RelayIntent, Result, SendOptions,
    SentEvidence, SideSweep, StoreTx,
};

use crate::tables::{Tables, WorkCounter};
use crate::{flows, side_tables};

/// The redb store's handle inside the engine's `Engine::tx`.
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

    fn now_ms(&self) -> i64 {
        self.now
    }

    async fn inbox_markers(&mut self, source: &str, id: &str) -> Result<Vec<InboxMarker>> {
        self.check_cancelled()?;
        side_tables::inbox_markers(&self.txn, source, id)
    }

    async fn inbox_insert(&mut self, marker: &InboxMarker) -> Result<()> {
        self.check_cancelled()?;
        side_tables::inbox_insert(&self.txn, marker)
    }

    async fn relay_insert(&mut self, queue: &str, message: &OutMessage) -> Result<i64> {
        self.check_cancelled()?;
        side_tables::relay_insert(&self.txn, self.now, queue, message)
    }

    async fn relay_pending(&mut self, limit: usize) -> Result<Vec<RelayIntent>> {
        self.check_cancelled()?;
        side_tables::relay_pending(&self.txn, limit)
    }

    async fn relay_mark(&mut self, seqs: &[i64]) -> Result<u64> {
        self.check_cancelled()?;
        side_tables::relay_mark(&self.txn, self.now, seqs)
    }

    async fn relay_refuse(&mut self, seqs: &[i64]) -> Result<u64> {
        self.check_cancelled()?;
        side_tables::relay_refuse(&self.txn, self.now, seqs)
    }

    async fn relay_find(&mut self, source: &str, id: &str) -> Result<Vec<RelayIntent>> {
        self.check_cancelled()?;
        side_tables::relay_find(&self.txn, source, id)
    }

    async fn relay_backlog(&mut self) -> Result<RelayBacklog> {
        self.check_cancelled()?;
        side_tables::relay_backlog(&self.txn)
    }

    async fn side_sweep(&mut self, markers_before: i64, intents_before: i64) -> Result<SideSweep> {
        self.check_cancelled()?;
        side_tables::sweep(&self.txn, markers_before, intents_before)
    }

    async fn find_sent(&mut self, queue: &str, key: &str) -> Result<SentEvidence> {
        self.check_cancelled()?;
        side_tables::find_sent(&self.txn, queue, key)
    }
}

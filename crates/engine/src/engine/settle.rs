//! Settlements: Complete, Abandon, Reject, Defer, Renew, their batches, and Cancel.

use std::time::{Duration, Instant};

use crate::meter;
use mqlite_contract::error::{Error, Result};
use mqlite_contract::store::Store;
use mqlite_contract::types::{BatchResult, LockRef, Settlement, millis};

use super::{
    Engine, MAX_ABANDON_DELAY, MAX_COMPLETE_BATCH, MAX_RENEW_BATCH, validate_free_text,
    validate_name,
};

impl<S: Store> Engine<S> {
    #[tracing::instrument(
        level = "debug",
        skip_all,
        fields(queue = queue, seq = lock.seq.0, op = settlement.op()),
        err(level = "debug")
    )]
    async fn settle(&self, queue: &str, lock: LockRef, settlement: Settlement) -> Result<()> {
        let started = Instant::now();
        let op = settlement.op();
        let r = self.settle_inner(queue, lock, settlement).await;
        meter::call(op, queue, started, &r);
        r
    }

    async fn settle_inner(&self, queue: &str, lock: LockRef, settlement: Settlement) -> Result<()> {
        validate_name(queue)?;
        let _g = self.admit().await?;
        let delayed = match &settlement {
            Settlement::Abandon { delay } if !delay.is_zero() => Some(millis(*delay)),
            _ => None,
        };
        self.inner
            .store
            .settle(queue.to_owned(), lock, settlement)
            .await?;
        if let Some(delay) = delayed {
            let at = self.inner.clock.now_ms().saturating_add(delay);
            self.inner.due.note(queue, at);
        }
        // An abandon makes its message eligible again, and a head that left play (or was
        // deferred) hands its line on: a long-poll may have work now (1.8).
        self.wake_queue(queue, 1);
        Ok(())
    }

    /// Completes (deletes) a message (2.1).
    pub async fn complete(&self, queue: &str, lock: impl Into<LockRef>) -> Result<()> {
        self.settle(queue, lock.into(), Settlement::Complete).await
    }

    /// Abandons a message: back to active now ([`Duration::ZERO`]), or after `delay`
    /// (2.2; at most [`MAX_ABANDON_DELAY`]).
    pub async fn abandon(
        &self,
        queue: &str,
        lock: impl Into<LockRef>,
        delay: Duration,
    ) -> Result<()> {
        if delay > MAX_ABANDON_DELAY {
            return Err(Error::invalid("an abandon delay must be at most 7 days"));
        }
        self.settle(queue, lock.into(), Settlement::Abandon { delay })
            .await
    }

    /// Dead-letters a message with a reason and description (2.3).
    pub async fn reject(
        &self,
        queue: &str,
        lock: impl Into<LockRef>,
        reason: &str,
        description: &str,
    ) -> Result<()> {
        validate_free_text("dead_letter_reason", reason)?;
        validate_free_text("dead_letter_description", description)?;
        let settlement = Settlement::Reject {
            reason: reason.to_owned(),
            description: description.to_owned(),
        };
        self.settle(queue, lock.into(), settlement).await
    }

    /// Defers a message; only [`Engine::receive_deferred`] returns it (2.4).
    pub async fn defer(&self, queue: &str, lock: impl Into<LockRef>) -> Result<()> {
        self.settle(queue, lock.into(), Settlement::Defer).await
    }

    /// Renews a live lease; returns the new locked_until (2.5).
    pub async fn renew(&self, queue: &str, lock: impl Into<LockRef>) -> Result<i64> {
        let result = self.renew_batch(queue, &[lock.into()]).await?;
        match result.first() {
            Some(r) if r.ok => Ok(r.locked_until_ms),
            Some(r) => Err(Error::LockLost {
                reason: r
                    .lost
                    .unwrap_or(mqlite_contract::error::LockLostReason::Unknown),
            }),
            None => Err(Error::LockLost {
                reason: mqlite_contract::error::LockLostReason::Unknown,
            }),
        }
    }

    /// Completes many messages in one transaction; stale items report ok = false (2.7).
    #[tracing::instrument(level = "debug", skip_all, fields(queue = queue, n = locks.len()), err(level = "debug"))]
    pub async fn complete_batch(&self, queue: &str, locks: &[LockRef]) -> Result<Vec<BatchResult>> {
        let started = Instant::now();
        let r = self.complete_batch_inner(queue, locks).await;
        meter::call("complete_batch", queue, started, &r);
        r
    }

    async fn complete_batch_inner(
        &self,
        queue: &str,
        locks: &[LockRef],
    ) -> Result<Vec<BatchResult>> {
        validate_name(queue)?;
        if locks.is_empty() || locks.len() > MAX_COMPLETE_BATCH {
            return Err(Error::invalid(format!(
                "a batch holds 1..={MAX_COMPLETE_BATCH} items"
            )));
        }
        let _g = self.admit().await?;
        let results = self
            .inner
            .store
            .complete_batch(queue.to_owned(), locks.to_vec())
            .await?;
        // Completed heads hand their lines on (1.8).
        self.wake_queue(queue, results.iter().filter(|r| r.ok).count());
        Ok(results)
    }

    /// Renews up to 512 leases in one statement (2.8).
    #[tracing::instrument(level = "debug", skip_all, fields(queue = queue, n = locks.len()), err(level = "debug"))]
    pub async fn renew_batch(&self, queue: &str, locks: &[LockRef]) -> Result<Vec<BatchResult>> {
        let started = Instant::now();
        let r = self.renew_batch_inner(queue, locks).await;
        meter::call("renew_batch", queue, started, &r);
        r
    }

    async fn renew_batch_inner(&self, queue: &str, locks: &[LockRef]) -> Result<Vec<BatchResult>> {
        validate_name(queue)?;
        if locks.is_empty() || locks.len() > MAX_RENEW_BATCH {
            return Err(Error::invalid(format!(
                "a renew batch holds 1..={MAX_RENEW_BATCH} items"
            )));
        }
        let _g = self.admit().await?;
        let results = self
            .inner
            .store
            .renew_batch(queue.to_owned(), locks.to_vec())
            .await?;
        // A renewed lease that then lapses makes its message claimable at its new end.
        if let Some(end) = results
            .iter()
            .filter(|r| r.ok)
            .map(|r| r.locked_until_ms)
            .min()
        {
            self.inner.due.note(queue, end);
        }
        Ok(results)
    }
}

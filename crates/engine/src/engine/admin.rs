//! Administration: queues (create, update, list, delete) and what an operator does to
//! one (peek, stats, redrive, purge).

use crate::meter;
use mqlite_contract::error::{Error, Result};
use mqlite_contract::store::Store;
use mqlite_contract::types::{
    MAX_SPAN, Message, PeekOptions, PurgeOptions, QueueConfig, QueueInfo, QueueKind, QueueStats,
    RedriveOptions, SeqNumber,
};

use super::{Engine, MAX_PEEK, MAX_REDRIVE_SELECTION, validate_name, validate_new_name};

impl<S: Store> Engine<S> {
    /// Creates a queue, or updates the configuration of an existing one.
    #[tracing::instrument(level = "debug", skip_all, fields(queue = name), err(level = "debug"))]
    pub async fn create_queue(&self, name: &str, config: QueueConfig) -> Result<()> {
        validate_new_name(name)?;
        config.validate()?;
        let _g = self.admit().await?;
        self.inner
            .store
            .upsert_queue(name.to_owned(), QueueKind::Queue, config, false)
            .await
    }

    /// Updates a queue's configuration; `NotFound` if it does not exist. The ordering
    /// mode can change only while the queue holds no message in play.
    #[tracing::instrument(level = "debug", skip_all, fields(queue = name), err(level = "debug"))]
    pub async fn update_queue(&self, name: &str, config: QueueConfig) -> Result<()> {
        validate_name(name)?;
        config.validate()?;
        let _g = self.admit().await?;
        self.inner
            .store
            .upsert_queue(name.to_owned(), QueueKind::Queue, config, true)
            .await
    }

    /// Every queue with its configuration.
    pub async fn list_queues(&self) -> Result<Vec<QueueInfo>> {
        let _g = self.admit().await?;
        self.inner.store.list_queues().await
    }

    /// Deletes a queue and everything in it; false if it did not exist.
    #[tracing::instrument(level = "debug", skip_all, fields(queue = name), err(level = "debug"))]
    pub async fn delete_queue(&self, name: &str) -> Result<bool> {
        validate_name(name)?;
        let _g = self.admit().await?;
        let deleted = self.inner.store.delete_queue(name.to_owned()).await?;
        if deleted {
            self.set_topic(name, false);
        }
        Ok(deleted)
    }

    /// Deletes a scheduled message that was never delivered (7.1).
    #[tracing::instrument(level = "debug", skip_all, fields(queue = queue, seq = seq.0), err(level = "debug"))]
    pub async fn cancel(&self, queue: &str, seq: SeqNumber) -> Result<bool> {
        validate_name(queue)?;
        let _g = self.admit().await?;
        let cancelled = self.inner.store.cancel(queue.to_owned(), seq).await?;
        if cancelled {
            // A cancelled head hands its line on (1.8).
            self.wake_queue(queue, 1);
        }
        Ok(cancelled)
    }

    /// Browses messages without locking them (6.2).
    #[tracing::instrument(level = "debug", skip_all, fields(queue = queue), err(level = "debug"))]
    pub async fn peek(&self, queue: &str, options: PeekOptions) -> Result<Vec<Message>> {
        validate_name(queue)?;
        if options.max == 0 || options.max > MAX_PEEK {
            return Err(Error::invalid(format!("max must be 1..={MAX_PEEK}")));
        }
        let _g = self.admit().await?;
        self.inner.store.peek(queue.to_owned(), options).await
    }

    /// Counts a queue's messages per state.
    #[tracing::instrument(level = "debug", skip_all, fields(queue = queue), err(level = "debug"))]
    pub async fn stats(&self, queue: &str) -> Result<QueueStats> {
        validate_name(queue)?;
        let _g = self.admit().await?;
        let stats = self.inner.store.stats(queue.to_owned()).await?;
        meter::messages(queue, &stats);
        Ok(stats)
    }

    /// Moves dead letters back to active (or to `target`), bounded by max, age and rate.
    #[tracing::instrument(level = "debug", skip_all, fields(queue = queue), err(level = "debug"))]
    pub async fn redrive(&self, queue: &str, options: RedriveOptions) -> Result<u64> {
        validate_name(queue)?;
        if let Some(t) = &options.target {
            validate_name(t)?;
        }
        if options.older_than > MAX_SPAN {
            return Err(Error::invalid("older_than must be at most 100 years"));
        }
        if options
            .seq_numbers
            .as_ref()
            .is_some_and(|s| s.len() > MAX_REDRIVE_SELECTION)
        {
            return Err(Error::invalid(format!(
                "a selected redrive names at most {MAX_REDRIVE_SELECTION} dead letters"
            )));
        }
        if options.rate_per_sec == 0 {
            let _g = self.admit().await?;
            let moved = self.inner.store.redrive(queue.to_owned(), options).await?;
            self.woken_if(moved);
            return Ok(moved);
        }
        // Rate-bounded: one slice per second of the engine's clock.
        let mut moved = 0u64;
        loop {
            let remaining = if options.max == 0 {
                options.rate_per_sec
            } else {
                (options.max - moved).min(options.rate_per_sec)
            };
            if remaining == 0 {
                return Ok(moved);
            }
            let slice = RedriveOptions {
                max: remaining,
                ..options.clone()
            };
            let started = self.inner.clock.now_ms();
            let n = {
                let _g = self.admit().await?;
                self.inner.store.redrive(queue.to_owned(), slice).await?
            };
            self.woken_if(n);
            moved += n;
            // Done: the dead letters ran out, or the max is reached (no wait for a
            // slice that would move nothing).
            if n < remaining || (options.max != 0 && moved >= options.max) {
                return Ok(moved);
            }
            self.inner.clock.sleep_until(started + 1000).await;
        }
    }

    /// Deletes dead letters, bounded by max and age (6.2).
    #[tracing::instrument(level = "debug", skip_all, fields(queue = queue), err(level = "debug"))]
    pub async fn purge(&self, queue: &str, options: PurgeOptions) -> Result<u64> {
        validate_name(queue)?;
        if options.older_than > MAX_SPAN {
            return Err(Error::invalid("older_than must be at most 100 years"));
        }
        let _g = self.admit().await?;
        self.inner.store.purge(queue.to_owned(), options).await
    }
}

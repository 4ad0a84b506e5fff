//! Administration: queues (create, update, list, delete) and what an operator does to
//! one (peek, stats, redrive, purge).

use crate::meter;
use mqlite_contract::error::{Error, Result};
use mqlite_contract::store::Store;
use mqlite_contract::types::{
    MAX_SPAN, Message, PeekOptions, PurgeOptions, QueueConfig, QueueInfo, QueueKind, QueueStats,
    QueueStatus, RedriveOptions, SeqNumber,
};

use super::{Engine, MAX_PEEK, MAX_REDRIVE_SELECTION, validate_name, validate_new_name};

impl<S: Store> Engine<S> {
    /// Creates a queue, or updates the configuration of an existing one.
    #[tracing::instrument(level = "debug", skip_all, fields(queue = name), err(level = "debug"))]
    pub async fn create_queue(&self, name: &str, config: QueueConfig) -> Result<()> {
        validate_new_name(name)?;
        config.validate()?;
        let _g = self.admit().await?;
        self.check_dead_letter_target(name, &config).await?;
        let resumed = config.status.hands_out();
        self.inner
            .store
            .upsert_queue(name.to_owned(), QueueKind::Queue, config, false)
            .await?;
        self.woken_if(u64::from(resumed));
        Ok(())
    }

    /// Updates a queue's configuration; `NotFound` if it does not exist. The ordering
    /// mode can change only while the queue holds no message in play.
    #[tracing::instrument(level = "debug", skip_all, fields(queue = name), err(level = "debug"))]
    pub async fn update_queue(&self, name: &str, config: QueueConfig) -> Result<()> {
        validate_name(name)?;
        config.validate()?;
        let _g = self.admit().await?;
        self.check_dead_letter_target(name, &config).await?;
        let resumed = config.status.hands_out();
        self.inner
            .store
            .upsert_queue(name.to_owned(), QueueKind::Queue, config, true)
            .await?;
        self.woken_if(u64::from(resumed));
        Ok(())
    }

    /// Pauses or resumes a queue (promise 19): with [`QueueStatus::SendDisabled`] or
    /// [`QueueStatus::Disabled`] its sends are refused with `QueuePaused` and store
    /// nothing; with [`QueueStatus::ReceiveDisabled`] or `Disabled` its receives get
    /// nothing, and a long-poll waits until the queue hands out again (this engine's
    /// parked receives are woken at once by the resume). Messages are not touched:
    /// leases held across a pause still settle and renew. A subscription's receives can
    /// be paused, not its sends (its topic's publishes fill it); a topic has no status.
    /// The rest of the configuration is kept (the change is a read and a write of the
    /// queue's row: an update of the queue at the same moment may win over it).
    #[tracing::instrument(level = "debug", skip_all, fields(queue = name, status = %status), err(level = "debug"))]
    pub async fn set_queue_status(&self, name: &str, status: QueueStatus) -> Result<()> {
        validate_name(name)?;
        let _g = self.admit().await?;
        let queues = self.inner.store.list_queues().await?;
        let Some(q) = queues.into_iter().find(|q| q.name == name) else {
            return Err(Error::queue_not_found(name));
        };
        match q.kind {
            QueueKind::Topic => {
                return Err(Error::invalid(format!(
                    "{name:?} is a topic, which holds no messages: pause its subscriptions' \
                     receives, or the producers"
                )));
            }
            QueueKind::Subscription if !status.takes_sends() => {
                return Err(Error::invalid(format!(
                    "{name:?} is a subscription, filled by its topic's publishes: only its \
                     receives can be paused (status receive_disabled)"
                )));
            }
            _ => {}
        }
        let config = QueueConfig { status, ..q.config };
        self.inner
            .store
            .upsert_queue(name.to_owned(), q.kind, config, true)
            .await?;
        self.woken_if(u64::from(status.hands_out()));
        Ok(())
    }

    /// A dead-letter target is another queue that exists (a topic takes no dead letters).
    async fn check_dead_letter_target(&self, name: &str, config: &QueueConfig) -> Result<()> {
        let Some(target) = config.dead_letter_target.as_deref() else {
            return Ok(());
        };
        validate_name(target)?;
        if target == name {
            return Err(Error::invalid(format!(
                "queue {name:?} cannot be its own dead_letter_target: leave it unset to keep \
                 dead letters in the queue"
            )));
        }
        let queues = self.inner.store.list_queues().await?;
        match queues.iter().find(|q| q.name == target) {
            Some(q) if q.kind != QueueKind::Topic => Ok(()),
            Some(_) => Err(Error::invalid(format!(
                "dead_letter_target {target:?} is a topic: name a queue"
            ))),
            None => Err(Error::NotFound {
                kind: "queue",
                name: target.to_owned(),
            }),
        }
    }

    /// Moves the dead letters of `queue` to its `dead_letter_target` now, as the janitor
    /// sweep does on every pass; 0 when the queue has no target. A target that no
    /// longer exists is `NotFound`.
    #[tracing::instrument(level = "debug", skip_all, fields(queue = queue), err(level = "debug"))]
    pub async fn forward_dead_letters(&self, queue: &str) -> Result<u64> {
        validate_name(queue)?;
        let _g = self.admit().await?;
        let target = self
            .inner
            .store
            .list_queues()
            .await?
            .into_iter()
            .find(|q| q.name == queue)
            .and_then(|q| q.config.dead_letter_target);
        match target {
            Some(target) => self.forward(queue, target).await,
            None => Ok(0),
        }
    }

    /// One forwarding move: a redrive of every dead letter to `target`.
    pub(super) async fn forward(&self, queue: &str, target: String) -> Result<u64> {
        let options = RedriveOptions {
            target: Some(target),
            ..Default::default()
        };
        let moved = self.inner.store.redrive(queue.to_owned(), options).await?;
        self.woken_if(moved);
        Ok(moved)
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

    /// Deletes dead letters, bounded by max and age (6.2); with
    /// [`PurgeOptions::every_state`], every message of the queue in one transaction.
    #[tracing::instrument(level = "debug", skip_all, fields(queue = queue), err(level = "debug"))]
    pub async fn purge(&self, queue: &str, options: PurgeOptions) -> Result<u64> {
        validate_name(queue)?;
        if options.older_than > MAX_SPAN {
            return Err(Error::invalid("older_than must be at most 100 years"));
        }
        if options.every_state && (options.max != 0 || !options.older_than.is_zero()) {
            return Err(Error::invalid(
                "a purge of every state takes every message: max and older_than must be 0",
            ));
        }
        let _g = self.admit().await?;
        self.inner.store.purge(queue.to_owned(), options).await
    }
}

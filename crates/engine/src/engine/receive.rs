//! Receives: the claim, long-poll waits and the wake-ups that end them (per queue, so
//! a send wakes as many receivers as it has messages), deferred messages.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::sync::{Notify, watch};

use std::time::Instant;

use crate::meter;
use mqlite_contract::error::{Error, Result};
use mqlite_contract::store::Store;
use mqlite_contract::types::{
    BatchResult, ClaimSpec, LockRef, Message, ReceiveMode, ReceiveOptions, RecoverTask, SeqNumber,
    millis,
};

use super::{
    Engine, MAX_COMPLETE_BATCH, MAX_RECEIVE_BATCH, MAX_WAIT, receive_batch_out_of_range,
    validate_name, validate_text,
};

impl<S: Store> Engine<S> {
    /// The wake-up of receivers parked on `queue` (made on first use).
    fn queue_notify(&self, queue: &str) -> Arc<Notify> {
        let mut map = self
            .inner
            .queue_wake
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(n) = map.get(queue) {
            return n.clone();
        }
        // Names nobody waits on any more (a receive of a name that never existed, say)
        // are dropped once the map grows, so it stays bounded by the queues in use.
        if map.len() >= 4096 {
            map.retain(|_, n| Arc::strong_count(n) > 1);
        }
        map.entry(queue.to_owned()).or_default().clone()
    }

    /// Wakes up to `n` receivers parked on `queue`: `n` messages may have become
    /// eligible there. A receiver that is woken and finds nothing parks again.
    pub(super) fn wake_queue(&self, queue: &str, n: usize) {
        let map = self
            .inner
            .queue_wake
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(notify) = map.get(queue) {
            for _ in 0..n.min(MAX_RECEIVE_BATCH as usize * 4) {
                notify.notify_one();
            }
        }
    }

    /// Receives up to `options.max_messages`, long-polling up to `options.wait`.
    #[tracing::instrument(level = "debug", skip_all, fields(queue = queue, max = options.max_messages, wait_ms = millis(options.wait)), err(level = "debug"))]
    pub async fn receive(&self, queue: &str, options: ReceiveOptions) -> Result<Vec<Message>> {
        let started = Instant::now();
        let r = self
            .receive_inner(queue, options, &[])
            .await
            .map(|(_, got)| got);
        meter::call("receive", queue, started, &r);
        r
    }

    /// Completes `completed` and receives, as [`Engine::complete_batch`] then
    /// [`Engine::receive`] would, with the completions and the first claim in one
    /// transaction (one commit where the two calls take two): the loop of a consumer
    /// that settles what it handled and asks for more. Answers the completions' results
    /// (empty for no lock) and the messages received. When the first claim finds
    /// nothing, the completions are committed and the receive long-polls as usual.
    #[tracing::instrument(level = "debug", skip_all, fields(queue = queue, n = completed.len(), max = options.max_messages), err(level = "debug"))]
    pub async fn complete_and_receive(
        &self,
        queue: &str,
        completed: &[LockRef],
        options: ReceiveOptions,
    ) -> Result<(Vec<BatchResult>, Vec<Message>)> {
        let started = Instant::now();
        let r = self.receive_inner(queue, options, completed).await;
        meter::call("complete_and_receive", queue, started, &r);
        r
    }

    async fn receive_inner(
        &self,
        queue: &str,
        options: ReceiveOptions,
        completing: &[LockRef],
    ) -> Result<(Vec<BatchResult>, Vec<Message>)> {
        validate_name(queue)?;
        if completing.len() > MAX_COMPLETE_BATCH {
            return Err(Error::invalid(format!(
                "complete_and_receive completes at most {MAX_COMPLETE_BATCH} messages"
            )));
        }
        if options.max_messages == 0 || options.max_messages > MAX_RECEIVE_BATCH {
            return Err(receive_batch_out_of_range());
        }
        if options.wait > MAX_WAIT {
            return Err(Error::invalid(format!(
                "wait must be at most {} s",
                MAX_WAIT.as_secs()
            )));
        }
        if let Some(id) = &options.attempt_id {
            validate_text("receive_attempt_id", id)?;
        }
        let spec = ClaimSpec {
            max_messages: options.max_messages,
            mode: options.mode,
            attempt_id: options.attempt_id.clone(),
        };
        let clock = &self.inner.clock;
        let deadline = clock.now_ms().saturating_add(millis(options.wait));
        let mut woken = self.inner.wake.subscribe();
        let notify = self.queue_notify(queue);
        let mut parked = false;
        let mut completed = Vec::new();
        loop {
            woken.borrow_and_update();
            // Registered before the claim, so a send that lands after the claim looked
            // still wakes this receiver; a wake-up it leaves unused passes to the next.
            let notified = notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if parked && self.inner.due.take_due(queue, clock.now_ms()) {
                // A time this engine handed out came while this receiver waited: make
                // its messages claimable now rather than at the next sweep (the pass
                // wakes every receiver). A receive that has not waited runs no pass:
                // the claim itself never reclaims a lease (1.5).
                let _g = self.admit().await?;
                self.recover_and_wake(RecoverTask::Scheduler).await?;
                self.recover_and_wake(RecoverTask::Reaper).await?;
            }
            let got = {
                let _g = self.admit().await?;
                let store = &self.inner.store;
                if completing.is_empty() || !completed.is_empty() {
                    store.claim(queue.to_owned(), spec.clone()).await?
                } else {
                    let (done, got) = store
                        .complete_and_claim(queue.to_owned(), completing.to_vec(), spec.clone())
                        .await?;
                    // Completed heads hand their lines on (1.8).
                    self.wake_queue(queue, done.iter().filter(|r| r.ok).count());
                    completed = done;
                    got
                }
            };
            let now = clock.now_ms();
            if spec.mode == ReceiveMode::ReceiveAndDelete {
                // Deleted heads handed their lines on: other receivers may have work.
                self.wake_queue(queue, got.len());
            } else if let Some(lapse) = got.iter().map(|m| m.locked_until_ms).min() {
                // If the lease lapses unsettled, the message is claimable again then.
                self.inner.due.note(queue, lapse);
            }
            if !got.is_empty() || now >= deadline {
                return Ok((completed, got));
            }
            let mut recheck =
                deadline.min(now + millis(self.inner.options.long_poll_recheck).max(1));
            if let Some(due) = self.inner.due.next(queue) {
                recheck = recheck.min(due.max(now));
            }
            {
                let _parked = Parked::new(&self.inner.waiters);
                tokio::select! {
                    _ = woken.changed() => {}
                    _ = &mut notified => {}
                    _ = clock.sleep_until(recheck) => {}
                }
            }
            parked = true;
            if self.inner.closed.load(Ordering::Acquire) {
                return Err(Error::Closed);
            }
        }
    }

    /// Watches how many receives are parked in a long-poll wait (a gauge for metrics, and
    /// how tests know a receiver is waiting before they move a manual clock).
    pub fn long_poll_waiters(&self) -> watch::Receiver<usize> {
        self.inner.waiters.subscribe()
    }

    /// Receives one message without waiting, if any is eligible.
    ///
    /// ```no_run
    /// # async fn demo(mq: mqlite_engine::Engine<impl mqlite_contract::Store>)
    /// # -> mqlite_contract::Result<()> {
    /// if let Some(m) = mq.receive_one("jobs").await? {
    ///     println!("#{} delivery {}: {:?}", m.seq, m.delivery_count, m.body());
    ///     // The lease ends at m.locked_until_ms; settle with the token before then.
    ///     mq.complete("jobs", &m).await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn receive_one(&self, queue: &str) -> Result<Option<Message>> {
        Ok(self
            .receive(queue, ReceiveOptions::default())
            .await?
            .into_iter()
            .next())
    }

    /// Claims deferred messages by sequence number (2.4).
    #[tracing::instrument(level = "debug", skip_all, fields(queue = queue, n = seqs.len()), err(level = "debug"))]
    pub async fn receive_deferred(&self, queue: &str, seqs: &[SeqNumber]) -> Result<Vec<Message>> {
        validate_name(queue)?;
        if seqs.is_empty() || seqs.len() > MAX_RECEIVE_BATCH as usize {
            return Err(Error::invalid(format!(
                "seq_numbers must hold 1..={MAX_RECEIVE_BATCH} items"
            )));
        }
        let _g = self.admit().await?;
        self.inner
            .store
            .receive_deferred(queue.to_owned(), seqs.to_vec())
            .await
    }
}

struct Parked<'a>(&'a watch::Sender<usize>);

impl<'a> Parked<'a> {
    fn new(gauge: &'a watch::Sender<usize>) -> Self {
        gauge.send_modify(|n| *n += 1);
        Parked(gauge)
    }
}

impl Drop for Parked<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

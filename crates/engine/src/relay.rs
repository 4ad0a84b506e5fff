//! The relay, for a producer whose database is not the queue's: the producer writes an
//! intent into its own database in its own transaction ([`EngineTx::relay`]); the relay
//! reads pending intents in order, sends them with their identity, and only then marks
//! them published. A crash between the send and the mark repeats the send: two
//! deliveries of one identity, which the target queue's dedup window collapses (4.1)
//! and the consumer inbox absorbs (17.3). Marking first is not offered: it could hide
//! an event never delivered.
//!
//! ```no_run
//! # use mqlite_engine::{Engine, relay::Relay};
//! use mqlite_contract::{OutboxStore, Store, OutMessage, EventIdentity};
//! # async fn demo<P: OutboxStore, Q: Store>(producer: Engine<P>, queue: Engine<Q>)
//! # -> mqlite_contract::Result<()> {
//! producer
//!     .tx(async |t| {
//!         // ... the producer's own writes through t.native() ...
//!         let order = OutMessage::new("order 42")
//!             .with_event(EventIdentity::new("https://shop.example/orders", "order-42"));
//!         t.relay("orders", order).await?;
//!         Ok::<_, mqlite_contract::Error>(())
//!     })
//!     .await?;
//! let relay = Relay::new(producer, queue);
//! relay.run_once().await?; // or relay.run_until(stop) as a task
//! # Ok(()) }
//! ```

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

use crate::engine::{Engine, EngineTx, MAX_SEND_BATCH};
use mqlite_contract::error::{Error, Result};
use mqlite_contract::side_tables::{RelayBacklog, RelayIntent};
use mqlite_contract::store::{HasOutbox, OutboxStore, Store, StoreTx};
use mqlite_contract::types::{EnqueueSlot, OutMessage, SendOptions};

/// Intents read per round.
pub const DEFAULT_RELAY_BATCH: usize = 64;

/// How long the relay rests when it finds nothing pending.
pub const DEFAULT_RELAY_INTERVAL: Duration = Duration::from_millis(200);

/// How long published intents are kept for the trace by default: seven days.
pub const DEFAULT_RELAY_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

impl<T: StoreTx> EngineTx<'_, T> {
    /// Writes an intent to send `message` to `queue` (of another database) into this
    /// transaction's database: it commits or rolls back with the application's writes,
    /// and a [`Relay`] sends it later. The message needs an event identity, its
    /// dedup key at the target. Returns the intent's position.
    pub async fn relay(&mut self, queue: &str, mut message: OutMessage) -> Result<i64> {
        if message.event.is_none() {
            return Err(Error::invalid(
                "a relayed message needs an event identity (source, id): the target \
                 queue collapses the relay's repeats by it",
            ));
        }
        self.validate(queue, std::slice::from_mut(&mut message))?;
        let native = self.native();
        native.check_cancelled()?;
        native.relay_insert(queue, &message).await
    }
}

/// What one round of the relay did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelayRound {
    /// Intents sent and marked published (a repeat the queue collapsed included).
    pub published: u64,
    /// Of them, repeats the target queue already held (4.1).
    pub repeats: u64,
    /// Intents the target refused as a dedup conflict (the queue holds the identity
    /// with another payload): marked refused, sent no more, counted in the backlog's
    /// `refused` and shown by the trace, for an operator to resolve.
    pub conflicts: u64,
}

/// Intents sent but not yet marked: the first half of a round.
#[derive(Debug, Default)]
pub struct SentIntents {
    /// The intents the target accepted (fresh or a repeat), by seq.
    pub accepted: Vec<i64>,
    /// The intents the target refused as a dedup conflict, by seq.
    pub refused: Vec<i64>,
    /// What the round did so far.
    pub round: RelayRound,
    /// The error that stopped the round after the intents above: [`Relay::mark`] marks
    /// them first, then returns it, so nothing accepted is sent again.
    pub stopped: Option<Error>,
}

/// The relay from a producer's database to a queue (see the module).
pub struct Relay<P: HasOutbox<N>, Q: Store, N: OutboxStore = P> {
    producer: Engine<P>,
    target: Engine<Q>,
    batch: usize,
    retention_ms: i64,
    checked: Mutex<HashSet<String>>,
    native: std::marker::PhantomData<fn() -> N>,
}

impl<P: HasOutbox<N>, Q: Store, N: OutboxStore> Relay<P, Q, N> {
    /// A relay from `producer`'s outbox to the queues of `target`.
    pub fn new(producer: Engine<P>, target: Engine<Q>) -> Self {
        Relay {
            producer,
            target,
            batch: DEFAULT_RELAY_BATCH,
            retention_ms: DEFAULT_RELAY_RETENTION.as_millis() as i64,
            checked: Mutex::new(HashSet::new()),
            native: std::marker::PhantomData,
        }
    }

    /// Reads up to `n` intents per round (1..=the send batch limit).
    pub fn batch(mut self, n: usize) -> Self {
        self.batch = n.clamp(1, MAX_SEND_BATCH);
        self
    }

    /// Keeps published intents this long for the trace.
    pub fn retention(mut self, retention: Duration) -> Self {
        self.retention_ms = i64::try_from(retention.as_millis()).unwrap_or(i64::MAX);
        self
    }

    /// The producer's engine.
    pub fn producer(&self) -> &Engine<P> {
        &self.producer
    }

    /// Refuses a target queue without a dedup window: the relay's repeat would be a
    /// second message there instead of collapsing into the first.
    async fn check_target(&self, queue: &str) -> Result<()> {
        if self
            .checked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(queue)
        {
            return Ok(());
        }
        let info = self
            .target
            .list_queues()
            .await?
            .into_iter()
            .find(|q| q.name == queue)
            .ok_or_else(|| Error::NotFound {
                kind: "queue",
                name: queue.to_owned(),
            })?;
        if info.config.dedup_window.is_zero() {
            return Err(Error::invalid(format!(
                "the relay refuses queue {queue:?}: it has no dedup window, so a repeat \
                 after a crash between send and mark would be a second message; give it a \
                 dedup_window longer than the relay can be down"
            )));
        }
        self.checked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(queue.to_owned());
        Ok(())
    }

    /// Sends the next pending intents, in order, with their identity; marks nothing.
    /// Consecutive intents for one queue go in one send. A send that fails stops the
    /// round there (later intents wait, so the order holds) and is carried in
    /// [`SentIntents::stopped`]; an error before anything was sent is returned.
    pub async fn send_pending(&self) -> Result<SentIntents> {
        let limit = self.batch;
        let pending: Vec<RelayIntent> = self
            .producer
            .tx::<N, _, _>(async move |t| t.native().relay_pending(limit).await)
            .await?;
        let mut out = SentIntents::default();
        let mut rest = pending.as_slice();
        while let Some(first) = rest.first() {
            let run = rest.iter().take_while(|i| i.queue == first.queue).count();
            let (now, later) = rest.split_at(run);
            rest = later;
            let slots = match self.send_run(&first.queue, now).await {
                Ok(slots) => slots,
                Err(e) if out.accepted.is_empty() && out.refused.is_empty() => return Err(e),
                Err(e) => {
                    out.stopped = Some(e);
                    break;
                }
            };
            for (intent, slot) in now.iter().zip(slots) {
                match slot {
                    EnqueueSlot::Conflict => {
                        out.round.conflicts += 1;
                        tracing::warn!(
                            queue = %intent.queue,
                            event = %intent.message.event.as_ref().map(ToString::to_string).unwrap_or_default(),
                            "relay: the queue holds this identity with another payload; the intent is refused, for an operator"
                        );
                        out.refused.push(intent.seq);
                    }
                    EnqueueSlot::Duplicate(_) => {
                        out.round.repeats += 1;
                        out.accepted.push(intent.seq);
                    }
                    EnqueueSlot::Enqueued(_) | EnqueueSlot::Unrouted => {
                        out.accepted.push(intent.seq);
                    }
                }
            }
        }
        Ok(out)
    }

    async fn send_run(&self, queue: &str, intents: &[RelayIntent]) -> Result<Vec<EnqueueSlot>> {
        self.check_target(queue).await?;
        let messages = intents.iter().map(|i| i.message.clone()).collect();
        self.target
            .send_batch_with(queue, messages, SendOptions::default())
            .await
    }

    /// Marks sent intents published (and refused ones refused): the second half of a
    /// round. Returns the error that stopped the round, if one did, after marking.
    pub async fn mark(&self, sent: SentIntents) -> Result<RelayRound> {
        let mut round = sent.round;
        if !(sent.accepted.is_empty() && sent.refused.is_empty()) {
            let (accepted, refused) = (sent.accepted, sent.refused);
            round.published = self
                .producer
                .tx::<N, _, _>(async move |t| {
                    t.native().relay_refuse(&refused).await?;
                    t.native().relay_mark(&accepted).await
                })
                .await?;
        }
        match sent.stopped {
            Some(e) => Err(e),
            None => Ok(round),
        }
    }

    /// One round: send the next pending intents, then mark them published.
    pub async fn run_once(&self) -> Result<RelayRound> {
        let sent = self.send_pending().await?;
        let round = self.mark(sent).await?;
        // The gauges' read is a transaction of its own: only when there are gauges.
        #[cfg(feature = "metrics")]
        {
            let backlog = self.backlog().await?;
            crate::meter::relay_backlog(&backlog, self.producer.clock().now_ms());
        }
        Ok(round)
    }

    /// The intents not yet published: how many, and when the oldest was written.
    pub async fn backlog(&self) -> Result<RelayBacklog> {
        self.producer
            .tx::<N, _, _>(async move |t| t.native().relay_backlog().await)
            .await
    }

    /// Deletes published intents older than the retention.
    pub async fn sweep(&self) -> Result<u64> {
        let retention = self.retention_ms;
        self.producer
            .tx::<N, _, _>(async move |t| {
                let before = t.native().now_ms().saturating_sub(retention);
                t.native().side_sweep(i64::MIN, before).await
            })
            .await
            .map(|s| s.intents)
    }

    /// Runs rounds until `stop` resolves: at once again after a full round, after
    /// `interval` otherwise (on the producer's clock). A failed round is logged and
    /// retried after the interval; a target refused for want of a dedup window ends the
    /// loop with that error.
    pub async fn run_until(
        &self,
        stop: impl Future<Output = ()>,
        interval: Duration,
    ) -> Result<()> {
        let mut stop = std::pin::pin!(stop);
        let mut swept_at = i64::MIN;
        loop {
            let now = self.producer.clock().now_ms();
            if now.saturating_sub(swept_at) >= 3_600_000 {
                swept_at = now;
                if let Err(e) = self.sweep().await {
                    tracing::warn!(error = %e, "relay: the retention sweep failed");
                }
            }
            let full = match self.run_once().await {
                Ok(r) => r.published + r.conflicts >= self.batch as u64,
                Err(e @ Error::InvalidArgument(_)) => return Err(e),
                Err(e) => {
                    tracing::warn!(error = %e, "relay: a round failed; retrying");
                    false
                }
            };
            if full {
                // More is waiting: go on at once, unless asked to stop.
                tokio::select! {
                    biased;
                    () = &mut stop => return Ok(()),
                    () = std::future::ready(()) => continue,
                }
            }
            let wake = now.saturating_add(interval.as_millis() as i64);
            tokio::select! {
                () = &mut stop => return Ok(()),
                () = self.producer.clock().sleep_until(wake) => {}
            }
        }
    }
}

//! The consumer inbox (17.2–17.4): a consumer's effect and its marker
//! `(consumer, source, id, fingerprint)` commit in ONE transaction of the consumer's own
//! database, so an event is applied once per consumer however often it is delivered.
//!
//! The consumer's database is any store that offers the application's transaction
//! (the SQLite, libSQL and redb stores); it may be another file than the queue's. The
//! inbox table lives there, created on first use.
//!
//! ```no_run
//! # use mqlite_engine::{Engine, inbox::{Inbox, Processed}};
//! use mqlite_contract::{OutboxStore, Store};
//! # async fn demo<S: OutboxStore, Q: Store>(consumer_db: Engine<S>, queue: Engine<Q>)
//! # -> mqlite_contract::Result<()> {
//! let inbox = Inbox::new(consumer_db);
//! if let Some(m) = queue.receive_one("orders").await? {
//!     let outcome = inbox
//!         .process("projection-v1", &m, async |tx| {
//!             // The effect, in the consumer's transaction (tx.native()).
//!             Ok::<_, mqlite_contract::Error>(())
//!         })
//!         .await?;
//!     // Applied or Duplicate: complete; Conflict: dead-letter with the reason.
//!     mqlite_engine::inbox::settle(&queue, "orders", &m, &outcome).await?;
//! }
//! # Ok(()) }
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use crate::engine::{Engine, EngineTx};
use crate::worker::HandlerError;
use mqlite_contract::error::{Error, Result};
use mqlite_contract::event::{Fingerprint, fingerprint};
use mqlite_contract::side_tables::{InboxMarker, SideSweep};
use mqlite_contract::store::{HasOutbox, OutboxStore, Store, StoreTx};
use mqlite_contract::types::Message;

/// How long markers are kept by default: seven days. A repeat delivered after its
/// marker was swept is applied again, so retention bounds what `Duplicate` can detect.
pub const DEFAULT_INBOX_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// The dead-letter reason of an inbox conflict (17.4).
pub const REASON_INBOX_CONFLICT: &str = "InboxConflict";

/// At most one retention sweep per this interval, run by `process`.
const SWEEP_EVERY_MS: i64 = 3_600_000;

/// How long a consumer name may be.
pub const MAX_CONSUMER_BYTES: usize = 256;

/// What the inbox did with one delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Processed<R> {
    /// The effect ran and committed with its marker.
    Applied(R),
    /// This consumer already applied this event with this envelope: nothing ran.
    Duplicate(InboxMarker),
    /// This consumer applied this identity with another envelope: nothing ran, and the
    /// delivery is dead-lettered, never silently corrected (17.4).
    Conflict {
        /// The marker of what was applied.
        applied: InboxMarker,
        /// The fingerprint of this delivery's envelope.
        incoming: Fingerprint,
    },
}

/// A consumer-scoped inbox in the consumer's database (see the module).
pub struct Inbox<S: HasOutbox<N>, N: OutboxStore = S> {
    engine: Engine<S>,
    retention_ms: i64,
    last_sweep: Arc<AtomicI64>,
    native: std::marker::PhantomData<fn() -> N>,
}

impl<S: HasOutbox<N>, N: OutboxStore> Clone for Inbox<S, N> {
    fn clone(&self) -> Self {
        Inbox {
            engine: self.engine.clone(),
            retention_ms: self.retention_ms,
            last_sweep: self.last_sweep.clone(),
            native: std::marker::PhantomData,
        }
    }
}

fn validate_consumer(consumer: &str) -> Result<()> {
    if consumer.is_empty()
        || consumer.len() > MAX_CONSUMER_BYTES
        || consumer.chars().any(char::is_control)
    {
        return Err(Error::invalid(format!(
            "a consumer name is 1..={MAX_CONSUMER_BYTES} bytes without control characters"
        )));
    }
    Ok(())
}

impl<S: HasOutbox<N>, N: OutboxStore> Inbox<S, N> {
    /// An inbox in the database of `engine` (the consumer's), keeping markers for
    /// [`DEFAULT_INBOX_RETENTION`].
    pub fn new(engine: Engine<S>) -> Self {
        Inbox {
            engine,
            retention_ms: DEFAULT_INBOX_RETENTION.as_millis() as i64,
            last_sweep: Arc::new(AtomicI64::new(i64::MIN)),
            native: std::marker::PhantomData,
        }
    }

    /// Keeps markers this long (at least a second). Choose it longer than any
    /// redelivery or relay repeat can arrive: after it, a repeat is applied again.
    pub fn retention(mut self, retention: Duration) -> Self {
        self.retention_ms = i64::try_from(retention.as_millis())
            .unwrap_or(i64::MAX)
            .max(1000);
        self
    }

    /// The consumer's engine.
    pub fn engine(&self) -> &Engine<S> {
        &self.engine
    }

    /// Runs `effect` for `message` as `consumer`, once: checks the consumer's marker,
    /// writes it and runs the effect in ONE transaction of the consumer's database
    /// (17.3). A failure of the effect (or after it) rolls the marker back with it, so
    /// a later delivery can still apply. The message needs an event identity.
    pub async fn process<R, E>(
        &self,
        consumer: &str,
        message: &Message,
        effect: impl for<'a, 'b, 't> AsyncFnOnce(&'a mut EngineTx<'b, N::Tx<'t>>) -> Result<R, E>
        + Send
        + 'static,
    ) -> Result<Processed<R>, E>
    where
        R: Send + 'static,
        E: From<Error> + Send + 'static,
    {
        validate_consumer(consumer)?;
        let event = message.content.event.as_ref().ok_or_else(|| {
            Error::invalid("the inbox needs a message with an event identity (source, id)")
        })?;
        self.maybe_sweep().await;
        let mut marker = InboxMarker {
            consumer: consumer.to_owned(),
            source: event.source.clone(),
            id: event.id.clone(),
            fingerprint: fingerprint(&message.content),
            applied_at_ms: 0,
        };
        self.engine
            .tx::<N, _, _>(async move |t| {
                let tx = t.native();
                let found = tx.inbox_markers(&marker.source, &marker.id).await?;
                if let Some(applied) = found.into_iter().find(|m| m.consumer == marker.consumer) {
                    return Ok(if applied.fingerprint == marker.fingerprint {
                        Processed::Duplicate(applied)
                    } else {
                        Processed::Conflict {
                            applied,
                            incoming: marker.fingerprint,
                        }
                    });
                }
                marker.applied_at_ms = tx.now_ms();
                tx.inbox_insert(&marker).await?;
                effect(t).await.map(Processed::Applied)
            })
            .await
    }

    /// Every consumer's marker of the event `(source, id)` in this database.
    pub async fn markers(&self, source: &str, id: &str) -> Result<Vec<InboxMarker>> {
        let (source, id) = (source.to_owned(), id.to_owned());
        self.engine
            .tx::<N, _, _>(async move |t| t.native().inbox_markers(&source, &id).await)
            .await
    }

    /// Deletes the markers older than the retention.
    pub async fn sweep(&self) -> Result<SideSweep> {
        let retention = self.retention_ms;
        self.engine
            .tx::<N, _, _>(async move |t| {
                let before = t.native().now_ms().saturating_sub(retention);
                t.native().side_sweep(before, i64::MIN).await
            })
            .await
    }

    async fn maybe_sweep(&self) {
        let now = self.engine.clock().now_ms();
        let last = self.last_sweep.load(Ordering::Relaxed);
        if now.saturating_sub(last) < SWEEP_EVERY_MS
            || self
                .last_sweep
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        if let Err(e) = self.sweep().await {
            tracing::warn!(error = %e, "the inbox's retention sweep failed; it runs again later");
        }
    }

    /// A worker handler that runs `effect` through this inbox as `consumer`: Applied and
    /// Duplicate complete the message, Conflict dead-letters it under
    /// [`REASON_INBOX_CONFLICT`], and an effect's failure retries it (the marker rolled
    /// back with the effect). The effect gets the delivery and the consumer's
    /// transaction.
    pub fn handler<F>(
        &self,
        consumer: &str,
        effect: F,
    ) -> impl Fn(
        Message,
    ) -> std::pin::Pin<
        Box<dyn Future<Output = std::result::Result<(), HandlerError>> + Send>,
    > + Send
    + Sync
    + 'static
    where
        F: for<'a, 'b, 't> AsyncFn(
                &'a Message,
                &'a mut EngineTx<'b, N::Tx<'t>>,
            ) -> std::result::Result<(), HandlerError>
            + Clone
            + Send
            + Sync
            + 'static,
    {
        let inbox = self.clone();
        let refused = validate_consumer(consumer).err().map(|e| e.to_string());
        let consumer = consumer.to_owned();
        move |m: Message| {
            let (inbox, consumer, effect) = (inbox.clone(), consumer.clone(), effect.clone());
            let refused = refused.clone();
            Box::pin(async move {
                // A bad consumer name or a message without an identity: no retry cures it.
                if let Some(why) = refused {
                    return Err(HandlerError::Permanent(why));
                }
                if m.content.event.is_none() {
                    return Err(HandlerError::Permanent(
                        "the inbox needs a message with an event identity (source, id)".into(),
                    ));
                }
                let delivered = m.clone();
                let outcome = inbox
                    .process(&consumer, &delivered, async move |t| effect(&m, t).await)
                    .await?;
                match outcome {
                    Processed::Applied(()) | Processed::Duplicate(_) => Ok(()),
                    Processed::Conflict { applied, incoming } => Err(HandlerError::DeadLetter {
                        reason: REASON_INBOX_CONFLICT.into(),
                        description: conflict_text(&consumer, &applied, incoming),
                    }),
                }
            })
        }
    }
}

fn conflict_text(consumer: &str, applied: &InboxMarker, incoming: Fingerprint) -> String {
    format!(
        "consumer {consumer} applied event ({}, {}) with envelope fingerprint {} at {} ms; \
         this delivery's envelope is {incoming}",
        applied.source, applied.id, applied.fingerprint, applied.applied_at_ms
    )
}

/// Settles a delivery by what the inbox did: Applied and Duplicate complete it,
/// Conflict dead-letters it under [`REASON_INBOX_CONFLICT`] with both fingerprints.
pub async fn settle<Q: Store, R: Sync>(
    queue_engine: &Engine<Q>,
    queue: &str,
    message: &Message,
    outcome: &Processed<R>,
) -> Result<()> {
    match outcome {
        Processed::Applied(_) | Processed::Duplicate(_) => {
            queue_engine.complete(queue, message).await
        }
        Processed::Conflict { applied, incoming } => {
            let text = conflict_text(&applied.consumer, applied, *incoming);
            queue_engine
                .reject(queue, message, REASON_INBOX_CONFLICT, &text)
                .await
        }
    }
}

//! Sends: validated, to a queue or (through [`Engine::publish`]) a topic; and the
//! outbox: sends inside the application's own store transaction ([`Engine::tx`],
//! [`EngineTx`]).

use std::sync::Arc;

use std::collections::HashSet;

use std::time::Instant;

use crate::meter;
use mqlite_contract::error::{Error, Result};
use mqlite_contract::store::{HasOutbox, OutboxStore, Store, StoreTx};
use mqlite_contract::types::{EnqueueSlot, OutMessage, SendOptions, SeqNumber};

use super::{Engine, validate_send};

impl<S: Store> Engine<S> {
    /// Sends one message; returns its sequence number (the original one for a dedup
    /// repeat). A repeat with another body is `DedupConflict`.
    pub async fn send(&self, queue: &str, message: OutMessage) -> Result<SeqNumber> {
        self.send_with(queue, message, SendOptions::default()).await
    }

    /// Sends one message with scheduling and TTL options.
    pub async fn send_with(
        &self,
        queue: &str,
        message: OutMessage,
        options: SendOptions,
    ) -> Result<SeqNumber> {
        let id = message.dedup_key();
        let slots = self.send_batch_with(queue, vec![message], options).await?;
        single_slot(&slots, id)
    }

    /// Sends a batch in one transaction; a dedup-conflicting slot is 0 (4.3).
    pub async fn send_batch(
        &self,
        queue: &str,
        messages: Vec<OutMessage>,
    ) -> Result<Vec<SeqNumber>> {
        self.send_batch_with(queue, messages, SendOptions::default())
            .await
            .map(|slots| slots.iter().map(EnqueueSlot::seq).collect())
    }

    /// Schedules one message for `at_ms`.
    pub async fn schedule(
        &self,
        queue: &str,
        message: OutMessage,
        at_ms: i64,
    ) -> Result<SeqNumber> {
        let options = SendOptions {
            scheduled_at_ms: Some(at_ms),
            ttl: None,
        };
        self.send_with(queue, message, options).await
    }

    /// Sends a batch with options; returns what the store did with each slot.
    #[tracing::instrument(level = "debug", skip_all, fields(queue = queue, n = messages.len()), err(level = "debug"))]
    pub async fn send_batch_with(
        &self,
        queue: &str,
        messages: Vec<OutMessage>,
        options: SendOptions,
    ) -> Result<Vec<EnqueueSlot>> {
        let started = Instant::now();
        let r = self.send_batch_inner(queue, messages, options).await;
        meter::call("send", queue, started, &r);
        r
    }

    async fn send_batch_inner(
        &self,
        queue: &str,
        mut messages: Vec<OutMessage>,
        options: SendOptions,
    ) -> Result<Vec<EnqueueSlot>> {
        validate_send(
            queue,
            &mut messages,
            &options,
            self.inner.options.max_message_bytes,
        )?;
        // A name is looked up as a topic first, then as a queue (12.2).
        if self.is_topic(queue) {
            return Ok(self.publish_inner(queue, messages, options).await?.1);
        }
        let _g = self.admit().await?;
        let scheduled = options.scheduled_at_ms;
        let slots = self
            .inner
            .store
            .enqueue(queue.to_owned(), messages, options)
            .await?;
        if let Some(at) = scheduled.filter(|at| *at > self.inner.clock.now_ms()) {
            self.inner.due.note(queue, at);
        }
        self.wake_queue(queue, slots.len());
        Ok(slots)
    }

    /// Runs `f` in one store transaction: the application's own writes (through the
    /// native handle of the store `N`, `tx.native()`) and every `tx.send` commit
    /// together or not at all (16.1, 16.2). `f` is an async closure, so one shape fits a
    /// synchronous native handle (rusqlite: just call it) and an asynchronous one (await
    /// it); it runs where the store's handle lives (the SQLite store: its writer thread).
    ///
    /// `N` is the engine's own store on a typed engine (inferred), and on the run-time
    /// engine (`Engine<DynStore>`) the store the caller expects to be behind it, named
    /// (`tx::<SqliteStore, _, _>`): another store is `InvalidArgument`.
    ///
    /// The closure is `'static`: it may run on the store's own thread (the SQLite
    /// store's writer), after this call's stack frame could be gone if the caller's
    /// future were dropped. So it cannot borrow from the caller: move what it needs in
    /// (`async move |tx| { … }` over owned or `Arc`ed values), and return what the
    /// caller needs through `R`. A borrow is refused at compile time ("borrowed value
    /// does not live long enough", pointing at `tx`'s signature).
    ///
    /// ```no_run
    /// # async fn demo(mq: mqlite_engine::Engine<impl mqlite_contract::OutboxStore>)
    /// # -> mqlite_contract::Result<()> {
    /// use mqlite_contract::OutMessage;
    /// let seq = mq
    ///     .tx(async |tx| {
    ///         // tx.native() is the store's own transaction handle.
    ///         tx.send("events", OutMessage::new("order 42")).await
    ///     })
    ///     .await?;
    /// # let _ = seq; Ok(()) }
    /// ```
    pub async fn tx<N, R, E>(
        &self,
        f: impl for<'a, 'b, 't> AsyncFnOnce(&'a mut EngineTx<'b, N::Tx<'t>>) -> Result<R, E>
        + Send
        + 'static,
    ) -> Result<R, E>
    where
        S: HasOutbox<N>,
        N: OutboxStore,
        R: Send + 'static,
        E: From<Error> + Send + 'static,
    {
        let _g = self.admit().await?;
        let store = self.inner.store.outbox()?;
        let max = self.inner.options.max_message_bytes;
        let topics = self.topics();
        let out = store
            .in_tx(async move |native: &mut N::Tx<'_>| {
                let mut tx = EngineTx {
                    native,
                    max_message_bytes: max,
                    topics,
                };
                f(&mut tx).await
            })
            .await;
        // A committed or rolled-back transaction may have sent; a spurious wake is cheap.
        self.wake_receivers();
        out
    }
}

/// The engine's view of an application transaction: the store's native handle plus
/// validated sends that commit with it.
pub struct EngineTx<'a, T: StoreTx> {
    native: &'a mut T,
    max_message_bytes: usize,
    topics: Arc<HashSet<String>>,
}

impl<T: StoreTx> EngineTx<'_, T> {
    /// The store's native transaction handle (a rusqlite transaction, say).
    pub fn native(&mut self) -> &mut T {
        self.native
    }

    /// Sends one message inside the transaction.
    pub async fn send(&mut self, queue: &str, message: OutMessage) -> Result<SeqNumber> {
        let id = message.dedup_key();
        let slots = self
            .send_batch_with(queue, vec![message], SendOptions::default())
            .await?;
        single_slot(&slots, id)
    }

    /// Checks (and stamps the identity of) messages bound for `queue` as a send would.
    pub(crate) fn validate(&self, queue: &str, messages: &mut [OutMessage]) -> Result<()> {
        validate_send(
            queue,
            messages,
            &SendOptions::default(),
            self.max_message_bytes,
        )
    }

    /// Sends a batch inside the transaction.
    pub async fn send_batch_with(
        &mut self,
        queue: &str,
        mut messages: Vec<OutMessage>,
        options: SendOptions,
    ) -> Result<Vec<EnqueueSlot>> {
        validate_send(queue, &mut messages, &options, self.max_message_bytes)?;
        if self.topics.contains(queue) {
            return Err(Error::invalid(format!(
                "{queue:?} is a topic: a transaction sends to queues; publish to the topic \
                 after the transaction commits"
            )));
        }
        self.native.check_cancelled()?;
        self.native.enqueue(queue, messages, options).await
    }
}

fn single_slot(slots: &[EnqueueSlot], id: Option<String>) -> Result<SeqNumber> {
    match slots.first() {
        Some(EnqueueSlot::Conflict) => Err(Error::DedupConflict {
            message_id: id.unwrap_or_default(),
        }),
        Some(slot) => Ok(slot.seq()),
        None => Err(Error::invalid("empty send")),
    }
}

//! A handle on one queue: every call names the queue once, when the handle is made, so a
//! settlement can never name the wrong queue; the batch settlements take what a receive
//! returned.

use std::future::Future;
use std::time::Duration;

use crate::engine::Engine;
use crate::worker::{HandlerError, Worker};
use mqlite_contract::types::{
    BatchResult, LockRef, Message, OutMessage, PeekOptions, QueueStats, ReceiveOptions, SeqNumber,
};
use mqlite_contract::{error::Result, store::Store};

/// One queue of an engine. Cheap to clone.
#[derive(Debug)]
pub struct Queue<S: Store> {
    engine: Engine<S>,
    name: String,
}

impl<S: Store> Clone for Queue<S> {
    fn clone(&self) -> Self {
        Queue {
            engine: self.engine.clone(),
            name: self.name.clone(),
        }
    }
}

impl<S: Store> Engine<S> {
    /// A handle on the queue `name` (nothing is checked until the first call).
    ///
    /// ```no_run
    /// # async fn demo(mq: mqlite_engine::Engine<impl mqlite_contract::Store>)
    /// # -> mqlite_contract::Result<()> {
    /// let jobs = mq.queue("jobs");
    /// jobs.send(mqlite_contract::OutMessage::new("resize photo 1")).await?;
    /// let got = jobs.receive(mqlite_contract::ReceiveOptions::batch(16)).await?;
    /// let results = jobs.complete_batch(&got).await?;
    /// assert!(results.iter().all(|r| r.ok));
    /// # Ok(()) }
    /// ```
    pub fn queue(&self, name: &str) -> Queue<S> {
        Queue {
            engine: self.clone(),
            name: name.to_owned(),
        }
    }
}

impl<S: Store> Queue<S> {
    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The engine under the handle.
    pub fn engine(&self) -> &Engine<S> {
        &self.engine
    }

    /// Sends one message (see [`Engine::send`]).
    pub async fn send(&self, message: OutMessage) -> Result<SeqNumber> {
        self.engine.send(&self.name, message).await
    }

    /// Sends a batch in one transaction (see [`Engine::send_batch`]).
    pub async fn send_batch(&self, messages: Vec<OutMessage>) -> Result<Vec<SeqNumber>> {
        self.engine.send_batch(&self.name, messages).await
    }

    /// Receives (see [`Engine::receive`]).
    pub async fn receive(&self, options: ReceiveOptions) -> Result<Vec<Message>> {
        self.engine.receive(&self.name, options).await
    }

    /// Receives one message without waiting, if any is eligible.
    pub async fn receive_one(&self) -> Result<Option<Message>> {
        self.engine.receive_one(&self.name).await
    }

    /// Completes a received message (2.1). An identical repeat of a completion that
    /// succeeded replays `Ok` for 30 minutes (3.2).
    pub async fn complete(&self, message: &Message) -> Result<()> {
        self.engine.complete(&self.name, message).await
    }

    /// Abandons a received message, for redelivery after `delay` (2.2; zero = now).
    pub async fn abandon(&self, message: &Message, delay: Duration) -> Result<()> {
        self.engine.abandon(&self.name, message, delay).await
    }

    /// Dead-letters a received message with a reason (2.3).
    pub async fn reject(&self, message: &Message, reason: &str, description: &str) -> Result<()> {
        self.engine
            .reject(&self.name, message, reason, description)
            .await
    }

    /// Defers a received message (2.4).
    pub async fn defer(&self, message: &Message) -> Result<()> {
        self.engine.defer(&self.name, message).await
    }

    /// Renews a received message's lease; returns its new end (2.5).
    pub async fn renew(&self, message: &Message) -> Result<i64> {
        self.engine.renew(&self.name, message).await
    }

    /// Completes what a receive returned, in one transaction (2.7).
    pub async fn complete_batch(&self, messages: &[Message]) -> Result<Vec<BatchResult>> {
        let locks: Vec<LockRef> = messages.iter().map(LockRef::from).collect();
        self.engine.complete_batch(&self.name, &locks).await
    }

    /// Renews the leases of what a receive returned (2.8).
    pub async fn renew_batch(&self, messages: &[Message]) -> Result<Vec<BatchResult>> {
        let locks: Vec<LockRef> = messages.iter().map(LockRef::from).collect();
        self.engine.renew_batch(&self.name, &locks).await
    }

    /// Browses without locking (6.2).
    pub async fn peek(&self, options: PeekOptions) -> Result<Vec<Message>> {
        self.engine.peek(&self.name, options).await
    }

    /// Counts per state.
    pub async fn stats(&self) -> Result<QueueStats> {
        self.engine.stats(&self.name).await
    }

    /// A worker on this queue (see [`Engine::worker`]).
    pub fn worker<F, Fut>(&self, handler: F) -> Worker<Engine<S>, F>
    where
        F: Fn(Message) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<(), HandlerError>> + Send + 'static,
    {
        self.engine.worker(&self.name, handler)
    }
}

//! The consumer loop every user would otherwise write by hand: long-poll, run up to N
//! handlers at once, renew each lock while its handler runs, complete on `Ok`, retry
//! with backoff on a retryable error (dead-lettering with the error's text at the
//! attempt bound), reject on a permanent one, isolate a panicking handler, and on
//! shutdown stop receiving, let running handlers finish within a grace period and
//! abandon the rest.
//!
//! Completions and renewals are coalesced: the handlers' `Ok`s go to one completer task,
//! which completes whatever has gathered while its previous call ran in one
//! [`Engine::complete_batch`] (one transaction) — with 4 handlers at once, up to 4
//! messages a commit instead of one, and no waiting when only one is done — and the
//! renewals of long handlers go to one renewer task the same way
//! ([`Engine::renew_batch`]).
//!
//! Prefetch: one receive claims enough for the free handlers and a small buffer
//! ([`Worker::prefetch`], by default as many as the concurrency), so a busy worker
//! claims several messages per transaction instead of one per freed handler. A
//! buffered message whose lease is half spent when its turn comes is renewed first (in
//! one batch with the others), and on shutdown the buffered messages are abandoned at
//! once, for another consumer, without waiting for their leases.
//!
//! Every wait reads the engine's clock, so a test drives a worker with a manual clock.

use std::collections::{HashMap, HashSet, VecDeque};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc, oneshot, watch};
use tokio::task::JoinSet;

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::store::Store;
use crate::types::{LockRef, Message, ReceiveOptions, SeqNumber};

/// What a handler says about a message it could not process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandlerError {
    /// Try again later (with backoff), dead-lettering at the attempt bound.
    Retry(String),
    /// Never try again: dead-letter it now with this text.
    Permanent(String),
    /// Never try again: dead-letter it now under this reason (the consumer inbox's
    /// `InboxConflict`, say) and description.
    DeadLetter {
        /// The dead-letter reason.
        reason: String,
        /// What happened.
        description: String,
    },
}

impl HandlerError {
    /// A failure worth retrying.
    pub fn retry(cause: impl std::fmt::Display) -> Self {
        HandlerError::Retry(cause.to_string())
    }

    /// A failure no retry will cure.
    pub fn permanent(cause: impl std::fmt::Display) -> Self {
        HandlerError::Permanent(cause.to_string())
    }
}

impl From<Error> for HandlerError {
    fn from(e: Error) -> Self {
        HandlerError::Retry(e.to_string())
    }
}

/// How a failed message is retried.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// The delay before the second delivery.
    pub initial_backoff: Duration,
    /// The longest delay.
    pub max_backoff: Duration,
    /// Each retry waits this many times longer than the one before.
    pub multiplier: f64,
    /// Up to this fraction of each delay is added at random, so failing consumers do
    /// not retry in step (0 = none).
    pub jitter: f64,
    /// After this many deliveries a retryable failure dead-letters the message with the
    /// error's text (the queue's own max_delivery_count still applies).
    pub max_attempts: i64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(300),
            multiplier: 2.0,
            jitter: 0.2,
            max_attempts: 10,
        }
    }
}

impl RetryPolicy {
    /// The delay before the delivery after `delivery_count`, jitter included.
    pub fn backoff(&self, delivery_count: i64) -> Duration {
        let exponent = i32::try_from(delivery_count.saturating_sub(1).clamp(0, 64)).unwrap_or(64);
        let base = self.initial_backoff.as_secs_f64() * self.multiplier.max(1.0).powi(exponent);
        let capped = base.min(self.max_backoff.as_secs_f64());
        let jitter = if self.jitter > 0.0 {
            capped * self.jitter.min(1.0) * unit_random()
        } else {
            0.0
        };
        Duration::from_secs_f64((capped + jitter).min(self.max_backoff.as_secs_f64() * 2.0))
    }
}

/// A number in [0, 1) from the operating system's random source.
fn unit_random() -> f64 {
    let bits = crate::types::LockToken::random().as_u128() as u64 >> 11;
    bits as f64 / (1u64 << 53) as f64
}

/// What a worker did, returned when it stops.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerReport {
    /// Messages handled and completed.
    pub completed: u64,
    /// Messages abandoned for a retry after a retryable failure.
    pub retried: u64,
    /// Messages dead-lettered: a permanent failure or the attempt bound.
    pub dead_lettered: u64,
    /// Handlers that panicked (their messages were abandoned for a retry).
    pub panicked: u64,
    /// Handlers still running when the grace period ended (their messages were
    /// abandoned, for another consumer).
    pub abandoned_at_shutdown: u64,
    /// Settlements refused with LockLost (the lease was lost despite renewals).
    pub lock_lost: u64,
    /// Prefetched messages never handed to a handler: abandoned at shutdown for another
    /// consumer, or whose lease was lost while they waited in the buffer.
    pub returned_unstarted: u64,
}

/// The reason a worker writes on the messages it dead-letters.
pub const REASON_HANDLER_FAILED: &str = "HandlerFailed";

/// A consumer of one queue; build it with [`Engine::worker`], start it with
/// [`Worker::run_until`].
pub struct Worker<S: Store, F> {
    engine: Engine<S>,
    queue: String,
    handler: Arc<F>,
    concurrency: usize,
    prefetch: Option<usize>,
    poll_wait: Duration,
    grace: Duration,
    retry: RetryPolicy,
}

impl<S: Store> Engine<S> {
    /// A worker that hands each message of `queue` to `handler` (see [`Worker`]).
    ///
    /// ```no_run
    /// # async fn demo(mq: mqlite_engine_core::Engine<impl mqlite_engine_core::Store>)
    /// # -> mqlite_engine_core::Result<()> {
    /// use mqlite_engine_core::worker::HandlerError;
    /// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    /// # drop(stop);
    /// let report = mq
    ///     .worker("jobs", |m| async move {
    ///         let text = String::from_utf8(m.body().to_vec()).map_err(HandlerError::permanent)?;
    ///         println!("{text}");
    ///         Ok(())
    ///     })
    ///     .concurrency(4)
    ///     .run_until(async {
    ///         let _ = stopped.await;
    ///     })
    ///     .await?;
    /// println!("{report:?}");
    /// # Ok(()) }
    /// ```
    pub fn worker<F, Fut>(&self, queue: &str, handler: F) -> Worker<S, F>
    where
        F: Fn(Message) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<(), HandlerError>> + Send + 'static,
    {
        Worker {
            engine: self.clone(),
            queue: queue.to_owned(),
            handler: Arc::new(handler),
            concurrency: 1,
            prefetch: None,
            poll_wait: Duration::from_secs(5),
            grace: Duration::from_secs(30),
            retry: RetryPolicy::default(),
        }
    }
}

impl<S, F, Fut> Worker<S, F>
where
    S: Store,
    F: Fn(Message) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = std::result::Result<(), HandlerError>> + Send + 'static,
{
    /// Runs up to `n` handlers at once (at least 1).
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.clamp(1, crate::engine::MAX_RECEIVE_BATCH as usize);
        self
    }

    /// How many messages beyond the free handlers one receive may claim and hold in a
    /// buffer (default: the concurrency; 0 claims only what the free handlers take).
    /// Buffered messages are locked to this worker: other consumers of the queue do not
    /// see them until they are handled, or abandoned at shutdown.
    pub fn prefetch(mut self, n: usize) -> Self {
        self.prefetch = Some(n.min(crate::engine::MAX_RECEIVE_BATCH as usize));
        self
    }

    /// How long each receive long-polls (at most the engine's 20 s).
    pub fn poll_wait(mut self, wait: Duration) -> Self {
        self.poll_wait = wait.min(crate::engine::MAX_WAIT);
        self
    }

    /// How long running handlers may finish after shutdown before their messages are
    /// abandoned.
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// How failures are retried.
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// Receives and handles messages until `shutdown` resolves, then stops receiving,
    /// gives running handlers the grace period, abandons what is still running, and
    /// returns what it did. An error of the queue itself (it does not exist, the engine
    /// closed) ends the worker with that error after the same shutdown.
    pub async fn run_until(
        self,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<WorkerReport> {
        let report = Arc::new(std::sync::Mutex::new(WorkerReport::default()));
        let permits = Arc::new(Semaphore::new(self.concurrency));
        let (completions, gathered) = mpsc::unbounded_channel();
        let completer = tokio::spawn(coalesced(
            self.engine.clone(),
            self.queue.clone(),
            gathered,
            Op::Complete,
        ));
        let (renewals, gathered) = mpsc::unbounded_channel();
        let renewer = tokio::spawn(coalesced(
            self.engine.clone(),
            self.queue.clone(),
            gathered,
            Op::Renew,
        ));
        let prefetch = self.prefetch.unwrap_or(self.concurrency);
        let max_claim =
            (self.concurrency + prefetch).min(crate::engine::MAX_RECEIVE_BATCH as usize);
        // Each claimed message with the time its lease was last set.
        let mut buffer: VecDeque<(Message, i64)> = VecDeque::new();
        // Flipped when the grace period ends: every job still in its handler abandons.
        let (expire, expired) = watch::channel(false);
        let mut tasks = JoinSet::new();
        let mut shutdown = std::pin::pin!(shutdown);
        let outcome = loop {
            // Wait for a free slot, then take as many messages as there are slots.
            let first = tokio::select! {
                _ = &mut shutdown => break Ok(()),
                p = permits.clone().acquire_owned() => p.map_err(|_| Error::Closed),
            };
            let Ok(first) = first else {
                break Err(Error::Closed);
            };
            let mut slots = vec![first];
            while let Ok(p) = permits.clone().try_acquire_owned() {
                slots.push(p);
            }
            if buffer.is_empty() {
                let options = ReceiveOptions {
                    max_messages: max_claim.max(slots.len()) as u32,
                    wait: self.poll_wait,
                    ..Default::default()
                };
                let got = tokio::select! {
                    _ = &mut shutdown => break Ok(()),
                    got = self.engine.receive(&self.queue, options) => got,
                };
                let now = self.engine.clock().now_ms();
                match got {
                    Ok(m) => buffer.extend(m.into_iter().map(|m| (m, now))),
                    Err(e) => break Err(e),
                }
            } else {
                self.refresh(&mut buffer, slots.len(), &report).await;
            }
            let ready = slots.len().min(buffer.len());
            for ((m, _), permit) in buffer.drain(..ready).zip(slots.drain(..)) {
                let job = Job {
                    engine: self.engine.clone(),
                    queue: self.queue.clone(),
                    handler: self.handler.clone(),
                    retry: self.retry.clone(),
                    report: report.clone(),
                    expired: expired.clone(),
                    completions: completions.clone(),
                    renewals: renewals.clone(),
                };
                tasks.spawn(async move {
                    job.run(m).await;
                    drop(permit);
                });
            }
            // Reap finished tasks so the set does not grow.
            while tasks.try_join_next().is_some() {}
        };
        // Shutdown: no more receives; the buffered messages go back at once, for
        // another consumer; the running handlers get the grace period.
        for (m, _) in buffer.drain(..) {
            let lock = LockRef::from(&m);
            if self
                .engine
                .abandon(&self.queue, lock, Duration::ZERO)
                .await
                .is_ok()
            {
                count(&report, |r| r.returned_unstarted += 1);
            }
        }
        let clock = self.engine.clock().clone();
        let deadline = clock
            .now_ms()
            .saturating_add(i64::try_from(self.grace.as_millis()).unwrap_or(i64::MAX));
        {
            let drained = async { while tasks.join_next().await.is_some() {} };
            tokio::select! {
                _ = drained => {}
                _ = clock.sleep_until(deadline) => {}
            }
        }
        // Whatever is still in its handler abandons its message now; a job already
        // settling finishes its settlement first, so nothing finished is abandoned.
        let _ = expire.send(true);
        while tasks.join_next().await.is_some() {}
        // Every job has its answer; the completer and renewer end with the last sender.
        drop(completions);
        drop(renewals);
        let _ = completer.await;
        let _ = renewer.await;
        let report = *report.lock().unwrap_or_else(|e| e.into_inner());
        outcome.map(|()| report)
    }

    /// Before the first `n` buffered messages go to handlers: those whose lease is half
    /// spent are renewed in one batch; one whose lease is lost (reaped, or expired) is
    /// dropped from the buffer and counted, for it is another consumer's now.
    async fn refresh(
        &self,
        buffer: &mut VecDeque<(Message, i64)>,
        n: usize,
        report: &std::sync::Mutex<WorkerReport>,
    ) {
        let now = self.engine.clock().now_ms();
        let stale: Vec<LockRef> = buffer
            .iter()
            .take(n)
            .filter(|(m, since)| half_spent(m.locked_until_ms, *since, now))
            .map(|(m, _)| LockRef::from(m))
            .collect();
        if stale.is_empty() {
            return;
        }
        let renewed: HashMap<SeqNumber, i64> =
            match self.engine.renew_batch(&self.queue, &stale).await {
                Ok(results) => results
                    .iter()
                    .filter(|r| r.ok)
                    .map(|r| (r.seq, r.locked_until_ms))
                    .collect(),
                // The store failed: the leases may still hold; the jobs' own renewals
                // or settlements will tell.
                Err(_) => return,
            };
        let stale: HashSet<SeqNumber> = stale.iter().map(|l| l.seq).collect();
        buffer.retain_mut(|(m, since)| {
            if !stale.contains(&m.seq) {
                return true;
            }
            match renewed.get(&m.seq) {
                Some(until) => {
                    m.locked_until_ms = *until;
                    *since = now;
                    true
                }
                None => {
                    count(report, |r| r.returned_unstarted += 1);
                    false
                }
            }
        });
    }
}

/// Whether half of a lease set at `since` and ending at `until` has passed by `now`.
fn half_spent(until: i64, since: i64, now: i64) -> bool {
    now - since >= (until - since) / 2
}

fn count(report: &std::sync::Mutex<WorkerReport>, f: impl FnOnce(&mut WorkerReport)) {
    f(&mut report.lock().unwrap_or_else(|e| e.into_inner()));
}

/// One message's handling: the handler in its own task (a panic stays there), the lock
/// renewed while it runs, then the settlement.
struct Job<S: Store, F> {
    engine: Engine<S>,
    queue: String,
    handler: Arc<F>,
    retry: RetryPolicy,
    report: Arc<std::sync::Mutex<WorkerReport>>,
    expired: watch::Receiver<bool>,
    completions: mpsc::UnboundedSender<Coalesced>,
    renewals: mpsc::UnboundedSender<Coalesced>,
}

/// What a coalescing task does with the locks the jobs hand it.
#[derive(Debug, Clone, Copy)]
enum Op {
    Complete,
    Renew,
}

/// A lock handed to the completer or the renewer, and where its outcome goes: the
/// lease's new end (0 for a completion) when it took effect, None when the lock was
/// lost, or why the call failed.
type Coalesced = (
    LockRef,
    oneshot::Sender<std::result::Result<Option<i64>, String>>,
);

/// The most locks one call of the completer or the renewer carries.
const MAX_COALESCED: usize = 256;

/// Completes (or renews) what the jobs hand over, coalescing what gathers while a call
/// runs into the next one: one lock alone is settled as its job would settle it, several
/// in one batch (2.7, 2.8: each item settles or reports its lost lock on its own).
async fn coalesced<S: Store>(
    engine: Engine<S>,
    queue: String,
    mut gathered: mpsc::UnboundedReceiver<Coalesced>,
    op: Op,
) {
    while let Some(first) = gathered.recv().await {
        let mut batch = vec![first];
        while batch.len() < MAX_COALESCED {
            match gathered.try_recv() {
                Ok(c) => batch.push(c),
                Err(_) => break,
            }
        }
        if batch.len() == 1
            && let Some((lock, reply)) = batch.pop()
        {
            let outcome = match op {
                Op::Complete => engine.complete(&queue, lock).await.map(|()| 0),
                Op::Renew => engine.renew(&queue, lock).await,
            };
            let _ = reply.send(match outcome {
                Ok(until) => Ok(Some(until)),
                Err(Error::LockLost { .. }) => Ok(None),
                Err(e) => Err(e.to_string()),
            });
            continue;
        }
        let locks: Vec<LockRef> = batch.iter().map(|(l, _)| *l).collect();
        let results = match op {
            Op::Complete => engine.complete_batch(&queue, &locks).await,
            Op::Renew => engine.renew_batch(&queue, &locks).await,
        };
        match results {
            Ok(results) => {
                let took: HashMap<SeqNumber, i64> = results
                    .iter()
                    .filter(|r| r.ok)
                    .map(|r| (r.seq, r.locked_until_ms))
                    .collect();
                for (lock, reply) in batch {
                    let _ = reply.send(Ok(took.get(&lock.seq).copied()));
                }
            }
            Err(e) => {
                let why = e.to_string();
                for (_, reply) in batch {
                    let _ = reply.send(Err(why.clone()));
                }
            }
        }
    }
}

impl<S, F, Fut> Job<S, F>
where
    S: Store,
    F: Fn(Message) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = std::result::Result<(), HandlerError>> + Send + 'static,
{
    async fn run(self, m: Message) {
        let lock = LockRef::from(&m);
        let clock = self.engine.clock().clone();
        let received_at = clock.now_ms();
        let lease = (m.locked_until_ms - received_at).max(1);
        let delivery_count = m.delivery_count;
        let handler = self.handler.clone();
        let mut handled = tokio::spawn(async move { handler(m).await });
        let mut locked_until = lease + received_at;
        let mut expired = self.expired.clone();
        let outcome = loop {
            // Renew when two thirds of the lease have passed.
            let renew_at = locked_until - lease / 3;
            tokio::select! {
                out = &mut handled => break out,
                () = async {
                    // The guard wait_for returns is not Send: drop it in here.
                    let _ = expired.wait_for(|e| *e).await;
                } => {
                    // The grace period is over: another consumer takes it from here.
                    handled.abort();
                    if self.engine.abandon(&self.queue, lock, Duration::ZERO).await.is_ok() {
                        self.count(|r| r.abandoned_at_shutdown += 1);
                    }
                    return;
                }
                _ = clock.sleep_until(renew_at) => {
                    match self.coalesced(&self.renewals, Op::Renew, lock).await {
                        Ok(until) => locked_until = until,
                        // The lease is gone; the handler finishes, its settlement will
                        // be refused and counted.
                        Err(_) => locked_until = i64::MAX,
                    }
                }
            }
        };
        match outcome {
            Ok(Ok(())) => self.settle(Settle::Complete, lock).await,
            Ok(Err(HandlerError::Permanent(why))) => {
                self.settle(Settle::DeadLetter(REASON_HANDLER_FAILED.into(), why), lock)
                    .await
            }
            Ok(Err(HandlerError::DeadLetter {
                reason,
                description,
            })) => {
                self.settle(Settle::DeadLetter(reason, description), lock)
                    .await
            }
            Ok(Err(HandlerError::Retry(why))) if delivery_count >= self.retry.max_attempts => {
                self.settle(Settle::DeadLetter(REASON_HANDLER_FAILED.into(), why), lock)
                    .await
            }
            Ok(Err(HandlerError::Retry(_))) => {
                let delay = self.retry.backoff(delivery_count);
                self.settle(Settle::Retry(delay), lock).await
            }
            Err(join) => {
                if join.is_panic() {
                    self.count(|r| r.panicked += 1);
                }
                let delay = self.retry.backoff(delivery_count);
                self.settle(Settle::Retry(delay), lock).await
            }
        }
    }

    /// Completes or renews through the worker's completer or renewer (coalesced with
    /// other jobs'), or alone if it is gone. The lease's new end (0 for a completion).
    async fn coalesced(
        &self,
        to: &mpsc::UnboundedSender<Coalesced>,
        op: Op,
        lock: LockRef,
    ) -> Result<i64> {
        let alone = || async {
            match op {
                Op::Complete => self.engine.complete(&self.queue, lock).await.map(|()| 0),
                Op::Renew => self.engine.renew(&self.queue, lock).await,
            }
        };
        let (reply, outcome) = oneshot::channel();
        if to.send((lock, reply)).is_err() {
            return alone().await;
        }
        match outcome.await {
            Ok(Ok(Some(until))) => Ok(until),
            Ok(Ok(None)) => Err(Error::LockLost {
                reason: crate::error::LockLostReason::Unknown,
            }),
            Ok(Err(why)) => Err(Error::backend("worker", std::io::Error::other(why))),
            Err(_) => alone().await,
        }
    }

    fn count(&self, f: impl FnOnce(&mut WorkerReport)) {
        count(&self.report, f);
    }

    /// Settles and counts. A settlement that fails otherwise than LockLost (the engine
    /// closed, the store failed) leaves the message to its lease: it comes back.
    async fn settle(&self, how: Settle, lock: LockRef) {
        let q = &self.queue;
        let result = match &how {
            Settle::Complete => self
                .coalesced(&self.completions, Op::Complete, lock)
                .await
                .map(|_| ()),
            Settle::Retry(delay) => {
                let delay = (*delay).min(crate::engine::MAX_ABANDON_DELAY);
                self.engine.abandon(q, lock, delay).await
            }
            Settle::DeadLetter(reason, why) => {
                let text: String = why.chars().take(4096).collect();
                self.engine.reject(q, lock, reason, &text).await
            }
        };
        match result {
            Ok(()) => self.count(|r| match how {
                Settle::Complete => r.completed += 1,
                Settle::Retry(_) => r.retried += 1,
                Settle::DeadLetter(..) => r.dead_lettered += 1,
            }),
            Err(Error::LockLost { .. }) => self.count(|r| r.lock_lost += 1),
            Err(e) => {
                tracing::warn!(error = %e, "a worker's settlement failed; the lease will return the message")
            }
        }
    }
}

/// How a job ends.
enum Settle {
    Complete,
    Retry(Duration),
    /// Reason and description.
    DeadLetter(String, String),
}

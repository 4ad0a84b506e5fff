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
//! Proof of life (opt-in): with [`Worker::heartbeat_timeout`], a handler's lease is
//! renewed only while the handler shows progress ([`heartbeat`]); with
//! [`Worker::max_runtime`], a handler that runs too long is dropped. Either way its
//! message goes back to the queue (a retry, dead-lettered at the attempt bound), and the
//! event is traced and counted in the [`WorkerReport`].
//!
//! Each handler runs in its message's job task, beside the timers that renew its lease:
//! a handler that blocks its thread (CPU-bound work, a synchronous call) holds back its
//! own renewals until it yields, so such work belongs in `tokio::task::spawn_blocking`,
//! as anywhere on an async runtime. A handler's panic is caught in the job.
//!
//! Every wait reads the engine's clock, so a test drives a worker with a manual clock.

mod job;
mod life;
mod policy;
mod source;

use job::*;
use life::Limits;
pub use life::{Heartbeat, REASON_MAX_RUNTIME, REASON_STALLED, heartbeat};
pub use policy::*;
pub use source::Source;

use std::collections::{HashMap, HashSet, VecDeque};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc, watch};
use tokio::task::JoinSet;

use crate::engine::Engine;
use mqlite_contract::error::{Error, Result};
use mqlite_contract::store::Store;
use mqlite_contract::types::{LockRef, Message, ReceiveOptions, SeqNumber};

/// A consumer of one queue over a [`Source`] (the engine, or a broker through the
/// remote client); build it with [`Engine::worker`] (or [`Worker::new`]), start it with
/// [`Worker::run_until`].
pub struct Worker<C: Source, F> {
    engine: C,
    queue: String,
    handler: Arc<F>,
    concurrency: usize,
    prefetch: Option<usize>,
    poll_wait: Duration,
    grace: Duration,
    retry: RetryPolicy,
    limits: Limits,
}

impl<S: Store> Engine<S> {
    /// A worker that hands each message of `queue` to `handler` (see [`Worker`]).
    ///
    /// ```no_run
    /// # async fn demo(mq: mqlite_engine::Engine<impl mqlite_contract::Store>)
    /// # -> mqlite_contract::Result<()> {
    /// use mqlite_engine::worker::HandlerError;
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
    pub fn worker<F, Fut>(&self, queue: &str, handler: F) -> Worker<Engine<S>, F>
    where
        F: Fn(Message) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<(), HandlerError>> + Send + 'static,
    {
        Worker::new(self.clone(), queue, handler)
    }
}

impl<C, F, Fut> Worker<C, F>
where
    C: Source,
    F: Fn(Message) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = std::result::Result<(), HandlerError>> + Send + 'static,
{
    /// A worker that hands each message of `queue` on `source` to `handler`, with the
    /// defaults: concurrency 1, prefetch as the concurrency, poll 5 s, grace 30 s, the
    /// default [`RetryPolicy`].
    pub fn new(source: C, queue: &str, handler: F) -> Self {
        Worker {
            engine: source,
            queue: queue.to_owned(),
            handler: Arc::new(handler),
            concurrency: 1,
            prefetch: None,
            poll_wait: Duration::from_secs(5),
            grace: Duration::from_secs(30),
            retry: RetryPolicy::default(),
            limits: Limits::default(),
        }
    }
}

impl<C, F, Fut> Worker<C, F>
where
    C: Source,
    F: Fn(Message) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = std::result::Result<(), HandlerError>> + Send + 'static,
{
    /// Runs up to `n` handlers at once (at least 1; default 1).
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

    /// How long each receive long-polls (default 5 s; at most the engine's 20 s).
    pub fn poll_wait(mut self, wait: Duration) -> Self {
        self.poll_wait = wait.min(crate::engine::MAX_WAIT);
        self
    }

    /// How long running handlers may finish after shutdown before their messages are
    /// abandoned (default 30 s).
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// How failures are retried (default: [`RetryPolicy::default`]).
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// The longest a handler may run (default: no bound). A handler still running then
    /// is dropped and its message abandoned for a retry with the policy's backoff
    /// (dead-lettered with [`REASON_MAX_RUNTIME`] at the attempt bound), counted in
    /// [`WorkerReport::timed_out`]. Its lease is renewed until then as usual.
    pub fn max_runtime(mut self, limit: Duration) -> Self {
        self.limits.max_runtime = Some(limit);
        self
    }

    /// Proof of life (default: off, the lease is renewed on a timer while the handler
    /// runs). With a timeout, the worker renews a lease only if the handler showed
    /// progress ([`heartbeat`], or [`Heartbeat::beat`]) within the timeout before the
    /// renewal point; otherwise the handler is dropped and its message abandoned for a
    /// retry (dead-lettered with [`REASON_STALLED`] at the attempt bound), counted in
    /// [`WorkerReport::stalled`]. The check happens at each renewal point, two thirds
    /// into each lease, so a stalled handler holds its message for at most a timeout and
    /// a lease.
    pub fn heartbeat_timeout(mut self, timeout: Duration) -> Self {
        self.limits.heartbeat_timeout = Some(timeout);
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
        let completions = Arc::new(Pending::default());
        let completer = tokio::spawn(job::completer(
            self.engine.clone(),
            self.queue.clone(),
            completions.clone(),
        ));
        let (renewals, gathered) = mpsc::unbounded_channel();
        let renewer = tokio::spawn(job::renewer(
            self.engine.clone(),
            self.queue.clone(),
            gathered,
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
            // Wait for a free slot, then take as many messages as there are slots. With
            // nothing buffered the next step is a receive: the completions handed over
            // meanwhile wait for it.
            completions.folding(buffer.is_empty());
            let first = tokio::select! {
                // A worker told to stop starts no other receive, even with a slot free
                // (a claim then would only be given back, a delivery spent).
                biased;
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
                // The completions handed over since the last receive commit with its
                // first claim: one transaction where two calls take two.
                let folded = completions.take();
                let mut got = Ok(Vec::new());
                if !folded.is_empty() {
                    let locks: Vec<LockRef> = folded.iter().map(|(l, _)| *l).collect();
                    let first = ReceiveOptions {
                        wait: Duration::ZERO,
                        ..options.clone()
                    };
                    got = match self
                        .engine
                        .complete_and_receive(&self.queue, &locks, first)
                        .await
                    {
                        Ok((results, claimed)) => {
                            job::answer(folded, Ok(results));
                            Ok(claimed)
                        }
                        Err(e) => {
                            job::answer(folded, Err(e.to_string()));
                            Err(e)
                        }
                    };
                }
                // The completions handed over while this receive waits commit without it.
                completions.folding(false);
                if matches!(&got, Ok(m) if m.is_empty()) {
                    got = tokio::select! {
                        _ = &mut shutdown => break Ok(()),
                        got = self.engine.receive(&self.queue, options) => got,
                    };
                }
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
                    limits: self.limits,
                    report: report.clone(),
                    expired: expired.clone(),
                    completions: completions.clone(),
                    renewals: renewals.clone(),
                    permit: std::sync::Mutex::new(Some(permit)),
                };
                tasks.spawn(job.run(m));
            }
            // Reap finished tasks so the set does not grow.
            while tasks.try_join_next().is_some() {}
        };
        // Shutdown: no more receives; the buffered messages go back at once, for
        // another consumer; the running handlers get the grace period.
        completions.folding(false);
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
        completions.close();
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

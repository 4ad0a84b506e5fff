//! One message's handling (the handler in the job's task, its panic caught, the lease
//! renewed while it runs, the settlement), and the completer and renewer that coalesce
//! settlements.

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use tokio::sync::{Notify, OwnedSemaphorePermit, mpsc, oneshot, watch};

use mqlite_contract::error::{Error, Result};
use mqlite_contract::types::{BatchResult, LockRef, Message, SeqNumber, millis};

use super::*;

/// One message's handling: the handler in the job's task (a panic is caught there), the
/// lock renewed while it runs, then the settlement.
pub(super) struct Job<C: Source, F> {
    pub(super) engine: C,
    pub(super) queue: String,
    pub(super) handler: Arc<F>,
    pub(super) retry: RetryPolicy,
    pub(super) limits: Limits,
    pub(super) report: Arc<std::sync::Mutex<WorkerReport>>,
    pub(super) expired: watch::Receiver<bool>,
    pub(super) completions: Arc<Pending>,
    pub(super) renewals: mpsc::UnboundedSender<Coalesced>,
    /// The job's handler slot: given back when its completion is handed over (the
    /// receive loop may then fold it into its next receive), or when the job ends.
    pub(super) permit: std::sync::Mutex<Option<OwnedSemaphorePermit>>,
}

/// What a coalescing task does with the locks the jobs hand it.
#[derive(Debug, Clone, Copy)]
pub(super) enum Op {
    Complete,
    Renew,
}

/// A lock handed to the completer or the renewer, and where its outcome goes: the
/// lease's new end (0 for a completion) when it took effect, None when the lock was
/// lost, or why the call failed.
pub(super) type Coalesced = (
    LockRef,
    oneshot::Sender<std::result::Result<Option<i64>, String>>,
);

/// The most locks one call of the completer or the renewer carries.
pub(super) const MAX_COALESCED: usize = 256;

/// Completions handed over and not yet committed. The receive loop takes them into its
/// next receive (one transaction for both, `Engine::complete_and_receive`); whatever it
/// does not take soon, the completer commits on its own.
#[derive(Default)]
pub(super) struct Pending {
    items: std::sync::Mutex<Vec<Coalesced>>,
    more: Notify,
    closed: std::sync::atomic::AtomicBool,
    /// Set while the receive loop waits for a handler slot with nothing buffered: its
    /// next step is a receive, which takes the waiting completions with it, so the
    /// completer leaves them.
    folding: std::sync::atomic::AtomicBool,
}

impl Pending {
    fn push(&self, c: Coalesced) -> std::result::Result<(), Coalesced> {
        if self.closed.load(std::sync::atomic::Ordering::Acquire) {
            return Err(c);
        }
        self.items.lock().unwrap_or_else(|e| e.into_inner()).push(c);
        self.more.notify_one();
        Ok(())
    }

    /// Takes up to [`MAX_COALESCED`] of the waiting completions, oldest first.
    pub(super) fn take(&self) -> Vec<Coalesced> {
        let mut items = self.items.lock().unwrap_or_else(|e| e.into_inner());
        let n = items.len().min(MAX_COALESCED);
        items.drain(..n).collect()
    }

    /// Whether the receive loop's next step folds the waiting completions into a
    /// receive; when it will not, the completer takes them (woken here).
    pub(super) fn folding(&self, yes: bool) {
        self.folding
            .store(yes, std::sync::atomic::Ordering::Release);
        if !yes {
            self.more.notify_one();
        }
    }

    /// No more completions come (every job has its answer): the completer ends once it
    /// has committed what waits.
    pub(super) fn close(&self) {
        self.folding(false);
        self.closed
            .store(true, std::sync::atomic::Ordering::Release);
        self.more.notify_one();
    }
}

/// Commits the completions handed over that the receive loop did not fold into a
/// receive, coalescing what gathers while a call runs into the next one.
pub(super) async fn completer<C: Source>(engine: C, queue: String, pending: Arc<Pending>) {
    use std::sync::atomic::Ordering::Acquire;
    loop {
        let waiting = !pending
            .items
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty();
        if !waiting && pending.closed.load(Acquire) {
            return;
        }
        if !waiting || pending.folding.load(Acquire) {
            pending.more.notified().await;
            continue;
        }
        let batch = pending.take();
        if !batch.is_empty() {
            run_batch(&engine, &queue, batch, Op::Complete).await;
        }
    }
}

/// Answers each of `batch` from a batch call's per-item results: the lease's new end
/// (0 for a completion) when it took effect, None when the lock was lost.
pub(super) fn answer(
    batch: Vec<Coalesced>,
    results: std::result::Result<Vec<BatchResult>, String>,
) {
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
        Err(why) => {
            for (_, reply) in batch {
                let _ = reply.send(Err(why.clone()));
            }
        }
    }
}

/// Settles one gathered batch: one lock alone as its job would settle it, several in
/// one batch (2.7, 2.8: each item settles or reports its lost lock on its own).
async fn run_batch<C: Source>(engine: &C, queue: &str, mut batch: Vec<Coalesced>, op: Op) {
    if batch.len() == 1
        && let Some((lock, reply)) = batch.pop()
    {
        let outcome = match op {
            Op::Complete => engine.complete(queue, lock).await.map(|()| 0),
            Op::Renew => engine.renew(queue, lock).await,
        };
        let _ = reply.send(match outcome {
            Ok(until) => Ok(Some(until)),
            Err(Error::LockLost { .. }) => Ok(None),
            Err(e) => Err(e.to_string()),
        });
        return;
    }
    let locks: Vec<LockRef> = batch.iter().map(|(l, _)| *l).collect();
    let results = match op {
        Op::Complete => engine.complete_batch(queue, &locks).await,
        Op::Renew => engine.renew_batch(queue, &locks).await,
    };
    answer(batch, results.map_err(|e| e.to_string()));
}

/// Renews what the jobs hand over, coalescing what gathers while a call runs into the
/// next one.
pub(super) async fn renewer<C: Source>(
    engine: C,
    queue: String,
    mut gathered: mpsc::UnboundedReceiver<Coalesced>,
) {
    while let Some(first) = gathered.recv().await {
        let mut batch = vec![first];
        while batch.len() < MAX_COALESCED {
            match gathered.try_recv() {
                Ok(c) => batch.push(c),
                Err(_) => break,
            }
        }
        run_batch(&engine, &queue, batch, Op::Renew).await;
    }
}

impl<C, F, Fut> Job<C, F>
where
    C: Source,
    F: Fn(Message) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = std::result::Result<(), HandlerError>> + Send + 'static,
{
    pub(super) async fn run(self, m: Message) {
        let lock = LockRef::from(&m);
        let clock = self.engine.clock().clone();
        let received_at = clock.now_ms();
        let lease = (m.locked_until_ms - received_at).max(1);
        let delivery_count = m.delivery_count;
        let handler = self.handler.clone();
        let life = Heartbeat::new(clock.clone());
        let mut locked_until = lease + received_at;
        let mut expired = self.expired.clone();
        let deadline = self
            .limits
            .max_runtime
            .map_or(i64::MAX, |d| received_at.saturating_add(millis(d)));
        let ended = {
            // The handler runs in this job's task, where a panic is caught: a task of
            // its own cost a spawn and a wake-up per message. Every way out of the loop
            // drops the handler's future here, before its message is settled.
            let handled = AssertUnwindSafe(life.clone().scope(async move { handler(m).await }))
                .catch_unwind();
            tokio::pin!(handled);
            loop {
                // Renew when two thirds of the lease have passed.
                let renew_at = locked_until - lease / 3;
                tokio::select! {
                    out = &mut handled => break Ended::Handled(out.map_err(drop)),
                    _ = clock.sleep_until(deadline), if deadline < i64::MAX => {
                        let why = format!("the handler ran past the maximum runtime of {} ms", deadline - received_at);
                        break Ended::GivenBack(REASON_MAX_RUNTIME, why);
                    }
                    () = async {
                        // The guard wait_for returns is not Send: drop it in here.
                        let _ = expired.wait_for(|e| *e).await;
                    } => break Ended::Expired,
                    _ = clock.sleep_until(renew_at) => {
                        if let Some(timeout) = self.limits.heartbeat_timeout
                            && clock.now_ms() - life.last_ms() > millis(timeout)
                        {
                            // No progress within the timeout: the lease is not renewed.
                            let why = format!("the handler showed no progress for {} ms", clock.now_ms() - life.last_ms());
                            break Ended::GivenBack(REASON_STALLED, why);
                        }
                        match self.coalesced(Op::Renew, lock).await {
                            Ok(until) => locked_until = until,
                            // The lease is gone; the handler finishes, its settlement will
                            // be refused and counted.
                            Err(_) => locked_until = i64::MAX,
                        }
                    }
                }
            }
        };
        let outcome = match ended {
            Ended::Handled(outcome) => outcome,
            Ended::GivenBack(reason, why) => {
                return self.give_back(lock, reason, why, delivery_count).await;
            }
            Ended::Expired => {
                // The grace period is over: another consumer takes it from here.
                let abandon = Box::pin(self.engine.abandon(&self.queue, lock, Duration::ZERO));
                if abandon.await.is_ok() {
                    self.count(|r| r.abandoned_at_shutdown += 1);
                }
                return;
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
                self.settle(
                    Settle::DeadLetter(REASON_RETRIES_EXHAUSTED.into(), why),
                    lock,
                )
                .await
            }
            Ok(Err(HandlerError::Retry(_))) => {
                let delay = self.retry.backoff(delivery_count);
                self.settle(Settle::Retry(delay), lock).await
            }
            // The handler panicked.
            Err(()) => {
                self.count(|r| r.panicked += 1);
                let delay = self.retry.backoff(delivery_count);
                self.settle(Settle::Retry(delay), lock).await
            }
        }
    }

    /// Completes or renews through the worker's completer or renewer (coalesced with
    /// other jobs'), or alone if it is gone. The lease's new end (0 for a completion).
    /// A completion gives the job's handler slot back as soon as it is handed over.
    async fn coalesced(&self, op: Op, lock: LockRef) -> Result<i64> {
        // Boxed, as every call to the engine in a job is: an engine's future holds its
        // store's, and a job's own would otherwise be as large (every job is a task,
        // copied whole into it when spawned).
        let alone = || {
            Box::pin(async move {
                match op {
                    Op::Complete => self.engine.complete(&self.queue, lock).await.map(|()| 0),
                    Op::Renew => self.engine.renew(&self.queue, lock).await,
                }
            })
        };
        let (reply, outcome) = oneshot::channel();
        let handed = match op {
            Op::Complete => self.completions.push((lock, reply)).is_ok(),
            Op::Renew => self.renewals.send((lock, reply)).is_ok(),
        };
        if !handed {
            return alone().await;
        }
        if let Op::Complete = op {
            drop(self.permit.lock().unwrap_or_else(|e| e.into_inner()).take());
        }
        match outcome.await {
            Ok(Ok(Some(until))) => Ok(until),
            Ok(Ok(None)) => Err(Error::LockLost {
                reason: mqlite_contract::error::LockLostReason::Unknown,
            }),
            Ok(Err(why)) => Err(Error::backend("worker", std::io::Error::other(why))),
            Err(_) => alone().await,
        }
    }

    /// After a handler the worker gave up on was dropped (`reason`: it ran past the
    /// maximum runtime, or showed no progress): traces and counts it, and gives its
    /// message back: a retry with the policy's backoff, or a dead letter under `reason`
    /// at the attempt bound.
    async fn give_back(&self, lock: LockRef, reason: &str, why: String, delivery_count: i64) {
        tracing::warn!(queue = %self.queue, seq = lock.seq.0, reason, "{why}; the handler is dropped and its message given back");
        self.count(|r| match reason {
            REASON_MAX_RUNTIME => r.timed_out += 1,
            _ => r.stalled += 1,
        });
        let how = if delivery_count >= self.retry.max_attempts {
            Settle::DeadLetter(reason.into(), why)
        } else {
            Settle::Retry(self.retry.backoff(delivery_count))
        };
        self.settle(how, lock).await;
    }

    fn count(&self, f: impl FnOnce(&mut WorkerReport)) {
        count(&self.report, f);
    }

    /// Settles and counts. A settlement that fails otherwise than LockLost (the engine
    /// closed, the store failed) leaves the message to its lease: it comes back.
    async fn settle(&self, how: Settle, lock: LockRef) {
        let q = &self.queue;
        let result = match &how {
            Settle::Complete => self.coalesced(Op::Complete, lock).await.map(|_| ()),
            Settle::Retry(delay) => {
                let delay = (*delay).min(crate::engine::MAX_ABANDON_DELAY);
                Box::pin(self.engine.abandon(q, lock, delay)).await
            }
            Settle::DeadLetter(reason, why) => {
                let text: String = why.chars().take(4096).collect();
                Box::pin(self.engine.reject(q, lock, reason, &text)).await
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

/// How a job's handling ended.
enum Ended {
    /// The handler answered, or panicked (`Err`).
    Handled(std::result::Result<std::result::Result<(), HandlerError>, ()>),
    /// The worker gave up on the handler (a `REASON_*`, and why).
    GivenBack(&'static str, String),
    /// The shutdown's grace period ended first.
    Expired,
}

/// How a job ends.
enum Settle {
    Complete,
    Retry(Duration),
    /// Reason and description.
    DeadLetter(String, String),
}

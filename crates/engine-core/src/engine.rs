//! [`Engine`]: the public API over any [`Store`]. It validates input against the limits,
//! admits calls until close, wakes long-polling receivers on sends, and drives the
//! background loops from the injected clock.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use std::collections::{HashMap, HashSet};

use tokio::sync::{Notify, RwLock, RwLockReadGuard, watch};
use tokio::task::JoinHandle;

use std::time::{Duration, Instant};

use crate::access::{AccessKey, CreatedKey, Permission};
use crate::clock::SharedClock;
use crate::error::{Error, Result};
use crate::filter::{Filter, FilterTest, Seen};
use crate::meter;
use crate::store::{HasOutbox, OpenStore, OutboxStore, Ownership, Store, StoreStatus, StoreTx};
use crate::topics::{Route, Subscription};
use crate::types::{
    BatchResult, ClaimSpec, EnqueueSlot, LockRef, MAX_SPAN, Message, OutMessage, PeekOptions,
    PurgeOptions, QueueConfig, QueueInfo, QueueKind, QueueStats, ReceiveMode, ReceiveOptions,
    RecoverTask, RedriveOptions, RetentionDefaults, SendOptions, SeqNumber, Settlement, millis,
};

/// Largest batch a single Receive may ask for.
pub const MAX_RECEIVE_BATCH: u32 = 256;
/// Longest long-poll wait.
pub const MAX_WAIT: Duration = Duration::from_secs(20);
/// Longest abandon delay.
pub const MAX_ABANDON_DELAY: Duration = Duration::from_secs(7 * 24 * 3600);
/// The most dead letters one selected redrive may name.
pub const MAX_REDRIVE_SELECTION: usize = 1000;
/// Largest Peek page.
pub const MAX_PEEK: u32 = 1000;
/// Largest RenewBatch.
pub const MAX_RENEW_BATCH: usize = 512;
/// Largest CompleteBatch: one transaction and a fixed number of statements whatever
/// its size; the bound only keeps one call's parameter (about 60 bytes an item) small.
pub const MAX_COMPLETE_BATCH: usize = 16_384;
/// Default body limit per message (1 MiB).
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 1 << 20;
/// Longest queue name, bytes.
pub const MAX_NAME_BYTES: usize = 256;
/// Largest number of messages in one send.
pub const MAX_SEND_BATCH: usize = 1000;
/// Compiled subscription filters kept for reuse; past it, one gives way.
pub const MAX_CACHED_FILTERS: usize = 1024;

/// Engine-wide options.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Body limit per message, bytes.
    pub max_message_bytes: usize,
    /// Whether the background loops run (tests that drive sweeps by hand turn them off).
    pub background: bool,
    /// Reaper period.
    pub reaper_interval: Duration,
    /// Scheduler period.
    pub scheduler_interval: Duration,
    /// TTL sweep period.
    pub ttl_interval: Duration,
    /// Janitor (receipts, attempts, dedup, dead-letter retention) period.
    pub janitor_interval: Duration,
    /// How often a long-poll re-checks without a wake-up (scheduled messages coming due).
    pub long_poll_recheck: Duration,
    /// Dead-letter retention defaults (zero = unbounded).
    pub retention: RetentionDefaults,
    /// What opening does with the leases held in the data (3.1, 15.2).
    pub leases_at_open: LeasesAtOpen,
}

/// What opening a store does with the leases held in its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum LeasesAtOpen {
    /// Every held lease is reclaimed at once (3.1): the embedded library's policy, since
    /// the handlers that held them died with the process that opened the file before.
    #[default]
    Reclaim,
    /// Held leases keep their deadline: a lease that has passed it is reclaimed now, the
    /// others when it passes (the reaper's rule), and their lock tokens still settle.
    /// The broker's policy: its leases belong to remote clients, who outlive a restart.
    Keep,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            background: true,
            reaper_interval: Duration::from_secs(1),
            scheduler_interval: Duration::from_secs(1),
            ttl_interval: Duration::from_secs(1),
            janitor_interval: Duration::from_secs(60),
            long_poll_recheck: Duration::from_secs(1),
            retention: RetentionDefaults::default(),
            leases_at_open: LeasesAtOpen::Reclaim,
        }
    }
}

/// The background loops, in the order [`Engine::run_sweeps`] runs them.
const LOOPS: [LoopKind; 4] = [
    LoopKind::Reaper,
    LoopKind::Scheduler,
    LoopKind::Ttl,
    LoopKind::Janitor,
];

/// Names one background loop, for [`Engine::loop_progress`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoopKind {
    /// Expired leases.
    Reaper,
    /// Due scheduled messages.
    Scheduler,
    /// TTL expiry.
    Ttl,
    /// Receipts, attempts, dedup entries and dead-letter retention.
    Janitor,
}

impl LoopKind {
    fn index(self) -> usize {
        self as usize
    }
}

/// What one pass of every sweep changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// Expired leases resettled.
    pub reaped: u64,
    /// Scheduled messages made active.
    pub activated: u64,
    /// Messages expired by TTL.
    pub expired: u64,
    /// Dead letters dropped by retention.
    pub retention_dropped: u64,
    /// Receipts, attempts and dedup entries pruned.
    pub pruned: u64,
}

struct Inner<S: Store> {
    store: S,
    clock: SharedClock,
    options: EngineOptions,
    closed: AtomicBool,
    /// Calls hold a read guard while they run; close takes the write side to wait for them.
    gate: RwLock<()>,
    /// Bumped when any queue may have work (sweeps, redrives, a committed outbox
    /// transaction) and on close; every long-poll wakes.
    wake: watch::Sender<u64>,
    /// Per-queue wake-ups: a send of n messages wakes up to n receivers parked on its
    /// queue, not every receiver of every queue (1.8 without a thundering herd).
    queue_wake: std::sync::Mutex<HashMap<String, Arc<Notify>>>,
    /// The topic names, read at open and kept by create_topic and delete_queue: a send
    /// resolves its name as a topic first (12.2). The engine is its store's one owner,
    /// so nothing else creates topics behind it.
    topics: std::sync::RwLock<Arc<HashSet<String>>>,
    /// Compiled subscription filters, by text.
    filters: std::sync::Mutex<HashMap<String, Arc<Filter>>>,
    /// How many receives are parked in a long-poll wait right now.
    waiters: watch::Sender<usize>,
    /// When messages the engine scheduled, delayed or leased become claimable: a
    /// parked receiver wakes then instead of at the next sweep.
    due: crate::due::DueTimes,
    /// Clock time of the last completed pass of each loop.
    progress: [watch::Sender<i64>; 4],
    loops: std::sync::Mutex<Vec<JoinHandle<()>>>,
}

/// The mqlite engine over a store. Cheap to clone; all clones share one store.
pub struct Engine<S: Store> {
    inner: Arc<Inner<S>>,
}

impl<S: Store> Clone for Engine<S> {
    fn clone(&self) -> Self {
        Engine {
            inner: self.inner.clone(),
        }
    }
}

impl<S: Store> std::fmt::Debug for Engine<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("backend", &self.inner.store.backend())
            .field("closed", &self.inner.closed.load(Ordering::Relaxed))
            .finish()
    }
}

impl<S: OpenStore> Engine<S> {
    /// Opens the store at `location` with the system clock and default options.
    pub async fn open(location: impl AsRef<std::path::Path>) -> Result<Self> {
        Self::open_with(
            location,
            crate::clock::SystemClock::shared(),
            EngineOptions::default(),
        )
        .await
    }

    /// Opens the store at `location` with this clock and these options.
    pub async fn open_with(
        location: impl AsRef<std::path::Path>,
        clock: SharedClock,
        options: EngineOptions,
    ) -> Result<Self> {
        let path = location.as_ref();
        let text = path.to_str().ok_or_else(|| {
            Error::invalid(format!("the path {} is not valid UTF-8", path.display()))
        })?;
        let store = S::open_at(text, clock).await?;
        Self::with_store(store, options).await
    }
}

impl<S: OutboxStore> Engine<S> {
    /// Runs `f` in one store transaction: the application's own writes (through the
    /// store's native handle, `tx.native()`) and every `tx.send` commit together or not
    /// at all (16.1, 16.2). `f` is an async closure, so one shape fits a synchronous
    /// native handle (rusqlite: just call it) and an asynchronous one (await it); it
    /// runs where the store's handle lives (the SQLite store: its writer thread).
    ///
    /// ```no_run
    /// # async fn demo(mq: mqlite_engine_core::Engine<impl mqlite_engine_core::OutboxStore>)
    /// # -> mqlite_engine_core::Result<()> {
    /// use mqlite_engine_core::OutMessage;
    /// let seq = mq
    ///     .tx(async |tx| {
    ///         // tx.native() is the store's own transaction handle.
    ///         tx.send("events", OutMessage::new("order 42")).await
    ///     })
    ///     .await?;
    /// # let _ = seq; Ok(()) }
    /// ```
    pub async fn tx<R, E>(
        &self,
        f: impl for<'a, 'b, 't> AsyncFnOnce(&'a mut EngineTx<'b, S::Tx<'t>>) -> Result<R, E>
        + Send
        + 'static,
    ) -> Result<R, E>
    where
        R: Send + 'static,
        E: From<Error> + Send + 'static,
    {
        self.tx_via::<S, R, E>(f).await
    }
}

impl<S: Store> Engine<S> {
    /// Starts an engine over an opened store: reclaims orphaned leases (3.1), then starts
    /// the background loops if the options ask for them.
    ///
    /// An opened store owns its data (a store that cannot take ownership fails to open
    /// with `DbLocked`), and only its owner may treat every locked row as an orphan: for
    /// a lease-owned store the epoch was taken before this runs, so a deposed owner's
    /// live leases are never reset by a newcomer that did not win the lease.
    pub async fn with_store(store: S, options: EngineOptions) -> Result<Self> {
        match (store.ownership(), options.leases_at_open) {
            (Ownership::Exclusive | Ownership::Lease { .. }, LeasesAtOpen::Reclaim) => {
                let reclaimed = store.recover(RecoverTask::Orphans).await?;
                tracing::info!(
                    backend = store.backend(),
                    reclaimed,
                    "opened: orphaned leases reclaimed (active again, or dead-lettered at the bound)"
                );
            }
            (_, LeasesAtOpen::Keep) => {
                let reclaimed = store.recover(RecoverTask::Reaper).await?;
                tracing::info!(
                    backend = store.backend(),
                    reclaimed,
                    "opened: leases kept to their deadline; those already past it reclaimed"
                );
            }
        }
        let topics: HashSet<String> = store
            .list_queues()
            .await?
            .into_iter()
            .filter(|q| q.kind == QueueKind::Topic)
            .map(|q| q.name)
            .collect();
        let clock = store.clock().clone();
        let now = clock.now_ms();
        let engine = Engine {
            inner: Arc::new(Inner {
                store,
                clock,
                closed: AtomicBool::new(false),
                gate: RwLock::new(()),
                wake: watch::Sender::new(0),
                queue_wake: std::sync::Mutex::new(HashMap::new()),
                topics: std::sync::RwLock::new(Arc::new(topics)),
                filters: std::sync::Mutex::new(HashMap::new()),
                waiters: watch::Sender::new(0),
                due: crate::due::DueTimes::default(),
                progress: std::array::from_fn(|_| watch::Sender::new(now)),
                loops: std::sync::Mutex::new(Vec::new()),
                options,
            }),
        };
        if engine.inner.options.background {
            engine.start_loops();
        }
        Ok(engine)
    }

    /// The store under this engine.
    pub fn store(&self) -> &S {
        &self.inner.store
    }

    /// The engine's clock.
    pub fn clock(&self) -> &SharedClock {
        &self.inner.clock
    }

    /// The engine's options.
    pub fn options(&self) -> &EngineOptions {
        &self.inner.options
    }

    async fn admit(&self) -> Result<RwLockReadGuard<'_, ()>> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        let guard = self.inner.gate.read().await;
        // Close may have started while this call waited for the gate.
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        Ok(guard)
    }

    fn wake_receivers(&self) {
        self.inner.wake.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Whether `name` is a topic.
    fn is_topic(&self, name: &str) -> bool {
        self.inner
            .topics
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .contains(name)
    }

    /// The topic names as of now (a transaction keeps its own copy).
    fn topics(&self) -> Arc<HashSet<String>> {
        self.inner
            .topics
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn set_topic(&self, name: &str, present: bool) {
        let mut topics = self.inner.topics.write().unwrap_or_else(|e| e.into_inner());
        if topics.contains(name) != present {
            let mut next = (**topics).clone();
            if present {
                next.insert(name.to_owned());
            } else {
                next.remove(name);
            }
            *topics = Arc::new(next);
        }
    }

    /// The compiled filter of this text (compiled once, then cached).
    fn filter(&self, text: &str) -> Result<Arc<Filter>> {
        if let Some(f) = self.cached_filter(text) {
            return Ok(f);
        }
        let compiled = Arc::new(Filter::compile(text)?);
        self.remember_filter(&compiled);
        Ok(compiled)
    }

    /// How many compiled filters are kept for reuse (at most [`MAX_CACHED_FILTERS`]).
    pub fn cached_filters(&self) -> usize {
        self.inner
            .filters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    fn cached_filter(&self, text: &str) -> Option<Arc<Filter>> {
        self.inner
            .filters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(text.trim())
            .cloned()
    }

    /// Caches a compiled filter, within [`MAX_CACHED_FILTERS`]: at the bound an entry
    /// gives way (a filter still in use is compiled again on its next publish).
    fn remember_filter(&self, filter: &Arc<Filter>) {
        let mut cache = self.inner.filters.lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() >= MAX_CACHED_FILTERS && !cache.contains_key(filter.text()) {
            let victim = cache.keys().next().cloned();
            if let Some(victim) = victim {
                cache.remove(&victim);
            }
        }
        cache.insert(filter.text().to_owned(), filter.clone());
    }

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
    fn wake_queue(&self, queue: &str, n: usize) {
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

    // ----- queues -------------------------------------------------------------------

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

    // ----- send ---------------------------------------------------------------------

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

    /// Runs `f` in one store transaction through the outbox of the concrete store `N`:
    /// the application's own writes (through `N`'s native handle) and every send commit
    /// together or not at all (16.1, 16.2). The typed engine calls this through
    /// [`Engine::tx`]; the run-time engine (`Engine<DynStore>`) names the store it
    /// expects, and gets `InvalidArgument` if it holds another.
    pub async fn tx_via<N, R, E>(
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

    // ----- receive ------------------------------------------------------------------

    /// Receives up to `options.max_messages`, long-polling up to `options.wait`.
    #[tracing::instrument(level = "debug", skip_all, fields(queue = queue, max = options.max_messages, wait_ms = millis(options.wait)), err(level = "debug"))]
    pub async fn receive(&self, queue: &str, options: ReceiveOptions) -> Result<Vec<Message>> {
        let started = Instant::now();
        let r = self.receive_inner(queue, options).await;
        meter::call("receive", queue, started, &r);
        r
    }

    async fn receive_inner(&self, queue: &str, options: ReceiveOptions) -> Result<Vec<Message>> {
        validate_name(queue)?;
        if options.max_messages == 0 || options.max_messages > MAX_RECEIVE_BATCH {
            return Err(Error::invalid(format!(
                "max_messages must be 1..={MAX_RECEIVE_BATCH}"
            )));
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
                self.inner
                    .store
                    .claim(queue.to_owned(), spec.clone())
                    .await?
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
                return Ok(got);
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

    // ----- settle -------------------------------------------------------------------

    #[tracing::instrument(
        level = "debug",
        skip_all,
        fields(queue = queue, seq = lock.seq.0, op = settlement.op()),
        err(level = "debug")
    )]
    async fn settle(&self, queue: &str, lock: LockRef, settlement: Settlement) -> Result<()> {
        let started = Instant::now();
        let op = settlement.op();
        let r = self.settle_inner(queue, lock, settlement).await;
        meter::call(op, queue, started, &r);
        r
    }

    async fn settle_inner(&self, queue: &str, lock: LockRef, settlement: Settlement) -> Result<()> {
        validate_name(queue)?;
        let _g = self.admit().await?;
        let delayed = match &settlement {
            Settlement::Abandon { delay } if !delay.is_zero() => Some(millis(*delay)),
            _ => None,
        };
        self.inner
            .store
            .settle(queue.to_owned(), lock, settlement)
            .await?;
        if let Some(delay) = delayed {
            let at = self.inner.clock.now_ms().saturating_add(delay);
            self.inner.due.note(queue, at);
        }
        // An abandon makes its message eligible again, and a head that left play (or was
        // deferred) hands its line on: a long-poll may have work now (1.8).
        self.wake_queue(queue, 1);
        Ok(())
    }

    /// Completes (deletes) a message (2.1).
    pub async fn complete(&self, queue: &str, lock: impl Into<LockRef>) -> Result<()> {
        self.settle(queue, lock.into(), Settlement::Complete).await
    }

    /// Abandons a message: back to active now ([`Duration::ZERO`]), or after `delay`
    /// (2.2; at most [`MAX_ABANDON_DELAY`]).
    pub async fn abandon(
        &self,
        queue: &str,
        lock: impl Into<LockRef>,
        delay: Duration,
    ) -> Result<()> {
        if delay > MAX_ABANDON_DELAY {
            return Err(Error::invalid("an abandon delay must be at most 7 days"));
        }
        self.settle(queue, lock.into(), Settlement::Abandon { delay })
            .await
    }

    /// Dead-letters a message with a reason and description (2.3).
    pub async fn reject(
        &self,
        queue: &str,
        lock: impl Into<LockRef>,
        reason: &str,
        description: &str,
    ) -> Result<()> {
        validate_free_text("dead_letter_reason", reason)?;
        validate_free_text("dead_letter_description", description)?;
        let settlement = Settlement::Reject {
            reason: reason.to_owned(),
            description: description.to_owned(),
        };
        self.settle(queue, lock.into(), settlement).await
    }

    /// Defers a message; only [`Engine::receive_deferred`] returns it (2.4).
    pub async fn defer(&self, queue: &str, lock: impl Into<LockRef>) -> Result<()> {
        self.settle(queue, lock.into(), Settlement::Defer).await
    }

    /// Renews a live lease; returns the new locked_until (2.5).
    pub async fn renew(&self, queue: &str, lock: impl Into<LockRef>) -> Result<i64> {
        let result = self.renew_batch(queue, &[lock.into()]).await?;
        match result.first() {
            Some(r) if r.ok => Ok(r.locked_until_ms),
            Some(r) => Err(Error::LockLost {
                reason: r.lost.unwrap_or(crate::error::LockLostReason::Unknown),
            }),
            None => Err(Error::LockLost {
                reason: crate::error::LockLostReason::Unknown,
            }),
        }
    }

    /// Completes many messages in one transaction; stale items report ok = false (2.7).
    #[tracing::instrument(level = "debug", skip_all, fields(queue = queue, n = locks.len()), err(level = "debug"))]
    pub async fn complete_batch(&self, queue: &str, locks: &[LockRef]) -> Result<Vec<BatchResult>> {
        let started = Instant::now();
        let r = self.complete_batch_inner(queue, locks).await;
        meter::call("complete_batch", queue, started, &r);
        r
    }

    async fn complete_batch_inner(
        &self,
        queue: &str,
        locks: &[LockRef],
    ) -> Result<Vec<BatchResult>> {
        validate_name(queue)?;
        if locks.is_empty() || locks.len() > MAX_COMPLETE_BATCH {
            return Err(Error::invalid(format!(
                "a batch holds 1..={MAX_COMPLETE_BATCH} items"
            )));
        }
        let _g = self.admit().await?;
        let results = self
            .inner
            .store
            .complete_batch(queue.to_owned(), locks.to_vec())
            .await?;
        // Completed heads hand their lines on (1.8).
        self.wake_queue(queue, results.iter().filter(|r| r.ok).count());
        Ok(results)
    }

    /// Renews up to 512 leases in one statement (2.8).
    #[tracing::instrument(level = "debug", skip_all, fields(queue = queue, n = locks.len()), err(level = "debug"))]
    pub async fn renew_batch(&self, queue: &str, locks: &[LockRef]) -> Result<Vec<BatchResult>> {
        let started = Instant::now();
        let r = self.renew_batch_inner(queue, locks).await;
        meter::call("renew_batch", queue, started, &r);
        r
    }

    async fn renew_batch_inner(&self, queue: &str, locks: &[LockRef]) -> Result<Vec<BatchResult>> {
        validate_name(queue)?;
        if locks.is_empty() || locks.len() > MAX_RENEW_BATCH {
            return Err(Error::invalid(format!(
                "a renew batch holds 1..={MAX_RENEW_BATCH} items"
            )));
        }
        let _g = self.admit().await?;
        let results = self
            .inner
            .store
            .renew_batch(queue.to_owned(), locks.to_vec())
            .await?;
        // A renewed lease that then lapses makes its message claimable at its new end.
        if let Some(end) = results
            .iter()
            .filter(|r| r.ok)
            .map(|r| r.locked_until_ms)
            .min()
        {
            self.inner.due.note(queue, end);
        }
        Ok(results)
    }

    // ----- admin --------------------------------------------------------------------

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
        if options.seq_numbers.len() > MAX_REDRIVE_SELECTION {
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

    // ----- topics and subscriptions ------------------------------------------------

    /// Creates a topic (or keeps an existing one): a name that fans published messages
    /// out to its subscriptions. A name held by a queue or subscription is
    /// `NameConflict` (12.1).
    pub async fn create_topic(&self, name: &str) -> Result<()> {
        validate_new_name(name)?;
        let _g = self.admit().await?;
        self.inner
            .store
            .upsert_queue(
                name.to_owned(),
                QueueKind::Topic,
                QueueConfig::default(),
                false,
            )
            .await?;
        self.set_topic(name, true);
        Ok(())
    }

    /// Creates or updates a subscription of `topic` named `name`, backed by a queue of
    /// that name with `config`, routing the messages `filter` accepts (empty: every
    /// message; see [`crate::filter`]). A filter that does not compile or check is
    /// `InvalidArgument` and nothing is stored (11.1); a name held by a queue or topic
    /// is `NameConflict` (12.1).
    #[tracing::instrument(level = "debug", skip_all, fields(topic = topic, subscription = name), err(level = "debug"))]
    pub async fn subscribe(
        &self,
        topic: &str,
        name: &str,
        filter: &str,
        config: QueueConfig,
    ) -> Result<()> {
        validate_name(topic)?;
        validate_new_name(name)?;
        config.validate()?;
        // Cached only once stored: a refused Subscribe leaves nothing behind.
        let compiled = match self.cached_filter(filter) {
            Some(f) => f,
            None => Arc::new(Filter::compile(filter)?),
        };
        let _g = self.admit().await?;
        let subscription = Subscription {
            topic: topic.to_owned(),
            name: name.to_owned(),
            filter: compiled.text().to_owned(),
        };
        self.inner
            .store
            .upsert_subscription(subscription, config)
            .await?;
        self.remember_filter(&compiled);
        Ok(())
    }

    /// Deletes the subscription `name` of `topic` with its backing queue and its
    /// messages; false if the topic has no such subscription.
    pub async fn unsubscribe(&self, topic: &str, name: &str) -> Result<bool> {
        validate_name(topic)?;
        validate_name(name)?;
        let subscribed = self
            .list_subscriptions(Some(topic))
            .await?
            .iter()
            .any(|s| s.name == name);
        if !subscribed {
            return Ok(false);
        }
        self.delete_queue(name).await
    }

    /// Every subscription (of one topic, or of all), by topic then name.
    pub async fn list_subscriptions(&self, topic: Option<&str>) -> Result<Vec<Subscription>> {
        if let Some(t) = topic {
            validate_name(t)?;
        }
        let _g = self.admit().await?;
        self.inner
            .store
            .list_subscriptions(topic.map(str::to_owned))
            .await
    }

    /// Publishes messages to a topic: to every subscription, the messages its filter
    /// accepts, all in one transaction (11.2); a filter that fails on a message routes
    /// it nowhere and is logged (11.3); a publish that routes nothing is a valid no-op
    /// (11.4). Returns, per subscription that took a copy, its name and what its queue
    /// did with each copy.
    #[tracing::instrument(level = "debug", skip_all, fields(topic = topic, n = messages.len()), err(level = "debug"))]
    pub async fn publish(
        &self,
        topic: &str,
        mut messages: Vec<OutMessage>,
        options: SendOptions,
    ) -> Result<Vec<(String, Vec<EnqueueSlot>)>> {
        validate_send(
            topic,
            &mut messages,
            &options,
            self.inner.options.max_message_bytes,
        )?;
        Ok(self.publish_inner(topic, messages, options).await?.0)
    }

    /// Tests a filter without storing anything: whether Subscribe would accept it and,
    /// given a message, whether the message passes (the wire's TestFilter).
    pub fn test_filter(&self, filter: &str, message: Option<&OutMessage>) -> FilterTest {
        let now = self.inner.clock.now_ms();
        crate::filter::test_filter(
            filter,
            message.map(|message| Seen {
                message,
                enqueued_at: now,
                visible_at: now,
            }),
        )
    }

    /// Routes and publishes; also returns, per message, the slot of its first copy
    /// ([`EnqueueSlot::Unrouted`] when no subscription took it).
    async fn publish_inner(
        &self,
        topic: &str,
        messages: Vec<OutMessage>,
        options: SendOptions,
    ) -> Result<(Vec<(String, Vec<EnqueueSlot>)>, Vec<EnqueueSlot>)> {
        let _g = self.admit().await?;
        let store = &self.inner.store;
        let now = self.inner.clock.now_ms();
        let visible_at = crate::enqueue::Timing::visible_at(now, &options);
        // Routing is decided here, once for every store.
        let mut filters = Vec::new();
        for s in store.list_subscriptions(Some(topic.to_owned())).await? {
            match self.filter(&s.filter) {
                Ok(f) => filters.push((s.name, f)),
                Err(e) => {
                    tracing::warn!(subscription = %s.name, error = %e, "a stored filter does not compile: it routes nothing");
                }
            }
        }
        let heavy = filters.iter().any(|(_, f)| !f.text().is_empty());
        let messages = Arc::new(messages);
        let route = {
            let messages = messages.clone();
            move || route_by_filters(&filters, &messages, now, visible_at)
        };
        // Filters walk message bodies: off the executor when there is one to run.
        let picks: Vec<(String, Vec<usize>)> = if heavy {
            tokio::task::spawn_blocking(route)
                .await
                .map_err(|e| Error::backend("filter", e))?
        } else {
            route()
        };
        let (names, picks): (Vec<String>, Vec<Vec<usize>>) = picks.into_iter().unzip();
        let routes: Vec<Route> = names
            .iter()
            .zip(&picks)
            .map(|(name, picked)| Route {
                subscription: name.clone(),
                messages: picked.iter().map(|i| messages[*i].clone()).collect(),
            })
            .collect();
        let slots = store.publish(topic.to_owned(), routes, options).await?;
        let mut first = vec![EnqueueSlot::Unrouted; messages.len()];
        for (picked, route_slots) in picks.iter().zip(&slots) {
            for (i, slot) in picked.iter().zip(route_slots) {
                if first[*i] == EnqueueSlot::Unrouted {
                    first[*i] = *slot;
                }
            }
        }
        for (name, route_slots) in names.iter().zip(&slots) {
            self.wake_queue(name, route_slots.len());
        }
        Ok((names.into_iter().zip(slots).collect(), first))
    }

    // ----- access keys --------------------------------------------------------------

    /// Creates an access key with these permissions and returns its token, shown this
    /// once: only the token's SHA-256 digest is stored (9.3). `id` is 32 lowercase hex
    /// characters (None: a random one); a taken id is `KeyConflict`.
    pub async fn create_key(
        &self,
        id: Option<&str>,
        name: &str,
        permissions: &[Permission],
        expires_at_ms: i64,
    ) -> Result<CreatedKey> {
        let id = match id {
            Some(id) => {
                if id.len() != 32 || !id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
                    return Err(Error::invalid(
                        "an access key id is 32 lowercase hexadecimal characters",
                    ));
                }
                id.to_owned()
            }
            None => crate::types::LockToken::random().to_string(),
        };
        validate_text("name", name)?;
        if permissions.is_empty() {
            return Err(Error::invalid(
                "an access key needs at least one permission",
            ));
        }
        if expires_at_ms < 0 {
            return Err(Error::invalid("expires_at_ms must be >= 0"));
        }
        let now = self.inner.clock.now_ms();
        if expires_at_ms != 0 && expires_at_ms <= now {
            return Err(Error::invalid(format!(
                "expires_at_ms {expires_at_ms} is not in the future (now is {now}): a key \
                 would be born expired; give a later time, or 0 for no expiry"
            )));
        }
        let mut permissions = permissions.to_vec();
        permissions.sort();
        permissions.dedup();
        let secret = crate::types::LockToken::random_batch(2);
        let token = format!("mqk_{}{}", secret[0], secret[1]);
        let key = AccessKey {
            id,
            name: name.to_owned(),
            digest: crate::dedup::body_digest(token.as_bytes()),
            permissions,
            created_at_ms: now,
            expires_at_ms,
            revoked_at_ms: 0,
        };
        let _g = self.admit().await?;
        self.inner.store.create_key(key.clone()).await?;
        Ok(CreatedKey { key, token })
    }

    /// Access keys by id, after `after_id`, at most `limit` (1..=1000).
    pub async fn list_keys(&self, after_id: Option<&str>, limit: u32) -> Result<Vec<AccessKey>> {
        if limit == 0 || limit > 1000 {
            return Err(Error::invalid("limit must be 1..=1000"));
        }
        let _g = self.admit().await?;
        self.inner
            .store
            .list_keys(after_id.map(str::to_owned), limit)
            .await
    }

    /// Revokes an access key at once (9.3); idempotent. False if no such key.
    #[tracing::instrument(level = "debug", skip_all, fields(id = id), err(level = "debug"))]
    pub async fn revoke_key(&self, id: &str) -> Result<bool> {
        validate_text("id", id)?;
        let _g = self.admit().await?;
        self.inner.store.revoke_key(id.to_owned()).await
    }

    /// The live key a bearer token names: None for an unknown, revoked or expired one.
    pub async fn authenticate(&self, token: &str) -> Result<Option<AccessKey>> {
        let digest = crate::dedup::body_digest(token.as_bytes());
        let _g = self.admit().await?;
        let key = self.inner.store.key_by_digest(digest).await?;
        let now = self.inner.clock.now_ms();
        Ok(key.filter(|k| k.is_live(now)))
    }

    /// What the store says about itself: backend, location, schema token, counts.
    pub async fn status(&self) -> Result<StoreStatus> {
        let _g = self.admit().await?;
        self.inner.store.status().await
    }

    // ----- background ---------------------------------------------------------------

    /// Runs one pass of every background sweep now, in loop order.
    pub async fn run_sweeps(&self) -> Result<SweepReport> {
        let mut report = SweepReport::default();
        for kind in LOOPS {
            self.run_loop_once(kind, &mut report).await?;
        }
        Ok(report)
    }

    async fn run_loop_once(&self, kind: LoopKind, report: &mut SweepReport) -> Result<()> {
        let _g = self.admit().await?;
        let store = &self.inner.store;
        match kind {
            LoopKind::Reaper => report.reaped += self.recover_and_wake(RecoverTask::Reaper).await?,
            LoopKind::Scheduler => {
                report.activated += self.recover_and_wake(RecoverTask::Scheduler).await?;
            }
            // An expired head hands its line on.
            LoopKind::Ttl => report.expired += self.recover_and_wake(RecoverTask::Ttl).await?,
            LoopKind::Janitor => {
                let retention = RecoverTask::Retention(self.inner.options.retention);
                report.retention_dropped += store.recover(retention).await?;
                report.pruned += store.recover(RecoverTask::Janitor).await?;
                if cfg!(feature = "metrics") {
                    // Refresh the per-state gauges of every queue holding messages.
                    for q in store.list_queues().await? {
                        if q.kind != QueueKind::Topic {
                            let stats = store.stats(q.name.clone()).await?;
                            meter::messages(&q.name, &stats);
                        }
                    }
                }
            }
        }
        let now = self.inner.clock.now_ms();
        self.inner.progress[kind.index()].send_modify(|t| *t = (*t).max(now));
        Ok(())
    }

    /// Runs a task that makes messages claimable again and wakes the long-polls if it did.
    async fn recover_and_wake(&self, task: RecoverTask) -> Result<u64> {
        let n = self.inner.store.recover(task).await?;
        self.woken_if(n);
        Ok(n)
    }

    /// Wakes the long-polls when `changed` rows may have made messages eligible (1.8).
    fn woken_if(&self, changed: u64) {
        if changed > 0 {
            self.wake_receivers();
        }
    }

    /// Watches the clock time of the last completed pass of one background loop; tests
    /// advance a manual clock and wait here instead of sleeping.
    pub fn loop_progress(&self, kind: LoopKind) -> watch::Receiver<i64> {
        self.inner.progress[kind.index()].subscribe()
    }

    fn start_loops(&self) {
        let mut handles = self.inner.loops.lock().unwrap_or_else(|e| e.into_inner());
        for kind in LOOPS {
            let interval = match kind {
                LoopKind::Reaper => self.inner.options.reaper_interval,
                LoopKind::Scheduler => self.inner.options.scheduler_interval,
                LoopKind::Ttl => self.inner.options.ttl_interval,
                LoopKind::Janitor => self.inner.options.janitor_interval,
            };
            let interval = millis(interval).max(1);
            // The loop holds a weak reference so that dropping every Engine handle lets
            // the store go even if close was never called.
            let weak = Arc::downgrade(&self.inner);
            let clock = self.inner.clock.clone();
            // The first deadline is read now, not when the task first runs, so a clock
            // moved right after open still finds the loop due.
            let mut next = clock.now_ms() + interval;
            handles.push(tokio::spawn(async move {
                loop {
                    clock.sleep_until(next).await;
                    let Some(inner) = weak.upgrade() else { return };
                    let engine = Engine { inner };
                    let mut report = SweepReport::default();
                    // A failed pass is retried at the next tick; the data is unchanged.
                    match engine.run_loop_once(kind, &mut report).await {
                        Err(Error::Closed) => return,
                        Err(e) => tracing::warn!(
                            background_loop = ?kind,
                            error = %e,
                            "a background pass failed; it runs again at the next tick"
                        ),
                        Ok(()) => {}
                    }
                    next = clock.now_ms() + interval;
                }
            }));
        }
    }

    /// Stops admission (later calls get `Closed`), wakes long-polls with `Closed`, waits
    /// for admitted work to finish, stops the loops and releases the store (14.5).
    pub async fn close(&self) {
        self.inner.closed.store(true, Ordering::Release);
        self.wake_receivers();
        let _all = self.inner.gate.write().await;
        let handles: Vec<_> =
            std::mem::take(&mut *self.inner.loops.lock().unwrap_or_else(|e| e.into_inner()));
        for h in handles {
            h.abort();
        }
        self.inner.store.close().await;
    }

    /// Whether [`Engine::close`] has been called.
    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::Acquire)
    }
}

/// Counts a parked long-poll for as long as it lives (a dropped receive uncounts too).
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

/// Checks a queue (or topic, subscription) name.
pub fn validate_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > MAX_NAME_BYTES {
        return Err(Error::invalid(format!(
            "a name is 1..={MAX_NAME_BYTES} bytes"
        )));
    }
    if name.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(Error::invalid(
            "a name holds no whitespace or control characters",
        ));
    }
    Ok(())
}

/// Checks the name of a queue, topic or subscription being created: as
/// [`validate_name`], and without invisible format characters (Unicode Cf: bidi
/// overrides, zero-width characters, the BOM), so two names that look alike are alike.
/// (Names are looked up under the older rule, so one stored before it can still be
/// used and deleted.)
pub fn validate_new_name(name: &str) -> Result<()> {
    validate_name(name)?;
    if let Some(c) = name.chars().find(|c| is_format(*c)) {
        return Err(Error::invalid(format!(
            "a name holds no whitespace, control or invisible format characters \
             (bidi overrides, zero-width characters, the BOM); {name:?} holds U+{:04X}",
            u32::from(c)
        )));
    }
    Ok(())
}

/// Whether a character is an invisible format character (Unicode Cf), which a new name
/// may not hold ([`validate_name`] has refused whitespace and control characters).
fn is_format(c: char) -> bool {
    use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};
    c.general_category() == GeneralCategory::Format
}

fn validate_text(field: &str, value: &str) -> Result<()> {
    if value.len() > 1024 || value.chars().any(char::is_control) {
        return Err(Error::invalid(format!(
            "{field} is at most 1024 bytes without control characters"
        )));
    }
    Ok(())
}

fn validate_free_text(field: &str, value: &str) -> Result<()> {
    if value.len() > 4096 {
        return Err(Error::invalid(format!("{field} is at most 4096 bytes")));
    }
    Ok(())
}

fn validate_send(
    queue: &str,
    messages: &mut [OutMessage],
    options: &SendOptions,
    max_bytes: usize,
) -> Result<()> {
    validate_name(queue)?;
    if messages.is_empty() || messages.len() > MAX_SEND_BATCH {
        return Err(Error::invalid(format!(
            "a send holds 1..={MAX_SEND_BATCH} messages"
        )));
    }
    if let Some(ttl) = options.ttl
        && ttl > MAX_SPAN
    {
        return Err(Error::invalid("ttl must be at most 100 years"));
    }
    if let Some(at) = options.scheduled_at_ms
        && at < 0
    {
        return Err(Error::invalid("scheduled_enqueue_time_ms must be >= 0"));
    }
    for m in messages {
        crate::event::stamp(m)?;
        if m.body.len() > max_bytes {
            return Err(Error::MessageTooLarge {
                size: m.body.len(),
                limit: max_bytes,
            });
        }
        for (field, value) in [
            ("message_id", &m.message_id),
            ("group_id", &m.group_id),
            ("subject", &m.subject),
            ("correlation_id", &m.correlation_id),
            ("reply_to", &m.reply_to),
            ("content_type", &m.content_type),
        ] {
            if let Some(v) = value {
                validate_text(field, v)?;
            }
        }
        if m.properties.len() > 64 {
            return Err(Error::invalid("at most 64 properties per message"));
        }
        for (k, v) in &m.properties {
            if k.is_empty() {
                return Err(Error::invalid("a property name is not empty"));
            }
            validate_text("property name", k)?;
            validate_free_text("property value", v)?;
        }
    }
    Ok(())
}

/// Which messages each subscription takes, by index: the filters evaluated, failures
/// routing nothing and logged (sampled, so a stream of failures does not flood the log).
fn route_by_filters(
    filters: &[(String, Arc<Filter>)],
    messages: &[OutMessage],
    now: i64,
    visible_at: i64,
) -> Vec<(String, Vec<usize>)> {
    filters
        .iter()
        .filter_map(|(name, filter)| {
            let picked: Vec<usize> = messages
                .iter()
                .enumerate()
                .filter(|(_, message)| {
                    let seen = Seen {
                        message,
                        enqueued_at: now,
                        visible_at,
                    };
                    filter.matches(seen).unwrap_or_else(|e| {
                        if let Some(n) = filter.note_failure() {
                            tracing::warn!(subscription = %name, filter = %filter.text(), error = %e, failures = n, "filter failed on a message: not routed there (fail-closed)");
                        }
                        false
                    })
                })
                .map(|(i, _)| i)
                .collect();
            (!picked.is_empty()).then(|| (name.clone(), picked))
        })
        .collect()
}

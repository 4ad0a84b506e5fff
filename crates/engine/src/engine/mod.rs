//! [`Engine`]: the public API over any [`Store`]. It validates input against the limits,
//! admits calls until close, wakes long-polling receivers on sends, and drives the
//! background loops from the injected clock.
//!
//! One file per mechanism: `limits` (bounds and input checks), `send` (sends and the
//! outbox), `receive` (claims and long-poll wake-ups), `settle`, `admin` (queues and
//! operator actions), `topics` (topics, subscriptions, filters), `keys` (access keys)
//! and `loops` (background sweeps). This file holds the engine itself: its options, its
//! state, opening and closing, admission.

mod admin;
mod keys;
mod limits;
mod loops;
mod receive;
mod schedules;
mod send;
mod settle;
mod topics;

pub use limits::*;
pub use loops::{LoopKind, SweepReport};
pub use send::EngineTx;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use std::collections::{HashMap, HashSet};

use tokio::sync::{Notify, RwLock, RwLockReadGuard, watch};
use tokio::task::JoinHandle;

use std::time::Duration;

use crate::filter::Filter;
use mqlite_contract::error::{Error, Result};
use mqlite_contract::store::{Ownership, Store};
use mqlite_contract::types::{QueueKind, RecoverTask, RetentionDefaults};
use mqlite_contract::{clock::SharedClock, kind::StoreKind};

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

impl<S: StoreKind> Engine<S> {
    /// Opens the store at `location` with the system clock and default options.
    pub async fn open(location: impl AsRef<std::path::Path>) -> Result<Self> {
        Self::open_with(
            location,
            mqlite_contract::clock::SystemClock::shared(),
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
            // Kept leases, and an ownership this engine does not know: a lease is never
            // reset unless the store proves it is the sole owner.
            _ => {
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

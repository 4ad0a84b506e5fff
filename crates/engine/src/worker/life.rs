//! Proof of life for long handlers: a handler that opts in shows progress with
//! [`heartbeat`] (or a [`Heartbeat`] it hands to its own tasks), and the worker renews
//! its lease only while it does; a maximum runtime bounds every handler. Renewing on a
//! timer alone keeps a hung handler's message locked for ever; with these, a hung or
//! stalled handler is dropped and its message goes back to the queue.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use mqlite_contract::clock::SharedClock;

tokio::task_local! {
    static CURRENT: Heartbeat;
}

/// The reason a worker writes on a message whose handler overran the worker's maximum
/// runtime on its last allowed attempt ([`super::Worker::max_runtime`]).
pub const REASON_MAX_RUNTIME: &str = "MaxRuntimeExceeded";

/// The reason a worker writes on a message whose handler stopped showing progress on
/// its last allowed attempt ([`super::Worker::heartbeat_timeout`]).
pub const REASON_STALLED: &str = "HandlerStalled";

/// A handler's proof of life: the last time it showed progress, on the worker's clock.
/// Cloned freely; every clone beats for the same handler.
#[derive(Clone)]
pub struct Heartbeat {
    last: Arc<AtomicI64>,
    clock: SharedClock,
}

impl std::fmt::Debug for Heartbeat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Heartbeat")
            .field("last_ms", &self.last_ms())
            .finish()
    }
}

impl Heartbeat {
    pub(super) fn new(clock: SharedClock) -> Self {
        let now = clock.now_ms();
        Heartbeat {
            last: Arc::new(AtomicI64::new(now)),
            clock,
        }
    }

    /// The heartbeat of the handler this task runs for, if it runs under a worker: hand
    /// a clone to tasks the handler spawns, so that they can beat too.
    pub fn current() -> Option<Heartbeat> {
        CURRENT.try_with(Heartbeat::clone).ok()
    }

    /// Shows progress now.
    pub fn beat(&self) {
        self.last.fetch_max(self.clock.now_ms(), Ordering::Relaxed);
    }

    /// When progress was last shown (the handler's start if never), epoch ms.
    pub fn last_ms(&self) -> i64 {
        self.last.load(Ordering::Relaxed)
    }

    /// Runs `f` as the handler this heartbeat watches.
    pub(super) fn scope<F: Future>(self, f: F) -> impl Future<Output = F::Output> {
        CURRENT.scope(self, f)
    }
}

/// Shows progress for the handler this task runs for: with
/// [`super::Worker::heartbeat_timeout`] set, a handler that goes longer than the timeout
/// without calling this loses its message at the next renewal point. Returns false
/// outside a worker's handler (then it does nothing).
pub fn heartbeat() -> bool {
    CURRENT.try_with(Heartbeat::beat).is_ok()
}

/// The bounds a worker puts on each handler (both off by default).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Limits {
    /// The longest a handler may run.
    pub(super) max_runtime: Option<Duration>,
    /// The longest a handler may go without a heartbeat and keep its lease.
    pub(super) heartbeat_timeout: Option<Duration>,
}

//! The injectable clock. Every timestamp in mqlite is epoch milliseconds read from a
//! [`Clock`]; tests drive a [`ManualClock`] so failure paths run without sleeping.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;

/// A boxed future, as returned by [`Clock::sleep_until`].
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A source of time that background loops and long-polls can also wait on.
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// The current time, epoch milliseconds.
    fn now_ms(&self) -> i64;
    /// Resolves once `now_ms() >= deadline_ms`.
    fn sleep_until(&self, deadline_ms: i64) -> BoxFuture<'static, ()>;
}

/// A shared clock handle.
pub type SharedClock = Arc<dyn Clock>;

/// The wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl SystemClock {
    /// The wall clock as a shared handle.
    pub fn shared() -> SharedClock {
        Arc::new(SystemClock)
    }
}

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)
    }

    fn sleep_until(&self, deadline_ms: i64) -> BoxFuture<'static, ()> {
        let wait = (deadline_ms - self.now_ms()).max(0) as u64;
        Box::pin(tokio::time::sleep(Duration::from_millis(wait)))
    }
}

/// A clock that moves only when told to; sleepers wake when it passes their deadline.
#[derive(Clone)]
pub struct ManualClock {
    now: Arc<watch::Sender<i64>>,
}

impl fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ManualClock({})", *self.now.borrow())
    }
}

impl ManualClock {
    /// A manual clock reading `start_ms`.
    pub fn new(start_ms: i64) -> Self {
        ManualClock {
            now: Arc::new(watch::Sender::new(start_ms)),
        }
    }

    /// The current reading.
    pub fn now(&self) -> i64 {
        *self.now.borrow()
    }

    /// Moves the clock forward by `ms` (never backwards).
    pub fn advance(&self, ms: i64) {
        self.now.send_modify(|t| *t += ms.max(0));
    }

    /// Sets the clock to `ms` if that is later than now.
    pub fn set(&self, ms: i64) {
        self.now.send_if_modified(|t| {
            if ms > *t {
                *t = ms;
                true
            } else {
                false
            }
        });
    }

    /// This clock as a shared handle (same underlying time).
    pub fn shared(&self) -> SharedClock {
        Arc::new(self.clone())
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        *self.now.borrow()
    }

    fn sleep_until(&self, deadline_ms: i64) -> BoxFuture<'static, ()> {
        let mut rx = self.now.subscribe();
        Box::pin(async move {
            // The sender lives as long as any ManualClock clone; if every clone is gone
            // time can never advance again, so the sleeper simply never wakes.
            if rx.wait_for(|t| *t >= deadline_ms).await.is_err() {
                std::future::pending::<()>().await;
            }
        })
    }
}

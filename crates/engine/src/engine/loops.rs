//! The background loops (reaper, scheduler, TTL, janitor), driven by the injected
//! clock, and [`Engine::run_sweeps`] for tests and tools that drive them by hand.

use std::sync::Arc;

use tokio::sync::watch;

use crate::meter;
use mqlite_contract::error::{Error, Result};
use mqlite_contract::store::Store;
use mqlite_contract::types::{QueueKind, RecoverTask, millis};

use super::Engine;

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
    /// Due scheduled messages, and the recurring schedules' ticks.
    Scheduler,
    /// TTL expiry.
    Ttl,
    /// Receipts, attempts, dedup entries, dead-letter retention, and a step of free
    /// pages given back to the file system.
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
    /// Messages sent by recurring schedules (21).
    pub fired: u64,
    /// Messages expired by TTL.
    pub expired: u64,
    /// Dead letters dropped by retention.
    pub retention_dropped: u64,
    /// Dead letters moved to their queue's `dead_letter_target`.
    pub forwarded: u64,
    /// Receipts, attempts and dedup entries pruned.
    pub pruned: u64,
    /// Free pages given back to the file system (a local SQLite file).
    pub pages_freed: u64,
}

/// The most free pages one janitor pass gives back (64 MiB of 4 KiB pages): a drained
/// backlog's space returns over a few passes, each pass's transaction short.
const VACUUM_STEP_MAX_PAGES: u32 = 16 * 1024;

impl<S: Store> Engine<S> {
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
                report.fired += self.fire_due_schedules().await?;
                report.activated += self.recover_and_wake(RecoverTask::Scheduler).await?;
            }
            // An expired head hands its line on.
            LoopKind::Ttl => report.expired += self.recover_and_wake(RecoverTask::Ttl).await?,
            LoopKind::Janitor => {
                // Forwarding first, so that retention bounds what stays, not what moves.
                for q in store.list_queues().await? {
                    let Some(target) = q.config.dead_letter_target else {
                        continue;
                    };
                    match self.forward(&q.name, target.clone()).await {
                        Ok(n) => report.forwarded += n,
                        // A target deleted since, or one that refuses these dead letters
                        // (a group_fifo target and messages without a group), stops
                        // nothing else: the dead letters stay.
                        Err(
                            e @ (Error::NotFound { .. }
                            | Error::GroupRequired { .. }
                            | Error::InvalidArgument(_)),
                        ) => tracing::warn!(
                            queue = %q.name, target = %target, error = %e,
                            "dead letters not forwarded; they stay in the queue"
                        ),
                        Err(e) => return Err(e),
                    }
                }
                let retention = RecoverTask::Retention(self.inner.options.retention);
                report.retention_dropped += store.recover(retention).await?;
                report.pruned += store.recover(RecoverTask::Janitor).await?;
                if store.reclaims_pages() {
                    let step = RecoverTask::Vacuum {
                        max_pages: VACUUM_STEP_MAX_PAGES,
                    };
                    report.pages_freed += store.recover(step).await?;
                }
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
    pub(super) async fn recover_and_wake(&self, task: RecoverTask) -> Result<u64> {
        let n = self.inner.store.recover(task).await?;
        self.woken_if(n);
        Ok(n)
    }

    /// Wakes the long-polls when `changed` rows may have made messages eligible (1.8).
    pub(super) fn woken_if(&self, changed: u64) {
        if changed > 0 {
            self.wake_receivers();
        }
    }

    /// Watches the clock time of the last completed pass of one background loop; tests
    /// advance a manual clock and wait here instead of sleeping.
    pub fn loop_progress(&self, kind: LoopKind) -> watch::Receiver<i64> {
        self.inner.progress[kind.index()].subscribe()
    }

    pub(super) fn start_loops(&self) {
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
}

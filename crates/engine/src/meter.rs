//! Metrics through the `metrics` facade (feature `metrics`; the application installs a
//! recorder, Prometheus or another). Without the feature every call here is empty.
//!
//! - `mqlite_operations_total{op, queue, outcome}`: every public call, by outcome
//!   (`ok` or the error's kind);
//! - `mqlite_operation_seconds{op}`: its latency;
//! - `mqlite_queue_messages{queue, state}`: messages per state, refreshed on every `stats`
//!   call and every janitor pass.

use std::time::Instant;

use mqlite_contract::{error::Error, types::QueueStats};

/// The outcome label of a result.
#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
fn outcome<T>(r: &Result<T, Error>) -> &'static str {
    match r {
        Ok(_) => "ok",
        Err(Error::LockLost { .. }) => "lock_lost",
        Err(Error::NotFound { .. }) => "not_found",
        Err(Error::InvalidArgument(_) | Error::MessageTooLarge { .. }) => "invalid_argument",
        Err(Error::Closed) => "closed",
        Err(Error::Cancelled) => "cancelled",
        Err(_) => "error",
    }
}

/// Counts one call of `op` on `queue` and its latency since `started`.
pub(crate) fn call<T>(op: &'static str, queue: &str, started: Instant, r: &Result<T, Error>) {
    #[cfg(feature = "metrics")]
    {
        metrics::counter!(
            "mqlite_operations_total",
            "op" => op,
            "queue" => queue.to_owned(),
            "outcome" => outcome(r)
        )
        .increment(1);
        metrics::histogram!("mqlite_operation_seconds", "op" => op)
            .record(started.elapsed().as_secs_f64());
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (op, queue, started, r);
}

/// Sets the per-state gauges of `queue`.
pub(crate) fn messages(queue: &str, stats: &QueueStats) {
    #[cfg(feature = "metrics")]
    for (state, n) in [
        ("active", stats.active),
        ("locked", stats.locked),
        ("deferred", stats.deferred),
        ("scheduled", stats.scheduled),
        ("dead_lettered", stats.dead_lettered),
    ] {
        metrics::gauge!("mqlite_queue_messages", "queue" => queue.to_owned(), "state" => state)
            .set(n as f64);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (queue, stats);
}

/// The relay's backlog: `mqlite_relay_pending` (intents not yet published) and
/// `mqlite_relay_oldest_pending_seconds` (the age of the oldest, 0 without one).
/// Only with the feature: without it the relay does not read its backlog at all.
#[cfg(feature = "metrics")]
pub(crate) fn relay_backlog(backlog: &mqlite_contract::side_tables::RelayBacklog, now_ms: i64) {
    metrics::gauge!("mqlite_relay_pending").set(backlog.pending as f64);
    let age = backlog
        .oldest_created_at_ms
        .map_or(0.0, |t| (now_ms - t).max(0) as f64 / 1000.0);
    metrics::gauge!("mqlite_relay_oldest_pending_seconds").set(age);
}

//! `/metrics` in the Prometheus text format, with the public mqlite broker's names:
//! `mqlite_queue_messages{queue,state}`, `mqlite_queue_total{queue}`,
//! `mqlite_queue_oldest_message_age_ms{queue}` (read from the store at scrape time),
//! `mqlite_messages_completed_total{queue}` and the latency histogram
//! `mqlite_rpc_duration_seconds{rpc}`; beside them, ours: requests per RPC and status
//! code, parked long-polls, the relay's backlog.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

use mqlite::AnyEngine;
use mqlite::Result;

/// Upper bounds of the latency buckets, seconds.
const BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0, 25.0,
];

#[derive(Default)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    sum: f64,
    count: u64,
}

#[derive(Default)]
struct Inner {
    requests: BTreeMap<(&'static str, u16), u64>,
    latency: BTreeMap<&'static str, Histogram>,
    /// Messages completed per queue since start (only queues that exist complete).
    completed: BTreeMap<String, u64>,
}

/// The broker's request metrics.
#[derive(Default)]
pub(crate) struct Prom {
    inner: Mutex<Inner>,
}

impl Prom {
    /// Records one answered request.
    pub(crate) fn observe(&self, rpc: &'static str, status: u16, took: Duration) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        *inner.requests.entry((rpc, status)).or_default() += 1;
        let h = inner.latency.entry(rpc).or_default();
        let secs = took.as_secs_f64();
        for (i, le) in BUCKETS.iter().enumerate() {
            if secs <= *le {
                h.counts[i] += 1;
            }
        }
        h.sum += secs;
        h.count += 1;
    }

    /// Counts `n` messages completed in `queue`.
    pub(crate) fn completed(&self, queue: &str, n: u64) {
        if n == 0 {
            return;
        }
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        match inner.completed.get_mut(queue) {
            Some(total) => *total += n,
            None => {
                inner.completed.insert(queue.to_owned(), n);
            }
        }
    }

    /// The exposition text; the message gauges are read from the store now.
    pub(crate) async fn render(&self, engine: &AnyEngine) -> Result<String> {
        let mut out = String::new();
        let queues = engine.list_queues().await?;
        let mut totals = String::new();
        let mut ages = String::new();
        out.push_str("# HELP mqlite_queue_messages Messages in a queue by state.\n");
        out.push_str("# TYPE mqlite_queue_messages gauge\n");
        for q in queues {
            if q.kind == mqlite::QueueKind::Topic {
                continue;
            }
            let s = match engine.stats(&q.name).await {
                Ok(s) => s,
                // Deleted since the list was read (an Unsubscribe mid-scrape): it has
                // no gauges any more.
                Err(mqlite::Error::NotFound { .. }) => continue,
                Err(e) => return Err(e),
            };
            let name = escape(&q.name);
            for (state, n) in [
                ("active", s.active),
                ("locked", s.locked),
                ("deferred", s.deferred),
                ("scheduled", s.scheduled),
                ("dead_lettered", s.dead_lettered),
            ] {
                let _ = writeln!(
                    out,
                    "mqlite_queue_messages{{queue=\"{name}\",state=\"{state}\"}} {n}"
                );
            }
            let _ = writeln!(totals, "mqlite_queue_total{{queue=\"{name}\"}} {}", s.total);
            let _ = writeln!(
                ages,
                "mqlite_queue_oldest_message_age_ms{{queue=\"{name}\"}} {}",
                s.oldest_message_age_ms
            );
        }
        out.push_str("# HELP mqlite_queue_total Messages in a queue.\n");
        out.push_str("# TYPE mqlite_queue_total gauge\n");
        out.push_str(&totals);
        out.push_str(
            "# HELP mqlite_queue_oldest_message_age_ms Age of a queue's oldest message, ms.\n",
        );
        out.push_str("# TYPE mqlite_queue_oldest_message_age_ms gauge\n");
        out.push_str(&ages);
        out.push_str("# HELP mqlite_long_polls Receives parked in a long-poll wait.\n");
        out.push_str("# TYPE mqlite_long_polls gauge\n");
        let parked = *engine.long_poll_waiters().borrow();
        let _ = writeln!(out, "mqlite_long_polls {parked}");
        // A producer's relay outbox in the served database (the relay runs in the
        // producer's process; its stuck intents show here too).
        let relay = engine.status().await?.relay;
        let age_s = relay.oldest_created_at_ms.map_or(0.0, |t| {
            (engine.clock().now_ms() - t).max(0) as f64 / 1000.0
        });
        out.push_str("# HELP mqlite_relay_pending Relay intents not yet published.\n");
        out.push_str("# TYPE mqlite_relay_pending gauge\n");
        let _ = writeln!(out, "mqlite_relay_pending {}", relay.pending);
        out.push_str(
            "# HELP mqlite_relay_oldest_pending_seconds Age of the oldest unpublished relay intent.\n",
        );
        out.push_str("# TYPE mqlite_relay_oldest_pending_seconds gauge\n");
        let _ = writeln!(out, "mqlite_relay_oldest_pending_seconds {age_s}");
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        out.push_str(
            "# HELP mqlite_messages_completed_total Messages completed since the broker started.\n",
        );
        out.push_str("# TYPE mqlite_messages_completed_total counter\n");
        for (queue, n) in &inner.completed {
            let _ = writeln!(
                out,
                "mqlite_messages_completed_total{{queue=\"{}\"}} {n}",
                escape(queue)
            );
        }
        out.push_str("# HELP mqlite_requests_total Requests answered, per RPC and status code.\n");
        out.push_str("# TYPE mqlite_requests_total counter\n");
        for ((rpc, code), n) in &inner.requests {
            let _ = writeln!(
                out,
                "mqlite_requests_total{{rpc=\"{rpc}\",code=\"{code}\"}} {n}"
            );
        }
        out.push_str("# HELP mqlite_rpc_duration_seconds Time to answer, per RPC.\n");
        out.push_str("# TYPE mqlite_rpc_duration_seconds histogram\n");
        for (rpc, h) in &inner.latency {
            for (le, n) in BUCKETS.iter().zip(h.counts) {
                let _ = writeln!(
                    out,
                    "mqlite_rpc_duration_seconds_bucket{{rpc=\"{rpc}\",le=\"{le}\"}} {n}"
                );
            }
            let _ = writeln!(
                out,
                "mqlite_rpc_duration_seconds_bucket{{rpc=\"{rpc}\",le=\"+Inf\"}} {}",
                h.count
            );
            let _ = writeln!(
                out,
                "mqlite_rpc_duration_seconds_sum{{rpc=\"{rpc}\"}} {}",
                h.sum
            );
            let _ = writeln!(
                out,
                "mqlite_rpc_duration_seconds_count{{rpc=\"{rpc}\"}} {}",
                h.count
            );
        }
        Ok(out)
    }
}

/// A label value with `\`, `"` and newlines escaped.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

//! Publish with filters: a batch published to a topic with 10 subscriptions, 5 of them
//! filtered on the body (`body_json.amount > 100`, which half the messages pass) and 5
//! unfiltered, beside a plain send of the same messages to one queue, in the same run,
//! on the SQLite store (a local file, WAL + NORMAL) in a temporary directory. A publish
//! routes each message to the 5 unfiltered subscriptions and, for half of them, to the
//! 5 filtered ones: 7.5 copies per message, all in one transaction. A control topic
//! with 10 unfiltered subscriptions (10 copies per message, no filter evaluated) shows
//! the cost per copy without filters. The last lines printed are the ratios.
//!
//! `cargo bench -p mqlite-benches --bench publish`

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use mqlite_contract::{OutMessage, QueueConfig, SendOptions};
use mqlite_store_sqlite::{SqliteOptions, SqliteStore, Synchronous};

/// Messages per publish (and per send).
const BATCHES: [usize; 2] = [1, 64];
/// Subscriptions of the topic: this many filtered and as many unfiltered.
const FILTERED: usize = 5;
const FILTER: &str = "body_json.amount > 100";
const BODY: usize = 256;
/// Copies a publish writes per message, on average: every unfiltered subscription,
/// and the filtered ones for every other message.
const COPIES_PER_MESSAGE: f64 = FILTERED as f64 * 1.5;

/// A JSON body of [`BODY`] bytes whose `amount` passes the filter for every other `i`.
fn body(i: u64) -> Vec<u8> {
    let amount = if i.is_multiple_of(2) { 150 } else { 50 };
    let head = format!(r#"{{"amount":{amount},"order":{i},"pad":""#);
    let mut b = head.into_bytes();
    b.resize(BODY - 2, b'x');
    b.extend_from_slice(br#""}"#);
    b
}

fn batch(n: &mut u64, size: usize) -> Vec<OutMessage> {
    (0..size)
        .map(|_| {
            *n += 1;
            OutMessage {
                content_type: Some("application/json".into()),
                ..OutMessage::new(body(*n))
            }
        })
        .collect()
}

/// What was timed ("send", "publish", "control") and the batch size.
type Case = (&'static str, usize);

/// Every timed iteration, per case: total time and count, for the ratios.
#[derive(Default)]
struct Times(RefCell<BTreeMap<Case, (Duration, u64)>>);

impl Times {
    fn record(&self, what: &'static str, size: usize, elapsed: Duration, iters: u64) {
        let mut t = self.0.borrow_mut();
        let e = t.entry((what, size)).or_default();
        e.0 += elapsed;
        e.1 += iters;
    }

    /// The mean time of one call.
    fn mean(&self, what: &'static str, size: usize) -> Option<f64> {
        self.0
            .borrow()
            .get(&(what, size))
            .filter(|(_, iters)| *iters > 0)
            .map(|(d, iters)| d.as_secs_f64() / *iters as f64)
    }
}

fn publish(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bench.db").display().to_string();
    let engine = rt.block_on(async {
        let store = SqliteStore::open(SqliteOptions::new(path).synchronous(Synchronous::Normal))
            .await
            .expect("open");
        let engine = mqlite_benches::engine_with_queue(store, "q", QueueConfig::default()).await;
        engine.create_topic("t").await.expect("topic");
        engine.create_topic("u").await.expect("control topic");
        for i in 0..2 * FILTERED {
            engine
                .subscribe("u", &format!("u-{i}"), "", QueueConfig::default())
                .await
                .expect("control subscription");
        }
        for i in 0..FILTERED {
            engine
                .subscribe("t", &format!("big-{i}"), FILTER, QueueConfig::default())
                .await
                .expect("filtered subscription");
            engine
                .subscribe("t", &format!("all-{i}"), "", QueueConfig::default())
                .await
                .expect("subscription");
        }
        // The routing is what the docs say: 7.5 copies per message on average.
        let routed = engine
            .publish("t", batch(&mut 0, 2), SendOptions::default())
            .await
            .expect("publish");
        let copies: usize = routed.iter().map(|(_, slots)| slots.len()).sum();
        assert_eq!(
            copies,
            2 * FILTERED + FILTERED,
            "one message passes, one not"
        );
        engine
    });

    let times = Times::default();
    let mut group = c.benchmark_group("publish_10_subscriptions");
    let mut n = 0u64;
    for size in BATCHES {
        group.bench_function(BenchmarkId::new("send_to_queue", size), |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        engine
                            .send_batch("q", batch(&mut n, size))
                            .await
                            .expect("send");
                    }
                    let elapsed = start.elapsed();
                    times.record("send", size, elapsed, iters);
                    elapsed
                })
            })
        });
        group.bench_function(BenchmarkId::new("publish_to_topic", size), |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        engine
                            .publish("t", batch(&mut n, size), SendOptions::default())
                            .await
                            .expect("publish");
                    }
                    let elapsed = start.elapsed();
                    times.record("publish", size, elapsed, iters);
                    elapsed
                })
            })
        });
        group.bench_function(BenchmarkId::new("publish_unfiltered_control", size), |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        engine
                            .publish("u", batch(&mut n, size), SendOptions::default())
                            .await
                            .expect("publish");
                    }
                    let elapsed = start.elapsed();
                    times.record("control", size, elapsed, iters);
                    elapsed
                })
            })
        });
    }
    group.finish();
    rt.block_on(engine.close());

    // Means over every timed iteration (warm-up included), for the ratio; criterion's
    // own estimates above are the per-call times.
    for size in BATCHES {
        let (Some(send), Some(publish), Some(control)) = (
            times.mean("send", size),
            times.mean("publish", size),
            times.mean("control", size),
        ) else {
            continue;
        };
        let copies = size as f64 * COPIES_PER_MESSAGE;
        println!(
            "batch {size}: send {:.1} µs ({:.0} msg/s); publish {:.1} µs ({:.0} msg/s, \
             {:.1} µs per copy), publish/send = {:.2}; unfiltered control {:.1} µs \
             ({:.1} µs per copy)",
            send * 1e6,
            size as f64 / send,
            publish * 1e6,
            size as f64 / publish,
            publish * 1e6 / copies,
            publish / send,
            control * 1e6,
            control * 1e6 / (size * 2 * FILTERED) as f64,
        );
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = publish
}
criterion_main!(benches);

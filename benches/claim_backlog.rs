//! Claim latency behind a deep backlog (promises 1.5 and 5.6): one group's head is in
//! flight and N of its successors wait behind it; every claim must find the next free
//! message without walking those N rows.
//!
//! Every registered store runs it (`mqlite-testbed`), through the typed engine:
//! `cargo bench -p mqlite-benches --bench claim_backlog` (one group:
//! `-- claim_with_priorities`)

use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use mqlite_contract::{OutMessage, QueueConfig, Store, SystemClock};
use mqlite_engine::Engine;
use mqlite_tck::{Access, Typed};

const Q: &str = "bench";

struct Setup<S: Store> {
    _dir: tempfile::TempDir,
    engine: Engine<S>,
    /// The blocked line's head, claimed.
    head: mqlite_contract::Message,
}

/// A queue whose group "blocked" has its head locked and `backlog` messages behind it.
async fn setup<A: Access>(access: &A, backlog: usize, in_flight: bool) -> Setup<A::Store> {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = access
        .open(dir.path(), SystemClock::shared())
        .await
        .expect("open");
    let config = QueueConfig {
        lock_duration: Duration::from_secs(3600),
        ..Default::default()
    };
    let engine = mqlite_benches::engine_with_queue(store, Q, config).await;
    let group = |i: usize| OutMessage::new(format!("blocked-{i}")).with_group("blocked");
    engine.send(Q, group(0)).await.expect("head");
    let head = engine
        .receive_one(Q)
        .await
        .expect("claim head")
        .expect("the head");
    for start in (0..backlog).step_by(1000) {
        let batch = (start..(start + 1000).min(backlog)).map(|i| {
            if in_flight {
                OutMessage::new(format!("plain-{i}"))
            } else {
                group(i + 1)
            }
        });
        engine
            .send_batch(Q, batch.collect())
            .await
            .expect("backlog");
    }
    if in_flight {
        // The backlog itself is claimed: N live leases sit in front of the free messages.
        loop {
            let got = engine
                .receive(Q, mqlite_contract::ReceiveOptions::batch(256))
                .await
                .expect("claim backlog");
            if got.is_empty() {
                break;
            }
        }
    }
    Setup {
        _dir: dir,
        engine,
        head,
    }
}

async fn refill<S: Store>(engine: &Engine<S>) {
    let batch = (0..1000)
        .map(|i| OutMessage::new(format!("free-{i}")).with_group(format!("g{}", i % 50)))
        .collect();
    engine.send_batch(Q, batch).await.expect("refill");
}

fn claim_behind_backlog(c: &mut Criterion) {
    mqlite_testbed::with_each_available_store!(name, factory => claim_behind_backlog_on(c, name, &Typed(factory)));
}

fn claim_behind_backlog_on<A: Access>(c: &mut Criterion, store: &str, access: &A) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let mut group = c.benchmark_group(format!("claim_behind_backlog/{store}"));
    group.sample_size(30);
    group.measurement_time(Duration::from_secs(5));
    for (scenario, in_flight) in [("blocked_group", false), ("leases_in_flight", true)] {
        for backlog in [20_000usize, 100_000] {
            let setup = rt.block_on(setup(access, backlog, in_flight));
            let engine = setup.engine.clone();
            group.bench_with_input(BenchmarkId::new(scenario, backlog), &backlog, |b, _| {
                b.iter_custom(|iters| {
                    rt.block_on(async {
                        let mut spent = Duration::ZERO;
                        let mut left = 0u64;
                        for _ in 0..iters {
                            if left == 0 {
                                refill(&engine).await;
                                left = 1000;
                            }
                            let start = Instant::now();
                            let m = engine.receive_one(Q).await.expect("claim");
                            spent += start.elapsed();
                            let m = m.expect("a free message");
                            assert!(!m.body().starts_with(b"blocked"), "the line was jumped");
                            engine.complete(Q, &m).await.expect("complete");
                            left -= 1;
                        }
                        spent
                    })
                })
            });
            rt.block_on(setup.engine.close());
        }
    }
    group.finish();
}

/// Completing the head of a deep line promotes the next row (promise 5.6 from the other
/// side): the cost must not grow with the N rows waiting in the line.
fn complete_head_of_deep_line(c: &mut Criterion) {
    mqlite_testbed::with_each_available_store!(name, factory => complete_head_on(c, name, &Typed(factory)));
}

fn complete_head_on<A: Access>(c: &mut Criterion, store: &str, access: &A) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let mut group = c.benchmark_group(format!("complete_head_of_deep_line/{store}"));
    group.sample_size(30);
    group.measurement_time(Duration::from_secs(5));
    for backlog in [20_000usize, 100_000] {
        // setup() leaves the head locked and `backlog` rows waiting behind it.
        let setup = rt.block_on(setup(access, backlog, false));
        let engine = setup.engine.clone();
        let mut head = Some(setup.head.clone());
        group.bench_with_input(BenchmarkId::from_parameter(backlog), &backlog, |b, _| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let mut spent = Duration::ZERO;
                    for _ in 0..iters {
                        let m = head.take().expect("the line's head is claimed");
                        let start = Instant::now();
                        engine.complete(Q, &m).await.expect("complete");
                        spent += start.elapsed();
                        // Keep the line deep: one in at the tail for each one out.
                        let tail = OutMessage::new("blocked-tail").with_group("blocked");
                        engine.send(Q, tail).await.expect("refill");
                        head = engine.receive_one(Q).await.expect("claim");
                    }
                    spent
                })
            })
        });
        rt.block_on(setup.engine.close());
    }
    group.finish();
}

/// Claim at a plain backlog of 1,000 and of 1,000,000 waiting messages (promise 1.5:
/// O(log n)): the target is the claim at 1,000,000 within 1.5 times the claim at 1,000.
/// Sizes come from `MQLITE_BENCH_BACKLOGS` (comma-separated) when set.
fn claim_at_backlog(c: &mut Criterion) {
    mqlite_testbed::with_each_available_store!(name, factory => claim_at_backlog_on(c, name, &Typed(factory)));
}

fn claim_at_backlog_on<A: Access>(c: &mut Criterion, store: &str, access: &A) {
    let sizes: Vec<usize> = std::env::var("MQLITE_BENCH_BACKLOGS")
        .ok()
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1_000, 1_000_000]);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let mut group = c.benchmark_group(format!("claim_at_backlog/{store}"));
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(3));
    for backlog in sizes {
        let id = BenchmarkId::from_parameter(backlog);
        claim_loop(&mut group, &rt, access, id, backlog, |_| 0);
    }
    group.finish();
}

/// Fills a queue with `backlog` messages of `priority(i)`, then times claims of one
/// (each completed and replaced by one of the priority that left, so the backlog keeps
/// its size and spread).
fn claim_loop<A: Access>(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    rt: &tokio::runtime::Runtime,
    access: &A,
    id: BenchmarkId,
    backlog: usize,
    priority: impl Fn(usize) -> u8,
) {
    let (dir, engine) = rt.block_on(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = access
            .open(dir.path(), SystemClock::shared())
            .await
            .expect("open");
        let engine = mqlite_benches::engine_with_queue(store, Q, QueueConfig::default()).await;
        for start in (0..backlog).step_by(1000) {
            let batch = (start..(start + 1000).min(backlog))
                .map(|i| OutMessage::new(format!("m{i}")).with_priority(priority(i)))
                .collect();
            engine.send_batch(Q, batch).await.expect("backlog");
        }
        (dir, engine)
    });
    group.bench_with_input(id, &backlog, |b, _| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut spent = Duration::ZERO;
                for i in 0..iters {
                    let start = Instant::now();
                    let m = engine.receive_one(Q).await.expect("claim");
                    spent += start.elapsed();
                    let m = m.expect("a message");
                    engine.complete(Q, &m).await.expect("complete");
                    let again = OutMessage::new(format!("r{i}")).with_priority(m.content.priority);
                    engine.send(Q, again).await.expect("refill");
                }
                spent
            })
        })
    });
    rt.block_on(engine.close());
    drop(dir);
}

/// Claim latency with priorities (promise 20.4): a backlog of 1,000 and of 100,000
/// messages spread over priorities 0 ..= 9, beside the same backlogs all of priority 0,
/// in one run; each claim takes the oldest of the highest priority, and the refill keeps
/// the spread. On the local stores (a remote one pays round trips, not seeks).
fn claim_with_priorities(c: &mut Criterion) {
    mqlite_testbed::with_each_available_store!(name, factory => if name != "libsql" {
        claim_with_priorities_on(c, name, &Typed(factory))
    });
}

fn claim_with_priorities_on<A: Access>(c: &mut Criterion, store: &str, access: &A) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let mut group = c.benchmark_group(format!("claim_with_priorities/{store}"));
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(3));
    for (scenario, spread) in [("priorities_0_to_9", 10usize), ("priority_0", 1)] {
        for backlog in [1_000usize, 100_000] {
            let id = BenchmarkId::new(scenario, backlog);
            claim_loop(&mut group, &rt, access, id, backlog, |i| (i % spread) as u8);
        }
    }
    group.finish();
}

criterion_group!(
    benches,
    claim_behind_backlog,
    complete_head_of_deep_line,
    claim_at_backlog,
    claim_with_priorities
);
criterion_main!(benches);

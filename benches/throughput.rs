//! The SQLite store's throughput paths against bare SQLite, in the same run (issue
//! "Speed"): each criterion group holds the store and the same work done straight on
//! rusqlite over the fixed queue-shaped table of docs/benchmark.md, so the report is a
//! ratio. WAL + NORMAL on both sides unless the group says FULL; 256-byte bodies.
//!
//! `cargo bench -p mqlite-benches --bench throughput` (quick: add `-- --quick`; the
//! groups: single_send, producers_16, send_batch_64, drain_64, drain_single,
//! claim_complete_at_backlog, end_to_end_4x4, worker_end_to_end, producers_16_full).
//! Each group measures the store as shipped (`mqlite`: short calls on the caller's
//! thread when the store is idle) and with every call on its writer thread
//! (`mqlite-writer`), and prints the lateness probe's figures and where the calls ran
//! beside criterion's lines.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main};
use mqlite_benches::{LatenessProbe, PollTimes, body};
use mqlite_contract::{DynStore, LockRef, OutMessage, QueueConfig, ReceiveOptions, SystemClock};
use mqlite_engine::Engine;
use mqlite_store_sqlite::{HoldBound, SqliteOptions, SqliteStore, Synchronous};
use rusqlite::Connection;

const Q: &str = "q";

struct World {
    rt: tokio::runtime::Runtime,
    _dir: tempfile::TempDir,
    /// The store as shipped: short calls on the caller's thread when it is idle.
    engine: Engine<SqliteStore>,
    /// The same store with every call sent to its writer thread (`caller_thread(false)`),
    /// the alternative measured beside it.
    writer: Engine<SqliteStore>,
    bare: Connection,
    n: Arc<AtomicUsize>,
}

fn world(sync: Synchronous) -> World {
    let rt = mqlite_benches::runtime();
    let dir = tempfile::tempdir().expect("tempdir");
    let open = |file: &str, caller_thread: bool| {
        let path = dir.path().join(file).display().to_string();
        rt.block_on(async {
            let store = SqliteStore::open(
                SqliteOptions::new(path)
                    .clock(SystemClock::shared())
                    .synchronous(sync)
                    .caller_thread(caller_thread),
            )
            .await
            .expect("open");
            mqlite_benches::engine_with_queue(store, Q, QueueConfig::default()).await
        })
    };
    let engine = open("store.db", true);
    let writer = open("writer.db", false);
    let bare = mqlite_benches::bare_sqlite(&dir.path().join("bare.db"), sync == Synchronous::Full);
    World {
        rt,
        _dir: dir,
        engine,
        writer,
        bare,
        n: Arc::new(AtomicUsize::new(0)),
    }
}

impl World {
    /// The two forms of the store, by bench name.
    fn stores(&self) -> [(&'static str, &Engine<SqliteStore>); 2] {
        [("mqlite", &self.engine), ("mqlite-writer", &self.writer)]
    }

    /// `n` messages of the bench's bodies, for a batch sent outside a measurement.
    fn batch(&self, n: usize) -> Vec<OutMessage> {
        (0..n).map(|_| OutMessage::new(self.next())).collect()
    }

    /// Runs `bench` under the lateness probe and reports it under `group/name`, with
    /// where the store's calls ran and how many commits they made.
    fn probed(&self, group: &str, name: &str, bench: impl FnOnce()) {
        let engine = self
            .stores()
            .into_iter()
            .find(|(n, _)| *n == name)
            .map(|(_, e)| e);
        let counts = |e: &Engine<SqliteStore>| {
            let s = e.store();
            (
                s.caller_thread_calls(),
                s.group_commits(),
                s.caller_thread_hold(),
            )
        };
        let before = engine.map(counts);
        let polls = PollTimes::of(&self.rt);
        let probe = LatenessProbe::start(self.rt.handle());
        bench();
        probe.report(&format!("{group}/{name}"));
        if let Some(line) = PollTimes::of(&self.rt).since(&polls).line() {
            eprintln!("polls {group}/{name}: {line}");
        }
        if let (Some(e), Some((calls, commits, hold))) = (engine, before) {
            let (calls2, commits2, hold2) = counts(e);
            let held = hold2.since(&hold);
            let show = |b: Option<HoldBound>| b.map_or("-".to_owned(), |b| b.to_string());
            let at = |q: f64| show(held.quantile(q));
            eprintln!(
                "calls {group}/{name}: {} on the caller's thread, {} commits; \
                 held the caller's thread p50 {}, p99 {}, p99.9 {}, max {}",
                calls2 - calls,
                commits2 - commits,
                at(0.5),
                at(0.99),
                at(0.999),
                show(held.max()),
            );
        }
    }

    /// Spawns `producers` tasks, each sending `each` single messages through `engine`.
    fn producers(
        &self,
        engine: &Engine<SqliteStore>,
        producers: usize,
        each: usize,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        (0..producers)
            .map(|_| {
                let (e, n) = (engine.clone(), self.n.clone());
                tokio::spawn(async move {
                    for _ in 0..each {
                        let b = body(n.fetch_add(1, Ordering::Relaxed) as u64);
                        e.send(Q, OutMessage::new(b)).await.expect("send");
                    }
                })
            })
            .collect()
    }

    fn next(&self) -> Vec<u8> {
        body(self.n.fetch_add(1, Ordering::Relaxed) as u64)
    }

    fn bare_insert(&self, rows: usize) {
        mqlite_benches::bare_insert(&self.bare, (0..rows).map(|_| self.next()));
    }

    fn bare_insert_tx(&self, rows: usize) {
        mqlite_benches::bare_insert_tx(&self.bare, (0..rows).map(|_| self.next()));
    }

    /// The bare drain loop ([`mqlite_benches::bare_drain`]).
    fn bare_drain(&self, max: usize) -> usize {
        mqlite_benches::bare_drain(&self.bare, max)
    }
}

fn configure(g: &mut BenchmarkGroup<'_, WallTime>, elements: u64) {
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(3));
    g.warm_up_time(Duration::from_secs(1));
    g.throughput(Throughput::Elements(elements));
}

/// One producer, one message per call: the store's send against an autocommit INSERT;
/// and the typed engine against the run-time (dyn) one.
fn single_send(c: &mut Criterion) {
    let w = world(Synchronous::Normal);
    let dynamic: Engine<DynStore> = w.rt.block_on(async {
        let dir = w._dir.path().join("dyn.db").display().to_string();
        let store = SqliteStore::open(SqliteOptions::new(dir).clock(SystemClock::shared()))
            .await
            .expect("open");
        mqlite_benches::engine_with_queue(DynStore::new(store), Q, QueueConfig::default()).await
    });
    let mut g = c.benchmark_group("single_send");
    configure(&mut g, 1);
    w.probed("single_send", "bare", || {
        g.bench_function("bare", |b| b.iter(|| w.bare_insert(1)));
    });
    for (name, engine) in w.stores() {
        w.probed("single_send", name, || {
            g.bench_function(name, |b| {
                b.iter_custom(|iters| {
                    w.rt.block_on(async {
                        let start = Instant::now();
                        for _ in 0..iters {
                            engine
                                .send(Q, OutMessage::new(w.next()))
                                .await
                                .expect("send");
                        }
                        start.elapsed()
                    })
                })
            });
        });
    }
    g.bench_function("mqlite-dyn", |b| {
        b.iter_custom(|iters| {
            w.rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    dynamic
                        .send(Q, OutMessage::new(w.next()))
                        .await
                        .expect("send");
                }
                start.elapsed()
            })
        })
    });
    g.finish();
}

/// 16 producers sending single messages at once (the store's group commit) against
/// the same number of autocommit INSERTs from one thread.
fn producers(c: &mut Criterion, group: &str, sync: Synchronous) {
    const PER: usize = 8;
    const PRODUCERS: usize = 16;
    let w = world(sync);
    let mut g = c.benchmark_group(group);
    configure(&mut g, (PER * PRODUCERS) as u64);
    // Bare runs on the bench's thread, the runtime idle: the probe's every tick wakes a
    // parked worker, the floor for the stores' runs below, whose workers mostly wait.
    w.probed(group, "bare", || {
        g.bench_function("bare", |b| b.iter(|| w.bare_insert(PER * PRODUCERS)));
    });
    for (name, engine) in w.stores() {
        w.probed(group, name, || {
            g.bench_function(name, |b| {
                b.iter_custom(|iters| {
                    w.rt.block_on(async {
                        let start = Instant::now();
                        for _ in 0..iters {
                            let tasks = w.producers(engine, PRODUCERS, PER);
                            for t in tasks {
                                t.await.expect("producer");
                            }
                        }
                        start.elapsed()
                    })
                })
            });
        });
    }
    g.finish();
}

fn producers_16(c: &mut Criterion) {
    producers(c, "producers_16", Synchronous::Normal);
}

fn producers_16_full(c: &mut Criterion) {
    producers(c, "producers_16_full", Synchronous::Full);
}

/// A batch of 64 in one call against 64 rows in one transaction.
fn send_batch_64(c: &mut Criterion) {
    let w = world(Synchronous::Normal);
    let mut g = c.benchmark_group("send_batch_64");
    configure(&mut g, 64);
    g.bench_function("bare", |b| b.iter(|| w.bare_insert_tx(64)));
    for (name, engine) in w.stores() {
        w.probed("send_batch_64", name, || {
            g.bench_function(name, |b| {
                b.iter_custom(|iters| {
                    w.rt.block_on(async {
                        let start = Instant::now();
                        for _ in 0..iters {
                            let batch = (0..64).map(|_| OutMessage::new(w.next())).collect();
                            engine.send_batch(Q, batch).await.expect("send");
                        }
                        start.elapsed()
                    })
                })
            });
        });
    }
    g.finish();
}

/// Receive 64 and complete them in one batch, against the bare drain loop; 64 fresh
/// messages are written before each timed drain, outside the measurement.
fn drain_64(c: &mut Criterion) {
    let w = world(Synchronous::Normal);
    let mut g = c.benchmark_group("drain_64");
    configure(&mut g, 64);
    g.bench_function("bare", |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            for _ in 0..iters {
                w.bare_insert_tx(64);
                let start = Instant::now();
                assert_eq!(w.bare_drain(64), 64);
                spent += start.elapsed();
            }
            spent
        })
    });
    for (name, engine) in w.stores() {
        w.probed("drain_64", name, || {
            g.bench_function(name, |b| {
                b.iter_custom(|iters| {
                    w.rt.block_on(async {
                        let mut spent = Duration::ZERO;
                        for _ in 0..iters {
                            engine.send_batch(Q, w.batch(64)).await.expect("fill");
                            let start = Instant::now();
                            let got = engine
                                .receive(Q, ReceiveOptions::batch(64))
                                .await
                                .expect("receive");
                            let locks: Vec<LockRef> = got.iter().map(LockRef::from).collect();
                            let done = engine.complete_batch(Q, &locks).await.expect("complete");
                            assert_eq!(done.len(), 64);
                            spent += start.elapsed();
                        }
                        spent
                    })
                })
            });
        });
    }
    g.finish();
}

/// One consumer receiving one message and completing it, again and again (64
/// messages written before each timed round, outside the measurement), against the
/// bare drain loop one row at a time.
fn drain_single(c: &mut Criterion) {
    let w = world(Synchronous::Normal);
    let mut g = c.benchmark_group("drain_single");
    configure(&mut g, 64);
    g.bench_function("bare", |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            for _ in 0..iters {
                w.bare_insert_tx(64);
                let start = Instant::now();
                for _ in 0..64 {
                    assert_eq!(w.bare_drain(1), 1);
                }
                spent += start.elapsed();
            }
            spent
        })
    });
    for (name, engine) in w.stores() {
        w.probed("drain_single", name, || {
            g.bench_function(name, |b| {
                b.iter_custom(|iters| {
                    w.rt.block_on(async {
                        let mut spent = Duration::ZERO;
                        for _ in 0..iters {
                            engine.send_batch(Q, w.batch(64)).await.expect("fill");
                            let start = Instant::now();
                            for _ in 0..64 {
                                let m = engine.receive_one(Q).await.expect("receive").expect("one");
                                engine.complete(Q, &m).await.expect("complete");
                            }
                            spent += start.elapsed();
                        }
                        spent
                    })
                })
            });
        });
    }
    // The same loop with each completion folded into the next receive
    // (`Engine::complete_and_receive`, promise 2.10): one transaction per message.
    let (_, engine) = w.stores().into_iter().next().expect("the shipped store");
    w.probed("drain_single", "mqlite_folded", || {
        g.bench_function("mqlite_folded", |b| {
            b.iter_custom(|iters| {
                w.rt.block_on(async {
                    let mut spent = Duration::ZERO;
                    for _ in 0..iters {
                        engine.send_batch(Q, w.batch(64)).await.expect("fill");
                        let start = Instant::now();
                        let mut held: Vec<LockRef> = Vec::new();
                        for _ in 0..64 {
                            let (_, got) = engine
                                .complete_and_receive(Q, &held, ReceiveOptions::default())
                                .await
                                .expect("complete and receive");
                            held = got.iter().map(LockRef::from).collect();
                            assert_eq!(held.len(), 1);
                        }
                        engine.complete_batch(Q, &held).await.expect("the last");
                        spent += start.elapsed();
                    }
                    spent
                })
            })
        });
    });
    g.finish();
}

/// The latency of one claim and its completion behind a backlog of 1,000 and of 200,000
/// plain messages (one more is sent after each, outside the measurement, so the
/// backlog keeps its size), against the bare drain loop of one row at the same backlog.
fn claim_complete_at_backlog(c: &mut Criterion) {
    for backlog in [1_000usize, 200_000] {
        let w = world(Synchronous::Normal);
        let group = format!("claim_complete_at_backlog/{backlog}");
        let mut g = c.benchmark_group(&group);
        configure(&mut g, 1);
        for chunk in (0..backlog).step_by(1_000) {
            let n = (backlog - chunk).min(1_000);
            w.bare_insert_tx(n);
            for (_, engine) in w.stores() {
                let batch = (0..n).map(|_| OutMessage::new(w.next())).collect();
                w.rt.block_on(engine.send_batch(Q, batch)).expect("fill");
            }
        }
        g.bench_function("bare", |b| {
            b.iter_custom(|iters| {
                let mut spent = Duration::ZERO;
                for _ in 0..iters {
                    let start = Instant::now();
                    assert_eq!(w.bare_drain(1), 1);
                    spent += start.elapsed();
                    w.bare_insert(1);
                }
                spent
            })
        });
        for (name, engine) in w.stores() {
            w.probed(&group, name, || {
                g.bench_function(name, |b| {
                    b.iter_custom(|iters| {
                        w.rt.block_on(async {
                            let mut spent = Duration::ZERO;
                            for _ in 0..iters {
                                let start = Instant::now();
                                let m = engine.receive_one(Q).await.expect("receive").expect("one");
                                engine.complete(Q, &m).await.expect("complete");
                                spent += start.elapsed();
                                engine
                                    .send(Q, OutMessage::new(w.next()))
                                    .await
                                    .expect("refill");
                            }
                            spent
                        })
                    })
                });
            });
        }
        g.finish();
    }
}

/// 4 producers and 4 consumers with single operations until 256 messages are sent,
/// received and completed (the round ends at the last completion, not when the idle
/// consumers' long-polls run out), against 256 autocommit INSERTs.
fn end_to_end_4x4(c: &mut Criterion) {
    const N: usize = 256;
    let w = world(Synchronous::Normal);
    let mut g = c.benchmark_group("end_to_end_4x4");
    configure(&mut g, N as u64);
    w.probed("end_to_end_4x4", "bare", || {
        g.bench_function("bare", |b| b.iter(|| w.bare_insert(N)));
    });
    for (name, engine) in w.stores() {
        w.probed("end_to_end_4x4", name, || {
            g.bench_function(name, |b| {
                b.iter_custom(|iters| {
                    w.rt.block_on(async {
                        let mut spent = Duration::ZERO;
                        for _ in 0..iters {
                            let start = Instant::now();
                            let done = Arc::new(AtomicUsize::new(0));
                            let (all_done, finished) = tokio::sync::oneshot::channel::<()>();
                            let all_done = Arc::new(std::sync::Mutex::new(Some(all_done)));
                            let producers = w.producers(engine, 4, N / 4);
                            let mut consumers = Vec::new();
                            for _ in 0..4 {
                                let (e, done) = ((*engine).clone(), done.clone());
                                let all_done = all_done.clone();
                                consumers.push(tokio::spawn(async move {
                                    loop {
                                        let options = ReceiveOptions {
                                            wait: Duration::from_millis(50),
                                            ..Default::default()
                                        };
                                        for m in e.receive(Q, options).await.expect("receive") {
                                            e.complete(Q, &m).await.expect("complete");
                                            if done.fetch_add(1, Ordering::Relaxed) + 1 == N
                                                && let Some(tx) =
                                                    all_done.lock().expect("signal").take()
                                            {
                                                let _ = tx.send(());
                                            }
                                        }
                                    }
                                }));
                            }
                            // The round ends with its last completion; the consumers
                            // then parked in a long-poll on the empty queue are
                            // stopped (a dropped receive takes nothing).
                            finished.await.expect("every message completed");
                            spent += start.elapsed();
                            for t in producers {
                                t.await.expect("producer");
                            }
                            for t in &consumers {
                                t.abort();
                            }
                            for t in consumers {
                                let _ = t.await;
                            }
                        }
                        spent
                    })
                })
            });
        });
    }
    g.finish();
}

/// The path users run: 4 producers sending single messages and one worker of
/// concurrency 4 with an empty handler, until 256 more messages are handled, against
/// 256 autocommit INSERTs. One worker serves the whole run, as in a service.
fn worker_end_to_end(c: &mut Criterion) {
    const N: usize = 256;
    let w = world(Synchronous::Normal);
    let mut g = c.benchmark_group("worker_end_to_end");
    configure(&mut g, N as u64);
    g.bench_function("bare", |b| b.iter(|| w.bare_insert(N)));
    for (name, engine) in w.stores() {
        let handled = Arc::new(AtomicUsize::new(0));
        let progress = Arc::new(tokio::sync::Notify::new());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let worker = {
            let (handled, progress) = (handled.clone(), progress.clone());
            let worker = engine
                .worker(Q, move |_m| {
                    handled.fetch_add(1, Ordering::SeqCst);
                    progress.notify_one();
                    async { Ok::<(), mqlite_engine::worker::HandlerError>(()) }
                })
                .concurrency(4);
            w.rt.spawn(worker.run_until(async {
                let _ = stopped.await;
            }))
        };
        w.probed("worker_end_to_end", name, || {
            g.bench_function(name, |b| {
                b.iter_custom(|iters| {
                    w.rt.block_on(async {
                        let mut spent = Duration::ZERO;
                        for _ in 0..iters {
                            let target = handled.load(Ordering::SeqCst) + N;
                            let start = Instant::now();
                            let producers = w.producers(engine, 4, N / 4);
                            loop {
                                let more = progress.notified();
                                tokio::pin!(more);
                                more.as_mut().enable();
                                if handled.load(Ordering::SeqCst) >= target {
                                    break;
                                }
                                more.await;
                            }
                            spent += start.elapsed();
                            for p in producers {
                                p.await.expect("producer");
                            }
                        }
                        spent
                    })
                })
            });
        });
        let _ = stop.send(());
        w.rt.block_on(worker).expect("worker").expect("report");
    }
    g.finish();
}

criterion_group!(
    benches,
    single_send,
    producers_16,
    send_batch_64,
    drain_64,
    drain_single,
    claim_complete_at_backlog,
    end_to_end_4x4,
    worker_end_to_end,
    producers_16_full
);
criterion_main!(benches);

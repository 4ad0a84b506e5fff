//! The libSQL store against a real sqld on loopback, beside a bare libsql client doing
//! the same work with the fewest statements it can, in the same run. Every statement is
//! one HTTP round trip; the round trips of each path are printed with the run and
//! recorded in docs/benchmark.md. Without sqld (scripts/install-sqld.sh) the group is
//! left out with the reason.
//!
//! `cargo bench -p mqlite-benches --bench libsql` (quick: add `-- --quick`). Groups:
//! send_single, send_batch_64, receive_complete, and producers_16 (16 concurrent
//! producers of 8 single sends each against one producer's 8, the store alone; the
//! run prints how many sends went in their group's shared request). Each path runs
//! under the lateness probe (`mqlite_kit::lateness`) on the world's runtime, printed as
//! `lateness libsql/<group>/<name>`.

use std::sync::atomic::Ordering;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use mqlite_benches::{LatenessProbe, body};
use mqlite_contract::{LockRef, OutMessage};
use mqlite_testbed::libsql::sqld_binary;

#[path = "libsql_world.rs"]
mod libsql_world;

use libsql_world::{Q, World, world};

fn libsql_paths(c: &mut Criterion) {
    if let Err(why) = sqld_binary() {
        eprintln!("libsql: left out: {why}");
        return;
    }
    let w = world();

    // The first operation after creating the queue reads its row; the counts are of
    // the steady state.
    w.trips(w.engine.send(Q, OutMessage::new(w.next())));
    let one = w.trips(w.engine.send(Q, OutMessage::new(w.next())));
    let batch: Vec<OutMessage> = (0..64).map(|_| OutMessage::new(w.next())).collect();
    let sixty_four = w.trips(w.engine.send_batch(Q, batch));
    let (r1, m) = w.trips_of(w.engine.receive_one(Q));
    let m = m.expect("receive").expect("one");
    let (c1, done) = w.trips_of(w.engine.complete_batch(Q, &[LockRef::from(&m)]));
    done.expect("complete");
    let cycle = r1 + c1;
    println!(
        "libsql round trips: send 1: mqlite {one}, bare 1; send 64: mqlite {sixty_four}, \
         bare 66; receive + complete: mqlite {cycle}, bare 2 (receive_one {r1} + \
         complete_batch of 1 {c1}, as timed below)"
    );

    let mut g = c.benchmark_group("libsql/send_single");
    g.throughput(Throughput::Elements(1));
    probed(&w, "libsql/send_single/mqlite", || {
        g.bench_function("mqlite", |b| {
            b.iter(|| {
                w.rt.block_on(w.engine.send(Q, OutMessage::new(w.next())))
                    .expect("send")
            });
        });
    });
    probed(&w, "libsql/send_single/bare", || {
        g.bench_function("bare", |b| b.iter(|| w.rt.block_on(w.bare_send(w.next()))));
    });
    g.finish();

    let mut g = c.benchmark_group("libsql/send_batch_64");
    g.throughput(Throughput::Elements(64));
    probed(&w, "libsql/send_batch_64/mqlite", || {
        g.bench_function("mqlite", |b| {
            b.iter(|| {
                let batch = (0..64).map(|_| OutMessage::new(w.next())).collect();
                w.rt.block_on(w.engine.send_batch(Q, batch)).expect("send")
            });
        });
    });
    probed(&w, "libsql/send_batch_64/bare", || {
        g.bench_function("bare", |b| {
            b.iter(|| {
                w.rt.block_on(w.bare_send_64((0..64).map(|_| w.next()).collect()))
            });
        });
    });
    g.finish();

    // Enough backlog on both sides for every receive below.
    let mut g = c.benchmark_group("libsql/receive_complete");
    g.throughput(Throughput::Elements(1));
    probed(&w, "libsql/receive_complete/mqlite", || {
        g.bench_function("mqlite", |b| {
            b.iter_custom(|iters| {
                w.rt.block_on(async {
                    for _ in 0..iters {
                        w.engine
                            .send(Q, OutMessage::new(w.next()))
                            .await
                            .expect("refill");
                    }
                    let start = std::time::Instant::now();
                    for _ in 0..iters {
                        let m = w
                            .engine
                            .receive_one(Q)
                            .await
                            .expect("receive")
                            .expect("one");
                        w.engine
                            .complete_batch(Q, &[LockRef::from(&m)])
                            .await
                            .expect("complete");
                    }
                    start.elapsed()
                })
            });
        });
    });
    probed(&w, "libsql/receive_complete/bare", || {
        g.bench_function("bare", |b| {
            b.iter_custom(|iters| {
                w.rt.block_on(async {
                    for _ in 0..iters {
                        w.bare_send(w.next()).await;
                    }
                    let start = std::time::Instant::now();
                    for _ in 0..iters {
                        w.bare_receive_complete().await;
                    }
                    start.elapsed()
                })
            });
        });
    });
    g.finish();

    // 16 producers sending single messages, against one producer: the target is 8 × one
    // (calls sharing a transaction over the network). Each producer sends PER_PRODUCER
    // messages one at a time, so 16 producers keep 16 calls waiting for the stream.
    const PER_PRODUCER: usize = 8;
    let mut g = c.benchmark_group("libsql/producers_16");
    let (sent, shared) = (
        w.engine.store().statements_sent(),
        w.engine.store().shared_requests(),
    );
    for producers in [1usize, 16] {
        g.throughput(Throughput::Elements((producers * PER_PRODUCER) as u64));
        probed(
            &w,
            &format!("libsql/producers_16/mqlite/{producers}"),
            || {
                g.bench_function(format!("mqlite/{producers}"), |b| {
                    b.iter(|| {
                        w.rt.block_on(async {
                            let tasks: Vec<_> = (0..producers)
                                .map(|_| {
                                    let (e, n) = (w.engine.clone(), w.n.clone());
                                    tokio::spawn(async move {
                                        for _ in 0..PER_PRODUCER {
                                            let b = body(n.fetch_add(1, Ordering::Relaxed) as u64);
                                            e.send(Q, OutMessage::new(b)).await.expect("send");
                                        }
                                    })
                                })
                                .collect();
                            for t in tasks {
                                t.await.expect("producer");
                            }
                        })
                    });
                });
            },
        );
    }
    println!(
        "libsql/producers_16: {} requests for the run's sends, {} of them in a shared request",
        w.engine.store().statements_sent() - sent,
        w.engine.store().shared_requests() - shared
    );
    g.finish();
    w.rt.block_on(w.engine.close());
}

/// Runs `bench` under the lateness probe on the world's runtime and prints it as
/// `label`.
fn probed(w: &World, label: &str, bench: impl FnOnce()) {
    let probe = LatenessProbe::start(w.rt.handle());
    bench();
    probe.report(label);
}

criterion_group!(benches, libsql_paths);
criterion_main!(benches);

//! The libSQL store against a real sqld on loopback, beside a bare libsql client doing
//! the same work with the fewest statements it can, in the same run. Every statement is
//! one HTTP round trip; the round trips of each path are printed with the run and
//! recorded in docs/benchmark.md. Without sqld (scripts/install-sqld.sh) the group is
//! left out with the reason.
//!
//! `cargo bench -p mqlite-benches --bench libsql` (quick: add `-- --quick`). Groups:
//! send_single, send_batch_64, receive_complete, and producers_16 (16 concurrent
//! producers of 8 single sends each against one producer's 8, the store alone; the
//! run prints how many sends went in their group's shared request).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use mqlite_benches::body;
use mqlite_contract::{LockRef, OutMessage, QueueConfig, SystemClock};
use mqlite_engine::Engine;
use mqlite_store_libsql::{LibsqlOptions, LibsqlStore};
use mqlite_testbed::libsql::{Sqld, sqld_binary};

const Q: &str = "q";

/// The bare side's table: the fixed queue-shaped table of docs/benchmark.md.
const BARE_SCHEMA: &str = "CREATE TABLE messages (id INTEGER PRIMARY KEY, queue TEXT,
    state TEXT, body BLOB, visible_at INTEGER, locked_until INTEGER, token BLOB,
    delivery_count INTEGER);
  CREATE INDEX active ON messages(queue, id) WHERE state = 'active'";
const BARE_INSERT: &str = "INSERT INTO messages (queue, state, body, visible_at, \
    locked_until, delivery_count) VALUES ('q', 'active', ?1, 0, 0, 0)";

struct World {
    rt: tokio::runtime::Runtime,
    _servers: (Sqld, Sqld),
    _dir: tempfile::TempDir,
    engine: Engine<LibsqlStore>,
    bare: libsql::Connection,
    n: Arc<AtomicUsize>,
}

fn world() -> World {
    let rt = mqlite_benches::runtime();
    let dir = tempfile::tempdir().expect("tempdir");
    let store_server = Sqld::start(&dir.path().join("store")).expect("sqld for the store");
    let bare_server = Sqld::start(&dir.path().join("bare")).expect("sqld for the bare side");
    let (engine, bare) = rt.block_on(async {
        let store =
            LibsqlStore::open(LibsqlOptions::new(store_server.url()).clock(SystemClock::shared()))
                .await
                .expect("open");
        let engine = mqlite_benches::engine_with_queue(store, Q, QueueConfig::default()).await;
        let bare = libsql::Builder::new_remote(bare_server.url().to_owned(), String::new())
            .build()
            .await
            .expect("bare client")
            .connect()
            .expect("bare connection");
        bare.execute_batch(BARE_SCHEMA).await.expect("bare schema");
        (engine, bare)
    });
    World {
        rt,
        _servers: (store_server, bare_server),
        _dir: dir,
        engine,
        bare,
        n: Arc::new(AtomicUsize::new(0)),
    }
}

impl World {
    fn next(&self) -> Vec<u8> {
        body(self.n.fetch_add(1, Ordering::Relaxed) as u64)
    }

    /// Round trips (statements) the store sent for `op`.
    fn trips<T>(&self, op: impl Future<Output = T>) -> u64 {
        self.trips_of(op).0
    }

    /// Round trips the store sent for `op`, and what it answered.
    fn trips_of<T>(&self, op: impl Future<Output = T>) -> (u64, T) {
        let before = self.engine.store().statements_sent();
        let out = self.rt.block_on(op);
        (self.engine.store().statements_sent() - before, out)
    }

    /// One autocommit INSERT: one round trip.
    async fn bare_send(&self, b: Vec<u8>) {
        self.bare.execute(BARE_INSERT, [b]).await.expect("insert");
    }

    /// BEGIN, 64 INSERTs, COMMIT: the bare client has no multi-row bind, so each row
    /// is a statement (66 round trips).
    async fn bare_send_64(&self, bodies: Vec<Vec<u8>>) {
        let tx = self.bare.transaction().await.expect("begin");
        for b in bodies {
            tx.execute(BARE_INSERT, [b]).await.expect("insert");
        }
        tx.commit().await.expect("commit");
    }

    /// A claim (UPDATE … RETURNING, autocommit) and a delete: two round trips.
    async fn bare_receive_complete(&self) {
        let mut rows = self
            .bare
            .query(
                "UPDATE messages SET state = 'locked', delivery_count = delivery_count + 1 \
                 WHERE id = (SELECT id FROM messages WHERE queue = 'q' AND state = 'active' \
                 ORDER BY id LIMIT 1) RETURNING id",
                (),
            )
            .await
            .expect("claim");
        let id: i64 = rows
            .next()
            .await
            .expect("row")
            .expect("a message")
            .get(0)
            .expect("id");
        drop(rows);
        self.bare
            .execute("DELETE FROM messages WHERE id = ?1", [id])
            .await
            .expect("delete");
    }
}

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
    g.bench_function("mqlite", |b| {
        b.iter(|| {
            w.rt.block_on(w.engine.send(Q, OutMessage::new(w.next())))
                .expect("send")
        });
    });
    g.bench_function("bare", |b| b.iter(|| w.rt.block_on(w.bare_send(w.next()))));
    g.finish();

    let mut g = c.benchmark_group("libsql/send_batch_64");
    g.throughput(Throughput::Elements(64));
    g.bench_function("mqlite", |b| {
        b.iter(|| {
            let batch = (0..64).map(|_| OutMessage::new(w.next())).collect();
            w.rt.block_on(w.engine.send_batch(Q, batch)).expect("send")
        });
    });
    g.bench_function("bare", |b| {
        b.iter(|| {
            w.rt.block_on(w.bare_send_64((0..64).map(|_| w.next()).collect()))
        });
    });
    g.finish();

    // Enough backlog on both sides for every receive below.
    let mut g = c.benchmark_group("libsql/receive_complete");
    g.throughput(Throughput::Elements(1));
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
    }
    println!(
        "libsql/producers_16: {} requests for the run's sends, {} of them in a shared request",
        w.engine.store().statements_sent() - sent,
        w.engine.store().shared_requests() - shared
    );
    g.finish();
    w.rt.block_on(w.engine.close());
}

criterion_group!(benches, libsql_paths);
criterion_main!(benches);

//! Batched writes against the bare engines, in the same run: a send of 64 messages of
//! 256 bytes through each registered store, beside 64 rows written in one transaction
//! straight into the same engine (redb: a table of u64 to bytes, every commit durable
//! like the store's; SQLite: the queue-shaped table of docs/benchmark.md, WAL +
//! NORMAL like the store's). The report is the ratio of the two.
//!
//! `cargo bench -p mqlite-benches --bench send_batch`

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use mqlite_benches::body;
use mqlite_contract::{OutMessage, QueueConfig, SystemClock};
use mqlite_tck::{Access, Typed};

const BATCH: usize = 64;

fn store_send_batch<A: Access>(c: &mut Criterion, store: &str, access: &A) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = rt.block_on(async {
        let store = access
            .open(dir.path(), SystemClock::shared())
            .await
            .expect("open");
        mqlite_benches::engine_with_queue(store, "q", QueueConfig::default()).await
    });
    let mut group = c.benchmark_group("send_batch_64");
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(3));
    let mut n = 0u64;
    group.bench_function(store, |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    let batch = (0..BATCH)
                        .map(|_| {
                            n += 1;
                            OutMessage::new(body(n))
                        })
                        .collect();
                    engine.send_batch("q", batch).await.expect("send");
                }
                start.elapsed()
            })
        })
    });
    group.finish();
    rt.block_on(engine.close());
}

fn bare_redb(c: &mut Criterion) {
    use redb::{Database, TableDefinition};
    const ROWS: TableDefinition<u64, &[u8]> = TableDefinition::new("rows");
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Database::create(dir.path().join("bare.redb")).expect("create");
    let mut group = c.benchmark_group("send_batch_64");
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(3));
    let mut n = 0u64;
    group.bench_function("bare-redb", |b| {
        b.iter(|| {
            let tx = db.begin_write().expect("begin");
            {
                let mut t = tx.open_table(ROWS).expect("table");
                for _ in 0..BATCH {
                    n += 1;
                    t.insert(n, body(n).as_slice()).expect("insert");
                }
            }
            tx.commit().expect("commit");
        })
    });
    group.finish();
}

fn bare_sqlite(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let conn = mqlite_benches::bare_sqlite(&dir.path().join("bare.db"), false);
    let mut group = c.benchmark_group("send_batch_64");
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(3));
    let mut n = 0u64;
    group.bench_function("bare-sqlite", |b| {
        b.iter(|| {
            mqlite_benches::bare_insert_tx(
                &conn,
                (0..BATCH).map(|_| {
                    n += 1;
                    body(n)
                }),
            );
        })
    });
    group.finish();
}

fn send_batch(c: &mut Criterion) {
    bare_sqlite(c);
    bare_redb(c);
    mqlite_testbed::with_each_available_store!(name, factory => store_send_batch(c, name, &Typed(factory)));
}

criterion_group!(benches, send_batch);
criterion_main!(benches);

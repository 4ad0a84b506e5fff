//! Batched writes against the bare engines, in the same run: a send of 64 messages of
//! 256 bytes through each registered store, beside 64 rows written in one transaction
//! straight into the same engine (redb: a table of u64 to bytes, every commit durable
//! like the store's; SQLite: the queue-shaped table of docs/benchmark.md, WAL +
//! NORMAL like the store's). The report is the ratio of the two.
//!
//! `cargo bench -p mqlite-benches --bench send_batch`

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use mqlite_engine_core::{OutMessage, QueueConfig, SystemClock};
use mqlite_tck::{Access, Typed};

const BATCH: usize = 64;
const BODY: usize = 256;

fn body(i: u64) -> Vec<u8> {
    let mut b = format!("{i}/").into_bytes();
    b.resize(BODY, b'x');
    b
}

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
    let conn = rusqlite::Connection::open(dir.path().join("bare.db")).expect("open");
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;
         CREATE TABLE messages (id INTEGER PRIMARY KEY, queue TEXT, state TEXT, body BLOB,
             visible_at INTEGER, locked_until INTEGER, token BLOB, delivery_count INTEGER);
         CREATE INDEX active ON messages(queue, id) WHERE state = 'active';",
    )
    .expect("schema");
    let mut group = c.benchmark_group("send_batch_64");
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(3));
    let mut n = 0u64;
    group.bench_function("bare-sqlite", |b| {
        b.iter(|| {
            let tx = conn.unchecked_transaction().expect("begin");
            {
                let mut stmt = tx
                    .prepare_cached(
                        "INSERT INTO messages (queue, state, body, visible_at, locked_until, \
                         delivery_count) VALUES ('q', 'active', ?1, 0, 0, 0)",
                    )
                    .expect("prepare");
                for _ in 0..BATCH {
                    n += 1;
                    stmt.execute([body(n)]).expect("insert");
                }
            }
            tx.commit().expect("commit");
        })
    });
    group.finish();
}

fn send_batch(c: &mut Criterion) {
    bare_sqlite(c);
    bare_redb(c);
    mqlite_stores::with_each_store!(name, factory => store_send_batch(c, name, &Typed(factory)));
}

criterion_group!(benches, send_batch);
criterion_main!(benches);

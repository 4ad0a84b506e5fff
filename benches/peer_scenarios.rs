//! mqlite in the peers' scenarios (benches/peers/README.md), printed as the peers print
//! theirs, so that `benches/peers/run.sh` can join them into one table: N jobs of 256
//! bytes on a fresh SQLite file (WAL + NORMAL, the store as shipped, background loops
//! on), one JSON line per scenario on stdout.
//!
//! `cargo run --release -p mqlite-benches --example peer_scenarios -- --n 20000 [--only end_to_end]`
//!
//! - `enqueue_single`: N sends from one producer, each awaited;
//! - `enqueue_bulk`: N messages through `send_batch` in batches of 64;
//! - `end_to_end`: 4 producers send single messages while 4 consumers receive one and
//!   complete it, until all N are completed (first send to last completion);
//! - `worker_end_to_end`: the same 4 producers, and one worker of concurrency 4 with
//!   an empty handler (completions coalesced), until all N are completed;
//! - `end_to_end_workers`: the same 4 producers, and 4 workers of concurrency 1 that
//!   prefetch nothing (`Worker::prefetch(0)`), each taking one message at a time and
//!   completing it in the call that takes its next: the form of the peers' own
//!   `end_to_end` (BullMQ's 4 `Worker`s of concurrency 1 complete a job and fetch the
//!   next in one call), until all N are completed.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mqlite_benches::body;
use mqlite_contract::{OutMessage, QueueConfig, ReceiveOptions};
use mqlite_engine::{Engine, EngineOptions};
use mqlite_store_sqlite::{SqliteOptions, SqliteStore};

const Q: &str = "jobs";
const PRODUCERS: usize = 4;
const CONSUMERS: usize = 4;
const BATCH: usize = 64;

async fn fresh(dir: &tempfile::TempDir, name: &str) -> Engine<SqliteStore> {
    let path = dir.path().join(name).display().to_string();
    let store = SqliteStore::open(SqliteOptions::new(path))
        .await
        .expect("open");
    let mq = Engine::with_store(store, EngineOptions::default())
        .await
        .expect("engine");
    mq.create_queue(Q, QueueConfig::default())
        .await
        .expect("queue");
    mq
}

fn report(scenario: &str, n: usize, secs: f64, extra: &str) {
    println!(
        "{{\"peer\":\"mqlite\",\"scenario\":\"{scenario}\",\"n\":{n},\"jobs_per_sec\":{},\"secs\":{secs:.3}{extra}}}",
        (n as f64 / secs).round() as u64
    );
}

/// Spawns the producers: `n` single sends in all.
fn producers(mq: &Engine<SqliteStore>, n: usize) -> Vec<tokio::task::JoinHandle<()>> {
    let per = n.div_ceil(PRODUCERS);
    (0..PRODUCERS)
        .map(|p| {
            let mq = mq.clone();
            let count = per.min(n.saturating_sub(p * per));
            tokio::spawn(async move {
                for i in 0..count {
                    let b = body((p * per + i) as u64);
                    mq.send(Q, OutMessage::new(b)).await.expect("send");
                }
            })
        })
        .collect()
}

async fn enqueue_single(dir: &tempfile::TempDir, n: usize) {
    let mq = fresh(dir, "single.db").await;
    let start = Instant::now();
    let task = {
        let mq = mq.clone();
        tokio::spawn(async move {
            for i in 0..n {
                mq.send(Q, OutMessage::new(body(i as u64)))
                    .await
                    .expect("send");
            }
        })
    };
    task.await.expect("producer");
    report("enqueue_single", n, start.elapsed().as_secs_f64(), "");
    mq.close().await;
}

async fn enqueue_bulk(dir: &tempfile::TempDir, n: usize) {
    let mq = fresh(dir, "bulk.db").await;
    let start = Instant::now();
    let task = {
        let mq = mq.clone();
        tokio::spawn(async move {
            for first in (0..n).step_by(BATCH) {
                let batch = (first..(first + BATCH).min(n))
                    .map(|i| OutMessage::new(body(i as u64)))
                    .collect();
                mq.send_batch(Q, batch).await.expect("send");
            }
        })
    };
    task.await.expect("producer");
    report(
        "enqueue_bulk",
        n,
        start.elapsed().as_secs_f64(),
        ",\"batch\":64",
    );
    mq.close().await;
}

async fn end_to_end(dir: &tempfile::TempDir, n: usize) {
    let mq = fresh(dir, "e2e.db").await;
    let done = Arc::new(AtomicUsize::new(0));
    let (finished, all_done) = tokio::sync::watch::channel(false);
    let consumers: Vec<_> = (0..CONSUMERS)
        .map(|_| {
            let (mq, done, finished) = (mq.clone(), done.clone(), finished.clone());
            tokio::spawn(async move {
                let options = ReceiveOptions {
                    wait: Duration::from_millis(500),
                    ..Default::default()
                };
                while done.load(Ordering::SeqCst) < n {
                    for m in mq.receive(Q, options.clone()).await.expect("receive") {
                        mq.complete(Q, &m).await.expect("complete");
                        if done.fetch_add(1, Ordering::SeqCst) + 1 == n {
                            let _ = finished.send(true);
                        }
                    }
                }
            })
        })
        .collect();
    let (calls0, commits0) = (mq.store().caller_thread_calls(), mq.store().group_commits());
    let start = Instant::now();
    let sending = producers(&mq, n);
    let mut all_done = all_done;
    all_done.wait_for(|d| *d).await.expect("all completed");
    let secs = start.elapsed().as_secs_f64();
    for p in sending {
        p.await.expect("producer");
    }
    for c in consumers {
        c.abort();
        let _ = c.await;
    }
    eprintln!(
        "end_to_end: {} calls on the callers' threads, {} commits",
        mq.store().caller_thread_calls() - calls0,
        mq.store().group_commits() - commits0
    );
    report("end_to_end", n, secs, ",\"producers\":4,\"workers\":4");
    mq.close().await;
}

async fn worker_end_to_end(dir: &tempfile::TempDir, n: usize) {
    let mq = fresh(dir, "worker.db").await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = mq
        .worker(Q, |_m| async { Ok(()) })
        .concurrency(CONSUMERS)
        .run_until(async {
            let _ = stopped.await;
        });
    let worker = tokio::spawn(worker);
    let start = Instant::now();
    let sending = producers(&mq, n);
    for p in sending {
        p.await.expect("producer");
    }
    // Completed means gone from the queue: wait for the worker to empty it.
    until_drained(&mq).await;
    let secs = start.elapsed().as_secs_f64();
    let _ = stop.send(());
    let report_ = worker.await.expect("worker").expect("report");
    assert_eq!(report_.completed, n as u64, "every message completed once");
    report(
        "worker_end_to_end",
        n,
        secs,
        ",\"producers\":4,\"workers\":\"1 x concurrency 4\"",
    );
    mq.close().await;
}

/// Waits until the queue is empty: every message sent was completed (the workers' own
/// scenarios have no completion callback to stop the clock at).
async fn until_drained(mq: &Engine<SqliteStore>) {
    loop {
        let stats = mq.stats(Q).await.expect("stats");
        if stats.total == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn end_to_end_workers(dir: &tempfile::TempDir, n: usize) {
    let mq = fresh(dir, "e2e_workers.db").await;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let workers: Vec<_> = (0..CONSUMERS)
        .map(|_| {
            let mut stopped = stopped.clone();
            tokio::spawn(
                mq.worker(Q, |_m| async { Ok(()) })
                    .concurrency(1)
                    .prefetch(0)
                    .run_until(async move {
                        let _ = stopped.wait_for(|s| *s).await;
                    }),
            )
        })
        .collect();
    let start = Instant::now();
    let sending = producers(&mq, n);
    for p in sending {
        p.await.expect("producer");
    }
    until_drained(&mq).await;
    let secs = start.elapsed().as_secs_f64();
    let _ = stop.send(true);
    let mut completed = 0;
    for w in workers {
        completed += w.await.expect("worker").expect("report").completed;
    }
    assert_eq!(completed, n as u64, "every message completed once");
    report(
        "end_to_end_workers",
        n,
        secs,
        ",\"producers\":4,\"workers\":\"4 x concurrency 1, no prefetch\"",
    );
    mq.close().await;
}

fn main() {
    let mut n = std::env::var("N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000usize);
    let mut only: Option<String> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--n" => n = args.next().and_then(|v| v.parse().ok()).expect("--n N"),
            "--only" => only = Some(args.next().expect("--only SCENARIO")),
            _ => {}
        }
    }
    let runs = |name: &str| only.as_deref().is_none_or(|o| o == name);
    let rt = mqlite_benches::runtime();
    let dir = tempfile::tempdir().expect("tempdir");
    rt.block_on(async {
        if runs("enqueue_single") {
            enqueue_single(&dir, n).await;
        }
        if runs("enqueue_bulk") {
            enqueue_bulk(&dir, n).await;
        }
        if runs("end_to_end") {
            end_to_end(&dir, n).await;
        }
        if runs("worker_end_to_end") {
            worker_end_to_end(&dir, n).await;
        }
        if runs("end_to_end_workers") {
            end_to_end_workers(&dir, n).await;
        }
    });
}

//! Benchmark of apalis 1.0 with its SQLite storage (`apalis-sqlite`), a peer of mqlite.
//!
//! Scenarios (each on a fresh SQLite file in its own temporary directory):
//! - `enqueue_single`: N x `TaskSink::push` from one producer.
//! - `enqueue_bulk`: N jobs through `TaskSink::push_bulk` in batches of 64.
//! - `end_to_end`: 4 producer tasks `push` N jobs in total while 4 workers
//!   (`WorkerBuilder`, no-op handler) process them; first push -> last completion
//!   recorded in the database.
//!
//! Prints one JSON line per scenario on stdout:
//! `{"peer":"apalis","scenario":"enqueue_single","n":20000,"jobs_per_sec":...}`
//!
//! With `--variants`, also `end_to_end` at 10 ms and 100 ms wake-ups, and with apalis's
//! own `poll_with_interval` at 100 ms and 1 ms (see [`Rearm`]).
//!
//! Usage: `mqlite-peer-apalis [--n 20000] [--variants]` (or `N=20000` in the environment).

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use apalis::prelude::*;
use apalis_sqlite::{Config, SqliteConnectOptions, SqlitePool, SqlitePoolOptions, SqliteStorage};
use sqlx::sqlite::{SqliteJournalMode, SqliteSynchronous};

const QUEUE: &str = "bench";
const BATCH: usize = 64;
const PRODUCERS: usize = 4;
const WORKERS: usize = 4;
/// apalis-sqlite has no default wake-up: a worker whose fetch came back empty sleeps
/// until something wakes it (its heartbeat, every 30 s, at the latest). We wake each
/// worker every POLL_MS, the lowest interval tokio's timer resolves.
const POLL_MS: u64 = 1;
/// How long a connection waits for SQLite's write lock before failing with
/// SQLITE_BUSY ("database is locked"). sqlx's default is 5 s; with it, producers of
/// `end_to_end` at N = 20,000 fail with SQLITE_BUSY once the workers' ack transactions
/// grow long (see README.md), so the benchmark waits longer.
const BUSY_TIMEOUT: Duration = Duration::from_secs(60);
/// Give up on an end-to-end run after this long.
const TIMEOUT: Duration = Duration::from_secs(600);

type Payload = String;

fn payload() -> Payload {
    // 256-byte payload; apalis's JSON codec stores it as 258 bytes.
    "x".repeat(256)
}

/// A pool over `file` with WAL and synchronous=NORMAL on every connection.
async fn pool(file: &Path) -> SqlitePool {
    let opts = SqliteConnectOptions::from_str(&format!("sqlite://{}", file.display()))
        .expect("sqlite url")
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(BUSY_TIMEOUT);
    // sqlx's default pool size (10 connections) is kept.
    SqlitePoolOptions::new()
        .connect_with(opts)
        .await
        .expect("open pool")
}

/// Runs apalis's migrations on a throwaway one-connection pool, so that the
/// `PRAGMA synchronous = OFF` which `SqliteStorage::setup` issues lands on a
/// connection the benchmark does not use.
async fn setup(file: &Path) {
    let opts = SqliteConnectOptions::from_str(&format!("sqlite://{}", file.display()))
        .expect("sqlite url")
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal);
    let p = SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(opts)
        .await
        .expect("open setup pool");
    SqliteStorage::setup(&p)
        .await
        .expect("apalis-sqlite migrations");
    p.close().await;
}

fn storage(pool: &SqlitePool) -> SqliteStorage<Payload> {
    SqliteStorage::new(pool).with_config(Config::default().queue(QUEUE))
}

async fn count(pool: &SqlitePool, status: Option<&str>) -> i64 {
    let (n,): (i64,) = match status {
        Some(s) => sqlx::query_as("SELECT COUNT(*) FROM Jobs WHERE job_type = ?1 AND status = ?2")
            .bind(QUEUE)
            .bind(s)
            .fetch_one(pool)
            .await
            .expect("count"),
        None => sqlx::query_as("SELECT COUNT(*) FROM Jobs WHERE job_type = ?1")
            .bind(QUEUE)
            .fetch_one(pool)
            .await
            .expect("count"),
    };
    n
}

struct Fresh {
    _dir: tempfile::TempDir,
    file: std::path::PathBuf,
}

async fn fresh() -> Fresh {
    let dir = tempfile::Builder::new()
        .prefix("apalis-bench-")
        .tempdir()
        .expect("tempdir");
    let file = dir.path().join("queue.db");
    setup(&file).await;
    Fresh { _dir: dir, file }
}

async fn enqueue_single(n: usize) -> (f64, String) {
    let f = fresh().await;
    let pool = pool(&f.file).await;
    let mut s = storage(&pool);
    let p = payload();
    let t0 = Instant::now();
    for _ in 0..n {
        s.push(p.clone()).await.expect("push");
    }
    let secs = t0.elapsed().as_secs_f64();
    assert_eq!(
        count(&pool, None).await as usize,
        n,
        "enqueue_single stored"
    );
    pool.close().await;
    (secs, String::new())
}

async fn enqueue_bulk(n: usize) -> (f64, String) {
    let f = fresh().await;
    let pool = pool(&f.file).await;
    let mut s = storage(&pool);
    let p = payload();
    let batches: Vec<Vec<Payload>> = (0..n)
        .step_by(BATCH)
        .map(|i| vec![p.clone(); BATCH.min(n - i)])
        .collect();
    let t0 = Instant::now();
    for batch in batches {
        s.push_bulk(batch).await.expect("push_bulk");
    }
    let secs = t0.elapsed().as_secs_f64();
    assert_eq!(count(&pool, None).await as usize, n, "enqueue_bulk stored");
    pool.close().await;
    (secs, format!(r#","batch":{BATCH}"#))
}

static HANDLED: AtomicUsize = AtomicUsize::new(0);
static TARGET: AtomicUsize = AtomicUsize::new(usize::MAX);
static ALL_HANDLED: OnceLock<tokio::sync::Notify> = OnceLock::new();

async fn no_op(_job: Payload) -> Result<(), BoxDynError> {
    if HANDLED.fetch_add(1, Ordering::SeqCst) + 1 == TARGET.load(Ordering::SeqCst) {
        ALL_HANDLED.get().expect("notify").notify_one();
    }
    Ok(())
}

/// An interval wake-up that re-arms its timer *and polls it* when it fires.
///
/// apalis-core 1.0.0's own `IntervalStrategy` (behind `poll_with_interval`) replaces a
/// fired timer with a new one without polling it. When the fetch made in that same
/// `poll_next` comes back empty, no timer holds the worker's waker, and the worker
/// sleeps until its next heartbeat (30 s by default); the shorter the interval, the
/// likelier (here: three of five runs of 2,000 jobs at 1 ms and 10 ms took 30 s
/// instead of about 1.5 s).
/// This strategy is the same interval without that flaw, plugged in through the public
/// `poll_with_strategy`.
struct Rearm {
    every: Duration,
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Rearm {
    fn new(every: Duration) -> Self {
        Self { every, timer: None }
    }
}

impl PollStrategy for Rearm {
    fn poll_drive(&mut self, cx: &mut Context<'_>, _: &PollSnapshot) -> Poll<Option<()>> {
        let mut fired = false;
        loop {
            let every = self.every;
            let timer = self
                .timer
                .get_or_insert_with(|| Box::pin(tokio::time::sleep(every)));
            match timer.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    fired = true;
                    self.timer = None;
                }
                Poll::Pending => break,
            }
        }
        if fired {
            Poll::Ready(Some(()))
        } else {
            Poll::Pending
        }
    }
}

/// How the end-to-end workers are woken when their fetch comes back empty.
#[derive(Clone, Copy)]
enum Wake {
    /// [`Rearm`] every `ms` milliseconds (the reported `end_to_end`).
    Rearm(u64),
    /// apalis's own `poll_with_interval(ms)`, as shipped.
    Stock(u64),
}

async fn end_to_end(n: usize, wake: Wake) -> (f64, String) {
    let f = fresh().await;
    let pool = pool(&f.file).await;
    HANDLED.store(0, Ordering::SeqCst);
    TARGET.store(n, Ordering::SeqCst);
    let all_handled = ALL_HANDLED.get_or_init(tokio::sync::Notify::new);

    let mut workers = Vec::new();
    for w in 0..WORKERS {
        let name = format!("bench-worker-{w}");
        // Each worker: its own SqliteStorage handle (default Config: fetches up to 10
        // jobs at a time, locks them, acks in batches) and one job at a time.
        let run = match wake {
            Wake::Rearm(ms) => {
                let backend =
                    storage(&pool).poll_with_strategy(Rearm::new(Duration::from_millis(ms)));
                let worker = WorkerBuilder::new(name)
                    .backend(backend)
                    .concurrency(1)
                    .build(no_op);
                tokio::spawn(worker.run())
            }
            Wake::Stock(ms) => {
                let backend = storage(&pool).poll_with_interval(Duration::from_millis(ms));
                let worker = WorkerBuilder::new(name)
                    .backend(backend)
                    .concurrency(1)
                    .build(no_op);
                tokio::spawn(worker.run())
            }
        };
        workers.push(run);
    }
    // Let the workers register and reach their idle polling before the clock starts.
    tokio::time::sleep(Duration::from_millis(200)).await;

    let go = Arc::new(tokio::sync::Barrier::new(PRODUCERS + 1));
    let mut producers = Vec::new();
    for p in 0..PRODUCERS {
        let share = n / PRODUCERS + usize::from(p < n % PRODUCERS);
        let mut s = storage(&pool);
        let go = go.clone();
        producers.push(tokio::spawn(async move {
            let body = payload();
            go.wait().await;
            for _ in 0..share {
                if let Err(e) = s.push(body.clone()).await {
                    // Fail the whole run at once rather than wait for the timeout.
                    eprintln!("end_to_end: producer push failed: {e}");
                    std::process::exit(1);
                }
            }
        }));
    }
    let t0 = Instant::now();
    go.wait().await;
    if tokio::time::timeout(TIMEOUT, all_handled.notified())
        .await
        .is_err()
    {
        panic!(
            "end_to_end: only {} of {n} jobs handled after {TIMEOUT:?}",
            HANDLED.load(Ordering::SeqCst)
        );
    }
    let handled_secs = t0.elapsed().as_secs_f64();
    // Completions reach the database in batches after the handler returns; the clock
    // stops when the last one is recorded as Done.
    while (count(&pool, Some("Done")).await as usize) < n {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let secs = t0.elapsed().as_secs_f64();
    for p in producers {
        p.await.expect("producer");
    }
    for w in workers {
        w.abort();
    }
    pool.close().await;
    let (poll_ms, strategy) = match wake {
        Wake::Rearm(ms) => (ms, "rearming interval"),
        Wake::Stock(ms) => (ms, "poll_with_interval"),
    };
    (
        secs,
        format!(
            r#","producers":{PRODUCERS},"workers":{WORKERS},"poll_ms":{poll_ms},"wake":"{strategy}","handled_jobs_per_sec":{}"#,
            (n as f64 / handled_secs).round()
        ),
    )
}

fn parse_args() -> (usize, bool) {
    let mut n: usize = std::env::var("N")
        .ok()
        .map(|v| v.parse().expect("N must be a positive integer"))
        .unwrap_or(20_000);
    let mut variants = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--n" {
            n = args
                .next()
                .expect("--n needs a value")
                .parse()
                .expect("--n");
        } else if let Some(v) = a.strip_prefix("--n=") {
            n = v.parse().expect("--n");
        } else if a == "--variants" {
            variants = true;
        } else {
            panic!("unknown argument {a}");
        }
    }
    assert!(n > 0, "n must be positive");
    (n, variants)
}

fn emit(scenario: &str, n: usize, (secs, extra): (f64, String)) {
    println!(
        r#"{{"peer":"apalis","scenario":"{scenario}","n":{n},"jobs_per_sec":{},"secs":{:.3}{extra}}}"#,
        (n as f64 / secs).round(),
        secs
    );
}

#[tokio::main]
async fn main() {
    let (n, variants) = parse_args();
    emit("enqueue_single", n, enqueue_single(n).await);
    emit("enqueue_bulk", n, enqueue_bulk(n).await);
    emit("end_to_end", n, end_to_end(n, Wake::Rearm(POLL_MS)).await);
    if variants {
        emit(
            "end_to_end_poll_10ms",
            n,
            end_to_end(n, Wake::Rearm(10)).await,
        );
        emit(
            "end_to_end_poll_100ms",
            n,
            end_to_end(n, Wake::Rearm(100)).await,
        );
        emit(
            "end_to_end_stock_interval_100ms",
            n,
            end_to_end(n, Wake::Stock(100)).await,
        );
        emit(
            "end_to_end_stock_interval_1ms",
            n,
            end_to_end(n, Wake::Stock(POLL_MS)).await,
        );
    }
}

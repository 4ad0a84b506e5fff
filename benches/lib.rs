//! Benchmarks of mqlite live in this crate's bench targets; see docs/benchmark.md. What
//! they share lives here.

use mqlite_contract::{QueueConfig, Store};
use mqlite_engine::{Engine, EngineOptions};

/// An engine over `store` with the background loops off (a bench drives everything it
/// measures) and the queue `queue` created with `config`.
pub async fn engine_with_queue<S: Store>(store: S, queue: &str, config: QueueConfig) -> Engine<S> {
    let options = EngineOptions {
        background: false,
        ..Default::default()
    };
    let engine = Engine::with_store(store, options).await.expect("engine");
    engine.create_queue(queue, config).await.expect("queue");
    engine
}

/// The runtime every bench runs its engine on: two worker threads, as many as the
/// project machine has cores. Its workers note when they wake from parking, so that the
/// lateness probe splits a late tick into the worker's wake-up and its queue
/// ([`mqlite_kit::lateness::unparked`]). Built with `RUSTFLAGS="--cfg tokio_unstable"`, it also
/// counts how long each task poll held its worker ([`PollTimes`]).
pub fn runtime() -> tokio::runtime::Runtime {
    shm_hold_from_env();
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder
        .worker_threads(2)
        .enable_all()
        .on_thread_unpark(mqlite_kit::lateness::unparked);
    #[cfg(tokio_unstable)]
    builder
        .enable_metrics_poll_time_histogram()
        .metrics_poll_time_histogram_configuration(tokio::runtime::HistogramConfiguration::linear(
            POLL_BUCKET,
            POLL_BUCKETS,
        ));
    builder.build().expect("runtime")
}

/// `MQLITE_BENCH_SHM_HOLD_MS`, when set, is how long the SQLite store's VFS keeps the
/// WAL index's locks after a transaction ([`mqlite_sqlite_vfs::shm::set_hold`]; 0: not
/// at all, as SQLite's own VFS): one binary measures both ways, alternated.
fn shm_hold_from_env() {
    if let Some(ms) = std::env::var("MQLITE_BENCH_SHM_HOLD_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        mqlite_sqlite_vfs::shm::set_hold(std::time::Duration::from_millis(ms));
    }
}

/// The width of a bucket of [`PollTimes`], in µs.
const POLL_BUCKET_US: u128 = 250;
/// [`POLL_BUCKET_US`] as a duration, for tokio.
#[cfg(tokio_unstable)]
const POLL_BUCKET: std::time::Duration = std::time::Duration::from_micros(POLL_BUCKET_US as u64);
/// How many buckets [`PollTimes`] counts: the last holds every poll of 1.75 ms and more.
#[cfg(tokio_unstable)]
const POLL_BUCKETS: usize = 8;

/// How long the runtime's task polls held its workers, counted by tokio in buckets of
/// 250 µs: the time a task held an executor thread, which the lateness probe also pays
/// for when it waits behind it. Only in a build with `--cfg tokio_unstable` (tokio's
/// own metric); otherwise empty. Two snapshots subtract ([`PollTimes::since`]).
#[derive(Debug, Clone, Default)]
pub struct PollTimes {
    /// Polls per bucket, all workers together.
    pub counts: Vec<u64>,
}

impl PollTimes {
    /// The counts so far on `rt`.
    pub fn of(rt: &tokio::runtime::Runtime) -> Self {
        #[cfg(tokio_unstable)]
        {
            let m = rt.metrics();
            let counts = (0..m.poll_time_histogram_num_buckets())
                .map(|b| {
                    (0..m.num_workers())
                        .map(|w| m.poll_time_histogram_bucket_count(w, b))
                        .sum()
                })
                .collect();
            PollTimes { counts }
        }
        #[cfg(not(tokio_unstable))]
        {
            let _ = rt;
            PollTimes::default()
        }
    }

    /// The polls counted since `earlier`.
    pub fn since(&self, earlier: &PollTimes) -> PollTimes {
        PollTimes {
            counts: self
                .counts
                .iter()
                .enumerate()
                .map(|(i, c)| c - earlier.counts.get(i).copied().unwrap_or(0))
                .collect(),
        }
    }

    /// One line for a report: the polls, those of 1 ms and more, and the bucket of the
    /// longest; None when the build does not count them.
    pub fn line(&self) -> Option<String> {
        if self.counts.is_empty() {
            return None;
        }
        let total: u64 = self.counts.iter().sum();
        let over_1ms: u64 = self
            .counts
            .iter()
            .skip((1000 / POLL_BUCKET_US) as usize)
            .sum();
        let longest = self
            .counts
            .iter()
            .rposition(|&c| c > 0)
            .map_or(0, |b| b as u128 * POLL_BUCKET_US);
        Some(format!(
            "{total} task polls, {over_1ms} of 1 ms or more, the longest in the bucket from {longest} µs"
        ))
    }
}

/// Bytes of a benchmark message body.
pub const BODY: usize = 256;

/// The body of message `i`: unique, [`BODY`] bytes.
pub fn body(i: u64) -> Vec<u8> {
    let mut b = format!("{i}/").into_bytes();
    b.resize(BODY, b'x');
    b
}

/// The bare side every bench measures against (docs/benchmark.md): the fixed
/// queue-shaped table with one partial index on active rows, in a WAL database at
/// `path`, `synchronous` NORMAL, or FULL when `full`.
pub fn bare_sqlite(path: &std::path::Path, full: bool) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(path).expect("open the bare database");
    let sync = if full { "FULL" } else { "NORMAL" };
    conn.execute_batch(&format!(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = {sync};
         CREATE TABLE messages (id INTEGER PRIMARY KEY, queue TEXT, state TEXT, body BLOB,
             visible_at INTEGER, locked_until INTEGER, token BLOB, delivery_count INTEGER);
         CREATE INDEX active ON messages(queue, id) WHERE state = 'active';"
    ))
    .expect("the bare schema");
    conn
}

/// Inserts one active message per body into the bare table, through one prepared
/// statement, inside whatever transaction is open (none: each row autocommits).
pub fn bare_insert(conn: &rusqlite::Connection, bodies: impl IntoIterator<Item = Vec<u8>>) {
    let mut stmt = conn
        .prepare_cached(
            "INSERT INTO messages (queue, state, body, visible_at, locked_until, \
             delivery_count) VALUES ('q', 'active', ?1, 0, 0, 0)",
        )
        .expect("prepare");
    for b in bodies {
        stmt.execute([b]).expect("insert");
    }
}

/// Inserts `bodies` into the bare table in one transaction.
pub fn bare_insert_tx(conn: &rusqlite::Connection, bodies: impl IntoIterator<Item = Vec<u8>>) {
    let tx = conn.unchecked_transaction().expect("begin");
    bare_insert(conn, bodies);
    tx.commit().expect("commit");
}

/// The bare drain loop: one UPDATE … IN (SELECT … LIMIT `max`) RETURNING transaction,
/// then one DELETE transaction for what it returned; the number of rows drained.
pub fn bare_drain(conn: &rusqlite::Connection, max: usize) -> usize {
    let tx = conn.unchecked_transaction().expect("begin");
    let ids: Vec<i64> = {
        let mut stmt = tx
            .prepare_cached(
                "UPDATE messages SET state = 'locked', locked_until = 1, token = ?1, \
                 delivery_count = delivery_count + 1 WHERE id IN (SELECT id FROM messages \
                 WHERE queue = 'q' AND state = 'active' ORDER BY id LIMIT ?2) RETURNING id, body",
            )
            .expect("prepare");
        stmt.query_map(rusqlite::params![vec![7u8; 16], max as i64], |r| {
            let _: Vec<u8> = r.get(1)?;
            r.get(0)
        })
        .expect("claim")
        .collect::<rusqlite::Result<_>>()
        .expect("rows")
    };
    tx.commit().expect("commit");
    let tx = conn.unchecked_transaction().expect("begin");
    {
        let mut del = tx
            .prepare_cached("DELETE FROM messages WHERE id = ?1 AND state = 'locked'")
            .expect("prepare");
        for id in &ids {
            del.execute([id]).expect("delete");
        }
    }
    tx.commit().expect("commit");
    ids.len()
}

/// The executor budget's measure, shared with the broker's load test: see
/// [`mqlite_kit::lateness`].
pub use mqlite_kit::lateness::{Lateness, LatenessProbe, Percentiles};

/// The arguments of the lateness examples: `--secs N` (default 3) of each scenario,
/// `--runs N` (default 3) of all of them, `--only SCENARIO`.
#[derive(Debug, Clone)]
pub struct ScenarioArgs {
    /// Seconds each scenario runs.
    pub secs: u64,
    /// How many times every scenario runs.
    pub runs: usize,
    /// The one scenario to run, if named.
    pub only: Option<String>,
}

impl ScenarioArgs {
    /// Reads the process's arguments; panics with `example`'s usage on one it does not
    /// know.
    pub fn parse(example: &str) -> Self {
        let mut parsed = ScenarioArgs {
            secs: 3,
            runs: 3,
            only: None,
        };
        let mut args = std::env::args().skip(1);
        while let Some(a) = args.next() {
            match a.as_str() {
                "--secs" => {
                    parsed.secs = args.next().and_then(|v| v.parse().ok()).expect("--secs N")
                }
                "--runs" => {
                    parsed.runs = args.next().and_then(|v| v.parse().ok()).expect("--runs N")
                }
                "--only" => parsed.only = args.next(),
                other => {
                    panic!("usage: {example} [--secs N] [--runs N] [--only SCENARIO] ({other}?)")
                }
            }
        }
        parsed
    }

    /// Each run of each scenario to run, in order: `(run, scenario)`.
    pub fn each<'a>(
        &'a self,
        scenarios: &'a [&'static str],
    ) -> impl Iterator<Item = (usize, &'static str)> + 'a {
        (0..self.runs).flat_map(move |run| {
            scenarios
                .iter()
                .filter(|s| self.only.as_deref().is_none_or(|o| o == **s))
                .map(move |s| (run, *s))
        })
    }
}

/// An example's rounds: its first argument, or `default` without one.
pub fn rounds_arg(default: usize) -> Result<usize, std::num::ParseIntError> {
    std::env::args()
        .nth(1)
        .map(|a| a.parse())
        .transpose()
        .map(|rounds| rounds.unwrap_or(default))
}

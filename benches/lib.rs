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
/// project machine has cores.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
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

/// An example's rounds: its first argument, or `default` without one.
pub fn rounds_arg(default: usize) -> Result<usize, std::num::ParseIntError> {
    std::env::args()
        .nth(1)
        .map(|a| a.parse())
        .transpose()
        .map(|rounds| rounds.unwrap_or(default))
}

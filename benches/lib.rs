//! Benchmarks of mqlite live in this crate's bench targets; see docs/benchmark.md. What
//! they share lives here.

use mqlite_engine_core::{Engine, EngineOptions, QueueConfig, Store};

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

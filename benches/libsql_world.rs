//! The libSQL bench's world, shared by `benches/libsql.rs` (criterion) and
//! `examples/libsql_in_turn.rs` (the paths timed in turn): one sqld for the store and one
//! for the bare libsql client, the store's engine with its queue, and the bare side's
//! table and operations.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use mqlite_benches::body;
use mqlite_contract::{QueueConfig, SystemClock};
use mqlite_engine::Engine;
use mqlite_store_libsql::{LibsqlOptions, LibsqlStore};
use mqlite_testbed::libsql::Sqld;

pub(crate) const Q: &str = "q";

/// The bare side's table: the fixed queue-shaped table of docs/benchmark.md.
const BARE_SCHEMA: &str = "CREATE TABLE messages (id INTEGER PRIMARY KEY, queue TEXT,
    state TEXT, body BLOB, visible_at INTEGER, locked_until INTEGER, token BLOB,
    delivery_count INTEGER);
  CREATE INDEX active ON messages(queue, id) WHERE state = 'active'";
const BARE_INSERT: &str = "INSERT INTO messages (queue, state, body, visible_at, \
    locked_until, delivery_count) VALUES ('q', 'active', ?1, 0, 0, 0)";

pub(crate) struct World {
    pub(crate) rt: tokio::runtime::Runtime,
    _servers: (Sqld, Sqld),
    _dir: tempfile::TempDir,
    pub(crate) engine: Engine<LibsqlStore>,
    pub(crate) bare: libsql::Connection,
    pub(crate) n: Arc<AtomicUsize>,
}

pub(crate) fn world() -> World {
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
    pub(crate) fn next(&self) -> Vec<u8> {
        body(self.n.fetch_add(1, Ordering::Relaxed) as u64)
    }

    /// Round trips (statements) the store sent for `op`.
    pub(crate) fn trips<T>(&self, op: impl Future<Output = T>) -> u64 {
        self.trips_of(op).0
    }

    /// Round trips the store sent for `op`, and what it answered.
    pub(crate) fn trips_of<T>(&self, op: impl Future<Output = T>) -> (u64, T) {
        let before = self.engine.store().statements_sent();
        let out = self.rt.block_on(op);
        (self.engine.store().statements_sent() - before, out)
    }

    /// One autocommit INSERT: one round trip.
    pub(crate) async fn bare_send(&self, b: Vec<u8>) {
        self.bare.execute(BARE_INSERT, [b]).await.expect("insert");
    }

    /// BEGIN, 64 INSERTs, COMMIT: the bare client has no multi-row bind, so each row
    /// is a statement (66 round trips).
    pub(crate) async fn bare_send_64(&self, bodies: Vec<Vec<u8>>) {
        let tx = self.bare.transaction().await.expect("begin");
        for b in bodies {
            tx.execute(BARE_INSERT, [b]).await.expect("insert");
        }
        tx.commit().await.expect("commit");
    }

    /// A claim (UPDATE … RETURNING, autocommit) and a delete: two round trips.
    pub(crate) async fn bare_receive_complete(&self) {
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

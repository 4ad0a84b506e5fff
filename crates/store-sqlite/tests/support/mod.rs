//! What the SQLite store's own tests share: a store with queue `q` on a manual clock,
//! and holding the writer thread in an application transaction, so that the calls made
//! meanwhile queue for it.

#![allow(dead_code, unreachable_pub)]

use mqlite_contract::{AdminOps, Error, ManualClock, OutboxStore, QueueConfig, QueueKind};
use std::sync::Arc;

use mqlite_engine::{Engine, EngineOptions};
use mqlite_store_sqlite::{SqliteOptions, SqliteStore};
use tokio::sync::oneshot;

/// A store on `q.db` in `dir`, on a manual clock, opened with `options`, with queue `q`
/// created (its first call).
pub async fn open_with_queue(
    dir: &tempfile::TempDir,
    options: impl FnOnce(SqliteOptions) -> SqliteOptions,
) -> SqliteStore {
    let clock = ManualClock::new(1_700_000_000_000);
    let path = dir.path().join("q.db").to_string_lossy().into_owned();
    let store = SqliteStore::open(options(SqliteOptions::new(path).clock(clock.shared())))
        .await
        .expect("open");
    store
        .upsert_queue("q".into(), QueueKind::Queue, QueueConfig::default(), false)
        .await
        .expect("queue");
    store
}

/// An engine over a store at `path` on `clock`, its background loops off (the tests
/// drive the sweeps).
pub async fn engine_at(path: &str, clock: mqlite_contract::SharedClock) -> Engine<SqliteStore> {
    let store = SqliteStore::open(SqliteOptions::new(path).clock(clock))
        .await
        .expect("open");
    let options = EngineOptions {
        background: false,
        ..Default::default()
    };
    Engine::with_store(store, options).await.expect("engine")
}

/// Holds the writer thread in an application transaction until the returned sender
/// fires; returns once the writer is held.
pub async fn hold_writer(
    store: &Arc<SqliteStore>,
) -> (oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let (release, released) = oneshot::channel::<()>();
    let (held, is_held) = oneshot::channel::<()>();
    let store = store.clone();
    let task = tokio::spawn(async move {
        store
            .in_tx(async move |_tx| -> Result<(), Error> {
                let _ = held.send(());
                let _ = released.await;
                Ok(())
            })
            .await
            .expect("the holding transaction");
    });
    is_held.await.expect("the writer is held");
    (release, task)
}

/// How many messages the store holds, in every state.
pub async fn stored(store: &SqliteStore) -> i64 {
    store
        .query_i64("SELECT count(*) FROM mqlite_messages")
        .await
        .expect("count")
}

//! What the SQLite store's own tests share: holding the writer thread in an
//! application transaction, so that the calls made meanwhile queue for it.

#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;

use mqlite_engine_core::{Error, OutboxStore};
use mqlite_store_sqlite::SqliteStore;
use tokio::sync::oneshot;

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

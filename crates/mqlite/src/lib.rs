//! mqlite: a reliable message queue that lives in one SQLite file.
//!
//! ```no_run
//! # async fn demo() -> mqlite::Result<()> {
//! let mq = mqlite::Engine::open("app.db").await?;
//! mq.create_queue("jobs", mqlite::QueueConfig::default()).await?;
//! mq.send("jobs", mqlite::OutMessage::new("hello")).await?;
//! if let Some(m) = mq.receive_one("jobs").await? {
//!     mq.complete("jobs", &m).await?;
//! }
//! # Ok(()) }
//! ```
//!
//! Two engines, one API:
//! - [`Engine`] is typed over the SQLite store: no boxing, and the transactional outbox
//!   ([`Engine::tx`](mqlite_engine_core::Engine::tx)) hands you the native rusqlite
//!   transaction.
//! - [`AnyEngine`] holds a store chosen at run time from a location ([`open`]): a file
//!   path, `:memory:`, `redb:<path>` (with the `redb` feature), and later `libsql://`
//!   locations. Every queue
//!   operation works the same; the outbox is reached by naming the concrete store
//!   (`tx_via::<SqliteStore, _, _>`), since its native handle is the store's own type.

pub use mqlite_engine_core::*;

mod registry;
pub use registry::{AnyEngine, Location, open, open_store, open_with};

#[cfg(feature = "sqlite")]
pub use mqlite_store_sqlite::{SqliteOptions, SqliteStore, SqliteTx, Synchronous, rusqlite};

#[cfg(feature = "redb")]
pub use mqlite_store_redb::{RedbOptions, RedbStore, RedbTx, redb};

/// The engine over the default SQLite store.
#[cfg(feature = "sqlite")]
pub type Engine = mqlite_engine_core::Engine<SqliteStore>;

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
//! This facade re-exports the engine and the default SQLite store; other stores arrive
//! behind cargo features.

pub use mqlite_engine_core::*;
pub use mqlite_store_sqlite::{SqliteOptions, SqliteStore, SqliteTx, Synchronous, rusqlite};

/// The engine over the default SQLite store.
pub type Engine = mqlite_engine_core::Engine<SqliteStore>;

//! The core of mqlite: domain types, the one error enum, the injectable clock, the
//! [`Store`] boundary and the [`Engine`] public API that runs over any store.
//!
//! The canonical SQL text shared by the SQL stores lives in [`sql`].

pub mod clock;
pub mod codec;
pub mod dedup;
pub mod engine;
pub mod error;
pub mod sql;
pub mod store;
pub mod types;

pub use clock::{Clock, ManualClock, SharedClock, SystemClock};
pub use engine::{Engine, EngineOptions, EngineTx, LoopKind, SweepReport};
pub use error::{Error, Result};
pub use store::{OpenStore, Store, StoreTx};
pub use types::*;

//! The core of mqlite: domain types, the one error enum, the injectable clock, the
//! [`Store`] boundary (native, and [`DynStore`] for a store chosen at run time) and the
//! [`Engine`] public API that runs over any store. No SQL lives here: the SQL stores
//! share theirs in `mqlite-sql`.

pub mod access;
pub mod blocking;
pub mod clock;
pub mod codec;
pub mod decide;
pub mod dedup;
mod due;
pub mod dyn_store;
pub mod engine;
pub mod enqueue;
pub mod error;
pub mod event;
pub mod file;
pub mod filter;
pub mod inbox;
#[cfg(feature = "serde")]
pub mod json;
mod meter;
pub mod queue;
pub mod relay;
pub mod reserve;
pub mod side;
pub mod store;
pub mod topics;
pub mod trace;
pub mod types;
pub mod upsert;
pub mod worker;
pub mod writer;

pub use access::{AccessKey, CreatedKey, Permission};
pub use clock::{Clock, ManualClock, SharedClock, SystemClock};
pub use dyn_store::DynStore;
pub use engine::{Engine, EngineOptions, EngineTx, LeasesAtOpen, LoopKind, SweepReport};
pub use error::{Error, LockHolder, LockLostReason, Result};
pub use event::{EventIdentity, Fingerprint};
pub use filter::{Filter, FilterTest};
pub use queue::Queue;
pub use side::{InboxMarker, RelayBacklog, RelayIntent, SentEvidence, SideSweep};
pub use store::{
    HasOutbox, OpenStore, OutboxStore, Ownership, Store, StoreStatus, StoreTx, WorkStats,
};
pub use topics::{Route, Subscription};
pub use types::*;
pub use worker::{HandlerError, RetryPolicy, Worker, WorkerReport};

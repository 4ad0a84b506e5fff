//! The mqlite engine: the [`Engine`] public API over any store of the contract (crate
//! `mqlite-contract`), and what runs on it: the [`Worker`], the outbox [`relay`], the
//! consumer [`inbox`], the [`trace`], subscription [`filter`]s and the sweep loops. It
//! names no backend: the facade (crate `mqlite`) opens one.

mod due;
pub mod engine;
pub mod filter;
pub mod inbox;
#[cfg(feature = "serde")]
pub mod json;
mod meter;
pub mod queue;
pub mod relay;
pub mod trace;
pub mod worker;

pub use engine::{Engine, EngineOptions, EngineTx, LeasesAtOpen, LoopKind, SweepReport};
pub use filter::{Filter, FilterTest};
pub use queue::Queue;
pub use worker::{HandlerError, RetryPolicy, Worker, WorkerReport};

/// The contract's types, for [`source_by_inherent_methods`]'s expansion in other crates.
#[doc(hidden)]
pub use mqlite_contract as __contract;

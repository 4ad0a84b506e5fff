//! The mqlite conformance kit (TCK): one case per promise of the conformance spec, each
//! a plain async function over a [`StoreFactory`], registered once in [`cases`] so that
//! every store runs every case. A store's `tests/tck.rs` is a few lines:
//!
//! ```ignore
//! fn main() { mqlite_tck::run(MyFactory) }
//! ```
//!
//! Every case drives a [`ManualClock`]; none sleeps. A case a store cannot run is
//! reported as ignored with its reason, never passed.

pub mod cases;
mod harness;

pub use harness::{Capability, Case, Ctx, START_MS, StoreFactory, TckResult, run, trials};

pub use mqlite_engine_core::ManualClock;

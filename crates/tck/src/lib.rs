//! The mqlite conformance kit (TCK): one case per promise of the conformance spec, each
//! a plain async function over a [`StoreFactory`], registered once in [`cases`] so that
//! every store runs every case. A store's `tests/tck.rs` is a few lines:
//!
//! ```ignore
//! fn main() { mqlite_tck::run("mystore", MyFactory) }
//! ```
//!
//! Every case runs twice: through the typed engine (`Engine<MyStore>`) and through the
//! run-time one (`Engine<DynStore>`), as [`Typed`] and [`Erased`] access paths.
//!
//! Every case drives a [`ManualClock`]; none sleeps. A case a store cannot run is
//! reported as ignored with its reason, never passed.

pub mod bench;
pub mod cases;
mod harness;
pub mod report;

pub use harness::{
    Access, Capability, Case, Ctx, Erased, START_MS, StoreFactory, TckResult, Typed, Verdict, run,
    trials,
};
pub use report::{ReportCard, grade};

pub use mqlite_contract::ManualClock;

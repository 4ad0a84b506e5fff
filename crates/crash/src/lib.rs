//! Crash injection (promises 15.1–15.3): a worker process runs a workload on a store and
//! reports each acknowledged effect on its standard output; the harness kills it with
//! SIGKILL, reopens the store and checks what survived.
//!
//! Two modes: *coordinated* — the worker reports `MIDTX` while it holds an outbox
//! transaction open between its two writes, and is killed right there, every run — and
//! *random* — the worker is killed after a random number of reported commits, so every
//! kill is gated on evidence that it committed something since its restart.
//!
//! The stores come from the one registration point, `mqlite-testbed`: the harness runs
//! every local store there, through the typed engine and through the run-time (dyn)
//! one, and the worker binary opens the store it is named.

pub mod check;
pub mod harness;
pub mod ticker;
pub mod worker;

/// The queue producers and consumers use.
pub const WORK: &str = "work";
/// The queue the outbox writer enqueues into (never consumed).
pub const OUTBOX: &str = "outbox";
/// The work queue's delivery bound.
pub const MAX_DELIVERY: i64 = 4;

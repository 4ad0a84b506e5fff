//! Crash injection (promises 15.1–15.3): a worker process runs a workload on a store and
//! reports each acknowledged effect on its standard output; the harness kills it with
//! SIGKILL, reopens the store and checks what survived.
//!
//! Two modes: *coordinated* — the worker reports `MIDTX` while it holds an outbox
//! transaction open between its two writes, and is killed right there, every run — and
//! *random* — the worker is killed after a random number of reported commits, so every
//! kill is gated on evidence that it committed something since its restart.
//!
//! The stores are listed once, in [`LOCAL_STORES`]; the worker binary and the harness
//! both dispatch on that name.

pub mod check;
pub mod harness;
pub mod worker;

/// The local stores the crash harness runs against.
pub const LOCAL_STORES: &[&str] = &["sqlite"];

/// Binds `$factory` to the TCK factory of the local store named `$name` and evaluates
/// `$body` with it: the one place that maps a store's name to its factory (the worker
/// binary and the tests both go through it). Unknown names are an `Err(String)`.
#[macro_export]
macro_rules! with_local_store {
    ($name:expr, $factory:ident => $body:expr) => {
        match $name {
            "sqlite" => {
                let $factory = mqlite_store_sqlite::tck::SqliteFactory;
                Ok($body)
            }
            other => Err(format!("unknown local store {other:?}")),
        }
    };
}

/// The queue producers and consumers use.
pub const WORK: &str = "work";
/// The queue the outbox writer enqueues into (never consumed).
pub const OUTBOX: &str = "outbox";
/// The work queue's delivery bound.
pub const MAX_DELIVERY: i64 = 4;

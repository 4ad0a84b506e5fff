//! The store author's kit: what the stores share beneath the contract (crate
//! `mqlite-contract`) so that each writes only its storage. The writer thread and group
//! commit ([`writer`]), the bridge for blocking work ([`blocking`]), the row codec
//! ([`codec`]), the send planner ([`enqueue`]) and upsert rule ([`upsert`]), the
//! decisions every store makes the same way ([`decide`]), and the local file's lock
//! ([`file`](mod@file)) and full-disk reserve ([`reserve`]); and the executor budget's
//! measure ([`lateness`]), which the benches and the broker's load test run beside a
//! store. The engine does not use it.

pub mod blocking;
pub mod codec;
pub mod decide;
pub mod enqueue;
pub mod file;
pub mod lateness;
pub mod reserve;
pub mod upsert;
pub mod writer;

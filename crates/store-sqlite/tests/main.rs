//! The integration tests of `store-sqlite`, one module per file, linked into one test
//! binary (`cargo test -p <crate> --test integration -- <file>::`): the crate's code
//! and its dependencies are compiled and linked once for all of them, not once per file.

mod binds;
mod caller_thread;
mod contract;
mod durability;
mod file_lock;
mod group_commit;
mod memory;
mod plan_pins;
mod receipts;
mod schema_golden;
mod schema_guard;
mod space;
mod statement_counts;
mod support;

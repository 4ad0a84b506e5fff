//! Every case of the conformance kit against the SQLite store, through the typed and the
//! run-time engine: `cargo test -p mqlite-store-sqlite --test tck`. The same cases run
//! for every registered store from `mqlite-testbed`; this entry point lets the store's
//! own crate be graded alone.

fn main() {
    mqlite_tck::run("sqlite", mqlite_testbed::sqlite::SqliteFactory)
}

//! Every case of the conformance kit against the redb store, through the typed and the
//! run-time engine: `cargo test -p mqlite-store-redb --test tck`. The same cases run for
//! every registered store from `mqlite-testbed`; this entry point lets the store's own
//! crate be graded alone.

fn main() {
    mqlite_tck::run("redb", mqlite_testbed::redb::RedbFactory)
}

//! Runs every case of the conformance kit against the SQLite store.

fn main() {
    mqlite_tck::run(mqlite_store_sqlite::tck::SqliteFactory)
}

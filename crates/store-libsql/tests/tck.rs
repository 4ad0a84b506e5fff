//! Every case of the conformance kit against the libSQL store on a real sqld, through
//! the typed and the run-time engine: `cargo test -p mqlite-store-libsql --test tck`.
//! Each case gets its own server; every server is stopped when the run ends. Without
//! sqld every case is skipped with the reason (with `CI=true` it fails).

fn main() {
    let args = libtest_mimic::Arguments::from_args();
    let trials = mqlite_tck::trials("libsql", mqlite_store_libsql::tck::LibsqlFactory);
    let conclusion = libtest_mimic::run(&args, trials);
    mqlite_store_libsql::tck::stop_servers();
    conclusion.exit()
}

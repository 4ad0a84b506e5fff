//! The conformance kit against every registered store, through the typed engine and the
//! run-time (dyn) one: `cargo test -p mqlite-testbed --test tck` (filter with a store
//! name, `typed`/`dyn`, or a promise number such as `p5_`).

fn main() {
    let mut trials = Vec::new();
    mqlite_testbed::with_each_store!(name, factory => trials.extend(mqlite_tck::trials(name, factory)));
    let args = libtest_mimic::Arguments::from_args();
    let conclusion = libtest_mimic::run(&args, trials);
    mqlite_testbed::stop_servers();
    conclusion.exit()
}

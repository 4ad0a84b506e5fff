//! Crash injection on every local store (promises 15.1–15.3): a real worker process is
//! killed with SIGKILL, in coordinated mode (inside an open outbox transaction, between
//! its two writes) and in random mode (after a random number of reported commits), then
//! the store is reopened and checked.
//!
//! CI runs 25 kills per store. The long run (1,000 kills per store) prints its totals:
//!
//! ```text
//! MQLITE_CRASH_KILLS=1000 cargo test --release -p mqlite-crash --test crash -- --nocapture
//! ```

use std::path::PathBuf;

use mqlite_crash::harness::{LoopSpec, Totals, run_loop};
use mqlite_crash::worker::Mode;
use mqlite_testbed::{local_stores, with_store};

fn worker() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_mqlite-crash-worker"))
}

fn kills() -> u32 {
    std::env::var("MQLITE_CRASH_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(25)
}

fn run(
    store: &'static str,
    path: &'static str,
    mode: Mode,
    kills: u32,
    torn: bool,
    seed: u64,
) -> Totals {
    let root = tempfile::tempdir().expect("tempdir");
    let spec = LoopSpec {
        store,
        path,
        worker: worker(),
        dir: root.path().to_path_buf(),
        mode,
        kills,
        torn,
        seed,
    };
    with_store!(store, factory => run_loop(&factory, &spec))
        .expect("known store")
        .unwrap_or_else(|e| panic!("{store} {path} {mode:?}: harness failure: {e}"))
}

/// 15.1–15.3 on every local store, through the run-time (dyn) engine and the typed
/// one: coordinated and random kills, nothing lost, nothing torn, nothing left locked,
/// no delivery over the bound, integrity ok.
#[test]
fn every_local_store_survives_sigkill() {
    let total = kills();
    let coordinated = total.div_ceil(2);
    for (store, path) in local_stores().flat_map(|s| [(s, "dyn"), (s, "typed")]) {
        for (mode, n) in [
            (Mode::Coordinated, coordinated),
            (Mode::Random, total - coordinated),
        ] {
            let totals = run(store, path, mode, n, false, 0x0c0ffee ^ u64::from(n));
            println!("crash {store} {path} {mode:?}: {totals}");
            assert_eq!(totals.kills, n);
            assert!(totals.acknowledged_sends > 0, "the worker made progress");
            assert!(
                totals.orphans > 0,
                "the kills left leases to recover: {totals}"
            );
            assert!(
                totals.findings.clean(),
                "{store} {path} {mode:?}: {totals}; first finding at kill {:?}",
                totals.first_finding
            );
        }
    }
}

/// The harness catches a torn outbox: a worker variant that commits the business row and
/// the message in two transactions is killed between them, and coordinated mode reports
/// the tear.
#[test]
fn coordinated_mode_catches_a_torn_outbox() {
    for store in local_stores() {
        let totals = run(store, "dyn", Mode::Coordinated, 3, true, 7);
        println!("crash {store} torn variant: {totals}");
        assert_eq!(
            totals.findings.torn, 3,
            "every kill tears one transaction: {totals}"
        );
        assert_eq!(totals.findings.lost_sends, 0, "{totals}");
    }
}

/// One schedule run (see `mqlite_crash::ticker`) on `store` in a fresh directory.
fn ticks_on(
    store: &'static str,
    ticks: i64,
    seed: u64,
    torn: bool,
) -> mqlite_crash::ticker::TickTotals {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("db");
    std::fs::create_dir(&dir).expect("db dir");
    let spec = mqlite_crash::ticker::TickSpec {
        store,
        ticker: PathBuf::from(env!("CARGO_BIN_EXE_mqlite-crash-ticker")),
        dir,
        clock: root.path().join("clock"),
        ticks,
        seed,
        torn,
    };
    with_store!(store, factory => mqlite_crash::ticker::run_ticks(factory, &spec))
        .expect("known store")
        .unwrap_or_else(|e| panic!("{store}: {e}"))
}

fn ticks() -> i64 {
    std::env::var("MQLITE_SCHEDULE_TICKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
}

/// 21.2 on every local store: two ticker processes (a leader holding the database, a
/// standby waiting for it) fire one schedule over 1,000 ticks of a shared manual clock,
/// the leader killed with SIGKILL at random moments (racing its fire, or after it) and
/// replaced by a new standby: every tick fired exactly once.
#[test]
fn a_schedule_fires_each_tick_once_across_killed_leaders() {
    let n = ticks();
    for store in local_stores() {
        let totals = ticks_on(store, n, 0x71c0 ^ n as u64, false);
        println!("schedule {store}: {totals:?}");
        assert!(
            totals.missing.is_empty(),
            "{store}: ticks never fired: {totals:?}"
        );
        assert!(
            totals.repeated.is_empty(),
            "{store}: ticks fired twice: {totals:?}"
        );
        assert_eq!(totals.messages, n as usize);
        assert_eq!(totals.fired, n as u64);
        assert!(
            totals.kills_racing > 0 && totals.kills_after > 0,
            "{totals:?}"
        );
    }
}

/// The self-check of the schedule run: a ticker that sends a tick's message and is
/// killed before it moves the schedule (two transactions, not one) makes the next
/// leader fire that tick again, and the check finds the repeat, on every local store,
/// three runs each.
#[test]
fn a_torn_fire_is_caught_by_the_schedule_check() {
    use mqlite_crash::ticker::{PERIOD_MS, T0_MS};
    for store in local_stores() {
        for run in 0..3u64 {
            let totals = ticks_on(store, 3, run, true);
            assert_eq!(totals.repeated, [T0_MS + PERIOD_MS], "{store}: {totals:?}");
            assert!(totals.missing.is_empty(), "{store}: {totals:?}");
        }
    }
}

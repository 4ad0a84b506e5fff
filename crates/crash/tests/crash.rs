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

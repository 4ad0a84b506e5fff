//! The plan pins of the SQL stores (promises 1.5, 5.6), run through a real sqld: the
//! same statements, the same realistic values and the same expectations as the SQLite
//! store's `plan_pins.rs` (`mqlite_sql::plan`), with `EXPLAIN QUERY PLAN` answered by
//! the server's SQLite. Without sqld each trial is reported skipped with the reason.

use libtest_mimic::Arguments;

use mqlite_contract::ManualClock;
use mqlite_sql::plan::{
    CLAIM_INDEXES, INDEX_PINS, is_scan, misses, realistic, render, text, uses_index,
};
use mqlite_sql::{STATEMENTS, Value};
use mqlite_store_libsql::{LibsqlOptions, LibsqlStore};
use mqlite_testbed::libsql::Sqld;

mod support;

use support::{Outcome, trial};

fn main() {
    let args = Arguments::from_args();
    let trials = vec![
        trial("plans::no_statement_scans_a_growing_table", |d| {
            Box::pin(pinned(d, no_scans))
        }),
        trial(
            "plans::claim_seeks_active_index_and_one_line_index_per_probe",
            |d| Box::pin(pinned(d, claim)),
        ),
        trial("plans::each_statement_seeks_its_index", |d| {
            Box::pin(pinned(d, each))
        }),
        trial("plans::selected_redrive_seeks_by_key", |d| {
            Box::pin(pinned(d, picked))
        }),
        trial("plans::scan_detector_sees_a_full_scan", |d| {
            Box::pin(pinned(d, detector))
        }),
    ];
    libtest_mimic::run(&args, trials).exit();
}

type Check = fn(&LibsqlStore) -> std::pin::Pin<Box<dyn Future<Output = Vec<String>> + Send + '_>>;

/// Runs `check` on a store over a fresh sqld; its failures fail the trial.
async fn pinned(dir: tempfile::TempDir, check: Check) -> Outcome {
    let server = Sqld::start(&dir.path().join("sqld"))?;
    let clock = ManualClock::new(1_700_000_000_000).shared();
    let store = LibsqlStore::open(LibsqlOptions::new(server.url()).clock(clock)).await?;
    let failures = check(&store).await;
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n").into())
    }
}

async fn plan(store: &LibsqlStore, sql: &str) -> Vec<String> {
    store
        .explain(sql, realistic)
        .await
        .unwrap_or_else(|e| vec![format!("EXPLAIN failed: {e}")])
}

fn statement(name: &str) -> &'static str {
    text(name).unwrap_or_else(|| panic!("no statement {name}"))
}

fn no_scans(
    store: &LibsqlStore,
) -> std::pin::Pin<Box<dyn Future<Output = Vec<String>> + Send + '_>> {
    Box::pin(async move {
        let mut failures = Vec::new();
        for (name, sql) in STATEMENTS.iter() {
            failures.extend(misses(name, &plan(store, sql).await, &[]));
        }
        let without_state = store
            .explain(statement("PEEK"), |n| {
                if n == ":state" {
                    Value::Null
                } else {
                    realistic(n)
                }
            })
            .await
            .unwrap_or_else(|e| vec![format!("EXPLAIN failed: {e}")]);
        failures.extend(misses("PEEK without a state", &without_state, &[]));
        failures
    })
}

fn claim(store: &LibsqlStore) -> std::pin::Pin<Box<dyn Future<Output = Vec<String>> + Send + '_>> {
    Box::pin(async move {
        let mut failures = Vec::new();
        for name in ["CLAIM", "PICK_HEADS"] {
            failures.extend(misses(
                name,
                &plan(store, statement(name)).await,
                CLAIM_INDEXES,
            ));
        }
        failures
    })
}

fn each(store: &LibsqlStore) -> std::pin::Pin<Box<dyn Future<Output = Vec<String>> + Send + '_>> {
    Box::pin(async move {
        let mut failures = Vec::new();
        for &(name, index) in INDEX_PINS {
            failures.extend(misses(name, &plan(store, statement(name)).await, &[index]));
        }
        failures
    })
}

fn picked(store: &LibsqlStore) -> std::pin::Pin<Box<dyn Future<Output = Vec<String>> + Send + '_>> {
    Box::pin(async move {
        let plan = plan(store, statement("DLQ_PICKED")).await;
        let by_key = plan
            .iter()
            .any(|l| l.starts_with("SEARCH mqlite_messages USING INTEGER PRIMARY KEY"));
        let walks_dlq = plan.iter().any(|l| uses_index(l, "mqlite_msg_dlq"));
        if by_key && !walks_dlq {
            Vec::new()
        } else {
            vec![format!(
                "DLQ_PICKED does not seek by key; plan:\n{}",
                render(&plan)
            )]
        }
    })
}

fn detector(
    store: &LibsqlStore,
) -> std::pin::Pin<Box<dyn Future<Output = Vec<String>> + Send + '_>> {
    Box::pin(async move {
        let mut failures = Vec::new();
        for sql in [
            "SELECT id FROM mqlite_messages WHERE body = x'00'",
            "SELECT m.id FROM mqlite_messages m WHERE m.body = x'00'",
            "SELECT id FROM mqlite_messages WHERE id > 5 AND body = x'00'",
        ] {
            let plan = plan(store, sql).await;
            if !plan.iter().any(|l| is_scan(l)) {
                failures.push(format!(
                    "not seen as a walk: {sql}; plan:\n{}",
                    render(&plan)
                ));
            }
        }
        failures
    })
}

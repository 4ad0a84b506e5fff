//! Query plans are behaviour (promises 1.5, 5.6): the claim seeks its partial indexes
//! rather than walking the table, and no statement of the shared flows scans a table
//! that grows with traffic.
//!
//! Each test runs `EXPLAIN QUERY PLAN` over the canonical text of `mqlite_sql` on the
//! store's own connection, with realistic values bound by parameter name (the bundled
//! SQLite has STAT4, so a plan may depend on them), and prints the whole plan when an
//! assertion fails. A "scan" is a `SCAN` of messages, dedup, receipts, attempts or
//! access keys under any alias, and also a rowid-range walk of messages (`rowid>?`),
//! which crosses every queue's rows. The admin tables (queues, subscriptions, meta) are
//! sized by configuration, not traffic, and may be scanned.

use mqlite_contract::{ManualClock, OrderingMode, OutMessage, QueueConfig, Store};
use mqlite_engine::{Engine, EngineOptions};
use mqlite_sql::plan::{CLAIM_INDEXES, INDEX_PINS, is_scan, realistic, render, uses_index};
use mqlite_sql::{STATEMENTS, Value};
use mqlite_store_sqlite::{SqliteOptions, SqliteStore};

/// A fresh store on a temp file; the directory lives as long as the returned guard.
async fn open_store() -> (tempfile::TempDir, SqliteStore) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("mq.db");
    let clock = ManualClock::new(1_700_000_000_000).shared();
    let store =
        SqliteStore::open(SqliteOptions::new(path.to_str().expect("utf-8 path")).clock(clock))
            .await
            .expect("open store");
    (dir, store)
}

/// The plan of `text` with realistic values.
async fn plan_of(text: &str) -> Vec<String> {
    let (_dir, store) = open_store().await;
    let plan = store
        .explain(text, realistic)
        .await
        .expect("EXPLAIN QUERY PLAN");
    store.close().await;
    plan
}

/// Fails, naming the statement and printing its plan, if any line scans.
fn assert_no_scan(name: &str, plan: &[String]) {
    let scans: Vec<&String> = plan.iter().filter(|l| is_scan(l)).collect();
    assert!(
        scans.is_empty(),
        "{name} walks a growing table ({scans:?}); plan:\n{}",
        render(plan)
    );
}

/// Fails unless some line of the plan seeks (SEARCH) `index`.
fn assert_searches(name: &str, plan: &[String], index: &str) {
    assert!(
        plan.iter()
            .any(|l| l.starts_with("SEARCH ") && uses_index(l, index)),
        "{name} does not SEARCH {index}; plan:\n{}",
        render(plan)
    );
}

fn text(name: &str) -> &'static str {
    mqlite_sql::plan::text(name).unwrap_or_else(|| panic!("no statement {name}"))
}

/// No statement the flows run scans a growing table, with realistic values bound.
#[tokio::test]
async fn no_statement_scans_a_growing_table() {
    let (_dir, store) = open_store().await;
    let mut failures = Vec::new();
    for (name, sql) in STATEMENTS.iter() {
        let plan = store.explain(sql, realistic).await.expect("plan");
        if plan.iter().any(|l| is_scan(l)) {
            failures.push(format!("{name}:\n{}", render(&plan)));
        }
    }
    // PEEK without a state binds NULL there: the same text must not walk either.
    let plan = store
        .explain(text("PEEK"), |n| {
            if n == ":state" {
                Value::Null
            } else {
                realistic(n)
            }
        })
        .await
        .expect("plan");
    if plan.iter().any(|l| is_scan(l)) {
        failures.push(format!("PEEK without a state:\n{}", render(&plan)));
    }
    store.close().await;
    assert!(
        failures.is_empty(),
        "statements that scan:\n{}",
        failures.join("\n")
    );
}

/// The claim's candidate search seeks `mqlite_msg_active` (1.5) and each head-of-line probe
/// seeks the partial index of its own blocking state (5.6); the receive-and-delete pick
/// is the same search.
#[tokio::test]
async fn claim_seeks_active_index_and_one_line_index_per_probe() {
    for name in ["CLAIM", "PICK_HEADS"] {
        let plan = plan_of(text(name)).await;
        assert_no_scan(name, &plan);
        for index in CLAIM_INDEXES {
            assert_searches(name, &plan, index);
        }
    }
}

/// Each sweep and each per-line step seeks the index that serves it.
#[tokio::test]
async fn each_statement_seeks_its_index() {
    for &(name, index) in INDEX_PINS {
        let plan = plan_of(text(name)).await;
        assert_no_scan(name, &plan);
        assert_searches(name, &plan, index);
    }
}

/// The detector itself sees a real full scan and a rowid-range walk, so a silent change
/// of SQLite's wording cannot turn every pin above into a vacuous pass.
#[tokio::test]
async fn scan_detector_sees_a_full_scan() {
    for (sql, what) in [
        (
            "SELECT id FROM mqlite_messages WHERE body = x'00'",
            "a full scan",
        ),
        (
            "SELECT m.id FROM mqlite_messages m WHERE m.body = x'00'",
            "an aliased full scan",
        ),
        (
            "SELECT id FROM mqlite_messages WHERE id > 5 AND body = x'00'",
            "a rowid range",
        ),
    ] {
        let plan = plan_of(sql).await;
        assert!(
            plan.iter().any(|l| is_scan(l)),
            "{what} should be detected; plan:\n{}",
            render(&plan)
        );
    }
}

/// The claim's plan, pinned per ordering mode: a queue of each mode holds a blocked
/// backlog of 2,000 messages behind a locked head, `ANALYZE` gives the planner real
/// statistics, and the claim still seeks `mqlite_msg_priority` and `mqlite_msg_active`
/// (its two arms: priorities above 0, then priority 0) and one line index per probe;
/// the merge sorts at most twice `:max` rows.
/// (One claim text serves every mode: the mode is written into each row's `line` at
/// enqueue, so there is no mode-dependent branch to plan differently.)
#[tokio::test]
async fn claim_plan_holds_for_every_ordering_mode_with_statistics() {
    let claim = text("CLAIM");
    // The line rule is the schema's view, which the claim reads.
    assert!(claim.contains("FROM mqlite_heads m"));
    assert!(mqlite_sql::SCHEMA.iter().any(|ddl| {
        ddl.starts_with("CREATE VIEW mqlite_heads") && ddl.contains("m.line IS NULL OR NOT (")
    }));
    for mode in [
        OrderingMode::Standard,
        OrderingMode::GroupFifo,
        OrderingMode::StrictFifo,
    ] {
        assert!(
            !claim.contains(mode.as_str()),
            "the claim must not branch on {mode}"
        );
        let (dir, store) = open_store().await;
        let options = EngineOptions {
            background: false,
            ..Default::default()
        };
        let mq = Engine::with_store(store, options).await.expect("engine");
        let config = QueueConfig {
            ordering_mode: mode,
            ..Default::default()
        };
        mq.create_queue("jobs", config).await.expect("queue");
        let grouped = |i: usize| OutMessage::new(format!("m{i}")).with_group("g");
        mq.send("jobs", grouped(0)).await.expect("head");
        mq.receive_one("jobs")
            .await
            .expect("claim")
            .expect("the head");
        for chunk in 0..2 {
            let batch = (0..1000).map(|i| grouped(chunk * 1000 + i + 1)).collect();
            mq.send_batch("jobs", batch).await.expect("backlog");
        }
        // Statistics through a second connection; the store's connection replans.
        let conn = rusqlite::Connection::open(dir.path().join("mq.db")).expect("connection");
        conn.execute_batch("ANALYZE").expect("ANALYZE");
        drop(conn);
        let plan = mq.store().explain(claim, realistic).await.expect("plan");
        assert_no_scan(&format!("CLAIM on {mode}"), &plan);
        let candidate: Vec<&String> = plan.iter().filter(|l| l.starts_with("SEARCH m ")).collect();
        assert!(
            candidate.len() == 2
                && uses_index(candidate[0], "mqlite_msg_priority")
                && uses_index(candidate[1], "mqlite_msg_active"),
            "CLAIM on {mode} does not seek mqlite_msg_priority, then mqlite_msg_active; \
             plan:\n{}",
            render(&plan)
        );
        let probes: Vec<&String> = plan.iter().filter(|l| l.starts_with("SEARCH b ")).collect();
        for (probe, index) in probes.iter().zip(
            [
                "mqlite_msg_line_locked",
                "mqlite_msg_line_deferred",
                "mqlite_msg_line_scheduled",
            ]
            .repeat(2),
        ) {
            assert!(
                uses_index(probe, index),
                "CLAIM on {mode}: probe {probe:?} should use {index}"
            );
        }
        assert_eq!(probes.len(), 6, "CLAIM on {mode}; plan:\n{}", render(&plan));
        mq.close().await;
    }
}

/// A selected redrive seeks each named row by its key and never walks the queue's dead
/// letters (the planner would pick `mqlite_msg_dlq` without the cross join).
#[tokio::test]
async fn selected_redrive_seeks_by_key() {
    let plan = plan_of(text("DLQ_PICKED")).await;
    assert!(
        plan.iter()
            .any(|l| l.starts_with("SEARCH mqlite_messages USING INTEGER PRIMARY KEY")),
        "DLQ_PICKED does not seek by key; plan:\n{}",
        render(&plan)
    );
    assert!(
        !plan.iter().any(|l| uses_index(l, "mqlite_msg_dlq")),
        "DLQ_PICKED walks the dead-letter index; plan:\n{}",
        render(&plan)
    );
}

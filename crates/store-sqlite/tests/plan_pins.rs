//! Query plans are behaviour (promises 1.5, 5.6): the claim must seek its partial
//! indexes rather than walk the table, and no hot statement may scan `messages`.
//!
//! Each test runs `EXPLAIN QUERY PLAN` over the canonical text of `mqlite_engine_core::sql`
//! on the store's own connection (every named parameter binds NULL; only the plan
//! matters) and prints the whole plan when an assertion fails.

use mqlite_engine_core::{ManualClock, sql};
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

/// The plan of `text`, one `detail` string per line.
async fn plan_of(text: &str) -> Vec<String> {
    let (_dir, store) = open_store().await;
    store.explain(text).await.expect("EXPLAIN QUERY PLAN")
}

fn render(plan: &[String]) -> String {
    plan.iter().map(|l| format!("    {l}\n")).collect()
}

/// Whether a plan line reads `SCAN <alias> ...` for an alias of `messages`.
fn is_messages_scan(line: &str) -> bool {
    let mut words = line.split_whitespace();
    words.next() == Some("SCAN") && matches!(words.next(), Some("messages" | "m" | "b"))
}

/// Whether a plan line uses the index `index` (plain or covering).
fn uses_index(line: &str, index: &str) -> bool {
    let words: Vec<&str> = line.split_whitespace().collect();
    words.windows(2).any(|w| w[0] == "INDEX" && w[1] == index)
}

/// Fails, naming the statement and printing its plan, if any line scans `messages`.
fn assert_no_scan(name: &str, plan: &[String]) {
    let scans: Vec<&String> = plan.iter().filter(|l| is_messages_scan(l)).collect();
    assert!(
        scans.is_empty(),
        "{name} plans a full scan of messages ({scans:?}); plan:\n{}",
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

/// The claim's candidate search seeks `idx_msg_active` (1.5) and each head-of-line probe
/// seeks the partial index of its own blocking state (5.6).
#[tokio::test]
async fn claim_seeks_active_index_and_one_line_index_per_probe() {
    let plan = plan_of(sql::CLAIM).await;
    assert_no_scan("CLAIM", &plan);

    // The outer UPDATE finds its row by rowid.
    assert!(
        plan.iter()
            .any(|l| l.starts_with("SEARCH messages USING INTEGER PRIMARY KEY")),
        "CLAIM's UPDATE does not find its row by rowid; plan:\n{}",
        render(&plan)
    );

    let candidate: Vec<&String> = plan.iter().filter(|l| l.starts_with("SEARCH m ")).collect();
    assert!(
        candidate.len() == 1 && uses_index(candidate[0], "idx_msg_active"),
        "CLAIM's candidate search is not one SEARCH m USING idx_msg_active: {candidate:?}; plan:\n{}",
        render(&plan)
    );

    // The candidate search walks idx_msg_active in id order: no sort of the backlog.
    assert!(
        !plan.iter().any(|l| l.contains("TEMP B-TREE")),
        "CLAIM sorts through a temp b-tree instead of walking the index in id order; plan:\n{}",
        render(&plan)
    );

    // The probes appear in text order: locked, deferred, scheduled.
    let probes: Vec<&String> = plan.iter().filter(|l| l.starts_with("SEARCH b ")).collect();
    let expected = [
        "idx_msg_line_locked",
        "idx_msg_line_deferred",
        "idx_msg_line_scheduled",
    ];
    assert_eq!(
        probes.len(),
        expected.len(),
        "CLAIM should have exactly three head-of-line probes; plan:\n{}",
        render(&plan)
    );
    for (probe, index) in probes.iter().zip(expected) {
        assert!(
            uses_index(probe, index),
            "CLAIM probe {probe:?} should use {index}; plan:\n{}",
            render(&plan)
        );
    }
}

/// The reaper's first half finds expired leases through `idx_msg_lease` (1.4, 3.1).
#[tokio::test]
async fn reap_to_dlq_seeks_lease_index() {
    let plan = plan_of(sql::REAP_TO_DLQ).await;
    assert_no_scan("REAP_TO_DLQ", &plan);
    assert_searches("REAP_TO_DLQ", &plan, "idx_msg_lease");
}

/// The reaper's second half finds expired leases through `idx_msg_lease` (1.4).
#[tokio::test]
async fn reap_to_active_seeks_lease_index() {
    let plan = plan_of(sql::REAP_TO_ACTIVE).await;
    assert_no_scan("REAP_TO_ACTIVE", &plan);
    assert_searches("REAP_TO_ACTIVE", &plan, "idx_msg_lease");
}

/// The scheduler finds due rows through `idx_msg_due` (7.1).
#[tokio::test]
async fn activate_due_seeks_due_index() {
    let plan = plan_of(sql::ACTIVATE_DUE).await;
    assert_no_scan("ACTIVATE_DUE", &plan);
    assert_searches("ACTIVATE_DUE", &plan, "idx_msg_due");
}

/// The TTL sweep finds expired rows through `idx_msg_expiry` (7.2).
#[tokio::test]
async fn select_expired_seeks_expiry_index() {
    let plan = plan_of(sql::SELECT_EXPIRED).await;
    assert_no_scan("SELECT_EXPIRED", &plan);
    assert_searches("SELECT_EXPIRED", &plan, "idx_msg_expiry");
}

/// One test per remaining statement that must never scan `messages`.
macro_rules! no_scan {
    ($($test:ident => $stmt:ident),* $(,)?) => {$(
        #[doc = concat!("`sql::", stringify!($stmt), "` never scans messages.")]
        #[tokio::test]
        async fn $test() {
            let plan = plan_of(sql::$stmt).await;
            assert_no_scan(stringify!($stmt), &plan);
        }
    )*};
}

no_scan! {
    expire_to_dlq_does_not_scan => EXPIRE_TO_DLQ,
    settle_complete_does_not_scan => SETTLE_COMPLETE,
    settle_abandon_does_not_scan => SETTLE_ABANDON,
    settle_reject_does_not_scan => SETTLE_REJECT,
    settle_defer_does_not_scan => SETTLE_DEFER,
    release_line_does_not_scan => RELEASE_LINE,
    line_busy_does_not_scan => LINE_BUSY,
    cancel_scheduled_does_not_scan => CANCEL_SCHEDULED,
    claim_deferred_does_not_scan => CLAIM_DEFERRED,
    select_dlq_does_not_scan => SELECT_DLQ,
    dedup_lookup_does_not_scan => DEDUP_LOOKUP,
    receipt_lookup_does_not_scan => RECEIPT_LOOKUP,
    attempt_lookup_does_not_scan => ATTEMPT_LOOKUP,
}

/// The detector itself sees a real full scan, so a silent change of SQLite's wording
/// cannot turn every pin above into a vacuous pass.
#[tokio::test]
async fn scan_detector_sees_a_full_scan() {
    let plan = plan_of("SELECT id FROM messages WHERE body = x'00'").await;
    assert!(
        plan.iter().any(|l| is_messages_scan(l)),
        "an unindexed filter on messages should plan as SCAN; plan:\n{}",
        render(&plan)
    );
    let aliased = plan_of("SELECT m.id FROM messages m WHERE m.body = x'00'").await;
    assert!(
        aliased.iter().any(|l| is_messages_scan(l)),
        "an aliased unindexed filter should plan as SCAN m; plan:\n{}",
        render(&aliased)
    );
}

no_scan! {
    dlq_totals_does_not_scan => DLQ_TOTALS,
    redrive_one_does_not_scan => REDRIVE_ONE,
    delete_by_id_does_not_scan => DELETE_BY_ID,
    queue_stats_does_not_scan => QUEUE_STATS,
    queue_in_play_does_not_scan => QUEUE_IN_PLAY,
    peek_does_not_scan => PEEK,
}

/// The janitor's deletes seek their expiry indexes; none scans its table (3.2, 3.3, 4.1).
#[tokio::test]
async fn janitor_seeks_expiry_indexes() {
    for (text, index) in sql::JANITOR.iter().zip([
        "idx_receipt_expiry",
        "idx_attempt_expiry",
        "idx_dedup_expiry",
    ]) {
        let plan = plan_of(text).await;
        assert!(
            !plan.iter().any(|l| l.starts_with("SCAN")),
            "janitor statement scans: {text}; plan:\n{}",
            render(&plan)
        );
        assert_searches(text, &plan, index);
    }
}

/// The claim's plan, pinned per ordering mode: a queue of each mode holds a blocked
/// backlog of 2,000 messages behind a locked head, `ANALYZE` gives the planner real
/// statistics, and the claim still seeks `idx_msg_active` and one line index per probe.
/// (One claim text serves every mode: the mode is written into each row's `line` at
/// enqueue, so there is no mode-dependent branch to plan differently.)
#[tokio::test]
async fn claim_plan_holds_for_every_ordering_mode_with_statistics() {
    use mqlite_engine_core::{Engine, EngineOptions, OrderingMode, OutMessage, QueueConfig};
    assert!(sql::CLAIM.contains("m.line IS NULL OR NOT ("));
    for mode in [
        OrderingMode::Standard,
        OrderingMode::GroupFifo,
        OrderingMode::StrictFifo,
    ] {
        assert!(
            !sql::CLAIM.contains(mode.as_str()),
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
        mq.create_queue("q", config).await.expect("queue");
        let grouped = |i: usize| OutMessage::new(format!("m{i}")).with_group("g");
        mq.send("q", grouped(0)).await.expect("head");
        mq.receive_one("q").await.expect("claim").expect("the head");
        for chunk in 0..2 {
            let batch = (0..1000).map(|i| grouped(chunk * 1000 + i + 1)).collect();
            mq.send_batch("q", batch).await.expect("backlog");
        }
        // Statistics through a second connection; the store's connection replans.
        let conn = rusqlite::Connection::open(dir.path().join("mq.db")).expect("connection");
        conn.execute_batch("ANALYZE").expect("ANALYZE");
        drop(conn);
        let plan = mq.store().explain(sql::CLAIM).await.expect("plan");
        assert_no_scan(&format!("CLAIM on {mode}"), &plan);
        let candidate: Vec<&String> = plan.iter().filter(|l| l.starts_with("SEARCH m ")).collect();
        assert!(
            candidate.len() == 1 && uses_index(candidate[0], "idx_msg_active"),
            "CLAIM on {mode} does not seek idx_msg_active; plan:\n{}",
            render(&plan)
        );
        let probes: Vec<&String> = plan.iter().filter(|l| l.starts_with("SEARCH b ")).collect();
        for (probe, index) in probes.iter().zip([
            "idx_msg_line_locked",
            "idx_msg_line_deferred",
            "idx_msg_line_scheduled",
        ]) {
            assert!(
                uses_index(probe, index),
                "CLAIM on {mode}: probe {probe:?} should use {index}"
            );
        }
        assert_eq!(probes.len(), 3, "CLAIM on {mode}; plan:\n{}", render(&plan));
        mq.close().await;
    }
}

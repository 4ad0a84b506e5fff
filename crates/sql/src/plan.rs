//! What the SQL stores' plan-pinning tests share (promises 1.5, 5.6): realistic values
//! for each parameter (a planner with statistics may choose by value), what counts as
//! a walk of a table that grows with traffic, and which index each statement must seek.
//! Each store's test runs `EXPLAIN QUERY PLAN` its own way (the bundled SQLite, or
//! through a libSQL server) and checks the plans with these.

use crate::Value;

/// A lock token of the right shape.
pub const TOKEN: &str = "0123456789abcdef0123456789abcdef";

/// A realistic value for a parameter, by its name.
pub fn realistic(name: &str) -> Value {
    let now = 1_700_000_000_000i64;
    match name {
        ":queue" | ":name" | ":target" => Value::from("jobs"),
        ":topic" => Value::from("events"),
        ":now" | ":cutoff" => Value::from(now),
        ":max" | ":limit" => Value::from(64i64),
        ":lock_ms" | ":delay_ms" => Value::from(30_000i64),
        ":max_dc" => Value::from(10i64),
        ":seq" | ":from" => Value::from(1_000i64),
        ":token" => Value::from(TOKEN),
        ":tokens" => Value::from(format!("[\"{TOKEN}\",\"{TOKEN}\"]")),
        ":items" => Value::from(format!(
            "[{{\"seq\":1000,\"token\":\"{TOKEN}\",\"id\":1000,\"line\":\"g\",\"waiting\":1}}]"
        )),
        ":lines" => Value::from("[{\"queue\":\"jobs\",\"line\":\"g\",\"head\":1000}]"),
        ":keys" => Value::from("[\"id:a\",\"id:b\"]"),
        ":ids" | ":seqs" => Value::from("[1000,1001]"),
        ":batch" => Value::from("[{\"line\":\"g\",\"waiting\":1,\"body\":\"00ff\"}]"),
        ":entries" => Value::from("[{\"key\":\"id:a\",\"hash\":\"h\",\"seq\":1000}]"),
        ":state" => Value::from(5i64),
        ":op" => Value::from("complete"),
        ":args" | ":after" | ":filter" | ":reason" | ":description" => Value::from(""),
        ":attempt" | ":id" | ":digest" | ":key" | ":hash" | ":token_text" => Value::from("a"),
        _ => Value::from(1i64),
    }
}

/// A plan, one indented line per step, for failure messages.
pub fn render(plan: &[String]) -> String {
    plan.iter().map(|l| format!("    {l}\n")).collect()
}

/// Aliases the statements give the tables that grow with traffic.
pub const GROWING: &[&str] = &[
    "mqlite_messages",
    "m",
    "b",
    "x",
    "s",
    "mqlite_dedup",
    "d",
    "mqlite_receipts",
    "r",
    "mqlite_attempts",
    "mqlite_access_keys",
];

/// Whether a plan line walks a growing table: a SCAN of it, or a rowid range over
/// messages (every queue's rows).
pub fn is_scan(line: &str) -> bool {
    let words: Vec<&str> = line.split_whitespace().collect();
    match words.as_slice() {
        ["SCAN", alias, ..] => GROWING.contains(alias),
        [
            "SEARCH",
            alias,
            "USING",
            "INTEGER",
            "PRIMARY",
            "KEY",
            range,
            ..,
        ] => GROWING.contains(alias) && (range.contains("rowid>") || range.contains("rowid<")),
        _ => false,
    }
}

/// Whether a plan line uses the index `index` (plain or covering).
pub fn uses_index(line: &str, index: &str) -> bool {
    let words: Vec<&str> = line.split_whitespace().collect();
    words.windows(2).any(|w| w[0] == "INDEX" && w[1] == index)
}

/// The index each statement must seek (beside never walking a growing table).
pub const INDEX_PINS: &[(&str, &str)] = &[
    ("REAP_TO_DLQ", "mqlite_msg_lease"),
    ("REAP_TO_ACTIVE", "mqlite_msg_lease"),
    ("ACTIVATE_DUE", "mqlite_msg_due"),
    ("EXPIRE_TO_DLQ", "mqlite_msg_expiry"),
    ("EXPIRE_DISCARD", "mqlite_msg_expiry"),
    ("BUSY_LINES", "mqlite_msg_line"),
    ("RELEASE_LINES", "mqlite_msg_line"),
    ("LINE_SUCCESSORS", "mqlite_msg_line"),
    ("DLQ_OLDEST", "mqlite_msg_dlq"),
    ("PURGE", "mqlite_msg_dlq"),
    ("PEEK", "mqlite_msg_active"),
    ("PEEK", "mqlite_msg_lease"),
    ("PEEK", "mqlite_msg_rest"),
    ("QUEUE_IN_PLAY", "mqlite_msg_active"),
    ("QUEUE_IN_PLAY", "mqlite_msg_lease"),
    ("QUEUE_IN_PLAY", "mqlite_msg_rest"),
    ("QUEUE_STATS", "mqlite_msg_active"),
    ("QUEUE_STATS", "mqlite_msg_lease"),
    ("QUEUE_STATS", "mqlite_msg_rest"),
    ("QUEUE_STATS", "mqlite_msg_dlq"),
    ("DELETE_QUEUE_ACTIVE", "mqlite_msg_active"),
    ("DELETE_QUEUE_LOCKED", "mqlite_msg_lease"),
    ("DELETE_QUEUE_REST", "mqlite_msg_rest"),
    ("JANITOR_ATTEMPTS", "mqlite_attempt_expiry"),
    ("JANITOR_DEDUP", "mqlite_dedup_expiry"),
    ("SUB_LIST_TOPIC", "mqlite_sub_topic"),
];

/// The indexes the claim's candidate search and head-of-line probes seek (1.5, 5.6).
pub const CLAIM_INDEXES: &[&str] = &[
    "mqlite_msg_active",
    "mqlite_msg_line_locked",
    "mqlite_msg_line_deferred",
    "mqlite_msg_line_scheduled",
];

/// The statement text by its name in [`crate::STATEMENTS`].
pub fn text(name: &str) -> Option<&'static str> {
    crate::STATEMENTS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, t)| *t)
}

/// The indexes statement `name` must seek (none: it must only not walk a growing
/// table).
pub fn pinned_indexes(name: &str) -> Vec<&'static str> {
    match name {
        "CLAIM" | "CLAIM_ONE" | "CLAIM_ONE_OWNED" | "CLAIM_ONE_OWNED_ALL" | "PICK_HEADS" => {
            CLAIM_INDEXES.to_vec()
        }
        _ => INDEX_PINS
            .iter()
            .filter(|(n, _)| *n == name)
            .map(|(_, i)| *i)
            .collect(),
    }
}

/// What is wrong with `plan` for statement `name`: a walk of a growing table, or an
/// index of `indexes` it does not seek. Empty: the plan holds.
pub fn misses(name: &str, plan: &[String], indexes: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    if plan.iter().any(|l| is_scan(l)) {
        out.push(format!(
            "{name} walks a growing table; plan:\n{}",
            render(plan)
        ));
    }
    for index in indexes {
        if !plan
            .iter()
            .any(|l| l.starts_with("SEARCH ") && uses_index(l, index))
        {
            out.push(format!(
                "{name} does not SEARCH {index}; plan:\n{}",
                render(plan)
            ));
        }
    }
    out
}

/// Judges every statement's plan, as `explain` answers it (realistic values bound): a
/// verdict per statement, `Err` with what is wrong. The report card's plan pins.
pub async fn judge_all<E, Fut>(mut explain: E) -> Vec<(String, Result<(), String>)>
where
    E: FnMut(&'static str) -> Fut,
    Fut: Future<Output = mqlite_contract::Result<Vec<String>>>,
{
    let mut out = Vec::new();
    for (name, sql) in crate::STATEMENTS.iter() {
        let verdict = match explain(sql).await {
            Ok(plan) => {
                let wrong = misses(name, &plan, &pinned_indexes(name));
                if wrong.is_empty() {
                    Ok(())
                } else {
                    Err(wrong.join("\n"))
                }
            }
            Err(e) => Err(format!("EXPLAIN failed: {e}")),
        };
        out.push(((*name).to_owned(), verdict));
    }
    out
}

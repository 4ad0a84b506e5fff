//! The line rule (see `mqlite_contract::store`), in SQL: which lines are busy, and
//! who becomes head when a head leaves play. Which line a message joins and whether it
//! waits are decided once for every store, in `mqlite_kit::enqueue`.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use mqlite_contract::Result;

use crate::exec::{SqlExec, Value};

/// Which of the `:lines` (a JSON array of line names) already have a member in play in
/// `:queue`: a newcomer to such a line waits. One seek of `mqlite_msg_line` per line.
pub const BUSY_LINES: &str = "SELECT j.value FROM json_each(:lines) j
 WHERE EXISTS (SELECT 1 FROM mqlite_messages m WHERE m.queue = :queue AND m.line = j.value
                 AND m.state <> 5 /* dead_lettered */)";

/// After heads left play: for each `{queue, line}` of `:lines`, the oldest member still
/// in play becomes the head. Only a departing head calls for this (every other member
/// waits), so it is one seek of `mqlite_msg_line` per line, never a walk of the line (5.6).
pub const RELEASE_LINES: &str = "UPDATE mqlite_messages SET waiting = 0
 WHERE waiting = 1 AND id IN (
       SELECT (SELECT x.id FROM mqlite_messages x
                WHERE x.queue = j.value ->> 'queue' AND x.line = j.value ->> 'line'
                  AND x.state <> 5 /* dead_lettered */
                ORDER BY x.id LIMIT 1)
         FROM json_each(:lines) j)";

/// The lines among `lines` that already have a member in play in `queue`.
pub async fn busy_lines<X: SqlExec>(
    x: &mut X,
    queue: &str,
    lines: &BTreeSet<String>,
) -> Result<HashSet<String>> {
    if lines.is_empty() {
        return Ok(HashSet::new());
    }
    let json =
        serde_json::Value::from_iter(lines.iter().map(|l| serde_json::Value::from(l.as_str())));
    x.query(
        BUSY_LINES,
        &[
            (":lines", Value::from(json.to_string())),
            (":queue", Value::from(queue)),
        ],
    )
    .await?
    .iter()
    .map(|r| r.text(0))
    .collect()
}

/// Rows that left play: (queue, line, was the head).
#[derive(Debug, Default)]
pub struct Departed(BTreeMap<(String, String), ()>);

impl Departed {
    /// Notes a row that left play; only a departing head frees its line.
    pub fn add(&mut self, queue: &str, line: Option<String>, was_head: bool) {
        if let (Some(line), true) = (line, was_head) {
            self.0.insert((queue.to_owned(), line), ());
        }
    }

    /// Promotes the next head of every line a head left, in one statement.
    pub async fn release<X: SqlExec>(self, x: &mut X) -> Result<()> {
        if self.0.is_empty() {
            return Ok(());
        }
        let json = serde_json::Value::from_iter(
            self.0
                .keys()
                .map(|(q, l)| serde_json::json!({"queue": q, "line": l})),
        );
        x.execute(RELEASE_LINES, &[(":lines", Value::from(json.to_string()))])
            .await?;
        Ok(())
    }
}

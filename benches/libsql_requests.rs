//! What the owner's epoch check costs a libSQL request (docs/benchmark.md, "The owner's
//! check folded into the claim and the completion"): the requests a send of one, a
//! receive of one and its completion send, in each form, against one sqld on loopback, timed one after
//! another in turn (each round runs every form once, starting from a different one), so
//! that the machine's drift between criterion runs, larger than what is measured here,
//! falls on every form alike.
//!
//! Each request runs on a stream parked as the store parks its own (a deferred BEGIN
//! that ran nothing) and parks it again (`COMMIT; BEGIN`). The forms:
//!
//! - send: the guard and the insert (before), the insert carrying the check
//!   (`INSERT_ONE_OWNED`, now), the insert alone (the floor);
//! - receive: the guard and the claim (as the store sent it before), the claim carrying
//!   the check (`CLAIM_ONE_OWNED`, as it sends it now), the claim alone (no check: the
//!   floor), and `SELECT 1` before the claim (a statement that reads no table);
//! - completion: the guard, the fenced delete and the check that it took the row (before);
//!   the delete and that check carrying the owner's (`REFUSE_UNLESS_CHANGED_OWNED`, now);
//!   the delete and the check without the owner's (the floor). The receipt, the same in
//!   every form, is left out;
//! - `COMMIT; BEGIN` alone: the round trip with nothing in it.
//!
//! ```sh
//! cargo run --release -p mqlite-benches --example libsql_requests -- 2000
//! ```
//!
//! Needs sqld (scripts/install-sqld.sh).

use std::time::Instant;

use mqlite_contract::{OutMessage, QueueConfig, SystemClock};
use mqlite_sql::claim::{CLAIM_ONE, CLAIM_ONE_OWNED};
use mqlite_sql::enqueue::{INSERT_BODY_AT_OWNED, INSERT_BODY_OWNED, INSERT_ONE, INSERT_ONE_OWNED};
use mqlite_sql::settle::COMPLETE_UNLINED_ONE;
use mqlite_sql::{REFUSE_UNLESS_CHANGED, REFUSE_UNLESS_CHANGED_OWNED};
use mqlite_store_libsql::{LibsqlOptions, LibsqlStore};
use mqlite_testbed::libsql::Sqld;

type Failure = Box<dyn std::error::Error>;

/// The positional parameters of a send of one, `?1` … `?18`.
const POSITIONS: [&str; 18] = [
    "?1", "?2", "?3", "?4", "?5", "?6", "?7", "?8", "?9", "?10", "?11", "?12", "?13", "?14", "?15",
    "?16", "?17", "?18",
];

/// `sql` with its parameters written in.
fn written(sql: &str, values: &[(&str, String)]) -> String {
    // Longest names first, so that `?1` never eats the head of `?12`.
    let mut values = values.to_vec();
    values.sort_by_key(|(k, _)| std::cmp::Reverse(k.len()));
    values
        .iter()
        .fold(sql.to_owned(), |s, (k, v)| s.replace(k, v))
}

/// Runs one request and reads every row of its answer; its time in µs.
async fn timed(conn: &libsql::Connection, text: &str) -> Result<(f64, Vec<i64>), Failure> {
    let start = Instant::now();
    let mut batch = conn.execute_batch(text).await?;
    let mut ids = Vec::new();
    while let Some(step) = batch.next_stmt_row() {
        if let Some(mut rows) = step {
            while let Some(row) = rows.next().await? {
                if let Ok(libsql::Value::Integer(id)) = row.get_value(0) {
                    ids.push(id);
                }
            }
        }
    }
    Ok((start.elapsed().as_secs_f64() * 1e6, ids))
}

fn report(name: &str, times: &mut [f64]) {
    times.sort_by(f64::total_cmp);
    let n = times.len();
    let mean = times.iter().sum::<f64>() / n as f64;
    println!(
        "{name:<54} median {:7.1} µs   mean {mean:7.1} µs   p10 {:7.1} µs   p90 {:7.1} µs",
        times[n / 2],
        times[n / 10],
        times[n * 9 / 10]
    );
}

fn main() -> Result<(), Failure> {
    let rounds = mqlite_benches::rounds_arg(2000)?;
    let rt = mqlite_benches::runtime();
    let dir = tempfile::tempdir()?;
    let server = Sqld::start(&dir.path().join("sqld"))?;
    rt.block_on(async {
        let store =
            LibsqlStore::open(LibsqlOptions::new(server.url()).clock(SystemClock::shared()))
                .await?;
        let epoch = store.epoch();
        let engine = mqlite_benches::engine_with_queue(store, "q", QueueConfig::default()).await;
        // Each round claims a message in each of six receive forms, and one more for
        // each of three completions.
        for _ in 0..(rounds * 10).div_ceil(64) {
            let batch = (0..64).map(|i| OutMessage::new(vec![i; 256])).collect();
            engine.send_batch("q", batch).await?;
        }
        // The store's own stream would hold the lease's renewals; the requests go out on a
        // plain connection of their own.
        engine.close().await;
        let conn = libsql::Builder::new_remote(server.url().to_owned(), String::new())
            .build()
            .await?
            .connect()?;
        conn.execute_batch("BEGIN").await?;
        let now = i64::try_from(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)?
                .as_millis(),
        )? + 60_000;
        let token = "00112233445566778899aabbccddeeff";
        let claim_values = [
            (":queue", "'q'".to_owned()),
            (":now", now.to_string()),
            (":lock_ms", "600000".to_owned()),
            (":token", format!("'{token}'")),
            (":epoch", format!("'{epoch}'")),
        ];
        let guard = format!(
            "INSERT INTO mqlite_meta (key, value) SELECT 'owner_epoch', NULL \
             WHERE NOT EXISTS (SELECT 1 FROM mqlite_meta \
             WHERE key = 'owner_epoch' AND value = '{epoch}')"
        );
        let park = "; COMMIT; BEGIN";
        let claim = written(CLAIM_ONE, &claim_values);
        let owned_claim = written(CLAIM_ONE_OWNED, &claim_values);
        let mut insert_values: Vec<(&str, String)> =
            ["'q'", "0", "0", "0", "0", "NULL", "NULL", "0"]
                .into_iter()
                .map(str::to_owned)
                .chain([format!("X'{}'", "ab".repeat(256))])
                .chain(std::iter::repeat_n("NULL".to_owned(), 8))
                .chain(["0".to_owned()])
                .enumerate()
                .map(|(i, v)| (POSITIONS[i], v))
                .collect();
        insert_values.push((":epoch", format!("'{epoch}'")));
        let insert = written(INSERT_ONE, &insert_values);
        // A number above every one handed out, and its successors.
        let mut known_values = insert_values.clone();
        known_values[5].1 = "KNOWN_ID".to_owned();
        let mut known = 1_000_000_000_i64;
        let receives = [
            (
                "send: guard; insert (before)",
                format!("{guard}; {insert}{park}"),
            ),
            (
                "send: insert carrying the check (now)",
                format!("{}{park}", written(INSERT_ONE_OWNED, &insert_values)),
            ),
            ("send: insert alone (no check)", format!("{insert}{park}")),
            (
                "send: body-only insert carrying the check",
                format!("{}{park}", written(INSERT_BODY_OWNED, &insert_values)),
            ),
            (
                "send: body-only insert at a known number",
                format!("{}{park}", written(INSERT_BODY_AT_OWNED, &known_values)),
            ),
            (
                "receive: guard; claim (before)",
                format!("{guard}; {claim}{park}"),
            ),
            (
                "receive: claim carrying the check (now)",
                format!("{}{park}", written(CLAIM_ONE_OWNED, &claim_values)),
            ),
            (
                "receive: SELECT 1; claim",
                format!("SELECT 1; {claim}{park}"),
            ),
            ("receive: claim alone (no check)", format!("{claim}{park}")),
            (
                "receive: claim carrying the check, RETURNING *",
                format!(
                    "{}RETURNING *{park}",
                    &owned_claim[..owned_claim.find("RETURNING").unwrap_or(owned_claim.len())]
                ),
            ),
            (
                "receive: claim checked in its WHERE; epoch read",
                format!(
                    "{}; SELECT value FROM mqlite_meta WHERE key = 'owner_epoch'{park}",
                    claim.replace(
                        " AND state = 0 /* active */",
                        &format!(" AND state = 0 AND (SELECT value FROM mqlite_meta WHERE key = 'owner_epoch') = '{epoch}'")
                    )
                ),
            ),
            (
                "receive: claim; epoch read",
                format!("{claim}; SELECT value FROM mqlite_meta WHERE key = 'owner_epoch'{park}"),
            ),
            ("COMMIT; BEGIN alone", "COMMIT; BEGIN".to_owned()),
        ];
        let completions = [
            "completion: guard; delete; check (before)",
            "completion: delete; check carrying the owner's (now)",
            "completion: delete; check (no owner's check)",
        ];
        let complete = |form: usize, id: i64| {
            let values = [
                ("?1", "'q'".to_owned()),
                ("?2", now.to_string()),
                ("?3", id.to_string()),
                ("?4", format!("'{token}'")),
                (":expected", "1".to_owned()),
                (":epoch", format!("'{epoch}'")),
            ];
            let delete = written(COMPLETE_UNLINED_ONE, &values);
            match form {
                0 => format!(
                    "{guard}; {delete}; {}{park}",
                    written(REFUSE_UNLESS_CHANGED, &values)
                ),
                1 => format!(
                    "{delete}; {}{park}",
                    written(REFUSE_UNLESS_CHANGED_OWNED, &values)
                ),
                _ => format!(
                    "{delete}; {}{park}",
                    written(REFUSE_UNLESS_CHANGED, &values)
                ),
            }
        };
        let mut receive_times = vec![Vec::with_capacity(rounds); receives.len()];
        let mut completion_times = vec![Vec::with_capacity(rounds); completions.len()];
        for round in 0..rounds {
            for k in 0..receives.len() {
                let k = (k + round) % receives.len();
                known += 1;
                let text = receives[k].1.replace("KNOWN_ID", &known.to_string());
                let (us, _) = timed(&conn, &text).await?;
                receive_times[k].push(us);
            }
            for k in 0..completions.len() {
                let k = (k + round) % completions.len();
                let (_, ids) = timed(&conn, &format!("{claim}{park}")).await?;
                let id = *ids.first().ok_or("a message to complete")?;
                let (us, _) = timed(&conn, &complete(k, id)).await?;
                completion_times[k].push(us);
            }
        }
        println!("{rounds} rounds, each form once a round, in turn");
        for ((name, _), times) in receives.iter().zip(&mut receive_times) {
            report(name, times);
        }
        for (name, times) in completions.iter().zip(&mut completion_times) {
            report(name, times);
        }
        Ok(())
    })
}

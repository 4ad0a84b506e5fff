//! The recovery tasks behind the background loops (1.4, 3.1, 7.1, 7.2, 8.1–8.3, 3.2):
//! each is a few set-based statements over a partial index, in one transaction.

use mqlite_contract::{RecoverTask, Result, RetentionDefaults};
use mqlite_kit::decide;

use crate::exec::{Row, SqlExec, Value};
use crate::line::Departed;

/// The reaper and the orphan sweep, first half (1.4, 3.1): expired leases at the
/// delivery bound are dead-lettered. `:cutoff` is `now` for the reaper (equality at the
/// deadline is already expired) and the largest integer at open, where every lock is an
/// orphan. Found by `mqlite_msg_lease`, one seek per queue.
pub const REAP_TO_DLQ: &str = "UPDATE mqlite_messages
   SET state = 5 /* dead_lettered */, dead_letter_reason = 'MaxDeliveryCountExceeded',
       dead_letter_description = 'the lease expired on the final allowed delivery',
       dead_lettered_at = :now, lock_token = NULL, locked_until = 0
 WHERE queue IN (SELECT name FROM mqlite_queues) AND state = 1 /* locked */ AND locked_until <= :cutoff
   AND delivery_count >= (SELECT q.max_delivery_count FROM mqlite_queues q WHERE q.name = mqlite_messages.queue)
RETURNING queue, line, waiting";

/// The reaper, second half: the remaining expired leases go back to active.
pub const REAP_TO_ACTIVE: &str = "UPDATE mqlite_messages
   SET state = 0 /* active */, lock_token = NULL, locked_until = 0
 WHERE queue IN (SELECT name FROM mqlite_queues) AND state = 1 /* locked */ AND locked_until <= :cutoff";

/// The scheduler (7.1): due rows, found by `mqlite_msg_due`, become active.
pub const ACTIVATE_DUE: &str = "UPDATE mqlite_messages SET state = 0 /* active */
 WHERE state = 3 /* scheduled */ AND visible_at <= :now";

/// TTL (7.2), dead-letter branch: expired rows of queues that dead-letter on expiry,
/// found by `mqlite_msg_expiry`.
pub const EXPIRE_TO_DLQ: &str = "UPDATE mqlite_messages
   SET state = 5 /* dead_lettered */, dead_letter_reason = 'TTLExpiredException',
       dead_letter_description = 'the message expired before it was completed',
       dead_lettered_at = :now, lock_token = NULL, locked_until = 0
 WHERE expires_at > 0 AND state <> 5 /* dead_lettered */ AND expires_at <= :now
   AND (SELECT q.dead_letter_on_expire FROM mqlite_queues q WHERE q.name = mqlite_messages.queue) = 1
RETURNING queue, line, waiting";

/// TTL, discard branch: the same rows of queues that discard on expiry.
pub const EXPIRE_DISCARD: &str = "DELETE FROM mqlite_messages
 WHERE expires_at > 0 AND state <> 5 /* dead_lettered */ AND expires_at <= :now
   AND (SELECT q.dead_letter_on_expire FROM mqlite_queues q WHERE q.name = mqlite_messages.queue) = 0
RETURNING queue, line, waiting";

/// Every queue's dead-letter bounds (retention, 8.1–8.3).
pub const RETENTION_BOUNDS: &str =
    "SELECT name, dlq_max_age_ms, dlq_max_count, dlq_max_bytes FROM mqlite_queues";

/// A queue's dead letters, oldest first, dead-lettered at or before `:cutoff`: id,
/// group, body size and dead-lettering time (redrive, retention; found by
/// `mqlite_msg_dlq`).
pub const DLQ_OLDEST: &str =
    "SELECT id, group_id, length(body), dead_lettered_at FROM mqlite_messages
 WHERE queue = :queue AND state = 5 /* dead_lettered */ AND dead_lettered_at <= :cutoff
 ORDER BY dead_lettered_at, id LIMIT :limit";

/// The dead letters among `:ids` (a JSON array of sequence numbers), in the order and
/// bounds of [`DLQ_OLDEST`]: a selected redrive, one primary-key seek per number (the
/// cross join keeps the planner off the queue's dead-letter index, which it would walk).
pub const DLQ_PICKED: &str =
    "SELECT DISTINCT mqlite_messages.id, group_id, length(body), dead_lettered_at
  FROM json_each(:ids) j CROSS JOIN mqlite_messages ON mqlite_messages.id = j.value
 WHERE queue = :queue AND state = 5 /* dead_lettered */ AND dead_lettered_at <= :cutoff
 ORDER BY dead_lettered_at, mqlite_messages.id LIMIT :limit";

/// Dead-letter count and bytes of a queue (retention, 8.1).
pub const DLQ_TOTALS: &str = "SELECT count(*), coalesce(sum(length(body)), 0) FROM mqlite_messages
 WHERE queue = :queue AND state = 5 /* dead_lettered */";

/// The janitor: expired attempts and dedup entries, each by its expiry index; receipts
/// by whole buckets from the front of their key, every bucket that ended before the
/// current one began (its receipts all expired by then; a receipt past its expiry but
/// in the current bucket is never replayed, see `settle::RECEIPT_LOOKUP`).
pub const JANITOR: &[&str] = &[
    concat!(
        "DELETE FROM mqlite_receipts WHERE bucket < :now / ",
        receipt_bucket!()
    ),
    "DELETE FROM mqlite_attempts WHERE expires_at <= :now",
    "DELETE FROM mqlite_dedup WHERE expires_at <= :now",
];

/// Whether the file gives free pages back incrementally (2: `INCREMENTAL`).
pub const AUTO_VACUUM: &str = "PRAGMA auto_vacuum";
/// The pages on the file's free list.
pub const FREELIST_COUNT: &str = "PRAGMA freelist_count";
/// Gives back up to [`VACUUM_STEP_PAGES`] free pages (a pragma takes no bound
/// parameter, so the step is fixed and repeated); it frees a page per row it steps.
pub const INCREMENTAL_VACUUM: &str = "PRAGMA incremental_vacuum(1024)";
/// The pages one [`INCREMENTAL_VACUUM`] frees at most (4 MiB of 4 KiB pages).
pub const VACUUM_STEP_PAGES: u64 = 1024;

/// Runs one recovery task within the surrounding transaction.
pub async fn recover<X: SqlExec>(x: &mut X, now: i64, task: RecoverTask) -> Result<u64> {
    match task {
        RecoverTask::Orphans => reap(x, now, i64::MAX).await,
        RecoverTask::Reaper => reap(x, now, now).await,
        RecoverTask::Scheduler => Ok(x
            .execute(ACTIVATE_DUE, &[(":now", Value::from(now))])
            .await?
            .changes),
        RecoverTask::Ttl => expire(x, now).await,
        RecoverTask::Retention(defaults) => retention(x, now, defaults).await,
        RecoverTask::Janitor => {
            let mut n = 0;
            for text in JANITOR {
                n += x
                    .execute(text, &[(":now", Value::from(now))])
                    .await?
                    .changes;
            }
            Ok(n)
        }
        RecoverTask::Vacuum { max_pages } => vacuum(x, u64::from(max_pages)).await,
    }
}

/// Gives back free pages of a local file in incremental auto-vacuum mode, in steps of
/// [`VACUUM_STEP_PAGES`], at most `max_pages` (rounded up to a step): the pages freed.
/// A file made without incremental auto-vacuum (one written by an earlier version:
/// `mqlite vacuum --full` converts it) frees nothing. Run only for a store whose
/// `reclaims_pages` says yes (the SQLite store's files), never on a remote server.
async fn vacuum<X: SqlExec>(x: &mut X, max_pages: u64) -> Result<u64> {
    let mode = x.query(AUTO_VACUUM, &[]).await?;
    if mode.first().map(|r| r.int(0)).transpose()? != Some(2) {
        return Ok(0);
    }
    let free_before = free_pages(x).await?;
    let mut free = free_before;
    while free > 0 && free_before - free < max_pages {
        // It steps once per page freed, as a row: read to the end.
        x.query(INCREMENTAL_VACUUM, &[]).await?;
        let left = free_pages(x).await?;
        if left >= free {
            break;
        }
        free = left;
    }
    Ok(free_before - free)
}

/// The pages on the file's free list.
async fn free_pages<X: SqlExec>(x: &mut X) -> Result<u64> {
    let rows = x.query(FREELIST_COUNT, &[]).await?;
    Ok(rows
        .first()
        .map(|r| r.int(0))
        .transpose()?
        .map_or(0, |n| u64::try_from(n).unwrap_or(0)))
}

/// Notes the departures a `RETURNING queue, line, waiting` statement reported.
fn departures(rows: &[Row], departed: &mut Departed) -> Result<()> {
    for r in rows {
        departed.add(&r.text(0)?, r.opt_text(1)?, !r.flag(2)?);
    }
    Ok(())
}

/// Leases with `locked_until <= cutoff` go back to active, or to the dead-letter state at
/// the delivery bound; a dead-lettered head releases its line.
async fn reap<X: SqlExec>(x: &mut X, now: i64, cutoff: i64) -> Result<u64> {
    let dead = x
        .query(
            REAP_TO_DLQ,
            &[(":now", Value::from(now)), (":cutoff", Value::from(cutoff))],
        )
        .await?;
    let mut departed = Departed::default();
    departures(&dead, &mut departed)?;
    departed.release(x).await?;
    let active = x
        .execute(REAP_TO_ACTIVE, &[(":cutoff", Value::from(cutoff))])
        .await?
        .changes;
    Ok(dead.len() as u64 + active)
}

/// Expired rows are dead-lettered or discarded per their queue (7.2).
async fn expire<X: SqlExec>(x: &mut X, now: i64) -> Result<u64> {
    let mut departed = Departed::default();
    let mut total = 0u64;
    for text in [EXPIRE_TO_DLQ, EXPIRE_DISCARD] {
        let rows = x.query(text, &[(":now", Value::from(now))]).await?;
        total += rows.len() as u64;
        departures(&rows, &mut departed)?;
    }
    departed.release(x).await?;
    Ok(total)
}

/// Dead-letter retention (8.1–8.3): per queue, the oldest dead letters beyond the age,
/// count and byte bounds are deleted; nothing but dead letters is touched.
async fn retention<X: SqlExec>(x: &mut X, now: i64, defaults: RetentionDefaults) -> Result<u64> {
    let queues = x.query(RETENTION_BOUNDS, &[]).await?;
    let mut doomed: Vec<i64> = Vec::new();
    for q in &queues {
        let queue = q.text(0)?;
        let bounds = (q.int(1)?, q.int(2)?, q.int(3)?);
        let Some(retention) = decide::Retention::of(bounds, defaults, now) else {
            continue;
        };
        let totals = x
            .query(DLQ_TOTALS, &[(":queue", Value::from(queue.as_str()))])
            .await?;
        let (n, size) = match totals.first() {
            Some(r) => (r.int(0)?, r.int(1)?),
            None => (0, 0),
        };
        if n == 0 {
            continue;
        }
        let oldest = x
            .query(
                DLQ_OLDEST,
                &[
                    (":queue", Value::from(queue.as_str())),
                    (":cutoff", Value::from(i64::MAX)),
                    (":limit", Value::from(n)),
                ],
            )
            .await?;
        let oldest = oldest
            .iter()
            .map(|r| Ok((r.int(0)?, r.int(2)?, r.int(3)?)))
            .collect::<Result<Vec<_>>>()?;
        doomed.extend(retention.doomed(oldest, (n, size)));
    }
    delete_ids(x, &doomed).await
}

/// Deletes these rows (dead letters only ever), in one statement.
pub async fn delete_ids<X: SqlExec>(x: &mut X, ids: &[i64]) -> Result<u64> {
    if ids.is_empty() {
        return Ok(0);
    }
    let json = serde_json::Value::from_iter(ids.iter().copied().map(serde_json::Value::from));
    Ok(x.execute(
        crate::claim::DELETE_IDS,
        &[(":ids", Value::from(json.to_string()))],
    )
    .await?
    .changes)
}

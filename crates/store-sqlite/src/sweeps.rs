//! The recovery tasks behind the background loops (1.4, 3.1, 7.1, 7.2, 8.1–8.3, 3.2):
//! each is a handful of statements over a partial index, run in one transaction.

use std::collections::HashSet;

use rusqlite::{Connection, named_params};

use mqlite_engine_core::sql;
use mqlite_engine_core::{RecoverTask, Result, RetentionDefaults};

use crate::db;
use crate::settle::release_line;

/// Runs one recovery task within the surrounding transaction.
pub(crate) fn recover(conn: &Connection, now: i64, task: RecoverTask) -> Result<u64> {
    match task {
        RecoverTask::Orphans => reap(conn, now, i64::MAX),
        RecoverTask::Reaper => reap(conn, now, now),
        RecoverTask::Scheduler => Ok(conn
            .prepare_cached(sql::ACTIVATE_DUE)
            .map_err(db)?
            .execute(named_params! {":now": now})
            .map_err(db)? as u64),
        RecoverTask::Ttl => expire(conn, now),
        RecoverTask::Retention(defaults) => retention(conn, now, defaults),
        RecoverTask::Janitor => {
            let mut n = 0;
            for text in sql::JANITOR {
                n += conn
                    .prepare_cached(text)
                    .map_err(db)?
                    .execute(named_params! {":now": now})
                    .map_err(db)? as u64;
            }
            Ok(n)
        }
    }
}

/// Leases with `locked_until <= cutoff` go back to active, or to the dead-letter state at
/// the delivery bound; a dead-lettered head releases its line.
fn reap(conn: &Connection, now: i64, cutoff: i64) -> Result<u64> {
    let dead: Vec<(String, Option<String>, bool)> = conn
        .prepare_cached(sql::REAP_TO_DLQ)
        .map_err(db)?
        .query_map(named_params! {":now": now, ":cutoff": cutoff}, |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .map_err(db)?
        .collect::<rusqlite::Result<_>>()
        .map_err(db)?;
    release_lines(
        conn,
        dead.iter()
            .map(|(q, l, waiting)| (q.as_str(), l.as_deref(), !waiting)),
    )?;
    let active = conn
        .prepare_cached(sql::REAP_TO_ACTIVE)
        .map_err(db)?
        .execute(named_params! {":cutoff": cutoff})
        .map_err(db)?;
    Ok(dead.len() as u64 + active as u64)
}

/// Releases the lines whose head left play, each once.
fn release_lines<'a>(
    conn: &Connection,
    departed: impl Iterator<Item = (&'a str, Option<&'a str>, bool)>,
) -> Result<()> {
    let heads: HashSet<(&str, &str)> = departed
        .filter(|(_, _, was_head)| *was_head)
        .filter_map(|(q, l, _)| Some((q, l?)))
        .collect();
    for (queue, line) in heads {
        release_line(conn, queue, Some(line), true)?;
    }
    Ok(())
}

/// Expired rows are dead-lettered or discarded per their queue (7.2), in slices.
fn expire(conn: &Connection, now: i64) -> Result<u64> {
    let mut total = 0u64;
    loop {
        let rows: Vec<Expired> = conn
            .prepare_cached(sql::SELECT_EXPIRED)
            .map_err(db)?
            .query_map(named_params! {":now": now}, |r| {
                Ok(Expired {
                    id: r.get(0)?,
                    queue: r.get(1)?,
                    line: r.get(2)?,
                    was_head: !r.get::<_, bool>(3)?,
                    to_dlq: r.get::<_, bool>(4)?,
                })
            })
            .map_err(db)?
            .collect::<rusqlite::Result<_>>()
            .map_err(db)?;
        if rows.is_empty() {
            return Ok(total);
        }
        for row in &rows {
            if row.to_dlq {
                conn.prepare_cached(sql::EXPIRE_TO_DLQ)
                    .map_err(db)?
                    .execute(named_params! {":id": row.id, ":now": now})
            } else {
                conn.prepare_cached(sql::DELETE_BY_ID)
                    .map_err(db)?
                    .execute(named_params! {":id": row.id})
            }
            .map_err(db)?;
        }
        total += rows.len() as u64;
        release_lines(
            conn,
            rows.iter()
                .map(|r| (r.queue.as_str(), r.line.as_deref(), r.was_head)),
        )?;
    }
}

/// One row the TTL sweep found expired.
struct Expired {
    id: i64,
    queue: String,
    line: Option<String>,
    was_head: bool,
    to_dlq: bool,
}

/// Dead-letter retention (8.1–8.3): per queue, the oldest dead letters beyond the age,
/// count and byte bounds are deleted; nothing but dead letters is touched.
fn retention(conn: &Connection, now: i64, defaults: RetentionDefaults) -> Result<u64> {
    let queues: Vec<(String, i64, i64, i64)> = conn
        .prepare_cached(sql::RETENTION_BOUNDS)
        .map_err(db)?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .map_err(db)?
        .collect::<rusqlite::Result<_>>()
        .map_err(db)?;
    let mut dropped = 0u64;
    for (queue, age, count, bytes) in queues {
        let age = RetentionDefaults::resolve(age, defaults.max_age_ms);
        let count = RetentionDefaults::resolve(count, defaults.max_count);
        let bytes = RetentionDefaults::resolve(bytes, defaults.max_bytes);
        if age == 0 && count == 0 && bytes == 0 {
            continue;
        }
        if age > 0 {
            dropped += delete_dead(conn, &queue, now.saturating_sub(age), i64::MAX, |_, _| true)?;
        }
        if count > 0 || bytes > 0 {
            let (n, size): (i64, i64) = conn
                .prepare_cached(sql::DLQ_TOTALS)
                .map_err(db)?
                .query_row(named_params! {":queue": queue}, |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .map_err(db)?;
            let (mut excess_n, mut excess_bytes) = (
                if count > 0 { (n - count).max(0) } else { 0 },
                if bytes > 0 { (size - bytes).max(0) } else { 0 },
            );
            if excess_n > 0 || excess_bytes > 0 {
                dropped += delete_dead(conn, &queue, i64::MAX, i64::MAX, |_, len| {
                    if excess_n <= 0 && excess_bytes <= 0 {
                        return false;
                    }
                    excess_n -= 1;
                    excess_bytes -= len;
                    true
                })?;
            }
        }
    }
    Ok(dropped)
}

/// Deletes a queue's dead letters dead-lettered at or before `cutoff`, oldest first, while
/// `keep_going(id, body_len)` says so, at most `limit`. Returns how many were deleted.
pub(crate) fn delete_dead(
    conn: &Connection,
    queue: &str,
    cutoff: i64,
    limit: i64,
    mut keep_going: impl FnMut(i64, i64) -> bool,
) -> Result<u64> {
    // (id, group, body size)
    let rows: Vec<(i64, Option<String>, i64)> = conn
        .prepare_cached(sql::SELECT_DLQ)
        .map_err(db)?
        .query_map(
            named_params! {":queue": queue, ":cutoff": cutoff, ":limit": limit},
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .map_err(db)?
        .collect::<rusqlite::Result<_>>()
        .map_err(db)?;
    let mut n = 0;
    let mut del = conn.prepare_cached(sql::DELETE_BY_ID).map_err(db)?;
    for (id, _, len) in rows {
        if !keep_going(id, len) {
            break;
        }
        del.execute(named_params! {":id": id}).map_err(db)?;
        n += 1;
    }
    Ok(n)
}

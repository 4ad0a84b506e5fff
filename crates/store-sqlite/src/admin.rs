//! Queue administration and the admin reads: upsert/delete/list, cancel, peek, stats,
//! redrive and purge (6.2, 7.1, 12.1).

use rusqlite::{Connection, OptionalExtension, named_params};

use mqlite_engine_core::sql;
use mqlite_engine_core::{
    Error, Message, PeekOptions, PurgeOptions, QueueConfig, QueueInfo, QueueKind, QueueStats,
    RedriveOptions, Result, SeqNumber,
};

use crate::db;
use crate::enqueue::{line_busy, line_of};
use crate::rows::{load_queue, message, queue_row};
use crate::settle::release_line;
use crate::sweeps::delete_dead;

/// Creates or updates a queue; another kind under the name is NameConflict (12.1); the
/// ordering mode is fixed while messages are in play.
pub(crate) fn upsert_queue(
    conn: &Connection,
    now: i64,
    name: &str,
    kind: QueueKind,
    cfg: &QueueConfig,
    update_only: bool,
) -> Result<()> {
    let existing: Option<(String, String)> = conn
        .prepare_cached(sql::SELECT_QUEUE_KIND)
        .map_err(db)?
        .query_row(named_params! {":name": name}, |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .optional()
        .map_err(db)?;
    match existing {
        None if update_only => return Err(Error::queue_not_found(name)),
        None => {}
        Some((k, _)) if k != kind.as_str() => {
            return Err(Error::NameConflict {
                name: name.to_owned(),
                existing: k,
            });
        }
        Some((_, mode)) if mode != cfg.ordering_mode.as_str() => {
            let in_play: bool = conn
                .prepare_cached(sql::QUEUE_IN_PLAY)
                .map_err(db)?
                .query_row(named_params! {":queue": name}, |r| r.get(0))
                .map_err(db)?;
            if in_play {
                return Err(Error::invalid(format!(
                    "the ordering mode of {name:?} can change only while it holds no \
                     message in play (it is {mode})"
                )));
            }
        }
        Some(_) => {}
    }
    conn.prepare_cached(sql::UPSERT_QUEUE)
        .map_err(db)?
        .execute(named_params! {
            ":name": name, ":kind": kind.as_str(), ":lock_ms": cfg.lock_duration_ms,
            ":max_dc": cfg.max_delivery_count, ":ttl": cfg.default_ttl_ms,
            ":dloe": cfg.dead_letter_on_expire, ":dedup": cfg.dedup_window_ms,
            ":mode": cfg.ordering_mode.as_str(), ":age": cfg.dlq_max_age_ms,
            ":count": cfg.dlq_max_count, ":bytes": cfg.dlq_max_bytes, ":now": now,
        })
        .map_err(db)?;
    Ok(())
}

/// Deletes a queue and everything it owns.
pub(crate) fn delete_queue(conn: &Connection, name: &str) -> Result<bool> {
    let mut last = 0;
    for text in sql::DELETE_QUEUE {
        last = conn
            .prepare_cached(text)
            .map_err(db)?
            .execute(named_params! {":name": name})
            .map_err(db)?;
    }
    Ok(last > 0)
}

/// Every queue, by name.
pub(crate) fn list_queues(conn: &Connection) -> Result<Vec<QueueInfo>> {
    conn.prepare_cached(sql::LIST_QUEUES)
        .map_err(db)?
        .query_map([], |r| {
            let (kind, config) = queue_row(r, 1)?;
            Ok(QueueInfo {
                name: r.get(0)?,
                kind,
                config,
            })
        })
        .map_err(db)?
        .collect::<rusqlite::Result<_>>()
        .map_err(db)
}

/// Deletes a never-delivered scheduled message (7.1).
pub(crate) fn cancel(conn: &Connection, queue: &str, seq: SeqNumber) -> Result<bool> {
    load_queue(conn, queue)?;
    let gone: Option<(Option<String>, bool)> = conn
        .prepare_cached(sql::CANCEL_SCHEDULED)
        .map_err(db)?
        .query_row(named_params! {":seq": seq.0, ":queue": queue}, |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .optional()
        .map_err(db)?;
    match gone {
        Some((line, waiting)) => {
            release_line(conn, queue, line.as_deref(), !waiting)?;
            Ok(true)
        }
        None => Ok(false),
    }
}

/// Browses without locking (6.2).
pub(crate) fn peek(conn: &Connection, queue: &str, o: &PeekOptions) -> Result<Vec<Message>> {
    load_queue(conn, queue)?;
    conn.prepare_cached(sql::PEEK)
        .map_err(db)?
        .query_map(
            named_params! {
                ":queue": queue, ":from": o.from_seq.map_or(0, |s| s.0),
                ":state": o.state.map(|s| s.as_str()), ":max": o.max,
            },
            |r| {
                // Browsing never hands out a lease's token: only the claimer holds it.
                message(r).map(|m| Message {
                    lock_token: None,
                    ..m
                })
            },
        )
        .map_err(db)?
        .collect::<rusqlite::Result<_>>()
        .map_err(db)
}

/// Counts per state.
pub(crate) fn stats(conn: &Connection, now: i64, queue: &str) -> Result<QueueStats> {
    load_queue(conn, queue)?;
    let (live, locked, deferred, scheduled, dead, oldest): (i64, i64, i64, i64, i64, Option<i64>) =
        conn.prepare_cached(sql::QUEUE_STATS)
            .map_err(db)?
            .query_row(named_params! {":queue": queue}, |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                ))
            })
            .map_err(db)?;
    let n = |v: i64| v.max(0) as u64;
    Ok(QueueStats {
        active: n(live - locked - deferred - scheduled),
        locked: n(locked),
        deferred: n(deferred),
        scheduled: n(scheduled),
        dead_lettered: n(dead),
        total: n(live + dead),
        oldest_message_age_ms: oldest.map_or(0, |t| (now - t).max(0)),
    })
}

/// Moves dead letters back to active, count reset, optionally into another queue (6.2).
pub(crate) fn redrive(conn: &Connection, now: i64, queue: &str, o: &RedriveOptions) -> Result<u64> {
    load_queue(conn, queue)?;
    let target = o.target.as_deref().unwrap_or(queue);
    let target_cfg = load_queue(conn, target)?;
    let limit = if o.max == 0 { i64::MAX } else { o.max as i64 };
    let cutoff = now.saturating_sub(o.older_than_ms);
    let rows: Vec<(i64, Option<String>)> = conn
        .prepare_cached(sql::SELECT_DLQ)
        .map_err(db)?
        .query_map(
            named_params! {":queue": queue, ":cutoff": cutoff, ":limit": limit},
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(db)?
        .collect::<rusqlite::Result<_>>()
        .map_err(db)?;
    let mut moved = 0;
    for (id, group) in rows {
        let line = line_of(target_cfg.ordering_mode, group.as_deref());
        let waiting = line_busy(conn, target, line.as_deref())?;
        moved += conn
            .prepare_cached(sql::REDRIVE_ONE)
            .map_err(db)?
            .execute(named_params! {
                ":target": target, ":line": line, ":waiting": waiting, ":now": now, ":id": id,
            })
            .map_err(db)? as u64;
    }
    Ok(moved)
}

/// Deletes dead letters, bounded by max and age (6.2).
pub(crate) fn purge(conn: &Connection, now: i64, queue: &str, o: &PurgeOptions) -> Result<u64> {
    load_queue(conn, queue)?;
    let limit = if o.max == 0 { i64::MAX } else { o.max as i64 };
    delete_dead(
        conn,
        queue,
        now.saturating_sub(o.older_than_ms),
        limit,
        |_, _| true,
    )
}

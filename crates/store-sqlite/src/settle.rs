//! Settlement (2.1–2.9, 3.2): one fenced statement per verb, the receipt written in the
//! same transaction, and the receipt replay for a retried identical request.

use rusqlite::{Connection, OptionalExtension, named_params};

use mqlite_engine_core::sql;
use mqlite_engine_core::{
    BatchResult, Error, LockRef, RECEIPT_TTL_MS, Result, Settlement, SharedClock,
};

use crate::db;
use crate::rows::load_queue;

/// After a row of `line` left play: if it was the line's head, the next row becomes the
/// head. A departing row that was waiting changes nothing (the head is still there).
pub(crate) fn release_line(
    conn: &Connection,
    queue: &str,
    line: Option<&str>,
    was_head: bool,
) -> Result<()> {
    let Some(line) = line.filter(|_| was_head) else {
        return Ok(());
    };
    conn.prepare_cached(sql::RELEASE_LINE)
        .map_err(db)?
        .execute(named_params! {":queue": queue, ":line": line})
        .map_err(db)?;
    Ok(())
}

/// Settles one message within the surrounding transaction.
pub(crate) fn settle(
    conn: &Connection,
    now: i64,
    queue: &str,
    lock: LockRef,
    settlement: &Settlement,
) -> Result<()> {
    let cfg = load_queue(conn, queue)?;
    let token = lock.token.to_string();
    let seq = lock.seq.0;
    // (line, waiting, new state) of the settled row, if the fence let it through.
    let changed: Option<(Option<String>, bool, String)> = match settlement {
        Settlement::Complete => conn
            .prepare_cached(sql::SETTLE_COMPLETE)
            .map_err(db)?
            .query_row(
                named_params! {":seq": seq, ":queue": queue, ":token": token, ":now": now},
                |r| Ok((r.get(0)?, r.get(1)?, "completed".to_owned())),
            )
            .optional(),
        Settlement::Abandon { delay_ms } => conn
            .prepare_cached(sql::SETTLE_ABANDON)
            .map_err(db)?
            .query_row(
                named_params! {
                    ":seq": seq, ":queue": queue, ":token": token, ":now": now,
                    ":delay_ms": delay_ms, ":max_dc": cfg.max_delivery_count,
                },
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional(),
        Settlement::Reject {
            reason,
            description,
        } => conn
            .prepare_cached(sql::SETTLE_REJECT)
            .map_err(db)?
            .query_row(
                named_params! {
                    ":seq": seq, ":queue": queue, ":token": token, ":now": now,
                    ":reason": reason, ":description": description,
                },
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional(),
        Settlement::Defer => conn
            .prepare_cached(sql::SETTLE_DEFER)
            .map_err(db)?
            .query_row(
                named_params! {":seq": seq, ":queue": queue, ":token": token, ":now": now},
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional(),
    }
    .map_err(db)?;
    let op = settlement.op();
    let args = settlement.receipt_args();
    match changed {
        Some((line, waiting, state)) => {
            if state == "completed" || state == "dead_lettered" {
                release_line(conn, queue, line.as_deref(), !waiting)?;
            }
            conn.prepare_cached(sql::RECEIPT_INSERT)
                .map_err(db)?
                .execute(named_params! {
                    ":queue": queue, ":seq": seq, ":token": token, ":op": op,
                    ":args": args, ":expires_at": now.saturating_add(RECEIPT_TTL_MS),
                })
                .map_err(db)?;
            Ok(())
        }
        None => {
            let replay: bool = conn
                .prepare_cached(sql::RECEIPT_LOOKUP)
                .map_err(db)?
                .query_row(
                    named_params! {
                        ":queue": queue, ":seq": seq, ":token": token, ":op": op,
                        ":args": args, ":now": now,
                    },
                    |r| r.get(0),
                )
                .map_err(db)?;
            if replay { Ok(()) } else { Err(Error::LockLost) }
        }
    }
}

/// Completes each item with its own fence; a stale item is ok = false (2.7).
///
/// Each item reads the clock afresh: a lease that lapses while the batch runs is expired
/// for the items after that moment (2.6).
pub(crate) fn complete_batch(
    conn: &Connection,
    clock: &SharedClock,
    queue: &str,
    locks: &[LockRef],
) -> Result<Vec<BatchResult>> {
    load_queue(conn, queue)?;
    let mut out = Vec::with_capacity(locks.len());
    for lock in locks {
        let ok = match settle(conn, clock.now_ms(), queue, *lock, &Settlement::Complete) {
            Ok(()) => true,
            Err(Error::LockLost) => false,
            Err(e) => return Err(e),
        };
        out.push(BatchResult {
            seq: lock.seq,
            ok,
            locked_until_ms: 0,
        });
    }
    Ok(out)
}

/// Renews live leases in one statement (2.5, 2.8): `max(locked_until, now + lock)`,
/// never reviving an expired lease and never shortening one.
pub(crate) fn renew_batch(
    conn: &Connection,
    now: i64,
    queue: &str,
    locks: &[LockRef],
) -> Result<Vec<BatchResult>> {
    let cfg = load_queue(conn, queue)?;
    let text = sql::renew_batch(locks.len());
    let mut params: Vec<rusqlite::types::Value> = vec![
        now.into(),
        cfg.lock_duration_ms.into(),
        queue.to_owned().into(),
    ];
    for l in locks {
        params.push(l.seq.0.into());
        params.push(l.token.to_string().into());
    }
    let mut stmt = conn.prepare(&text).map_err(db)?;
    let renewed: std::collections::HashMap<(i64, String), i64> = stmt
        .query_map(rusqlite::params_from_iter(params), |r| {
            Ok(((r.get(0)?, r.get(1)?), r.get(2)?))
        })
        .map_err(db)?
        .collect::<rusqlite::Result<_>>()
        .map_err(db)?;
    // Keyed by (seq, token): an item with the right number and a wrong token is not ok,
    // even when another item of the batch renewed that message (2.8).
    Ok(locks
        .iter()
        .map(|l| {
            let until = renewed.get(&(l.seq.0, l.token.to_string())).copied();
            BatchResult {
                seq: l.seq,
                ok: until.is_some(),
                locked_until_ms: until.unwrap_or(0),
            }
        })
        .collect())
}

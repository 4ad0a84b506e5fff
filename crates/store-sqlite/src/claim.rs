//! Claiming (1.1–1.7, 3.3, 5.1–5.5): the one-statement claim of `sql::CLAIM` run in a
//! loop inside one transaction, receive-and-delete in the same transaction, and the
//! receive-attempt record that makes a retried receive replay instead of claim anew.

use rusqlite::{Connection, OptionalExtension, named_params};

use mqlite_engine_core::sql;
use mqlite_engine_core::{
    ClaimSpec, Error, LockToken, Message, RECEIPT_TTL_MS, ReceiveMode, Result, SeqNumber,
};

use crate::db;
use crate::rows::{load_queue, message};
use crate::settle::release_line;

/// Claims up to `spec.max_messages` messages of `queue` within the surrounding transaction.
pub(crate) fn claim(
    conn: &Connection,
    now: i64,
    queue: &str,
    spec: &ClaimSpec,
) -> Result<Vec<Message>> {
    let cfg = load_queue(conn, queue)?;
    let mode_code = match spec.mode {
        ReceiveMode::PeekLock => 0i64,
        ReceiveMode::ReceiveAndDelete => 1,
    };
    if let Some(attempt) = &spec.attempt_id {
        let seen: Option<(i64, Vec<u8>)> = conn
            .prepare_cached(sql::ATTEMPT_LOOKUP)
            .map_err(db)?
            .query_row(
                named_params! {":queue": queue, ":attempt": attempt, ":now": now},
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(db)?;
        if let Some((mode, response)) = seen {
            if mode != mode_code {
                return Err(Error::invalid(
                    "receive_attempt_id was used with another receive mode",
                ));
            }
            return Ok(mqlite_engine_core::codec::decode_messages(&response));
        }
    }
    let mut out = Vec::with_capacity(spec.max_messages as usize);
    let mut stmt = conn.prepare_cached(sql::CLAIM).map_err(db)?;
    for _ in 0..spec.max_messages {
        let token = LockToken::random().to_string();
        let row = stmt
            .query_row(
                named_params! {
                    ":now": now, ":lock_ms": cfg.lock_duration_ms,
                    ":token": token, ":queue": queue,
                },
                |r| Ok((message(r)?, r.get::<_, Option<String>>(18)?)),
            )
            .optional()
            .map_err(db)?;
        let Some((mut m, line)) = row else { break };
        if spec.mode == ReceiveMode::ReceiveAndDelete {
            // Deleted in the claim's own transaction; the response carries no lease.
            conn.prepare_cached(sql::DELETE_BY_ID)
                .map_err(db)?
                .execute(named_params! {":id": m.seq.0})
                .map_err(db)?;
            // A claimed row is its line's head: the claim only picks `waiting = 0` rows.
            release_line(conn, queue, line.as_deref(), true)?;
            m.lock_token = None;
            m.locked_until_ms = 0;
        }
        out.push(m);
    }
    // An empty response claimed nothing, so a retry may claim anew; recording it would
    // pin a long-polling attempt to "nothing" for the whole replay window.
    if let Some(attempt) = spec.attempt_id.as_ref().filter(|_| !out.is_empty()) {
        conn.prepare_cached(sql::ATTEMPT_INSERT)
            .map_err(db)?
            .execute(named_params! {
                ":queue": queue, ":attempt": attempt, ":mode": mode_code,
                ":response": mqlite_engine_core::codec::encode_messages(&out),
                ":expires_at": now.saturating_add(RECEIPT_TTL_MS),
            })
            .map_err(db)?;
    }
    Ok(out)
}

/// Locks deferred messages by sequence number under fresh tokens (2.4).
pub(crate) fn receive_deferred(
    conn: &Connection,
    now: i64,
    queue: &str,
    seqs: &[SeqNumber],
) -> Result<Vec<Message>> {
    let cfg = load_queue(conn, queue)?;
    let mut stmt = conn.prepare_cached(sql::CLAIM_DEFERRED).map_err(db)?;
    let mut out = Vec::new();
    for seq in seqs {
        let token = LockToken::random().to_string();
        if let Some(m) = stmt
            .query_row(
                named_params! {
                    ":now": now, ":lock_ms": cfg.lock_duration_ms, ":token": token,
                    ":seq": seq.0, ":queue": queue,
                },
                message,
            )
            .optional()
            .map_err(db)?
        {
            out.push(m);
        }
    }
    Ok(out)
}

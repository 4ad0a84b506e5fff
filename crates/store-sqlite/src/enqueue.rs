//! Enqueue (G1, 4.1–4.4, 5.2, 7.1, 7.2): one INSERT per message inside the caller's
//! transaction, with the dedup entry written in the same transaction.

use rusqlite::{Connection, OptionalExtension, named_params};

use mqlite_engine_core::dedup::dedup_key;
use mqlite_engine_core::sql;
use mqlite_engine_core::{
    EnqueueSlot, Error, MessageState, OrderingMode, OutMessage, Result, SendOptions, SeqNumber,
};

use crate::db;
use crate::rows::{encode_properties, load_queue};

/// The ordering line of a message on a queue of this mode.
pub(crate) fn line_of(mode: OrderingMode, group_id: Option<&str>) -> Option<String> {
    match mode {
        OrderingMode::StrictFifo => Some(String::new()),
        OrderingMode::Standard | OrderingMode::GroupFifo => group_id.map(str::to_owned),
    }
}

/// Whether a new member of `line` must wait behind a row already in play.
pub(crate) fn line_busy(conn: &Connection, queue: &str, line: Option<&str>) -> Result<bool> {
    let Some(line) = line else { return Ok(false) };
    conn.prepare_cached(sql::LINE_BUSY)
        .map_err(db)?
        .query_row(named_params! {":queue": queue, ":line": line}, |r| r.get(0))
        .map_err(db)
}

/// Stores `messages` in `queue` within the surrounding transaction.
pub(crate) fn enqueue(
    conn: &Connection,
    now: i64,
    queue: &str,
    messages: Vec<OutMessage>,
    options: SendOptions,
) -> Result<Vec<EnqueueSlot>> {
    let cfg = load_queue(conn, queue)?;
    if cfg.ordering_mode == OrderingMode::GroupFifo
        && messages
            .iter()
            .any(|m| m.group_id.as_deref().is_none_or(str::is_empty))
    {
        return Err(Error::GroupRequired {
            queue: queue.to_owned(),
        });
    }
    let visible_at = options.scheduled_at_ms.unwrap_or(now).max(0);
    let state = if visible_at > now {
        MessageState::Scheduled
    } else {
        MessageState::Active
    };
    let ttl = options.ttl_ms.unwrap_or(cfg.default_ttl_ms);
    let expires_at = if ttl > 0 {
        visible_at.saturating_add(ttl)
    } else {
        0
    };
    let mut slots = Vec::with_capacity(messages.len());
    for m in messages {
        let dedup = (cfg.dedup_window_ms > 0).then(|| dedup_key(&m));
        if let Some((key, hash)) = &dedup {
            let seen: Option<(i64, String)> = conn
                .prepare_cached(sql::DEDUP_LOOKUP)
                .map_err(db)?
                .query_row(
                    named_params! {":queue": queue, ":key": key, ":now": now},
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()
                .map_err(db)?;
            if let Some((seq, seen_hash)) = seen {
                slots.push(if &seen_hash == hash {
                    EnqueueSlot::Duplicate(SeqNumber(seq))
                } else {
                    EnqueueSlot::Conflict
                });
                continue;
            }
        }
        let group = m.group_id.as_deref().filter(|g| !g.is_empty());
        let line = line_of(cfg.ordering_mode, group);
        let waiting = line_busy(conn, queue, line.as_deref())?;
        let seq: i64 = conn
            .prepare_cached(sql::INSERT_MESSAGE)
            .map_err(db)?
            .query_row(
                named_params! {
                    ":queue": queue,
                    ":state": state.as_str(),
                    ":line": line,
                    ":waiting": waiting,
                    ":now": now,
                    ":visible_at": visible_at,
                    ":expires_at": expires_at,
                    ":body": m.body,
                    ":message_id": m.message_id,
                    ":group_id": group,
                    ":subject": m.subject,
                    ":correlation_id": m.correlation_id,
                    ":reply_to": m.reply_to,
                    ":content_type": m.content_type,
                    ":properties": encode_properties(&m.properties),
                },
                |r| r.get(0),
            )
            .map_err(db)?;
        if let Some((key, hash)) = dedup {
            conn.prepare_cached(sql::DEDUP_INSERT)
                .map_err(db)?
                .execute(named_params! {
                    ":queue": queue, ":key": key, ":hash": hash, ":seq": seq,
                    ":expires_at": now.saturating_add(cfg.dedup_window_ms),
                })
                .map_err(db)?;
        }
        slots.push(EnqueueSlot::Enqueued(SeqNumber(seq)));
    }
    Ok(slots)
}

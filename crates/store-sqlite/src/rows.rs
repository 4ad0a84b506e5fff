//! Decoding rows into domain types, and the queue-config read every transition starts with.

use std::collections::BTreeMap;

use rusqlite::{Connection, OptionalExtension, Row, named_params};

use mqlite_engine_core::sql;
use mqlite_engine_core::{
    Error, LockToken, Message, MessageState, OutMessage, QueueConfig, QueueKind, Result,
};

use crate::db;

/// Decodes a row laid out as `sql::MESSAGE_COLUMNS`.
pub(crate) fn message(r: &Row<'_>) -> rusqlite::Result<Message> {
    let token: Option<String> = r.get(2)?;
    let state: String = r.get(3)?;
    let properties: Option<String> = r.get(17)?;
    Ok(Message {
        seq: mqlite_engine_core::SeqNumber(r.get(0)?),
        delivery_count: r.get(1)?,
        lock_token: token.and_then(|t| t.parse::<LockToken>().ok()),
        state: state.parse().unwrap_or(MessageState::Active),
        enqueued_at_ms: r.get(4)?,
        expires_at_ms: r.get(5)?,
        visible_at_ms: r.get(6)?,
        locked_until_ms: r.get(7)?,
        dead_letter_reason: r.get(8)?,
        dead_letter_description: r.get(9)?,
        content: OutMessage {
            body: r.get(10)?,
            message_id: r.get(11)?,
            group_id: r.get(12)?,
            subject: r.get(13)?,
            correlation_id: r.get(14)?,
            reply_to: r.get(15)?,
            content_type: r.get(16)?,
            properties: properties
                .and_then(|p| serde_json::from_str::<BTreeMap<String, String>>(&p).ok())
                .unwrap_or_default(),
        },
    })
}

/// Encodes properties as a JSON object (NULL when there are none).
pub(crate) fn encode_properties(p: &BTreeMap<String, String>) -> Option<String> {
    if p.is_empty() {
        None
    } else {
        serde_json::to_string(p).ok()
    }
}

/// A queue's kind and configuration.
pub(crate) fn queue_row(r: &Row<'_>, offset: usize) -> rusqlite::Result<(QueueKind, QueueConfig)> {
    let kind: String = r.get(offset)?;
    let mode: String = r.get(offset + 6)?;
    Ok((
        kind.parse().unwrap_or(QueueKind::Queue),
        QueueConfig {
            lock_duration_ms: r.get(offset + 1)?,
            max_delivery_count: r.get(offset + 2)?,
            default_ttl_ms: r.get(offset + 3)?,
            dead_letter_on_expire: r.get::<_, i64>(offset + 4)? != 0,
            dedup_window_ms: r.get(offset + 5)?,
            ordering_mode: mode
                .parse()
                .unwrap_or(mqlite_engine_core::OrderingMode::Standard),
            dlq_max_age_ms: r.get(offset + 7)?,
            dlq_max_count: r.get(offset + 8)?,
            dlq_max_bytes: r.get(offset + 9)?,
        },
    ))
}

/// The configuration of an existing queue, or `NotFound`.
pub(crate) fn load_queue(conn: &Connection, name: &str) -> Result<QueueConfig> {
    conn.prepare_cached(sql::SELECT_QUEUE)
        .map_err(db)?
        .query_row(named_params! {":name": name}, |r| queue_row(r, 0))
        .optional()
        .map_err(db)?
        .map(|(_, cfg)| cfg)
        .ok_or_else(|| Error::queue_not_found(name))
}

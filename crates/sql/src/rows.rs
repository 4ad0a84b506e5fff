//! Decoding rows into domain types, and the queue read every operation starts with.

use mqlite_contract::{
    Error, EventIdentity, LockToken, Message, MessageState, OrderingMode, OutMessage, QueueConfig,
    QueueKind, Result, SeqNumber, types::from_millis,
};
use mqlite_kit::decide;
use std::collections::BTreeMap;

use crate::exec::{Columns, Row, SqlExec, Value};

/// How many columns [`message`] reads (`message_columns!`).
pub const MESSAGE_WIDTH: usize = 20;

/// The number of columns of `queue_columns!()`, which [`queue_row`] decodes.
pub const QUEUE_WIDTH: usize = 13;

/// The number `mqlite_messages.state` stores for `state` (`mqlite-rs/14`; see
/// [`crate::SCHEMA`]).
pub const fn state_code(state: MessageState) -> i64 {
    match state {
        MessageState::Active => 0,
        MessageState::Locked => 1,
        MessageState::Deferred => 2,
        MessageState::Scheduled => 3,
        MessageState::Completed => 4,
        MessageState::DeadLettered => 5,
    }
}

/// The state `mqlite_messages.state` holds as `code` ([`state_code`]); a number outside
/// them is a corrupt row (the column's CHECK refuses one).
pub fn state_of(code: i64) -> Result<MessageState> {
    Ok(match code {
        0 => MessageState::Active,
        1 => MessageState::Locked,
        2 => MessageState::Deferred,
        3 => MessageState::Scheduled,
        4 => MessageState::Completed,
        5 => MessageState::DeadLettered,
        other => {
            return Err(Error::backend(
                "sql",
                crate::exec::CorruptRow(format!("a message's state is {other}, not 0 to 5")),
            ));
        }
    })
}

/// Decodes the columns of `message_columns!` starting at `at`, keeping its texts and
/// body (a [`Row`] has them taken out, left NULL there): no copy of them.
pub fn message(r: &mut impl Columns, at: usize) -> Result<Message> {
    let properties = r.opt_text(at + 17)?;
    let event = r.opt_text(at + 18)?.map(|e| decode_event(&e)).transpose()?;
    Ok(Message {
        seq: SeqNumber(r.int(at)?),
        delivery_count: r.int(at + 1)?,
        lock_token: r
            .opt_text(at + 2)?
            .map(|t| t.parse::<LockToken>())
            .transpose()?,
        state: state_of(r.int(at + 3)?)?,
        enqueued_at_ms: r.int(at + 4)?,
        expires_at_ms: r.int(at + 5)?,
        visible_at_ms: r.int(at + 6)?,
        locked_until_ms: r.int(at + 7)?,
        dead_letter_reason: r.opt_text(at + 8)?,
        dead_letter_description: r.opt_text(at + 9)?,
        content: OutMessage {
            body: r.blob(at + 10)?,
            message_id: r.opt_text(at + 11)?,
            group_id: r.opt_text(at + 12)?,
            subject: r.opt_text(at + 13)?,
            correlation_id: r.opt_text(at + 14)?,
            reply_to: r.opt_text(at + 15)?,
            content_type: r.opt_text(at + 16)?,
            properties: match properties {
                None => BTreeMap::new(),
                Some(p) => serde_json::from_str(&p)
                    .map_err(|e| Error::backend("sql", crate::exec::CorruptRow(e.to_string())))?,
            },
            event,
            priority: u8::try_from(r.int(at + 19)?).map_err(|_| {
                Error::backend("sql", crate::exec::CorruptRow("a priority past 255".into()))
            })?,
        },
    })
}

/// An event identity as stored: a JSON object of its CloudEvents attributes.
pub fn encode_event(e: &EventIdentity) -> String {
    serde_json::json!({
        "source": e.source,
        "id": e.id,
        "type": e.kind,
        "specversion": e.specversion,
        "time": e.time,
    })
    .to_string()
}

fn decode_event(text: &str) -> Result<EventIdentity> {
    let corrupt = |what: &str| Error::backend("sql", crate::exec::CorruptRow(what.to_owned()));
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| corrupt(&e.to_string()))?;
    let field = |k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_owned);
    Ok(EventIdentity {
        source: field("source").ok_or_else(|| corrupt("an event without a source"))?,
        id: field("id").ok_or_else(|| corrupt("an event without an id"))?,
        kind: field("type"),
        specversion: field("specversion"),
        time: field("time"),
    })
}

/// Properties as stored: a JSON object, NULL when there are none.
pub fn encode_properties(p: &BTreeMap<String, String>) -> Option<String> {
    (!p.is_empty()).then(|| {
        serde_json::Value::from_iter(
            p.iter()
                .map(|(k, v)| (k.clone(), serde_json::Value::from(v.as_str()))),
        )
        .to_string()
    })
}

/// A queue's kind and configuration from the columns of `queue_columns!` at `at`.
pub fn queue_row(r: &Row, at: usize) -> Result<(QueueKind, QueueConfig)> {
    Ok((
        r.text(at)?.parse()?,
        QueueConfig {
            lock_duration: from_millis(r.int(at + 1)?),
            max_delivery_count: r.int(at + 2)?,
            default_ttl: from_millis(r.int(at + 3)?),
            dead_letter_on_expire: r.flag(at + 4)?,
            dedup_window: from_millis(r.int(at + 5)?),
            ordering_mode: r.text(at + 6)?.parse::<OrderingMode>()?,
            dlq_max_age_ms: r.int(at + 7)?,
            dlq_max_count: r.int(at + 8)?,
            dlq_max_bytes: r.int(at + 9)?,
            dead_letter_target: r.opt_text(at + 10)?,
            require_message_id: r.flag(at + 11)?,
            status: r.text(at + 12)?.parse()?,
        },
    ))
}

/// A queue's kind and configuration, by name.
pub const SELECT_QUEUE: &str = concat!(
    "SELECT ",
    queue_columns!(),
    " FROM mqlite_queues WHERE name = :name"
);

/// [`SELECT_QUEUE`] and the sequence number the next message takes, in one statement.
pub const SELECT_QUEUE_NEXT_SEQ: &str = concat!(
    "SELECT ",
    queue_columns!(),
    ", ",
    next_seq!(),
    "
  FROM mqlite_queues WHERE name = :name"
);

/// The next sequence number alone, for a send whose queue row the driver knows
/// ([`SqlExec::known_queue`]).
pub const SELECT_NEXT_SEQ: &str = concat!("SELECT ", next_seq!());

/// The row `sql` (one of the queue reads) returns for an existing name, or `NotFound`.
async fn load_row<X: SqlExec>(x: &mut X, sql: &'static str, name: &str) -> Result<Row> {
    let mut rows = x.query(sql, &[(":name", Value::from(name))]).await?;
    if rows.is_empty() {
        return Err(Error::queue_not_found(name));
    }
    Ok(rows.swap_remove(0))
}

/// The kind and configuration of an existing name, or `NotFound`.
pub async fn load_any<X: SqlExec>(x: &mut X, name: &str) -> Result<(QueueKind, QueueConfig)> {
    if let Some(row) = x.known_queue(name) {
        return Ok(row);
    }
    let row = queue_row(&load_row(x, SELECT_QUEUE, name).await?, 0)?;
    x.read_queue(name, &row);
    Ok(row)
}

/// The configuration of a queue that holds messages (a queue or a subscription's
/// backing queue); a topic holds none and is refused.
pub async fn load_queue<X: SqlExec>(x: &mut X, name: &str) -> Result<QueueConfig> {
    decide::holding(name, load_any(x, name).await?)
}

/// The next sequence number ([`SELECT_NEXT_SEQ`]), in the surrounding transaction.
pub async fn next_seq<X: SqlExec>(x: &mut X) -> Result<i64> {
    match x.query(SELECT_NEXT_SEQ, &[]).await?.first() {
        Some(r) => r.int(0),
        None => Err(Error::backend(
            "sql",
            crate::exec::CorruptRow("no next sequence number".into()),
        )),
    }
}

/// [`load_queue`] and the next sequence number for a send: [`SELECT_QUEUE_NEXT_SEQ`]
/// when the driver does not know the queue's row; when it does, [`SELECT_NEXT_SEQ`], or
/// nothing at all for a send of `one` message (None: its insert takes the number itself,
/// see `enqueue::INSERT_ONE`).
pub async fn load_queue_next_seq<X: SqlExec>(
    x: &mut X,
    name: &str,
    one: bool,
) -> Result<(QueueConfig, Option<i64>)> {
    if let Some(known) = x.known_queue(name) {
        let cfg = decide::holding(name, known)?;
        if one {
            return Ok((cfg, None));
        }
        return Ok((cfg, Some(next_seq(x).await?)));
    }
    let row = load_row(x, SELECT_QUEUE_NEXT_SEQ, name).await?;
    let queue = queue_row(&row, 0)?;
    x.read_queue(name, &queue);
    Ok((decide::holding(name, queue)?, Some(row.int(QUEUE_WIDTH)?)))
}

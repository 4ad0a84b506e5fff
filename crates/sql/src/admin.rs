//! Queue administration and the admin reads: upsert/delete/list, cancel, peek, stats,
//! redrive, purge and status (6.2, 7.1, 12.1).

use mqlite_contract::{
    Error, Message, OrderingMode, PeekOptions, PurgeOptions, QueueConfig, QueueInfo, QueueKind,
    QueueStats, RedriveOptions, Result, SeqNumber, types::millis,
};
use std::collections::BTreeSet;

use serde_json::json;

use crate::exec::{SqlExec, Value, exists};
use mqlite_kit::enqueue::{line_of, waiting_flags};
use mqlite_kit::upsert::{Upsert, decide, mode_change_refused};

use crate::line::{Departed, busy_lines};
use crate::rows::{load_queue, queue_row};
use crate::sweeps::{DLQ_OLDEST, DLQ_PICKED};

/// The kind and ordering mode of a name (the upsert's checks, 12.1 and 5.x).
pub const SELECT_QUEUE_KIND: &str =
    "SELECT kind, ordering_mode FROM mqlite_queues WHERE name = :name";

/// Create-or-update of a queue (the kind was checked first: 12.1).
pub const UPSERT_QUEUE: &str = "INSERT INTO mqlite_queues (name, kind, lock_duration_ms,
       max_delivery_count, default_ttl_ms, dead_letter_on_expire, dedup_window_ms,
       ordering_mode, dlq_max_age_ms, dlq_max_count, dlq_max_bytes, dead_letter_target,
       require_message_id, status, created_at)
VALUES (:name, :kind, :lock_ms, :max_dc, :ttl, :dloe, :dedup, :mode, :age, :count, :bytes,
        :dl_target, :require_id, :status, :now)
ON CONFLICT (name) DO UPDATE SET
       lock_duration_ms = excluded.lock_duration_ms,
       max_delivery_count = excluded.max_delivery_count,
       default_ttl_ms = excluded.default_ttl_ms,
       dead_letter_on_expire = excluded.dead_letter_on_expire,
       dedup_window_ms = excluded.dedup_window_ms,
       ordering_mode = excluded.ordering_mode,
       dlq_max_age_ms = excluded.dlq_max_age_ms,
       dlq_max_count = excluded.dlq_max_count,
       dlq_max_bytes = excluded.dlq_max_bytes,
       dead_letter_target = excluded.dead_letter_target,
       require_message_id = excluded.require_message_id,
       status = excluded.status";

/// Whether a queue holds a message in play (its ordering mode is then fixed): a seek of
/// each of the three indexes that hold a queue's rows.
pub const QUEUE_IN_PLAY: &str = concat!(
    "SELECT EXISTS (SELECT 1 FROM mqlite_messages WHERE queue = :queue AND ",
    active_rows!(),
    ")
 OR EXISTS (SELECT 1 FROM mqlite_messages WHERE queue = :queue AND state = 1 /* locked */)
 OR EXISTS (SELECT 1 FROM mqlite_messages WHERE queue = :queue AND ",
    rest_rows!(),
    " AND state <> 5 /* dead_lettered */)"
);

/// Everything a name owns, deleted with it (children first). Messages go by
/// `mqlite_msg_active`, `mqlite_msg_lease` and `mqlite_msg_rest`, which together hold
/// each of them once; a
/// topic's subscriptions by `mqlite_sub_topic`. Receipts stay until their bucket ends:
/// they are keyed by expiry, and sequence numbers never repeat (G1), so a receipt of a
/// deleted queue can only ever replay the settlement it recorded.
pub const DELETE_QUEUE: &[&str] = &[
    // The queue's messages, one statement per index that holds them (`MESSAGE_DELETES`).
    concat!(
        "DELETE FROM mqlite_messages WHERE queue = :name AND ",
        active_rows!()
    ),
    "DELETE FROM mqlite_messages WHERE queue = :name AND state = 1 /* locked */",
    concat!(
        "DELETE FROM mqlite_messages WHERE queue = :name AND ",
        rest_rows!()
    ),
    "DELETE FROM mqlite_dedup WHERE queue = :name",
    "DELETE FROM mqlite_attempts WHERE queue = :name",
    "DELETE FROM mqlite_subscriptions WHERE name = :name OR topic = :name",
    "DELETE FROM mqlite_schedules WHERE queue = :name",
    "DELETE FROM mqlite_queues WHERE name = :name",
];

/// How many of [`DELETE_QUEUE`]'s statements, first, delete the queue's messages.
pub const MESSAGE_DELETES: usize = 3;

/// Every queue, by name.
pub const LIST_QUEUES: &str = concat!(
    "SELECT name, ",
    queue_columns!(),
    " FROM mqlite_queues ORDER BY name"
);

/// Cancel (7.1): only a scheduled message that was never delivered; a backoff-parked
/// redelivery has a delivery count and stays.
pub const CANCEL_SCHEDULED: &str = "DELETE FROM mqlite_messages
 WHERE id = :seq AND queue = :queue AND state = 3 /* scheduled */ AND delivery_count = 0
RETURNING line, waiting";

/// Browsing from a sequence number, optionally in one state (6.2): the first `:max` of
/// each of the three indexes that hold a queue's rows, merged by sequence number; never
/// a walk of other queues' rows. The locked rows come by lease end and are sorted (as
/// many as the queue has in flight). A state skips the indexes that cannot hold it.
pub const PEEK: &str = concat!(
    "SELECT ",
    message_columns!(),
    " FROM mqlite_messages WHERE id IN (
    SELECT id FROM (SELECT id FROM mqlite_messages
                     WHERE queue = :queue AND ",
    active_rows!(),
    " AND id >= :from
                       AND (:state IS NULL OR :state = 0 /* active */)
                     ORDER BY id LIMIT :max)
    UNION ALL
    SELECT id FROM (SELECT id FROM mqlite_messages
                     WHERE queue = :queue AND state = 1 /* locked */ AND id >= :from
                       AND (:state IS NULL OR :state = 1 /* locked */)
                     ORDER BY id LIMIT :max)
    UNION ALL
    SELECT id FROM (SELECT id FROM mqlite_messages
                     WHERE queue = :queue AND ",
    rest_rows!(),
    " AND id >= :from
                       AND (:state IS NULL OR state = :state)
                     ORDER BY id LIMIT :max)
    ORDER BY id LIMIT :max)
 ORDER BY id"
);

/// Stats of one queue: rows in play, locked, deferred, scheduled, dead letters, and the
/// oldest enqueue time in play. One walk each of the queue's claimable rows, its locked
/// rows and the rest in play; dead letters by their own index. Active = in play - the
/// others.
pub const QUEUE_STATS: &str = concat!(
    "SELECT ready.n + held.n + other.n, held.n, other.deferred, other.scheduled,
       (SELECT count(*) FROM mqlite_messages WHERE queue = :queue AND state = 5 /* dead_lettered */),
       min(coalesce(ready.oldest, held.oldest, other.oldest),
           coalesce(held.oldest, other.oldest, ready.oldest),
           coalesce(other.oldest, ready.oldest, held.oldest))
  FROM (SELECT count(*) AS n, min(enqueued_at) AS oldest FROM mqlite_messages
         WHERE queue = :queue AND ",
    active_rows!(),
    ") ready,
       (SELECT count(*) AS n, min(enqueued_at) AS oldest FROM mqlite_messages
         WHERE queue = :queue AND state = 1 /* locked */) held,
       (SELECT count(*) AS n, coalesce(sum(state = 2 /* deferred */), 0) AS deferred,
               coalesce(sum(state = 3 /* scheduled */), 0) AS scheduled,
               min(enqueued_at) AS oldest
          FROM mqlite_messages
         WHERE queue = :queue AND ",
    rest_rows!(),
    "
           AND state <> 5 /* dead_lettered */) other"
);

/// Redrive (6.2, 5.8): each `{id, line, waiting}` of `:items` back to active in
/// `:target`, count reset, TTL cleared, in its target line, in one statement.
pub const REDRIVE_MANY: &str = "UPDATE mqlite_messages
   SET queue = :target, state = 0 /* active */, line = j.value ->> 'line',
       waiting = j.value ->> 'waiting', delivery_count = 0, dead_letter_reason = NULL,
       dead_letter_description = NULL, dead_lettered_at = 0, visible_at = :now,
       expires_at = 0, lock_token = NULL, locked_until = 0
  FROM json_each(:items) j
 WHERE mqlite_messages.id = j.value ->> 'id' AND mqlite_messages.state = 5 /* dead_lettered */";

/// Purge (6.2): the oldest dead letters, bounded by age and count, in one statement.
pub const PURGE: &str = "DELETE FROM mqlite_messages WHERE id IN (
    SELECT id FROM mqlite_messages
     WHERE queue = :queue AND state = 5 /* dead_lettered */ AND dead_lettered_at <= :cutoff
     ORDER BY dead_lettered_at, id LIMIT :limit)";

/// Status: the guard token, the counts of names, the size of the data, and whether the
/// relay outbox was ever used here (its backlog is read only then, so a status creates
/// nothing and never runs a statement that fails). The admin tables are small; nothing
/// here walks messages.
pub const STATUS: &str = "SELECT
    (SELECT value FROM mqlite_meta WHERE key = 'schema_token'),
    (SELECT count(*) FROM mqlite_queues WHERE kind = 'queue'),
    (SELECT count(*) FROM mqlite_queues WHERE kind = 'topic'),
    (SELECT count(*) FROM mqlite_subscriptions),
    (SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()),
    EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'mqlite_relay')";

/// Creates or updates a name of `kind`; another kind under the name is NameConflict
/// (12.1); the ordering mode is fixed while messages are in play.
pub async fn upsert_queue<X: SqlExec>(
    x: &mut X,
    now: i64,
    name: &str,
    kind: QueueKind,
    cfg: &QueueConfig,
    update_only: bool,
) -> Result<()> {
    let existing = match x
        .query(SELECT_QUEUE_KIND, &[(":name", Value::from(name))])
        .await?
        .first()
    {
        Some(r) => Some((
            r.text(0)?.parse::<QueueKind>()?,
            r.text(1)?.parse::<OrderingMode>()?,
        )),
        None => None,
    };
    if decide(name, kind, cfg, update_only, existing)? == Upsert::WriteIfIdle
        && exists(x, QUEUE_IN_PLAY, &[(":queue", Value::from(name))]).await?
    {
        let current = existing.map_or(cfg.ordering_mode, |(_, mode)| mode);
        return Err(mode_change_refused(name, current));
    }
    x.queues_changed();
    x.execute(
        UPSERT_QUEUE,
        &[
            (":name", Value::from(name)),
            (":kind", Value::from(kind.as_str())),
            (":lock_ms", Value::from(cfg.lock_ms())),
            (":max_dc", Value::from(cfg.max_delivery_count)),
            (":ttl", Value::from(cfg.default_ttl_ms())),
            (":dloe", Value::from(cfg.dead_letter_on_expire)),
            (":dedup", Value::from(cfg.dedup_window_ms())),
            (":mode", Value::from(cfg.ordering_mode.as_str())),
            (":age", Value::from(cfg.dlq_max_age_ms)),
            (":count", Value::from(cfg.dlq_max_count)),
            (":bytes", Value::from(cfg.dlq_max_bytes)),
            (
                ":dl_target",
                cfg.dead_letter_target
                    .as_deref()
                    .map_or(Value::Null, Value::from),
            ),
            (":require_id", Value::from(cfg.require_message_id)),
            (":status", Value::from(cfg.status.as_str())),
            (":now", Value::from(now)),
        ],
    )
    .await?;
    Ok(())
}

/// Deletes a name and everything it owns.
pub async fn delete_queue<X: SqlExec>(x: &mut X, name: &str) -> Result<bool> {
    x.queues_changed();
    let mut last = 0;
    for text in DELETE_QUEUE {
        last = x
            .execute(text, &[(":name", Value::from(name))])
            .await?
            .changes;
    }
    Ok(last > 0)
}

/// Every name, by name.
pub async fn list_queues<X: SqlExec>(x: &mut X) -> Result<Vec<QueueInfo>> {
    x.query(LIST_QUEUES, &[])
        .await?
        .iter()
        .map(|r| {
            let (kind, config) = queue_row(r, 1)?;
            Ok(QueueInfo {
                name: r.text(0)?,
                kind,
                config,
            })
        })
        .collect()
}

/// Deletes a never-delivered scheduled message (7.1).
pub async fn cancel<X: SqlExec>(x: &mut X, queue: &str, seq: SeqNumber) -> Result<bool> {
    load_queue(x, queue).await?;
    let gone = x
        .query(
            CANCEL_SCHEDULED,
            &[(":seq", Value::from(seq.0)), (":queue", Value::from(queue))],
        )
        .await?;
    match gone.first() {
        Some(r) => {
            let mut departed = Departed::default();
            departed.add(queue, r.opt_text(0)?, !r.flag(1)?);
            departed.release(x).await?;
            Ok(true)
        }
        None => Ok(false),
    }
}

/// Browses without locking (6.2); never hands out a lease's token.
pub async fn peek<X: SqlExec>(x: &mut X, queue: &str, o: &PeekOptions) -> Result<Vec<Message>> {
    load_queue(x, queue).await?;
    let params = [
        (":queue", Value::from(queue)),
        (":from", Value::from(o.from_seq.map_or(0, |s| s.0))),
        (":state", Value::from(o.state.map(crate::rows::state_code))),
        (":max", Value::from(i64::from(o.max))),
    ];
    let mut found = x.query_messages(PEEK, &params, false).await?;
    for m in &mut found {
        m.lock_token = None;
    }
    Ok(found)
}

/// Counts per state.
pub async fn stats<X: SqlExec>(x: &mut X, now: i64, queue: &str) -> Result<QueueStats> {
    load_queue(x, queue).await?;
    let rows = x
        .query(QUEUE_STATS, &[(":queue", Value::from(queue))])
        .await?;
    let r = rows.first().ok_or_else(|| Error::queue_not_found(queue))?;
    let (live, locked, deferred, scheduled, dead) =
        (r.int(0)?, r.int(1)?, r.int(2)?, r.int(3)?, r.int(4)?);
    let oldest = r.opt_int(5)?;
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

/// Moves dead letters back to active, count reset, optionally into another queue (6.2),
/// each into its target line by the line rule (5.8, 5.9).
pub async fn redrive<X: SqlExec>(
    x: &mut X,
    now: i64,
    queue: &str,
    o: &RedriveOptions,
) -> Result<u64> {
    load_queue(x, queue).await?;
    let target = o.target.as_deref().unwrap_or(queue);
    let target_cfg = load_queue(x, target).await?;
    let limit = if o.max == 0 { i64::MAX } else { o.max as i64 };
    let mut params = vec![
        (":queue", Value::from(queue)),
        (
            ":cutoff",
            Value::from(now.saturating_sub(millis(o.older_than))),
        ),
        (":limit", Value::from(limit)),
    ];
    let statement = match &o.seq_numbers {
        None => DLQ_OLDEST,
        Some(seqs) if seqs.is_empty() => return Ok(0),
        Some(seqs) => {
            let ids = serde_json::Value::from_iter(seqs.iter().map(|s| s.0));
            params.push((":ids", Value::from(ids.to_string())));
            DLQ_PICKED
        }
    };
    let rows = x.query(statement, &params).await?;
    let mut picked: Vec<(i64, Option<String>)> = rows
        .iter()
        .map(|r| Ok((r.int(0)?, r.opt_text(1)?)))
        .collect::<Result<_>>()?;
    if picked.is_empty() {
        return Ok(0);
    }
    if target_cfg.ordering_mode == OrderingMode::GroupFifo
        && picked
            .iter()
            .any(|(_, g)| g.as_deref().is_none_or(str::is_empty))
    {
        return Err(Error::GroupRequired {
            queue: target.to_owned(),
        });
    }
    // A line's order is sequence order: among the redriven members of one idle line,
    // the oldest becomes its head.
    picked.sort_by_key(|(id, _)| *id);
    let lines: Vec<Option<String>> = picked
        .iter()
        .map(|(_, g)| line_of(target_cfg.ordering_mode, g.as_deref()))
        .collect();
    let distinct: BTreeSet<String> = lines.iter().flatten().cloned().collect();
    let busy = busy_lines(x, target, &distinct).await?;
    let waiting = waiting_flags(&lines, &busy);
    let items = serde_json::Value::from_iter(picked.iter().zip(lines.iter().zip(&waiting)).map(
        |((id, _), (line, waits))| json!({"id": id, "line": line, "waiting": i64::from(*waits)}),
    ));
    Ok(x.execute(
        REDRIVE_MANY,
        &[
            (":target", Value::from(target)),
            (":now", Value::from(now)),
            (":items", Value::from(items.to_string())),
        ],
    )
    .await?
    .changes)
}

/// Deletes dead letters, bounded by max and age (6.2); with `every_state`, every
/// message of the queue (the first [`MESSAGE_DELETES`] statements of [`DELETE_QUEUE`]).
pub async fn purge<X: SqlExec>(x: &mut X, now: i64, queue: &str, o: &PurgeOptions) -> Result<u64> {
    load_queue(x, queue).await?;
    if o.every_state {
        let mut n = 0;
        for text in &DELETE_QUEUE[..MESSAGE_DELETES] {
            n += x
                .execute(text, &[(":name", Value::from(queue))])
                .await?
                .changes;
        }
        return Ok(n);
    }
    let limit = if o.max == 0 { i64::MAX } else { o.max as i64 };
    Ok(x.execute(
        PURGE,
        &[
            (":queue", Value::from(queue)),
            (
                ":cutoff",
                Value::from(now.saturating_sub(millis(o.older_than))),
            ),
            (":limit", Value::from(limit)),
        ],
    )
    .await?
    .changes)
}

/// The store's self-description, in one statement: the token, the counts and the size
/// read here, beside what the store says of itself.
pub async fn status<X: SqlExec>(
    x: &mut X,
    backend: &'static str,
    location: String,
    remote: bool,
) -> Result<mqlite_contract::StoreStatus> {
    let rows = x.query(STATUS, &[]).await?;
    let r = rows
        .first()
        .ok_or_else(|| Error::invalid("status returned no row"))?;
    let n = |v: i64| v.max(0) as u64;
    let relay = if r.flag(5)? {
        crate::side_tables::relay_backlog(x).await?
    } else {
        mqlite_contract::RelayBacklog::default()
    };
    Ok(mqlite_contract::StoreStatus {
        relay,
        backend,
        location,
        remote,
        schema_token: r.opt_text(0)?.unwrap_or_default(),
        queues: n(r.int(1)?),
        topics: n(r.int(2)?),
        subscriptions: n(r.int(3)?),
        size_bytes: r.opt_int(4)?.map(n),
    })
}

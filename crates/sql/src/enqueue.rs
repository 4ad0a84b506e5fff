//! Enqueue (G1, 4.1–4.4, 5.1, 5.2, 7.1, 7.2): the whole batch in a fixed number of
//! statements — the queue, one dedup lookup, one busy-line lookup, one INSERT of every
//! row from a JSON array (of one row from bound values when one message is fresh), one
//! INSERT of every dedup entry — inside the caller's transaction.

use std::collections::{BTreeSet, HashMap};

use mqlite_engine_core::enqueue::{
    Fresh, Plan, Timing, dedup_keys, plan, require_groups, slots, waiting_flags,
};
use mqlite_engine_core::{EnqueueSlot, Error, OutMessage, Result, SendOptions, SeqNumber};
use serde_json::json;

use crate::exec::{SqlExec, Value};
use crate::line::busy_lines;
use crate::rows::{encode_event, encode_properties, hex, load_queue};

/// Live dedup entries for the keys of `:keys` (a JSON array), one primary-key seek each
/// (4.1).
pub const DEDUP_LOOKUP: &str = "SELECT d.dedup_key, d.seq, d.body_hash FROM mqlite_dedup d
 WHERE d.queue = :queue AND d.expires_at > :now
   AND d.dedup_key IN (SELECT value FROM json_each(:keys))";

/// Every row of the batch from one JSON array, in array order, so that sequence numbers
/// increase in batch order (G1) and are contiguous: the caller derives them from
/// `last_insert_rowid()` (one writer, one statement), with no RETURNING.
///
/// Numbers never repeat (G1) without AUTOINCREMENT's `sqlite_sequence` row rewritten on
/// every insert: a batch starts above both the largest number present and the
/// `seq_floor` that the `mqlite_seq_floor` trigger records when the largest row is
/// deleted. A send writes no page beyond its rows and their index entries.
pub const INSERT_MESSAGES: &str = "INSERT INTO mqlite_messages (id, queue, state, line,
       waiting, enqueued_at, visible_at, expires_at, body, message_id, group_id, subject,
       correlation_id, reply_to, content_type, properties, event)
SELECT max(coalesce((SELECT max(id) FROM mqlite_messages), 0),
           coalesce((SELECT CAST(value AS INTEGER) FROM mqlite_meta
                      WHERE key = 'seq_floor'), 0)) + 1 + j.key,
       :queue, :state, j.value ->> 'line', j.value ->> 'waiting', :now, :visible_at,
       :expires_at, coalesce(unhex(j.value ->> 'body'), X''), j.value ->> 'message_id',
       j.value ->> 'group_id', j.value ->> 'subject', j.value ->> 'correlation_id',
       j.value ->> 'reply_to', j.value ->> 'content_type', j.value ->> 'properties',
       j.value ->> 'event'
  FROM json_each(:batch) j ORDER BY j.key";

/// One row from bound values: a send of one message, the common case, pays no JSON
/// encoding, parsing or hex for its body (a third of a send's time when it did). The
/// sequence number is chosen as in [`INSERT_MESSAGES`].
pub const INSERT_ONE: &str = "INSERT INTO mqlite_messages (id, queue, state, line, waiting,
       enqueued_at, visible_at, expires_at, body, message_id, group_id, subject,
       correlation_id, reply_to, content_type, properties, event)
VALUES (max(coalesce((SELECT max(id) FROM mqlite_messages), 0),
            coalesce((SELECT CAST(value AS INTEGER) FROM mqlite_meta
                       WHERE key = 'seq_floor'), 0)) + 1,
       :queue, :state, :line, :waiting, :now, :visible_at, :expires_at,
       coalesce(:body, X''), :message_id, :group_id, :subject, :correlation_id,
       :reply_to, :content_type, :properties, :event)";

/// The dedup entries of the fresh rows (an expired entry for a key is replaced).
pub const DEDUP_INSERT: &str = "INSERT OR REPLACE INTO mqlite_dedup
       (queue, dedup_key, body_hash, seq, expires_at)
SELECT :queue, j.value ->> 'key', j.value ->> 'hash', j.value ->> 'seq', :expires_at
  FROM json_each(:entries) j";

/// A JSON batch longer than this is split: SQLite refuses a string longer than its
/// length limit (one billion bytes by default), and hex doubles a body. Below it, a
/// send is one INSERT however many messages it holds.
pub const MAX_BATCH_JSON_BYTES: usize = 256 << 20;

/// Stores `messages` in `queue` within the surrounding transaction.
pub async fn enqueue<X: SqlExec>(
    x: &mut X,
    now: i64,
    queue: &str,
    mut messages: Vec<OutMessage>,
    options: SendOptions,
) -> Result<Vec<EnqueueSlot>> {
    let cfg = load_queue(x, queue).await?;
    require_groups(queue, &cfg, &messages)?;
    let Timing {
        state,
        visible_at,
        expires_at,
    } = Timing::of(now, &options, &cfg);

    // Dedup (4.1–4.3): against live entries, then against earlier slots of this batch.
    let keys = dedup_keys(&messages, &cfg);
    let seen = live_entries(x, now, queue, &keys).await?;
    let plans = plan(&keys, &seen);

    // Lines (5.1): each fresh row waits if its line is busy or an earlier row of this
    // batch joined it first.
    let fresh = Fresh::of(&plans, &messages, cfg.ordering_mode);
    let busy = busy_lines(x, queue, &fresh.distinct_lines()).await?;
    let Fresh {
        slots: fresh,
        lines,
    } = fresh;
    let waiting = waiting_flags(&lines, &busy);

    let mut seqs: HashMap<usize, SeqNumber> = HashMap::new();
    // What every row of this send shares, bound once per statement.
    let shared = || {
        vec![
            (":queue", Value::from(queue)),
            (":state", Value::from(state.as_str())),
            (":now", Value::from(now)),
            (":visible_at", Value::from(visible_at)),
            (":expires_at", Value::from(expires_at)),
        ]
    };
    let params = |batch: String| {
        let mut p = shared();
        p.push((":batch", Value::from(batch)));
        p
    };
    if let [i] = fresh[..] {
        let body = std::mem::take(&mut messages[i].body);
        let m = &messages[i];
        let text = |v: Option<&str>| v.map_or(Value::Null, Value::from);
        let mut row = shared();
        row.extend([
            (":line", text(lines[0].as_deref())),
            (":waiting", Value::from(i64::from(waiting[0]))),
            (":body", Value::Blob(body)),
            (":message_id", text(m.message_id.as_deref())),
            (
                ":group_id",
                text(m.group_id.as_deref().filter(|g| !g.is_empty())),
            ),
            (":subject", text(m.subject.as_deref())),
            (":correlation_id", text(m.correlation_id.as_deref())),
            (":reply_to", text(m.reply_to.as_deref())),
            (":content_type", text(m.content_type.as_deref())),
            (
                ":properties",
                encode_properties(&m.properties).map_or(Value::Null, Value::from),
            ),
            (
                ":event",
                m.event
                    .as_ref()
                    .map_or(Value::Null, |e| Value::from(encode_event(e))),
            ),
        ]);
        let done = x.execute(INSERT_ONE, &row).await?;
        if done.changes != 1 {
            return Err(Error::backend(
                "sql",
                crate::exec::CorruptRow(format!("inserted {} rows of 1", done.changes)),
            ));
        }
        seqs.insert(i, SeqNumber(done.last_insert_rowid));
    } else {
        let mut chunk: Vec<serde_json::Value> = Vec::new();
        let mut chunk_index: Vec<usize> = Vec::new();
        let mut chunk_bytes = 0usize;
        for (pos, i) in fresh.iter().enumerate() {
            let m = &messages[*i];
            let row = json!({
                "line": lines[pos],
                "waiting": i64::from(waiting[pos]),
                "body": hex(&m.body),
                "message_id": m.message_id,
                "group_id": m.group_id.as_deref().filter(|g| !g.is_empty()),
                "subject": m.subject,
                "correlation_id": m.correlation_id,
                "reply_to": m.reply_to,
                "content_type": m.content_type,
                "properties": encode_properties(&m.properties),
                "event": m.event.as_ref().map(encode_event),
            });
            let size = m.body.len() * 2 + 256;
            if !chunk.is_empty() && chunk_bytes + size > MAX_BATCH_JSON_BYTES {
                insert_chunk(x, &params, &mut chunk, &mut chunk_index, &mut seqs).await?;
                chunk_bytes = 0;
            }
            chunk.push(row);
            chunk_index.push(*i);
            chunk_bytes += size;
        }
        insert_chunk(x, &params, &mut chunk, &mut chunk_index, &mut seqs).await?;
    }

    let entries: Vec<serde_json::Value> = fresh
        .iter()
        .filter_map(|i| match &plans[*i] {
            Plan::Insert { key: Some((k, h)) } => {
                Some(json!({"key": k, "hash": h, "seq": seqs[i].0}))
            }
            _ => None,
        })
        .collect();
    if !entries.is_empty() {
        x.execute(
            DEDUP_INSERT,
            &[
                (":queue", Value::from(queue)),
                (
                    ":entries",
                    Value::from(serde_json::Value::from(entries).to_string()),
                ),
                (
                    ":expires_at",
                    Value::from(now.saturating_add(cfg.dedup_window_ms())),
                ),
            ],
        )
        .await?;
    }
    Ok(slots(&plans, &seqs))
}

/// The live dedup entries for the keys among `keys`: key -> (seq, body hash).
async fn live_entries<X: SqlExec>(
    x: &mut X,
    now: i64,
    queue: &str,
    keys: &[Option<(String, String)>],
) -> Result<HashMap<String, (SeqNumber, String)>> {
    let distinct: BTreeSet<&str> = keys.iter().flatten().map(|(k, _)| k.as_str()).collect();
    if distinct.is_empty() {
        return Ok(HashMap::new());
    }
    let json = serde_json::Value::from_iter(distinct.into_iter().map(serde_json::Value::from));
    x.query(
        DEDUP_LOOKUP,
        &[
            (":queue", Value::from(queue)),
            (":now", Value::from(now)),
            (":keys", Value::from(json.to_string())),
        ],
    )
    .await?
    .iter()
    .map(|r| Ok((r.text(0)?, (SeqNumber(r.int(1)?), r.text(2)?))))
    .collect()
}

/// Inserts the rows gathered so far and maps their batch indexes to sequence numbers.
async fn insert_chunk<X: SqlExec>(
    x: &mut X,
    params: &dyn Fn(String) -> Vec<(&'static str, Value)>,
    chunk: &mut Vec<serde_json::Value>,
    index: &mut Vec<usize>,
    seqs: &mut HashMap<usize, SeqNumber>,
) -> Result<()> {
    if chunk.is_empty() {
        return Ok(());
    }
    let batch = serde_json::Value::from(std::mem::take(chunk)).to_string();
    let done = x.execute(INSERT_MESSAGES, &params(batch)).await?;
    let n = index.len() as i64;
    if done.changes != n as u64 {
        return Err(Error::backend(
            "sql",
            crate::exec::CorruptRow(format!("inserted {} rows of {n}", done.changes)),
        ));
    }
    // One statement on the one writer: the ids are contiguous and end at the last one.
    let first = done.last_insert_rowid - n + 1;
    for (k, i) in std::mem::take(index).into_iter().enumerate() {
        seqs.insert(i, SeqNumber(first + k as i64));
    }
    Ok(())
}

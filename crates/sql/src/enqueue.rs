//! Enqueue (G1, 4.1–4.4, 5.1, 5.2, 7.1, 7.2): the whole batch in a fixed number of
//! statements — the queue, one dedup lookup, one busy-line lookup, one INSERT of every
//! row from a JSON array (of one row from bound values when one message is fresh), one
//! INSERT of every dedup entry — inside the caller's transaction.

use std::collections::{BTreeSet, HashMap};

use mqlite_contract::{EnqueueSlot, Error, OutMessage, Result, SendOptions, SeqNumber};
use mqlite_kit::enqueue::{
    Fresh, Plan, Timing, dedup_keys, line_of, plan, require_groups, slots, waiting_flags,
};
use serde_json::json;

use crate::exec::{Numbered, SqlExec, Value, wrong_row_count};
use crate::line::busy_lines;
use crate::rows::{encode_event, encode_properties, load_queue_next_seq};
use crate::values::{self, Texts};

/// Live dedup entries for the keys of `:keys` (a JSON array), one primary-key seek each
/// (4.1).
pub const DEDUP_LOOKUP: &str = "SELECT d.dedup_key, d.seq, d.body_hash FROM mqlite_dedup d
 WHERE d.queue = :queue AND d.expires_at > :now
   AND d.dedup_key IN (SELECT value FROM json_each(:keys))";

/// The values of a send that every row shares, bound as `?1` … `?7` of
/// [`INSERT_ROWS`]: queue, state, now, visible_at, expires_at, the number of rows, and
/// the first row's sequence number.
pub const SHARED_PARAMS: usize = 7;

/// The values of one row of [`INSERT_ROWS`], bound positionally after the shared ones:
/// line, waiting, body, message_id, group_id, subject, correlation_id, reply_to,
/// content_type, properties, event, priority.
pub const ROW_PARAMS: usize = 12;

/// The largest send fits one INSERT.
const _: () = assert!(
    crate::values::SIZES[crate::values::SIZES.len() - 1] >= mqlite_contract::limits::MAX_SEND_BATCH
);

/// The multi-row INSERT of a send, one text per size of [`crate::values`]: up to `n`
/// rows from positionally bound values, rows at or past `?6` left out. Row k takes
/// sequence number `?7 + k`, read with the queue ([`crate::rows::SELECT_QUEUE_NEXT_SEQ`]) in the
/// same transaction, so numbers increase in batch order and are contiguous (G1). The
/// statement does not read the table it writes, so SQLite inserts the rows as it reads
/// them, with no copy in between.
pub static INSERT_ROWS: Texts = Texts::new(|| {
    values::build(MAX_INSERT_ROWS, |n| {
        insert_rows("?7", SHARED_PARAMS + 1, n, "")
    })
});

/// The most rows one [`INSERT_ROWS`] (or [`INSERT_ROWS_NEXT`]) text holds, its largest
/// size: sends merged past it are inserted in pieces of this many.
pub const MAX_INSERT_ROWS: usize = mqlite_contract::limits::MAX_SEND_BATCH.next_power_of_two();

// The largest text's parameters have names.
const _: () = assert!(SHARED_PARAMS + 1 + MAX_INSERT_ROWS * ROW_PARAMS <= values::MAX_PARAMS);
// And it is one of the sizes: the largest is MAX_INSERT_ROWS rows.
const _: () = assert!(values::SIZES[values::SIZES.len() - 1] == MAX_INSERT_ROWS);

/// The sends of one message each that a remote driver's group holds for one queue
/// ([`INSERT_ONE`]'s values with a NULL `?6`, the same `?1` … `?5`) as ONE multi-row
/// INSERT: `?1` … `?5` as in [`INSERT_ROWS`], `?6` the number of rows, then each row's
/// [`ROW_PARAMS`] values. Row k takes the next sequence number plus k, read inside
/// the statement: since it reads the table it writes, SQLite computes every row (and
/// that number, once) before it inserts the first, so the numbers are contiguous and in
/// row order (G1). Returns the numbers.
pub static INSERT_ROWS_NEXT: Texts =
    Texts::new(|| values::build(MAX_INSERT_ROWS, |n| insert_rows_next(n, "\nRETURNING id")));

/// [`INSERT_ROWS_NEXT`] without `RETURNING`: the rows are numbered consecutively in
/// row order, so a local driver counts their numbers back from the last row's rowid
/// ([`SqlExec::insert_numbered`]).
pub static INSERT_ROWS_NEXT_PLAIN: Texts =
    Texts::new(|| values::build(MAX_INSERT_ROWS, |n| insert_rows_next(n, "")));

/// The values of one row of [`INSERT_ROWS_NEXT_BODIES`]: body and priority.
pub const BODY_PARAMS: usize = 2;

/// [`INSERT_ROWS_NEXT`] for sends of messages of only a body ([`is_body_only`]): each
/// row's values are its body and its priority ([`BODY_PARAMS`]), the other columns
/// keep their defaults. A remote driver's group sends it in place of
/// [`INSERT_ROWS_NEXT`] when every send it merges is of such a message: the client and
/// sqld parse each of a statement's terms, and a row here has 3 where it has 13 there.
pub static INSERT_ROWS_NEXT_BODIES: Texts = Texts::new(|| {
    values::build(MAX_INSERT_ROWS, |n| {
        format!(
            "INSERT INTO mqlite_messages (id, queue, state, enqueued_at, visible_at,
       expires_at, body, priority)
SELECT ({}) + v.column1, ?1, ?2, ?3, ?4, ?5, v.column2, v.column3
  FROM (VALUES {}) AS v WHERE v.column1 < ?6
RETURNING id",
            next_seq!(),
            values::rows(SHARED_PARAMS, n, BODY_PARAMS, true)
        )
    })
});

/// [`INSERT_ROWS_NEXT_BODIES`] from the number `:first`, which the caller knows to be
/// above every number handed out (G1): no read of the next number. The libSQL store's
/// group sends it when its request is these sends alone and the last request it sent
/// taught it the number (its `NextNumber`). Its parameters are
/// [`bodies_next_params`]' and `:first`.
pub static INSERT_ROWS_AT_BODIES: Texts = Texts::new(|| {
    values::build(MAX_INSERT_ROWS, |n| {
        format!(
            "INSERT INTO mqlite_messages (id, queue, state, enqueued_at, visible_at,
       expires_at, body, priority)
SELECT :first + v.column1, ?1, ?2, ?3, ?4, ?5, v.column2, v.column3
  FROM (VALUES {}) AS v WHERE v.column1 < ?6
RETURNING id",
            values::rows(SHARED_PARAMS, n, BODY_PARAMS, true)
        )
    })
});

/// The parameters of [`INSERT_ROWS_NEXT_BODIES`] for `n` rows: the shared values, the
/// row count, then each row's body and priority.
pub fn bodies_next_params(
    shared: impl IntoIterator<Item = Value>,
    n: usize,
    rows: impl IntoIterator<Item = Value>,
) -> Vec<(&'static str, Value)> {
    next_params(shared, n, rows, BODY_PARAMS)
}

/// The text of [`INSERT_ROWS_NEXT`] for `n` rows, then `tail`.
fn insert_rows_next(n: usize, tail: &str) -> String {
    insert_rows(concat!("(", next_seq!(), ")"), SHARED_PARAMS, n, tail)
}

/// The multi-row INSERT of `n` rows whose values start at `?first`, row k numbered
/// `base + k`, then `tail`.
fn insert_rows(base: &str, first: usize, n: usize, tail: &str) -> String {
    format!(
        "INSERT INTO mqlite_messages (id, queue, state, line, waiting, enqueued_at,
       visible_at, expires_at, body, message_id, group_id, subject, correlation_id,
       reply_to, content_type, properties, event, priority)
SELECT {base} + v.column1, ?1, ?2, v.column2, v.column3, ?3, ?4, ?5,
       coalesce(v.column4, X''), v.column5, v.column6, v.column7, v.column8, v.column9,
       v.column10, v.column11, v.column12, v.column13
  FROM (VALUES {}) AS v WHERE v.column1 < ?6{tail}",
        values::rows(first, n, ROW_PARAMS, true)
    )
}

/// The head of [`INSERT_ONE`] and [`INSERT_ONE_OWNED`]: the table and its columns.
macro_rules! insert_one_columns {
    () => {
        "INSERT INTO mqlite_messages (queue, state, enqueued_at, visible_at,
       expires_at, id, line, waiting, body, message_id, group_id, subject,
       correlation_id, reply_to, content_type, properties, event, priority)
"
    };
}

/// The row's values of [`INSERT_ONE`] and [`INSERT_ONE_OWNED`], in the columns' order.
macro_rules! insert_one_values {
    () => {
        concat!(
            "?1, ?2, ?3, ?4, ?5, coalesce(?6, (SELECT ",
            next_seq!(),
            ")), ?7, ?8, coalesce(?9, X''), ?10, ?11, ?12, ?13, ?14,
       ?15, ?16, ?17, ?18"
        )
    };
}

/// The text of [`INSERT_ONE`] without its `RETURNING id` ([`INSERT_ONE_PLAIN`]).
macro_rules! insert_one {
    () => {
        concat!(insert_one_columns!(), "VALUES (", insert_one_values!(), ")")
    };
}

/// One row from bound values: a send of one message, the common case, pays no JSON
/// encoding, parsing or hex for its body (a third of a send's time when it did). Bound by
/// position (no name lookups): the values every row shares as in [`INSERT_ROWS`]
/// (`?1` … `?5`), the row's sequence number `?6`, then the row's own values in
/// [`ROW_PARAMS`]' order. A NULL `?6` takes the next number here (as
/// [`crate::rows::SELECT_NEXT_SEQ`] reads it): a send to a queue the driver knows is this
/// one statement. Returns the number. (The flows run it through
/// [`SqlExec::insert_numbered`], which may run [`INSERT_ONE_PLAIN`] instead.)
pub const INSERT_ONE: &str = concat!(insert_one!(), "\nRETURNING id");

/// [`INSERT_ONE`] without `RETURNING`: the number is the row's rowid (`id` is the
/// table's INTEGER PRIMARY KEY), which a local driver reads from its connection. SQLite
/// runs a `RETURNING` clause by collecting the rows in a temporary table first, which
/// cost a single send about 3 µs of its 40 (docs/benchmark.md).
pub const INSERT_ONE_PLAIN: &str = insert_one!();

/// [`INSERT_ONE`] that stores nothing unless the owner epoch in force is `:epoch`
/// (`owner_holds!`): a remote store's send of one carries its owner's check in the
/// insert rather than in a statement of its own. It returns its number, or no row for a
/// deposed owner (the store then asks the epoch to be sure).
pub const INSERT_ONE_OWNED: &str = concat!(
    insert_one_columns!(),
    "SELECT ",
    insert_one_values!(),
    " WHERE ",
    owner_holds!(),
    "\nRETURNING id"
);

/// The columns a message of only a body (and a priority) fills ([`is_body_only`]): one with no line, no ids, no
/// header and no properties, whose other columns keep their defaults (NULL, `waiting`
/// 0).
macro_rules! insert_body_columns {
    () => {
        "INSERT INTO mqlite_messages (queue, state, enqueued_at, visible_at, expires_at, id,
       body, priority)
SELECT ?1, ?2, ?3, ?4, ?5, "
    };
}

/// The row of `mqlite_meta` that is there only while the owner epoch in force is
/// `:epoch`: the one row an insert of [`INSERT_BODY_OWNED`] selects its values from.
macro_rules! owner_row {
    () => {
        "\n  FROM mqlite_meta WHERE key = 'owner_epoch' AND value = :epoch"
    };
}

/// [`INSERT_ONE_OWNED`] for a message of only a body ([`is_body_only`]): the columns it leaves out
/// take their defaults, and the owner's check is the row its values are selected from,
/// so a deposed owner's insert stores nothing. The libSQL client and sqld each parse a
/// statement's text into a tree before SQLite compiles it, at a cost that grows with
/// its terms: this form parses in two thirds of [`INSERT_ONE_OWNED`]'s time, and its
/// request takes about 50 µs less on loopback (docs/benchmark.md).
pub const INSERT_BODY_OWNED: &str = concat!(
    insert_body_columns!(),
    next_seq!(),
    ", ?9, ?18",
    owner_row!(),
    "\nRETURNING id"
);

/// [`INSERT_BODY_OWNED`] under the number `?6`, which the caller knows to be above every
/// number handed out (G1): no read of the next number. The libSQL store sends it for a
/// send of one right after a request that taught it the number (a send of one, or a
/// group's merged sends), at the number after the largest that request stored (its
/// `NextNumber`: no other request went out between the two).
pub const INSERT_BODY_AT_OWNED: &str = concat!(
    insert_body_columns!(),
    "?6, ?9, ?18",
    owner_row!(),
    "\nRETURNING id"
);

/// Whether a send of one bound for [`INSERT_ONE`] (`params`, in its order) is of a
/// message of only a body (and a priority), which [`INSERT_BODY_OWNED`] stores as well: it takes the next number (a NULL
/// `?6`) and leaves every column that form does not name at its default (no line, not
/// waiting, no ids, header or properties).
pub fn is_body_only(params: crate::exec::Params<'_>) -> bool {
    let value = |n: usize| params.get(n - 1).map(|(_, v)| v);
    params.len() == SHARED_PARAMS - 1 + ROW_PARAMS
        && value(8) == Some(&Value::Int(0))
        && [6, 7, 10, 11, 12, 13, 14, 15, 16, 17]
            .into_iter()
            .all(|n| value(n) == Some(&Value::Null))
}

/// The values of a send of one bound for [`INSERT_ONE`] that [`INSERT_BODY_OWNED`] and a
/// row of [`INSERT_ROWS_NEXT_BODIES`] store ([`BODY_PARAMS`]): its body (`?9`) and its
/// priority (`?18`).
pub fn body_values(params: crate::exec::Params<'_>) -> [Value; BODY_PARAMS] {
    [8, 17].map(|i| params.get(i).map_or(Value::Null, |(_, v)| v.clone()))
}

/// The dedup entries of the fresh rows (an expired entry for a key is replaced).
pub const DEDUP_INSERT: &str = "INSERT OR REPLACE INTO mqlite_dedup
       (queue, dedup_key, body_hash, seq, expires_at)
SELECT :queue, j.value ->> 'key', j.value ->> 'hash', j.value ->> 'seq', :expires_at
  FROM json_each(:entries) j";

/// A send whose values are larger than this takes one INSERT per this many bytes: a
/// remote driver may send them as literals in the statement's text, which SQLite
/// refuses past its length limit (one billion bytes by default), and hex doubles a
/// body.
pub const MAX_CHUNK_BYTES: usize = 256 << 20;

/// Stores `messages` in `queue` within the surrounding transaction. `alone`: the send
/// is the whole of its transaction, so its last statement may carry the commit
/// ([`SqlExec::execute_last`]; a remote store saves a round trip); false inside a
/// larger flow (a publish, an application's transaction).
pub async fn enqueue<X: SqlExec>(
    x: &mut X,
    now: i64,
    queue: &str,
    mut messages: Vec<OutMessage>,
    options: SendOptions,
    alone: bool,
) -> Result<Vec<EnqueueSlot>> {
    // A single message to a queue the driver knows reads nothing first: its insert takes
    // the next number itself.
    let (cfg, next_seq) = load_queue_next_seq(x, queue, messages.len() == 1).await?;
    require_groups(queue, &cfg, &messages)?;
    let timing = Timing::of(now, &options, &cfg);

    // One message with nothing to look up (no dedup window, no line): its row alone.
    if let [message] = &mut messages[..]
        && needs_no_lookup(&cfg, message)
    {
        let shared = shared_values(queue, now, &timing);
        let row = one_params(&shared, next_seq, row_values(message, None, false));
        let seq = one_number(x, &row, alone).await?;
        return Ok(vec![EnqueueSlot::Enqueued(SeqNumber(seq))]);
    }

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
    // The insert is the flow's last statement unless dedup entries follow it.
    let keyed = fresh
        .iter()
        .any(|i| matches!(plans[*i], Plan::Insert { key: Some(_) }));
    let last = alone && !keyed;
    // What every row of this send shares, bound once per statement as `?1` … `?5`.
    let shared = || shared_values(queue, now, &timing);
    if let [i] = fresh[..] {
        let values = row_values(&mut messages[i], lines[0].as_deref(), waiting[0]);
        let row = one_params(&shared(), next_seq, values);
        seqs.insert(i, SeqNumber(one_number(x, &row, last).await?));
    } else {
        // None fresh, or several: then the number was read with the queue.
        let mut next_seq = match next_seq {
            Some(seq) => seq,
            None if fresh.is_empty() => 0,
            None => {
                return Err(Error::backend(
                    "sql",
                    crate::exec::CorruptRow("a batch without its next sequence number".into()),
                ));
            }
        };
        let mut pos = 0;
        while pos < fresh.len() {
            let n = piece_len(&messages, &fresh[pos..]);
            let values = shared()
                .into_iter()
                .chain([Value::from(n as i64), Value::from(next_seq)])
                .chain(fresh[pos..pos + n].iter().enumerate().flat_map(|(k, &i)| {
                    row_values(
                        &mut messages[i],
                        lines[pos + k].as_deref(),
                        waiting[pos + k],
                    )
                }));
            let params = values::bind(values, SHARED_PARAMS + values::rows_for(n) * ROW_PARAMS);
            let text = INSERT_ROWS.get(n);
            let done = if last && pos + n == fresh.len() {
                x.execute_last(text, &params).await?
            } else {
                x.execute(text, &params).await?
            };
            if done.changes != n as u64 {
                return Err(wrong_row_count(done.changes, n));
            }
            for (k, &i) in fresh[pos..pos + n].iter().enumerate() {
                seqs.insert(i, SeqNumber(next_seq + k as i64));
            }
            next_seq += n as i64;
            pos += n;
        }
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

/// The values `?1` … `?5` of [`INSERT_ROWS_NEXT`] that merged rows share: queue, state,
/// now, visible_at, expires_at.
pub type SharedValues = [Value; SHARED_PARAMS - 2];

/// A send of one message whose whole flow is [`INSERT_ONE`] taking the next number
/// itself: a local store's writer may insert it with other such sends in one statement
/// ([`insert_merged`]).
pub struct OneRow {
    /// What it shares with the rows it can be merged with.
    pub shared: SharedValues,
    /// Its own values, in [`ROW_PARAMS`]' order.
    pub row: [Value; ROW_PARAMS],
}

/// The row of a send of `message` alone to `queue` at `now` when its flow is that one
/// INSERT: no dedup window (nothing to look up or write) and no line. None when the
/// send needs more ([`enqueue`] runs it; `message` is untouched then); the send's
/// refusal (a paused queue, a missing group or id) as the error [`enqueue`] gives.
/// Reads the queue's row only if the driver does not know it; writes nothing.
pub async fn one_row<X: SqlExec>(
    x: &mut X,
    now: i64,
    queue: &str,
    message: &mut OutMessage,
    options: &SendOptions,
) -> Result<Option<OneRow>> {
    let (cfg, _) = load_queue_next_seq(x, queue, true).await?;
    require_groups(queue, &cfg, std::slice::from_ref(message))?;
    if !needs_no_lookup(&cfg, message) {
        return Ok(None);
    }
    Ok(Some(OneRow {
        shared: shared_values(queue, now, &Timing::of(now, options, &cfg)),
        row: row_values(message, None, false),
    }))
}

/// Whether `message`'s row is all its send writes: its queue keeps no dedup window (no
/// entry to look up or write) and it joins no line (none to find busy).
fn needs_no_lookup(cfg: &mqlite_contract::QueueConfig, message: &OutMessage) -> bool {
    cfg.dedup_window.is_zero() && line_of(cfg.ordering_mode, message.group_id.as_deref()).is_none()
}

/// The values every row of a send to `queue` at `now` shares (`?1` … `?5`): queue,
/// state, now, visible_at, expires_at.
fn shared_values(queue: &str, now: i64, timing: &Timing) -> SharedValues {
    [
        Value::from(queue),
        Value::from(crate::rows::state_code(timing.state)),
        Value::from(now),
        Value::from(timing.visible_at),
        Value::from(timing.expires_at),
    ]
}

/// Inserts `rows`, sends of one message each that share `shared`, as ONE statement
/// ([`INSERT_ROWS_NEXT`], or [`INSERT_ONE`] for one row; for a driver in this process,
/// [`INSERT_ROWS`] after a read of the next number) and returns their sequence
/// numbers in row order: contiguous, in the rows' order (G1). A refused statement
/// inserted nothing; the rows come back with its error, so each can be inserted alone
/// ([`insert_one`]) and a refusal stays with its own send.
pub async fn insert_merged<X: SqlExec>(
    x: &mut X,
    shared: &SharedValues,
    rows: Vec<[Value; ROW_PARAMS]>,
) -> std::result::Result<Vec<i64>, (Error, Vec<[Value; ROW_PARAMS]>)> {
    let n = rows.len();
    let rows = match <[_; 1]>::try_from(rows) {
        Ok([row]) => {
            let params = one_params(shared, None, row);
            return match one_number(x, &params, false).await {
                Ok(seq) => Ok(vec![seq]),
                Err(e) => Err((e, vec![row_of(params, SHARED_PARAMS - 1)])),
            };
        }
        Err(rows) => rows,
    };
    if x.in_process() {
        return insert_counted(x, shared, rows).await;
    }
    let params = rows_next_params(shared.iter().cloned(), n, rows.into_iter().flatten());
    let insert = Numbered {
        returning: INSERT_ROWS_NEXT.get(n),
        plain: INSERT_ROWS_NEXT_PLAIN.get(n),
    };
    x.insert_numbered(insert, &params, n, false)
        .await
        .map_err(|e| (e, rows_of(params, SHARED_PARAMS - 1, n)))
}

/// [`insert_merged`] for a driver in this process: the next number read first
/// ([`crate::rows::SELECT_NEXT_SEQ`]), then [`INSERT_ROWS`] numbering the rows from it.
/// One statement more than [`INSERT_ROWS_NEXT`], which reads the number inside the
/// INSERT, and cheaper: an INSERT whose SELECT reads the table it writes makes SQLite
/// copy every row to a temporary table before it inserts the first.
async fn insert_counted<X: SqlExec>(
    x: &mut X,
    shared: &SharedValues,
    rows: Vec<[Value; ROW_PARAMS]>,
) -> std::result::Result<Vec<i64>, (Error, Vec<[Value; ROW_PARAMS]>)> {
    let n = rows.len();
    let next = match crate::rows::next_seq(x).await {
        Ok(next) => next,
        Err(e) => return Err((e, rows)),
    };
    let values = shared
        .iter()
        .cloned()
        .chain([Value::from(n as i64), Value::from(next)])
        .chain(rows.into_iter().flatten());
    let params = values::bind(values, SHARED_PARAMS + values::rows_for(n) * ROW_PARAMS);
    match x.execute(INSERT_ROWS.get(n), &params).await {
        Ok(done) if done.changes == n as u64 => Ok((next..next + n as i64).collect()),
        done => {
            let e = match done {
                Ok(done) => wrong_row_count(done.changes, n),
                Err(e) => e,
            };
            Err((e, rows_of(params, SHARED_PARAMS, n)))
        }
    }
}

/// The parameters of [`INSERT_ROWS_NEXT`] for `n` rows: the shared values (`?1` …
/// `?5`), the row count, then each row's [`ROW_PARAMS`] values in order.
pub fn rows_next_params(
    shared: impl IntoIterator<Item = Value>,
    n: usize,
    rows: impl IntoIterator<Item = Value>,
) -> Vec<(&'static str, Value)> {
    next_params(shared, n, rows, ROW_PARAMS)
}

/// The shared values, the row count `n`, then the rows' values, `per_row` each, padded
/// to the size of the text for `n` rows.
fn next_params(
    shared: impl IntoIterator<Item = Value>,
    n: usize,
    rows: impl IntoIterator<Item = Value>,
    per_row: usize,
) -> Vec<(&'static str, Value)> {
    values::bind(
        shared
            .into_iter()
            .chain([Value::from(n as i64)])
            .chain(rows),
        SHARED_PARAMS - 1 + values::rows_for(n) * per_row,
    )
}

/// The sequence numbers an insert of `n` rows returned (`RETURNING id`), in row order
/// (row k of [`INSERT_ROWS_NEXT`] took the next number plus k); a count other than `n`
/// is a corrupt answer.
pub fn returned_numbers(rows: &[crate::Row], n: usize) -> Result<Vec<i64>> {
    let mut numbers = rows.iter().map(|r| r.int(0)).collect::<Result<Vec<_>>>()?;
    if numbers.len() != n {
        return Err(wrong_row_count(numbers.len() as u64, n));
    }
    numbers.sort_unstable();
    Ok(numbers)
}

/// Inserts one row of [`one_row`] alone ([`INSERT_ONE`]), returning its number.
pub async fn insert_one<X: SqlExec>(
    x: &mut X,
    shared: &SharedValues,
    row: [Value; ROW_PARAMS],
) -> Result<i64> {
    one_number(x, &one_params(shared, None, row), false).await
}

/// [`INSERT_ONE`]'s parameters: the shared values, the row's number (None: NULL, the
/// next number), the row.
fn one_params(
    shared: &SharedValues,
    seq: Option<i64>,
    row: [Value; ROW_PARAMS],
) -> Vec<(&'static str, Value)> {
    values::bind(
        shared
            .iter()
            .cloned()
            .chain([seq.map_or(Value::Null, Value::from)])
            .chain(row),
        SHARED_PARAMS - 1 + ROW_PARAMS,
    )
}

/// Runs [`INSERT_ONE`] (`last`: as the flow's last statement) and returns its number.
async fn one_number<X: SqlExec>(
    x: &mut X,
    params: crate::exec::Params<'_>,
    last: bool,
) -> Result<i64> {
    let insert = Numbered {
        returning: INSERT_ONE,
        plain: INSERT_ONE_PLAIN,
    };
    let numbers = x.insert_numbered(insert, params, 1, last).await?;
    match numbers[..] {
        [seq] => Ok(seq),
        _ => Err(wrong_row_count(numbers.len() as u64, 1)),
    }
}

/// The row's values from bound parameters, starting at `from`.
fn row_of(params: Vec<(&'static str, Value)>, from: usize) -> [Value; ROW_PARAMS] {
    let mut values = params.into_iter().skip(from).map(|(_, v)| v);
    std::array::from_fn(|_| values.next().unwrap_or(Value::Null))
}

/// The `n` rows' values from bound parameters, the first row's starting at `from`.
fn rows_of(params: Vec<(&'static str, Value)>, from: usize, n: usize) -> Vec<[Value; ROW_PARAMS]> {
    let mut params = params.into_iter().skip(from);
    (0..n)
        .map(|_| row_of(params.by_ref().take(ROW_PARAMS).collect(), 0))
        .collect()
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

/// One row's own values, in [`ROW_PARAMS`]' order; the body is moved, not copied.
fn row_values(m: &mut OutMessage, line: Option<&str>, waiting: bool) -> [Value; ROW_PARAMS] {
    let text = |v: Option<&str>| v.map_or(Value::Null, Value::from);
    [
        text(line),
        Value::from(i64::from(waiting)),
        Value::Blob(std::mem::take(&mut m.body)),
        text(m.message_id.as_deref()),
        text(m.group_id.as_deref().filter(|g| !g.is_empty())),
        text(m.subject.as_deref()),
        text(m.correlation_id.as_deref()),
        text(m.reply_to.as_deref()),
        text(m.content_type.as_deref()),
        encode_properties(&m.properties).map_or(Value::Null, Value::from),
        m.event
            .as_ref()
            .map_or(Value::Null, |e| Value::from(encode_event(e))),
        Value::from(i64::from(m.priority)),
    ]
}

/// How many of the rows `rest` the next INSERT takes: all of them, unless their values
/// pass [`MAX_CHUNK_BYTES`] (then as many as fit, at least one).
fn piece_len(messages: &[OutMessage], rest: &[usize]) -> usize {
    let mut bytes = 0usize;
    for (n, &i) in rest.iter().enumerate() {
        bytes += messages[i].body.len() * 2 + 256;
        if bytes > MAX_CHUNK_BYTES {
            return n.max(1);
        }
    }
    rest.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params_of(mut m: OutMessage, line: Option<&str>) -> Vec<(&'static str, Value)> {
        let shared: SharedValues = std::array::from_fn(|i| Value::from(i as i64));
        one_params(&shared, None, row_values(&mut m, line, false))
    }

    #[test]
    fn only_a_message_with_nothing_but_a_body_and_a_priority_is_body_only() {
        let mut prioritized = OutMessage::new("b");
        prioritized.priority = 7;
        assert!(is_body_only(&params_of(OutMessage::new("b"), None)));
        assert!(is_body_only(&params_of(prioritized.clone(), None)));
        assert_eq!(
            body_values(&params_of(prioritized, None)),
            [Value::Blob(b"b".to_vec()), Value::Int(7)]
        );
        let mut headed = OutMessage::new("b");
        headed.subject = Some("s".into());
        assert!(!is_body_only(&params_of(headed, None)));
        let mut keyed = OutMessage::new("b");
        keyed.message_id = Some("m".into());
        assert!(!is_body_only(&params_of(keyed, None)));
        assert!(!is_body_only(&params_of(OutMessage::new("b"), Some("g"))));
        // A number of its own: the plain form takes the next one itself.
        let mut numbered = params_of(OutMessage::new("b"), None);
        numbered[5].1 = Value::Int(9);
        assert!(!is_body_only(&numbered));
    }
}

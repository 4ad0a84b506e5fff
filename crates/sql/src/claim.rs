//! Claiming (1.1–1.7, 3.3, 5.1–5.5): peek-lock is ONE statement for the whole batch —
//! pick the eligible heads, lock each under its own token, return them — and
//! receive-and-delete a fixed handful; the receive-attempt record makes a retried
//! receive replay instead of claiming anew.

use std::collections::{BTreeMap, HashMap};

use mqlite_contract::{
    ClaimSpec, LockToken, Message, RECEIPT_TTL_MS, ReceiveMode, Result, SeqNumber,
    limits::{self, MAX_RECEIVE_BATCH},
};
use mqlite_kit::codec::{decode_messages, encode_messages};
use mqlite_kit::decide;
use serde_json::json;

use crate::exec::{SqlExec, Value};
use crate::line::Departed;
use crate::rows::{MESSAGE_WIDTH, load_queue, message};
use crate::values::{self, Texts};

/// The claim, first step: the eligible heads' ids, oldest first, at most `:max` (the
/// candidate search the plan pins hold to `mqlite_msg_active` and one line index per
/// probe). The pick and the lock below are two statements, not one
/// `UPDATE … FROM (pick)`: on a one-message claim the single statement costs about
/// 100 µs, the pick about 40 and the lock 15.
pub const CLAIM: &str = pick_heads!();

/// The claim, second step: lock each picked row under its own token, returning the
/// claimed messages; one text per size of [`crate::values`], `?1` now and `?2` the
/// lease, then an `(id, token)` pair per row (a spare pair is NULL and matches
/// nothing). A picked row is still active: the writer runs both steps in one
/// transaction.
pub static LOCK_PICKED: Texts = Texts::new(|| {
    values::build(MAX_RECEIVE_BATCH as usize, |n| {
        lock_picked(n, concat!("\nRETURNING ", message_columns!()))
    })
});

/// [`LOCK_PICKED`] without `RETURNING`, for a driver in this process that read the
/// picked rows whole first ([`PICK_HEADS`]): SQLite runs a `RETURNING` clause by
/// copying every row it returns, body and all, to a temporary table first.
pub static LOCK_PICKED_PLAIN: Texts =
    Texts::new(|| values::build(MAX_RECEIVE_BATCH as usize, |n| lock_picked(n, "")));

/// The text of [`LOCK_PICKED`] for `n` rows, then `tail`.
fn lock_picked(n: usize, tail: &str) -> String {
    format!(
        "UPDATE mqlite_messages
   SET state = 1 /* locked */,
       locked_until = ?1 + ?2,
       lock_token = p.column2,
       delivery_count = delivery_count + 1
  FROM (VALUES {}) AS p
 WHERE mqlite_messages.id = p.column1 AND mqlite_messages.state = 0 /* active */{tail}",
        values::rows(3, n, 2, false)
    )
}

/// The lock of one row under `:token` for `:lock_ms` from `:now`, counting the delivery:
/// the head of [`LOCK_ONE`] and [`CLAIM_ONE`], which name the row.
macro_rules! lock_one_row {
    () => {
        "UPDATE mqlite_messages
   SET state = 1 /* locked */,
       locked_until = :now + :lock_ms,
       lock_token = :token,
       delivery_count = delivery_count + 1
 WHERE id = "
    };
}

/// The claim's second step for one picked row, from bound values: the common
/// one-message receive parses no JSON.
pub const LOCK_ONE: &str = concat!(
    lock_one_row!(),
    ":id AND state = 0 /* active */
RETURNING ",
    message_columns!()
);

/// A peek-lock receive of one message, the common case, in ONE statement: the pick
/// (what [`CLAIM`] picks with `:max` 1, [`pick_one!`]), evaluated once, and the lock of
/// the row it names under `:token`, returning it (one statement fewer than
/// pick-then-lock).
pub const CLAIM_ONE: &str = concat!(
    lock_one_row!(),
    pick_one!(),
    " AND state = 0 /* active */
RETURNING ",
    message_columns!()
);

/// The text of [`CLAIM_ONE_OWNED`] up to what it returns.
macro_rules! claim_one_owned {
    () => {
        concat!(
            lock_one_row!(),
            "(",
            pick_one!(),
            ") + ",
            owner_zero!(),
            " AND state = 0 /* active */
RETURNING "
        )
    };
}

/// [`CLAIM_ONE`] that fails unless the owner epoch in force is `:epoch`: the id it
/// picks plus `owner_zero!`, evaluated once before the row is sought, so a deposed
/// owner's claim fails ([`crate::exec::OWNER_REFUSED`]) whether the queue holds a
/// message or none, and locks nothing. A remote store's receive of one carries its
/// owner's check so, rather than in a statement of its own, and an empty queue still
/// answers in one request; it sends the form returning every column,
/// [`CLAIM_ONE_OWNED_ALL`].
pub const CLAIM_ONE_OWNED: &str = concat!(claim_one_owned!(), message_columns!());

/// [`CLAIM_ONE_OWNED`] returning every column of the row (`RETURNING *`), in the table's
/// order, where it names the message columns one by one: a remote store's receive of one
/// sends it, and puts the answer's columns in [`crate::MESSAGE_COLUMNS`]' order by the
/// names the answer carries. The client and sqld parse each of a statement's terms,
/// and the request times about 30 µs shorter on loopback (docs/benchmark.md).
pub const CLAIM_ONE_OWNED_ALL: &str = concat!(claim_one_owned!(), "*");

/// Receive-and-delete, first step: the eligible heads themselves, with their lines.
pub const PICK_HEADS: &str = concat!(
    "SELECT ",
    message_columns!(),
    ", line FROM mqlite_messages WHERE id IN (",
    pick_heads!(),
    ")"
);

/// Receive-and-delete, second step: for each `{line, head}` of `:lines`, up to `:max`
/// other members of the line still in play, in sequence order (one seek of
/// `mqlite_msg_line` each). Nothing stays in flight in this mode, so when a head is taken
/// its line's next head (the oldest remaining member) may follow in the same batch,
/// while each is active, visible and unexpired.
pub const LINE_SUCCESSORS: &str = concat!(
    "SELECT ",
    message_columns!(),
    ", line FROM mqlite_messages WHERE id IN (
    SELECT s.id FROM json_each(:lines) j JOIN mqlite_messages s
        ON s.id IN (SELECT x.id FROM mqlite_messages x
                     WHERE x.queue = :queue AND x.line = j.value ->> 'line'
                       AND x.state <> 5 /* dead_lettered */ AND x.id <> j.value ->> 'head'
                     ORDER BY x.id LIMIT :max))"
);

/// Deletes the rows whose ids are in `:ids` (receive-and-delete).
pub const DELETE_IDS: &str =
    "DELETE FROM mqlite_messages WHERE id IN (SELECT value FROM json_each(:ids))";

/// ReceiveDeferred (2.4): deferred, unexpired rows of `:seqs`, locked under the tokens of
/// `:tokens` by position, in one statement.
pub const CLAIM_DEFERRED: &str = concat!(
    "WITH picked AS MATERIALIZED (
    SELECT j.value AS pid, j.key AS k FROM json_each(:seqs) j)
UPDATE mqlite_messages
   SET state = 1 /* locked */, locked_until = :now + :lock_ms,
       lock_token = json_extract(:tokens, '$[' || picked.k || ']'),
       delivery_count = delivery_count + 1
  FROM picked
 WHERE mqlite_messages.id = picked.pid AND mqlite_messages.queue = :queue
   AND mqlite_messages.state = 2 /* deferred */
   AND (mqlite_messages.expires_at = 0 OR mqlite_messages.expires_at > :now)
RETURNING ",
    message_columns!()
);

/// Receive attempt replay (3.3).
pub const ATTEMPT_LOOKUP: &str = "SELECT mode, response FROM mqlite_attempts
 WHERE queue = :queue AND attempt_id = :attempt AND expires_at > :now";

/// Receive attempt record, in the claim's transaction (3.3).
pub const ATTEMPT_INSERT: &str = "INSERT OR REPLACE INTO mqlite_attempts
       (queue, attempt_id, mode, response, expires_at)
VALUES (:queue, :attempt, :mode, :response, :expires_at)";

fn tokens_json(tokens: &[LockToken]) -> String {
    serde_json::Value::from_iter(tokens.iter().map(|t| serde_json::Value::from(t.text())))
        .to_string()
}

/// Claims up to `spec.max_messages` messages of `queue` within the surrounding
/// transaction. More than [`MAX_RECEIVE_BATCH`] is refused as the engine refuses it (the
/// engine checks first; a caller of the store alone would otherwise meet the statement's
/// parameter limit, named in SQL).
pub async fn claim<X: SqlExec>(
    x: &mut X,
    now: i64,
    queue: &str,
    spec: &ClaimSpec,
) -> Result<Vec<Message>> {
    if spec.max_messages > MAX_RECEIVE_BATCH {
        return Err(limits::receive_batch_out_of_range());
    }
    let cfg = load_queue(x, queue).await?;
    let mode_code = decide::mode_code(spec.mode);
    if let Some(attempt) = &spec.attempt_id {
        let seen = x
            .query(
                ATTEMPT_LOOKUP,
                &[
                    (":queue", Value::from(queue)),
                    (":attempt", Value::from(attempt.as_str())),
                    (":now", Value::from(now)),
                ],
            )
            .await?;
        if let Some(r) = seen.first() {
            decide::replay_attempt(r.int(0)?, spec.mode)?;
            return Ok(decode_messages(&r.blob(1)?));
        }
    }
    // A queue paused for receives hands out nothing (19.2); a replayed attempt above
    // answers what it was given before the pause.
    if !cfg.status.hands_out() {
        return Ok(Vec::new());
    }
    let max = i64::from(spec.max_messages);
    let out = match spec.mode {
        ReceiveMode::PeekLock if max == 1 => {
            let token = LockToken::random_batch(1)[0];
            let params = [
                (":queue", Value::from(queue)),
                (":now", Value::from(now)),
                (":lock_ms", Value::from(cfg.lock_ms())),
                (":token", Value::from(token.text())),
            ];
            // Without a receive attempt to record, the claim is the flow's last statement.
            x.query_messages(CLAIM_ONE, &params, spec.attempt_id.is_none())
                .await?
        }
        ReceiveMode::PeekLock if x.in_process() && max > 1 => {
            lock_read(x, now, queue, max, cfg.lock_ms(), spec.attempt_id.is_none()).await?
        }
        ReceiveMode::PeekLock => {
            let picked = x.query(CLAIM, &pick_params(queue, now, max)).await?;
            if picked.is_empty() {
                return Ok(Vec::new());
            }
            let tokens = LockToken::random_batch(picked.len());
            let mut params = vec![
                (":now", Value::from(now)),
                (":lock_ms", Value::from(cfg.lock_ms())),
            ];
            let text = if let ([r], [t]) = (&picked[..], &tokens[..]) {
                params.push((":token", Value::from(t.text())));
                params.push((":id", Value::from(r.int(0)?)));
                LOCK_ONE
            } else {
                let ids = picked
                    .iter()
                    .map(|r| r.int(0))
                    .collect::<Result<Vec<_>>>()?;
                params = lock_params(now, cfg.lock_ms(), ids.into_iter().zip(&tokens));
                LOCK_PICKED.get(picked.len())
            };
            // Without a receive attempt to record, the lock is the flow's last statement.
            let mut out = x
                .query_messages(text, &params, spec.attempt_id.is_none())
                .await?;
            out.sort_by_key(decide::claim_order);
            out
        }
        ReceiveMode::ReceiveAndDelete => receive_and_delete(x, now, queue, max).await?,
    };
    // An empty response claimed nothing, so a retry may claim anew; recording it would
    // pin a long-polling attempt to "nothing" for the whole replay window.
    if let Some(attempt) = spec.attempt_id.as_ref().filter(|_| !out.is_empty()) {
        x.execute(
            ATTEMPT_INSERT,
            &[
                (":queue", Value::from(queue)),
                (":attempt", Value::from(attempt.as_str())),
                (":mode", Value::from(mode_code)),
                (":response", Value::from(encode_messages(&out))),
                (
                    ":expires_at",
                    Value::from(now.saturating_add(RECEIPT_TTL_MS)),
                ),
            ],
        )
        .await?;
    }
    Ok(out)
}

/// The parameters of the pick of `queue`'s eligible heads ([`CLAIM`], [`PICK_HEADS`]).
fn pick_params(queue: &str, now: i64, max: i64) -> [(&'static str, Value); 3] {
    [
        (":queue", Value::from(queue)),
        (":now", Value::from(now)),
        (":max", Value::from(max)),
    ]
}

/// The parameters of [`LOCK_PICKED`] and [`LOCK_PICKED_PLAIN`]: now (`?1`) and the lease
/// (`?2`) lead, then each picked row's id and token, padded to the text's size.
fn lock_params<'t>(
    now: i64,
    lock_ms: i64,
    picked: impl Iterator<Item = (i64, &'t LockToken)>,
) -> Vec<(&'static str, Value)> {
    let pairs: Vec<Value> = picked
        .flat_map(|(id, t)| [Value::from(id), Value::from(t.text())])
        .collect();
    let total = 2 + 2 * values::rows_for(pairs.len() / 2);
    values::bind(
        [Value::from(now), Value::from(lock_ms)]
            .into_iter()
            .chain(pairs),
        total,
    )
}

/// A peek-lock claim of up to `max` messages for a driver in this process: the picked
/// rows read whole ([`PICK_HEADS`]), then locked without `RETURNING`
/// ([`LOCK_PICKED_PLAIN`]), each answered as its lock leaves it ([`decide::lock`]).
/// `last`: the lock is the flow's last statement.
async fn lock_read<X: SqlExec>(
    x: &mut X,
    now: i64,
    queue: &str,
    max: i64,
    lock_ms: i64,
    last: bool,
) -> Result<Vec<Message>> {
    let mut out = x
        .query_messages(PICK_HEADS, &pick_params(queue, now, max), false)
        .await?;
    if out.is_empty() {
        return Ok(out);
    }
    let tokens = LockToken::random_batch(out.len());
    for (m, token) in out.iter_mut().zip(&tokens) {
        decide::lock(m, now, lock_ms, *token);
    }
    let params = lock_params(now, lock_ms, out.iter().map(|m| m.seq.0).zip(&tokens));
    let text = LOCK_PICKED_PLAIN.get(out.len());
    let done = if last {
        x.execute_last(text, &params).await?
    } else {
        x.execute(text, &params).await?
    };
    // The rows were read active in this transaction, so each is locked.
    if done.changes != out.len() as u64 {
        return Err(crate::exec::wrong_row_count(done.changes, out.len()));
    }
    out.sort_by_key(decide::claim_order);
    Ok(out)
}

/// Receive-and-delete: the heads, then each head's line in order while its members are
/// claimable, the oldest `max` of all that, deleted in one statement; the lines they
/// left get their next heads (1.7). Five statements, whatever `max` is.
async fn receive_and_delete<X: SqlExec>(
    x: &mut X,
    now: i64,
    queue: &str,
    max: i64,
) -> Result<Vec<Message>> {
    let base = pick_params(queue, now, max);
    let mut heads = x.query(PICK_HEADS, &base).await?;
    // One chain per head: the head, then (for a line) the members that would become head
    // after it, oldest first, while claimable.
    let mut chains: Vec<(Option<String>, std::collections::VecDeque<Message>)> = heads
        .iter_mut()
        .map(|r| Ok((r.take_opt_text(MESSAGE_WIDTH)?, [message(r, 0)?].into())))
        .collect::<Result<_>>()?;
    let lines: Vec<serde_json::Value> = chains
        .iter()
        .filter_map(|(line, chain)| {
            line.as_ref()
                .map(|l| json!({"line": l, "head": chain[0].seq.0}))
        })
        .collect();
    if !lines.is_empty() {
        let mut rows = x
            .query(
                LINE_SUCCESSORS,
                &[
                    (":queue", Value::from(queue)),
                    (":max", Value::from(max)),
                    (
                        ":lines",
                        Value::from(serde_json::Value::from(lines).to_string()),
                    ),
                ],
            )
            .await?;
        let mut by_line: BTreeMap<String, Vec<Message>> = BTreeMap::new();
        for r in &mut rows {
            if let Some(line) = r.take_opt_text(MESSAGE_WIDTH)? {
                by_line.entry(line).or_default().push(message(r, 0)?);
            }
        }
        for (line, chain) in &mut chains {
            if let Some(mut members) = line.as_ref().and_then(|l| by_line.remove(l)) {
                members.sort_by_key(|m| m.seq);
                chain.extend(
                    members
                        .into_iter()
                        .take_while(|m| decide::claimable(m, now)),
                );
            }
        }
    }
    // The same order as claiming one at a time: always the first claimable front in
    // claim order.
    let limit = usize::try_from(max).unwrap_or(usize::MAX);
    let mut taken: Vec<(Message, Option<String>)> = Vec::new();
    while taken.len() < limit {
        let Some((line, chain)) = chains
            .iter_mut()
            .filter(|(_, c)| !c.is_empty())
            .min_by_key(|(_, c)| decide::claim_order(&c[0]))
        else {
            break;
        };
        if let Some(m) = chain.pop_front() {
            taken.push((m, line.clone()));
        }
    }
    if taken.is_empty() {
        return Ok(Vec::new());
    }
    let ids =
        serde_json::Value::from_iter(taken.iter().map(|(m, _)| serde_json::Value::from(m.seq.0)));
    x.execute(DELETE_IDS, &[(":ids", Value::from(ids.to_string()))])
        .await?;
    let mut departed = Departed::default();
    for (_, line) in &taken {
        departed.add(queue, line.clone(), true);
    }
    departed.release(x).await?;
    Ok(taken
        .into_iter()
        .map(|(mut m, _)| {
            // Counted by this claim (1.3); deleted in its transaction, so no lease.
            m.delivery_count += 1;
            m.state = mqlite_contract::MessageState::Locked;
            m.lock_token = None;
            m.locked_until_ms = 0;
            m
        })
        .collect())
}

/// Locks deferred messages by sequence number under fresh tokens (2.4), in request
/// order.
pub async fn receive_deferred<X: SqlExec>(
    x: &mut X,
    now: i64,
    queue: &str,
    seqs: &[SeqNumber],
) -> Result<Vec<Message>> {
    let cfg = load_queue(x, queue).await?;
    if !cfg.status.hands_out() {
        return Ok(Vec::new());
    }
    let tokens = LockToken::random_batch(seqs.len());
    let json = serde_json::Value::from_iter(seqs.iter().map(|s| serde_json::Value::from(s.0)));
    let params = [
        (":queue", Value::from(queue)),
        (":now", Value::from(now)),
        (":lock_ms", Value::from(cfg.lock_ms())),
        (":seqs", Value::from(json.to_string())),
        (":tokens", Value::from(tokens_json(&tokens))),
    ];
    let mut got: HashMap<SeqNumber, Message> = x
        .query_messages(CLAIM_DEFERRED, &params, false)
        .await?
        .into_iter()
        .map(|m| (m.seq, m))
        .collect();
    Ok(seqs.iter().filter_map(|s| got.remove(s)).collect())
}

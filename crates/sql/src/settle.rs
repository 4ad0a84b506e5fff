//! Settlement (2.1–2.9, 3.2): one fenced statement per verb (per batch, for Complete
//! and Renew), the receipts written in the same transaction, and the receipt replay for
//! a retried identical request.

use mqlite_contract::{
    BatchResult, Error, LockLostReason, LockRef, LockToken, MessageState, OrderingMode,
    QueueConfig, RECEIPT_TTL_MS, Result, Settlement, digest, types::millis,
};
use mqlite_kit::decide;
use std::collections::{HashMap, HashSet};

use serde_json::json;

use crate::exec::{Row, SqlExec, Value};
use crate::values::{self, Texts};
use crate::{line::Departed, rows::load_queue};

/// Complete (2.1): the fence and the token at statement time; the row is deleted.
pub const SETTLE_COMPLETE: &str = concat!(
    "DELETE FROM mqlite_messages WHERE id = :seq AND lock_token = :token AND ",
    fence!(),
    " RETURNING line, waiting, 4 /* completed */"
);

/// Abandon (2.2): back to active, parked in scheduled for a delay (holding its line), or
/// dead-lettered at the delivery bound.
pub const SETTLE_ABANDON: &str = concat!(
    "UPDATE mqlite_messages
   SET state = CASE WHEN delivery_count >= :max_dc THEN 5 /* dead_lettered */
                    WHEN :delay_ms > 0 THEN 3 /* scheduled */ ELSE 0 /* active */ END,
       visible_at = CASE WHEN :delay_ms > 0 THEN :now + :delay_ms ELSE visible_at END,
       dead_letter_reason = CASE WHEN delivery_count >= :max_dc
                    THEN 'MaxDeliveryCountExceeded' ELSE dead_letter_reason END,
       dead_letter_description = CASE WHEN delivery_count >= :max_dc
                    THEN 'abandoned on the final allowed delivery'
                    ELSE dead_letter_description END,
       dead_lettered_at = CASE WHEN delivery_count >= :max_dc THEN :now ELSE 0 END,
       lock_token = NULL, locked_until = 0
 WHERE id = :seq AND lock_token = :token AND ",
    fence!(),
    " RETURNING line, waiting, state"
);

/// Reject (2.3): dead-lettered with the caller's reason.
pub const SETTLE_REJECT: &str = concat!(
    "UPDATE mqlite_messages
   SET state = 5 /* dead_lettered */, dead_letter_reason = :reason,
       dead_letter_description = :description, dead_lettered_at = :now,
       lock_token = NULL, locked_until = 0
 WHERE id = :seq AND lock_token = :token AND ",
    fence!(),
    " RETURNING line, waiting, state"
);

/// Defer (2.4): set aside; it keeps its place at the head of its line.
pub const SETTLE_DEFER: &str = concat!(
    "UPDATE mqlite_messages SET state = 2 /* deferred */, lock_token = NULL, locked_until = 0
 WHERE id = :seq AND lock_token = :token AND ",
    fence!(),
    " RETURNING line, waiting, state"
);

/// The rows of `:items` (`{seq, token}`): each found by its id, and its token one that
/// was presented for that id (2.8: a right number with a wrong token is not a match,
/// even beside an item that has the right token). Both subqueries are uncorrelated, so
/// each reads `:items` once per statement: a correlated token check re-read the whole
/// array for every row, which made a batch's cost per item grow with its size.
macro_rules! presented {
    () => {
        "id IN (SELECT j.value ->> 'seq' FROM json_each(:items) j)
   AND (id, lock_token) IN (SELECT j.value ->> 'seq', j.value ->> 'token'
                              FROM json_each(:items) j)"
    };
}

/// CompleteBatch (2.7): every item of `:items` (`{seq, token}`) whose fence holds is
/// deleted, in one statement; each row is found by its id, and the token must be one
/// presented for that id.
pub const COMPLETE_MANY: &str = concat!(
    "DELETE FROM mqlite_messages WHERE ",
    presented!(),
    " AND ",
    fence!(),
    " RETURNING id, lock_token, line, waiting"
);

/// The most locks a settlement binds by position (two values each, under SQLite's limit
/// of 32,766); a larger complete_batch travels as JSON ([`COMPLETE_MANY`]).
pub const BOUND_LOCKS: usize = 1024;

/// The renewal always fits [`BOUND_LOCKS`].
const _: () = assert!(mqlite_contract::limits::MAX_RENEW_BATCH <= BOUND_LOCKS);

/// The most locks whose bound pairs a settlement tests one by one
/// ([`presented_pairs`]); past it they are a table the statement reads.
const OR_PAIRS: usize = 64;

/// The rows of the `(seq, token)` pairs bound from `?3` on, for `n` pairs: what goes
/// before the statement, and its condition. A row is one whose id and token are the
/// two values of one pair (2.8: a right number with a wrong token is not a match, even
/// beside an item that has the right token); a spare NULL pair matches nothing.
///
/// Up to [`OR_PAIRS`] pairs, each is a term of its own, `(id = ?a AND lock_token = ?b)`,
/// which SQLite finds by the row's id, a term at a time. Past it, the pairs are a table
/// `p(seq, tok)` that each row is looked up in: the positional form of [`presented!`]'s
/// items. The table costs SQLite two temporary B-trees per statement, built and freed
/// however few the pairs: a completion's two statements (the receipts and the delete,
/// on the store's connection settings) over 4 locks took 36–38 µs with it and 26–28 µs
/// with the terms, over 8 locks 62–84 and 44–45 µs; over 64 the two were within the
/// loop's noise, and the drain of 64 in `benches/throughput.rs` ran 603–738 → 531–618
/// µs (docs/benchmark.md). Past 64 the pairs stay a table: terms were not measured
/// there.
fn presented_pairs(n: usize) -> (String, String) {
    use std::fmt::Write as _;
    if n > OR_PAIRS {
        return (
            format!(
                "WITH p(seq, tok) AS MATERIALIZED (VALUES {}) ",
                values::rows(3, n, 2, false)
            ),
            "id IN (SELECT seq FROM p) AND (id, lock_token) IN (SELECT seq, tok FROM p)".to_owned(),
        );
    }
    let mut terms = String::from("(");
    for k in 0..n {
        let at = 3 + 2 * k;
        let _ = write!(
            terms,
            "{}(id = ?{at} AND lock_token = ?{})",
            if k == 0 { "" } else { " OR " },
            at + 1
        );
    }
    terms.push(')');
    (String::new(), terms)
}

/// CompleteBatch (2.7) of at most [`BOUND_LOCKS`] locks: [`COMPLETE_MANY`] with the
/// queue as `?1`, now as `?2` and the locks as bound pairs.
pub static COMPLETE_ROWS: Texts = Texts::new(|| {
    values::build(BOUND_LOCKS, |n| {
        complete_rows(n, " RETURNING id, lock_token, line, waiting")
    })
});

/// The text of [`COMPLETE_ROWS`] for `n` locks, then `tail`.
fn complete_rows(n: usize, tail: &str) -> String {
    let (with, presented) = presented_pairs(n);
    format!(
        "{with}DELETE FROM mqlite_messages WHERE {presented} AND {}{tail}",
        fence!("?1", "?2")
    )
}

/// RenewBatch (2.5, 2.8) in one statement: each live lease of the bound pairs with its
/// current token is extended to `max(locked_until, now + lock)` (`?2 + ?N`, the lease
/// after the pairs): never revived, never shortened.
pub static RENEW_ROWS: Texts = Texts::new(|| {
    values::build(BOUND_LOCKS, |n| {
        let (with, presented) = presented_pairs(n);
        format!(
            "{with}UPDATE mqlite_messages SET locked_until = max(locked_until, ?2 + ?{}) \
             WHERE {presented} AND {} RETURNING id, lock_token, locked_until",
            3 + 2 * n,
            fence!("?1", "?2")
        )
    })
});

/// [`receipt_bucket!`] as a number: the contract's grace for pruning an expired receipt.
pub const RECEIPT_BUCKET_MS: i64 = mqlite_contract::RECEIPT_PRUNE_GRACE_MS;

/// [`receipt_page!`] as a number: how many sequence numbers one receipt entry's page
/// spans.
pub const RECEIPT_PAGE: i64 = 32;

/// The bytes a lock takes in a receipt entry's `items`: its sequence number (8 bytes,
/// big-endian), then its token (16).
pub const RECEIPT_ITEM: usize = 24;

/// Receipts of settlements that took effect (3.2), one entry per page of the settled
/// locks (`{page, seq, token, items}` of `:pages`, `items` in hexadecimal: a batch past
/// [`BOUND_LOCKS`] pages), of one operation and its arguments, in the settlement's own
/// transaction.
pub const RECEIPT_INSERT: &str = concat!(
    "INSERT OR REPLACE INTO mqlite_receipts
       (bucket, page, seq, lock_token, queue, op, args, expires_at, items)
SELECT :expires_at / ",
    receipt_bucket!(),
    ", j.value ->> 'page', j.value ->> 'seq', j.value ->> 'token', :queue, :op, :args,
       :expires_at, unhex(j.value ->> 'items')
  FROM json_each(:pages) j"
);

/// [`RECEIPT_INSERT`] of at most [`BOUND_LOCKS`] pages: queue `?1`, op `?2`, args
/// `?3`, expiry `?4`, then each page's `(page, seq, token, items)`.
pub static RECEIPT_ROWS: Texts = Texts::new(|| {
    values::build(BOUND_LOCKS, |n| {
        format!(
            "INSERT OR REPLACE INTO mqlite_receipts
       (bucket, page, seq, lock_token, queue, op, args, expires_at, items)
SELECT ?4 / {RECEIPT_BUCKET_MS}, p.column1, p.column2, p.column3, ?1, ?2, ?3, ?4, p.column4
  FROM (VALUES {}) AS p
 WHERE p.column1 IS NOT NULL",
            values::rows(5, n, 4, false)
        )
    })
});

/// A CompleteBatch's delete of the locks of the bound pairs whose fence holds and whose
/// message is in no line, bound as [`COMPLETE_ROWS`] binds them, first; the receipts
/// follow from the locks given ([`RECEIPT_ROWS`]), so no receipt reads a message. It
/// returns nothing, and only its count tells whether it took every lock: in this process
/// it runs in a savepoint of its own ([`AT_ONCE`]), taken back when it took fewer; a
/// remote driver sends [`REFUSE_UNLESS_CHANGED`] and the receipts after it in one
/// request, which undoes it unless it took every lock. (Measured on the drain of 64 in
/// `benches/drain_anatomy.rs`: a `RETURNING` of the ids it took, to send only the
/// others the usual way, and a count of the live locks in the same statement, to delete
/// all or none, each cost 0.3 µs a message more than the savepoint; SQLite copies the
/// rows a statement returns to a temporary table before it hands back the first, and the
/// count reads every row twice.)
pub static COMPLETE_UNLINED_ROWS: Texts =
    Texts::new(|| values::build(BOUND_LOCKS, |n| complete_rows(n, " AND line IS NULL")));

/// The savepoint of [`COMPLETE_UNLINED_ROWS`] in this process, and how it is kept
/// ([`AT_ONCE_KEEP`]) or taken back ([`AT_ONCE_UNDO`], then kept).
pub const AT_ONCE: &str = "SAVEPOINT mqlite_complete_at_once";
/// See [`AT_ONCE`].
pub const AT_ONCE_KEEP: &str = "RELEASE mqlite_complete_at_once";
/// See [`AT_ONCE`].
pub const AT_ONCE_UNDO: &str = "ROLLBACK TO mqlite_complete_at_once";

/// The completion of one lock ([`complete_one_at_once`]), first step: the fenced delete of
/// its message when in no line, queue `?1`, now `?2`, the lock's seq `?3` and token
/// `?4`; without `RETURNING` (SQLite copies the rows a statement returns to a temporary
/// table before it hands back the first).
pub const COMPLETE_UNLINED_ONE: &str = concat!(
    "DELETE FROM mqlite_messages WHERE id = ?3 AND lock_token = ?4 AND ",
    fence!("?1", "?2"),
    " AND line IS NULL"
);

/// `lead` then each lock's `(seq, token)`, bound by position and padded to the size of
/// the text for `locks` (see [`crate::values`]).
fn bound_pairs(lead: Vec<Value>, locks: &[LockRef]) -> Vec<(&'static str, Value)> {
    let total = lead.len() + 2 * values::rows_for(locks.len());
    let pairs = locks
        .iter()
        .flat_map(|l| [Value::from(l.seq.0), Value::from(l.token.text())]);
    values::bind(lead.into_iter().chain(pairs), total)
}

/// The receipt of one settled lock, from bound values: the common one-message settlement
/// parses no JSON.
pub const RECEIPT_ONE: &str = concat!(
    "INSERT OR REPLACE INTO mqlite_receipts
       (bucket, page, seq, lock_token, queue, op, args, expires_at, items)
VALUES (:expires_at / ",
    receipt_bucket!(),
    ", :page, :seq, :token, :queue, :op, :args, :expires_at, :items)"
);

/// Which of `:items` (`{seq, token, item}`, `item` the lock's [`RECEIPT_ITEM`] bytes in
/// hexadecimal) have a live receipt of the identical request: expiry is checked here,
/// at statement time, not by the janitor (3.2). One primary-key seek per item and
/// bucket a receipt live at now can be in (from `:bucket`, now's; its expiry at most
/// [`RECEIPT_TTL_MS`], six buckets, later; and one bucket more for a clock that stepped
/// back by up to five minutes since the receipt was written), to the item's page, whose
/// few entries (one per settlement that touched it) are searched for the item's bytes.
/// (A lock's 24 bytes found across two of another entry's items would need 16 bytes of a
/// random token to repeat there.)
pub const RECEIPT_LOOKUP: &str = concat!(
    "SELECT j.value ->> 'seq', j.value ->> 'token' FROM json_each(:items) j
 WHERE EXISTS (SELECT 1 FROM mqlite_receipts r
                WHERE r.bucket IN (:bucket, :bucket + 1, :bucket + 2, :bucket + 3,
                                   :bucket + 4, :bucket + 5, :bucket + 6, :bucket + 7)
                  AND r.page = (j.value ->> 'seq') / ",
    receipt_page!(),
    "
                  AND r.queue = :queue AND r.op = :op AND r.args = :args
                  AND r.expires_at > :now AND instr(r.items, unhex(j.value ->> 'item')) > 0)"
);

/// Why the items of `:items` found no live lease: each message's queue, state, token and
/// lease end, by primary key (only on the failure path, once per call).
pub const LOCK_STATE: &str =
    "SELECT id, queue, state, lock_token, locked_until, delivery_count FROM mqlite_messages
 WHERE id IN (SELECT j.value ->> 'seq' FROM json_each(:items) j)";

/// The reason each of `lost` (items that changed nothing and replayed nothing) lost its
/// lock, keyed by (seq, token).
async fn lost_reasons<X: SqlExec>(
    x: &mut X,
    now: i64,
    queue: &str,
    lost: &[LockRef],
) -> Result<HashMap<(i64, String), LockLostReason>> {
    if lost.is_empty() {
        return Ok(HashMap::new());
    }
    let rows = x
        .query(LOCK_STATE, &[(":items", Value::from(items_json(lost)))])
        .await?;
    let mut found: HashMap<i64, &Row> = HashMap::new();
    for r in &rows {
        found.insert(r.int(0)?, r);
    }
    lost.iter()
        .map(|l| {
            let token = l.token.to_string();
            let seen = match found.get(&l.seq.0) {
                None => None,
                Some(r) => Some(decide::FoundLock {
                    in_queue: r.text(1)? == queue,
                    locked: r.int(2)? == crate::rows::state_code(MessageState::Locked),
                    same_token: r.opt_text(3)?.as_deref() == Some(token.as_str()),
                    locked_until_ms: r.int(4)?,
                    delivery_count: r.int(5)?,
                }),
            };
            let reason = decide::lost_reason(seen, now);
            Ok(((l.seq.0, token), reason))
        })
        .collect()
}

fn items_json(locks: &[LockRef]) -> String {
    serde_json::Value::from_iter(
        locks
            .iter()
            .map(|l| json!({"seq": l.seq.0, "token": l.token.to_string()})),
    )
    .to_string()
}

/// The receipt page of `seq`, as SQL's integer division gives it ([`RECEIPT_LOOKUP`] and
/// the migration compute it there: `seq / 32`, rounded toward zero).
pub fn page_of(seq: i64) -> i64 {
    seq / RECEIPT_PAGE
}

/// The [`RECEIPT_ITEM`] bytes of the lock of `seq` under `token`, added to `items`.
fn push_item(items: &mut Vec<u8>, seq: i64, token: &LockToken) {
    items.extend_from_slice(&seq.to_be_bytes());
    items.extend_from_slice(&token.as_u128().to_be_bytes());
}

/// [`RECEIPT_LOOKUP`]'s items: each lock's seq, token and receipt bytes.
fn lookup_json(locks: &[LockRef]) -> String {
    serde_json::Value::from_iter(locks.iter().map(|l| {
        let mut item = Vec::with_capacity(RECEIPT_ITEM);
        push_item(&mut item, l.seq.0, &l.token);
        json!({"seq": l.seq.0, "token": l.token.to_string(), "item": digest::hex(&item)})
    }))
    .to_string()
}

/// One receipt entry: a settlement's locks in one page (see the schema's
/// `mqlite_receipts`), keyed by its first lock; [`RECEIPT_ROWS`] binds its four fields
/// in this order.
pub struct ReceiptPage {
    /// [`page_of`] its locks.
    pub page: i64,
    /// Its first lock's sequence number.
    pub seq: i64,
    /// Its first lock's token, as text.
    pub token: String,
    /// Each lock's [`RECEIPT_ITEM`] bytes.
    pub items: Vec<u8>,
}

/// The receipt entries of `locks`: one per page they fall in, in the order of each
/// page's first lock.
pub fn receipt_pages(locks: &[LockRef]) -> Vec<ReceiptPage> {
    let mut pages: Vec<ReceiptPage> = Vec::new();
    let mut at: HashMap<i64, usize> = HashMap::new();
    for l in locks {
        let page = page_of(l.seq.0);
        let i = *at.entry(page).or_insert_with(|| {
            pages.push(ReceiptPage {
                page,
                seq: l.seq.0,
                token: l.token.text(),
                items: Vec::with_capacity(RECEIPT_ITEM * 8),
            });
            pages.len() - 1
        });
        push_item(&mut pages[i].items, l.seq.0, &l.token);
    }
    pages
}

/// The (seq, token) pairs of rows a statement returned in its first two columns.
fn pairs(rows: &[Row]) -> Result<HashSet<(i64, String)>> {
    rows.iter().map(|r| Ok((r.int(0)?, r.text(1)?))).collect()
}

/// What a receipt is keyed on besides its locks (3.2): the request's queue, operation
/// and arguments, and the receipt's expiry; [`RECEIPT_INSERT`]'s names, and the leading
/// values of [`RECEIPT_ROWS`] in this order.
fn receipt_head(now: i64, queue: &str, settlement: &Settlement) -> Vec<(&'static str, Value)> {
    vec![
        (":queue", Value::from(queue)),
        (":op", Value::from(settlement.op())),
        (":args", Value::from(settlement.receipt_args())),
        (
            ":expires_at",
            Value::from(now.saturating_add(RECEIPT_TTL_MS)),
        ),
    ]
}

/// The parameters of [`RECEIPT_ONE`]: the receipt of one lock, `lock`, whose token's
/// text is `token`.
fn receipt_of_one(
    now: i64,
    queue: &str,
    settlement: &Settlement,
    lock: &LockRef,
    token: Value,
) -> Vec<(&'static str, Value)> {
    let mut params = receipt_head(now, queue, settlement);
    let mut item = Vec::with_capacity(RECEIPT_ITEM);
    push_item(&mut item, lock.seq.0, &lock.token);
    params.extend([
        (":page", Value::from(page_of(lock.seq.0))),
        (":seq", Value::from(lock.seq.0)),
        (":token", token),
        (":items", Value::Blob(item)),
    ]);
    params
}

/// The statement and parameters that write the receipts of `done` (3.2): one entry per
/// page they fall in.
fn receipts_of(
    now: i64,
    queue: &str,
    settlement: &Settlement,
    done: &[LockRef],
) -> (&'static str, Vec<(&'static str, Value)>) {
    if let [one] = done {
        let token = Value::from(one.token.text());
        return (
            RECEIPT_ONE,
            receipt_of_one(now, queue, settlement, one, token),
        );
    }
    let pages = receipt_pages(done);
    let n = pages.len();
    if n <= BOUND_LOCKS {
        let head = receipt_head(now, queue, settlement);
        let total = head.len() + 4 * values::rows_for(n);
        let values = head
            .into_iter()
            .map(|(_, v)| v)
            .chain(pages.into_iter().flat_map(|p| {
                [
                    Value::from(p.page),
                    Value::from(p.seq),
                    Value::from(p.token),
                    Value::Blob(p.items),
                ]
            }));
        return (RECEIPT_ROWS.get(n), values::bind(values, total));
    }
    let mut params = receipt_head(now, queue, settlement);
    let json = serde_json::Value::from_iter(pages.iter().map(
        |p| json!({"page": p.page, "seq": p.seq, "token": p.token, "items": digest::hex(&p.items)}),
    ));
    params.push((":pages", Value::from(json.to_string())));
    (RECEIPT_INSERT, params)
}

/// Records a receipt per settled lock (3.2); `last` when nothing follows it in the flow.
async fn write_receipts<X: SqlExec>(
    x: &mut X,
    now: i64,
    queue: &str,
    settlement: &Settlement,
    done: &[LockRef],
    last: bool,
) -> Result<()> {
    if done.is_empty() {
        return Ok(());
    }
    let (text, params) = receipts_of(now, queue, settlement, done);
    if last {
        x.execute_last(text, &params).await?;
    } else {
        x.execute(text, &params).await?;
    }
    Ok(())
}

/// Which of `missed` replay an earlier identical request (3.2).
async fn replays<X: SqlExec>(
    x: &mut X,
    now: i64,
    queue: &str,
    settlement: &Settlement,
    missed: &[LockRef],
) -> Result<HashSet<(i64, String)>> {
    if missed.is_empty() {
        return Ok(HashSet::new());
    }
    let rows = x
        .query(
            RECEIPT_LOOKUP,
            &[
                (":queue", Value::from(queue)),
                (":op", Value::from(settlement.op())),
                (":args", Value::from(settlement.receipt_args())),
                (":now", Value::from(now)),
                (":bucket", Value::from(now / RECEIPT_BUCKET_MS)),
                (":items", Value::from(lookup_json(missed))),
            ],
        )
        .await?;
    pairs(&rows)
}

/// Settles one message within the surrounding transaction.
pub async fn settle<X: SqlExec>(
    x: &mut X,
    now: i64,
    queue: &str,
    lock: LockRef,
    settlement: &Settlement,
) -> Result<()> {
    let cfg = load_queue(x, queue).await?;
    if matches!(settlement, Settlement::Complete)
        && lines_are_rare(&cfg)
        && complete_one_at_once(x, now, queue, &lock).await?
    {
        return Ok(());
    }
    let mut params = vec![
        (":seq", Value::from(lock.seq.0)),
        (":queue", Value::from(queue)),
        (":token", Value::from(lock.token.text())),
        (":now", Value::from(now)),
    ];
    let text = match settlement {
        Settlement::Complete => SETTLE_COMPLETE,
        Settlement::Abandon { delay } => {
            params.push((":delay_ms", Value::from(millis(*delay))));
            params.push((":max_dc", Value::from(cfg.max_delivery_count)));
            SETTLE_ABANDON
        }
        Settlement::Reject {
            reason,
            description,
        } => {
            params.push((":reason", Value::from(reason.as_str())));
            params.push((":description", Value::from(description.as_str())));
            SETTLE_REJECT
        }
        Settlement::Defer => SETTLE_DEFER,
    };
    let changed = x.query(text, &params).await?;
    match changed.first() {
        Some(r) => {
            let state = crate::rows::state_of(r.int(2)?)?;
            if state == MessageState::Completed || state == MessageState::DeadLettered {
                let mut departed = Departed::default();
                departed.add(queue, r.opt_text(0)?, !r.flag(1)?);
                departed.release(x).await?;
            }
            write_receipts(x, now, queue, settlement, &[lock], true).await
        }
        None => {
            let replay = replays(x, now, queue, settlement, &[lock]).await?;
            if !replay.is_empty() {
                return Ok(());
            }
            let reasons = lost_reasons(x, now, queue, &[lock]).await?;
            Err(Error::LockLost {
                reason: reasons
                    .into_values()
                    .next()
                    .unwrap_or(LockLostReason::Unknown),
            })
        }
    }
}

/// Whether a queue's messages are mostly in no line, so that a completion in one request
/// ([`complete_at_once`]) is worth trying: on a FIFO queue every message is in a line,
/// and the check would refuse every time.
fn lines_are_rare(cfg: &QueueConfig) -> bool {
    cfg.ordering_mode == OrderingMode::Standard
}

/// Every one of `n` locks (bound as [`COMPLETE_ROWS`] binds them) completing, none in a
/// line, in a fixed number of statements: a remote driver sends them in one request
/// ([`SqlExec::last_at_once`]); false when the check refused, and the caller goes its
/// usual way. One lock: [`complete_one_at_once`].
///
/// Several locks: the delete of the live locks in no line first
/// ([`COMPLETE_UNLINED_ROWS`]), then the receipts from the locks given ([`RECEIPT_ROWS`],
/// an entry per page of 32 sequence numbers), so no receipt reads a message. In this
/// process the delete runs in a savepoint ([`AT_ONCE`]) and its count decides: when it
/// took fewer than every lock it is taken back, and the usual way follows the four
/// statements spent (three when it took none: nothing to take back). A batch retried
/// after it completed spends them too. A remote driver sends
/// [`REFUSE_UNLESS_CHANGED`] after it, which undoes it unless it took every lock.
///
/// In this process, a failure after [`AT_ONCE`] leaves that savepoint open: the caller
/// undoes the whole transaction, or (a store's merged completions) takes it back with
/// [`AT_ONCE_UNDO`] and [`AT_ONCE_KEEP`].
pub async fn complete_at_once<X: SqlExec>(
    x: &mut X,
    now: i64,
    queue: &str,
    locks: &[LockRef],
) -> Result<bool> {
    if let [one] = locks {
        return complete_one_at_once(x, now, queue, one).await;
    }
    let n = locks.len();
    let params = bound_pairs(vec![Value::from(queue), Value::from(now)], locks);
    let receipts = || receipts_of(now, queue, &Settlement::Complete, locks);
    if x.in_process() {
        x.execute(AT_ONCE, &[]).await?;
        let took = x
            .execute(COMPLETE_UNLINED_ROWS.get(n), &params)
            .await?
            .changes;
        if took != n as u64 {
            // A delete that took nothing has nothing to take back.
            if took > 0 {
                x.execute(AT_ONCE_UNDO, &[]).await?;
            }
            x.execute(AT_ONCE_KEEP, &[]).await?;
            return Ok(false);
        }
        // The receipts inside the savepoint: a failure anywhere leaves it open, and
        // taking it back (a merged completion's fallback) undoes the delete with it.
        let (text, receipt_params) = receipts();
        x.execute(text, &receipt_params).await?;
        x.execute_last(AT_ONCE_KEEP, &[]).await?;
        return Ok(true);
    }
    let (text, receipt_params) = receipts();
    let expected = [(
        ":expected",
        Value::Int(i64::try_from(n).unwrap_or(i64::MAX)),
    )];
    let steps = [
        (COMPLETE_UNLINED_ROWS.get(n), &params[..]),
        (crate::exec::REFUSE_UNLESS_CHANGED, &expected[..]),
        (text, &receipt_params[..]),
    ];
    Ok(x.last_at_once(&steps).await?.is_some())
}

/// [`complete_at_once`] of one lock: the fenced delete of its message, when in no line,
/// comes first ([`COMPLETE_UNLINED_ONE`]), and the receipt is written from the lock
/// given ([`RECEIPT_ONE`]) only when the delete took the row, so the message is looked up
/// once, not twice (a receipt written first reads the row to learn that the lock holds).
/// In this process the delete's count decides (a delete that took nothing changed
/// nothing); a remote driver sends [`REFUSE_UNLESS_CHANGED`] between the two, in one
/// request, and shorter texts than the receipt's look-up for sqld to parse.
async fn complete_one_at_once<X: SqlExec>(
    x: &mut X,
    now: i64,
    queue: &str,
    lock: &LockRef,
) -> Result<bool> {
    let token = Value::from(lock.token.text());
    let delete = values::bind(
        [
            Value::from(queue),
            Value::from(now),
            Value::from(lock.seq.0),
            token.clone(),
        ],
        4,
    );
    let receipt = receipt_of_one(now, queue, &Settlement::Complete, lock, token);
    if x.in_process() {
        if x.execute(COMPLETE_UNLINED_ONE, &delete).await?.changes != 1 {
            return Ok(false);
        }
        x.execute_last(RECEIPT_ONE, &receipt).await?;
        return Ok(true);
    }
    let expected = [(":expected", Value::Int(1))];
    let steps = [
        (COMPLETE_UNLINED_ONE, &delete[..]),
        (crate::exec::REFUSE_UNLESS_CHANGED, &expected[..]),
        (RECEIPT_ONE, &receipt[..]),
    ];
    Ok(x.last_at_once(&steps).await?.is_some())
}

/// Completes each item under its own fence, in a fixed number of statements; a stale
/// item is ok = false and never fails the batch (2.7).
pub async fn complete_batch<X: SqlExec>(
    x: &mut X,
    now: i64,
    queue: &str,
    locks: &[LockRef],
) -> Result<Vec<BatchResult>> {
    let cfg = load_queue(x, queue).await?;
    let mut params = vec![(":queue", Value::from(queue)), (":now", Value::from(now))];
    let text = if locks.len() <= BOUND_LOCKS {
        if lines_are_rare(&cfg) && complete_at_once(x, now, queue, locks).await? {
            return Ok(locks
                .iter()
                .map(|l| BatchResult {
                    seq: l.seq,
                    ok: true,
                    locked_until_ms: 0,
                    lost: None,
                })
                .collect());
        }
        params = bound_pairs(params.into_iter().map(|(_, v)| v).collect(), locks);
        COMPLETE_ROWS.get(locks.len())
    } else {
        params.push((":items", Value::from(items_json(locks))));
        COMPLETE_MANY
    };
    let rows = x.query(text, &params).await?;
    let completed = pairs(&rows)?;
    let mut departed = Departed::default();
    for r in &rows {
        departed.add(queue, r.opt_text(2)?, !r.flag(3)?);
    }
    departed.release(x).await?;
    let key = |l: &LockRef| (l.seq.0, l.token.to_string());
    let (done, missed): (Vec<LockRef>, Vec<LockRef>) =
        locks.iter().partition(|l| completed.contains(&key(l)));
    // With nothing missed, the receipts are the flow's last statement.
    write_receipts(
        x,
        now,
        queue,
        &Settlement::Complete,
        &done,
        missed.is_empty(),
    )
    .await?;
    let replayed = replays(x, now, queue, &Settlement::Complete, &missed).await?;
    let lost: Vec<LockRef> = missed
        .into_iter()
        .filter(|l| !replayed.contains(&key(l)))
        .collect();
    let reasons = lost_reasons(x, now, queue, &lost).await?;
    Ok(locks
        .iter()
        .map(|l| BatchResult {
            seq: l.seq,
            ok: completed.contains(&key(l)) || replayed.contains(&key(l)),
            locked_until_ms: 0,
            lost: reasons.get(&key(l)).copied(),
        })
        .collect())
}

/// Whether the completions of `n` locks of one lock each, made by separate callers of
/// `queue` and merged by a local store's writer, may complete at once
/// ([`complete_at_once`]): two to [`BOUND_LOCKS`] locks of a queue that is not FIFO.
/// Reads the queue's row (unless the driver knows it) and writes nothing.
pub async fn merges_at_once<X: SqlExec>(x: &mut X, queue: &str, n: usize) -> Result<bool> {
    if !(2..=BOUND_LOCKS).contains(&n) {
        return Ok(false);
    }
    Ok(lines_are_rare(&load_queue(x, queue).await?))
}

/// Renews live leases in one statement (2.5, 2.8).
pub async fn renew_batch<X: SqlExec>(
    x: &mut X,
    now: i64,
    queue: &str,
    locks: &[LockRef],
) -> Result<Vec<BatchResult>> {
    let cfg = load_queue(x, queue).await?;
    // The lease is bound after the pairs (`?3 + 2n`, n the text's row count).
    let mut params = bound_pairs(vec![Value::from(queue), Value::from(now)], locks);
    params.push((values::name(params.len() + 1), Value::from(cfg.lock_ms())));
    let text = RENEW_ROWS.get(locks.len());
    // Every lock renewed: the renewal, the check and the commit in one request where the
    // driver sends them so ([`SqlExec::last_at_once`]); else the usual way.
    let expected = [(
        ":expected",
        Value::Int(i64::try_from(locks.len()).unwrap_or(i64::MAX)),
    )];
    let steps = [
        (text, &params[..]),
        (crate::exec::REFUSE_UNLESS_CHANGED, &expected[..]),
    ];
    let rows = match x.last_at_once(&steps).await? {
        Some(mut answers) if !answers.is_empty() => answers.swap_remove(0),
        _ => x.query(text, &params).await?,
    };
    // Keyed by (seq, token): an item with the right number and a wrong token is not ok,
    // even when another item of the batch renewed that message (2.8).
    let renewed: HashMap<(i64, String), i64> = rows
        .iter()
        .map(|r| Ok(((r.int(0)?, r.text(1)?), r.int(2)?)))
        .collect::<Result<_>>()?;
    let key = |l: &LockRef| (l.seq.0, l.token.to_string());
    let lost: Vec<LockRef> = locks
        .iter()
        .filter(|l| !renewed.contains_key(&key(l)))
        .copied()
        .collect();
    let reasons = lost_reasons(x, now, queue, &lost).await?;
    Ok(locks
        .iter()
        .map(|l| {
            let until = renewed.get(&key(l)).copied();
            BatchResult {
                seq: l.seq,
                ok: until.is_some(),
                locked_until_ms: until.unwrap_or(0),
                lost: reasons.get(&key(l)).copied(),
            }
        })
        .collect())
}

#[cfg(test)]
mod bucket_width {
    /// The receipts' statements and the number agree on the bucket's width.
    #[test]
    fn the_bucket_text_is_the_bucket_number() {
        assert_eq!(receipt_bucket!(), super::RECEIPT_BUCKET_MS.to_string());
        assert_eq!(receipt_page!(), super::RECEIPT_PAGE.to_string());
    }
}

//! Calls of one item merged on the writer thread: while the store is busy (callers
//! contend, or every commit fsyncs under `synchronous=FULL`), a send of one message, a
//! peek-lock receive of a few or a completion of one lock waits in the store kit's
//! [`Merge`] instead of queueing a call of its own, and the one merged call the writer
//! reaches runs every item waiting then together, where each call ran its own
//! statements in its own savepoint.
//!
//! - Sends ([`sends`]): ONE INSERT per queue and timing and per 1,024 sends
//!   (`INSERT_ROWS`, its largest text, after one read of the next number). The numbers
//!   are contiguous and in arrival order (G1). A send the merge cannot take runs its
//!   usual flow in a savepoint of its own, beside the merged ones: one to a queue with
//!   a dedup window (a lookup and an entry) or into a line (the line's head). A merged
//!   statement the database refuses inserted nothing; each of its rows is then
//!   inserted alone, so a refusal stays with its own send.
//! - Receives ([`claims`]): ONE claim per queue of as many messages as they ask for in
//!   all, handed out in claim order.
//! - Completions ([`completes`]): ONE fenced delete per queue and its receipts, or each
//!   its own flow when that delete misses a lock.
//!
//! Every item is answered after the commit that holds it (14.6). A piece that fails is
//! taken back alone; when taking it back fails too, every item of the merged call
//! fails, so that the call is undone whole and nothing of the failed piece commits.

use mqlite_contract::{
    ClaimSpec, EnqueueSlot, Error, LockRef, Message, OutMessage, ReceiveMode, Result, SendOptions,
    SeqNumber, Settlement,
};
use mqlite_kit::blocking::block_on;
use mqlite_kit::reserve::Reserve;
use mqlite_kit::writer::Merge;
use mqlite_sql::Value;
use mqlite_sql::claim::claim;
use mqlite_sql::enqueue::{
    MAX_INSERT_ROWS, ROW_PARAMS, SharedValues, enqueue, insert_merged, insert_one, one_row,
};
use mqlite_sql::settle::{AT_ONCE_KEEP, AT_ONCE_UNDO, complete_at_once, merges_at_once, settle};

use crate::exec::{Exec, WorkCounter};
use crate::writer::{Conn, run_sql};

/// A send of one message waiting for the merged call.
pub(crate) struct OneSend {
    pub(crate) queue: String,
    pub(crate) message: OutMessage,
    pub(crate) options: SendOptions,
}

/// What a send answers.
type Sent = Result<Vec<EnqueueSlot>>;

/// The store's merge of sends of one message.
pub(crate) type Sends = Merge<Conn, OneSend, Vec<EnqueueSlot>>;

/// The merge for a store whose statements `work` counts and whose sends `reserve`
/// admits.
pub(crate) fn sends(work: std::sync::Arc<WorkCounter>, reserve: std::sync::Arc<Reserve>) -> Sends {
    Merge::new(
        move |conn: &mut Conn, now, items: Vec<OneSend>, _gone: &Gone<'_>| {
            // The reserve is the store's: while it is given up, no send writes (as in the
            // usual flow, which checks it first). Each send hears the refusal: only the
            // writer thread, this one, puts the reserve back, so none of these is Ok.
            if reserve.ensure_armed().is_err() {
                return items
                    .iter()
                    .map(|_| reserve.ensure_armed().map(|()| Vec::new()))
                    .collect();
            }
            run(&mut conn.exec(&work), now, items)
        },
    )
}

/// Runs the sends `items` in the open transaction; each one's outcome, in order.
fn run(x: &mut Exec<'_>, now: i64, items: Vec<OneSend>) -> Vec<Sent> {
    let n = items.len();
    let mut out: Vec<Option<Sent>> = (0..n).map(|_| None).collect();
    let mut broken = None;
    // Rows by the values they share, in order of their first send.
    let mut merges: Vec<(SharedValues, Vec<usize>, Vec<[Value; ROW_PARAMS]>)> = Vec::new();
    let mut alone: Vec<(usize, OneSend)> = Vec::new();
    for (i, mut item) in items.into_iter().enumerate() {
        match block_on(
            None,
            one_row(x, now, &item.queue, &mut item.message, &item.options),
        ) {
            Err(e) => out[i] = Some(Err(e)),
            Ok(None) => alone.push((i, item)),
            Ok(Some(r)) => match merges.iter_mut().find(|(s, _, _)| *s == r.shared) {
                Some((_, idx, rows)) => {
                    idx.push(i);
                    rows.push(r.row);
                }
                None => merges.push((r.shared, vec![i], vec![r.row])),
            },
        }
    }
    // Past the largest INSERT's rows, in pieces of that many, each numbered on from the
    // last.
    let pieces = merges.into_iter().flat_map(|(shared, idx, rows)| {
        let mut rows = rows.into_iter();
        idx.chunks(MAX_INSERT_ROWS)
            .map(|idx| {
                let piece: Vec<_> = rows.by_ref().take(idx.len()).collect();
                (shared.clone(), idx.to_vec(), piece)
            })
            .collect::<Vec<_>>()
    });
    for (shared, idx, rows) in pieces {
        let numbers = if x.conn.is_autocommit() {
            Err((lost(), rows))
        } else {
            block_on(None, insert_merged(x, &shared, rows))
        };
        match numbers {
            Ok(numbers) => {
                for (i, seq) in idx.into_iter().zip(numbers) {
                    out[i] = Some(Ok(vec![EnqueueSlot::Enqueued(SeqNumber(seq))]));
                }
            }
            Err((e, rows)) => {
                tracing::debug!(error = %e, rows = rows.len(), "a merged send failed; its rows go one by one while the transaction holds");
                for (i, row) in idx.into_iter().zip(rows) {
                    out[i] = Some(if x.conn.is_autocommit() {
                        // The database rolled the transaction back: on this piece's
                        // failure, each of its sends hears that failure when it says
                        // what to do (a full disk, say), else that it was lost.
                        Err(e.for_each_caller().unwrap_or_else(lost))
                    } else {
                        block_on(None, insert_one(x, &shared, row))
                            .map(|seq| vec![EnqueueSlot::Enqueued(SeqNumber(seq))])
                    });
                }
            }
        }
    }
    for (i, item) in alone {
        let OneSend {
            queue,
            message,
            options,
        } = item;
        out[i] = Some(in_savepoint(x, false, &mut broken, |x| {
            block_on(None, enqueue(x, now, &queue, vec![message], options, false))
        }));
    }
    outcomes(out, broken)
}

/// The outcome of a send behind one that made the database roll the transaction back
/// by itself: nothing more runs (it would run outside any transaction), and the writer
/// fails the whole group.
fn lost() -> Error {
    Error::backend(
        crate::BACKEND,
        std::io::Error::other("the database rolled the transaction back before this send ran"),
    )
}

/// A completion of one lock waiting for the merged call.
pub(crate) struct OneComplete {
    pub(crate) queue: String,
    pub(crate) lock: LockRef,
}

/// The store's merge of completions of one lock.
pub(crate) type Completes = Merge<Conn, OneComplete, ()>;

/// The merge of completions for a store whose statements `work` counts: the
/// completions waiting for one queue complete at once, with one fenced delete and
/// their receipts ([`complete_at_once`]), where each ran its own delete and receipt in
/// its own savepoint. When that delete does not take every lock (one lost, completed
/// already, given twice, in a line), nothing of it stays and each completion runs its
/// own flow in a savepoint of its own, so each caller hears what a call of its own
/// would have said.
pub(crate) fn completes(work: std::sync::Arc<WorkCounter>) -> Completes {
    Merge::new(
        move |conn: &mut Conn, now, items: Vec<OneComplete>, _gone: &Gone<'_>| {
            complete(&mut conn.exec(&work), now, items)
        },
    )
}

/// Runs the completions `items` in the open transaction; each one's outcome, in order.
fn complete(x: &mut Exec<'_>, now: i64, items: Vec<OneComplete>) -> Vec<Result<()>> {
    let n = items.len();
    let mut out: Vec<Option<Result<()>>> = (0..n).map(|_| None).collect();
    let mut broken = None;
    // Locks by queue, in order of each queue's first completion.
    let mut queues: Vec<(String, Vec<usize>, Vec<LockRef>)> = Vec::new();
    for (i, OneComplete { queue, lock }) in items.into_iter().enumerate() {
        match queues.iter_mut().find(|(q, _, _)| *q == queue) {
            Some((_, idx, locks)) => {
                idx.push(i);
                locks.push(lock);
            }
            None => queues.push((queue, vec![i], vec![lock])),
        }
    }
    // Alone in the merged call, a completion needs no savepoint of its own: the call's
    // undoes it.
    let alone = n == 1;
    for (queue, idx, locks) in queues {
        // A queue that cannot complete them at once (or whose row cannot be read) sends
        // each its own way, where each hears why.
        if !x.conn.is_autocommit()
            && matches!(
                block_on(None, merges_at_once(x, &queue, locks.len())),
                Ok(true)
            )
        {
            match block_on(None, complete_at_once(x, now, &queue, &locks)) {
                Ok(true) => {
                    for i in idx {
                        out[i] = Some(Ok(()));
                    }
                    continue;
                }
                Ok(false) => {}
                Err(e) => {
                    // Whatever of it ran is taken back with its savepoint; each
                    // completion then goes its own way.
                    tracing::debug!(error = %e, locks = locks.len(), "merged completions failed; each goes its own way while the transaction holds");
                    if !x.conn.is_autocommit() {
                        take_back(x, AT_ONCE_UNDO, AT_ONCE_KEEP, &mut broken);
                    }
                }
            }
        }
        for (i, lock) in idx.into_iter().zip(locks) {
            out[i] = Some(in_savepoint(x, alone, &mut broken, |x| {
                block_on(None, settle(x, now, &queue, lock, &Settlement::Complete))
            }));
        }
    }
    outcomes(out, broken)
}

/// A peek-lock receive of a few messages, with no receive attempt, waiting for the
/// merged call.
pub(crate) struct OneClaim {
    pub(crate) queue: String,
    pub(crate) spec: ClaimSpec,
}

impl OneClaim {
    /// Whether a claim of `spec` may merge: peek-lock, no receive attempt to record
    /// (each attempt records its own answer), at most [`MERGED_CLAIM`] messages.
    pub(crate) fn merges(spec: &ClaimSpec) -> bool {
        spec.mode == ReceiveMode::PeekLock
            && spec.attempt_id.is_none()
            && (1..=MERGED_CLAIM).contains(&spec.max_messages)
    }
}

/// The most messages one merged claim asks for: the receives waiting for one queue are
/// merged into claims of at most this many.
pub(crate) const MERGED_CLAIM: u32 = 64;

/// The store's merge of receives.
pub(crate) type Claims = Merge<Conn, OneClaim, Vec<Message>>;

/// The merge of receives for a store whose statements `work` counts: the receives
/// waiting for one queue run as one claim of as many messages as they ask for in all
/// ([`claim`]: one pick and one lock), where each ran its own claim in its own
/// savepoint, and the messages it locked are handed out in claim order, each receive
/// taking as many as it asked for (the last ones may get fewer, or none, as when
/// receives race). A receive whose caller left while the claim ran would hold locks
/// nobody hears of, each a delivery counted (1.3, 1.4): the claim is then taken back and
/// runs again for the receives still waiting. A merged claim that fails is taken back,
/// and each receive then runs its own claim.
pub(crate) fn claims(work: std::sync::Arc<WorkCounter>) -> Claims {
    Merge::new(
        move |conn: &mut Conn, now, items: Vec<OneClaim>, gone: &Gone<'_>| {
            claim_merged(&mut conn.exec(&work), now, items, gone)
        },
    )
}

/// Whether the caller of the item at an index has left ([`Merge`]).
type Gone<'a> = dyn Fn(usize) -> bool + 'a;

/// Receives merged into one claim: their queue, each one's place among the items and
/// its spec, and how many messages they ask for in all.
type Piece = (String, Vec<(usize, ClaimSpec)>, u32);

/// Runs the receives `items` in the open transaction; each one's messages, in order.
fn claim_merged(
    x: &mut Exec<'_>,
    now: i64,
    items: Vec<OneClaim>,
    gone: &Gone<'_>,
) -> Vec<Result<Vec<Message>>> {
    let n = items.len();
    let mut out: Vec<Option<Result<Vec<Message>>>> = (0..n).map(|_| None).collect();
    let mut broken = None;
    // Receives by queue, in pieces of at most MERGED_CLAIM messages: a receive joins
    // its queue's last piece, so pieces are served in the order their receives came.
    let mut pieces: Vec<Piece> = Vec::new();
    for (i, OneClaim { queue, spec }) in items.into_iter().enumerate() {
        let max = spec.max_messages;
        match pieces.iter_mut().rev().find(|(q, _, _)| *q == queue) {
            Some((_, specs, total)) if *total + max <= MERGED_CLAIM => {
                specs.push((i, spec));
                *total += max;
            }
            _ => pieces.push((queue, vec![(i, spec)], max)),
        }
    }
    if let ([(queue, specs, _)], 1) = (&pieces[..], n) {
        // Alone in the merged call: a claim of its own, which the call undoes if it
        // fails or its caller left.
        out[specs[0].0] = Some(block_on(None, claim(x, now, queue, &specs[0].1)));
        return outcomes(out, broken);
    }
    for (queue, mut specs, _) in pieces {
        loop {
            // A receive whose caller left claims nothing.
            specs.retain(|(i, _)| {
                let left = gone(*i);
                if left {
                    out[*i] = Some(Err(Error::Cancelled));
                }
                !left
            });
            if specs.is_empty() {
                break;
            }
            if x.conn.is_autocommit() {
                for (i, _) in &specs {
                    out[*i] = Some(Err(lost()));
                }
                break;
            }
            let spec = ClaimSpec {
                max_messages: specs.iter().map(|(_, s)| s.max_messages).sum(),
                mode: ReceiveMode::PeekLock,
                attempt_id: None,
            };
            let got = in_savepoint_if(
                x,
                &mut broken,
                |x| block_on(None, claim(x, now, &queue, &spec)),
                |_| !specs.iter().any(|(i, _)| gone(*i)),
            );
            match got {
                Ok(Some(messages)) => {
                    let mut messages = messages.into_iter();
                    for (i, spec) in &specs {
                        out[*i] = Some(Ok(messages
                            .by_ref()
                            .take(spec.max_messages as usize)
                            .collect()));
                    }
                    break;
                }
                // A caller left while it ran: taken back, and again without it.
                Ok(None) => {}
                Err(e) if specs.len() == 1 => {
                    out[specs[0].0] = Some(Err(e));
                    break;
                }
                Err(e) => {
                    tracing::debug!(error = %e, receives = specs.len(), "a merged claim failed; each receive claims alone while the transaction holds");
                    for (i, spec) in &specs {
                        out[*i] = Some(in_savepoint(x, false, &mut broken, |x| {
                            block_on(None, claim(x, now, &queue, spec))
                        }));
                    }
                    break;
                }
            }
        }
    }
    outcomes(out, broken)
}

/// Each item's outcome; when a failed piece could not be taken back (`broken`), every
/// item fails, so the merged call is undone whole and nothing of that piece commits.
fn outcomes<R>(out: Vec<Option<Result<R>>>, broken: Option<Error>) -> Vec<Result<R>> {
    match broken {
        None => out
            .into_iter()
            .map(|o| o.unwrap_or_else(|| Err(lost())))
            .collect(),
        Some(why) => out
            .iter()
            .map(|_| {
                Err(Error::backend(
                    crate::BACKEND,
                    std::io::Error::other(format!(
                        "a failed part of a merged call could not be taken back, so the \
                         whole call was: {why}"
                    )),
                ))
            })
            .collect(),
    }
}

/// Runs `f` in a savepoint of its own, undone alone if it fails, or bare when `alone`
/// (the merged call's own savepoint or transaction then undoes it). Nothing runs once
/// the database rolled the transaction back (an item before it made it): [`lost`].
fn in_savepoint<R>(
    x: &mut Exec<'_>,
    alone: bool,
    broken: &mut Option<Error>,
    f: impl FnOnce(&mut Exec<'_>) -> Result<R>,
) -> Result<R> {
    if x.conn.is_autocommit() {
        return Err(lost());
    }
    if alone {
        return f(x);
    }
    in_savepoint_if(x, broken, f, |_| true)?.ok_or_else(lost)
}

/// Runs `f` in a savepoint of its own, and keeps what it did if it succeeded and `keep`
/// says so (None: taken back). When it fails, or `keep` refuses, the savepoint is taken
/// back; when that fails too with the transaction still open, `broken` says why.
fn in_savepoint_if<R>(
    x: &mut Exec<'_>,
    broken: &mut Option<Error>,
    f: impl FnOnce(&mut Exec<'_>) -> Result<R>,
    keep: impl FnOnce(&R) -> bool,
) -> Result<Option<R>> {
    run_sql(x.conn, "SAVEPOINT mqlite_merged")?;
    let out = f(x);
    if x.conn.is_autocommit() {
        // The database rolled the transaction back: the writer fails the group.
        return out.map(Some);
    }
    let out = match out {
        Ok(r) if keep(&r) => match run_sql(x.conn, "RELEASE mqlite_merged") {
            Ok(()) => return Ok(Some(r)),
            Err(e) => Err(e),
        },
        Ok(_) => Ok(None),
        Err(e) => Err(e),
    };
    take_back(
        x,
        "ROLLBACK TO mqlite_merged",
        "RELEASE mqlite_merged",
        broken,
    );
    out
}

/// Takes a savepoint back (`undo`, then `release`); when that fails with the transaction
/// still open, `broken` says why ([`outcomes`]).
fn take_back(x: &mut Exec<'_>, undo: &str, release: &str, broken: &mut Option<Error>) {
    if let Err(why) = run_sql(x.conn, undo).and_then(|()| run_sql(x.conn, release))
        && !x.conn.is_autocommit()
    {
        *broken = Some(why);
    }
}

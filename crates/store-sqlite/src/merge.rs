//! Sends of one message merged into one INSERT: while the store is busy (callers
//! contend, or every commit fsyncs under `synchronous=FULL`), a send of one message
//! waits in the store kit's [`Merge`] instead of queueing a call of its own, and the
//! one merged call the writer reaches inserts every send waiting then with ONE INSERT
//! per queue and timing and per 1,024 sends (`INSERT_ROWS`, its largest text, after one
//! read of the next number), where each call ran its own INSERT in its own savepoint.
//! The numbers are contiguous and in arrival order (G1); every send is answered after
//! the commit that holds it (14.6).
//!
//! A send the merge cannot take runs its usual flow in a savepoint of its own, beside
//! the merged ones: one to a queue with a dedup window (a lookup and an entry) or into
//! a line (the line's head). A merged statement the database refuses inserted nothing;
//! each of its rows is then inserted alone, so a refusal stays with its own send.

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
use mqlite_sql::settle::{AT_ONCE_KEEP, AT_ONCE_UNDO, complete_merged, settle};

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
    Merge::new(move |conn: &mut Conn, now, items: Vec<OneSend>| {
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
    })
}

/// Runs the sends `items` in the open transaction; each one's outcome, in order.
fn run(x: &mut Exec<'_>, now: i64, items: Vec<OneSend>) -> Vec<Sent> {
    let n = items.len();
    let mut out: Vec<Option<Sent>> = (0..n).map(|_| None).collect();
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
                        Err(lost())
                    } else {
                        block_on(None, insert_one(x, &shared, row))
                            .map(|seq| vec![EnqueueSlot::Enqueued(SeqNumber(seq))])
                    });
                }
            }
        }
    }
    for (i, item) in alone {
        out[i] = Some(if x.conn.is_autocommit() {
            Err(lost())
        } else {
            let OneSend {
                queue,
                message,
                options,
            } = item;
            in_savepoint(x, false, |x| {
                block_on(None, enqueue(x, now, &queue, vec![message], options, false))
            })
        });
    }
    out.into_iter()
        .map(|o| o.unwrap_or_else(|| Err(lost())))
        .collect()
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
/// their receipts ([`complete_merged`]), where each ran its own delete and receipt in
/// its own savepoint. When that delete does not take every lock (one lost, completed
/// already, in a line), nothing of it stays and each completion runs its own flow in a
/// savepoint of its own, so each caller hears what a call of its own would have said.
pub(crate) fn completes(work: std::sync::Arc<WorkCounter>) -> Completes {
    Merge::new(move |conn: &mut Conn, now, items: Vec<OneComplete>| {
        complete(&mut conn.exec(&work), now, items)
    })
}

/// Runs the completions `items` in the open transaction; each one's outcome, in order.
fn complete(x: &mut Exec<'_>, now: i64, items: Vec<OneComplete>) -> Vec<Result<()>> {
    let n = items.len();
    let mut out: Vec<Option<Result<()>>> = (0..n).map(|_| None).collect();
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
    for (queue, idx, locks) in queues {
        if !x.conn.is_autocommit() {
            match block_on(None, complete_merged(x, now, &queue, &locks)) {
                Ok(true) => {
                    for i in idx {
                        out[i] = Some(Ok(()));
                    }
                    continue;
                }
                Ok(false) => {}
                Err(e) => {
                    // Whatever of it ran is taken back (its savepoint is open unless it
                    // failed before it); each completion then goes its own way.
                    tracing::debug!(error = %e, locks = locks.len(), "merged completions failed; each goes its own way while the transaction holds");
                    if run_sql(x.conn, AT_ONCE_UNDO).is_ok() {
                        let _ = run_sql(x.conn, AT_ONCE_KEEP);
                    }
                }
            }
        }
        // Alone in the merged call, a completion needs no savepoint of its own: the
        // call's undoes it.
        let alone = n == 1;
        for (i, lock) in idx.into_iter().zip(locks) {
            out[i] = Some(if x.conn.is_autocommit() {
                Err(lost())
            } else {
                in_savepoint(x, alone, |x| {
                    block_on(None, settle(x, now, &queue, lock, &Settlement::Complete))
                })
            });
        }
    }
    out.into_iter()
        .map(|o| o.unwrap_or_else(|| Err(lost())))
        .collect()
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
/// receives race). A merged claim that fails leaves nothing, and each receive then runs
/// its own claim.
pub(crate) fn claims(work: std::sync::Arc<WorkCounter>) -> Claims {
    Merge::new(move |conn: &mut Conn, now, items: Vec<OneClaim>| {
        claim_merged(&mut conn.exec(&work), now, items)
    })
}

/// Receives merged into one claim: their queue, each one's place among the items and
/// its spec, and how many messages they ask for in all.
type Piece = (String, Vec<(usize, ClaimSpec)>, u32);

/// Runs the receives `items` in the open transaction; each one's messages, in order.
fn claim_merged(x: &mut Exec<'_>, now: i64, items: Vec<OneClaim>) -> Vec<Result<Vec<Message>>> {
    let n = items.len();
    let mut out: Vec<Option<Result<Vec<Message>>>> = (0..n).map(|_| None).collect();
    // Receives by queue, in order of each queue's first, in pieces of at most
    // MERGED_CLAIM messages.
    let mut pieces: Vec<Piece> = Vec::new();
    for (i, OneClaim { queue, spec }) in items.into_iter().enumerate() {
        let max = spec.max_messages;
        match pieces
            .iter_mut()
            .find(|(q, _, total)| *q == queue && total + max <= MERGED_CLAIM)
        {
            Some((_, specs, total)) => {
                specs.push((i, spec));
                *total += max;
            }
            None => pieces.push((queue, vec![(i, spec)], max)),
        }
    }
    // Alone in the merged call, a receive needs no savepoint of its own: the call's
    // undoes it.
    let alone = pieces.len() == 1;
    for (queue, specs, total) in pieces {
        if x.conn.is_autocommit() {
            for (i, _) in specs {
                out[i] = Some(Err(lost()));
            }
            continue;
        }
        if let [(i, spec)] = &specs[..] {
            out[*i] = Some(in_savepoint(x, alone, |x| {
                block_on(None, claim(x, now, &queue, spec))
            }));
            continue;
        }
        let spec = ClaimSpec {
            max_messages: total,
            mode: ReceiveMode::PeekLock,
            attempt_id: None,
        };
        // Always in a savepoint of its own: when it fails, whatever it did is taken back
        // before each receive claims alone.
        let got = in_savepoint(x, false, |x| block_on(None, claim(x, now, &queue, &spec)));
        match got {
            Ok(messages) => {
                let mut messages = messages.into_iter();
                for (i, spec) in specs {
                    out[i] = Some(Ok(messages
                        .by_ref()
                        .take(spec.max_messages as usize)
                        .collect()));
                }
            }
            Err(e) => {
                tracing::debug!(error = %e, receives = specs.len(), "a merged claim failed; each receive claims alone while the transaction holds");
                for (i, spec) in specs {
                    out[i] = Some(if x.conn.is_autocommit() {
                        Err(lost())
                    } else {
                        in_savepoint(x, false, |x| block_on(None, claim(x, now, &queue, &spec)))
                    });
                }
            }
        }
    }
    out.into_iter()
        .map(|o| o.unwrap_or_else(|| Err(lost())))
        .collect()
}

/// Runs `f` in a savepoint of its own (undone alone if it fails), or bare when
/// `alone`: the merged call's own savepoint or transaction then undoes it.
fn in_savepoint<R>(
    x: &mut Exec<'_>,
    alone: bool,
    f: impl FnOnce(&mut Exec<'_>) -> Result<R>,
) -> Result<R> {
    if alone {
        return f(x);
    }
    run_sql(x.conn, "SAVEPOINT mqlite_merged")?;
    let out = f(x);
    if x.conn.is_autocommit() {
        // The database rolled the transaction back: the writer fails the group.
        return out;
    }
    // Kept, or undone alone when it failed (or its savepoint could not be released).
    let out = out.and_then(|r| run_sql(x.conn, "RELEASE mqlite_merged").map(|()| r));
    if out.is_err() && !x.conn.is_autocommit() {
        run_sql(x.conn, "ROLLBACK TO mqlite_merged")?;
        run_sql(x.conn, "RELEASE mqlite_merged")?;
    }
    out
}

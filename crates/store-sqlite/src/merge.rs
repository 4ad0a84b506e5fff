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

use mqlite_contract::{EnqueueSlot, Error, OutMessage, Result, SendOptions, SeqNumber};
use mqlite_kit::blocking::block_on;
use mqlite_kit::reserve::Reserve;
use mqlite_kit::writer::Merge;
use mqlite_sql::Value;
use mqlite_sql::enqueue::{
    MAX_INSERT_ROWS, ROW_PARAMS, SharedValues, enqueue, insert_merged, insert_one, one_row,
};

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
            in_savepoint(x, now, item)
        });
    }
    out.into_iter()
        .map(|o| o.unwrap_or_else(|| Err(lost())))
        .collect()
}

/// A send's usual flow in a savepoint of its own: undone alone if it fails.
fn in_savepoint(x: &mut Exec<'_>, now: i64, item: OneSend) -> Sent {
    let OneSend {
        queue,
        message,
        options,
    } = item;
    run_sql(x.conn, "SAVEPOINT mqlite_merged_send")?;
    let out = block_on(None, enqueue(x, now, &queue, vec![message], options, false));
    if x.conn.is_autocommit() {
        // The database rolled the transaction back: the writer fails the group.
        return out;
    }
    // Kept, or undone alone when it failed (or its savepoint could not be released).
    let out = out.and_then(|slots| run_sql(x.conn, "RELEASE mqlite_merged_send").map(|()| slots));
    if out.is_err() && !x.conn.is_autocommit() {
        run_sql(x.conn, "ROLLBACK TO mqlite_merged_send")?;
        run_sql(x.conn, "RELEASE mqlite_merged_send")?;
    }
    out
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

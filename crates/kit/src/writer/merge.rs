//! Calls merged into one: callers of the same small operation (a send of one message, a
//! receive of a few, a completion of one lock) that find the store busy leave their
//! items in a [`Merge`] instead of each queueing a call of its own. The first of them
//! queues ONE grouped call; when the writer reaches it, it takes every item left by then
//! and runs them together, so a store can run them with one statement where each call
//! would have run its own statement in its own savepoint. The promises of a grouped call
//! hold for each item:
//!
//! - no caller is answered before the commit that holds its work (14.6), and a failed
//!   commit fails every item it held;
//! - an item whose caller left before the writer took it runs nothing (13.1, 13.2);
//! - the merged function answers each item on its own: an item it fails leaves nothing
//!   of itself, and its neighbours go on (the store falls back to one statement per
//!   item when the merged one is refused).
//!
//! One difference from a call of its own: a caller that leaves while the merged
//! statement runs is not undone alone (its row is one of many in one statement); it
//! commits with the others, like a call whose caller left after its savepoint was
//! released. Undoing it would undo its neighbours'. Where that matters (a receive's
//! locks count a delivery), the merged function asks which callers are gone
//! ([`MergedFn`]'s last argument) and runs its statement again without them.

use std::sync::Arc;

use mqlite_contract::error::{Error, Result};

use super::*;

/// What the merged call runs with the handle: the items taken, in arrival order, and a
/// check of whether the caller of the item at an index has left since; it returns each
/// item's outcome, in the same order. An item it fails must leave nothing of itself
/// behind.
pub type MergedFn<T, I, R> =
    dyn Fn(&mut T, i64, Vec<I>, &dyn Fn(usize) -> bool) -> Vec<Result<R>> + Send + Sync;

/// The items waiting for one merged call, and what runs them.
pub struct Merge<T, I, R> {
    waiting: Mutex<Waiting<I, R>>,
    run: Box<MergedFn<T, I, R>>,
}

struct Waiting<I, R> {
    items: Vec<(I, oneshot::Sender<Result<R>>)>,
    /// A merged call is queued for the writer and has not taken the items yet.
    called: bool,
}

impl<T, I, R> Merge<T, I, R> {
    /// Items merged by `run` (see [`MergedFn`]).
    pub fn new(
        run: impl Fn(&mut T, i64, Vec<I>, &dyn Fn(usize) -> bool) -> Vec<Result<R>>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        Merge {
            waiting: Mutex::new(Waiting {
                items: Vec::new(),
                called: false,
            }),
            run: Box::new(run),
        }
    }

    /// Takes every item waiting; the next item queues a new call.
    fn take(&self) -> Vec<(I, oneshot::Sender<Result<R>>)> {
        let mut w = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        w.called = false;
        std::mem::take(&mut w.items)
    }
}

impl<T: GroupCommit + Send + 'static> WriterThread<T> {
    /// Leaves `item` in `merge` and queues the merged call unless one is queued already
    /// (see the module docs); answered after the commit that holds the item's work.
    pub fn run_merged<I, R>(
        &self,
        merge: &Arc<Merge<T, I, R>>,
        item: I,
    ) -> impl Future<Output = Result<R>> + Send + 'static
    where
        I: Send + 'static,
        R: Send + 'static,
    {
        let rx = leave(&self.queue, merge, item);
        async move { rx.await.map_err(|_| Error::Closed)? }
    }

    /// A short call of one item: when first polled, it runs `alone` with the item on the
    /// caller's thread if the store is idle (as [`WriterThread::run_grouped`] runs a
    /// short call); if not, the item is left in `merge` ([`WriterThread::run_merged`]),
    /// where a call that lost the race for the idle store would otherwise queue a call
    /// of its own, its own statement and savepoint on the writer thread. Nothing runs
    /// before the first poll (13.2).
    pub fn run_alone_or_merged<I, R>(
        &self,
        merge: &Arc<Merge<T, I, R>>,
        item: I,
        alone: impl FnOnce(I, &mut T, i64) -> Result<R> + Send + 'static,
    ) -> impl Future<Output = Result<R>> + Send + 'static
    where
        I: Send + 'static,
        R: Send + 'static,
    {
        let (queue, merge) = (self.queue.clone(), merge.clone());
        let inline = self.inline.load(Ordering::Relaxed);
        async move {
            let item = if inline {
                offer_executor(|| queue.slot.free()).await;
                match run_inline_with(&queue, item, alone) {
                    Ok(answer) => return answer,
                    Err(item) => item,
                }
            } else {
                item
            };
            leave(&queue, &merge, item)
                .await
                .map_err(|_| Error::Closed)?
        }
    }
}

/// Leaves `item` in `merge` and queues the merged call unless one is queued already;
/// the item's answer arrives on the receiver.
fn leave<T, I, R>(
    queue: &Queue<T>,
    merge: &Arc<Merge<T, I, R>>,
    item: I,
) -> oneshot::Receiver<Result<R>>
where
    T: GroupCommit + Send + 'static,
    I: Send + 'static,
    R: Send + 'static,
{
    let (tx, rx) = oneshot::channel();
    if let Err(e) = queue.not_from_writer() {
        let _ = tx.send(Err(e));
    } else {
        let first = {
            let mut w = merge.waiting.lock().unwrap_or_else(|e| e.into_inner());
            w.items.push((item, tx));
            !std::mem::replace(&mut w.called, true)
        };
        if first {
            let call = MergedCall {
                merge: Some(merge.clone()),
            };
            // A writer that is gone drops the call: every item waiting is dropped with
            // it, and its caller hears `Closed`.
            let _ = queue.send(Command::Grouped(Box::new(call)));
        }
    }
    rx
}

/// The one grouped call that runs a [`Merge`]'s items.
struct MergedCall<T, I, R> {
    /// None once it ran or failed; dropped unrun (the writer closed), it drops the
    /// items waiting, so their callers hear `Closed`.
    merge: Option<Arc<Merge<T, I, R>>>,
}

impl<T, I, R> Drop for MergedCall<T, I, R> {
    fn drop(&mut self) {
        if let Some(m) = self.merge.take() {
            drop(m.take());
        }
    }
}

impl<T, I, R> GroupedCall<T> for MergedCall<T, I, R>
where
    T: GroupCommit,
    I: Send + 'static,
    R: Send + 'static,
{
    fn ops(&self) -> GroupOps<T> {
        group_ops()
    }

    fn callers(&self) -> usize {
        self.merge.as_ref().map_or(0, |m| {
            m.waiting
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .items
                .len()
        })
    }

    fn run(mut self: Box<Self>, handle: &mut T, clock: &SharedClock, solo: bool) -> Ran {
        let Some(merge) = self.merge.take() else {
            return Ran::Done(None);
        };
        // Items whose callers left run nothing (13.2).
        let (items, txs): (Vec<I>, Vec<_>) = merge
            .take()
            .into_iter()
            .filter(|(_, tx)| !tx.is_closed())
            .unzip();
        if items.is_empty() {
            return Ran::Done(None);
        }
        if !solo && let Err(e) = handle.savepoint() {
            return Ran::Done(Some(answer_each(txs, |_| Err(copy(T::BACKEND, &e)))));
        }
        let now = clock.now_ms();
        let n = items.len();
        let gone = |i: usize| txs.get(i).is_none_or(|tx| tx.is_closed());
        let outcomes = match failing_on_panic(|| Ok((merge.run)(handle, now, items, &gone))) {
            Ok(o) if o.len() == n => o,
            Ok(o) => {
                let e = Error::backend(
                    T::BACKEND,
                    std::io::Error::other(format!("it answered {} items of {n}", o.len())),
                );
                (0..n).map(|_| Err(copy(T::BACKEND, &e))).collect()
            }
            Err(e) => (0..n).map(|_| Err(copy(T::BACKEND, &e))).collect(),
        };
        // Kept unless every item failed, or every caller left meanwhile (13.4).
        let keep = outcomes.iter().any(Result::is_ok) && txs.iter().any(|tx| !tx.is_closed());
        let kept = if !keep {
            Err(None)
        } else if solo {
            Ok(())
        } else {
            handle.release().map_err(Some)
        };
        match kept {
            Ok(()) => {
                let backend = T::BACKEND;
                Ran::Kept(Box::new(move |commit| {
                    let pairs: Vec<_> = txs.into_iter().zip(outcomes).collect();
                    Box::new(move || {
                        for (tx, out) in pairs {
                            let _ = tx.send(match (&commit, out) {
                                (Ok(()), out) | (Err(_), out @ Err(_)) => out,
                                (Err(why), Ok(_)) => Err(shared_failure(backend, why)),
                            });
                        }
                    })
                }))
            }
            Err(why) => {
                let backend = T::BACKEND;
                if !solo
                    && handle.in_transaction()
                    && let Err(undo) = handle.undo()
                {
                    tracing::error!(error = %undo, "undoing a failed merged call failed");
                }
                Ran::Done(Some(Box::new(move || {
                    for (tx, out) in txs.into_iter().zip(outcomes) {
                        let _ = tx.send(match (&why, out) {
                            (Some(e), _) => Err(copy(backend, e)),
                            (None, Ok(_)) => Err(Error::Cancelled),
                            (None, out) => out,
                        });
                    }
                })))
            }
        }
    }

    fn fail(mut self: Box<Self>, why: &Error) -> Answer {
        let items = self.merge.take().map(|m| m.take()).unwrap_or_default();
        let txs = items.into_iter().map(|(_, tx)| tx).collect();
        answer_each(txs, |_| Err(shared_failure(T::BACKEND, why)))
    }
}

/// One answer that answers each caller behind `txs` with `out(k)`.
fn answer_each<R: Send + 'static>(
    txs: Vec<oneshot::Sender<Result<R>>>,
    out: impl Fn(usize) -> Result<R>,
) -> Answer {
    let outs: Vec<_> = txs
        .into_iter()
        .enumerate()
        .map(|(k, tx)| (tx, out(k)))
        .collect();
    Box::new(move || {
        for (tx, out) in outs {
            let _ = tx.send(out);
        }
    })
}

/// A copy of `e` for one caller of a merged call: the error itself when it says what to
/// do, else that the merged call failed, and why.
fn copy(backend: &'static str, e: &Error) -> Error {
    failure_for_caller(backend, "a merged call", e)
}

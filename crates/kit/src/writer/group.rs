//! Group commit: the calls waiting for the writer share one transaction, a savepoint
//! each (see the parent module).

use std::sync::Arc;

use mqlite_contract::error::{Error, Result};

use super::*;

/// What a writer's handle does so that calls can share one commit: the group's
/// transaction, and a savepoint per call.
pub trait GroupCommit: 'static {
    /// The backend's name, for errors.
    const BACKEND: &'static str;
    /// Opens the group's transaction.
    fn begin(&mut self) -> Result<()>;
    /// Opens the transaction of a call alone on its caller's thread, which cannot leave
    /// while the call runs: a handle may defer the opening to the call's first
    /// statement, and run a call whose one statement is also its last (see the SQL
    /// flows' `query_last`) by itself, committed with that statement, with no
    /// transaction statements around it. [`GroupCommit::commit`] then commits what is
    /// still open, if anything. The default opens it at once.
    fn begin_alone(&mut self) -> Result<()> {
        self.begin()
    }
    /// Commits it.
    fn commit(&mut self) -> Result<()>;
    /// Rolls it back (a failed commit).
    fn rollback(&mut self);
    /// Whether the group's transaction is still open: the database may have rolled it
    /// back by itself after an error.
    fn in_transaction(&self) -> bool;
    /// Opens a call's savepoint.
    fn savepoint(&mut self) -> Result<()>;
    /// Keeps the call's work: it commits with the group.
    fn release(&mut self) -> Result<()>;
    /// Undoes the call's work alone.
    fn undo(&mut self) -> Result<()>;
    /// After a commit, on the thread that made it: whether work is due that must not run
    /// on a caller's thread (a checkpoint, which may fsync). Answers true once per
    /// request; [`GroupCommit::maintain`] then runs on the writer thread.
    fn maintenance_due(&mut self) -> bool {
        false
    }
    /// Runs the work [`GroupCommit::maintenance_due`] asked for, on the writer thread,
    /// once the callers of the commit that left it due have their answers (they do not
    /// wait for it; their next calls do).
    fn maintain(&mut self) {}
    /// Whether each commit fsyncs: then the writer waits a moment for the callers of its
    /// last group before it runs the next ([`GATHER_WAIT`](super::GATHER_WAIT)), since
    /// one fsync fewer is worth more than the wait. Without an fsync it is not (a
    /// worker's receive waiting for producers that do not come ran 15 % slower).
    fn gathers(&self) -> bool {
        false
    }
}

/// The group's commit failed, or its transaction was lost, or the merged call that held
/// this call's work failed: nothing of this call was committed.
#[derive(Debug)]
pub struct GroupFailed {
    /// What failed: the shared commit, a merged call.
    what: &'static str,
    /// Why, with the cause's sources.
    why: String,
}

impl std::fmt::Display for GroupFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} failed ({}); nothing of this call was committed",
            self.what, self.why
        )
    }
}

impl std::error::Error for GroupFailed {}

/// The database rolled a group's transaction back by itself.
#[derive(Debug)]
struct RolledBack(&'static str);

impl std::fmt::Display for RolledBack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: the database rolled the transaction back", self.0)
    }
}

impl std::error::Error for RolledBack {}

/// An answer to a caller, sent once the handle is free again: a caller woken while
/// the writer still held the handle would find the store busy and queue its next call
/// behind nothing (the kernel often runs the woken thread at once, on the waker's core).
pub(super) type Answer = Box<dyn FnOnce() + Send>;

/// A kept call's answer, given the group commit's outcome.
type Reply = Box<dyn FnOnce(std::result::Result<(), Arc<Error>>) -> Answer + Send>;

/// The table of a handle's group operations, taken from the first call of a group.
pub(super) struct GroupOps<T> {
    pub(super) backend: &'static str,
    pub(super) begin: fn(&mut T) -> Result<()>,
    pub(super) begin_alone: fn(&mut T) -> Result<()>,
    pub(super) commit: fn(&mut T) -> Result<()>,
    pub(super) rollback: fn(&mut T),
    pub(super) in_transaction: fn(&T) -> bool,
    pub(super) maintenance_due: fn(&mut T) -> bool,
    pub(super) maintain: fn(&mut T),
    pub(super) gathers: fn(&T) -> bool,
}

/// The table of `T`'s group operations.
pub(super) fn group_ops<T: GroupCommit>() -> GroupOps<T> {
    GroupOps {
        backend: T::BACKEND,
        begin: T::begin,
        begin_alone: T::begin_alone,
        commit: T::commit,
        rollback: T::rollback,
        in_transaction: T::in_transaction,
        maintenance_due: T::maintenance_due,
        maintain: T::maintain,
        gathers: T::gathers,
    }
}

/// What running a call left.
pub(super) enum Ran {
    /// Its work is kept: answered with the commit's outcome.
    Kept(Reply),
    /// Answered already (it failed, or its caller left).
    Done(Option<Answer>),
}

/// A call that shares its commit.
pub(super) trait GroupedCall<T>: Send {
    fn ops(&self) -> GroupOps<T>;
    /// How many callers it serves (a merged call serves every item waiting): what
    /// tells the writer whether calls arrive alone.
    fn callers(&self) -> usize {
        1
    }
    /// Runs inside the group's transaction, in its own savepoint (none when `solo`: the
    /// call is the whole group, and a failure rolls the transaction back).
    fn run(self: Box<Self>, handle: &mut T, clock: &SharedClock, solo: bool) -> Ran;
    /// The group could not start: the answer without running.
    fn fail(self: Box<Self>, why: &Error) -> Answer;
}

pub(super) struct Call<F, R> {
    pub(super) f: F,
    pub(super) tx: oneshot::Sender<Result<R>>,
}

/// The answer `out` to the caller behind `tx`.
pub(super) fn answer<R: Send + 'static>(tx: oneshot::Sender<Result<R>>, out: Result<R>) -> Answer {
    Box::new(move || {
        let _ = tx.send(out);
    })
}

impl<T, F, R> GroupedCall<T> for Call<F, R>
where
    T: GroupCommit,
    F: FnOnce(&mut T, i64) -> Result<R> + Send + 'static,
    R: Send + 'static,
{
    fn ops(&self) -> GroupOps<T> {
        group_ops()
    }

    fn run(self: Box<Self>, handle: &mut T, clock: &SharedClock, solo: bool) -> Ran {
        let Call { f, tx } = *self;
        if tx.is_closed() {
            return Ran::Done(None);
        }
        if !solo && let Err(e) = handle.savepoint() {
            return Ran::Done(Some(answer(tx, Err(e))));
        }
        let now = clock.now_ms();
        let out = failing_on_panic(|| f(handle, now));
        let kept = match out {
            Ok(r) if !tx.is_closed() => {
                if solo {
                    Ok(r)
                } else {
                    handle.release().map(|()| r)
                }
            }
            // Nobody will hear of it: undone, never committed (13.4).
            Ok(_) => Err(Error::Cancelled),
            Err(e) => Err(e),
        };
        match kept {
            Ok(r) => {
                let backend = T::BACKEND;
                Ran::Kept(Box::new(move |commit| {
                    answer(
                        tx,
                        match commit {
                            Ok(()) => Ok(r),
                            Err(why) => Err(shared_failure(backend, &why)),
                        },
                    )
                }))
            }
            Err(e) => {
                // Alone, the group rolls back: nothing to undo here.
                if !solo
                    && handle.in_transaction()
                    && let Err(undo) = handle.undo()
                {
                    tracing::error!(error = %undo, "undoing a failed call in a group failed");
                }
                Ran::Done(Some(answer(tx, Err(e))))
            }
        }
    }

    fn fail(self: Box<Self>, why: &Error) -> Answer {
        answer(self.tx, Err(shared_failure(T::BACKEND, why)))
    }
}

/// What one caller of a failed group hears: the error itself when it says what to do
/// (a full disk, say), else that the shared commit failed, and why.
pub(super) fn shared_failure(backend: &'static str, why: &Error) -> Error {
    failure_for_caller(backend, "the shared commit", why)
}

/// What one of the callers that `what` served hears when it failed with `why`: the
/// error itself when it says what to do, else that `what` failed, and why.
pub(super) fn failure_for_caller(backend: &'static str, what: &'static str, why: &Error) -> Error {
    // The cause's own text, sources included (a backend error's message is only its
    // backend's name).
    why.for_each_caller().unwrap_or_else(|| {
        Error::backend(
            backend,
            GroupFailed {
                what,
                why: mqlite_contract::error::chain(why),
            },
        )
    })
}

/// Runs one group: begin, each call in its savepoint, one commit. Returns the answers,
/// to send once the handle is free. `inline`: the group is one call on its caller's
/// thread ([`GroupCommit::begin_alone`]).
pub(super) fn run_group<T>(
    handle: &mut T,
    clock: &SharedClock,
    calls: Vec<Box<dyn GroupedCall<T>>>,
    inline: bool,
) -> Vec<Answer> {
    let Some(first) = calls.first() else {
        return Vec::new();
    };
    let ops = first.ops();
    // A call alone needs no savepoint: the transaction is its own.
    let solo = calls.len() == 1;
    let mut answers: Vec<Answer> = Vec::with_capacity(calls.len());
    let begin = if inline && solo {
        ops.begin_alone
    } else {
        ops.begin
    };
    let mut open = match begin(handle) {
        Ok(()) => true,
        Err(e) => {
            return calls.into_iter().map(|c| c.fail(&e)).collect();
        }
    };
    let mut replies: Vec<Reply> = Vec::with_capacity(calls.len());
    for call in calls {
        if !open {
            match (ops.begin)(handle) {
                Ok(()) => open = true,
                Err(e) => {
                    answers.push(call.fail(&e));
                    continue;
                }
            }
        }
        match call.run(handle, clock, solo) {
            Ran::Kept(reply) => replies.push(reply),
            Ran::Done(a) => answers.extend(a),
        }
        if !(ops.in_transaction)(handle) {
            // The database rolled the group back by itself: the work of every call
            // answered so far is gone with it.
            let why = Arc::new(Error::backend(ops.backend, RolledBack(ops.backend)));
            tracing::error!("{why}; the calls of this group fail");
            answers.extend(replies.drain(..).map(|r| r(Err(why.clone()))));
            open = false;
        }
    }
    if !open {
        return answers;
    }
    if replies.is_empty() {
        // Nothing to keep: every call failed or its caller left.
        (ops.rollback)(handle);
        return answers;
    }
    match (ops.commit)(handle) {
        Ok(()) => answers.extend(replies.into_iter().map(|r| r(Ok(())))),
        Err(e) => {
            let why = Arc::new(e);
            tracing::error!(error = %why, calls = replies.len(), "a group commit failed; its calls fail");
            if (ops.in_transaction)(handle) {
                (ops.rollback)(handle);
            }
            answers.extend(replies.into_iter().map(|r| r(Err(why.clone()))));
        }
    }
    answers
}

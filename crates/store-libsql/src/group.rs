//! Group commit over the network: operations that wait for the owner's stream share one
//! transaction, and those whose whole flow is one statement share one request.
//!
//! Every operation joins a queue ([`Pending`]) and waits for its answer on its caller's
//! task. One leader at a time, on a blocking thread, takes the stream and every
//! operation queued so far and runs them as one group, then the next group, until none
//! waits ([`ensure_leader`]). A waiting caller holds no thread: when each waited on a
//! blocking thread of its own, answering a group meant waking each caller's thread and
//! then its task, and a round of 16 sends spent about 1.1 ms outside its request. Alone
//! in its group, an operation runs exactly as it would without grouping. Among others,
//! each flow runs until its first statement:
//!
//! - a flow that finishes without one (answered from what the owner knows) is done;
//! - a flow whose first statement is its last (a send of one message to a known queue, a
//!   receive of one, a renewal) hands that statement to the leader and waits;
//! - any other flow waits to run alone after the group, as it always has.
//!
//! The leader sends the handed statements in ONE request: BEGIN unless the stream is
//! parked, the owner's epoch guard once, each statement (and its counts), COMMIT and
//! BEGIN again. Each waiting flow then reads its own step's rows. 14.6 holds: no call
//! is answered before the COMMIT that holds it; a request whose COMMIT went unanswered
//! fails every call it held with `OutcomeUnknown` (10.3), a deposed owner's with
//! `Deposed`; and when the server refuses one of the statements (the request's steps
//! stop there and nothing commits), or the request never reached it (its connection
//! could not be made), the leader rolls the transaction back and every flow of the
//! request runs alone, so the failing call fails by itself and its neighbours commit. A caller that left before its group started is answered
//! `Cancelled` and runs nothing (13.2).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use mqlite_contract::{Error, Result};
use mqlite_sql::enqueue::{
    INSERT_ONE, INSERT_ROWS_AT_BODIES, INSERT_ROWS_NEXT, INSERT_ROWS_NEXT_BODIES, ROW_PARAMS,
    SHARED_PARAMS, bodies_next_params, body_values, is_body_only, returned_numbers,
    rows_next_params,
};
use mqlite_sql::{Executed, Params, Row, Value};

use crate::exec::{Exec, inline, step_answer};
use crate::transaction::{
    CatchUnwind, Conn, Gone, abandon_stream, commit_stream, fresh_park, runtime,
};
use crate::{BACKEND, Inner};

/// The most operations one group takes; the rest wait for the next.
pub(crate) const MAX_GROUP: usize = 64;

/// The most statement text one shared request carries (bodies travel as hex literals);
/// the group's statements past it run alone.
const MAX_SHARED_BYTES: usize = 4 << 20;

/// How long a leader waits for the callers of the last group to queue again (at most a
/// fifth of a request's round trip on loopback): a group's members are answered
/// together and come back together, and the leader would otherwise take the first one
/// back as a group of one while the others queue behind it.
const GATHER_WAIT: std::time::Duration = std::time::Duration::from_micros(200);

/// A flow in a group, type-erased: it answers its caller itself.
type Member<'a> = Pin<Box<dyn Future<Output = ()> + 'a>>;

/// What a leader hands a waiting operation to run on the stream.
pub(crate) struct Seat<'a> {
    inner: &'a Inner,
    conn: &'a libsql::Connection,
    slot: &'a Slot,
    now: i64,
    /// Answer this instead of running (the caller left, the owner was deposed).
    refuse: Option<Error>,
}

/// An operation waiting for a leader.
trait Start: Send {
    fn start<'a>(self: Box<Self>, seat: Seat<'a>) -> Member<'a>;
}

/// An operation: its flow and where its answer goes.
struct Op<R, F> {
    flow: F,
    reply: tokio::sync::oneshot::Sender<std::thread::Result<Result<R>>>,
}

impl<R, F> Start for Op<R, F>
where
    R: Send + 'static,
    F: for<'a, 't> AsyncFnOnce(&'a mut Exec<'t>, i64) -> Result<R> + Send + 'static,
{
    fn start<'a>(self: Box<Self>, seat: Seat<'a>) -> Member<'a> {
        let Op { flow, reply } = *self;
        Box::pin(async move {
            let _ = reply.send(member(seat, flow).await);
        })
    }
}

struct Job {
    gone: Arc<AtomicBool>,
    op: Box<dyn Start>,
}

/// The operations waiting for the stream, in arrival order, and how many ran in a
/// request they shared.
#[derive(Default)]
pub(crate) struct Pending {
    jobs: std::sync::Mutex<Vec<Job>>,
    /// How many operations the last group took.
    last: std::sync::atomic::AtomicUsize,
    shared: AtomicU64,
    merged: AtomicU64,
    /// Whether a leader runs ([`ensure_leader`]).
    leading: AtomicBool,
    /// Operations admitted and not yet answered (or dropped): the store's close waits
    /// for them ([`Pending::admitted_done`]).
    admitted: std::sync::atomic::AtomicUsize,
    /// Told when `admitted` falls to none.
    drained: tokio::sync::Notify,
    /// The store closed and released its lease: an operation a leader takes now (one
    /// whose caller left before it ran) is answered `Closed` and touches nothing.
    released: AtomicBool,
}

/// One admitted operation of [`run`], counted until its caller has its answer or leaves.
struct Admitted<'a>(&'a Pending);

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        if self.0.admitted.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.drained.notify_waiters();
        }
    }
}

impl Pending {
    fn push(&self, job: Job) {
        self.jobs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(job);
    }

    /// Waits, at most [`GATHER_WAIT`], until as many operations wait as the last group
    /// took; then takes them.
    fn gather(&self) -> Vec<Job> {
        let want = self.last.load(Ordering::Relaxed).min(MAX_GROUP);
        if want > 1 && self.waiting() < want {
            let until = Instant::now() + GATHER_WAIT;
            // On a blocking thread: yielding lets the callers being answered run.
            while self.waiting() < want && Instant::now() < until {
                std::thread::yield_now();
            }
        }
        let jobs = self.take();
        self.last.store(jobs.len(), Ordering::Relaxed);
        jobs
    }

    /// Waits until every admitted operation was answered or left ([`run`] admits an
    /// operation before it looks whether the store is closed, and the close marks it
    /// closed before it waits here, so none slips between the two).
    pub(crate) async fn admitted_done(&self) {
        loop {
            let mut drained = std::pin::pin!(self.drained.notified());
            drained.as_mut().enable();
            if self.admitted.load(Ordering::SeqCst) == 0 {
                return;
            }
            drained.await;
        }
    }

    /// The store released its lease: see [`Pending::released`].
    pub(crate) fn release(&self) {
        self.released.store(true, Ordering::SeqCst);
    }

    fn take(&self) -> Vec<Job> {
        let mut jobs = self.jobs.lock().unwrap_or_else(|p| p.into_inner());
        let n = jobs.len().min(MAX_GROUP);
        jobs.drain(..n).collect()
    }

    pub(crate) fn waiting(&self) -> usize {
        self.jobs.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Operations whose one statement went out in their group's shared request, since
    /// open.
    pub(crate) fn shared(&self) -> u64 {
        self.shared.load(Ordering::Relaxed)
    }

    /// Sends that went as a row of a multi-row INSERT of their group, since open.
    pub(crate) fn merged(&self) -> u64 {
        self.merged.load(Ordering::Relaxed)
    }
}

/// Where a flow of a group stands.
#[derive(Default)]
enum State {
    /// Not started, or done with the group.
    #[default]
    Idle,
    /// The leader gathers: the flow's first statement waits.
    Gather,
    /// The flow's one statement, waiting for the leader to take it.
    Queued(Statement),
    /// The leader took its statement: it waits for the shared request's answer (or its
    /// turn alone; its own flow still holds the statement to send).
    Handed,
    /// The flow's first statement is not its last: it waits to run alone.
    WantsAlone,
    /// Its turn to run alone on the stream, parked or not.
    Turn { parked: bool },
    /// The shared request's answer for its statement (committed), or the group's
    /// failure.
    Shared(Result<(Vec<Row>, Executed)>),
}

/// A flow's first statement when it is also its last: its text with the values
/// inlined (and its counts step for a write), and the statement and values it was
/// made from.
pub(crate) struct Last<'p> {
    pub(crate) body: &'p str,
    pub(crate) sql: &'static str,
    pub(crate) params: Params<'p>,
    pub(crate) write: bool,
}

/// A [`Last`] queued for the shared request.
struct Statement {
    body: String,
    sql: &'static str,
    params: Vec<(&'static str, Value)>,
    write: bool,
}

/// A statement the leader took, with the index of its flow in the group.
type Queued = (usize, Statement);

/// How a flow's statement goes.
pub(crate) enum Went {
    /// The flow sends it (and what follows) itself; the stream is parked or not.
    Alone { parked: bool },
    /// It went with the group: its rows and counts, committed; or the group's failure.
    Shared(Result<(Vec<Row>, Executed)>),
}

/// A value only the leader's thread touches, behind an uncontended lock so that a flow's
/// [`Exec`] stays `Send` as the flows' futures must be.
#[derive(Default)]
struct Local<T>(std::sync::Mutex<T>);

impl<T> Local<T> {
    fn lock(&self) -> std::sync::MutexGuard<'_, T> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set(&self, value: T) {
        *self.lock() = value;
    }
}

impl<T: Copy> Local<T> {
    fn get(&self) -> T {
        *self.lock()
    }
}

/// One flow's place in its group (polled on the leader's thread only).
#[derive(Default)]
pub(crate) struct Slot {
    state: Local<State>,
    /// Set once its statement went with the shared request: whether it committed.
    shared: Local<Option<bool>>,
    /// After a turn alone: whether the flow opened a transaction, and whether the
    /// stream is parked after it.
    report: Local<(bool, bool)>,
}

impl Slot {
    /// The flow's first statement: `last` when it is also its last (text and whether it
    /// writes). Waits while the leader gathers.
    pub(crate) async fn wait(&self, last: Option<Last<'_>>) -> Went {
        {
            let mut state = self.state.lock();
            match std::mem::take(&mut *state) {
                State::Turn { parked } => return Went::Alone { parked },
                State::Gather => {
                    *state = match last {
                        Some(last) => State::Queued(Statement {
                            body: last.body.to_owned(),
                            sql: last.sql,
                            params: last.params.to_vec(),
                            write: last.write,
                        }),
                        None => State::WantsAlone,
                    };
                }
                // Not in a group (cannot happen: the leader sets a state first).
                _ => return Went::Alone { parked: false },
            }
        }
        std::future::poll_fn(|_| {
            let mut state = self.state.lock();
            match std::mem::take(&mut *state) {
                State::Turn { parked } => Poll::Ready(Went::Alone { parked }),
                State::Shared(answer) => Poll::Ready(Went::Shared(answer)),
                // The leader polls again once it changed the state.
                other => {
                    *state = other;
                    Poll::Pending
                }
            }
        })
        .await
    }

    /// The flow's queued statement, taken by the leader.
    fn take_queued(&self) -> Option<Statement> {
        let mut state = self.state.lock();
        match std::mem::take(&mut *state) {
            State::Queued(statement) => {
                *state = State::Handed;
                Some(statement)
            }
            other => {
                *state = other;
                None
            }
        }
    }

    fn answer(&self, answer: Result<(Vec<Row>, Executed)>) {
        self.shared.set(Some(answer.is_ok()));
        *self.state.lock() = State::Shared(answer);
    }
}

/// Runs `flow` as one operation on the owner's stream: queued for the leader, which
/// runs it in the group it falls in, and answered by it. The caller waits on its own
/// task, holding no thread: only the leader runs on a blocking thread
/// ([`ensure_leader`]). Dropping the returned future marks the operation gone: a group
/// that has not started it yet answers `Cancelled` and runs nothing (13.2). Its answer,
/// or its panic to resume.
pub(crate) async fn run<R, F>(inner: &Arc<Inner>, flow: F) -> Result<R>
where
    R: Send + 'static,
    F: for<'a, 't> AsyncFnOnce(&'a mut Exec<'t>, i64) -> Result<R> + Send + 'static,
{
    inner.pending.admitted.fetch_add(1, Ordering::SeqCst);
    let _admitted = Admitted(&inner.pending);
    inner.check_open()?;
    let handle = runtime()?;
    let (reply, answer) = tokio::sync::oneshot::channel();
    let mut gone = Gone::armed();
    inner.pending.push(Job {
        gone: gone.flag(),
        op: Box::new(Op { flow, reply }),
    });
    ensure_leader(inner, &handle);
    let out = answer.await;
    gone.disarm();
    match out {
        Ok(Ok(out)) => out,
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        // Every leader answers what it took; a leader that failed outside every flow
        // dropped the operations it held.
        Err(_) => Err(Error::backend(
            BACKEND,
            std::io::Error::other("an operation's group ended without answering it"),
        )),
    }
}

/// Starts a leader on a blocking thread unless one is running: it leads groups, one at a
/// time, while operations wait, and ends when none does. A caller that queued while a
/// leader runs is in its next group: the leader looks at the queue again after it
/// stands down ([`lead_while_waiting`]).
fn ensure_leader(inner: &Arc<Inner>, handle: &tokio::runtime::Handle) {
    if inner.pending.leading.swap(true, Ordering::AcqRel) {
        return;
    }
    let mut duty = Duty {
        inner: inner.clone(),
        handle: handle.clone(),
        started: false,
        done: false,
    };
    // Detached: the leader answers every operation it takes through its own channel.
    drop(handle.spawn_blocking(move || {
        duty.started = true;
        let on = duty.handle.clone();
        on.block_on(lead_while_waiting(&duty.inner));
        duty.discharge();
    }));
}

/// The leader's loop: one group at a time (the stream's lock is let go between groups,
/// so an application's transaction or the lease's renewal waits for one group at most),
/// until no operation waits after it stood down.
#[allow(
    clippy::future_not_send,
    reason = "a group's flows (not Send: an application's flow need not be) are driven by block_on on the leader's blocking thread; never held across a task's await"
)]
async fn lead_while_waiting(inner: &Inner) {
    loop {
        while inner.pending.waiting() > 0 {
            let mut stream = inner.conn.lock().await;
            lead(inner, &mut stream).await;
        }
        inner.pending.leading.store(false, Ordering::SeqCst);
        // An operation queued after the last look, whose caller saw a leader running,
        // is this leader's again, unless a new leader already took it.
        if inner.pending.waiting() == 0 || inner.pending.leading.swap(true, Ordering::SeqCst) {
            return;
        }
    }
}

/// A leader's duty, from the moment it is started: if it never runs (its runtime shut
/// down before the blocking thread took it), it stands down, so that the next operation
/// queued starts another (the operations already queued wait for that one: only a store
/// shared between runtimes, one of them shutting down, meets this); if it panics outside
/// every flow (the flows' own panics are caught and go to their callers), the operations
/// it took are answered by their dropped channels, and those still waiting get a new
/// leader.
struct Duty {
    inner: Arc<Inner>,
    handle: tokio::runtime::Handle,
    started: bool,
    done: bool,
}

impl Duty {
    /// The leader stood down of itself ([`lead_while_waiting`]).
    fn discharge(&mut self) {
        self.done = true;
    }
}

impl Drop for Duty {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        self.inner.pending.leading.store(false, Ordering::SeqCst);
        if self.started && self.inner.pending.waiting() > 0 {
            ensure_leader(&self.inner, &self.handle);
        }
    }
}

/// One flow of a group, in its own [`Exec`]; then what a transaction of its own does
/// after it when it ran alone (COMMIT unless its last request carried it, ROLLBACK on a
/// failure or a panic), and what the owner remembers of the queues.
async fn member<R, F>(seat: Seat<'_>, flow: F) -> std::thread::Result<Result<R>>
where
    F: for<'a, 't> AsyncFnOnce(&'a mut Exec<'t>, i64) -> Result<R>,
{
    if let Some(e) = seat.refuse {
        return Ok(Err(e));
    }
    let Seat {
        inner, conn, slot, ..
    } = seat;
    let mut x = Exec::operation(inner, conn);
    x.seat = Some(slot);
    let out = CatchUnwind(Box::pin(flow(&mut x, seat.now))).await;
    if let Some(committed) = slot.shared.get() {
        inner.queues.settle(&mut x, committed);
        return out;
    }
    let (opened, committed) = (x.opened(), x.committed);
    let mut parked = x.parked;
    let out = match out {
        Ok(Ok(out)) => {
            let done = if opened && !committed {
                inner.sent.add();
                let done = commit_stream(conn, true).await;
                parked = done.is_ok();
                done
            } else {
                Ok(())
            };
            inner.queues.settle(&mut x, done.is_ok());
            Ok(done.map(|()| out))
        }
        // A failure or a panic (which then goes on to its caller): ROLLBACK.
        failed => {
            inner.queues.settle(&mut x, false);
            if opened {
                parked = false;
                abandon_stream(conn).await;
            }
            failed
        }
    };
    slot.report.set((opened, parked));
    out
}

/// Leads one group: takes the waiting operations and runs them on the stream.
#[allow(
    clippy::future_not_send,
    reason = "a group's flows (not Send: an application's flow need not be) are driven by block_on on the leader's blocking thread (ensure_leader); never held across a task's await"
)]
async fn lead(inner: &Inner, stream: &mut Conn) {
    let jobs = inner.pending.gather();
    if jobs.is_empty() {
        return;
    }
    let (conn, parked_at) = stream.parts();
    let now = inner.clock.now_ms();
    let gather = jobs.len() > 1;
    let slots: Vec<Slot> = jobs.iter().map(|_| Slot::default()).collect();
    let mut members: Vec<Option<Member<'_>>> = jobs
        .into_iter()
        .zip(&slots)
        .map(|(job, slot)| {
            let refuse = if job.gone.load(Ordering::Acquire) {
                Some(Error::Cancelled)
            } else if inner.pending.released.load(Ordering::SeqCst) {
                Some(Error::Closed)
            } else {
                inner.lease.still_owner().err()
            };
            if gather {
                *slot.state.lock() = State::Gather;
            }
            Some(job.op.start(Seat {
                inner,
                conn,
                slot,
                now,
                refuse,
            }))
        })
        .collect();
    if gather {
        // Each flow runs to its first statement: nothing is sent while gathering.
        let mut cx = Context::from_waker(Waker::noop());
        for m in &mut members {
            if m.as_mut()
                .is_some_and(|f| f.as_mut().poll(&mut cx).is_ready())
            {
                *m = None;
            }
        }
        // Those past the request's bound keep their statement and run alone.
        let mut bytes = 0;
        let mut queued: Vec<Queued> = Vec::new();
        for (i, slot) in slots.iter().enumerate() {
            if bytes > MAX_SHARED_BYTES {
                break;
            }
            if let Some(statement) = slot.take_queued() {
                bytes += statement.body.len();
                queued.push((i, statement));
            }
        }
        while bytes > MAX_SHARED_BYTES
            && let Some((_, statement)) = queued.pop()
        {
            bytes -= statement.body.len();
        }
        if !queued.is_empty() {
            shared_request(inner, conn, parked_at, &slots, &queued).await;
            for (i, ..) in &queued {
                if slots[*i].shared.get().is_some()
                    && let Some(m) = members[*i].take()
                {
                    m.await;
                }
            }
        }
    }
    // The rest, one at a time, each in a transaction of its own.
    for (m, slot) in members.iter_mut().zip(&slots) {
        let Some(m) = m.take() else { continue };
        let since = fresh_park(conn, parked_at).await;
        *slot.state.lock() = State::Turn {
            parked: since.is_some(),
        };
        m.await;
        let (opened, parked) = slot.report.get();
        // A flow that sent nothing left the stream as it was, parked since then.
        *parked_at = match (opened, parked) {
            (false, _) => since,
            (true, true) => Some(Instant::now()),
            (true, false) => None,
        };
    }
}

/// Sends the queued statements of a group in one request ending with COMMIT, and hands
/// each flow its answer; a refused statement leaves every flow of it to run alone.
async fn shared_request(
    inner: &Inner,
    conn: &libsql::Connection,
    parked_at: &mut Option<Instant>,
    slots: &[Slot],
    queued: &[Queued],
) {
    let since = fresh_park(conn, parked_at).await;
    // The leader's own request: each flow remembers what it read itself.
    let mut x = Exec::operation(inner, conn);
    x.parked = since.is_some();
    x.queues = None;
    // A request of one queue's merged sends alone goes at the number the owner knows,
    // and teaches it the next (exec::NextNumber).
    let pieces = pieces(queued, inner.next.take(&inner.sent));
    let alone = matches!(&pieces[..], [(Piece::Sends(..), _)]);
    if let [(Piece::Sends(_, true), _)] = &pieces[..] {
        inner.next.used.fetch_add(1, Ordering::Relaxed);
    }
    let body = pieces
        .iter()
        .map(|(_, text)| text.as_str())
        .collect::<Vec<_>>()
        .join("; ");
    match x.send_ending(&body, false).await {
        Ok(mut batch) => {
            *parked_at = x.parked.then(Instant::now);
            inner
                .pending
                .shared
                .fetch_add(queued.len() as u64, Ordering::Relaxed);
            // Each piece's steps, in order; a step that cannot be read fails its own
            // calls (their COMMIT has run).
            for (piece, _) in &pieces {
                match piece {
                    Piece::One(i, write) => {
                        slots[*i].answer(step_answer(&mut batch, *write).await);
                    }
                    Piece::Sends(members, _) => {
                        inner
                            .pending
                            .merged
                            .fetch_add(members.len() as u64, Ordering::Relaxed);
                        let numbers = step_answer(&mut batch, false)
                            .await
                            .and_then(|(rows, _)| returned_numbers(&rows, members.len()));
                        if alone && let Ok(Some(&largest)) = numbers.as_ref().map(|n| n.last()) {
                            inner.next.learn(&inner.sent, largest);
                        }
                        for (k, i) in members.iter().enumerate() {
                            slots[*i].answer(match &numbers {
                                Ok(numbers) => Ok((
                                    vec![Row(vec![Value::Int(numbers[k])])],
                                    Executed::default(),
                                )),
                                Err(e) => Err(Error::backend(
                                    BACKEND,
                                    std::io::Error::other(e.to_string()),
                                )),
                            });
                        }
                    }
                }
            }
        }
        Err(e) => {
            *parked_at = None;
            if !matches!(e, Error::OutcomeUnknown { .. }) {
                abandon_stream(conn).await;
            }
            if fails_every_call(&e) {
                for (i, _) in queued {
                    slots[*i].answer(Err(again(&e)));
                }
            } else {
                // Nothing committed (the server refused a statement, or the request
                // never reached it): each flow runs alone, and a failing one fails by
                // itself.
                tracing::debug!(error = %e, "a shared request failed; its calls run alone");
            }
        }
    }
}

/// Whether a shared request's failure is every call's: its COMMIT may have landed (so
/// may every call it held, 10.3), or the owner was deposed.
fn fails_every_call(e: &Error) -> bool {
    matches!(e, Error::OutcomeUnknown { .. } | Error::Deposed { .. })
}

/// The same failure again, for another call of the request ([`fails_every_call`]).
fn again(e: &Error) -> Error {
    match e {
        Error::Deposed { epoch } => Error::Deposed { epoch: *epoch },
        _ => Error::OutcomeUnknown {
            backend: BACKEND,
            source: mqlite_contract::error::chain(e).into(),
        },
    }
}

/// What a shared request carries for its flows: one flow's statement, or the sends of
/// one message each that one queue's flows queued, as ONE multi-row INSERT.
enum Piece {
    /// A flow's own statement (and whether it writes).
    One(usize, bool),
    /// The flows whose sends [`INSERT_ROWS_NEXT`] makes, in row order, and whether they
    /// go at a number the owner knew ([`INSERT_ROWS_AT_BODIES`]).
    Sends(Vec<usize>, bool),
}

/// The pieces of a shared request, with their text, in the flows' order (merged sends
/// where the first of them stood). Sends of one message ([`INSERT_ONE`] taking the next
/// number itself) share a piece when their shared values (`?1` … `?5`: queue, state,
/// time, visible time, expiry) are the same. One row costs the server a fraction of
/// what one statement does (sqld parses and prepares every statement afresh). When the
/// merged sends are the whole request, they go from `first`, the number the owner
/// knows, if any ([`merged`]).
fn pieces(queued: &[Queued], first: Option<i64>) -> Vec<(Piece, String)> {
    let mergeable = |s: &Statement| {
        s.sql == INSERT_ONE
            && s.params.len() == SHARED_PARAMS - 1 + ROW_PARAMS
            && s.params[SHARED_PARAMS - 2].1 == Value::Null
    };
    // Each statement alone, or with the earlier sends of the same shared values; each
    // plan at its first statement's place.
    let mut plans: Vec<(Option<Params<'_>>, Vec<&Queued>)> = Vec::new();
    for q in queued {
        let key = mergeable(&q.1).then(|| &q.1.params[..SHARED_PARAMS - 2]);
        match plans.iter_mut().find(|(k, _)| key.is_some() && *k == key) {
            Some((_, statements)) => statements.push(q),
            None => plans.push((key, vec![q])),
        }
    }
    let first = first.filter(|_| plans.len() == 1);
    plans
        .into_iter()
        .flat_map(|(key, statements)| {
            if key.is_some()
                && statements.len() > 1
                && let Ok((text, at)) = merged(&statements, first)
            {
                let members = statements.iter().map(|q| q.0).collect();
                return vec![(Piece::Sends(members, at), text)];
            }
            // (A merge that cannot be written cannot happen: every value was inlined
            // once already.)
            statements
                .into_iter()
                .map(|(i, s)| (Piece::One(*i, s.write), s.body.clone()))
                .collect()
        })
        .collect()
}

/// The text of [`INSERT_ROWS_NEXT`] for these sends (of the same shared values): the
/// shared values, the row count, then each send's row values, inlined; or of
/// [`INSERT_ROWS_NEXT_BODIES`] when every send is of a message of only a body (each
/// row then its body and priority, [`body_values`]), or of [`INSERT_ROWS_AT_BODIES`]
/// from `first`, the number the owner knows, when there is one. With whether it went
/// from `first`.
fn merged(sends: &[&Queued], first: Option<i64>) -> Result<(String, bool)> {
    let n = sends.len();
    let shared = sends[0].1.params[..SHARED_PARAMS - 2]
        .iter()
        .map(|(_, v)| v.clone());
    if sends.iter().all(|(_, s)| is_body_only(&s.params)) {
        let rows = sends.iter().flat_map(|(_, s)| body_values(&s.params));
        let mut params = bodies_next_params(shared, n, rows);
        let text = match first {
            Some(first) => {
                params.push((":first", Value::Int(first)));
                inline(INSERT_ROWS_AT_BODIES.get(n), &params)?
            }
            None => inline(INSERT_ROWS_NEXT_BODIES.get(n), &params)?,
        };
        return Ok((text, first.is_some()));
    }
    let params = rows_next_params(
        shared,
        n,
        sends
            .iter()
            .flat_map(|(_, s)| s.params[SHARED_PARAMS - 1..].iter().map(|(_, v)| v.clone())),
    );
    Ok((inline(INSERT_ROWS_NEXT.get(n), &params)?, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A queued send of one message to `q` (`INSERT_ONE`'s parameters), of only a body
    /// unless it has a `subject`.
    fn send(k: usize, body: &str, subject: Option<&str>) -> Queued {
        const NAMES: [&str; 18] = [
            "?1", "?2", "?3", "?4", "?5", "?6", "?7", "?8", "?9", "?10", "?11", "?12", "?13",
            "?14", "?15", "?16", "?17", "?18",
        ];
        let mut values = vec![Value::Null; 18];
        values[0] = Value::Text("q".into());
        values[1] = Value::Int(0);
        values[2] = Value::Int(1_000);
        values[3] = Value::Int(1_000);
        values[4] = Value::Int(0);
        values[7] = Value::Int(0);
        values[8] = Value::Blob(body.as_bytes().to_vec());
        values[11] = subject.map_or(Value::Null, |s| Value::Text(s.into()));
        values[17] = Value::Int(0);
        let params = NAMES.into_iter().zip(values).collect();
        let statement = Statement {
            body: String::new(),
            sql: INSERT_ONE,
            params,
            write: true,
        };
        (k, statement)
    }

    /// The request's pieces from `first`: each piece's text, and whether it went from
    /// `first`.
    fn texts(queued: &[Queued], first: Option<i64>) -> Vec<(String, bool)> {
        pieces(queued, first)
            .into_iter()
            .map(|(piece, text)| (text, matches!(piece, Piece::Sends(_, true))))
            .collect()
    }

    #[test]
    fn merged_sends_at_a_number_known_differ_only_in_their_first_number() {
        let queued = [send(0, "a", None), send(1, "b", None), send(2, "c", None)];
        let [(at, true)] = &texts(&queued, Some(42))[..] else {
            panic!("sends of only a body, alone: one piece from the number known");
        };
        let [(next, false)] = &texts(&queued, None)[..] else {
            panic!("the usual form: one piece");
        };
        assert!(at.contains("SELECT 42 + v.column1"), "{at}");
        assert!(!at.contains("max("), "no read of the next number: {at}");
        let rest = |text: &str| text.split_once("+ v.column1").map(|(_, r)| r.to_owned());
        assert_eq!(rest(at), rest(next), "the same rows, bodies and all");
        let headed = [send(0, "a", None), send(1, "b", Some("subject"))];
        assert!(
            texts(&headed, Some(42)).iter().all(|(_, at)| !at),
            "a send with a header"
        );
        let mut later = send(1, "b", None);
        later.1.params[3].1 = Value::Int(2_000);
        let timings = [send(0, "a", None), later];
        assert!(
            texts(&timings, Some(42)).iter().all(|(_, at)| !at),
            "two timings are two pieces"
        );
    }
}

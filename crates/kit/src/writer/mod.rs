//! The one writer thread a local store runs its work on (10.1, "nothing blocks the
//! executor"): the thread owns the store's native handle `T` (a rusqlite connection, a
//! redb database) and runs jobs from a channel in arrival order, so no two transactions
//! ever overlap. A job whose caller has gone before the thread reaches it is skipped:
//! nothing executes (13.1, 13.2). The stores build their transactions on top of
//! [`WriterThread::run`] and [`WriterThread::run_catching`].
//!
//! Group commit ([`WriterThread::run_grouped`], for a handle that implements
//! [`GroupCommit`]): the calls waiting for the writer share one transaction. The writer
//! takes every grouped call queued when it gets to them (up to [`MAX_GROUP`]), runs each
//! in its own savepoint — a call that fails is undone alone and answered at once — then
//! commits once and answers the others with the commit's outcome. No call is answered
//! before the commit that holds it; a call whose caller left before the writer reached
//! it runs nothing, and one whose caller left while it ran is undone (13.1, 13.2, 13.4);
//! once its savepoint is released, it commits with the group like a request whose client
//! hung up. When the commit fails, or the database rolls the transaction back by itself
//! (SQLite does after some I/O and disk-full errors), every call of the group gets the
//! error and nothing of the group is visible.
//!
//! Merged calls ([`WriterThread::run_merged`], `merge.rs`): callers of one small
//! operation that find the store busy leave their items in a [`Merge`], and one grouped
//! call runs every item waiting when the writer reaches it (the SQLite store inserts a
//! group's sends of one message with one statement). Before a group, a writer whose
//! commits fsync ([`GroupCommit::gathers`]) waits a moment for as many callers as its
//! last group served ([`GATHER_WAIT`]).
//!
//! Where the work runs ([`WriterThread::run_grouped`] on a writer started with
//! [`WriterThread::set_inline`]): a short call that finds the store idle — no command
//! queued for the writer thread, the handle free — runs on its caller's own thread as
//! a group of one, with no thread hop; plainjob and bare SQLite callers do the same. A
//! call that finds the store busy queues for the writer thread as before, and the
//! calls queued meanwhile share its next commit. The handle's owner says when that is
//! allowed: only while a commit cannot fsync (a WAL commit under
//! `synchronous=NORMAL`), and it moves what may (a checkpoint) to the writer thread
//! through [`GroupCommit::maintenance_due`]. Work that may wait or run long (an
//! application transaction, a sweep, a large batch) is always sent to the thread.

mod group;
mod hold;
mod merge;
mod unwind;

pub use group::*;
pub use hold::*;
pub use merge::*;
pub use unwind::*;

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::thread::JoinHandle;

use tokio::sync::oneshot;

use mqlite_contract::clock::SharedClock;
use mqlite_contract::error::{Error, Result};

/// A job for the writer thread: runs with the handle, and gives the answer to send
/// once the handle is free.
type Job<T> = Box<dyn FnOnce(&mut T, &SharedClock) -> Option<Answer> + Send>;

enum Command<T> {
    Run(Job<T>),
    Grouped(Box<dyn GroupedCall<T>>),
    Close,
}

/// The most calls one group commit holds.
pub const MAX_GROUP: usize = 256;

/// How long the writer keeps looking for the next call before it sleeps. A caller that
/// got its answer usually sends its next call within microseconds; a writer asleep by
/// then costs a thread wake-up (tens of microseconds on a virtual machine) per call.
/// Measured on the 2-core machine: 15 µs raises a lone consumer's receive-and-complete
/// rate by two thirds and leaves 16 concurrent producers as they were; 50 µs took CPU
/// from them.
const SPIN: std::time::Duration = std::time::Duration::from_micros(15);

/// How long the writer keeps looking for the next call before it sleeps while callers
/// contend, yielding its core between looks (a caller that needs the core gets it).
/// Contended callers are answered several at once and call again within tens of
/// microseconds; a writer asleep by then is woken by the first of them, and on a
/// virtual machine a thread's sleep and wake-up cost more than the call (a profile of
/// the end to end of 4 producers and 4 consumers had a quarter of the writer's time in
/// the kernel's switch and wake-up paths). Measured on the 2-core machine, six
/// alternated runs each of the peers' end to end (docs/benchmark.md): 15 µs spinning
/// 10.2k msg/s, 50 / 100 / 200 µs yielding 11.6k / 11.9k / 11.5k; the worker's end to
/// end 20.4k → 22.1k, four workers of concurrency 1 unchanged. The CPU is spent on
/// purpose: with no other thread ready, a yield returns at once, so after each group
/// the writer spins up to this long until [`CONTENDED_FOR`] of idleness ends the
/// contention.
const SPIN_CONTENDED: std::time::Duration = std::time::Duration::from_micros(100);

/// How long the writer thread must find nothing to do before the store counts as
/// uncontended again. Shorter, and producers that resubmit a few microseconds after
/// their answer (on 2 cores the writer holds one) flip between the two paths on every
/// round, paying a commit per call on the executor's threads. Measured against 1 ms
/// (with [`SOLO_GROUPS_UNCONTENDED`] at 4): a worker with four producers ran 4.7k →
/// 6.4k msg/s and the executor's lateness p99.9 10 → 1.3 ms; a lone caller is
/// unaffected (it never contends).
const CONTENDED_FOR: std::time::Duration = std::time::Duration::from_millis(5);

/// The longest the writer waits, before it runs a group, for as many callers as the
/// last group served (yielding its core meanwhile: on two cores the callers need it to
/// call again); only for a handle whose commits fsync ([`GroupCommit::gathers`]), and
/// no longer than the last group took to run and commit. Sixteen producers answered
/// together come back together; without the wait the first few back take a commit
/// (and an fsync) of their own and the rest the next one.
pub(super) const GATHER_WAIT: std::time::Duration = std::time::Duration::from_micros(100);

/// How many groups in a row of one call each end a contention: one alone is common
/// among 16 producers too, and between a worker's receive, its completer and its
/// producers, whose calls would then commit one by one on the callers' threads
/// (measured: more commits, and the executor's threads held longer).
const SOLO_GROUPS_UNCONTENDED: u32 = 16;

/// The next command: looked for without sleeping for [`SPIN`] ([`SPIN_CONTENDED`] while
/// callers contend), then waited for; after
/// [`CONTENDED_FOR`] without one the store is no longer contended. None when every
/// sender is gone.
fn next_command<T>(jobs: &mpsc::Receiver<Command<T>>, slot: &Slot<T>) -> Option<Command<T>> {
    let start = std::time::Instant::now();
    let contended = slot.contended.load(Ordering::Relaxed);
    let spin = if contended { SPIN_CONTENDED } else { SPIN };
    loop {
        match jobs.try_recv() {
            Ok(c) => return Some(c),
            Err(mpsc::TryRecvError::Disconnected) => return None,
            Err(mpsc::TryRecvError::Empty) if start.elapsed() < spin => {
                if contended {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
            Err(mpsc::TryRecvError::Empty) => break,
        }
    }
    if slot.contended.load(Ordering::Relaxed) {
        match jobs.recv_timeout(CONTENDED_FOR.saturating_sub(start.elapsed())) {
            Ok(c) => return Some(c),
            Err(mpsc::RecvTimeoutError::Disconnected) => return None,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                slot.contended.store(false, Ordering::Relaxed);
            }
        }
    }
    jobs.recv().ok()
}

/// What the writer thread and the callers share: the handle, and how many commands
/// wait for the thread.
struct Slot<T> {
    /// The store's native handle: held by the writer thread while it runs a command, or
    /// by a caller running a short call on its own thread. None once closed.
    handle: Mutex<Option<T>>,
    /// Commands sent to the writer thread that it has not taken yet. While any is, a new
    /// call queues behind them rather than running on its caller's thread: calls keep
    /// their arrival order, and the thread is never starved of the handle.
    queued: AtomicUsize,
    /// Whether the writer thread holds the handle: a call that finds it so goes to the
    /// thread without counting as contention (it is usually the thread finishing the
    /// caller's own previous call).
    writer_busy: AtomicBool,
    /// Set when a caller found the store held by another caller, or calls waiting for
    /// the writer thread; cleared when the writer thread finds calls arriving alone
    /// ([`SOLO_GROUPS_UNCONTENDED`] groups of one in a row), or nothing to do for
    /// [`CONTENDED_FOR`]. While set, every call goes to the
    /// writer thread, where the calls waiting share one commit: under contention a
    /// shared commit beats a commit per call on the callers' threads (measured:
    /// docs/benchmark.md).
    contended: AtomicBool,
}

impl<T> Slot<T> {
    /// The handle, waited for by the writer thread: a caller holds it only for one
    /// short call.
    fn lock(&self) -> MutexGuard<'_, Option<T>> {
        let guard = self.handle.lock().unwrap_or_else(|e| e.into_inner());
        self.writer_busy.store(true, Ordering::SeqCst);
        guard
    }

    /// Gives the handle back from the writer thread.
    fn unlock(&self, guard: MutexGuard<'_, Option<T>>) {
        self.writer_busy.store(false, Ordering::SeqCst);
        drop(guard);
    }

    /// Whether a call may try the caller's thread: nothing queued, the writer thread
    /// not at work, nobody contending.
    fn idle(&self) -> bool {
        self.queued.load(Ordering::SeqCst) == 0
            && !self.writer_busy.load(Ordering::SeqCst)
            && !self.contended.load(Ordering::Relaxed)
    }

    /// Whether the store is idle and nobody holds the handle right now (the writer
    /// thread, or a caller running a call on its own thread): what a call about to try
    /// its caller's thread would find, without taking the handle.
    fn free(&self) -> bool {
        self.idle() && !matches!(self.handle.try_lock(), Err(TryLockError::WouldBlock))
    }

    /// The handle if the store is idle and nobody holds it. A call that finds another
    /// caller holding it, or calls queued, marks the store contended.
    fn try_idle(&self) -> Option<MutexGuard<'_, Option<T>>> {
        if self.contended.load(Ordering::Relaxed) {
            return None;
        }
        if self.queued.load(Ordering::SeqCst) != 0 {
            self.contended.store(true, Ordering::Relaxed);
            return None;
        }
        match self.handle.try_lock() {
            Ok(g) => Some(g),
            Err(TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(TryLockError::WouldBlock) => {
                if !self.writer_busy.load(Ordering::SeqCst) {
                    self.contended.store(true, Ordering::Relaxed);
                }
                None
            }
        }
    }
}

/// The sending side of the writer thread's channel, shared by the handle and the calls
/// that decide where to run when first polled.
struct Queue<T> {
    jobs: Mutex<Option<mpsc::Sender<Command<T>>>>,
    slot: Arc<Slot<T>>,
    /// A job submitted from the writer thread itself (an application's transaction body
    /// calling the engine instead of its `tx`) would wait for the job running it.
    thread_id: std::thread::ThreadId,
    /// Calls run on their caller's thread so far.
    inline_calls: AtomicU64,
    /// How long each of those held its caller's thread.
    inline_hold: HoldTimes,
    /// The clock a call on its caller's thread reads.
    clock: SharedClock,
}

impl<T> Queue<T> {
    /// A job submitted from the writer thread itself (an application's transaction body
    /// calling the engine) would wait for the job running it: refused.
    fn not_from_writer(&self) -> Result<()> {
        if std::thread::current().id() == self.thread_id {
            return Err(Error::invalid(
                "the store was called from inside its own transaction body: use the \
                 transaction's handle (tx.send), not the engine, until the body returns",
            ));
        }
        Ok(())
    }

    fn send(&self, command: Command<T>) -> Result<()> {
        self.not_from_writer()?;
        let jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        let Some(tx) = jobs.as_ref() else {
            return Err(Error::Closed);
        };
        self.slot.queued.fetch_add(1, Ordering::SeqCst);
        tx.send(command).map_err(|_| {
            self.slot.queued.fetch_sub(1, Ordering::SeqCst);
            Error::Closed
        })
    }
}

/// The handle to a writer thread that owns a `T`.
pub struct WriterThread<T> {
    queue: Arc<Queue<T>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// Whether a short grouped call may run on its caller's thread when the store is
    /// idle (see the module docs).
    inline: AtomicBool,
}

impl<T: Send + 'static> WriterThread<T> {
    /// Starts the thread `name`; `open` runs on it and returns the handle and a guard
    /// (a file lock, say) that is dropped after the handle when the thread ends. Its
    /// error is returned here.
    pub async fn start<G: 'static>(
        name: &str,
        clock: SharedClock,
        open: impl FnOnce() -> Result<(T, G)> + Send + 'static,
    ) -> Result<Self> {
        let (jobs_tx, jobs_rx) = mpsc::channel::<Command<T>>();
        let (ready_tx, ready_rx) = oneshot::channel::<Result<()>>();
        let slot = Arc::new(Slot {
            handle: Mutex::new(None),
            queued: AtomicUsize::new(0),
            writer_busy: AtomicBool::new(false),
            contended: AtomicBool::new(false),
        });
        let shared = slot.clone();
        let thread_clock = clock.clone();
        let thread = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                let (handle, guard) = match open() {
                    Ok(v) => v,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                // Not `Slot::lock`: the thread does not hold the handle from here on.
                *shared.handle.lock().unwrap_or_else(|e| e.into_inner()) = Some(handle);
                let _ = ready_tx.send(Ok(()));
                serve(&shared, &thread_clock, &jobs_rx);
                // The handle closes before the guard is released, so the next opener
                // finds a quiet file.
                drop(shared.lock().take());
                drop(guard);
            })
            .map_err(|e| Error::backend("writer", e))?;
        ready_rx.await.map_err(|_| Error::Closed)??;
        Ok(WriterThread {
            queue: Arc::new(Queue {
                jobs: Mutex::new(Some(jobs_tx)),
                slot,
                thread_id: thread.thread().id(),
                inline_calls: AtomicU64::new(0),
                inline_hold: HoldTimes::default(),
                clock,
            }),
            thread: Mutex::new(Some(thread)),
            inline: AtomicBool::new(false),
        })
    }

    /// Lets short grouped calls run on their caller's thread when the store is idle
    /// (see the module docs): only for a handle whose commit cannot fsync or wait.
    pub fn set_inline(&self, on: bool) {
        self.inline.store(on, Ordering::Relaxed);
    }

    /// Whether a short grouped call made now would run on its caller's thread: inline
    /// calls are on and the store is idle. A store merges calls only when it is not.
    pub fn idle(&self) -> bool {
        self.inline.load(Ordering::Relaxed) && self.queue.slot.idle()
    }

    /// How many grouped calls have run on their caller's thread (tests count them).
    pub fn inline_calls(&self) -> u64 {
        self.queue.inline_calls.load(Ordering::Relaxed)
    }

    /// How long the calls run on their callers' threads held them, from taking the
    /// handle to the last answer given: the store's own share of an executor's
    /// lateness.
    pub fn inline_hold(&self) -> HoldSnapshot {
        self.queue.inline_hold.snapshot()
    }

    fn submit(&self, job: Job<T>) -> Result<()> {
        self.queue.send(Command::Run(job))
    }

    /// Runs `f` on the writer thread with the statement-time clock reading and a probe
    /// telling whether the caller went away. If the caller's future is dropped before
    /// the thread reaches the job, the job is skipped.
    pub fn run<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut T, i64, &dyn Fn() -> bool) -> Result<R> + Send + 'static,
    ) -> impl Future<Output = Result<R>> + Send + 'static {
        let (tx, rx) = oneshot::channel();
        let job: Job<T> = Box::new(move |handle, clock| {
            if tx.is_closed() {
                return None;
            }
            let now = clock.now_ms();
            let out = failing_on_panic(|| f(handle, now, &|| tx.is_closed()));
            Some(answer(tx, out))
        });
        let submitted = self.submit(job);
        async move {
            submitted?;
            rx.await.map_err(|_| Error::Closed)?
        }
    }

    /// As [`WriterThread::run`] for the application's code: its own error type, and a
    /// panic in `f` is caught on the writer thread (which goes on serving) and re-raised
    /// in the caller's task (16.1).
    pub fn run_catching<R, E>(
        &self,
        f: impl FnOnce(&mut T, i64, &dyn Fn() -> bool) -> Result<R, E> + Send + 'static,
    ) -> impl Future<Output = Result<R, E>> + Send + 'static
    where
        R: Send + 'static,
        E: From<Error> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel::<std::thread::Result<Result<R, E>>>();
        let job: Job<T> = Box::new(move |handle, clock| {
            if tx.is_closed() {
                return None;
            }
            let now = clock.now_ms();
            let gone = || tx.is_closed();
            let result = catch_unwind(AssertUnwindSafe(|| f(handle, now, &gone)));
            Some(Box::new(move || {
                let _ = tx.send(result);
            }))
        });
        let submitted = self.submit(job);
        async move {
            submitted.map_err(E::from)?;
            match rx.await {
                Err(_) => Err(E::from(Error::Closed)),
                Ok(Err(panic)) => resume_unwind(panic),
                Ok(Ok(r)) => r,
            }
        }
    }

    /// Runs `f` inside a group commit (see the module docs) with the statement-time
    /// clock reading: answered after the commit that holds it. With inline calls on
    /// ([`WriterThread::set_inline`]) and `short`, a call that finds the store idle when
    /// first polled runs on the caller's thread; otherwise it is sent to the writer
    /// thread at once, so calls made while the store is busy queue in the order made.
    pub fn run_grouped<R: Send + 'static>(
        &self,
        short: bool,
        f: impl FnOnce(&mut T, i64) -> Result<R> + Send + 'static,
    ) -> impl Future<Output = Result<R>> + Send + 'static
    where
        T: GroupCommit,
    {
        let inline = short && self.idle();
        let plan = if inline {
            Plan::Inline(self.queue.clone(), f)
        } else {
            Plan::Sent(send_grouped(&self.queue, f))
        };
        async move {
            let rx = match plan {
                Plan::Sent(rx) => rx?,
                Plan::Inline(queue, f) => {
                    offer_executor(|| queue.slot.free()).await;
                    match run_inline(&queue, f) {
                        Ok(answer) => return answer,
                        Err(f) => send_grouped(&queue, f)?,
                    }
                }
            };
            rx.await.map_err(|_| Error::Closed)?
        }
    }

    /// Lets the queued jobs finish, then drops the handle and its guard.
    pub async fn close(&self) {
        let sender = self
            .queue
            .jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(tx) = sender {
            // Counted like every command: the thread uncounts each one it takes.
            self.queue.slot.queued.fetch_add(1, Ordering::SeqCst);
            let _ = tx.send(Command::Close);
        }
        let thread = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(t) = thread {
            // Joining blocks, so it happens off the executor.
            let (done_tx, done_rx) = oneshot::channel();
            std::thread::spawn(move || {
                let _ = t.join();
                let _ = done_tx.send(());
            });
            let _ = done_rx.await;
        }
    }
}

/// Where a grouped call will run: decided when it is made, or when first polled.
enum Plan<T, F, R> {
    /// Tried on the caller's thread when first polled; sent to the writer if busy.
    Inline(Arc<Queue<T>>, F),
    /// Sent to the writer thread when made.
    Sent(Result<oneshot::Receiver<Result<R>>>),
}

/// Sends a grouped call to the writer thread.
fn send_grouped<T, F, R>(queue: &Queue<T>, f: F) -> Result<oneshot::Receiver<Result<R>>>
where
    T: GroupCommit,
    F: FnOnce(&mut T, i64) -> Result<R> + Send + 'static,
    R: Send + 'static,
{
    let (tx, rx) = oneshot::channel();
    queue.send(Command::Grouped(Box::new(Call { f, tx })))?;
    Ok(rx)
}

/// Runs a grouped call on the caller's thread as a group of one if the store is idle;
/// gives the call back otherwise. A commit that leaves maintenance due (a checkpoint)
/// asks the writer thread for it.
fn run_inline<T, F, R>(queue: &Queue<T>, f: F) -> Result<Result<R>, F>
where
    T: GroupCommit + Send,
    F: FnOnce(&mut T, i64) -> Result<R> + Send + 'static,
    R: Send + 'static,
{
    run_inline_with(queue, f, |f, handle, now| f(handle, now))
}

/// [`run_inline`] of `f` with `item`, which it gives back when the store is not idle.
fn run_inline_with<T, I, F, R>(queue: &Queue<T>, item: I, f: F) -> Result<Result<R>, I>
where
    T: GroupCommit + Send,
    I: Send + 'static,
    F: FnOnce(I, &mut T, i64) -> Result<R> + Send + 'static,
    R: Send + 'static,
{
    // A call from the writer thread itself (an application's transaction body calling
    // the engine) finds the handle held by that thread: it falls to `Queue::send`, which
    // refuses it.
    let Some(mut guard) = queue.slot.try_idle() else {
        return Err(item);
    };
    let held = std::time::Instant::now();
    let f = move |handle: &mut T, now: i64| f(item, handle, now);
    let Some(handle) = guard.as_mut() else {
        return Ok(Err(Error::Closed));
    };
    let (tx, mut rx) = oneshot::channel();
    let call: Box<dyn GroupedCall<T>> = Box::new(Call { f, tx });
    let ran = catch_unwind(AssertUnwindSafe(|| {
        run_group(handle, &queue.clock, vec![call], true)
    }));
    queue.inline_calls.fetch_add(1, Ordering::Relaxed);
    let due = ran.is_ok() && handle.maintenance_due();
    drop(guard);
    if due {
        // Nobody waits for it: the caller has its answer, the writer does the rest.
        let _ = queue.send(Command::Run(Box::new(|h: &mut T, _| {
            h.maintain();
            None
        })));
    }
    let out = match ran {
        Err(panic) => Err(Error::backend(
            "store",
            JobPanicked(panic_text(panic.as_ref())),
        )),
        Ok(answers) => {
            for a in answers {
                a();
            }
            rx.try_recv().unwrap_or(Err(Error::Closed))
        }
    };
    let held = held.elapsed();
    queue.inline_hold.record(held);
    share_core(held);
    Ok(out)
}

/// How long calls on one caller's own thread may hold it in all before the thread
/// offers its core, and the calling task its executor thread ([`share_core`]).
const YIELD_AFTER: std::time::Duration = std::time::Duration::from_micros(250);

thread_local! {
    /// How long calls on this thread have held it since it last offered its core.
    static HELD_SINCE_YIELD: std::cell::Cell<std::time::Duration> =
        const { std::cell::Cell::new(std::time::Duration::ZERO) };
    /// [`share_core`] offered the core: the next call about to run on this thread,
    /// whichever task makes it, yields its task first ([`offer_executor`]).
    static TASK_YIELD_DUE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Counts a call's `held` time on its caller's thread; once [`YIELD_AFTER`] has
/// gathered, offers the core (`sched_yield`) and marks the turn of the next call about
/// to run on this thread to yield its task first ([`offer_executor`]). A caller that
/// calls the store in a loop, each call answered on its own thread, never blocks: the
/// kernel may queue a woken thread (a runtime worker with a task to run) behind it for
/// the rest of its time slice, milliseconds, while another core sits idle; and on a
/// runtime worker the task never returns to the executor, so the tasks queued there
/// wait as long (docs/benchmark.md, "Lateness: what the probe waits for"). The count
/// belongs to the thread and never decays: a caller that calls now and then yields as
/// often per call held, one system call and one task yield per quarter millisecond of
/// calls, at once when nothing else is queued.
fn share_core(held: std::time::Duration) {
    let total = HELD_SINCE_YIELD.get() + held;
    if total >= YIELD_AFTER {
        HELD_SINCE_YIELD.set(std::time::Duration::ZERO);
        TASK_YIELD_DUE.set(true);
        std::thread::yield_now();
    } else {
        HELD_SINCE_YIELD.set(total);
    }
}

/// Before a call runs on its caller's thread: the task yields to its executor once
/// [`share_core`] asked for it (`tokio::task::yield_now`; outside a runtime's worker it
/// is ready again at the next poll), if the store is `free` then. Before the call, not
/// after it: a caller that drops the call meanwhile has run nothing, and a call that
/// runs still runs whole within one poll (13.1–13.4). Not when the store is busy (the
/// writer thread or another caller holds it): the call then goes to the writer thread
/// or joins the calls merged there at this first poll, as it would have, and the turn
/// is used up. A runtime's worker wakes a yielded task from its own loop, so a call of
/// this writer must not be driven by a blocking loop on a worker thread (see
/// `crate::blocking::block_on`).
async fn offer_executor(free: impl FnOnce() -> bool) {
    if TASK_YIELD_DUE.replace(false) && free() {
        tokio::task::yield_now().await;
    }
}

/// Takes the grouped calls waiting into `calls` (up to [`MAX_GROUP`]); returns the first
/// other command met, which waits for the group's commit.
fn take_grouped<T>(
    jobs: &mpsc::Receiver<Command<T>>,
    slot: &Slot<T>,
    calls: &mut Vec<Box<dyn GroupedCall<T>>>,
) -> Option<Command<T>> {
    while calls.len() < MAX_GROUP {
        match jobs.try_recv() {
            Ok(Command::Grouped(c)) => {
                slot.queued.fetch_sub(1, Ordering::SeqCst);
                calls.push(c);
            }
            Ok(other) => return Some(other),
            Err(_) => return None,
        }
    }
    None
}

/// The writer thread's loop: runs each command with the handle, grouping the grouped
/// calls waiting, until closed or every sender is gone.
fn serve<T>(slot: &Slot<T>, clock: &SharedClock, jobs: &mpsc::Receiver<Command<T>>) {
    let mut next: Option<Command<T>> = None;
    let mut solo_groups = 0u32;
    // How many callers the last group served, and how long the writer may wait for them
    // before the next (see [`GATHER_WAIT`]).
    let mut last_callers = 0usize;
    let mut gather = std::time::Duration::ZERO;
    loop {
        let cmd = match next.take() {
            Some(c) => c,
            None => match next_command(jobs, slot) {
                Some(c) => c,
                None => return,
            },
        };
        // Taken: a caller that comes now waits for the handle, not behind this command.
        slot.queued.fetch_sub(1, Ordering::SeqCst);
        let mut guard = slot.lock();
        let Some(handle) = guard.as_mut() else { return };
        let answers: Vec<Answer> = match cmd {
            Command::Grouped(first) => {
                // Every grouped call already waiting joins this group; the first other
                // command waits for the commit.
                let ops = first.ops();
                let mut calls = vec![first];
                // The clock is read only where the writer may wait (a handle whose
                // commits fsync); elsewhere the group takes what is queued at once.
                let waiting_since = (!gather.is_zero()).then(std::time::Instant::now);
                let callers = loop {
                    next = take_grouped(jobs, slot, &mut calls);
                    let callers: usize = calls.iter().map(|c| c.callers()).sum();
                    // The callers of the last group are usually a moment behind (each
                    // just got its answer): waiting a little for them makes one commit
                    // of what would be two (see [`GATHER_WAIT`]).
                    if next.is_some()
                        || calls.len() >= MAX_GROUP
                        || callers >= last_callers
                        || waiting_since.is_none_or(|t| t.elapsed() >= gather)
                    {
                        break callers;
                    }
                    std::thread::yield_now();
                };
                let n = calls.len();
                last_callers = callers;
                // Calls that keep arriving alone (a lone caller that once met a
                // checkpoint) may try their own thread again; calls that arrive
                // together keep sharing commits here.
                solo_groups = if callers <= 1 { solo_groups + 1 } else { 0 };
                if solo_groups >= SOLO_GROUPS_UNCONTENDED {
                    slot.contended.store(false, Ordering::Relaxed);
                }
                let began = (ops.gathers)(handle).then(std::time::Instant::now);
                let ran = catch_unwind(AssertUnwindSafe(|| run_group(handle, clock, calls, false)));
                // Worth waiting for, where commits fsync, is at most what a group
                // costs: its commit and fsync.
                gather = began.map_or(std::time::Duration::ZERO, |t| t.elapsed().min(GATHER_WAIT));
                match ran {
                    Ok(answers) => {
                        if (ops.maintenance_due)(handle) {
                            // The group's callers hear their commit first: the
                            // maintenance (a checkpoint, an fsync) is not theirs to
                            // wait for. Calls they make meanwhile queue for the thread.
                            for a in answers {
                                a();
                            }
                            (ops.maintain)(handle);
                            Vec::new()
                        } else {
                            answers
                        }
                    }
                    Err(_) => {
                        tracing::error!(calls = n, "a group commit panicked; the writer goes on");
                        Vec::new()
                    }
                }
            }
            // A job's panic is caught in the job (its caller gets an error); this is the
            // last line, so the writer keeps serving.
            Command::Run(job) => match catch_unwind(AssertUnwindSafe(|| job(handle, clock))) {
                Ok(answer) => answer.into_iter().collect(),
                Err(_) => {
                    tracing::error!("a writer job panicked; the writer goes on");
                    Vec::new()
                }
            },
            Command::Close => return,
        };
        slot.unlock(guard);
        for a in answers {
            a();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};
    use std::time::Duration;

    /// Whether `offer_executor` yields for a call to an idle store: Pending at its first
    /// poll, then Ready.
    fn yields() -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        let mut f = pin!(offer_executor(|| true));
        match f.as_mut().poll(&mut cx) {
            Poll::Ready(()) => false,
            Poll::Pending => {
                assert!(f.as_mut().poll(&mut cx).is_ready(), "one yield, then done");
                true
            }
        }
    }

    /// A handle whose maintenance waits for the test to let it go (or gives up after a
    /// minute, and says so).
    struct Gated {
        due: bool,
        gate: std::sync::mpsc::Receiver<()>,
        waited_out: Arc<AtomicBool>,
        maintained: Arc<AtomicU64>,
    }

    impl GroupCommit for Gated {
        const BACKEND: &'static str = "gated";
        fn begin(&mut self) -> Result<()> {
            Ok(())
        }
        fn commit(&mut self) -> Result<()> {
            Ok(())
        }
        fn rollback(&mut self) {}
        fn in_transaction(&self) -> bool {
            true
        }
        fn savepoint(&mut self) -> Result<()> {
            Ok(())
        }
        fn release(&mut self) -> Result<()> {
            Ok(())
        }
        fn undo(&mut self) -> Result<()> {
            Ok(())
        }
        fn maintenance_due(&mut self) -> bool {
            std::mem::take(&mut self.due)
        }
        fn maintain(&mut self) {
            if self.gate.recv_timeout(Duration::from_secs(60)).is_err() {
                self.waited_out.store(true, Ordering::SeqCst);
            }
            self.maintained.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_group_s_callers_hear_their_commit_before_the_maintenance_it_left_due() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(callers_hear_their_commit_before_maintenance());
    }

    async fn callers_hear_their_commit_before_maintenance() {
        let (open, gate) = std::sync::mpsc::channel();
        let waited_out = Arc::new(AtomicBool::new(false));
        let maintained = Arc::new(AtomicU64::new(0));
        let handle = Gated {
            due: false,
            gate,
            waited_out: waited_out.clone(),
            maintained: maintained.clone(),
        };
        let clock = mqlite_contract::clock::ManualClock::new(0).shared();
        let writer = WriterThread::start("gated", clock, move || Ok((handle, ())))
            .await
            .unwrap();
        // Sent to the writer thread (not short): its commit leaves maintenance due,
        // which holds the thread until the gate opens.
        let first = writer
            .run_grouped(false, |h: &mut Gated, _| {
                h.due = true;
                Ok(1)
            })
            .await
            .unwrap();
        assert_eq!(first, 1);
        assert_eq!(
            maintained.load(Ordering::SeqCst),
            0,
            "answered while its maintenance still runs"
        );
        open.send(()).unwrap();
        // The next call waits for the maintenance, then runs.
        let second = writer.run_grouped(false, |_, _| Ok(2)).await.unwrap();
        assert_eq!(second, 2);
        assert_eq!(maintained.load(Ordering::SeqCst), 1);
        assert!(
            !waited_out.load(Ordering::SeqCst),
            "the maintenance was let go by the test, not by its own time limit"
        );
        writer.close().await;
    }

    #[test]
    fn a_caller_s_thread_is_offered_after_a_quarter_millisecond_of_calls_and_not_before() {
        let us = Duration::from_micros;
        HELD_SINCE_YIELD.set(Duration::ZERO);
        TASK_YIELD_DUE.set(false);
        share_core(us(100));
        assert!(!yields(), "100 µs held: no yield yet");
        share_core(us(100));
        assert!(!yields(), "200 µs held: no yield yet");
        share_core(us(50));
        assert!(yields(), "250 µs held in all: the task yields once");
        assert!(!yields(), "and only once");
        share_core(us(200));
        assert!(!yields(), "the count starts over after a yield");
        share_core(us(1000));
        assert!(yields(), "one long call alone is enough");
        share_core(us(300));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(
            pin!(offer_executor(|| false)).poll(&mut cx).is_ready(),
            "a call to a busy store goes on to wait for the writer, which yields anyway"
        );
        assert!(!yields(), "and the turn is spent");
    }
}

//! The one writer thread (10.1, "nothing blocks the executor"): it owns the connection
//! and runs jobs from a command channel in arrival order, so no two statements ever
//! overlap and the claim needs no locking beyond SQLite's own.

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::Mutex;
use std::sync::mpsc;
use std::thread::JoinHandle;

use rusqlite::{Connection, Transaction, TransactionBehavior};
use tokio::sync::oneshot;

use mqlite_engine_core::{Error, Result, SharedClock};

use crate::db;

/// A unit of work for the writer thread.
type Job = Box<dyn FnOnce(&mut Connection, &SharedClock) + Send>;

enum Command {
    Run(Job),
    Close,
}

/// A store job panicked: its call failed, and nothing of it was committed.
#[derive(Debug)]
pub(crate) struct JobPanicked(String);

impl std::fmt::Display for JobPanicked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the store's job panicked ({}); nothing of it was committed",
            self.0
        )
    }
}

impl std::error::Error for JobPanicked {}

/// The message of a panic payload.
fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}

/// The handle to the writer thread.
pub(crate) struct Writer {
    jobs: Mutex<Option<mpsc::Sender<Command>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// The writer thread's id: a job submitted from the writer thread itself (an
    /// application's transaction body calling the engine instead of its `tx`) would wait
    /// for the job that is running it, forever.
    thread_id: std::thread::ThreadId,
}

impl Writer {
    /// Starts the writer thread; `open` runs on it and its error is returned here.
    pub(crate) async fn start<T: Send + 'static>(
        clock: SharedClock,
        open: impl FnOnce() -> Result<(Connection, T)> + Send + 'static,
    ) -> Result<Self> {
        let (jobs_tx, jobs_rx) = mpsc::channel::<Command>();
        let (ready_tx, ready_rx) = oneshot::channel::<Result<()>>();
        let thread = std::thread::Builder::new()
            .name("mqlite-sqlite-writer".into())
            .spawn(move || {
                let (mut conn, guard) = match open() {
                    Ok(v) => v,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(()));
                while let Ok(cmd) = jobs_rx.recv() {
                    match cmd {
                        Command::Run(job) => {
                            // A job's panic is caught in the job (its caller gets an
                            // error); this is the last line, so the writer keeps serving.
                            if catch_unwind(AssertUnwindSafe(|| job(&mut conn, &clock))).is_err() {
                                tracing::error!("a writer job panicked; the writer goes on");
                            }
                        }
                        Command::Close => break,
                    }
                }
                // The connection closes (checkpointing the WAL) before the file lock
                // is released, so the next opener finds a quiet file.
                drop(conn);
                drop(guard);
            })
            .map_err(|e| Error::backend("sqlite", e))?;
        ready_rx.await.map_err(|_| Error::Closed)??;
        Ok(Writer {
            jobs: Mutex::new(Some(jobs_tx)),
            thread_id: thread.thread().id(),
            thread: Mutex::new(Some(thread)),
        })
    }

    fn submit(&self, job: Job) -> Result<()> {
        if std::thread::current().id() == self.thread_id {
            return Err(Error::invalid(
                "the store was called from inside its own transaction body: use the \
                 transaction's handle (tx.send), not the engine, until the body returns",
            ));
        }
        let jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        match jobs.as_ref() {
            Some(tx) => tx.send(Command::Run(job)).map_err(|_| Error::Closed),
            None => Err(Error::Closed),
        }
    }

    /// Runs `f` on the writer thread with the statement-time clock reading. If the
    /// caller's future is dropped before the writer reaches the job, the job is skipped:
    /// nothing executes (13.1, 13.2).
    pub(crate) fn run<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection, i64) -> Result<R> + Send + 'static,
    ) -> impl Future<Output = Result<R>> + Send + 'static {
        self.run_watched(move |conn, now, _| f(conn, now))
    }

    /// As [`Writer::run`], and `f` may ask whether its caller is still there.
    fn run_watched<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection, i64, &dyn Fn() -> bool) -> Result<R> + Send + 'static,
    ) -> impl Future<Output = Result<R>> + Send + 'static {
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move |conn, clock| {
            if tx.is_closed() {
                return;
            }
            let now = clock.now_ms();
            // A panic fails this call alone: an open transaction rolls back as it
            // unwinds, and the writer serves the next job.
            let out = catch_unwind(AssertUnwindSafe(|| f(conn, now, &|| tx.is_closed())))
                .unwrap_or_else(|panic| {
                    let what = panic_text(panic.as_ref());
                    tracing::error!(panic = %what, "a store job panicked; its call fails and the writer goes on");
                    Err(Error::backend("sqlite", JobPanicked(what)))
                });
            let _ = tx.send(out);
        });
        let submitted = self.submit(job);
        async move {
            submitted?;
            rx.await.map_err(|_| Error::Closed)?
        }
    }

    /// Runs `f` inside one IMMEDIATE transaction on the writer thread; commits on Ok,
    /// unless the caller went away meanwhile: a statement already running finishes
    /// (13.3), but work nobody will hear about is rolled back, never committed (13.4) —
    /// a receive-and-delete whose caller is gone must not delete.
    pub(crate) fn run_tx<R: Send + 'static>(
        &self,
        f: impl FnOnce(&Transaction<'_>, i64) -> Result<R> + Send + 'static,
    ) -> impl Future<Output = Result<R>> + Send + 'static {
        self.run_watched(move |conn, now, gone| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(db)?;
            let out = f(&tx, now)?;
            if gone() {
                return Err(Error::Cancelled);
            }
            tx.commit().map_err(db)?;
            Ok(out)
        })
    }

    /// Runs an application transaction: `f` gets the transaction, the statement time and
    /// a probe telling whether the caller went away. A panic in `f` rolls back and is
    /// re-raised in the caller's task (16.1).
    pub(crate) fn run_app_tx<R, E>(
        &self,
        f: impl FnOnce(Transaction<'_>, i64, &dyn Fn() -> bool) -> Result<R, E> + Send + 'static,
    ) -> impl Future<Output = Result<R, E>> + Send + 'static
    where
        R: Send + 'static,
        E: From<Error> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel::<std::thread::Result<Result<R, E>>>();
        let job: Job = Box::new(move |conn, clock| {
            if tx.is_closed() {
                return;
            }
            let now = clock.now_ms();
            let gone = || tx.is_closed();
            let result = catch_unwind(AssertUnwindSafe(|| {
                let t = conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .map_err(|e| E::from(db(e)))?;
                f(t, now, &gone)
            }));
            let _ = tx.send(result);
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

    /// Lets the queued jobs finish, then closes the connection and releases the lock.
    pub(crate) async fn close(&self) {
        let sender = self.jobs.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(tx) = sender {
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

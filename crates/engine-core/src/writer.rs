//! The one writer thread a local store runs its work on (10.1, "nothing blocks the
//! executor"): the thread owns the store's native handle `T` (a rusqlite connection, a
//! redb database) and runs jobs from a channel in arrival order, so no two transactions
//! ever overlap. A job whose caller has gone before the thread reaches it is skipped:
//! nothing executes (13.1, 13.2). The stores build their transactions on top of
//! [`WriterThread::run`] and [`WriterThread::run_catching`].

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::Mutex;
use std::sync::mpsc;
use std::thread::JoinHandle;

use tokio::sync::oneshot;

use crate::clock::SharedClock;
use crate::error::{Error, Result};

type Job<T> = Box<dyn FnOnce(&mut T, &SharedClock) + Send>;

enum Command<T> {
    Run(Job<T>),
    Close,
}

/// A store job panicked: its call failed, and nothing of it was committed.
#[derive(Debug)]
pub struct JobPanicked(String);

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

/// The handle to a writer thread that owns a `T`.
pub struct WriterThread<T> {
    jobs: Mutex<Option<mpsc::Sender<Command<T>>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// A job submitted from the writer thread itself (an application's transaction body
    /// calling the engine instead of its `tx`) would wait for the job running it.
    thread_id: std::thread::ThreadId,
}

impl<T: 'static> WriterThread<T> {
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
        let thread = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                let (mut handle, guard) = match open() {
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
                            if catch_unwind(AssertUnwindSafe(|| job(&mut handle, &clock))).is_err()
                            {
                                tracing::error!("a writer job panicked; the writer goes on");
                            }
                        }
                        Command::Close => break,
                    }
                }
                // The handle closes before the guard is released, so the next opener
                // finds a quiet file.
                drop(handle);
                drop(guard);
            })
            .map_err(|e| Error::backend("writer", e))?;
        ready_rx.await.map_err(|_| Error::Closed)??;
        Ok(WriterThread {
            jobs: Mutex::new(Some(jobs_tx)),
            thread_id: thread.thread().id(),
            thread: Mutex::new(Some(thread)),
        })
    }

    fn submit(&self, job: Job<T>) -> Result<()> {
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
                return;
            }
            let now = clock.now_ms();
            // A panic fails this call alone: an open transaction rolls back as it
            // unwinds, and the writer serves the next job.
            let out = catch_unwind(AssertUnwindSafe(|| f(handle, now, &|| tx.is_closed())))
                .unwrap_or_else(|panic| {
                    let what = panic_text(panic.as_ref());
                    tracing::error!(
                        panic = %what,
                        "a store job panicked; its call fails and the writer goes on"
                    );
                    Err(Error::backend("store", JobPanicked(what)))
                });
            let _ = tx.send(out);
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
                return;
            }
            let now = clock.now_ms();
            let gone = || tx.is_closed();
            let result = catch_unwind(AssertUnwindSafe(|| f(handle, now, &gone)));
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

    /// Lets the queued jobs finish, then drops the handle and its guard.
    pub async fn close(&self) {
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

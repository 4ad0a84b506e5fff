//! The one writer thread: it owns the `redb::Database` and runs jobs from a channel in
//! arrival order, so every transaction is the only one (redb allows one writer anyway)
//! and nothing blocks the executor. A job whose caller is gone before the writer
//! reaches it is skipped (13.1, 13.2); work whose caller left before its commit is
//! aborted (13.4). The shape is the SQLite store's writer, over a redb database.

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::Mutex;
use std::sync::mpsc;
use std::thread::JoinHandle;

use redb::{Database, WriteTransaction};
use tokio::sync::oneshot;

use mqlite_engine_core::{Error, Result, SharedClock};

use crate::db;

type Job = Box<dyn FnOnce(&Database, &SharedClock) + Send>;

enum Command {
    Run(Job),
    Close,
}

/// The handle to the writer thread.
pub(crate) struct Writer {
    jobs: Mutex<Option<mpsc::Sender<Command>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    thread_id: std::thread::ThreadId,
}

impl Writer {
    /// Starts the writer thread; `open` runs on it and its error is returned here.
    pub(crate) async fn start(
        clock: SharedClock,
        open: impl FnOnce() -> Result<Database> + Send + 'static,
    ) -> Result<Self> {
        let (jobs_tx, jobs_rx) = mpsc::channel::<Command>();
        let (ready_tx, ready_rx) = oneshot::channel::<Result<()>>();
        let thread = std::thread::Builder::new()
            .name("mqlite-redb-writer".into())
            .spawn(move || {
                let database = match open() {
                    Ok(v) => v,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(()));
                while let Ok(cmd) = jobs_rx.recv() {
                    match cmd {
                        Command::Run(job) => job(&database, &clock),
                        Command::Close => break,
                    }
                }
                // Releases the file and its lock.
                drop(database);
            })
            .map_err(|e| Error::backend("redb", e))?;
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

    /// Runs `f` inside one write transaction on the writer thread with the
    /// statement-time clock reading; commits (durably: redb's default
    /// `Durability::Immediate`) on Ok unless the caller went away meanwhile.
    pub(crate) fn run_tx<R: Send + 'static>(
        &self,
        f: impl FnOnce(&WriteTransaction, i64) -> Result<R> + Send + 'static,
    ) -> impl Future<Output = Result<R>> + Send + 'static {
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move |database, clock| {
            if tx.is_closed() {
                return;
            }
            let now = clock.now_ms();
            let out = (|| {
                let txn = database.begin_write().map_err(db)?;
                let out = f(&txn, now)?;
                if tx.is_closed() {
                    // Dropping the transaction aborts it (13.4).
                    return Err(Error::Cancelled);
                }
                txn.commit().map_err(db)?;
                Ok(out)
            })();
            let _ = tx.send(out);
        });
        let submitted = self.submit(job);
        async move {
            submitted?;
            rx.await.map_err(|_| Error::Closed)?
        }
    }

    /// Runs an application transaction: `f` gets the open write transaction, the
    /// statement time and a probe telling whether the caller went away, and commits it
    /// itself. A panic in `f` aborts the transaction and is re-raised in the caller's
    /// task (16.1).
    pub(crate) fn run_app_tx<R, E>(
        &self,
        f: impl FnOnce(WriteTransaction, i64, &dyn Fn() -> bool) -> Result<R, E> + Send + 'static,
    ) -> impl Future<Output = Result<R, E>> + Send + 'static
    where
        R: Send + 'static,
        E: From<Error> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel::<std::thread::Result<Result<R, E>>>();
        let job: Job = Box::new(move |database, clock| {
            if tx.is_closed() {
                return;
            }
            let now = clock.now_ms();
            let gone = || tx.is_closed();
            let result = catch_unwind(AssertUnwindSafe(|| {
                let txn = database.begin_write().map_err(|e| E::from(db(e)))?;
                f(txn, now, &gone)
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

    /// Lets the queued jobs finish, then closes the database and releases its lock.
    pub(crate) async fn close(&self) {
        let sender = self.jobs.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(tx) = sender {
            let _ = tx.send(Command::Close);
        }
        let thread = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(t) = thread {
            let (done_tx, done_rx) = oneshot::channel();
            std::thread::spawn(move || {
                let _ = t.join();
                let _ = done_tx.send(());
            });
            let _ = done_rx.await;
        }
    }
}

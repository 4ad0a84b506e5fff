//! Transactions on the server: one per operation (the owner's epoch check, the work,
//! COMMIT or ROLLBACK) on the owner's stream, parked between operations ([`Conn`]), off
//! the executor, with a commit whose outcome the client cannot know reported as unknown
//! (10.3).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mqlite_contract::{Error, Result};

use crate::{BACKEND, Inner, db};

/// The owner's connection, and whether its stream is parked: left inside a deferred
/// transaction that has run nothing, so that the next operation's first request needs
/// no BEGIN and reaches the same connection on the server. sqld opens a connection (and
/// reads the schema, and prepares every statement afresh) for each new stream, and the
/// client closes its stream whenever a transaction ends in autocommit: that was two
/// thirds of a one-request send's time on loopback (docs/libsql.md). A deferred BEGIN
/// takes no lock and no snapshot until its first statement, so a parked stream holds
/// nothing the server or another connection could wait for.
pub(crate) struct Conn {
    conn: libsql::Connection,
    parked_at: Option<Instant>,
}

/// How long a parked stream is used again: well inside the time after which the server
/// expires an idle stream. An older one is ended and the operation opens a new stream.
const PARK_FRESH: Duration = Duration::from_secs(2);

impl Conn {
    pub(crate) fn new(conn: libsql::Connection) -> Self {
        Conn {
            conn,
            parked_at: None,
        }
    }

    /// The connection, and since when its stream is parked (None: not parked), apart.
    pub(crate) fn parts(&mut self) -> (&libsql::Connection, &mut Option<Instant>) {
        (&self.conn, &mut self.parked_at)
    }

    /// The connection for anything but an operation's flow (an application's
    /// transaction, the lease, a plan), its stream not parked.
    pub(crate) async fn unparked(&mut self) -> &libsql::Connection {
        self.unpark().await;
        &self.conn
    }

    async fn unpark(&mut self) {
        unpark(&self.conn, &mut self.parked_at).await;
    }
}

/// Ends the parked transaction (it ran nothing); a stream the server no longer knows is
/// dropped.
async fn unpark(conn: &libsql::Connection, parked_at: &mut Option<Instant>) {
    if parked_at.take().is_some() && conn.execute("COMMIT", ()).await.is_err() {
        conn.reset().await;
    }
}

/// Readies the stream for an operation: since when it is parked, when it is and fresh
/// (the operation's first request then needs no BEGIN); an older park is ended first.
/// The stream counts as not parked until the operation says how it left it.
pub(crate) async fn fresh_park(
    conn: &libsql::Connection,
    parked_at: &mut Option<Instant>,
) -> Option<Instant> {
    let fresh = parked_at.filter(|at| at.elapsed() < PARK_FRESH);
    if fresh.is_none() {
        unpark(conn, parked_at).await;
    }
    *parked_at = None;
    fresh
}

/// Commits; a failure whose outcome the client cannot know (the request was sent but
/// no answer came) is `OutcomeUnknown`, never success or plain failure (10.3).
pub(crate) async fn commit(tx: libsql::Transaction) -> Result<()> {
    tx.commit().await.map_err(|e| unknown_if_transient(db(e)))
}

/// The runtime the caller runs in: the store's work needs one.
pub(crate) fn runtime() -> Result<tokio::runtime::Handle> {
    tokio::runtime::Handle::try_current()
        .map_err(|_| Error::invalid("the libSQL store runs inside a tokio runtime"))
}

/// Runs `job` on a blocking thread, driving its future there with the runtime's handle:
/// the libsql client is async, but an application's transaction body (which may block,
/// and need not be `Send`) stays off the executor. (An operation's flow waits for the
/// group's leader instead, [`crate::group::run`].) Dropping the returned future raises
/// the `gone` flag the job sees; the job itself runs to its end.
pub(crate) async fn off_executor<R, E, Fut>(
    job: impl FnOnce(Arc<AtomicBool>) -> Fut + Send + 'static,
) -> Result<R, E>
where
    R: Send + 'static,
    E: From<Error> + Send + 'static,
    Fut: Future<Output = Result<R, E>>,
{
    let handle = runtime().map_err(E::from)?;
    let mut gone = Gone::armed();
    let flag = gone.flag();
    let out = match tokio::task::spawn_blocking(move || handle.block_on(job(flag))).await {
        Ok(out) => out,
        // The application's code panicked inside its transaction (rolled back).
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(E::from(Error::backend(BACKEND, e))),
    };
    gone.disarm();
    out
}

/// Raises its flag when dropped while armed: the caller went away.
pub(crate) struct Gone {
    flag: Arc<AtomicBool>,
    armed: bool,
}

impl Gone {
    /// A guard whose flag is down, armed.
    pub(crate) fn armed() -> Self {
        Gone {
            flag: Arc::new(AtomicBool::new(false)),
            armed: true,
        }
    }

    /// The flag the job sees.
    pub(crate) fn flag(&self) -> Arc<AtomicBool> {
        self.flag.clone()
    }

    /// The caller has its answer: dropping the guard no longer raises the flag.
    pub(crate) fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for Gone {
    fn drop(&mut self) {
        if self.armed {
            self.flag.store(true, Ordering::Release);
        }
    }
}

/// One transaction: BEGIN IMMEDIATE, the owner's epoch check, `body` with the
/// statement time, then COMMIT, or ROLLBACK when `body` fails or panics (the panic
/// then goes on to the caller). A call whose caller left while it waited for the
/// connection does nothing (13.2).
pub(crate) async fn transaction<R, E: From<Error>>(
    inner: &Inner,
    gone: &AtomicBool,
    body: impl AsyncFnOnce(&libsql::Transaction, i64) -> Result<R, E>,
) -> Result<R, E> {
    inner.check_open()?;
    let mut conn = inner.conn.lock().await;
    if gone.load(Ordering::Acquire) {
        return Err(Error::Cancelled.into());
    }
    let conn = conn.unparked().await;
    let tx = crate::exec::opening(conn, &inner.sent, Some(&inner.retries), || {
        conn.transaction_with_behavior(libsql::TransactionBehavior::Immediate)
    })
    .await?;
    if let Err(e) = inner.lease.check(&tx, &inner.sent).await {
        let _ = tx.rollback().await;
        return Err(e.into());
    }
    let now = inner.clock.now_ms();
    match CatchUnwind(Box::pin(body(&tx, now))).await {
        Ok(Ok(out)) => {
            inner.sent.add();
            commit(tx).await?;
            Ok(out)
        }
        Ok(Err(e)) => {
            let _ = tx.rollback().await;
            Err(e)
        }
        Err(panic) => {
            let _ = tx.rollback().await;
            std::panic::resume_unwind(panic)
        }
    }
}

/// COMMIT on the connection's stream (and BEGIN to park it, with `park`); an
/// answerless failure is `OutcomeUnknown`.
pub(crate) async fn commit_stream(conn: &libsql::Connection, park: bool) -> Result<()> {
    let done = if park {
        conn.execute_batch("COMMIT; BEGIN").await.map(drop)
    } else {
        conn.execute("COMMIT", ()).await.map(drop)
    };
    match done {
        Ok(()) => Ok(()),
        Err(e) => {
            conn.reset().await;
            Err(unknown_if_transient(db(e)))
        }
    }
}

/// Ends whatever transaction the stream holds, and starts the next operation on a
/// fresh stream when the server cannot be told.
pub(crate) async fn abandon_stream(conn: &libsql::Connection) {
    // Not judged by the client's autocommit flag, which a failed request leaves as it
    // was: a transaction left open would swallow the next autocommit statement.
    if conn.execute("ROLLBACK", ()).await.is_err() {
        conn.reset().await;
    }
}

/// A failure of a request carrying COMMIT whose outcome the client cannot know is
/// `OutcomeUnknown` (10.3).
pub(crate) fn unknown(e: Error) -> Error {
    match e {
        Error::Backend { source, .. } => Error::OutcomeUnknown {
            backend: BACKEND,
            source,
        },
        other => other,
    }
}

/// A transient (answerless) failure of a COMMIT is `OutcomeUnknown` (10.3).
pub(crate) fn unknown_if_transient(e: Error) -> Error {
    match e {
        Error::Backend {
            transient: true,
            source,
            ..
        } => Error::OutcomeUnknown {
            backend: BACKEND,
            source,
        },
        other => other,
    }
}

/// A future whose panic is caught and returned, so the transaction is rolled back
/// before the panic goes on.
pub(crate) struct CatchUnwind<F>(pub(crate) std::pin::Pin<Box<F>>);

impl<F: Future> Future for CatchUnwind<F> {
    type Output = std::thread::Result<F::Output>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let inner = self.0.as_mut();
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(std::task::Poll::Ready(v)) => std::task::Poll::Ready(Ok(v)),
            Ok(std::task::Poll::Pending) => std::task::Poll::Pending,
            Err(panic) => std::task::Poll::Ready(Err(panic)),
        }
    }
}

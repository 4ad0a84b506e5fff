//! mqlite on a remote libSQL server (Turso, or one's own sqld) through the libsql
//! crate's remote client.
//!
//! Durability and replication are the server's: the queue outlives any one host. One
//! engine owns the database at a time, by a lease kept in the data (`mqlite_meta`:
//! owner, epoch, expiry), renewed in the background; a second opener gets `DbLocked`
//! while the lease is live and takes over with a higher epoch once it lapses. Every
//! operation's transaction checks the epoch first, so a deposed owner's writes fail
//! with `Deposed` and change nothing. The statements and flows are `mqlite_sql`'s,
//! shared with the SQLite store; this crate supplies the connection, the transaction
//! and the lease.
//!
//! Every statement is a round trip to the server. sqld steals a write lock held longer
//! than 5 seconds: the other connection proceeds and the first one's COMMIT fails, so
//! an application transaction (`Engine::tx`) must finish well inside that.

mod exec;
mod owner;
#[cfg(feature = "tck")]
pub mod tck;
mod tx;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use mqlite_engine_core::{
    Error, OpenStore, OutboxStore, Ownership, Result, SharedClock, Store, StoreStatus, SystemClock,
    WorkStats,
};
use mqlite_sql as sql;

pub use tx::LibsqlTx;

use exec::{Exec, Sent};
use owner::Lease;

/// The backend name in errors.
const BACKEND: &str = "libsql";

/// Converts a libsql error into the boundary's error: a failure to reach the server
/// (no answer) is transient, an answer from the server (a refusal, a constraint, a
/// stolen lock) is not.
pub(crate) fn db(e: libsql::Error) -> Error {
    let transport = match &e {
        libsql::Error::ConnectionFailed(_) => true,
        libsql::Error::Hrana(inner) => is_transport(&inner.to_string()),
        _ => false,
    };
    if transport {
        Error::transient(BACKEND, e)
    } else {
        Error::backend(BACKEND, e)
    }
}

/// Whether a hrana error is the transport failing rather than the server answering.
fn is_transport(text: &str) -> bool {
    if text.starts_with("stream error") {
        // The server answered this request with an error.
        return false;
    }
    let t = text.to_ascii_lowercase();
    t.starts_with("http error")
        || [
            "connection",
            "broken pipe",
            "reset",
            "timed out",
            "stream expired",
        ]
        .iter()
        .any(|w| t.contains(w))
}

/// How long an owner lease lasts unless renewed.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(15);

/// How to open a libSQL store.
#[derive(Clone)]
pub struct LibsqlOptions {
    /// `libsql://…`, `http://…` or `https://…`.
    pub url: String,
    /// The server's auth token (Turso), if it wants one.
    pub auth_token: Option<String>,
    /// The clock every statement and the lease read.
    pub clock: SharedClock,
    /// How long the owner lease lasts unless renewed (renewed every third of it).
    pub lease: Duration,
}

impl std::fmt::Debug for LibsqlOptions {
    // Never print the token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LibsqlOptions")
            .field("url", &masked(&self.url))
            .field("auth_token", &self.auth_token.as_ref().map(|_| "…"))
            .field("lease", &self.lease)
            .finish_non_exhaustive()
    }
}

impl LibsqlOptions {
    /// Options for `url`, the token from `MQLITE_DB_AUTH_TOKEN`, the lease length from
    /// `MQLITE_DB_LEASE_MS` (else [`DEFAULT_LEASE`]), the system clock.
    pub fn new(url: impl Into<String>) -> Self {
        let lease = std::env::var("MQLITE_DB_LEASE_MS")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|ms| *ms > 0)
            .map_or(DEFAULT_LEASE, Duration::from_millis);
        LibsqlOptions {
            url: url.into(),
            auth_token: std::env::var("MQLITE_DB_AUTH_TOKEN")
                .ok()
                .filter(|t| !t.is_empty()),
            clock: SystemClock::shared(),
            lease,
        }
    }

    /// Uses this clock.
    pub fn clock(mut self, clock: SharedClock) -> Self {
        self.clock = clock;
        self
    }

    /// Uses this auth token.
    pub fn auth_token(mut self, token: impl Into<String>) -> Self {
        self.auth_token = Some(token.into());
        self
    }

    /// Uses this lease length.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }
}

/// The URL without credentials or query: safe to show.
pub(crate) fn masked(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let host = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
    let host = host.split(['?', '#']).next().unwrap_or(host);
    if scheme.is_empty() {
        host.to_owned()
    } else {
        format!("{scheme}://{host}")
    }
}

/// The remote libSQL store.
pub struct LibsqlStore {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    /// One operation at a time: this store is the owner's one writer.
    conn: tokio::sync::Mutex<libsql::Connection>,
    clock: SharedClock,
    location: String,
    lease: Lease,
    sent: Sent,
    retries: std::sync::atomic::AtomicU64,
    closed: AtomicBool,
    /// The queues' rows this owner knows ([`exec::QueueCache`]).
    queues: exec::QueueCache,
}

impl std::fmt::Debug for LibsqlStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LibsqlStore")
            .field("location", &self.inner.location)
            .field("epoch", &self.inner.lease.epoch())
            .finish()
    }
}

impl Drop for LibsqlStore {
    fn drop(&mut self) {
        // The renewal task holds only a weak reference; it ends with the store. The
        // lease is released by `close`; a dropped store's lease lapses on its own.
        self.inner.closed.store(true, Ordering::Release);
    }
}

impl LibsqlStore {
    /// Connects, creates the schema on an empty database (or refuses another schema
    /// token), takes the owner lease (`DbLocked` while another owner's is live) and
    /// starts renewing it.
    pub async fn open(options: LibsqlOptions) -> Result<Self> {
        if options.lease < Duration::from_secs(1) {
            return Err(Error::invalid("the owner lease must be at least 1 s"));
        }
        let location = masked(&options.url);
        let url = options
            .url
            .strip_prefix("libsql://")
            .map_or_else(|| options.url.clone(), |rest| format!("https://{rest}"));
        let database = libsql::Builder::new_remote(url, options.auth_token.unwrap_or_default())
            .build()
            .await
            .map_err(db)?;
        let conn = database.connect().map_err(db)?;
        owner::ensure_schema(&conn, &location).await?;
        let lease = Lease::take(&conn, &options.clock, options.lease, &location).await?;
        let inner = Arc::new(Inner {
            conn: tokio::sync::Mutex::new(conn),
            clock: options.clock,
            location,
            lease,
            sent: Sent::default(),
            retries: std::sync::atomic::AtomicU64::new(0),
            closed: AtomicBool::new(false),
            queues: exec::QueueCache::default(),
        });
        owner::spawn_renewal(Arc::downgrade(&inner));
        Ok(LibsqlStore { inner })
    }

    /// [`store_ops!`](sql::store_ops)'s entry: every call is a request to the server,
    /// off the executor whatever its size.
    fn sql_tx_sized<R, F>(
        &self,
        _items: usize,
        f: F,
    ) -> impl Future<Output = Result<R>> + Send + 'static
    where
        R: Send + 'static,
        F: for<'a, 't> AsyncFnOnce(&'a mut Exec<'t>, i64) -> Result<R> + Send + 'static,
    {
        self.sql_tx(f)
    }

    /// [`store_ops!`](sql::store_ops)'s entry for the flows that add messages: the
    /// server owns the disk, so they run as every other flow.
    fn sql_tx_growing<R, F>(
        &self,
        _items: usize,
        f: F,
    ) -> impl Future<Output = Result<R>> + Send + 'static
    where
        R: Send + 'static,
        F: for<'a, 't> AsyncFnOnce(&'a mut Exec<'t>, i64) -> Result<R> + Send + 'static,
    {
        self.sql_tx(f)
    }

    /// Runs a shared flow in one transaction (see [`flow_transaction`]), off the
    /// executor.
    fn sql_tx<R, F>(&self, f: F) -> impl Future<Output = Result<R>> + Send + 'static
    where
        R: Send + 'static,
        F: for<'a, 't> AsyncFnOnce(&'a mut Exec<'t>, i64) -> Result<R> + Send + 'static,
    {
        let inner = self.inner.clone();
        off_executor(move |gone| async move { flow_transaction(&inner, &gone, f).await })
    }

    /// Runs `EXPLAIN QUERY PLAN` for `sql` on the server (plan pins), each named
    /// parameter bound by `bind`.
    pub async fn explain(
        &self,
        sql: &str,
        bind: impl Fn(&str) -> sql::Value + Send + 'static,
    ) -> Result<Vec<String>> {
        let params: Vec<(&str, sql::Value)> = parameter_names(sql)
            .into_iter()
            .map(|n| (n, bind(n)))
            .collect();
        let conn = self.inner.conn.lock().await;
        exec::rows(&conn, &format!("EXPLAIN QUERY PLAN {sql}"), &params)
            .await?
            .iter()
            .map(|r| r.text(3))
            .collect()
    }

    /// The owner epoch this store holds.
    pub fn epoch(&self) -> u64 {
        self.inner.lease.epoch()
    }

    /// Statements sent to the server since open (BEGIN and COMMIT included).
    pub fn statements_sent(&self) -> u64 {
        self.inner.sent.get()
    }

    /// How many times a BEGIN was retried after a transient failure since open.
    pub fn retries(&self) -> u64 {
        self.inner.retries.load(Ordering::Relaxed)
    }
}

/// The `:name` and `?N` parameters of a statement, each once.
fn parameter_names(sql: &str) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    let bytes = sql.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let named = bytes[i] == b':' && bytes.get(i + 1).is_some_and(u8::is_ascii_alphabetic);
        let numbered = bytes[i] == b'?' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit);
        if named || numbered {
            let start = i;
            i += 1;
            while bytes
                .get(i)
                .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
            {
                i += 1;
            }
            let name = &sql[start..i];
            if !out.contains(&name) {
                out.push(name);
            }
        } else {
            i += 1;
        }
    }
    out
}

/// Commits; a failure whose outcome the client cannot know (the request was sent but
/// no answer came) is `OutcomeUnknown`, never success or plain failure (10.3).
async fn commit(tx: libsql::Transaction) -> Result<()> {
    tx.commit().await.map_err(|e| unknown_if_transient(db(e)))
}

/// Runs `job` on a blocking thread, driving its future there with the runtime's handle:
/// the libsql client is async, but the operation's work (and the application's
/// transaction body, which need not be `Send`) stays off the executor. Dropping the
/// returned future raises the `gone` flag the job sees; the job itself runs to its end.
async fn off_executor<R, E, Fut>(
    job: impl FnOnce(Arc<AtomicBool>) -> Fut + Send + 'static,
) -> Result<R, E>
where
    R: Send + 'static,
    E: From<Error> + Send + 'static,
    Fut: Future<Output = Result<R, E>>,
{
    let handle = tokio::runtime::Handle::try_current().map_err(|_| {
        E::from(Error::invalid(
            "the libSQL store runs inside a tokio runtime",
        ))
    })?;
    let mut gone = Gone {
        flag: Arc::new(AtomicBool::new(false)),
        armed: true,
    };
    let flag = gone.flag.clone();
    let out = match tokio::task::spawn_blocking(move || handle.block_on(job(flag))).await {
        Ok(out) => out,
        // The application's code panicked inside its transaction (rolled back).
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(E::from(Error::backend(BACKEND, e))),
    };
    gone.armed = false;
    out
}

/// Raises its flag when dropped while armed: the caller went away.
struct Gone {
    flag: Arc<AtomicBool>,
    armed: bool,
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
async fn transaction<R, E: From<Error>>(
    inner: &Inner,
    gone: &AtomicBool,
    body: impl AsyncFnOnce(&libsql::Transaction, i64) -> Result<R, E>,
) -> Result<R, E> {
    inner.check_open()?;
    let conn = inner.conn.lock().await;
    if gone.load(Ordering::Acquire) {
        return Err(Error::Cancelled.into());
    }
    let tx = exec::opening(&conn, &inner.sent, Some(&inner.retries), || {
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

/// One shared flow in one transaction: BEGIN IMMEDIATE and the owner's epoch check go
/// out with the flow's first statement ([`Exec`]); then its other statements; then
/// COMMIT, or ROLLBACK when the flow fails or panics (the panic then goes on). A flow
/// that sent nothing commits nothing. A call whose caller left while it waited for the
/// connection does nothing (13.2).
async fn flow_transaction<R, F>(inner: &Inner, gone: &AtomicBool, f: F) -> Result<R>
where
    F: for<'a, 't> AsyncFnOnce(&'a mut Exec<'t>, i64) -> Result<R>,
{
    inner.check_open()?;
    let conn = inner.conn.lock().await;
    if gone.load(Ordering::Acquire) {
        return Err(Error::Cancelled);
    }
    inner.lease.still_owner()?;
    let now = inner.clock.now_ms();
    let mut x = Exec {
        conn: &conn,
        sent: &inner.sent,
        opening: Some(&inner.lease),
        retries: Some(&inner.retries),
        committed: false,
        queues: Some(&inner.queues),
        read: Vec::new(),
        changed: false,
    };
    let out = CatchUnwind(Box::pin(f(&mut x, now))).await;
    let (opened, committed) = (x.opened(), x.committed);
    match out {
        Ok(Ok(out)) => {
            let done = if opened && !committed {
                inner.sent.add();
                commit_stream(&conn).await
            } else {
                Ok(())
            };
            inner.queues.settle(&mut x, done.is_ok());
            done.map(|()| out)
        }
        Ok(Err(e)) => {
            inner.queues.settle(&mut x, false);
            abandon_stream(&conn).await;
            Err(e)
        }
        Err(panic) => {
            inner.queues.settle(&mut x, false);
            abandon_stream(&conn).await;
            std::panic::resume_unwind(panic)
        }
    }
}

/// COMMIT on the connection's stream; an answerless failure is `OutcomeUnknown`.
async fn commit_stream(conn: &libsql::Connection) -> Result<()> {
    match conn.execute("COMMIT", ()).await {
        Ok(_) => Ok(()),
        Err(e) => {
            conn.reset().await;
            Err(unknown_if_transient(db(e)))
        }
    }
}

/// Ends whatever transaction the stream holds, and starts the next operation on a
/// fresh stream when the server cannot be told.
async fn abandon_stream(conn: &libsql::Connection) {
    if !conn.is_autocommit() && conn.execute("ROLLBACK", ()).await.is_err() {
        conn.reset().await;
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
struct CatchUnwind<F>(std::pin::Pin<Box<F>>);

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

impl Inner {
    fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            Err(Error::Closed)
        } else {
            Ok(())
        }
    }
}

impl OpenStore for LibsqlStore {
    async fn open_at(location: &str, clock: SharedClock) -> Result<Self> {
        LibsqlStore::open(LibsqlOptions::new(location).clock(clock)).await
    }
}

impl Store for LibsqlStore {
    fn backend(&self) -> &'static str {
        BACKEND
    }

    fn clock(&self) -> &SharedClock {
        &self.inner.clock
    }

    fn ownership(&self) -> Ownership {
        Ownership::Lease {
            epoch: self.inner.lease.epoch(),
        }
    }

    fn work(&self) -> Option<WorkStats> {
        // The remote client reports no rows read: cost pins by visits do not apply.
        None
    }

    sql::store_ops!();

    fn status(&self) -> impl Future<Output = Result<StoreStatus>> + Send {
        let location = self.inner.location.clone();
        self.sql_tx(async move |x, _| sql::admin::status(x, BACKEND, location, true).await)
    }

    fn close(&self) -> impl Future<Output = ()> + Send {
        let inner = self.inner.clone();
        async move {
            if inner.closed.swap(true, Ordering::AcqRel) {
                return;
            }
            let conn = inner.conn.lock().await;
            inner.lease.release(&conn, &inner.sent).await;
        }
    }
}

impl OutboxStore for LibsqlStore {
    type Tx<'t> = LibsqlTx<'t>;

    fn in_tx<R, E, F>(&self, f: F) -> impl Future<Output = Result<R, E>> + Send
    where
        F: for<'a, 't> AsyncFnOnce(&'a mut Self::Tx<'t>) -> Result<R, E> + Send + 'static,
        R: Send + 'static,
        E: From<Error> + Send + 'static,
    {
        let inner = self.inner.clone();
        off_executor(move |gone| async move {
            transaction(&inner, &gone, async |tx, now| {
                let mut ltx = LibsqlTx {
                    tx,
                    now,
                    sent: &inner.sent,
                    gone: &gone,
                };
                let out = f(&mut ltx).await?;
                // Cancelled before commit: the transaction rolls back (13.4, 16.1).
                mqlite_engine_core::StoreTx::check_cancelled(&ltx).map_err(E::from)?;
                Ok(out)
            })
            .await
        })
    }
}

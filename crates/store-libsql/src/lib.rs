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
mod group;
mod owner;
mod transaction;
mod tx;

use transaction::*;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use mqlite_contract::{
    Error, OutboxStore, Ownership, Result, SharedClock, Store, StoreKind, StoreStatus, SystemClock,
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
    conn: tokio::sync::Mutex<transaction::Conn>,
    clock: SharedClock,
    location: String,
    lease: Lease,
    sent: Sent,
    retries: std::sync::atomic::AtomicU64,
    closed: AtomicBool,
    /// The queues' rows this owner knows ([`exec::QueueCache`]).
    queues: exec::QueueCache,
    /// Operations waiting for the stream, run in groups ([`group`]).
    pending: group::Pending,
    /// The number the owner's next message takes, while known ([`exec::NextNumber`]).
    next: exec::NextNumber,
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
            conn: tokio::sync::Mutex::new(transaction::Conn::new(conn)),
            clock: options.clock,
            location,
            lease,
            sent: Sent::default(),
            retries: std::sync::atomic::AtomicU64::new(0),
            closed: AtomicBool::new(false),
            queues: exec::QueueCache::default(),
            pending: group::Pending::default(),
            next: exec::NextNumber::default(),
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

    /// [`store_ops!`](sql::store_ops)'s send: one flow (the group merges the sends of
    /// one message that share a request itself, [`group`]).
    fn sql_enqueue(
        &self,
        queue: String,
        messages: Vec<mqlite_contract::OutMessage>,
        options: mqlite_contract::SendOptions,
    ) -> impl Future<Output = Result<Vec<mqlite_contract::EnqueueSlot>>> + Send + 'static {
        self.sql_tx_growing(messages.len(), async move |x, now| {
            sql::enqueue::enqueue(x, now, &queue, messages, options, true).await
        })
    }

    /// [`store_ops!`](sql::store_ops)'s receive: one flow (the group shares a request
    /// among the operations waiting beside it).
    fn sql_claim(
        &self,
        queue: String,
        spec: mqlite_contract::ClaimSpec,
    ) -> impl Future<Output = Result<Vec<mqlite_contract::Message>>> + Send + 'static {
        self.sql_tx_sized(spec.max_messages as usize, async move |x, now| {
            sql::claim::claim(x, now, &queue, &spec).await
        })
    }

    /// [`store_ops!`](sql::store_ops)'s settlement of one lock: one flow (the group
    /// shares a request among the operations waiting beside it).
    fn sql_settle(
        &self,
        queue: String,
        lock: mqlite_contract::LockRef,
        settlement: mqlite_contract::Settlement,
    ) -> impl Future<Output = Result<()>> + Send + 'static {
        self.sql_tx_sized(1, async move |x, now| {
            sql::settle::settle(x, now, &queue, lock, &settlement).await
        })
    }

    /// Runs a shared flow as one operation, off the executor: in a transaction of its
    /// own, or sharing one (and, for a flow of one statement, one request) with the
    /// operations waiting beside it ([`group`]), on the leader's blocking thread; the
    /// caller's task waits for its answer without holding a thread.
    fn sql_tx<R, F>(&self, f: F) -> impl Future<Output = Result<R>> + Send + 'static
    where
        R: Send + 'static,
        F: for<'a, 't> AsyncFnOnce(&'a mut Exec<'t>, i64) -> Result<R> + Send + 'static,
    {
        let inner = self.inner.clone();
        async move { group::run(&inner, f).await }
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
        let mut conn = self.inner.conn.lock().await;
        exec::rows(
            conn.unparked().await,
            &format!("EXPLAIN QUERY PLAN {sql}"),
            &params,
        )
        .await?
        .iter()
        .map(|r| r.text(3))
        .collect()
    }

    /// The owner epoch this store holds.
    pub fn epoch(&self) -> u64 {
        self.inner.lease.epoch()
    }

    /// Requests (round trips) sent to the server since open, each counted once whatever
    /// statements it carries (BEGIN, the epoch guard and COMMIT ride with the others).
    pub fn statements_sent(&self) -> u64 {
        self.inner.sent.get()
    }

    /// Requests that went at the number the owner knew, without reading the next number
    /// on the server (`exec::NextNumber`), since open: a send of one, or a group's
    /// request of merged sends (one, however many sends it holds).
    pub fn sends_at_known_number(&self) -> u64 {
        self.inner.next.used()
    }

    /// Operations whose one statement went out in their group's shared request (group
    /// commit over the network: a group of several operations), since open.
    pub fn shared_requests(&self) -> u64 {
        self.inner.pending.shared()
    }

    /// Sends of one message whose group sent them with others to the same queue as ONE
    /// multi-row INSERT, since open.
    pub fn merged_sends(&self) -> u64 {
        self.inner.pending.merged()
    }

    /// Operations waiting for the stream right now (the next group's).
    pub fn waiting(&self) -> usize {
        self.inner.pending.waiting()
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

impl Inner {
    fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::SeqCst) {
            Err(Error::Closed)
        } else {
            Ok(())
        }
    }
}

/// The libSQL store's registration: `libsql://`, `http(s)://` and `ws(s)://` URLs, the
/// scheme kept (the client reads it).
impl StoreKind for LibsqlStore {
    const NAME: &'static str = BACKEND;
    const SCHEMES: &'static [&'static str] = &["libsql", "http", "https", "ws", "wss"];
    const LOCAL_FILE: bool = false;

    fn target(scheme: &str, rest: &str) -> String {
        format!("{scheme}:{rest}")
    }

    async fn open_at(location: &str, clock: SharedClock) -> Result<Self> {
        LibsqlStore::open(LibsqlOptions::new(location).clock(clock)).await
    }
}

sql::store_ops!(LibsqlStore);

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

    fn status(&self) -> impl Future<Output = Result<StoreStatus>> + Send {
        let location = self.inner.location.clone();
        self.sql_tx(async move |x, _| sql::admin::status(x, BACKEND, location, true).await)
    }

    fn close(&self) -> impl Future<Output = ()> + Send {
        let inner = self.inner.clone();
        async move {
            if inner.closed.swap(true, Ordering::SeqCst) {
                return;
            }
            // The work already admitted finishes first: the group's leader lets the
            // stream go between groups, so taking the lock alone would come before
            // the operations still queued.
            inner.pending.admitted_done().await;
            let mut conn = inner.conn.lock().await;
            inner.pending.release();
            inner
                .lease
                .release(conn.unparked().await, &inner.sent)
                .await;
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
                mqlite_contract::StoreTx::check_cancelled(&ltx).map_err(E::from)?;
                Ok(out)
            })
            .await
        })
    }
}

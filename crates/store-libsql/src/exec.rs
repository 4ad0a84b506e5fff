//! The libsql side of `mqlite_sql::SqlExec`: each statement is one request to the
//! server inside the operation's transaction, its named parameters bound by name.

use std::sync::atomic::{AtomicU64, Ordering};

use mqlite_contract::{QueueConfig, QueueKind, Result};
use mqlite_sql::{Executed, KnownQueues, Params, Row, SqlExec, Value};

use crate::group::{Last, Slot, Went};
use crate::owner::{GUARD_REFUSED, Lease, READ_EPOCH};
use crate::{BACKEND, db};

/// The number the owner's next message takes, while nothing else can have taken one
/// (G1): learnt from the answer of a request whose last insert took the largest number
/// (a send of one, [`INSERT_BODY_OWNED`]'s `RETURNING id`, or a group's one merged
/// insert), and good only while this store sends no other request: the number is kept
/// with the count of requests sent ([`Sent`]) at the answer, and a send goes at it only
/// when the count has not moved since. Every request that may store a message goes out
/// under the lock of the owner's connection and is counted before it is sent (an
/// application's transaction, on a stream of its own, at its opening, and it holds the
/// lock until it ends; what goes uncounted stores nothing: a ROLLBACK, the COMMIT of a
/// parked stream that ran nothing, `explain`); so anything between the two (a receive,
/// a batch, a publish, a schedule's firing, an application's transaction, a lease
/// renewal) makes the next send read the number on the server as before. A send at the
/// number known ([`INSERT_BODY_AT_OWNED`], [`INSERT_ROWS_AT_BODIES`]) skips that read:
/// about 60 µs less a request on loopback (docs/benchmark.md). A takeover deposes the
/// owner before another can write (the insert's own check of the epoch then stores
/// nothing).
///
/// [`INSERT_BODY_OWNED`]: mqlite_sql::enqueue::INSERT_BODY_OWNED
/// [`INSERT_BODY_AT_OWNED`]: mqlite_sql::enqueue::INSERT_BODY_AT_OWNED
/// [`INSERT_ROWS_AT_BODIES`]: mqlite_sql::enqueue::INSERT_ROWS_AT_BODIES
#[derive(Debug, Default)]
pub(crate) struct NextNumber {
    /// The requests sent when the number was learnt, and the number.
    known: std::sync::Mutex<Option<(u64, i64)>>,
    /// Requests that went out at the number known (committed or not).
    pub(crate) used: AtomicU64,
}

impl NextNumber {
    /// Takes the number known, if no request went out since it was learnt (`sent`: the
    /// requests sent so far); it is forgotten either way, until an answer teaches it again.
    pub(crate) fn take(&self, sent: &Sent) -> Option<i64> {
        let known = self
            .known
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        known
            .filter(|(at, _)| *at == sent.get())
            .map(|(_, next)| next)
    }

    /// The answer to the last request sent (`sent`) stored `largest` as the largest
    /// number, and committed.
    pub(crate) fn learn(&self, sent: &Sent, largest: i64) {
        *self
            .known
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some((sent.get(), largest + 1));
    }

    /// Requests that went at the number known, since open.
    pub(crate) fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }
}

/// Statements sent since open (the store's work counter: the client reports no rows
/// read, so `visits` stays 0 and the TCK's visit pins are skipped on this store).
#[derive(Debug, Default)]
pub(crate) struct Sent(AtomicU64);

impl Sent {
    pub(crate) fn add(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Runs the shared flows' statements in one transaction on `conn`'s stream. While
/// `opening` holds the lease, the transaction is not open yet: the owner's epoch guard
/// ([`Lease::guard`], a write, so it also takes the write lock) goes out in one request
/// with the flow's first statement, after a BEGIN unless the stream is parked; a moved
/// epoch fails the guard, and nothing after it runs. A first statement that carries the
/// owner's check itself ([`owned_form`], and the check of the changes in
/// [`SqlExec::last_at_once`]) goes without the guard.
pub(crate) struct Exec<'t> {
    pub(crate) conn: &'t libsql::Connection,
    /// Whether the stream waits in a deferred transaction that has run nothing
    /// ([`crate::transaction::Conn`]): the opening then sends no BEGIN. After the flow:
    /// whether its last request left the stream parked again.
    pub(crate) parked: bool,
    /// Whether this flow may park the stream at its end (an operation's own
    /// transaction; not an application's, which ends it itself).
    pub(crate) parks: bool,
    pub(crate) sent: &'t Sent,
    pub(crate) opening: Option<&'t Lease>,
    /// Counts the retries of the opening request.
    pub(crate) retries: Option<&'t AtomicU64>,
    /// Set once COMMIT went out with the flow's last statement.
    pub(crate) committed: bool,
    /// The queues' rows this owner knows (None: ask every time, as inside an
    /// application's transaction).
    pub(crate) queues: Option<&'t QueueCache>,
    /// Rows this flow read, remembered once it commits.
    pub(crate) read: Vec<(String, (QueueKind, QueueConfig))>,
    /// Whether this flow wrote queue rows.
    pub(crate) changed: bool,
    /// Its place in a group of operations sharing a request ([`crate::group`]); None
    /// outside one (an application's transaction, the leader's own request).
    pub(crate) seat: Option<&'t Slot>,
    /// The owner's next number ([`NextNumber`]); None in an application's transaction,
    /// whose sends never go at a number known.
    pub(crate) next: Option<&'t NextNumber>,
}

/// What this owner knows of the queues' rows ([`KnownQueues`]): a takeover deposes
/// the owner, whose every call then fails, so no other writer changes them under it.
#[derive(Debug, Default)]
pub(crate) struct QueueCache(KnownQueues);

impl QueueCache {
    /// After a flow: forget everything if it wrote queue rows (whether or not it
    /// committed: an answerless COMMIT may have landed), else remember what it read if
    /// it committed.
    pub(crate) fn settle(&self, x: &mut Exec<'_>, committed: bool) {
        if x.changed {
            self.0.forget();
        } else if committed {
            self.0.remember(x.read.drain(..));
        }
    }
}

/// How many times a request that opens a transaction is retried while the server is
/// out of reach, and the first pause (doubled each time).
const OPEN_RETRIES: u32 = 3;
const FIRST_PAUSE: std::time::Duration = std::time::Duration::from_millis(50);

/// Sends a request that opens a transaction (`send`), retried with backoff while the
/// server is out of reach: no answer means the transaction never got anywhere and
/// nothing was committed, so a retry cannot repeat an effect (10.3). Each retry starts
/// on a fresh stream and is counted in `retries`. Failures after the opening are not
/// retried: they are reported (transient before COMMIT, `OutcomeUnknown` at COMMIT).
pub(crate) async fn opening<T, Fut>(
    conn: &libsql::Connection,
    sent: &Sent,
    retries: Option<&AtomicU64>,
    mut send: impl FnMut() -> Fut,
) -> Result<T>
where
    Fut: Future<Output = std::result::Result<T, libsql::Error>>,
{
    let mut pause = FIRST_PAUSE;
    let mut attempt = 0;
    loop {
        sent.add();
        let (e, unknown_stream) = match send().await {
            Ok(out) => return Ok(out),
            Err(raw) => {
                let unknown_stream = stream_unknown(&raw);
                (db(raw), unknown_stream)
            }
        };
        match e {
            e if (e.is_transient() || unknown_stream) && attempt < OPEN_RETRIES => {
                attempt += 1;
                if let Some(r) = retries {
                    r.fetch_add(1, Ordering::Relaxed);
                }
                tracing::debug!(attempt, error = %e, "the server is out of reach; retrying");
                conn.reset().await;
                tokio::time::sleep(pause).await;
                pause *= 2;
            }
            e => return Err(e),
        }
    }
}

/// Whether the server answered that it does not know the stream a request went out on
/// (restarted, or the stream expired): it ran nothing of it, and the request may be sent
/// again on a new stream. sqld says "Received an invalid baton", "The stream has
/// expired due to inactivity" (`STREAM_EXPIRED`), or that the baton was used or closed.
fn stream_unknown(e: &libsql::Error) -> bool {
    let text = e.to_string().to_ascii_lowercase();
    ["baton", "expired due to inactivity", "stream_expired"]
        .iter()
        .any(|w| text.contains(w))
}

/// The step that reads what a write changed, when it is one.
fn counts(write: bool) -> &'static str {
    if write {
        "; SELECT changes(), last_insert_rowid()"
    } else {
        ""
    }
}

/// `Deposed` when the owner's epoch guard refused the request ([`Lease::guard`]), or a
/// statement carrying the owner's check did ([`mqlite_sql::OWNER_REFUSED`]): the epoch
/// is read again to be sure, inside the still open transaction; else `e`.
async fn refused(
    e: mqlite_contract::Error,
    lease: &Lease,
    conn: &libsql::Connection,
    sent: &Sent,
) -> mqlite_contract::Error {
    if !says(&e, GUARD_REFUSED) && !says(&e, mqlite_sql::OWNER_REFUSED) {
        return e;
    }
    sent.add();
    match rows(conn, READ_EPOCH, NO_PARAMS).await {
        Ok(found) => lease.verify(&found).err().unwrap_or(e),
        Err(_) => e,
    }
}

/// `sql`, a statement's form that carries the owner's check itself ([`owned_form`],
/// [`mqlite_sql::REFUSE_UNLESS_CHANGED_OWNED`]: it changes nothing, and the request
/// commits nothing, unless the epoch in force is `lease`'s), with `params` and the
/// owner's epoch inlined. An opening request that sends it needs no guard
/// of its own: the guard costs about 85 µs a request on loopback, the folded check 30–40
/// µs of it (docs/benchmark.md, "The owner's check folded into the claim, the send and
/// the completion").
fn owned(sql: &str, params: Params<'_>, lease: &Lease) -> Result<String> {
    let epoch = [(":epoch", Value::Text(lease.epoch().to_string()))];
    inline(sql, &[params, &epoch[..]].concat())
}

/// The form of a flow's last statement that carries the owner's check itself, for the
/// statements that have one, and whether a deposed owner's answer is no row rather than
/// a failure:
/// - the claim of one fails for a deposed owner ([`mqlite_sql::OWNER_REFUSED`], which
///   [`refused`] confirms), and answers no row only for an empty queue;
/// - the send of one stores nothing and answers no row, which it never answers
///   otherwise ([`Exec::confirm_owner`] then asks). A message of only a body goes in the
///   shorter form that names only the columns it fills
///   ([`mqlite_sql::enqueue::INSERT_BODY_OWNED`]): sqld and the client parse a
///   statement's text at a cost that grows with its terms, and it saves the request
///   about 50 µs on loopback (docs/benchmark.md).
fn owned_form(sql: &str, params: Params<'_>) -> Option<(&'static str, bool)> {
    use mqlite_sql::enqueue::{INSERT_BODY_OWNED, INSERT_ONE, INSERT_ONE_OWNED, is_body_only};
    if sql == mqlite_sql::claim::CLAIM_ONE {
        Some((mqlite_sql::claim::CLAIM_ONE_OWNED_ALL, false))
    } else if sql == INSERT_ONE && is_body_only(params) {
        Some((INSERT_BODY_OWNED, true))
    } else if sql == INSERT_ONE {
        Some((INSERT_ONE_OWNED, true))
    } else {
        None
    }
}

/// Whether the server's answer to a failed request says `what`.
fn says(e: &mqlite_contract::Error, what: &str) -> bool {
    match e {
        mqlite_contract::Error::Backend { source, .. } => {
            source.to_string().contains(what)
                || source
                    .source()
                    .is_some_and(|s| s.to_string().contains(what))
        }
        _ => false,
    }
}

/// Whether a request failed before it reached the server: the connection could not be
/// made (hyper says "error trying to connect"), so nothing of it ran.
fn never_sent(e: &libsql::Error) -> bool {
    match e {
        libsql::Error::ConnectionFailed(_) => true,
        libsql::Error::Hrana(inner) => inner.to_string().contains("error trying to connect"),
        _ => false,
    }
}

impl<'t> Exec<'t> {
    /// An operation's flow on the owner's stream, in a transaction of its own that its
    /// first request opens (with the epoch guard) and its last commits, parking the
    /// stream again; the stream not parked, no group, the owner's queue rows known.
    pub(crate) fn operation(inner: &'t crate::Inner, conn: &'t libsql::Connection) -> Self {
        Exec {
            conn,
            parked: false,
            parks: true,
            sent: &inner.sent,
            opening: Some(&inner.lease),
            retries: Some(&inner.retries),
            committed: false,
            queues: Some(&inner.queues),
            read: Vec::new(),
            changed: false,
            seat: None,
            next: Some(&inner.next),
        }
    }

    /// In a gathering group ([`crate::group`]), the flow's last statement waits to go
    /// out with its neighbours': its answer once the shared request is answered
    /// (committed), or the group's failure. None when the flow sends it itself (outside
    /// a group, or sent back to run alone).
    async fn in_group(&mut self, last: Last<'_>) -> Option<Result<(Vec<Row>, Executed)>> {
        let slot = self.seat?;
        match slot.wait(Some(last)).await {
            Went::Alone { parked } => {
                self.parked = parked;
                self.seat = None;
                None
            }
            Went::Shared(answer) => {
                // Sent and committed (or failed) with the group: nothing may follow.
                self.opening = None;
                self.committed = true;
                self.seat = None;
                Some(answer)
            }
        }
    }

    /// In a gathering group, a flow whose next statement is not its last waits for its
    /// turn to run alone on the stream.
    async fn alone(&mut self) {
        let Some(slot) = self.seat.take() else {
            return;
        };
        if let Went::Alone { parked } = slot.wait(None).await {
            self.parked = parked;
        }
    }

    /// Whether the transaction was opened (a flow may finish without a statement).
    pub(crate) fn opened(&self) -> bool {
        self.opening.is_none()
    }

    /// Sends `sql` (parameters inlined), opening the transaction first when it is not
    /// open yet; its rows, and what it changed.
    async fn send(&mut self, sql: &str, params: Params<'_>) -> Result<(Vec<Row>, Executed)> {
        self.not_committed()?;
        self.alone().await;
        let Some(lease) = self.opening else {
            self.sent.add();
            let rows = rows(self.conn, sql, params).await?;
            return Ok((rows, self.executed()));
        };
        let guard = lease.guard();
        let statement = inline(sql, params)?;
        // A retry starts on a fresh stream, so with BEGIN.
        let (conn, mut parked) = (self.conn, self.parked);
        let mut begun = false;
        let answer = opening(conn, self.sent, self.retries, || {
            begun = !parked;
            parked = false;
            let text = format!("{}{guard}; {statement}", if begun { "BEGIN; " } else { "" });
            async move { conn.execute_batch(&text).await }
        })
        .await;
        self.opening = None;
        self.parked = false;
        let mut batch = match answer {
            Ok(batch) => batch,
            Err(e) => return Err(refused(e, lease, conn, self.sent).await),
        };
        if begun {
            let _begin = batch.next_stmt_row();
        }
        let _guard = batch.next_stmt_row();
        let rows = match batch.next_stmt_row() {
            Some(Some(r)) => collect(r).await?,
            _ => Vec::new(),
        };
        Ok((rows, self.executed()))
    }

    /// A statement after the flow's last one would run outside its transaction.
    fn not_committed(&self) -> Result<()> {
        if self.committed {
            Err(mqlite_contract::Error::invalid(
                "a statement after the flow's last one: the transaction is committed",
            ))
        } else {
            Ok(())
        }
    }

    /// Sends the flow's last statement with COMMIT in one request (COMMIT runs only if
    /// the statement succeeded). Its rows, and for a write what it changed (read by a
    /// step between the two). A flow of one statement is one request
    /// ([`Self::send_ending`]).
    async fn send_last(
        &mut self,
        sql: &'static str,
        params: Params<'_>,
        write: bool,
    ) -> Result<(Vec<Row>, Executed)> {
        let body = format!("{}{}", inline(sql, params)?, counts(write));
        let last = Last {
            body: &body,
            sql,
            params,
            write,
        };
        if let Some(shared) = self.in_group(last).await {
            return shared;
        }
        // An opening claim or send of one carries the owner's check itself (its form
        // that changes nothing for a deposed owner). A send of one whose number the
        // owner knows goes at it.
        let owned = match (self.opening, owned_form(sql, params)) {
            (Some(lease), Some((form, answers_nothing))) => {
                let (form, text) = match self.next_number(form) {
                    Some((next, number)) => {
                        // `?6`, the number, NULL in a send that takes the next one.
                        let mut at = params.to_vec();
                        at[mqlite_sql::enqueue::SHARED_PARAMS - 2] = ("?6", Value::Int(number));
                        let form = mqlite_sql::enqueue::INSERT_BODY_AT_OWNED;
                        let text = owned(form, &at, lease)?;
                        next.used.fetch_add(1, Ordering::Relaxed);
                        (form, text)
                    }
                    None => (form, owned(form, params, lease)?),
                };
                Some((
                    format!("{text}{}", counts(write)),
                    lease,
                    answers_nothing,
                    form,
                ))
            }
            _ => None,
        };
        let mut batch = match &owned {
            Some((text, ..)) => self.send_ending(text, true).await?,
            None => self.send_ending(&body, false).await?,
        };
        // The claim's form returns every column: put them in the order the flow reads.
        let order = owned
            .as_ref()
            .filter(|(.., form)| *form == mqlite_sql::claim::CLAIM_ONE_OWNED_ALL)
            .map(|_| mqlite_sql::MESSAGE_COLUMNS.as_slice());
        let answer = step_answer_in(&mut batch, write, order).await?;
        if let Some((_, lease, true, _)) = owned
            && answer.0.is_empty()
        {
            self.confirm_owner(lease).await?;
        }
        // A send of one that committed: the next send may go at the number after.
        if let (Some((_, _, _, form)), Some(next), [row]) = (&owned, self.next, &answer.0[..])
            && [
                mqlite_sql::enqueue::INSERT_BODY_OWNED,
                mqlite_sql::enqueue::INSERT_BODY_AT_OWNED,
            ]
            .contains(form)
        {
            next.learn(self.sent, row.int(0)?);
        }
        Ok(answer)
    }

    /// The number a send of one in `form` goes at, when the owner knows it
    /// ([`NextNumber`]: no request went out since it was learnt), with the owner's
    /// [`NextNumber`]; only the body-only send's form has a form at a number.
    fn next_number(&self, form: &str) -> Option<(&'t NextNumber, i64)> {
        let next = self.next?;
        let known = next.take(self.sent);
        known
            .filter(|_| form == mqlite_sql::enqueue::INSERT_BODY_OWNED)
            .map(|number| (next, number))
    }

    /// After an opening insert that carried the owner's check and stored nothing: one
    /// request reads the epoch in force (in the parked transaction, which it commits and
    /// parks again: only an operation's own flow, which parks, sends the folded forms),
    /// `Deposed` once another owner took over.
    async fn confirm_owner(&mut self, lease: &Lease) -> Result<()> {
        self.sent.add();
        let text = format!("{READ_EPOCH}{}", self.commit_text());
        match rows(self.conn, &text, NO_PARAMS).await {
            Ok(found) => lease.verify(&found),
            Err(e) => {
                self.parked = false;
                self.conn.reset().await;
                Err(e)
            }
        }
    }

    /// Sends `body` (statements) as the request that ends the transaction, with COMMIT
    /// (and BEGIN again to park the stream); the answer's steps from `body`'s first on.
    /// When the flow has sent nothing yet, the whole operation is this ONE request: BEGIN
    /// unless the stream is parked, the owner's epoch guard ([`Lease::guard`]; it fails
    /// inside the request once another owner took over, so nothing after it runs), then
    /// `body`. Each step runs only if the one before it succeeded; a failed step leaves
    /// the transaction open for the flow's failure to roll back. The request carries
    /// COMMIT, so a failure without an answer is `OutcomeUnknown` (10.3); only an opening
    /// request that never reached the server (the connection could not be made) is sent
    /// again, and a request that never reached it fails with the transient error.
    ///
    /// With `owned`, `body` carries the owner's check itself (it changes nothing and
    /// commits nothing once another owner took over: [`owned`]), and the opening sends no
    /// guard.
    pub(crate) async fn send_ending(
        &mut self,
        body: &str,
        owned: bool,
    ) -> Result<libsql::BatchRows> {
        self.not_committed()?;
        let lease = self.opening.take();
        let opens = lease.is_some();
        let body = format!("{body}{}", self.commit_text());
        let guard = lease.filter(|_| !owned).map(|l| format!("{}; ", l.guard()));
        // No statement may follow, whatever the answer.
        self.committed = true;
        let mut pause = FIRST_PAUSE;
        let mut attempt = 0;
        let (answer, begun) = loop {
            let begun = opens && !self.parked;
            self.parked = false;
            let text = format!(
                "{}{}{body}",
                if begun { "BEGIN; " } else { "" },
                guard.as_deref().unwrap_or("")
            );
            self.sent.add();
            match self.conn.execute_batch(&text).await {
                // Sent again only if nothing of it ran: its connection could not be
                // made, or it went out on a parked stream the server no longer knows.
                Err(e)
                    if opens
                        && (never_sent(&e) || (!begun && stream_unknown(&e)))
                        && attempt < OPEN_RETRIES =>
                {
                    attempt += 1;
                    if let Some(r) = self.retries {
                        r.fetch_add(1, Ordering::Relaxed);
                    }
                    tracing::debug!(attempt, error = %e, "the server is out of reach; retrying");
                    self.conn.reset().await;
                    tokio::time::sleep(pause).await;
                    pause *= 2;
                }
                answer => break (answer, begun),
            }
        };
        // Every attempt was sent again only if nothing of it ran; when the last one
        // could not even connect, nothing of the request ran at all.
        let unsent = matches!(&answer, Err(e) if never_sent(e));
        let mut batch = match answer.map_err(db) {
            Ok(batch) => batch,
            Err(e) if unsent => {
                self.conn.reset().await;
                return Err(e);
            }
            // No answer, or an HTTP status in place of the batch's answer (a proxy's
            // 502, say): the COMMIT may have landed (10.3).
            Err(e) if e.is_transient() || says(&e, "status=") => {
                self.conn.reset().await;
                return Err(crate::unknown(e));
            }
            Err(e) => {
                return Err(match lease {
                    Some(lease) => refused(e, lease, self.conn, self.sent).await,
                    None => e,
                });
            }
        };
        self.parked = self.parks;
        if begun {
            let _begin = batch.next_stmt_row();
        }
        if guard.is_some() {
            let _guard = batch.next_stmt_row();
        }
        Ok(batch)
    }

    /// How the flow's last request ends: COMMIT, and BEGIN again when the stream is
    /// to be parked for the next operation.
    fn commit_text(&self) -> &'static str {
        if self.parks {
            "; COMMIT; BEGIN"
        } else {
            "; COMMIT"
        }
    }

    /// What the last statement changed (the stream keeps the last step's counts).
    fn executed(&self) -> Executed {
        Executed {
            changes: self.conn.changes(),
            last_insert_rowid: self.conn.last_insert_rowid(),
        }
    }
}

fn to_libsql(v: &Value) -> libsql::Value {
    match v {
        Value::Null => libsql::Value::Null,
        Value::Int(i) => libsql::Value::Integer(*i),
        Value::Real(f) => libsql::Value::Real(*f),
        Value::Text(t) => libsql::Value::Text(t.clone()),
        Value::Blob(b) => libsql::Value::Blob(b.clone()),
    }
}

fn from_libsql(v: libsql::Value) -> Value {
    match v {
        libsql::Value::Null => Value::Null,
        libsql::Value::Integer(i) => Value::Int(i),
        libsql::Value::Real(f) => Value::Real(f),
        libsql::Value::Text(t) => Value::Text(t),
        libsql::Value::Blob(b) => Value::Blob(b),
    }
}

/// Parameters as libsql takes them: by name, or by position when they are `?1` … `?N`
/// in order (a multi-row INSERT), which saves the server a lookup per name.
pub(crate) fn named(params: Params<'_>) -> libsql::params::Params {
    let positional = !params.is_empty()
        && params
            .iter()
            .enumerate()
            .all(|(i, (k, _))| position(k) == Some(i + 1));
    if positional {
        libsql::params::Params::Positional(params.iter().map(|(_, v)| to_libsql(v)).collect())
    } else {
        libsql::params::Params::Named(
            params
                .iter()
                .map(|(k, v)| ((*k).to_owned(), to_libsql(v)))
                .collect(),
        )
    }
}

/// The number of a positional parameter's name (`?N`).
fn position(name: &str) -> Option<usize> {
    name.strip_prefix('?')?.parse().ok()
}

/// Reads every row of a result.
pub(crate) async fn collect(rows: libsql::Rows) -> Result<Vec<Row>> {
    let every = (0..rows.column_count()).collect();
    read_columns(rows, every).await
}

/// The rows of `rows`, each holding the columns named `names`, in that order: an answer
/// without one of them is corrupt.
async fn collect_in(rows: libsql::Rows, names: &[&str]) -> Result<Vec<Row>> {
    let at = names
        .iter()
        .map(|name| {
            (0..rows.column_count())
                .find(|&i| rows.column_name(i) == Some(*name))
                .ok_or_else(|| {
                    mqlite_contract::Error::backend(
                        BACKEND,
                        mqlite_sql::exec::CorruptRow(format!("the answer has no column {name}")),
                    )
                })
        })
        .collect::<Result<Vec<i32>>>()?;
    read_columns(rows, at).await
}

/// Every row of `rows`, each made of the columns at `at`, in that order.
async fn read_columns(mut rows: libsql::Rows, at: Vec<i32>) -> Result<Vec<Row>> {
    let mut out = Vec::new();
    while let Some(r) = rows.next().await.map_err(db)? {
        let mut cols = Vec::with_capacity(at.len());
        for &i in &at {
            cols.push(from_libsql(r.get_value(i).map_err(db)?));
        }
        out.push(Row(cols));
    }
    Ok(out)
}

/// The answer of a statement sent with [`counts`]: its rows, then for a write what it
/// changed (the counts step's row); the next steps of `batch`.
pub(crate) async fn step_answer(
    batch: &mut libsql::BatchRows,
    write: bool,
) -> Result<(Vec<Row>, Executed)> {
    step_answer_in(batch, write, None).await
}

/// [`step_answer`], the rows' columns put in `order` by name when given.
async fn step_answer_in(
    batch: &mut libsql::BatchRows,
    write: bool,
    order: Option<&[&str]>,
) -> Result<(Vec<Row>, Executed)> {
    let rows = match (batch.next_stmt_row(), order) {
        (Some(Some(r)), None) => collect(r).await?,
        (Some(Some(r)), Some(names)) => collect_in(r, names).await?,
        _ => Vec::new(),
    };
    let mut done = Executed::default();
    if write
        && let Some(Some(r)) = batch.next_stmt_row()
        && let Some(row) = collect(r).await?.first()
    {
        done = Executed {
            changes: u64::try_from(row.int(0)?).unwrap_or(0),
            last_insert_rowid: row.int(1)?,
        };
    }
    Ok((rows, done))
}

/// No parameters.
pub(crate) const NO_PARAMS: Params<'static> = &[];

/// Runs a query and reads its rows from the batch's answer, not through a cursor: a
/// cursor's response left unread to its very end makes sqld interrupt the stream's
/// next statement (SQLITE_INTERRUPT). A batch takes no parameters, so they are inlined
/// as literals ([`inline`]).
pub(crate) async fn rows<N: AsRef<str> + Sync>(
    conn: &libsql::Connection,
    sql: &str,
    params: &[(N, Value)],
) -> Result<Vec<Row>> {
    let text = inline(sql, params)?;
    let mut batch = conn.execute_batch(&text).await.map_err(db)?;
    match batch.next_stmt_row() {
        Some(Some(rows)) => collect(rows).await,
        _ => Ok(Vec::new()),
    }
}

impl SqlExec for Exec<'_> {
    fn known_queue(&self, name: &str) -> Option<(QueueKind, QueueConfig)> {
        self.queues?.0.get(name)
    }

    fn read_queue(&mut self, name: &str, row: &(QueueKind, QueueConfig)) {
        if self.queues.is_some() {
            self.read.push((name.to_owned(), row.clone()));
        }
    }

    fn queues_changed(&mut self) {
        self.changed = true;
    }

    async fn query(&mut self, sql: &'static str, params: Params<'_>) -> Result<Vec<Row>> {
        self.send(sql, params).await.map(|(rows, _)| rows)
    }

    async fn execute(&mut self, sql: &'static str, params: Params<'_>) -> Result<Executed> {
        if self.opening.is_some() {
            return self.send(sql, params).await.map(|(_, done)| done);
        }
        self.not_committed()?;
        self.sent.add();
        let changes = self.conn.execute(sql, named(params)).await.map_err(db)?;
        Ok(Executed {
            changes,
            last_insert_rowid: self.conn.last_insert_rowid(),
        })
    }

    async fn query_last(&mut self, sql: &'static str, params: Params<'_>) -> Result<Vec<Row>> {
        self.send_last(sql, params, false)
            .await
            .map(|(rows, _)| rows)
    }

    /// The steps, after the opening when the flow sent nothing yet, and with COMMIT: one
    /// request. A refusing step leaves the transaction open, and one more request takes
    /// the steps back before the flow goes its usual way: a ROLLBACK when the steps
    /// opened the transaction (it holds nothing else; the flow then opens it again), or
    /// else the rollback of the savepoint the steps ran in. Inside an application's
    /// transaction, which commits itself, nothing is sent.
    async fn last_at_once(
        &mut self,
        steps: &[(&'static str, Params<'_>)],
    ) -> Result<Option<Vec<Vec<Row>>>> {
        if !self.parks {
            return Ok(None);
        }
        self.alone().await;
        // A remote server parses every statement afresh: the opening needs no savepoint.
        let opening = self.opening;
        let savepoint = opening.is_none();
        let mut body = String::from(if savepoint { "SAVEPOINT at_once; " } else { "" });
        // An opening request's check of the changes carries the owner's check too, in
        // place of the guard: a refusal for either reason takes the steps back, and the
        // usual way's opening tells a deposed owner.
        let mut owns = false;
        for (i, (sql, params)) in steps.iter().enumerate() {
            if i > 0 {
                body.push_str("; ");
            }
            match opening {
                Some(lease) if !owns && *sql == mqlite_sql::REFUSE_UNLESS_CHANGED => {
                    owns = true;
                    body.push_str(&owned(
                        mqlite_sql::REFUSE_UNLESS_CHANGED_OWNED,
                        params,
                        lease,
                    )?);
                }
                _ => body.push_str(&inline(sql, params)?),
            }
        }
        if savepoint {
            body.push_str("; RELEASE at_once");
        }
        match self.send_ending(&body, owns).await {
            Ok(mut batch) => {
                if savepoint {
                    let _savepoint = batch.next_stmt_row();
                }
                let mut out = Vec::with_capacity(steps.len());
                for _ in steps {
                    out.push(match batch.next_stmt_row() {
                        Some(Some(r)) => collect(r).await?,
                        _ => Vec::new(),
                    });
                }
                Ok(Some(out))
            }
            Err(e) if says(&e, mqlite_sql::STEP_REFUSED) => {
                self.sent.add();
                let undo = if savepoint {
                    "ROLLBACK TO at_once; RELEASE at_once"
                } else {
                    "ROLLBACK"
                };
                self.conn.execute_batch(undo).await.map_err(db)?;
                self.committed = false;
                if !savepoint {
                    // Nothing of the flow stays: its next statement opens anew.
                    self.opening = opening;
                    self.parked = false;
                }
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    async fn execute_last(&mut self, sql: &'static str, params: Params<'_>) -> Result<Executed> {
        self.send_last(sql, params, true)
            .await
            .map(|(_, done)| done)
    }
}

/// `sql` with each `:name` parameter replaced by its value as a SQL literal. Safe by
/// construction: an integer is its decimal digits (parenthesized when negative), a
/// blob is `X'hex'`, a text is single-quoted with every `'` doubled (SQLite has no other
/// escape, so the literal ends only where it should), or, holding a NUL, its UTF-8
/// bytes as `CAST(X'hex' AS TEXT)`; a non-finite real is NULL (mqlite writes none).
/// Quoted strings and identifiers of `sql` itself are copied as they are.
pub(crate) fn inline<N: AsRef<str>>(sql: &str, params: &[(N, Value)]) -> Result<String> {
    let mut out = String::with_capacity(sql.len() + 64);
    let mut chars = sql.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '\'' | '"' => {
                out.push(c);
                for (_, d) in chars.by_ref() {
                    out.push(d);
                    if d == c {
                        break;
                    }
                }
            }
            ':' | '?'
                if chars.peek().is_some_and(|(_, d)| {
                    if c == ':' {
                        d.is_ascii_alphabetic()
                    } else {
                        d.is_ascii_digit()
                    }
                }) =>
            {
                let mut end = i + 1;
                while let Some((j, d)) = chars.peek().copied() {
                    if d.is_ascii_alphanumeric() || d == '_' {
                        end = j + d.len_utf8();
                        chars.next();
                    } else {
                        break;
                    }
                }
                let name = &sql[i..end];
                // `?N` is usually the N-th value: look there first.
                let at = position(name)
                    .and_then(|n| params.get(n.wrapping_sub(1)))
                    .filter(|(k, _)| k.as_ref() == name);
                let value = at
                    .or_else(|| params.iter().find(|(k, _)| k.as_ref() == name))
                    .map(|(_, v)| v)
                    .ok_or_else(|| {
                        mqlite_contract::Error::invalid(format!("no value for {name} in: {sql}"))
                    })?;
                literal(&mut out, value);
            }
            _ => out.push(c),
        }
    }
    Ok(out)
}

fn hex(out: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    out.reserve(bytes.len() * 2 + 3);
    out.push_str("X'");
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    out.push('\'');
}

fn literal(out: &mut String, v: &Value) {
    use std::fmt::Write as _;
    match v {
        Value::Null => out.push_str("NULL"),
        // -9223372036854775808 would parse as a real: subtract instead.
        Value::Int(i64::MIN) => out.push_str("(-9223372036854775807 - 1)"),
        Value::Int(i) if *i < 0 => {
            let _ = write!(out, "({i})");
        }
        Value::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Value::Real(f) if f.is_finite() => {
            let _ = write!(out, "{f:e}");
        }
        Value::Real(_) => out.push_str("NULL"),
        Value::Text(t) if t.contains('\0') => {
            out.push_str("CAST(");
            hex(out, t.as_bytes());
            out.push_str(" AS TEXT)");
        }
        Value::Text(t) => {
            out.reserve(t.len() + 2);
            out.push('\'');
            for c in t.chars() {
                if c == '\'' {
                    out.push('\'');
                }
                out.push(c);
            }
            out.push('\'');
        }
        Value::Blob(b) => hex(out, b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_known_is_good_only_until_the_next_request() {
        let (next, sent) = (NextNumber::default(), Sent::default());
        assert_eq!(next.take(&sent), None, "nothing learnt yet");
        sent.add();
        next.learn(&sent, 41);
        assert_eq!(next.take(&sent), Some(42));
        assert_eq!(next.take(&sent), None, "taken once, until learnt again");
        next.learn(&sent, 50);
        sent.add();
        assert_eq!(next.take(&sent), None, "a request went out since");
        assert_eq!(next.take(&sent), None);
    }

    #[test]
    fn literals_are_quoted_and_parameters_replaced() {
        let sql = "SELECT :a, :b, ':c', \":d\", :e, :f, :g, :h FROM t WHERE x = :a";
        let got = inline(
            sql,
            &[
                (":a", Value::Int(-5)),
                (":b", Value::Text("it's".into())),
                (":e", Value::Blob(vec![0, 255])),
                (":f", Value::Null),
                (":g", Value::Text("a\0b".into())),
                (":h", Value::Int(i64::MIN)),
            ],
        )
        .expect("inlined");
        assert_eq!(
            got,
            "SELECT (-5), 'it''s', ':c', \":d\", X'00ff', NULL, CAST(X'610062' AS TEXT), \
             (-9223372036854775807 - 1) FROM t WHERE x = (-5)"
        );
        assert!(inline("SELECT :missing", NO_PARAMS).is_err());
    }

    #[test]
    fn numbered_parameters_are_inlined_and_sent_by_position() {
        let params = [
            ("?1", Value::Int(7)),
            ("?2", Value::Text("x".into())),
            ("?3", Value::Null),
        ];
        let got = inline("SELECT ?1, ?3, '?2', ?2 FROM t", &params).expect("inlined");
        assert_eq!(got, "SELECT 7, NULL, '?2', 'x' FROM t");
        assert!(inline("SELECT ?4", &params).is_err());
        assert!(matches!(
            named(&params),
            libsql::params::Params::Positional(v) if v.len() == 3
        ));
        // Out of order or mixed with names: by name.
        let mixed = [(":a", Value::Int(1)), ("?1", Value::Int(2))];
        assert!(matches!(named(&mixed), libsql::params::Params::Named(_)));
    }
}

//! The one seam between the shared flows and a SQL driver: [`SqlExec`] runs a statement
//! with named parameters. The flows are async so that a remote driver (libsql) awaits its
//! round trips; a local driver (rusqlite) answers at once, and its writer thread drives
//! the flow with `mqlite_kit::blocking::block_on`.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Mutex, MutexGuard};

use mqlite_contract::{Error, QueueConfig, QueueKind, Result};

/// A SQL value as bound and as read.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Value {
    /// An absent optional column (a message without a group, a lease not held).
    #[default]
    Null,
    /// Sequence numbers, times in epoch ms, counts and flags.
    Int(i64),
    /// Read only: no column of mqlite's holds one, but a value read back may be one.
    Real(f64),
    /// Names, ids, tokens, states and JSON parameters.
    Text(String),
    /// Bodies and encoded answers (a receive attempt's messages, say).
    Blob(Vec<u8>),
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Int(i64::from(v))
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Text(v.to_owned())
    }
}

impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Text(v)
    }
}

impl From<Vec<u8>> for Value {
    fn from(v: Vec<u8>) -> Self {
        Value::Blob(v)
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}

/// Named parameters: `(":name", value)`.
pub type Params<'a> = &'a [(&'static str, Value)];

/// An INSERT whose rows take consecutive ids, written twice ([`SqlExec::insert_numbered`]).
#[derive(Debug, Clone, Copy)]
pub struct Numbered {
    /// The INSERT with `RETURNING id`.
    pub returning: &'static str,
    /// The same INSERT without it.
    pub plain: &'static str,
}

/// What a write statement did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Executed {
    /// Rows changed.
    pub changes: u64,
    /// The rowid of the last row inserted by this connection.
    pub last_insert_rowid: i64,
}

/// A row as read, column by column.
#[derive(Debug, Clone, PartialEq)]
pub struct Row(pub Vec<Value>);

/// A value that is not what the schema promises: the data is damaged or foreign.
#[derive(Debug)]
pub struct CorruptRow(pub String);

impl std::fmt::Display for CorruptRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unexpected value in a row: {}", self.0)
    }
}

impl std::error::Error for CorruptRow {}

fn corrupt(what: String) -> Error {
    Error::backend("sql", CorruptRow(what))
}

/// A statement for `n` rows (an INSERT of them, an UPDATE or DELETE of rows read or
/// counted in the same transaction) that changed (or answered for) another number.
pub fn wrong_row_count(changed: u64, n: usize) -> Error {
    corrupt(format!("a statement for {n} rows changed {changed}"))
}

impl Row {
    fn get(&self, i: usize) -> Result<&Value> {
        self.0.get(i).ok_or_else(|| missing_column(i))
    }

    /// An INTEGER column.
    pub fn int(&self, i: usize) -> Result<i64> {
        match self.get(i)? {
            Value::Int(v) => Ok(*v),
            other => Err(wrong_column(i, "an integer", other)),
        }
    }

    /// An INTEGER column that may be NULL.
    pub fn opt_int(&self, i: usize) -> Result<Option<i64>> {
        match self.get(i)? {
            Value::Null => Ok(None),
            _ => self.int(i).map(Some),
        }
    }

    /// A 0/1 INTEGER column.
    pub fn flag(&self, i: usize) -> Result<bool> {
        self.int(i).map(|v| v != 0)
    }

    /// A TEXT column.
    pub fn text(&self, i: usize) -> Result<String> {
        match self.get(i)? {
            Value::Text(v) => Ok(v.clone()),
            other => Err(wrong_column(i, "text", &other)),
        }
    }

    /// A TEXT column that may be NULL.
    pub fn opt_text(&self, i: usize) -> Result<Option<String>> {
        match self.get(i)? {
            Value::Null => Ok(None),
            _ => self.text(i).map(Some),
        }
    }

    /// A column's value, taken out of the row (NULL is left in its place): a decoder
    /// that owns the rows moves their texts and bodies into what it builds, no copy.
    fn take(&mut self, i: usize) -> Result<Value> {
        self.0
            .get_mut(i)
            .map(std::mem::take)
            .ok_or_else(|| missing_column(i))
    }

    /// A TEXT column that may be NULL, taken out of the row ([`Row::take`]).
    pub fn take_opt_text(&mut self, i: usize) -> Result<Option<String>> {
        match self.take(i)? {
            Value::Null => Ok(None),
            Value::Text(v) => Ok(Some(v)),
            other => Err(wrong_column(i, "text", &other)),
        }
    }

    /// A BLOB column, taken out of the row ([`Row::take`]).
    pub fn take_blob(&mut self, i: usize) -> Result<Vec<u8>> {
        match self.take(i)? {
            Value::Blob(v) => Ok(v),
            other => Err(wrong_column(i, "a blob", &other)),
        }
    }

    /// A BLOB column.
    pub fn blob(&self, i: usize) -> Result<Vec<u8>> {
        match self.get(i)? {
            Value::Blob(v) => Ok(v.clone()),
            other => Err(wrong_column(i, "a blob", &other)),
        }
    }
}

/// The columns of one row as a decoder reads them (`crate::rows::message`): a [`Row`]
/// as read (its texts and bodies taken out of it), or a driver's own row, read in place
/// where the driver can (no [`Value`] made for each column first).
pub trait Columns {
    /// An INTEGER column.
    fn int(&mut self, i: usize) -> Result<i64>;
    /// A TEXT column that may be NULL, the decoder's to keep.
    fn opt_text(&mut self, i: usize) -> Result<Option<String>>;
    /// A BLOB column, the decoder's to keep.
    fn blob(&mut self, i: usize) -> Result<Vec<u8>>;
}

impl Columns for Row {
    fn int(&mut self, i: usize) -> Result<i64> {
        Row::int(self, i)
    }

    fn opt_text(&mut self, i: usize) -> Result<Option<String>> {
        self.take_opt_text(i)
    }

    fn blob(&mut self, i: usize) -> Result<Vec<u8>> {
        self.take_blob(i)
    }
}

/// A column that is not of the type the schema gives it ([`Row`]'s readers, and a
/// driver's [`Columns`], say so with this).
pub fn wrong_column(i: usize, expected: &str, got: &dyn std::fmt::Debug) -> Error {
    corrupt(format!("column {i}: expected {expected}, got {got:?}"))
}

/// A column the row does not have.
fn missing_column(i: usize) -> Error {
    corrupt(format!("column {i} missing"))
}

/// A flow's statements inside a larger flow: none of them is the last, so a driver never
/// commits early on their account ([`SqlExec::query_last`] is a plain query here).
pub struct NotLast<'a, X>(pub &'a mut X);

impl<X: SqlExec> SqlExec for NotLast<'_, X> {
    fn query(
        &mut self,
        sql: &'static str,
        params: Params<'_>,
    ) -> impl Future<Output = Result<Vec<Row>>> {
        self.0.query(sql, params)
    }

    fn execute(
        &mut self,
        sql: &'static str,
        params: Params<'_>,
    ) -> impl Future<Output = Result<Executed>> {
        self.0.execute(sql, params)
    }

    fn insert_numbered(
        &mut self,
        insert: Numbered,
        params: Params<'_>,
        n: usize,
        _last: bool,
    ) -> impl Future<Output = Result<Vec<i64>>> {
        self.0.insert_numbered(insert, params, n, false)
    }

    fn query_messages(
        &mut self,
        sql: &'static str,
        params: Params<'_>,
        _last: bool,
    ) -> impl Future<Output = Result<Vec<mqlite_contract::Message>>> {
        self.0.query_messages(sql, params, false)
    }

    fn in_process(&self) -> bool {
        self.0.in_process()
    }

    fn known_queue(&self, name: &str) -> Option<(QueueKind, QueueConfig)> {
        self.0.known_queue(name)
    }

    fn read_queue(&mut self, name: &str, row: &(QueueKind, QueueConfig)) {
        self.0.read_queue(name, row);
    }

    fn queues_changed(&mut self) {
        self.0.queues_changed();
    }
}

/// A step of [`SqlExec::last_at_once`] that refuses unless the statement before it
/// changed `:expected` rows: it inserts a NULL key into `mqlite_meta`, which the
/// table refuses with [`STEP_REFUSED`], so nothing after it runs.
pub const REFUSE_UNLESS_CHANGED: &str =
    "INSERT INTO mqlite_meta (key, value) SELECT NULL, '' WHERE changes() <> :expected";

/// [`REFUSE_UNLESS_CHANGED`] that also refuses unless the owner epoch in force is
/// `:epoch` (`owner_holds!`): a remote store folds its owner's check into the step it
/// sends anyway. The statement before it wrote, so the transaction holds the write lock
/// and reads the epoch in force; a refusal, for either reason, commits nothing, and the
/// flow's usual way (whose opening checks the owner on its own) tells which.
pub const REFUSE_UNLESS_CHANGED_OWNED: &str = concat!(
    "INSERT INTO mqlite_meta (key, value) SELECT NULL, '' WHERE changes() <> :expected OR NOT ",
    owner_holds!()
);

/// What the database answers when a statement carrying `owner_zero!` finds the owner
/// epoch moved.
pub const OWNER_REFUSED: &str = "malformed JSON";

/// What the database answers when [`REFUSE_UNLESS_CHANGED`] refuses.
pub const STEP_REFUSED: &str = "NOT NULL constraint failed: mqlite_meta.key";

/// Runs a `SELECT EXISTS (…)` and reads its answer.
pub async fn exists<X: SqlExec>(x: &mut X, sql: &'static str, params: Params<'_>) -> Result<bool> {
    match x.query(sql, params).await?.first() {
        Some(r) => r.flag(0),
        None => Ok(false),
    }
}

/// Runs statements inside the surrounding transaction: the driver's side of the flows.
///
/// Statement texts are `'static` so a driver can cache prepared statements by them.
/// Every parameter the text names must be bound, and no other.
pub trait SqlExec {
    /// Runs a statement and returns its rows.
    fn query(
        &mut self,
        sql: &'static str,
        params: Params<'_>,
    ) -> impl Future<Output = Result<Vec<Row>>>;

    /// Runs a statement for its effect.
    fn execute(
        &mut self,
        sql: &'static str,
        params: Params<'_>,
    ) -> impl Future<Output = Result<Executed>>;

    /// Runs the flow's last statement: after it the flow sends nothing more and only
    /// reads what it returned, so a driver may commit the transaction in the same
    /// request (a remote one saves a round trip). The default is [`SqlExec::query`].
    fn query_last(
        &mut self,
        sql: &'static str,
        params: Params<'_>,
    ) -> impl Future<Output = Result<Vec<Row>>> {
        self.query(sql, params)
    }

    /// [`SqlExec::execute`] for the flow's last statement (see [`SqlExec::query_last`]).
    fn execute_last(
        &mut self,
        sql: &'static str,
        params: Params<'_>,
    ) -> impl Future<Output = Result<Executed>> {
        self.execute(sql, params)
    }

    /// Runs `steps` in order as the flow's last statements, in ONE request with the
    /// commit, for a driver whose every request is a round trip; the rows of each step
    /// once committed. The steps are all or nothing: a step that refuses (fails with
    /// [`STEP_REFUSED`], as [`REFUSE_UNLESS_CHANGED`] does) undoes them all and leaves
    /// the transaction open, and the answer is `None`, as it always is from a driver that
    /// does not send statements together (the default, which runs nothing): the flow
    /// then goes its usual way.
    fn last_at_once(
        &mut self,
        _steps: &[(&'static str, Params<'_>)],
    ) -> impl Future<Output = Result<Option<Vec<Vec<Row>>>>> {
        std::future::ready(Ok(None))
    }

    /// Runs a query whose rows start with `message_columns!` and answers each row's
    /// message ([`crate::rows::message`]); `last` as for [`SqlExec::query_last`]. The
    /// default decodes the rows [`SqlExec::query`] returns; a driver in this process
    /// decodes each row where it reads it.
    fn query_messages(
        &mut self,
        sql: &'static str,
        params: Params<'_>,
        last: bool,
    ) -> impl Future<Output = Result<Vec<mqlite_contract::Message>>> {
        async move {
            let mut rows = if last {
                self.query_last(sql, params).await?
            } else {
                self.query(sql, params).await?
            };
            rows.iter_mut()
                .map(|r| crate::rows::message(r, 0))
                .collect()
        }
    }

    /// Runs `insert` of `n` rows into a table whose INTEGER PRIMARY KEY is `id`,
    /// numbered consecutively in the order inserted, and returns their ids in that
    /// order. `last` as for [`SqlExec::query_last`]. The default runs the statement with
    /// `RETURNING id`; a driver that can read the last row's rowid from its connection
    /// at no cost runs the plain one and counts back from it (SQLite runs `RETURNING`
    /// through a temporary table).
    fn insert_numbered(
        &mut self,
        insert: Numbered,
        params: Params<'_>,
        n: usize,
        last: bool,
    ) -> impl Future<Output = Result<Vec<i64>>> {
        async move {
            let rows = if last {
                self.query_last(insert.returning, params).await?
            } else {
                self.query(insert.returning, params).await?
            };
            crate::enqueue::returned_numbers(&rows, n)
        }
    }

    /// Whether a statement runs in this process (a call into a library, no round trip):
    /// a flow may then read a value with a statement of its own where a remote driver
    /// reads it inside the statement that uses it, when reading it there costs that
    /// statement more (SQLite copies every row of an `INSERT … SELECT` that reads the
    /// table it writes to a temporary table first). The default: no.
    fn in_process(&self) -> bool {
        false
    }

    /// A queue's kind and configuration as the driver knows them without asking the
    /// database: only a driver that can vouch that nothing else changed the row since
    /// a committed transaction read it (a remote store while it owns the database)
    /// answers; the default asks every time.
    fn known_queue(&self, _name: &str) -> Option<(QueueKind, QueueConfig)> {
        None
    }

    /// The flow read a queue's row: the driver may remember it once the transaction
    /// commits.
    fn read_queue(&mut self, _name: &str, _row: &(QueueKind, QueueConfig)) {}

    /// The flow wrote queue rows (created, changed or deleted a queue): whatever the
    /// driver remembers of them is forgotten, whatever the transaction's outcome.
    fn queues_changed(&mut self) {}
}

/// A queue's row as the flows read it.
pub type QueueRow = (QueueKind, QueueConfig);

/// The rows of `mqlite_queues` a store read in committed transactions, for a driver
/// that can vouch that nothing else changed them since ([`SqlExec::known_queue`]): the
/// store is the database's only writer, and every write of a queue row goes through a
/// flow that says so ([`SqlExec::queues_changed`]), which forgets them all. A flow
/// that finds its queue here skips the read of its row: a receive or a settlement is
/// one statement shorter.
#[derive(Debug, Default)]
pub struct KnownQueues(Mutex<HashMap<String, QueueRow>>);

impl KnownQueues {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, QueueRow>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The row of `name`, if a committed transaction read it since the last change.
    pub fn get(&self, name: &str) -> Option<QueueRow> {
        self.lock().get(name).cloned()
    }

    /// Forgets every row (a flow wrote queue rows, whatever its outcome).
    pub fn forget(&self) {
        self.lock().clear();
    }

    /// Remembers rows read by a transaction that committed.
    pub fn remember(&self, rows: impl IntoIterator<Item = (String, QueueRow)>) {
        self.lock().extend(rows);
    }
}

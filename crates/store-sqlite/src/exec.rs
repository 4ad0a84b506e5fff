//! The rusqlite side of `mqlite_sql::SqlExec`: named parameters bound by name (`?N` by
//! its number), prepared statements cached by their text, every statement counted with
//! the virtual-machine steps it took (the store's [`WorkStats`]).

use std::sync::atomic::{AtomicU64, Ordering};

use rusqlite::types::ValueRef;
use rusqlite::{Connection, StatementStatus};

use mqlite_contract::{Error, Message, QueueConfig, QueueKind, Result, WorkStats};
use mqlite_sql::exec::wrong_column;
use mqlite_sql::{Columns, Executed, KnownQueues, Numbered, Params, QueueRow, Row, SqlExec, Value};

use crate::db;
use crate::writer::Lazy;

/// Statements (each counted once it ran, whether it succeeded or failed) and steps since
/// open, shared by the store and its writer thread.
#[derive(Debug, Default)]
pub(crate) struct WorkCounter {
    statements: AtomicU64,
    visits: AtomicU64,
}

impl WorkCounter {
    fn record(&self, steps: i32) {
        self.statements.fetch_add(1, Ordering::Relaxed);
        self.visits
            .fetch_add(u64::try_from(steps).unwrap_or(0), Ordering::Relaxed);
    }

    /// The totals so far.
    pub(crate) fn get(&self) -> WorkStats {
        WorkStats {
            statements: self.statements.load(Ordering::Relaxed),
            visits: self.visits.load(Ordering::Relaxed),
        }
    }
}

/// Runs the shared flows' statements on one connection (inside the caller's
/// transaction).
pub(crate) struct Exec<'c> {
    pub(crate) conn: &'c Connection,
    pub(crate) work: &'c WorkCounter,
    /// The queue rows this store vouches for ([`KnownQueues`]: it is the file's one
    /// writer).
    pub(crate) known: &'c KnownQueues,
    /// Where the queue rows this flow reads wait for its transaction's commit (the
    /// writer's [`crate::writer::Conn`] remembers them then); None in an application's
    /// transaction, whose commit the store does not see.
    pub(crate) read: Option<&'c mut Vec<(String, QueueRow)>>,
    /// The deferred transaction of a call alone on its caller's thread; None inside a
    /// transaction already open (an application's).
    pub(crate) lazy: Option<Lazy<'c>>,
}

fn bind(stmt: &mut rusqlite::Statement<'_>, sql: &str, params: Params<'_>) -> Result<()> {
    if stmt.parameter_count() != params.len() {
        return Err(Error::invalid(format!(
            "statement takes {} parameters, {} given: {sql}",
            stmt.parameter_count(),
            params.len()
        )));
    }
    for (name, value) in params {
        // A statement from the cache has every parameter NULL (rusqlite clears them as
        // it puts one back, pinned by tests/binds.rs; a new one starts so), so a NULL
        // bound by number needs no call: a sized statement's spare rows are all NULL.
        // A named one is still looked up, so a misspelt name stays an error.
        if matches!(value, Value::Null) && name.starts_with('?') {
            continue;
        }
        // `?N` is bound by its number: SQLite finds a name by walking the statement's
        // list of names, which a multi-row INSERT of hundreds of values cannot afford.
        let index = match name.strip_prefix('?').map(str::parse::<usize>) {
            Some(Ok(n)) if (1..=params.len()).contains(&n) => n,
            _ => stmt
                .parameter_index(name)
                .map_err(db)?
                .ok_or_else(|| Error::invalid(format!("no parameter {name} in: {sql}")))?,
        };
        match value {
            Value::Null => Ok(()),
            Value::Int(v) => stmt.raw_bind_parameter(index, v),
            Value::Real(v) => stmt.raw_bind_parameter(index, v),
            Value::Text(v) => stmt.raw_bind_parameter(index, v),
            Value::Blob(v) => stmt.raw_bind_parameter(index, v),
        }
        .map_err(db)?;
    }
    Ok(())
}

fn value(v: ValueRef<'_>) -> Value {
    match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::Int(i),
        ValueRef::Real(f) => Value::Real(f),
        ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => Value::Blob(b.to_vec()),
    }
}

/// A row as SQLite hands it over, read column by column where it lies
/// ([`mqlite_sql::rows::message`] decodes a message from it with no [`Value`] between).
struct InPlace<'r, 's>(&'r rusqlite::Row<'s>);

impl Columns for InPlace<'_, '_> {
    fn int(&mut self, i: usize) -> Result<i64> {
        match self.0.get_ref(i).map_err(db)? {
            ValueRef::Integer(v) => Ok(v),
            other => Err(wrong_column(i, "an integer", &other)),
        }
    }

    fn opt_text(&mut self, i: usize) -> Result<Option<String>> {
        match self.0.get_ref(i).map_err(db)? {
            ValueRef::Null => Ok(None),
            ValueRef::Text(t) => Ok(Some(String::from_utf8_lossy(t).into_owned())),
            other => Err(wrong_column(i, "text", &other)),
        }
    }

    fn blob(&mut self, i: usize) -> Result<Vec<u8>> {
        match self.0.get_ref(i).map_err(db)? {
            ValueRef::Blob(b) => Ok(b.to_vec()),
            other => Err(wrong_column(i, "a blob", &other)),
        }
    }
}

impl Exec<'_> {
    /// Opens a deferred transaction before a statement that is not the flow's `last`;
    /// whether the statement runs by itself ([`Lazy::before`]).
    fn before(&self, last: bool) -> Result<Option<Lazy<'_>>> {
        match self.lazy {
            Some(lazy) if lazy.before(self.conn, last)? => Ok(Some(lazy)),
            _ => Ok(None),
        }
    }

    /// Runs a query and answers `each` of its rows as read.
    fn rows_now<T>(
        &self,
        sql: &'static str,
        params: Params<'_>,
        last: bool,
        mut each: impl FnMut(&rusqlite::Row<'_>) -> Result<T>,
    ) -> Result<Vec<T>> {
        let alone = self.before(last)?;
        let mut stmt = self.conn.prepare_cached(sql).map_err(db)?;
        bind(&mut stmt, sql, params)?;
        let mut out = Vec::new();
        let ran = (|| {
            let mut rows = stmt.raw_query();
            while let Some(r) = rows.next().map_err(db)? {
                out.push(each(r)?);
            }
            Ok::<_, Error>(())
        })();
        // Counted whether it succeeded or failed: a statement is run once (10.3).
        self.work.record(stmt.reset_status(StatementStatus::VmStep));
        ran?;
        // Every row read: the statement is done, and by itself it committed.
        alone.inspect(Lazy::ran);
        Ok(out)
    }

    fn query_now(&self, sql: &'static str, params: Params<'_>, last: bool) -> Result<Vec<Row>> {
        // The statement's width, asked once (every row has it).
        let mut width = None;
        self.rows_now(sql, params, last, |r| {
            let width = *width.get_or_insert_with(|| r.as_ref().column_count());
            let mut cols = Vec::with_capacity(width);
            for i in 0..width {
                cols.push(value(r.get_ref(i).map_err(db)?));
            }
            Ok(Row(cols))
        })
    }

    fn execute_now(&self, sql: &'static str, params: Params<'_>, last: bool) -> Result<Executed> {
        let alone = self.before(last)?;
        let mut stmt = self.conn.prepare_cached(sql).map_err(db)?;
        bind(&mut stmt, sql, params)?;
        let ran = stmt.raw_execute().map_err(db);
        // Counted whether it succeeded or failed: a statement is run once (10.3).
        self.work.record(stmt.reset_status(StatementStatus::VmStep));
        let changes = ran? as u64;
        alone.inspect(Lazy::ran);
        Ok(Executed {
            changes,
            last_insert_rowid: self.conn.last_insert_rowid(),
        })
    }
}

#[allow(
    clippy::future_not_send,
    reason = "driven to completion at once by block_on on the thread holding the connection (the writer thread, or a caller's for a short call); never held across a task's await"
)]
impl SqlExec for Exec<'_> {
    fn in_process(&self) -> bool {
        true
    }

    fn known_queue(&self, name: &str) -> Option<(QueueKind, QueueConfig)> {
        // Or read earlier in this transaction (by a neighbour in its group, or an
        // earlier send merged with this one): a change to any queue since would have
        // cleared those reads.
        self.known.get(name).or_else(|| {
            self.read
                .as_ref()?
                .iter()
                .rev()
                .find(|(n, _)| n == name)
                .map(|(_, row)| row.clone())
        })
    }

    fn read_queue(&mut self, name: &str, row: &(QueueKind, QueueConfig)) {
        if let Some(read) = self.read.as_mut() {
            read.push((name.to_owned(), row.clone()));
        }
    }

    fn queues_changed(&mut self) {
        // Forgotten at once, and so is what this transaction read before: a row read
        // earlier may be the one that changes.
        self.known.forget();
        if let Some(read) = self.read.as_mut() {
            read.clear();
        }
    }

    async fn query(&mut self, sql: &'static str, params: Params<'_>) -> Result<Vec<Row>> {
        self.query_now(sql, params, false)
    }

    async fn execute(&mut self, sql: &'static str, params: Params<'_>) -> Result<Executed> {
        self.execute_now(sql, params, false)
    }

    async fn query_last(&mut self, sql: &'static str, params: Params<'_>) -> Result<Vec<Row>> {
        self.query_now(sql, params, true)
    }

    /// Each message decoded where its row lies ([`InPlace`]).
    async fn query_messages(
        &mut self,
        sql: &'static str,
        params: Params<'_>,
        last: bool,
    ) -> Result<Vec<Message>> {
        self.rows_now(sql, params, last, |r| {
            mqlite_sql::rows::message(&mut InPlace(r), 0)
        })
    }

    async fn execute_last(&mut self, sql: &'static str, params: Params<'_>) -> Result<Executed> {
        self.execute_now(sql, params, true)
    }

    /// `plain`, and the ids counted back from the last row's rowid: no `RETURNING` and
    /// its temporary table.
    async fn insert_numbered(
        &mut self,
        insert: Numbered,
        params: Params<'_>,
        n: usize,
        last: bool,
    ) -> Result<Vec<i64>> {
        let done = self.execute_now(insert.plain, params, last)?;
        if done.changes != n as u64 {
            return Err(mqlite_sql::exec::wrong_row_count(done.changes, n));
        }
        let first = done.last_insert_rowid - (n as i64 - 1);
        Ok((first..=done.last_insert_rowid).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::InPlace;
    use mqlite_contract::Error;
    use mqlite_sql::Columns;

    /// A column read in place answers its value when it has the schema's type, and a
    /// typed error naming the column when not (a damaged or foreign row), never a panic.
    #[test]
    fn a_column_read_in_place_is_checked_for_its_type() {
        let conn = rusqlite::Connection::open_in_memory().expect("a connection");
        let mut stmt = conn
            .prepare("SELECT 7, 'text', x'0102', NULL")
            .expect("a statement");
        let mut rows = stmt.query([]).expect("a row");
        let row = rows.next().expect("read").expect("one row");
        let mut cols = InPlace(row);
        assert_eq!(cols.int(0).expect("an integer"), 7);
        assert_eq!(cols.opt_text(1).expect("text"), Some("text".to_owned()));
        assert_eq!(cols.blob(2).expect("a blob"), vec![1, 2]);
        assert_eq!(cols.opt_text(3).expect("NULL"), None);
        for wrong in [
            cols.int(1).map(drop),
            cols.opt_text(0).map(drop),
            cols.blob(1).map(drop),
            cols.int(3).map(drop),
            cols.blob(3).map(drop),
            cols.int(9).map(drop),
        ] {
            assert!(
                matches!(wrong, Err(Error::Backend { .. })),
                "a wrong type or a missing column is a typed error: {wrong:?}"
            );
        }
    }
}

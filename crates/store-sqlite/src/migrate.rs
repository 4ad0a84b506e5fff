//! `mqlite migrate`: copies a database of a released layout into a new file of the
//! current one, offline, and checks that every row arrived (promise 10.2: a file of
//! another layout is refused at open, never changed in place; this is the way forward
//! the refusal names).
//!
//! The copy is one transaction on the new file with the old one attached: for each
//! current table the old layout has, one `INSERT … SELECT` of its rows (each column by
//! name, or by the expression the layout gives it, see [`mqlite_sql::layouts`]), then a
//! count of both sides per table and of the messages per queue and state. Both files are
//! held under the store's one-writer lock for the whole copy, so no broker or program
//! writes either meanwhile. A failed migration leaves the old file untouched and removes
//! the new one.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use rusqlite::Connection;

use mqlite_contract::{Error, Result};
use mqlite_sql::layouts::{self, Layout};
use mqlite_sql::schema::SCHEMA_TOKEN;

use crate::schema::{self, DbPath, Guard};
use crate::{Synchronous, db, lock};

/// What [`migrate`] copied.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MigrationReport {
    /// The old file's layout.
    pub from: String,
    /// The new file's layout (this binary's).
    pub to: &'static str,
    /// Rows copied per table, in copy order (the schema token row of `mqlite_meta` is
    /// not copied: the new file carries its own).
    pub tables: Vec<(String, u64)>,
}

impl MigrationReport {
    /// Rows copied into `table`.
    pub fn rows(&self, table: &str) -> u64 {
        self.tables
            .iter()
            .find(|(t, _)| t == table)
            .map_or(0, |(_, n)| *n)
    }
}

/// Copies the mqlite database at `old` (of any layout a release wrote, see
/// [`mqlite_sql::layouts::LAYOUTS`]) into a new file at `new` in the current layout:
/// queues, topics and subscriptions, every message in its state (delivery count,
/// schedule, lease and lock token, identity, dead-letter reason), dedup entries,
/// settlement receipts and receive attempts, access keys, the inbox and the relay. Then
/// checks the counts. `new` must not exist. Blocking: run it off the executor.
pub fn migrate(old: &Path, new: &Path) -> Result<MigrationReport> {
    if !old.is_file() {
        return Err(Error::invalid(format!(
            "{} is not a file: name the database to migrate from",
            old.display()
        )));
    }
    if new.exists() {
        return Err(Error::invalid(format!(
            "{} already exists: migrate writes a new file and never overwrites one; name \
             a path that does not exist yet",
            new.display()
        )));
    }
    let old = lock::canonical_db_path(old)?;
    let new = lock::canonical_db_path(new)?;
    let _old_lock = lock::lock_db(&old, Arc::new(AtomicBool::new(false)))?;
    let found = match schema::check_guard(&old) {
        Ok(Guard::Ours) => SCHEMA_TOKEN.to_owned(),
        Err(Error::SchemaVersionMismatch { found, .. }) => found,
        Ok(Guard::Fresh) => {
            return Err(Error::NotADatabase {
                path: old.display().to_string(),
                detail: "it holds no mqlite schema, so there is nothing to migrate".into(),
            });
        }
        Err(e) => return Err(e),
    };
    let layout = layouts::readable(&found).ok_or_else(|| Error::NotADatabase {
        path: old.display().to_string(),
        detail: format!(
            "its layout {found:?} is not one a release wrote ({}); open it with the build \
             that wrote it and move its messages by hand",
            layouts::known_tokens()
        ),
    })?;
    let new_lock = lock::lock_db(&new, Arc::new(AtomicBool::new(false)))?;
    let copied = copy(layout, &old, &new);
    drop(new_lock);
    if copied.is_err() {
        remove_database(&new);
    }
    copied
}

/// Creates the current schema at `new` and copies `old`'s rows into it.
fn copy(layout: &Layout, old: &Path, new: &Path) -> Result<MigrationReport> {
    let mut conn =
        schema::open_connection(&DbPath::File(new.to_path_buf()), Synchronous::Normal, false)?;
    conn.execute("ATTACH DATABASE ?1 AS old", [old.to_string_lossy()])
        .map_err(db)?;
    let old_tables = table_names(&conn, "old")?;
    // The side tables exist from their first use; the new file gets them if the old
    // one has either.
    if old_tables
        .iter()
        .any(|t| t == "mqlite_inbox" || t == "mqlite_relay")
    {
        for ddl in mqlite_sql::side_tables::DDL {
            conn.execute(ddl, []).map_err(db)?;
        }
    }
    // Every old table has a place in the new layout: none is left behind uncounted.
    let new_tables = table_names(&conn, "main")?;
    if let Some(orphan) = old_tables.iter().find(|t| !new_tables.contains(t)) {
        return Err(failed(format!(
            "{orphan} has no table in the layout {SCHEMA_TOKEN}: its rows would be lost"
        )));
    }
    let tx = conn.transaction().map_err(db)?;
    let mut report = MigrationReport {
        from: layout.token.to_owned(),
        to: SCHEMA_TOKEN,
        tables: Vec::new(),
    };
    for table in new_tables {
        if !old_tables.contains(&table) {
            continue;
        }
        let old_columns = columns(&tx, "old", &table)?;
        let mut names = Vec::new();
        let mut values = Vec::new();
        for column in columns(&tx, "main", &table)? {
            let value = match layout.column(&table, &column) {
                Some(expr) => expr.to_owned(),
                None if old_columns.contains(&column) => format!("\"{column}\""),
                // The current DDL's default fills it.
                None => continue,
            };
            names.push(format!("\"{column}\""));
            values.push(value);
        }
        // The new file carries its own token.
        let only = if table == "mqlite_meta" {
            " WHERE key <> 'schema_token'"
        } else {
            ""
        };
        let inserted = tx
            .execute(
                &format!(
                    "INSERT INTO main.\"{table}\" ({}) SELECT {} FROM old.\"{table}\"{only}",
                    names.join(", "),
                    values.join(", ")
                ),
                [],
            )
            .map_err(db)? as u64;
        let count = |schema: &str| -> Result<u64> {
            tx.query_row(
                &format!("SELECT count(*) FROM {schema}.\"{table}\"{only}"),
                [],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| n as u64)
            .map_err(db)
        };
        let (before, after) = (count("old")?, count("main")?);
        if inserted != before || after != before {
            return Err(mismatch(&table, before, after));
        }
        report.tables.push((table, after));
    }
    // Every message kept its queue and its state (read from the old file as the layout
    // maps it).
    let by_state = |schema: &str, state: &str| -> Result<Vec<(String, i64, i64)>> {
        let mut stmt = tx
            .prepare(&format!(
                "SELECT queue, {state} AS s, count(*) FROM {schema}.mqlite_messages \
                 GROUP BY queue, s ORDER BY queue, s"
            ))
            .map_err(db)?;
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .and_then(|rows| rows.collect())
            .map_err(db)
    };
    let old_state = layout.column("mqlite_messages", "state").unwrap_or("state");
    if by_state("old", old_state)? != by_state("main", "state")? {
        return Err(failed(
            "the messages per queue and state differ after the copy".into(),
        ));
    }
    tx.commit().map_err(db)?;
    conn.execute("DETACH DATABASE old", []).map_err(db)?;
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .map_err(db)?;
    conn.close().map_err(|(_, e)| db(e))?;
    Ok(report)
}

fn mismatch(table: &str, before: u64, after: u64) -> Error {
    failed(format!(
        "{table} holds {before} rows in the old file and {after} in the new one"
    ))
}

/// A check after the copy failed: the new file is removed.
fn failed(what: String) -> Error {
    Error::backend(
        "sqlite",
        std::io::Error::other(format!("migration: {what}; the new file was removed")),
    )
}

/// The mqlite tables of `schema`, in creation order (a message's queue before it).
fn table_names(conn: &Connection, schema: &str) -> Result<Vec<String>> {
    let mut stmt = conn
        .prepare(&format!(
            "SELECT name FROM {schema}.sqlite_master WHERE type = 'table' \
             AND name LIKE 'mqlite\\_%' ESCAPE '\\' ORDER BY rowid"
        ))
        .map_err(db)?;
    stmt.query_map([], |r| r.get(0))
        .and_then(|rows| rows.collect())
        .map_err(db)
}

/// The column names of `schema.table`, in order.
fn columns(conn: &Connection, schema: &str, table: &str) -> Result<Vec<String>> {
    let mut stmt = conn
        .prepare(&format!("PRAGMA {schema}.table_info(\"{table}\")"))
        .map_err(db)?;
    stmt.query_map([], |r| r.get(1))
        .and_then(|rows| rows.collect())
        .map_err(db)
}

/// Removes a half-made database and its sidecars.
fn remove_database(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(schema::sidecar(path, suffix));
    }
}

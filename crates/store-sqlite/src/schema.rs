//! Opening a database: the guard token check before any write (10.2), the pragmas, and
//! the canonical schema from `mqlite_sql` for a database that has none.

use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior};

use mqlite_engine_core::{Error, Result};
use mqlite_sql::schema::{INSERT_TOKEN, SCHEMA, SCHEMA_TOKEN, SELECT_TOKEN};

use crate::{Synchronous, db};

/// What the guard found in an existing file.
enum Guard {
    /// No mqlite schema yet: it will be created.
    Fresh,
    /// Our token.
    Ours,
}

/// Reads the guard token through a read-only connection, so a refused database is left
/// byte-for-byte as it was.
fn check_guard(path: &std::path::Path) -> Result<Guard> {
    let exists = std::fs::metadata(path)
        .map(|m| m.len() > 0)
        .unwrap_or(false);
    if !exists {
        return Ok(Guard::Fresh);
    }
    // (path, is the WAL) of the sidecars that do not exist yet.
    let sidecars: Vec<(std::path::PathBuf, bool)> = ["-wal", "-shm"]
        .iter()
        .map(|suffix| {
            let mut p = path.as_os_str().to_owned();
            p.push(suffix);
            (std::path::PathBuf::from(p), *suffix == "-wal")
        })
        .filter(|(p, _)| !p.exists())
        .collect();
    let guard = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(db)
    .and_then(|conn| read_guard(&conn));
    if guard.is_err() {
        // A read-only connection to a WAL database may leave empty sidecar files behind;
        // a refused database is left exactly as it was found.
        for (p, is_wal) in sidecars {
            // An empty WAL holds nothing; the shared-memory index is never data.
            if std::fs::metadata(&p).is_ok_and(|m| !is_wal || m.len() == 0) {
                let _ = std::fs::remove_file(&p);
            }
        }
    }
    guard
}

fn read_guard(conn: &Connection) -> Result<Guard> {
    let not_ours = |found: String| Error::SchemaVersionMismatch {
        found,
        expected: SCHEMA_TOKEN,
    };
    let has_meta: bool = conn
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta')",
            [],
            |r| r.get(0),
        )
        .map_err(|e| match e {
            // Not a database at all: refuse it as "not ours" rather than touch it.
            rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::NotADatabase => {
                not_ours(String::new())
            }
            e => db(e),
        })?;
    if !has_meta {
        return Ok(Guard::Fresh);
    }
    let token: Option<String> = conn
        .query_row(SELECT_TOKEN, [], |r| r.get(0))
        .optional()
        .map_err(db)?;
    match token {
        Some(t) if t == SCHEMA_TOKEN => Ok(Guard::Ours),
        other => Err(not_ours(other.unwrap_or_default())),
    }
}

/// Opens the connection the writer thread will own.
pub(crate) fn open_connection(location: &Location, sync: Synchronous) -> Result<Connection> {
    let mut conn = match location {
        Location::Memory => Connection::open_in_memory().map_err(db)?,
        Location::File(path) => {
            check_guard(path)?;
            Connection::open(path).map_err(db)?
        }
    };
    if matches!(location, Location::File(_)) {
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(db)?;
        debug_assert_eq!(mode.to_ascii_lowercase(), "wal");
    }
    let sync = match sync {
        Synchronous::Normal => "NORMAL",
        Synchronous::Full => "FULL",
    };
    conn.execute_batch(&format!(
        "PRAGMA synchronous = {sync}; PRAGMA foreign_keys = ON;"
    ))
    .map_err(db)?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(db)?;
    // Checked again under the write lock: the read-only look happened before it.
    if let Guard::Fresh = read_guard(&tx)? {
        for ddl in SCHEMA {
            tx.execute(ddl, []).map_err(db)?;
        }
        tx.execute(
            INSERT_TOKEN,
            rusqlite::named_params! {":token": SCHEMA_TOKEN},
        )
        .map_err(db)?;
    }
    tx.commit().map_err(db)?;
    Ok(conn)
}

/// Where the database lives.
#[derive(Debug, Clone)]
pub(crate) enum Location {
    /// A private in-memory database (`:memory:`): no file, no lock.
    Memory,
    /// A local file, by its canonical path.
    File(std::path::PathBuf),
}

//! Opening a database: the guard token check before any write (10.2), the pragmas, and
//! the canonical schema from `mqlite_sql` for a database that has none.

use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior};

use mqlite_contract::{Error, Result};
use mqlite_sql::schema::{INSERT_TOKEN, SCHEMA, SCHEMA_TOKEN, SELECT_TOKEN};

use crate::{Synchronous, db};

/// The file SQLite (or the store) keeps beside the database at `path`: its name with
/// `suffix` appended (`-wal`, `-shm`, `.lock`).
pub(crate) fn sidecar(path: &std::path::Path, suffix: &str) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    name.into()
}

/// What the guard found in an existing file.
pub(crate) enum Guard {
    /// No mqlite schema yet: it will be created.
    Fresh,
    /// Our token.
    Ours,
}

/// Reads the guard token through a read-only connection, so a refused database is left
/// byte-for-byte as it was.
pub(crate) fn check_guard(path: &std::path::Path) -> Result<Guard> {
    let exists = std::fs::metadata(path)
        .map(|m| m.len() > 0)
        .unwrap_or(false);
    if !exists {
        return Ok(Guard::Fresh);
    }
    // (path, is the WAL) of the sidecars that do not exist yet.
    let sidecars: Vec<(std::path::PathBuf, bool)> = ["-wal", "-shm"]
        .iter()
        .map(|suffix| (sidecar(path, suffix), *suffix == "-wal"))
        .filter(|(p, _)| !p.exists())
        .collect();
    let guard = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(db)
    .and_then(|conn| read_guard(&conn, path));
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

/// Decides, without writing, whether an existing database is ours, fresh (adoptable:
/// none of mqlite's names are taken), or refused: another mqlite layout's token, a
/// foreign token, or the application's own objects under mqlite's names.
fn read_guard(conn: &Connection, path: &std::path::Path) -> Result<Guard> {
    let refuse = |detail: String| Error::NotADatabase {
        path: path.display().to_string(),
        detail,
    };
    let names: Vec<String> = conn
        .prepare(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'index', 'view', 'trigger')",
        )
        .and_then(|mut stmt| {
            stmt.query_map([], |r| r.get(0))?
                .collect::<rusqlite::Result<Vec<String>>>()
        })
        .map_err(|e| match e {
            rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::NotADatabase => {
                refuse("it is not a SQLite database".to_owned())
            }
            e => db(e),
        })?;
    if names.iter().any(|n| n == "mqlite_meta") {
        let token: Option<String> = conn
            .query_row(SELECT_TOKEN, [], |r| r.get(0))
            .optional()
            .map_err(db)?;
        return match token {
            Some(t) if t == SCHEMA_TOKEN => Ok(Guard::Ours),
            other => Err(Error::SchemaVersionMismatch {
                found: other.unwrap_or_default(),
                expected: SCHEMA_TOKEN,
            }),
        };
    }
    // The first layouts kept their token in an unprefixed `meta` table.
    if names.iter().any(|n| n == "meta") {
        let earlier: Option<String> = conn
            .query_row(
                "SELECT value FROM meta WHERE key = 'schema_token'",
                [],
                |r| r.get(0),
            )
            .optional()
            .unwrap_or(None);
        if let Some(token) = earlier.filter(|t| t.starts_with("mqlite")) {
            return Err(Error::SchemaVersionMismatch {
                found: token,
                expected: SCHEMA_TOKEN,
            });
        }
    }
    let taken: Vec<&String> = names.iter().filter(|n| n.starts_with("mqlite_")).collect();
    if !taken.is_empty() {
        return Err(refuse(format!(
            "it holds objects named like mqlite's ({}) but no mqlite schema token; rename \
             them or use another file",
            taken
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    Ok(Guard::Fresh)
}

/// Opens the connection the writer thread will own; `gather_wal_writes`: through the
/// VFS that writes each commit's WAL frames at once ([`SqliteOptions::gather_wal_writes`](crate::SqliteOptions::gather_wal_writes)).
pub(crate) fn open_connection(
    location: &DbPath,
    sync: Synchronous,
    gather_wal_writes: bool,
) -> Result<Connection> {
    let mut conn = match location {
        DbPath::Memory => Connection::open_in_memory().map_err(db)?,
        DbPath::File(path) => {
            check_guard(path)?;
            if gather_wal_writes {
                // The WAL takes each commit's frames in one write (crates/sqlite-vfs).
                mqlite_sqlite_vfs::register().map_err(|rc| {
                    db(rusqlite::Error::SqliteFailure(
                        rusqlite::ffi::Error::new(rc),
                        Some("registering the WAL-gathering VFS".into()),
                    ))
                })?;
                Connection::open_with_flags_and_vfs(
                    path,
                    OpenFlags::default(),
                    mqlite_sqlite_vfs::NAME,
                )
                .map_err(db)?
            } else {
                Connection::open(path).map_err(db)?
            }
        }
    };
    // Every statement the flows run stays prepared: rusqlite's default cache holds 16,
    // fewer than a send, a claim and a completion use between them with the group
    // commit's own, so a mixed workload re-parsed its statements on every call.
    conn.set_prepared_statement_cache_capacity(mqlite_sql::STATEMENTS.len() + 32);
    // One plan per statement whatever its bound values (the query planner stability
    // guarantee). Without it, a statement whose `LIMIT :max` or partial-index terms the
    // planner read as values is marked expired by every new binding and re-prepared on
    // every call — a profile of the claim found most of its time in the parser. The plans
    // are the ones the plan pins hold (store-sqlite/tests/plan_pins.rs).
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )
    .map_err(db)?;
    if matches!(location, DbPath::File(_)) {
        // Before any table exists, so a new file gives free pages back incrementally
        // (the janitor's vacuum step, `mqlite vacuum`). On a file that already has
        // tables it changes nothing until a full VACUUM, which then converts it.
        conn.execute_batch("PRAGMA auto_vacuum = INCREMENTAL")
            .map_err(db)?;
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(db)?;
        debug_assert_eq!(mode.to_ascii_lowercase(), "wal");
        crate::writer::hook_wal(&conn);
    }
    let sync = sync.pragma();
    conn.execute_batch(&format!(
        "PRAGMA synchronous = {sync}; PRAGMA foreign_keys = ON; PRAGMA temp_store = MEMORY;"
    ))
    .map_err(db)?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(db)?;
    // Checked again under the write lock: the read-only look happened before it.
    if let Guard::Fresh = read_guard(&tx, location.path())? {
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
pub(crate) enum DbPath {
    /// A private in-memory database (`:memory:`): no file, no lock.
    Memory,
    /// A local file, by its canonical path.
    File(std::path::PathBuf),
}

impl DbPath {
    /// The path errors name.
    fn path(&self) -> &std::path::Path {
        match self {
            DbPath::Memory => std::path::Path::new(":memory:"),
            DbPath::File(p) => p,
        }
    }
}

//! Opening a redb database: the guards before anything is written (10.1, 10.2), the
//! one open per path in this process, and the tools that work on a closed file.

use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use redb::{Database, DatabaseError, ReadableDatabase, TableError};

use mqlite_contract::{Error, LockHolder, Result};

/// The redb version this store links, for the application's own tables in
/// [`RedbTx::redb`].
use crate::tables::{META, Tables, WorkCounter};

use crate::{SCHEMA_TOKEN, TOKEN_KEY, db};

/// The databases this process holds open, by canonical path: a second open of one of
/// them is refused naming this process as the holder.
pub(crate) static OPEN: std::sync::Mutex<Option<std::collections::HashSet<String>>> =
    std::sync::Mutex::new(None);

pub(crate) fn open_paths()
-> std::sync::MutexGuard<'static, Option<std::collections::HashSet<String>>> {
    OPEN.lock().unwrap_or_else(|e| e.into_inner())
}

/// The refusal of an open that found the file held: by this process or another.
pub(crate) fn locked(path: &Path) -> Error {
    let path = display_path(path);
    let here = open_paths().as_ref().is_some_and(|set| set.contains(&path));
    Error::DbLocked {
        path,
        holder: if here {
            LockHolder::ThisProcess
        } else {
            LockHolder::AnotherProcess
        },
    }
}

pub(crate) fn display_path(path: &Path) -> String {
    std::fs::canonicalize(path)
        .unwrap_or_else(|_| path.to_path_buf())
        .display()
        .to_string()
}

pub(crate) fn mismatch(found: impl Into<String>) -> Error {
    Error::SchemaVersionMismatch {
        found: found.into(),
        expected: SCHEMA_TOKEN,
    }
}

/// What a redb database says its schema is: `Some(token)`, or None when it holds no
/// table at all (created, never committed to).
pub(crate) fn token_of(txn: &redb::ReadTransaction) -> Result<Option<String>> {
    match txn.open_table(META) {
        Ok(t) => Ok(Some(
            redb::ReadableTable::get(&t, TOKEN_KEY)
                .map_err(db)?
                .map(|v| String::from_utf8_lossy(v.value()).into_owned())
                .unwrap_or_default(),
        )),
        Err(TableError::TableDoesNotExist(_)) => {
            let any = txn.list_tables().map_err(db)?.next().is_some();
            Ok(if any { Some(String::new()) } else { None })
        }
        Err(e) => Err(db(e)),
    }
}

/// The guard (10.1, 10.2) before anything is written: a file that exists is first
/// opened read-only, which writes nothing; another writer is `DbLocked`, a file that is
/// not a redb database or carries another token is `SchemaVersionMismatch`. A file
/// that needs a repair after a crash cannot be read without one: its token is checked
/// right after the writable open repairs it.
pub(crate) fn guard(path: &Path) -> Result<()> {
    let nonempty = std::fs::metadata(path)
        .map(|m| m.len() > 0)
        .unwrap_or(false);
    if !nonempty {
        return Ok(());
    }
    match redb::Builder::new().open_read_only(path) {
        Ok(ro) => {
            let txn = ro.begin_read().map_err(db)?;
            let found = token_of(&txn)?;
            drop(txn);
            ro.close().map_err(db)?;
            match found {
                Some(t) if t != SCHEMA_TOKEN => Err(mismatch(t)),
                _ => Ok(()),
            }
        }
        Err(DatabaseError::DatabaseAlreadyOpen) => Err(locked(path)),
        Err(DatabaseError::RepairAborted) => Ok(()),
        Err(DatabaseError::UpgradeRequired(v)) => Err(mismatch(format!("redb file format {v}"))),
        // Another magic number, or too short to hold a redb header: not a redb database.
        Err(DatabaseError::Storage(redb::StorageError::Io(e)))
            if matches!(
                e.kind(),
                std::io::ErrorKind::InvalidData | std::io::ErrorKind::UnexpectedEof
            ) =>
        {
            Err(mismatch(""))
        }
        Err(DatabaseError::Storage(redb::StorageError::Io(e))) => {
            Err(db(redb::StorageError::Io(e)))
        }
        Err(_) => Err(mismatch("")),
    }
}

/// A storage backend shared with the one who chose it ([`RedbOptions::backend`]).
#[derive(Debug)]
pub(crate) struct ChosenBackend(Arc<dyn redb::StorageBackend>);

impl redb::StorageBackend for ChosenBackend {
    fn len(&self) -> std::io::Result<u64> {
        self.0.len()
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
        self.0.read(offset, out)
    }
    fn set_len(&self, len: u64) -> std::io::Result<()> {
        self.0.set_len(len)
    }
    fn sync_data(&self) -> std::io::Result<()> {
        self.0.sync_data()
    }
    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.0.write(offset, data)
    }
    fn close(&self) -> std::io::Result<()> {
        self.0.close()
    }
    fn try_lock_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> std::result::Result<bool, redb::BackendError> {
        self.0.try_lock_range(start, end)
    }
    fn try_lock_shared_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> std::result::Result<bool, redb::BackendError> {
        self.0.try_lock_shared_range(start, end)
    }
    fn lock_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> std::result::Result<(), redb::BackendError> {
        self.0.lock_range(start, end)
    }
    fn lock_shared_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> std::result::Result<(), redb::BackendError> {
        self.0.lock_shared_range(start, end)
    }
    fn unlock_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> std::result::Result<(), redb::BackendError> {
        self.0.unlock_range(start, end)
    }
    fn query_lock_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> std::result::Result<bool, redb::BackendError> {
        self.0.query_lock_range(start, end)
    }
}

/// Opens (creating if needed) the database under the guard and writes the schema
/// token into a fresh one, creating every table.
pub(crate) fn open_database(
    path: &Path,
    backend: Option<Arc<dyn redb::StorageBackend>>,
) -> Result<Database> {
    let opened = match backend {
        Some(backend) => redb::Builder::new().create_with_backend(ChosenBackend(backend)),
        None => {
            guard(path)?;
            redb::Builder::new().create(path)
        }
    };
    let database = opened.map_err(|e| match e {
        DatabaseError::DatabaseAlreadyOpen => locked(path),
        other => db(other),
    })?;
    let txn = database.begin_write().map_err(db)?;
    let work = WorkCounter::default();
    {
        let mut t = Tables::open(&txn, &work)?;
        let found = redb::ReadableTable::get(&t.meta, TOKEN_KEY)
            .map_err(db)?
            .map(|v| String::from_utf8_lossy(v.value()).into_owned());
        match found {
            Some(tok) if tok == SCHEMA_TOKEN => {}
            Some(tok) => return Err(mismatch(tok)),
            None => {
                t.meta
                    .insert(TOKEN_KEY, SCHEMA_TOKEN.as_bytes())
                    .map_err(db)?;
            }
        }
    }
    txn.commit().map_err(db)?;
    Ok(database)
}

/// Rewrites the schema token of the closed database at `path` (tests of 10.2).
pub fn set_schema_token(path: &Path, token: &str) -> Result<()> {
    let database = Database::open(path).map_err(|e| match e {
        DatabaseError::DatabaseAlreadyOpen => locked(path),
        e => db(e),
    })?;
    let txn = database.begin_write().map_err(db)?;
    {
        let mut meta = txn.open_table(META).map_err(db)?;
        meta.insert(TOKEN_KEY, token.as_bytes()).map_err(db)?;
    }
    txn.commit().map_err(db)?;
    Ok(())
}

/// The consistency check of the closed database at `path`: "ok" when every index entry
/// matches its row and every row has its entries, else the first disagreement.
pub fn check_file(path: &Path) -> Result<String> {
    let database = Database::open(path).map_err(|e| match e {
        DatabaseError::DatabaseAlreadyOpen => locked(path),
        e => db(e),
    })?;
    let txn = database.begin_write().map_err(db)?;
    let work = WorkCounter::default();
    let verdict = Tables::open(&txn, &work)?.check()?;
    txn.abort().map_err(db)?;
    Ok(verdict)
}

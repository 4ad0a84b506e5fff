//! The multi-process guard (10.1): an OS advisory lock on `<canonical db path>.lock`.
//!
//! The lock is keyed on the canonical path, so `./mq.db`, an absolute spelling and a
//! symlink all collide. `flock`-style locks belong to the open file description, so a
//! second open in the same process collides too.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

use mqlite_engine_core::{Error, Result};

/// The held lock; dropping it releases the file.
#[derive(Debug)]
pub(crate) struct FileLock {
    _file: File,
}

/// How many dangling symlinks in a row are followed by hand (Linux's own limit).
const MAX_LINKS: usize = 40;

/// The canonical path of a database file that may not exist yet: its directory is
/// resolved (symlinks included) and, if the file exists, the file itself too.
pub(crate) fn canonical_db_path(path: &Path) -> Result<PathBuf> {
    let mut path = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        if let Ok(p) = std::fs::canonicalize(&path) {
            return Ok(p);
        }
        // A symlink to a file not created yet names its target, where SQLite will create
        // the database: canonicalize cannot follow it, so follow it by hand. Keying the
        // lock on the link's own name would let a writer opening the target get in too.
        match std::fs::read_link(&path) {
            Ok(target) => {
                path = match path.parent() {
                    Some(dir) => dir.join(target),
                    None => target,
                }
            }
            Err(_) => break,
        }
    }
    let path = path.as_path();
    let name = path
        .file_name()
        .ok_or_else(|| Error::invalid(format!("{} is not a file path", path.display())))?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let dir = std::fs::canonicalize(&parent).map_err(|e| {
        Error::invalid(format!(
            "the directory of {} is not usable: {e}",
            path.display()
        ))
    })?;
    Ok(dir.join(name))
}

/// Takes the advisory lock for the database at `canonical`, or fails fast with DbLocked.
pub(crate) fn lock_db(canonical: &Path) -> Result<FileLock> {
    let mut lock_path = canonical.as_os_str().to_owned();
    lock_path.push(".lock");
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&lock_path)
        .map_err(|e| Error::backend("sqlite", e))?;
    match file.try_lock() {
        Ok(()) => Ok(FileLock { _file: file }),
        Err(TryLockError::WouldBlock) => Err(Error::DbLocked {
            path: canonical.display().to_string(),
        }),
        Err(TryLockError::Error(e)) => Err(Error::backend("sqlite", e)),
    }
}

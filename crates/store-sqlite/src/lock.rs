//! The multi-process guard (10.1): an OS advisory lock on `<canonical db path>.lock`.
//!
//! The lock is keyed on the canonical path, so `./mq.db`, an absolute spelling and a
//! symlink all collide. Two guards make one:
//!
//! - across processes, a POSIX record lock (`fcntl(F_SETLK)`) on the sidecar. It belongs
//!   to the process, so a child forked while a store closes never holds it: an
//!   `flock`-style lock, which belongs to the open file description, stays held by every
//!   child between its fork and its exec, and an immediate reopen then sees a spurious
//!   `DbLocked`;
//! - within the process, where POSIX locks never conflict, a registry of held paths.
//!
//! POSIX locks are released when the process closes *any* descriptor of the file, so the
//! sidecar is opened only by the holder: the registry turns every other in-process open
//! away before it touches the file, and the holder closes its descriptor before it
//! leaves the registry.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use mqlite_engine_core::{Error, Result};

/// The canonical paths this process holds.
static HELD: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);

fn held() -> MutexGuard<'static, Option<HashSet<PathBuf>>> {
    HELD.lock().unwrap_or_else(|e| e.into_inner())
}

/// The held lock; dropping it releases the file, then the path.
#[derive(Debug)]
pub(crate) struct FileLock {
    file: Option<File>,
    path: PathBuf,
}

impl Drop for FileLock {
    fn drop(&mut self) {
        // Closing the descriptor releases the process's record lock; only then may
        // another open in this process take the path (and open the sidecar).
        drop(self.file.take());
        if let Some(set) = held().as_mut() {
            set.remove(&self.path);
        }
    }
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
    let locked = || Error::DbLocked {
        path: canonical.display().to_string(),
    };
    if !held()
        .get_or_insert_with(HashSet::new)
        .insert(canonical.to_path_buf())
    {
        return Err(locked());
    }
    // From here the path is ours in this process; FileLock's drop gives it back.
    let mut guard = FileLock {
        file: None,
        path: canonical.to_path_buf(),
    };
    let mut lock_path = canonical.as_os_str().to_owned();
    lock_path.push(".lock");
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&lock_path)
        .map_err(|e| Error::backend("sqlite", e))?;
    match try_lock_exclusive(&file) {
        Ok(true) => {
            guard.file = Some(file);
            Ok(guard)
        }
        Ok(false) => Err(locked()),
        Err(e) => Err(Error::backend("sqlite", e)),
    }
}

/// A non-blocking exclusive process lock on the whole file: Ok(false) when another
/// process holds it.
#[cfg(unix)]
fn try_lock_exclusive(file: &File) -> std::io::Result<bool> {
    use rustix::fs::{FlockOperation, fcntl_lock};
    match fcntl_lock(file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(true),
        Err(e) if e == rustix::io::Errno::AGAIN || e == rustix::io::Errno::ACCESS => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Elsewhere, the standard library's file lock.
#[cfg(not(unix))]
fn try_lock_exclusive(file: &File) -> std::io::Result<bool> {
    match file.try_lock() {
        Ok(()) => Ok(true),
        Err(std::fs::TryLockError::WouldBlock) => Ok(false),
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
}

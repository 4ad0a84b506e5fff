//! `mqlite backup`: a consistent copy of a local SQLite database with `VACUUM INTO`,
//! safe while a broker writes it (the copy is one read transaction's snapshot).

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::time::Duration;

use mqlite::rusqlite::{Connection, OpenFlags};

use crate::args::{BackupArgs, Output};
use crate::{Failure, output};

/// How long to wait for a writer's lock (a checkpoint) before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// The existing local SQLite file `location` names (as the facade reads a location),
/// or why not: `what` says what the command needs, when the location names another
/// store.
pub(crate) fn existing_sqlite_file(location: &str, what: &str) -> Result<PathBuf, Failure> {
    let parsed = mqlite::Location::parse(location).map_err(|e| e.to_string())?;
    let path = match parsed.local_file() {
        Some(path) if parsed.store() == "sqlite" => path.to_path_buf(),
        _ => return Err(format!("{what}; {location:?} is not one").into()),
    };
    match fs::metadata(&path) {
        Ok(m) if m.is_file() => Ok(path),
        Ok(_) => Err(format!("{} is not a file", path.display()).into()),
        Err(e) => Err(format!("cannot read {}: {e}", path.display()).into()),
    }
}

/// Copies `db_path` to `dest_path`, which must not exist; prints the copy's size.
pub(crate) fn run(a: &BackupArgs, out: Output) -> Result<(), Failure> {
    let dest = a.dest_path.as_path();
    let src_text = a.db_path.display().to_string();
    let src = existing_sqlite_file(
        &src_text,
        "backup copies a local SQLite database file (a redb file is copied while no \
         process has it open; a libSQL database is backed up by its server)",
    )?;
    let src = src.as_path();
    let dest_text = dest.to_str().ok_or_else(|| {
        Failure::from(format!(
            "the destination {} is not a UTF-8 path",
            dest.display()
        ))
    })?;
    match fs::symlink_metadata(dest) {
        Ok(_) => {
            return Err(format!(
                "{} already exists; backup does not overwrite",
                dest.display()
            )
            .into());
        }
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => return Err(format!("cannot check {}: {e}", dest.display()).into()),
    }
    // Written under a temporary name beside the destination, then put in place: a copy
    // that fails midway (a full disk) leaves nothing behind, not even a journal that
    // SQLite would roll into a database later put at the destination's path.
    let temp = temporary_beside(dest);
    let temp_text = temp.to_str().unwrap_or(dest_text).to_owned();
    if let Err(e) = copy(src, &temp_text) {
        remove_with_sidecars(&temp);
        return Err(format!("cannot back up {}: {e}", src.display()).into());
    }
    if let Err(e) = put_in_place(&temp, dest) {
        remove_with_sidecars(&temp);
        return Err(e);
    }
    let size_bytes = fs::metadata(dest)
        .map_err(|e| Failure::from(format!("cannot read {}: {e}", dest.display())))?
        .len();
    match out {
        Output::Json => output::json(&serde_json::json!({
            "source": src_text,
            "destination": dest_text,
            "size_bytes": size_bytes,
        })),
        Output::Table => output::line(&format!(
            "backed up {src_text} to {dest_text} ({size_bytes} bytes)"
        )),
    }
}

fn copy(src: &Path, dest: &str) -> Result<(), mqlite::rusqlite::Error> {
    let conn = Connection::open_with_flags(
        src,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.execute("VACUUM INTO ?1", [dest])?;
    Ok(())
}

/// A name in `dest`'s directory that no other backup uses.
fn temporary_beside(dest: &Path) -> PathBuf {
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let nonce = mqlite::access::random_hex(8);
    dest.with_file_name(format!(".{name}.backup-{nonce}"))
}

/// Moves the finished copy to `dest` without overwriting anything there: a hard link
/// (which fails if `dest` appeared meanwhile) then the temporary name's removal; where
/// the filesystem has no hard links, a rename after a last check.
fn put_in_place(temp: &Path, dest: &Path) -> Result<(), Failure> {
    let exists = || {
        Failure::from(format!(
            "{} already exists; backup does not overwrite",
            dest.display()
        ))
    };
    match fs::hard_link(temp, dest) {
        Ok(()) => {
            let _ = fs::remove_file(temp);
            Ok(())
        }
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Err(exists()),
        Err(_) => {
            if fs::symlink_metadata(dest).is_ok() {
                return Err(exists());
            }
            fs::rename(temp, dest)
                .map_err(|e| format!("cannot move the copy to {}: {e}", dest.display()).into())
        }
    }
}

/// Removes a database file and the journal, WAL and shared-memory files beside it.
fn remove_with_sidecars(db: &Path) {
    let _ = fs::remove_file(db);
    for suffix in ["-journal", "-wal", "-shm"] {
        let mut side = db.as_os_str().to_owned();
        side.push(suffix);
        let _ = fs::remove_file(PathBuf::from(side));
    }
}

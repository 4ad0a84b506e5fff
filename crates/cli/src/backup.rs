//! `mqlite backup`: a consistent copy of a local SQLite database with `VACUUM INTO`,
//! safe while a broker writes it (the copy is one read transaction's snapshot).

use std::fs;
use std::io::ErrorKind;
use std::path::Path;
use std::time::Duration;

use mqlite::rusqlite::{Connection, OpenFlags};

use crate::args::{BackupArgs, Output};
use crate::{Failure, output};

/// How long to wait for a writer's lock (a checkpoint) before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Copies `db_path` to `dest_path`, which must not exist; prints the copy's size.
pub(crate) fn run(a: &BackupArgs, out: Output) -> Result<(), Failure> {
    let src = a.db_path.as_path();
    let dest = a.dest_path.as_path();
    let src_text = src.display().to_string();
    if src_text == ":memory:" || src_text.starts_with("redb:") {
        return Err(
            format!("backup copies a local SQLite database file; {src_text:?} is not one").into(),
        );
    }
    match fs::metadata(src) {
        Ok(m) if m.is_file() => {}
        Ok(_) => return Err(format!("{} is not a file", src.display()).into()),
        Err(e) => return Err(format!("cannot read {}: {e}", src.display()).into()),
    }
    let dest_text = dest.to_str().ok_or_else(|| {
        Failure::from(format!(
            "the destination {} is not a UTF-8 path",
            dest.display()
        ))
    })?;
    // Claimed by creating it empty (VACUUM INTO accepts an empty file): refuses an
    // existing one without a race, and lets a failed copy be removed safely.
    match fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(dest)
    {
        Ok(_) => {}
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {
            return Err(format!(
                "{} already exists; backup does not overwrite",
                dest.display()
            )
            .into());
        }
        Err(e) => return Err(format!("cannot create {}: {e}", dest.display()).into()),
    }
    if let Err(e) = copy(src, dest_text) {
        let _ = fs::remove_file(dest);
        return Err(format!("cannot back up {}: {e}", src.display()).into());
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

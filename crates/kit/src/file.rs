//! The file a local store opened, and whether its path still names it: a commit of a
//! local store checks it first (device and inode), so that no write is acknowledged
//! into a database file that was deleted or replaced under the running store (it would
//! be lost at the next open).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use mqlite_contract::error::{Error, Result};

/// The database file as opened (nothing for a store without a file).
#[derive(Clone, Debug)]
pub struct FileIdentity(Option<Arc<(PathBuf, u64, u64)>>);

impl FileIdentity {
    /// No file (`:memory:`, an in-memory backend): every check passes.
    pub fn none() -> Self {
        FileIdentity(None)
    }

    /// The file at `path` now (None: no file); `backend` names the store in an error.
    pub fn of(path: Option<PathBuf>, backend: &'static str) -> Result<Self> {
        let Some(path) = path else {
            return Ok(FileIdentity(None));
        };
        let (dev, ino) = identity(&path).map_err(|e| Error::backend(backend, e))?;
        Ok(FileIdentity(Some(Arc::new((path, dev, ino)))))
    }

    /// The path as errors name it.
    pub fn location(&self) -> String {
        self.0
            .as_ref()
            .map_or_else(|| ":memory:".to_owned(), |f| f.0.display().to_string())
    }

    /// `StoreGone` if the path no longer names the file that was opened.
    pub fn check(&self) -> Result<()> {
        let Some(file) = &self.0 else { return Ok(()) };
        let (path, dev, ino) = &**file;
        let detail = match identity(path) {
            Ok((d, i)) if (d, i) == (*dev, *ino) => return Ok(()),
            Ok(_) => "another file is at its path now".to_owned(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                "its path names nothing now".to_owned()
            }
            Err(e) => format!("its path cannot be read: {e}"),
        };
        Err(Error::StoreGone {
            location: path.display().to_string(),
            detail,
        })
    }
}

#[cfg(unix)]
fn identity(path: &Path) -> std::io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path)?;
    Ok((m.dev(), m.ino()))
}

#[cfg(not(unix))]
fn identity(path: &Path) -> std::io::Result<(u64, u64)> {
    // No inode to compare: only a deletion is noticed.
    std::fs::metadata(path).map(|_| (0, 0))
}

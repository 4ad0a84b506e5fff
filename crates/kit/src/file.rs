//! The file a local store opened, and whether its path still names it: a commit of a
//! local store checks it first (device and inode), so that no write is acknowledged
//! into a database file that was deleted or replaced under the running store (it would
//! be lost at the next open).
//!
//! On Linux the check asks the kernel first whether anything happened to the file or
//! its directory since the last check (an inotify watch, read without blocking): a
//! commit then costs one `read` that finds nothing, where looking the path up again
//! (`statx`) cost a single send about 3 µs of its 40. Anything at all (a deletion, a
//! rename over it or of it, a change of its links or mode, a lost watch) makes the
//! check look the path up, as it always does where no watch could be set up; a check
//! that finds the path still names the file trusts the watch again.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use mqlite_contract::error::{Error, Result};

/// The database file as opened (nothing for a store without a file).
#[derive(Clone, Debug)]
pub struct FileIdentity(Option<Arc<Opened>>);

#[derive(Debug)]
struct Opened {
    path: PathBuf,
    dev: u64,
    ino: u64,
    /// What tells the check that nothing happened (None: it looks every time).
    watch: Option<watch::Watch>,
}

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
        let watch = watch::Watch::new(&path, (dev, ino));
        Ok(FileIdentity(Some(Arc::new(Opened {
            path,
            dev,
            ino,
            watch,
        }))))
    }

    /// The path as errors name it.
    pub fn location(&self) -> String {
        self.0
            .as_ref()
            .map_or_else(|| ":memory:".to_owned(), |f| f.path.display().to_string())
    }

    /// Whether the check asks the kernel's watch before it looks the path up (false:
    /// it looks every time, as where no watch could be set up).
    pub fn watched(&self) -> bool {
        self.0.as_ref().is_some_and(|f| f.watch.is_some())
    }

    /// `StoreGone` if the path no longer names the file that was opened.
    pub fn check(&self) -> Result<()> {
        let Some(file) = &self.0 else { return Ok(()) };
        let Some(watch) = &file.watch else {
            return file.look();
        };
        let mut suspect = watch.suspect();
        if !*suspect {
            return Ok(());
        }
        let looked = file.look();
        // Trusted again only once the path is seen to name the file.
        *suspect = looked.is_err();
        looked
    }
}

impl Opened {
    /// Looks the path up and compares what it names with the file opened.
    fn look(&self) -> Result<()> {
        let detail = match identity(&self.path) {
            Ok(now) if now == (self.dev, self.ino) => return Ok(()),
            Ok(_) => "another file is at its path now".to_owned(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                "its path names nothing now".to_owned()
            }
            Err(e) => format!("its path cannot be read: {e}"),
        };
        Err(Error::StoreGone {
            location: self.path.display().to_string(),
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

#[cfg(target_os = "linux")]
mod watch {
    use std::os::fd::OwnedFd;
    use std::path::Path;
    use std::sync::{Mutex, MutexGuard};

    use rustix::fs::inotify::{self, CreateFlags, WatchFlags};
    use rustix::io::Errno;

    /// An inotify instance watching the file and its directory. Its events are only a
    /// sign that something happened: the check then looks the path up.
    #[derive(Debug)]
    pub(super) struct Watch {
        fd: OwnedFd,
        /// Something happened since the path was last seen to name the file. Held while
        /// the events are read and the path looked up, so that a check never passes on
        /// events another check read and has not judged yet.
        suspect: Mutex<bool>,
    }

    impl Watch {
        /// A watch of the file at `path`, which is `opened` (device, inode). None where
        /// the kernel will not watch (no inotify, the per-user limit of instances or
        /// watches reached), or where `path` is a symbolic link (a watch would see the
        /// link or the file it names, not both): the check then looks every time.
        pub(super) fn new(path: &Path, opened: (u64, u64)) -> Option<Watch> {
            // The path names the file itself, before the watch is set and after: a watch
            // set after the file there changed would watch another file.
            let names_it = || {
                std::fs::symlink_metadata(path).is_ok_and(|m| {
                    use std::os::unix::fs::MetadataExt;
                    !m.file_type().is_symlink() && (m.dev(), m.ino()) == opened
                })
            };
            if !names_it() {
                return None;
            }
            let fd = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC).ok()?;
            // The file: deleted or renamed over (its links change), moved, changed mode.
            let on_file = WatchFlags::ATTRIB | WatchFlags::DELETE_SELF | WatchFlags::MOVE_SELF;
            inotify::add_watch(&fd, path, on_file | WatchFlags::DONT_FOLLOW).ok()?;
            // Its directory, moved or deleted (a file deleted with it is seen above).
            let dir = match path.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
            let on_dir = WatchFlags::DELETE_SELF | WatchFlags::MOVE_SELF;
            inotify::add_watch(&fd, dir, on_dir | WatchFlags::ONLYDIR).ok()?;
            if !names_it() {
                return None;
            }
            Some(Watch {
                fd,
                suspect: Mutex::new(false),
            })
        }

        /// Reads every event waiting, without blocking: the flag, set if any was read
        /// (or the watch cannot be read), held for the caller to judge.
        pub(super) fn suspect(&self) -> MutexGuard<'_, bool> {
            let mut suspect = self.suspect.lock().unwrap_or_else(|e| e.into_inner());
            // Room for an event with the longest name (none of these carries one).
            let mut buf = [0u8; 1024];
            loop {
                match rustix::io::read(&self.fd, &mut buf[..]) {
                    Ok(0) => break,
                    Ok(_) => *suspect = true,
                    Err(Errno::AGAIN) => break,
                    Err(Errno::INTR) => {}
                    Err(_) => {
                        *suspect = true;
                        break;
                    }
                }
            }
            suspect
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod watch {
    use std::path::Path;
    use std::sync::{Mutex, MutexGuard};

    /// No watch here: the check looks the path up every time.
    #[derive(Debug)]
    pub(super) struct Watch(Mutex<bool>);

    impl Watch {
        pub(super) fn new(_path: &Path, _opened: (u64, u64)) -> Option<Watch> {
            None
        }

        pub(super) fn suspect(&self) -> MutexGuard<'_, bool> {
            self.0.lock().unwrap_or_else(|e| e.into_inner())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file, held open as a store holds its database (so that its inode cannot be
    /// given to a file made after it is deleted), and its identity.
    fn opened(dir: &Path) -> (PathBuf, FileIdentity, std::fs::File) {
        let path = dir.join("db");
        std::fs::write(&path, b"x").unwrap();
        let held = std::fs::File::open(&path).unwrap();
        let id = FileIdentity::of(Some(path.clone()), "test").unwrap();
        (path, id, held)
    }

    fn gone(id: &FileIdentity) -> String {
        match id.check() {
            Err(Error::StoreGone { detail, .. }) => detail,
            other => panic!("expected StoreGone, got {other:?}"),
        }
    }

    #[test]
    fn a_file_left_alone_passes_and_is_watched_on_linux() {
        let dir = tempfile::tempdir().unwrap();
        let (path, id, _held) = opened(dir.path());
        for _ in 0..3 {
            id.check().unwrap();
        }
        // Writes to the file are no sign of anything.
        std::fs::write(&path, b"more").unwrap();
        id.check().unwrap();
        assert_eq!(id.watched(), cfg!(target_os = "linux"));
    }

    #[test]
    fn a_deleted_file_fails_every_check_after() {
        let dir = tempfile::tempdir().unwrap();
        let (path, id, _held) = opened(dir.path());
        id.check().unwrap();
        std::fs::remove_file(&path).unwrap();
        assert!(gone(&id).contains("names nothing"));
        assert!(gone(&id).contains("names nothing"));
        std::fs::write(&path, b"someone else's").unwrap();
        assert!(gone(&id).contains("another file"));
        assert!(gone(&id).contains("another file"));
    }

    #[test]
    fn a_file_renamed_over_it_fails_the_check() {
        let dir = tempfile::tempdir().unwrap();
        let (path, id, _held) = opened(dir.path());
        id.check().unwrap();
        let other = dir.path().join("other");
        std::fs::write(&other, b"y").unwrap();
        std::fs::rename(&other, &path).unwrap();
        assert!(gone(&id).contains("another file"));
        assert!(gone(&id).contains("another file"));
    }

    #[test]
    fn a_file_moved_away_fails_until_it_is_back() {
        let dir = tempfile::tempdir().unwrap();
        let (path, id, _held) = opened(dir.path());
        let away = dir.path().join("away");
        std::fs::rename(&path, &away).unwrap();
        assert!(gone(&id).contains("names nothing"));
        std::fs::rename(&away, &path).unwrap();
        id.check().unwrap();
        id.check().unwrap();
    }

    #[test]
    fn a_directory_moved_away_fails_the_check() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("d");
        std::fs::create_dir(&dir).unwrap();
        let (_, id, _held) = opened(&dir);
        id.check().unwrap();
        std::fs::rename(&dir, root.path().join("e")).unwrap();
        assert!(gone(&id).contains("names nothing"));
    }

    #[cfg(unix)]
    #[test]
    fn a_path_through_a_symbolic_link_is_looked_up_every_time() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::write(&real, b"x").unwrap();
        let _held = std::fs::File::open(&real).unwrap();
        let link = dir.path().join("db");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let id = FileIdentity::of(Some(link), "test").unwrap();
        assert!(
            !id.watched(),
            "a watch would see the link or its file, not both"
        );
        id.check().unwrap();
        std::fs::remove_file(&real).unwrap();
        assert!(gone(&id).contains("names nothing"));
    }

    #[test]
    fn a_change_that_leaves_the_file_in_place_passes_once_looked_at() {
        let dir = tempfile::tempdir().unwrap();
        let (path, id, _held) = opened(dir.path());
        // A second link changes the file's links: a sign, and the path still names it.
        std::fs::hard_link(&path, dir.path().join("link")).unwrap();
        id.check().unwrap();
        id.check().unwrap();
        // And a deletion after it is still seen.
        std::fs::remove_file(&path).unwrap();
        assert!(gone(&id).contains("names nothing"));
    }
}

//! The one-writer guard (10.1): a second open of the same database file, under any name,
//! from this process or another, fails fast with `DbLocked`.
//!
//! "The same database" is the same file, not the same path: a symlink, another spelling
//! of the path and a hard link all name it. A hard link matters most, because SQLite
//! names its `-wal` and `-shm` files after the name it was given: two writers through
//! two links would keep two write-ahead logs of one file. So the database file is
//! identified by its `(st_dev, st_ino)`; a file that does not exist yet is first created
//! empty (SQLite takes an empty file as a new database) so that it has an inode. It is
//! created with `mknodat`, without a descriptor: the process's POSIX locks on a file are
//! dropped when it closes *any* descriptor of it, SQLite's own locks included. Symlinks
//! to a file not created yet are followed by hand first ([`canonical_db_path`]), so the
//! file is created where SQLite will look for it.
//!
//! Three guards make one; all are taken before SQLite reads the file:
//!
//! - within the process, a registry of held databases keyed by `(st_dev, st_ino)`, which
//!   also holds the path of the `.lock` sidecar below. POSIX locks never conflict within
//!   one process, and each sidecar must be opened only by its holder (see above), so the
//!   registry turns every other open of the file, or of a sidecar in use, away before it
//!   touches either;
//! - across processes, by name: a POSIX record lock (`fcntl(F_SETLK)`, whole file) on
//!   `<canonical path>.lock` beside the database. It works for every process that can
//!   see the database's directory (other containers, other `/tmp` namespaces) and catches
//!   every spelling that resolves to the same canonical path;
//! - across processes, by file: the same kind of lock on `/tmp/mqlite-locks/
//!   dev<st_dev>-ino<st_ino>.lock`, a rendezvous every link to the file can find, since
//!   the name derives from the file rather than from a path to it. This one catches hard
//!   links, wherever they are.
//!
//! Record locks, not `flock`: a record lock belongs to the process, so a child forked
//! while a store closes never holds it. An `flock`-style (or OFD) lock belongs to the
//! open file description, which every child shares between its fork and its exec, and
//! an immediate reopen then sees a spurious `DbLocked`. The price of record locks is the
//! close-any-descriptor rule, which is why nothing in the process but the holder opens a
//! sidecar, and why the database file itself is never the locked file (SQLite opens and
//! closes descriptors of it; its own locks are byte ranges that other SQLite clients
//! must still be able to take).
//!
//! An inode number is only unique while the file lives, so the lock pins it (Linux): it
//! holds an `O_PATH` descriptor of the database until its keys are given back (see
//! [`identify`]). Otherwise a database deleted while open, whose inode dies with the
//! connection, would leave its number held for a moment, and a new file given that
//! number would be refused.
//!
//! The rendezvous directory is created mode 1777 (like `/tmp`) so that every user meets
//! there; files in it are created mode 0666 and never opened through a symlink. The
//! holder removes its file before it releases the lock, and an opener that locked a file
//! checks that the name still leads to it, retrying otherwise: no file is left behind by
//! a clean close, and no two processes can hold locks on two different files of one
//! name. A process that ends without closing its store (a crash, or a store dropped and
//! not closed before exit) leaves an empty, unlocked file, which the next opener of that
//! inode reuses.
//!
//! Limits:
//!
//! - Processes that do not share this machine's `/tmp` (a systemd `PrivateTmp` service,
//!   a container sharing only the database's volume, another host over a network file
//!   system) do not meet at the rendezvous: between them a second open by the same name
//!   is refused, one through a hard link is not.
//! - If the rendezvous cannot be used (no writable `/tmp`, or `/tmp/mqlite-locks` is not
//!   a directory we may create files in), a database with one link opens under the two
//!   other guards alone; one with several links is
//!   refused with a backend error rather than risk a second writer through another link.
//!   The link count is read once, at open: a link made at that very moment is not seen.
//! - Any local user who can write to `/tmp` can hold or delete a rendezvous file: the
//!   first gives spurious `DbLocked`s, the second (like a `/tmp` cleaner deleting a held
//!   file) lets a second writer in through a hard link. The rendezvous trusts them.
//! - The file is identified by a `stat` just before SQLite opens the path: a file put in
//!   its place (a rename over it) in between is not noticed.
//! - Unix other than Linux has no `O_PATH`, and any other descriptor of the database
//!   would be unsafe to close, so nothing pins the inode: when a database is deleted
//!   while open, a new file may be refused with a spurious `DbLocked` in the instant
//!   between the old store's connection closing and its lock being released. The Apple
//!   platforms have no unprivileged `mknodat` either: a missing database is created with
//!   `O_EXCL` and its descriptor closed at once, which would drop another in-process
//!   opener's SQLite locks on it only if that opener got through in that very instant.
//! - Off Unix there is no inode to read: the registry and the sidecar work by canonical
//!   path only, and hard links are not recognised.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use mqlite_contract::{Error, LockHolder, Result};

/// What the registry holds for one open database.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    /// The database file, by `(st_dev, st_ino)`.
    #[cfg_attr(not(unix), allow(dead_code))]
    File(u64, u64),
    /// The canonical path the `.lock` sidecar is named after.
    Sidecar(PathBuf),
}

/// The keys this process holds, each with its holder's "releasing" flag: set once the
/// store that holds it was dropped or closed, so that its release is on its way.
static HELD: Mutex<Option<HashMap<Key, Arc<AtomicBool>>>> = Mutex::new(None);

/// Signalled whenever keys leave [`HELD`].
static RELEASED: Condvar = Condvar::new();

/// How long an open waits for a dropped store of this process to let its file go
/// (its writer finishes the queued work, closes the connection, then releases).
const RELEASE_WAIT: Duration = Duration::from_secs(10);

fn held() -> MutexGuard<'static, Option<HashMap<Key, Arc<AtomicBool>>>> {
    HELD.lock().unwrap_or_else(|e| e.into_inner())
}

/// The held lock; dropping it releases the files, then the keys, then the inode.
#[derive(Debug)]
pub(crate) struct FileLock {
    sidecar: Option<File>,
    #[cfg(unix)]
    rendezvous: Option<rendezvous::Held>,
    keys: Vec<Key>,
    /// An `O_PATH` descriptor of the database file (Linux), which keeps its inode
    /// number from being reused while the key is held; see [`identify`].
    pin: Option<File>,
}

impl Drop for FileLock {
    fn drop(&mut self) {
        // Closing the descriptors releases the process's record locks; only then may
        // another open in this process take the keys (and open the files).
        #[cfg(unix)]
        drop(self.rendezvous.take());
        drop(self.sidecar.take());
        if let Some(set) = held().as_mut() {
            for key in &self.keys {
                set.remove(key);
            }
        }
        RELEASED.notify_all();
        drop(self.pin.take());
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
    if path.as_os_str().is_empty() {
        return Err(Error::invalid(
            "the database path is empty: give a file path (./app.db), or :memory: for a \
             private in-memory database",
        ));
    }
    let name = path.file_name().ok_or_else(|| {
        Error::invalid(format!(
            "{} names no file: give a file path such as ./app.db",
            path.display()
        ))
    })?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let dir = std::fs::canonicalize(&parent).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::invalid(format!(
            "the directory {} does not exist: create it first (mkdir -p {}); mqlite \
             creates the database file, not its directory",
            parent.display(),
            parent.display()
        )),
        _ => Error::invalid(format!(
            "the directory of {} is not usable: {e}",
            path.display()
        )),
    })?;
    Ok(dir.join(name))
}

/// Takes the one-writer lock for the database at `canonical` (creating the file empty
/// if it does not exist), or fails fast with DbLocked. `releasing` is the holder's flag
/// (see [`HELD`]). A store of this process that was dropped and is still letting go is
/// waited for (at most [`RELEASE_WAIT`]): reopening after a drop just works. This blocks
/// the calling thread, which is the new store's writer thread, never the executor.
pub(crate) fn lock_db(canonical: &Path, releasing: Arc<AtomicBool>) -> Result<FileLock> {
    #[cfg(unix)]
    let rendezvous_dir = Path::new(rendezvous::DIR);
    #[cfg(not(unix))]
    let rendezvous_dir = Path::new("");
    lock_db_at(canonical, rendezvous_dir, releasing)
}

/// [`lock_db`] with the rendezvous in `rendezvous_dir` (unused off Unix).
fn lock_db_at(
    canonical: &Path,
    rendezvous_dir: &Path,
    releasing: Arc<AtomicBool>,
) -> Result<FileLock> {
    let locked = |holder| Error::DbLocked {
        path: canonical.display().to_string(),
        holder,
    };
    let backend = |e: std::io::Error| Error::backend("sqlite", e);

    #[cfg_attr(not(unix), allow(unused_mut))]
    let mut keys = vec![Key::Sidecar(canonical.to_path_buf())];
    #[cfg(unix)]
    let (meta, pin) = {
        use std::os::unix::fs::MetadataExt;
        create_if_missing(canonical).map_err(backend)?;
        let (meta, pin) = identify(canonical).map_err(backend)?;
        keys.push(Key::File(meta.dev(), meta.ino()));
        (meta, pin)
    };
    #[cfg(not(unix))]
    let (pin, _) = (None, rendezvous_dir);
    {
        let deadline = Instant::now() + RELEASE_WAIT;
        let mut held = held();
        loop {
            let set = held.get_or_insert_with(HashMap::new);
            let holders: Vec<&Arc<AtomicBool>> = keys.iter().filter_map(|k| set.get(k)).collect();
            if holders.is_empty() {
                set.extend(keys.iter().map(|k| (k.clone(), releasing.clone())));
                break;
            }
            let now = Instant::now();
            // A live holder: refuse at once. A dropped one: wait for it to let go.
            if !holders.iter().all(|h| h.load(Ordering::Acquire)) || now >= deadline {
                return Err(locked(LockHolder::ThisProcess));
            }
            held = RELEASED
                .wait_timeout(held, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
    // From here the keys are ours in this process; FileLock's drop gives them back.
    let mut guard = FileLock {
        sidecar: None,
        #[cfg(unix)]
        rendezvous: None,
        keys,
        pin,
    };

    let lock_path = crate::schema::sidecar(canonical, ".lock");
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&lock_path)
        .map_err(backend)?;
    if !try_lock_exclusive(&file).map_err(backend)? {
        return Err(locked(LockHolder::AnotherProcess));
    }
    guard.sidecar = Some(file);

    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match rendezvous::acquire(rendezvous_dir, meta.dev(), meta.ino()) {
            Ok(Some(held)) => guard.rendezvous = Some(held),
            Ok(None) => return Err(locked(LockHolder::AnotherProcess)),
            // No other name for the file: the sidecar guards it as well as ever.
            Err(_) if meta.nlink() <= 1 => {}
            Err(e) => {
                return Err(backend(std::io::Error::new(
                    e.kind(),
                    format!(
                        "{} has {} hard links and the lock directory {} is not usable \
                         ({e}): refusing it, since a writer through another link would \
                         not be seen",
                        canonical.display(),
                        meta.nlink(),
                        rendezvous_dir.display()
                    ),
                )));
            }
        }
    }
    Ok(guard)
}

/// Creates `path` as an empty regular file unless something is there already, without
/// opening a descriptor of it where the platform allows.
#[cfg(unix)]
fn create_if_missing(path: &Path) -> std::io::Result<()> {
    #[cfg(not(target_vendor = "apple"))]
    {
        use rustix::fs::{CWD, FileType, Mode, mknodat};
        match mknodat(
            CWD,
            path,
            FileType::RegularFile,
            Mode::from_bits_truncate(0o644),
            0,
        ) {
            Ok(()) => return Ok(()),
            Err(rustix::io::Errno::EXIST) => return Ok(()),
            // A file system that refuses mknod: create it the ordinary way below.
            Err(_) => {}
        }
    }
    // O_EXCL: when the file exists no descriptor is opened; when it does not, the new
    // file is unknown to everybody else but for an instant, and the descriptor is
    // closed at once (see the module's limits).
    match OpenOptions::new().write(true).create_new(true).open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// The database file's metadata, read through an `O_PATH` descriptor that is kept as
/// a pin on Linux.
///
/// The registry and the rendezvous key on the inode number, which the file system may
/// give to a new file as soon as the old one is gone. A database deleted while open
/// (a temporary directory removed before its store finished closing) loses its last
/// name, and SQLite's descriptor is its last reference: closing the connection frees the
/// inode while the key is still held, and a new file that gets the number would be
/// refused as if it were the same database. The pin keeps the inode until the key is
/// given back. An `O_PATH` descriptor is safe to hold and close: Linux does not drop
/// the process's POSIX locks when one is closed (they are not real opens of the file).
/// Elsewhere there is no such descriptor, and nothing pins the inode.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn identify(path: &Path) -> std::io::Result<(std::fs::Metadata, Option<File>)> {
    use rustix::fs::{Mode, OFlags};
    let pin = File::from(rustix::fs::open(
        path,
        OFlags::PATH | OFlags::CLOEXEC,
        Mode::empty(),
    )?);
    let meta = pin.metadata()?;
    Ok((meta, Some(pin)))
}

/// The database file's metadata; nothing pins its inode (see the Linux version).
#[cfg(all(unix, not(any(target_os = "linux", target_os = "android"))))]
fn identify(path: &Path) -> std::io::Result<(std::fs::Metadata, Option<File>)> {
    Ok((std::fs::metadata(path)?, None))
}

/// A non-blocking exclusive process lock on the whole file: Ok(false) when another
/// process holds it.
#[cfg(unix)]
fn try_lock_exclusive(file: impl std::os::fd::AsFd) -> std::io::Result<bool> {
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

/// The lock file named after the database's `(st_dev, st_ino)`.
#[cfg(unix)]
mod rendezvous {
    use std::io;
    use std::os::fd::OwnedFd;
    use std::path::Path;

    use rustix::fs::{AtFlags, FileType, Mode, OFlags, fchmod, fstat, mkdirat, openat, statat};

    /// Where every process on this machine looks.
    pub(super) const DIR: &str = "/tmp/mqlite-locks";

    /// How many times a lock file may vanish under an opener before it gives up.
    const ATTEMPTS: usize = 16;

    /// A held lock file; dropping it removes the file, then releases the lock.
    #[derive(Debug)]
    pub(super) struct Held {
        dir: OwnedFd,
        name: String,
        file: OwnedFd,
    }

    impl Drop for Held {
        fn drop(&mut self) {
            // Removed while still locked, so an opener that finds the name finds either
            // this file locked or a newer one; `acquire` retries when it locked a file
            // that lost its name. Only a file that is still ours is removed.
            if same_file(&self.dir, &self.name, &self.file).unwrap_or(false) {
                let _ = rustix::fs::unlinkat(&self.dir, &self.name, AtFlags::empty());
            }
            // `file` closes after this, releasing the lock.
        }
    }

    /// Locks the rendezvous file of `(dev, ino)` in `dir`: Ok(None) when another process
    /// holds it, Err when the rendezvous cannot be used.
    pub(super) fn acquire(dir: &Path, dev: u64, ino: u64) -> io::Result<Option<Held>> {
        let dir = open_dir(dir)?;
        let name = format!("dev{dev}-ino{ino}.lock");
        for _ in 0..ATTEMPTS {
            let file = open_file(&dir, &name)?;
            if !super::try_lock_exclusive(&file)? {
                return Ok(None);
            }
            // The holder before us may have removed the file between our open and our
            // lock: a lock on a file without the name guards nothing.
            if same_file(&dir, &name, &file)? {
                return Ok(Some(Held { dir, name, file }));
            }
        }
        Err(io::Error::other(format!(
            "the lock file {name} kept being replaced"
        )))
    }

    /// Opens (creating it mode 1777 if needed) the rendezvous directory, never through
    /// a symlink.
    fn open_dir(dir: &Path) -> io::Result<OwnedFd> {
        let created = match mkdirat(rustix::fs::CWD, dir, Mode::from_bits_truncate(0o1777)) {
            Ok(()) => true,
            Err(rustix::io::Errno::EXIST) => false,
            Err(e) => return Err(e.into()),
        };
        let fd = rustix::fs::open(
            dir,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        if created {
            // The umask took bits away; every user must be able to create files here.
            fchmod(&fd, Mode::from_bits_truncate(0o1777))?;
        }
        Ok(fd)
    }

    /// Opens the lock file read-write, creating it if it is missing; never through a
    /// symlink, and only a regular file.
    fn open_file(dir: &OwnedFd, name: &str) -> io::Result<OwnedFd> {
        let flags = OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
        for _ in 0..ATTEMPTS {
            // Without O_CREAT first: in a sticky world-writable directory Linux refuses
            // O_CREAT on another user's existing file (fs.protected_regular).
            let fd = match openat(dir, name, flags, Mode::empty()) {
                Ok(fd) => fd,
                Err(rustix::io::Errno::NOENT) => {
                    let mode = Mode::from_bits_truncate(0o666);
                    match openat(dir, name, flags | OFlags::CREATE | OFlags::EXCL, mode) {
                        Ok(fd) => {
                            // Every user must be able to lock it (a write lock needs a
                            // descriptor open for writing); the umask took bits away.
                            fchmod(&fd, mode)?;
                            fd
                        }
                        Err(rustix::io::Errno::EXIST) => continue,
                        Err(e) => return Err(e.into()),
                    }
                }
                Err(e) => return Err(e.into()),
            };
            if FileType::from_raw_mode(fstat(&fd)?.st_mode) != FileType::RegularFile {
                return Err(io::Error::other(format!("{name} is not a regular file")));
            }
            return Ok(fd);
        }
        Err(io::Error::other(format!(
            "the lock file {name} kept being replaced"
        )))
    }

    /// Whether `name` in `dir` still leads to `file`.
    fn same_file(dir: &OwnedFd, name: &str, file: &OwnedFd) -> io::Result<bool> {
        let open = fstat(file)?;
        match statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(named) => Ok(named.st_dev == open.st_dev && named.st_ino == open.st_ino),
            Err(rustix::io::Errno::NOENT) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// A holder's flag for a lock that stays live.
    fn live() -> Arc<AtomicBool> {
        Arc::new(AtomicBool::new(false))
    }

    fn hard_linked(dir: &Path) -> (PathBuf, PathBuf) {
        let path = dir.join("mq.db");
        std::fs::write(&path, b"").expect("db file");
        let link = dir.join("link.db");
        std::fs::hard_link(&path, &link).expect("hard link");
        (path, link)
    }

    /// The rendezvous file exists while held and is gone after a clean release.
    #[test]
    fn rendezvous_file_is_removed_on_release() {
        let dir = tempfile::tempdir().expect("temp dir");
        let rendezvous = dir.path().join("locks");
        let path = dir.path().join("mq.db");
        let lock = lock_db_at(&path, &rendezvous, live()).expect("lock");
        assert!(path.is_file(), "the database file was created empty");
        let files = || std::fs::read_dir(&rendezvous).expect("dir").count();
        assert_eq!(files(), 1);
        drop(lock);
        assert_eq!(files(), 0);
    }

    /// A hard link collides in the process, whichever name comes first.
    #[test]
    fn hard_link_collides_in_process() {
        let dir = tempfile::tempdir().expect("temp dir");
        let rendezvous = dir.path().join("locks");
        let (path, link) = hard_linked(dir.path());
        let lock = lock_db_at(&path, &rendezvous, live()).expect("lock");
        assert!(matches!(
            lock_db_at(&link, &rendezvous, live()),
            Err(Error::DbLocked { .. })
        ));
        drop(lock);
        let lock = lock_db_at(&link, &rendezvous, live()).expect("lock through the link");
        drop(lock);
    }

    /// Without a usable rendezvous, a singly linked database still opens; a hard-linked
    /// one is refused rather than guarded by name only.
    #[test]
    fn unusable_rendezvous_refuses_only_hard_linked_files() {
        let dir = tempfile::tempdir().expect("temp dir");
        let blocker = dir.path().join("not-a-dir");
        std::fs::write(&blocker, b"").expect("blocker");
        let rendezvous = blocker.join("locks");

        let single = dir.path().join("single.db");
        drop(lock_db_at(&single, &rendezvous, live()).expect("one link: the sidecar guards it"));

        let (path, link) = hard_linked(dir.path());
        match lock_db_at(&path, &rendezvous, live()) {
            Err(Error::Backend { .. }) => {}
            other => panic!("expected a backend error, got {other:?}"),
        }
        // The refusal gave the keys back.
        std::fs::remove_file(&link).expect("unlink");
        drop(lock_db_at(&path, &rendezvous, live()).expect("one link again"));
    }

    /// A symlink squatting the rendezvous directory's name is not followed.
    #[test]
    fn rendezvous_is_never_reached_through_a_symlink() {
        let dir = tempfile::tempdir().expect("temp dir");
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).expect("dir");
        let rendezvous = dir.path().join("locks");
        std::os::unix::fs::symlink(&elsewhere, &rendezvous).expect("symlink");
        let (path, _link) = hard_linked(dir.path());
        assert!(matches!(
            lock_db_at(&path, &rendezvous, live()),
            Err(Error::Backend { .. })
        ));
        assert_eq!(std::fs::read_dir(&elsewhere).expect("dir").count(), 0);
    }
}

//! A SQLite VFS over the platform's default one whose write-ahead log takes a commit's
//! writes as ONE write, and whose WAL-index locks are kept from one transaction to the
//! next ([`shm`]).
//!
//! SQLite appends a commit to the WAL frame by frame, and each frame in two writes: its
//! 24-byte header, then the page. A commit of two pages (a send: the table's leaf and an
//! index's) is four `pwrite` calls, each paying the kernel's whole buffered-write path
//! (locking the inode, stamping its times, dirtying the page cache). Gathered, the same
//! bytes go in one call: on the project machine 4.3 µs against 1.9 µs for two frames,
//! 12.7 µs against 3.9 µs for six (a C loop of the two patterns; docs/benchmark.md).
//!
//! What the VFS does, and why it is safe:
//!
//! - Only files SQLite opens as a WAL (`SQLITE_OPEN_WAL`) gather their writes. A main
//!   database file is wrapped for its WAL-index locks only ([`shm`]): every other method
//!   of it is the default VFS's own, called with the default VFS's file. Every other
//!   file (temporary files, journals) is the default VFS's own, with its own methods.
//! - A write to the WAL that continues the gathered bytes joins them; any other write
//!   first writes what is gathered. So the file receives the same bytes at the same
//!   offsets, in the same order, in fewer calls.
//! - The gathered bytes are written, and the write's result returned to SQLite, at the
//!   page of a commit frame (a frame whose header carries the database size, which only
//!   a commit frame does). SQLite makes a commit visible to readers (the WAL index's
//!   header) only after that write returned success, as it does with its own writes, so
//!   no reader, in this process or another, is ever pointed at frames not yet in the file;
//!   a full disk fails the commit's write as it did.
//! - Before anything else that touches the WAL (a read, a sync, its size, a truncation,
//!   a file control, closing it), the gathered bytes are written first; at most
//!   [`MAX_GATHERED`] bytes are ever held (a commit larger than that is written in
//!   pieces of about that size).
//! - A process killed with bytes gathered had not finished its commit: SQLite's recovery
//!   finds the WAL as it would after a kill in the middle of its own writes (a commit's
//!   frames are checksummed, and a commit without its commit frame is not one).
//!
//! This is the workspace's one crate with unsafe code: a VFS is a table of C callbacks.

use std::ffi::{CStr, CString, c_int, c_void};
use std::ptr;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use libsqlite3_sys as ffi;

pub mod shm;

/// The name the VFS is registered under ([`register`]); give it to
/// `rusqlite::Connection::open_with_flags_and_vfs`.
pub const NAME: &str = "mqlite-wal";

const NAME_C: &CStr = c"mqlite-wal";

/// The most bytes held, and so written in one call: SQLite's unix VFS writes at most
/// 128 KiB less one byte per call (it masks a larger length), and a page is at most
/// 64 KiB, so a write that would take the held bytes past this first writes them.
pub const MAX_GATHERED: usize = 0x1ffff;

/// The size of a WAL frame's header; bytes 4..8 of a commit frame's header hold the
/// database's size in pages, and are zero in every other frame's.
const FRAME_HEADER: c_int = 24;

/// The VFS this one wraps (the default one when it was registered).
static INNER: AtomicPtr<ffi::sqlite3_vfs> = AtomicPtr::new(ptr::null_mut());

/// Writes made to WAL files through this VFS, each one call of the wrapped VFS.
static WAL_WRITES: AtomicU64 = AtomicU64::new(0);

/// Registers the VFS under [`NAME`] (once; later calls return the first result). It
/// wraps the default VFS of the process at that moment, and does not become the default.
pub fn register() -> Result<(), c_int> {
    static DONE: OnceLock<c_int> = OnceLock::new();
    // SAFETY: registration runs once; `register_once` only reads SQLite's default VFS
    // and hands SQLite a VFS that lives for the rest of the process.
    let rc = *DONE.get_or_init(|| unsafe { register_once() });
    if rc == ffi::SQLITE_OK {
        Ok(())
    } else {
        Err(rc)
    }
}

/// How many writes WAL files opened through this VFS have made, in this process: one
/// per commit of up to [`MAX_GATHERED`] bytes, where SQLite alone makes two per frame.
pub fn wal_writes() -> u64 {
    WAL_WRITES.load(Ordering::Relaxed)
}

/// # Safety
///
/// Called once (from [`register`]).
unsafe fn register_once() -> c_int {
    // SAFETY: finding the default VFS initialises SQLite if needed; any thread may.
    let inner = unsafe { ffi::sqlite3_vfs_find(ptr::null()) };
    if inner.is_null() {
        return ffi::SQLITE_ERROR;
    }
    INNER.store(inner, Ordering::Release);
    // SAFETY: `inner` is a registered VFS, which SQLite never frees.
    let mut vfs: ffi::sqlite3_vfs = unsafe { *inner };
    // Room for a wrapped WAL file: ours, then the wrapped VFS's file after it.
    vfs.szOsFile = (size_of::<WalFile>() + vfs.szOsFile as usize) as c_int;
    vfs.pNext = ptr::null_mut();
    vfs.zName = NAME_C.as_ptr();
    vfs.xOpen = Some(open);
    // Every other method is the wrapped VFS's own: they read nothing of a VFS but what
    // the copy keeps (its `pAppData`, its path length).
    let vfs = Box::leak(Box::new(vfs));
    // SAFETY: `vfs` lives for the rest of the process, as SQLite requires.
    unsafe { ffi::sqlite3_vfs_register(vfs, 0) }
}

/// A file this VFS wraps: SQLite's file header with our methods, what we keep for it
/// (`T`), and the wrapped VFS's file right after this struct.
#[repr(C)]
struct Wrapped<T> {
    base: ffi::sqlite3_file,
    kept: *mut T,
}

/// A WAL file opened through this VFS: it keeps what is gathered.
type WalFile = Wrapped<Gathered>;

/// A main database file opened through this VFS: it keeps its WAL-index locks.
type DbFile = Wrapped<Db>;

// The wrapped file sits after ours at one offset whichever kind ours is.
const _: () = assert!(size_of::<DbFile>() == size_of::<WalFile>());

/// What a main database file keeps beside the wrapped VFS's file.
struct Db {
    /// The path of its `-shm` file, as SQLite's unix VFS names it.
    shm: CString,
    /// Who keeps its WAL-index locks.
    locks: DbLocks,
}

/// Who keeps a main database file's WAL-index locks.
enum DbLocks {
    /// The shared memory is not mapped yet (or no longer).
    Unmapped,
    /// This VFS's table ([`shm`]).
    Kept(shm::Locks),
    /// The wrapped VFS: this VFS's table could not open the `-shm` file.
    Wrapped,
}

/// The bytes held for one WAL file.
struct Gathered {
    /// The bytes, to be written at `start`.
    bytes: Vec<u8>,
    start: i64,
    /// The last write was a commit frame's header: its page completes the commit.
    commit_next: bool,
}

/// The wrapped VFS's file inside `file`'s allocation.
///
/// # Safety
///
/// `file` was opened by [`open`] as a WAL file or by [`open_db`].
unsafe fn inner_of(file: *mut ffi::sqlite3_file) -> *mut ffi::sqlite3_file {
    // SAFETY: the VFS's `szOsFile` leaves room for both, the wrapped file after ours
    // (whose size keeps 8-byte alignment).
    unsafe { file.cast::<u8>().add(size_of::<WalFile>()).cast() }
}

/// The wrapped file's methods.
///
/// # Safety
///
/// As [`inner_of`].
unsafe fn methods(inner: *mut ffi::sqlite3_file) -> &'static ffi::sqlite3_io_methods {
    // SAFETY: an open file's methods are set and live as long as its VFS.
    unsafe { &*(*inner).pMethods }
}

/// What `file` holds.
///
/// # Safety
///
/// As [`inner_of`], and the file is not closed.
unsafe fn gathered<'a>(file: *mut ffi::sqlite3_file) -> &'a mut Gathered {
    // SAFETY: set by `open`, freed only by `close`; SQLite calls one file's methods
    // from one thread at a time.
    unsafe { &mut *(*file.cast::<WalFile>()).kept }
}

unsafe extern "C" fn open(
    vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    let _ = vfs;
    let inner_vfs = INNER.load(Ordering::Acquire);
    // SAFETY: set before this VFS was registered; a registered VFS is never freed.
    let Some(inner_open) = (unsafe { (*inner_vfs).xOpen }) else {
        return ffi::SQLITE_ERROR;
    };
    let open = Open {
        inner_open,
        inner_vfs,
        name,
        file,
        flags,
        out_flags,
    };
    if flags & ffi::SQLITE_OPEN_MAIN_DB != 0 && !name.is_null() {
        // SAFETY: as SQLite's `xOpen`; `name` is a NUL-terminated path.
        return unsafe { open_db(&open) };
    }
    if flags & ffi::SQLITE_OPEN_WAL == 0 {
        // Not a WAL: the wrapped VFS's file, at the start of the room SQLite gave.
        // SAFETY: the room is larger than the wrapped VFS asks for.
        return unsafe { inner_open(inner_vfs, name, file, flags, out_flags) };
    }
    let gathered = || Gathered {
        bytes: Vec::new(),
        start: 0,
        commit_next: false,
    };
    // SAFETY: as SQLite's `xOpen`.
    unsafe { open_wrapped(&open, gathered, &WAL_METHODS) }
}

/// The wrapped VFS's `xOpen`.
type OpenFn = unsafe extern "C" fn(
    *mut ffi::sqlite3_vfs,
    ffi::sqlite3_filename,
    *mut ffi::sqlite3_file,
    c_int,
    *mut c_int,
) -> c_int;

/// An `xOpen` call: the wrapped VFS's `xOpen` and the call's arguments.
struct Open {
    inner_open: OpenFn,
    inner_vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
}

/// Opens the wrapped VFS's file in the room SQLite gave and, if it opened, wraps it:
/// what `keep` makes is kept beside it, and SQLite calls `methods` on it.
///
/// # Safety
///
/// As SQLite's `xOpen`, the room having this VFS's `szOsFile`; `methods` take the file
/// as a `Wrapped<T>`.
unsafe fn open_wrapped<T>(
    open: &Open,
    keep: impl FnOnce() -> T,
    methods: &'static ffi::sqlite3_io_methods,
) -> c_int {
    let file = open.file;
    let wrapped = file.cast::<Wrapped<T>>();
    // SAFETY: until this returns success, SQLite only reads the file's methods pointer
    // (null: nothing to close); the wrapped file's room follows ours.
    unsafe {
        (*wrapped).kept = ptr::null_mut();
        (*file).pMethods = ptr::null();
        let inner = inner_of(file);
        let rc = (open.inner_open)(open.inner_vfs, open.name, inner, open.flags, open.out_flags);
        if rc != ffi::SQLITE_OK {
            return rc;
        }
        if (*inner).pMethods.is_null() {
            return ffi::SQLITE_ERROR;
        }
        (*wrapped).kept = Box::into_raw(Box::new(keep()));
        (*wrapped).base.pMethods = methods;
    }
    ffi::SQLITE_OK
}

/// Opens a main database file: the wrapped VFS's file after ours, with the methods of
/// [`DB_METHODS`].
///
/// # Safety
///
/// As SQLite's `xOpen`, with `open.name` a NUL-terminated path.
unsafe fn open_db(open: &Open) -> c_int {
    // SAFETY: `name` is a NUL-terminated path, which lives until the file closes.
    let mut shm = unsafe { CStr::from_ptr(open.name) }.to_bytes().to_vec();
    shm.extend_from_slice(b"-shm");
    let db = || Db {
        // A path from SQLite holds no NUL before its end.
        shm: CString::new(shm).unwrap_or_default(),
        locks: DbLocks::Unmapped,
    };
    // SAFETY: as SQLite's `xOpen`.
    unsafe { open_wrapped(open, db, &DB_METHODS) }
}

/// What the main database file `file` keeps.
///
/// # Safety
///
/// `file` was opened by [`open_db`] and is not closed.
unsafe fn db<'a>(file: *mut ffi::sqlite3_file) -> &'a mut Db {
    // SAFETY: set by `open_db`, freed only by `db_close`; SQLite calls one file's
    // methods from one thread at a time.
    unsafe { &mut *(*file.cast::<DbFile>()).kept }
}

unsafe extern "C" fn db_shm_map(
    file: *mut ffi::sqlite3_file,
    page: c_int,
    size: c_int,
    extend: c_int,
    out: *mut *mut c_void,
) -> c_int {
    // SAFETY: SQLite calls this only on a file `open_db` wrapped.
    unsafe {
        let rc = shm_map(file, page, size, extend, out);
        let db = db(file);
        if rc == ffi::SQLITE_OK && matches!(db.locks, DbLocks::Unmapped) {
            // The wrapped VFS has opened (or created) the `-shm` file by now.
            db.locks = match shm::Locks::open(&db.shm) {
                Some(locks) => DbLocks::Kept(locks),
                None => DbLocks::Wrapped,
            };
        }
        if let (ffi::SQLITE_OK, 0, DbLocks::Kept(locks)) = (rc, page, &mut db.locks) {
            // The first page holds the WAL's end and the read marks, which the locks
            // read; it stays mapped until `db_shm_unmap`, which takes the locks away
            // from the connection before it unmaps.
            locks.map_first_page((*out).cast::<u8>(), size);
        }
        rc
    }
}

unsafe extern "C" fn db_shm_lock(
    file: *mut ffi::sqlite3_file,
    offset: c_int,
    n: c_int,
    flags: c_int,
) -> c_int {
    // SAFETY: SQLite calls this only on a file `open_db` wrapped.
    unsafe {
        match &mut db(file).locks {
            DbLocks::Kept(locks) => locks.lock(offset, n, flags),
            DbLocks::Unmapped | DbLocks::Wrapped => shm_lock(file, offset, n, flags),
        }
    }
}

unsafe extern "C" fn db_shm_unmap(file: *mut ffi::sqlite3_file, delete: c_int) -> c_int {
    // SAFETY: SQLite calls this only on a file `open_db` wrapped. The connection's
    // locks go after the wrapped VFS unmapped (and perhaps removed) the file: a table
    // left with no connection then closes its descriptor if the file has no name, and
    // parks it if it has (shm.rs, `PARKED`).
    unsafe {
        let locks = std::mem::replace(&mut db(file).locks, DbLocks::Unmapped);
        let rc = shm_unmap(file, delete);
        drop(locks);
        rc
    }
}

unsafe extern "C" fn db_close(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: SQLite closes a file `open_db` wrapped once, and calls nothing on it after.
    unsafe {
        let d = file.cast::<DbFile>();
        drop(Box::from_raw((*d).kept));
        (*d).kept = ptr::null_mut();
        let inner = inner_of(file);
        match methods(inner).xClose {
            Some(close) => close(inner),
            None => ffi::SQLITE_OK,
        }
    }
}

/// Writes `amount` bytes at `data` to `offset` with one write of the wrapped file, and
/// counts it.
///
/// # Safety
///
/// As [`inner_of`], with `amount` readable bytes at `data`.
unsafe fn write_through(
    file: *mut ffi::sqlite3_file,
    data: *const c_void,
    amount: c_int,
    offset: ffi::sqlite3_int64,
) -> c_int {
    WAL_WRITES.fetch_add(1, Ordering::Relaxed);
    // SAFETY: the caller's; an open file's methods live as long as its VFS.
    unsafe {
        let inner = inner_of(file);
        match methods(inner).xWrite {
            Some(write) => write(inner, data, amount, offset),
            None => ffi::SQLITE_IOERR_WRITE,
        }
    }
}

/// Writes what `file` holds, if anything, in one write of the wrapped file.
///
/// # Safety
///
/// As [`gathered`].
unsafe fn flush(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: the caller's.
    let g = unsafe { gathered(file) };
    if g.bytes.is_empty() {
        return ffi::SQLITE_OK;
    }
    // SAFETY: the caller's; the bytes are at most MAX_GATHERED, which fits a c_int.
    let rc = unsafe {
        write_through(
            file,
            g.bytes.as_ptr().cast(),
            g.bytes.len() as c_int,
            g.start,
        )
    };
    g.bytes.clear();
    rc
}

unsafe extern "C" fn write(
    file: *mut ffi::sqlite3_file,
    data: *const c_void,
    amount: c_int,
    offset: ffi::sqlite3_int64,
) -> c_int {
    if amount <= 0 {
        return ffi::SQLITE_OK;
    }
    // SAFETY: SQLite calls this only on a file `open` wrapped, with `amount` readable
    // bytes at `data`.
    unsafe {
        let bytes = std::slice::from_raw_parts(data.cast::<u8>(), amount as usize);
        // Taken first: the page of a commit frame is written with what is held
        // whichever way it arrives.
        let commit = std::mem::take(&mut gathered(file).commit_next);
        if bytes.len() > MAX_GATHERED {
            // Larger than anything SQLite writes to a WAL (a page is at most 64 KiB):
            // passed on as it came, after what is held.
            let rc = flush(file);
            if rc != ffi::SQLITE_OK {
                return rc;
            }
            return write_through(file, data, amount, offset);
        }
        let g = gathered(file);
        if !g.bytes.is_empty()
            && (offset != g.start + g.bytes.len() as i64
                || g.bytes.len() + bytes.len() > MAX_GATHERED)
        {
            let rc = flush(file);
            if rc != ffi::SQLITE_OK {
                return rc;
            }
        }
        let g = gathered(file);
        if g.bytes.is_empty() {
            g.start = offset;
        }
        g.bytes.extend_from_slice(bytes);
        if commit {
            return flush(file);
        }
        if amount == FRAME_HEADER && bytes[4..8] != [0; 4] {
            g.commit_next = true;
        }
    }
    ffi::SQLITE_OK
}

unsafe extern "C" fn close(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: SQLite closes a file `open` wrapped once, and calls nothing on it after.
    unsafe {
        let flushed = flush(file);
        let inner = inner_of(file);
        let closed = match methods(inner).xClose {
            Some(close) => close(inner),
            None => ffi::SQLITE_OK,
        };
        let wal = file.cast::<WalFile>();
        drop(Box::from_raw((*wal).kept));
        (*wal).kept = ptr::null_mut();
        if flushed != ffi::SQLITE_OK {
            flushed
        } else {
            closed
        }
    }
}

/// A method that writes what is held first, then calls the wrapped file's.
macro_rules! flushing {
    ($name:ident, $method:ident, ($($arg:ident: $ty:ty),*)) => {
        unsafe extern "C" fn $name(file: *mut ffi::sqlite3_file $(, $arg: $ty)*) -> c_int {
            // SAFETY: SQLite calls this only on a file `open` wrapped.
            unsafe {
                let rc = flush(file);
                if rc != ffi::SQLITE_OK {
                    return rc;
                }
                let inner = inner_of(file);
                match methods(inner).$method {
                    Some(m) => m(inner $(, $arg)*),
                    None => ffi::SQLITE_IOERR,
                }
            }
        }
    };
}

/// A method passed straight to the wrapped file's.
macro_rules! passed {
    ($name:ident, $method:ident, ($($arg:ident: $ty:ty),*), $missing:expr) => {
        unsafe extern "C" fn $name(file: *mut ffi::sqlite3_file $(, $arg: $ty)*) -> c_int {
            // SAFETY: SQLite calls this only on a file `open` wrapped.
            unsafe {
                let inner = inner_of(file);
                match methods(inner).$method {
                    Some(m) => m(inner $(, $arg)*),
                    None => $missing,
                }
            }
        }
    };
}

flushing!(read, xRead, (buf: *mut c_void, amount: c_int, offset: ffi::sqlite3_int64));
flushing!(truncate, xTruncate, (size: ffi::sqlite3_int64));
flushing!(sync, xSync, (flags: c_int));
flushing!(file_size, xFileSize, (size: *mut ffi::sqlite3_int64));
flushing!(file_control, xFileControl, (op: c_int, arg: *mut c_void));
flushing!(fetch, xFetch, (offset: ffi::sqlite3_int64, amount: c_int, out: *mut *mut c_void));
passed!(lock, xLock, (level: c_int), ffi::SQLITE_OK);
passed!(unlock, xUnlock, (level: c_int), ffi::SQLITE_OK);
passed!(check_reserved_lock, xCheckReservedLock, (out: *mut c_int), ffi::SQLITE_OK);
passed!(sector_size, xSectorSize, (), 4096);
passed!(device_characteristics, xDeviceCharacteristics, (), 0);
passed!(shm_map, xShmMap, (page: c_int, size: c_int, extend: c_int, out: *mut *mut c_void), ffi::SQLITE_IOERR_SHMMAP);
passed!(shm_lock, xShmLock, (offset: c_int, n: c_int, flags: c_int), ffi::SQLITE_IOERR_SHMLOCK);
passed!(shm_unmap, xShmUnmap, (delete: c_int), ffi::SQLITE_OK);
passed!(unfetch, xUnfetch, (offset: ffi::sqlite3_int64, p: *mut c_void), ffi::SQLITE_OK);
passed!(db_read, xRead, (buf: *mut c_void, amount: c_int, offset: ffi::sqlite3_int64), ffi::SQLITE_IOERR_READ);
passed!(db_write, xWrite, (data: *const c_void, amount: c_int, offset: ffi::sqlite3_int64), ffi::SQLITE_IOERR_WRITE);
passed!(db_truncate, xTruncate, (size: ffi::sqlite3_int64), ffi::SQLITE_IOERR_TRUNCATE);
passed!(db_sync, xSync, (flags: c_int), ffi::SQLITE_IOERR_FSYNC);
passed!(db_file_size, xFileSize, (size: *mut ffi::sqlite3_int64), ffi::SQLITE_IOERR_FSTAT);
passed!(db_file_control, xFileControl, (op: c_int, arg: *mut c_void), ffi::SQLITE_NOTFOUND);
passed!(db_fetch, xFetch, (offset: ffi::sqlite3_int64, amount: c_int, out: *mut *mut c_void), ffi::SQLITE_OK);

unsafe extern "C" fn shm_barrier(file: *mut ffi::sqlite3_file) {
    // SAFETY: SQLite calls this only on a file `open` wrapped.
    unsafe {
        let inner = inner_of(file);
        if let Some(m) = methods(inner).xShmBarrier {
            m(inner);
        }
    }
}

static WAL_METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 3,
    xClose: Some(close),
    xRead: Some(read),
    xWrite: Some(write),
    xTruncate: Some(truncate),
    xSync: Some(sync),
    xFileSize: Some(file_size),
    xLock: Some(lock),
    xUnlock: Some(unlock),
    xCheckReservedLock: Some(check_reserved_lock),
    xFileControl: Some(file_control),
    xSectorSize: Some(sector_size),
    xDeviceCharacteristics: Some(device_characteristics),
    xShmMap: Some(shm_map),
    xShmLock: Some(shm_lock),
    xShmBarrier: Some(shm_barrier),
    xShmUnmap: Some(shm_unmap),
    xFetch: Some(fetch),
    xUnfetch: Some(unfetch),
};

/// A main database file's methods: the wrapped file's own, but for its WAL-index locks.
static DB_METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 3,
    xClose: Some(db_close),
    xRead: Some(db_read),
    xWrite: Some(db_write),
    xTruncate: Some(db_truncate),
    xSync: Some(db_sync),
    xFileSize: Some(db_file_size),
    xLock: Some(lock),
    xUnlock: Some(unlock),
    xCheckReservedLock: Some(check_reserved_lock),
    xFileControl: Some(db_file_control),
    xSectorSize: Some(sector_size),
    xDeviceCharacteristics: Some(device_characteristics),
    xShmMap: Some(db_shm_map),
    xShmLock: Some(db_shm_lock),
    xShmBarrier: Some(shm_barrier),
    xShmUnmap: Some(db_shm_unmap),
    xFetch: Some(db_fetch),
    xUnfetch: Some(unfetch),
};

//! The WAL index's locks, kept from one transaction to the next.
//!
//! SQLite guards its WAL with eight locks on bytes of the `-shm` file: the write lock,
//! the checkpointer's, recovery's and five read marks. Its unix VFS takes and releases
//! them with `fcntl` around every transaction: about six system calls a commit, a
//! quarter of a one-row send on the project machine (docs/benchmark.md, "Where a
//! commit's time goes now: file locks"). Here, a database file opened through this VFS
//! takes those locks from a table of this process (one per `-shm` file, shared by every
//! connection of the process that opens it through this VFS), and the table holds the
//! lock on the file itself (an open file description lock, `F_OFD_SETLK`, on a
//! descriptor of its own) for a while after the last connection of the process let go
//! of it. A connection that takes it again in that while pays no system call.
//!
//! One more call SQLite makes at each transaction after a commit is the read mark's
//! move: its reader finds no mark at the WAL's end, raises a free mark's lock to
//! exclusive, sets the mark to the WAL's end, and lowers the lock to shared to read at
//! it (two calls). Here the process's readers move a mark once a hold between them, or
//! once the newest mark is [`MOVE_FRAMES`] behind the WAL's end ([`may_move`]); in
//! between, the table refuses a reader the mark's exclusive lock (`SQLITE_BUSY`, as if
//! another connection held the mark), and SQLite's reader then does what it does when
//! every mark is taken: it shares the newest mark (which the file usually keeps shared
//! already). Its snapshot is the WAL's end all the same: a mark behind it only keeps a
//! checkpoint from copying the frames past it to the database while a reader holds it,
//! and the next move lets a checkpoint copy them. A run of commits then makes no call a
//! commit: two a move (every [`MOVE_FRAMES`] frames, or once a hold), and a few a hold
//! for the write lock and the mark lowered and taken again.
//!
//! Why it is safe:
//!
//! - Between connections of this process, the table decides, exactly as SQLite's unix
//!   VFS decides between them: an exclusive lock is refused (`SQLITE_BUSY`) while any
//!   other connection holds the lock, a shared one while another holds it exclusively.
//!   It also refuses a read mark's exclusive lock to a reader between moves
//!   ([`may_move`]): a refusal SQLite's reader takes as it takes another process's (it
//!   shares the newest mark instead), never to the checkpointer, whose moves of the
//!   marks let it copy frames, and never when no mark is there to share.
//! - Against everything else (another process, or a connection of this process through
//!   another VFS, whose locks the kernel keeps apart from these), the file always holds
//!   at least what the table's connections hold: a lock is taken on the file before the
//!   table grants it, and the file's lock is only ever lowered to what the table still
//!   holds. So another process never sees a lock free that a connection here holds.
//! - What the file holds beyond that is only what a run of transactions takes again
//!   ([`may_keep`]): the write lock, and read marks shared. A read mark is exclusive on
//!   the file only while a connection here moves it, as with SQLite's own VFS, so
//!   another process's reader reads as with SQLite's own VFS: it shares a mark this
//!   process keeps shared, or moves a free one. A lock kept is lowered at the first lock
//!   call after it has been held [`HOLD`] (under load; [`set_hold`] changes it), and by
//!   a thread of this module when no call comes (idle, within about twice the hold).
//! - Another process's writer (which promise 10.1 does not expect) waits for the write
//!   lock: under a steady load it is free only at those lowerings; SQLite retries a
//!   write for the connection's busy timeout. Its checkpoint copies no frame past a mark
//!   a connection here reads at, as with a reader of SQLite's, nor past one the file
//!   keeps shared until the hold runs out.
//! - One difference SQLite's callers can see: a transaction here that reads at a mark
//!   behind the WAL's end holds a checkpoint back to that mark for as long as it reads,
//!   where SQLite's reader would have moved the mark to the end. A passive checkpoint
//!   copies less meanwhile; a `FULL` one waits for the reader up to its busy timeout
//!   and then reports busy (a `RESTART` or `TRUNCATE` one waits for every reader
//!   anyway). The store runs passive and truncating checkpoints only. And when another
//!   process holds the newest mark exclusively at that moment (it is moving it), a
//!   reader here retries, for at most a hold, where SQLite's would move a free mark.
//! - No descriptor of a `-shm` file is closed while the file has a name ([`PARKED`]):
//!   closing one would drop the POSIX locks the process holds on it through SQLite's
//!   own descriptor, its dead-man switch among them.
//! - A process that dies loses its descriptors, and with them every lock here: the
//!   kernel releases them as it releases SQLite's own.
//!
//! Limits: a child of `fork` shares its parent's descriptors, and so the table's locks,
//! until it execs (the descriptors close on exec); it must not use its parent's
//! connections (as SQLite requires) and makes a table of its own for connections it
//! opens, which keeps nothing past its last holder (the keeper thread does not run in
//! the child: its connections pay SQLite's own calls), and lowers only its own tables'
//! locks (`release_kept`), never the parent's. The table is found by the `-shm` file's
//! identity, named after each connection's path, where SQLite names the file after the
//! first connection's: two hard links to one database, opened in one process, would
//! lock two files. `SQLITE_FCNTL_EXTERNAL_READER` (which SQLite's core does not use)
//! would count this process's kept read marks as another's. A build of SQLite with
//! `SQLITE_ENABLE_SNAPSHOT` (not the bundled one) that opens a snapshot older than
//! every mark could be refused the move it needs for up to a hold.
//!
//! Only Linux has open file description locks with byte ranges that conflict with
//! SQLite's own (`fcntl` record locks, which belong to the process); elsewhere, and
//! wherever the table cannot open the `-shm` file, a connection's locks are SQLite's own.

use std::ffi::{CStr, c_int};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use libsqlite3_sys as ffi;

/// How long the file keeps a lock no connection of this process holds any more, unless
/// [`set_hold`] says otherwise.
pub const HOLD: Duration = Duration::from_millis(10);

/// The hold in force, in nanoseconds.
static HOLD_NANOS: AtomicU64 = AtomicU64::new(HOLD.as_nanos() as u64);

/// Sets how long the file keeps a lock after its last holder in this process, for
/// every connection of the process (zero: none is kept, as with SQLite's own VFS).
pub fn set_hold(hold: Duration) {
    HOLD_NANOS.store(
        u64::try_from(hold.as_nanos()).unwrap_or(u64::MAX),
        Ordering::Relaxed,
    );
    // The keeper may wait out the old hold: it looks again now.
    keeper::nudge();
}

/// The hold in force ([`set_hold`]).
pub fn hold() -> Duration {
    Duration::from_nanos(HOLD_NANOS.load(Ordering::Relaxed))
}

/// Lowers at once every lock a file keeps with no holder in this process, as the hold
/// running out would.
pub fn release_kept() {
    lower_every_table(true);
}

/// [`lower_due`] on every table of this process; whether some file still keeps a lock.
/// A child of `fork` inherits its parent's list, and the descriptors whose locks those
/// tables hold (an open file description's locks are shared across `fork`): it lowers
/// only the tables it made.
fn lower_every_table(all: bool) -> bool {
    let pid = std::process::id();
    let tables: Vec<Arc<Table>> = {
        let mut tables = TABLES.lock().unwrap_or_else(PoisonError::into_inner);
        tables.retain(|t| t.strong_count() > 0);
        tables
            .iter()
            .filter_map(Weak::upgrade)
            .filter(|t| t.pid == pid)
            .collect()
    };
    let mut kept = false;
    for table in &tables {
        kept |= lower_due(table, &mut table.state(), Instant::now(), all);
    }
    kept
}

/// SQLite's number of WAL-index locks (`SQLITE_SHM_NLOCK`).
const NLOCK: usize = 8;

/// The byte of the `-shm` file that is lock 0, as SQLite's unix VFS places them
/// (`UNIX_SHM_BASE`): every process must agree on it.
const BASE: i64 = 120;

/// Calls to lock or unlock bytes of a `-shm` file made by this module, process-wide.
static FILE_LOCK_CALLS: AtomicU64 = AtomicU64::new(0);

/// How many times this module has locked or unlocked bytes of a `-shm` file in this
/// process: what SQLite's own VFS pays about six times a commit.
pub fn file_lock_calls() -> u64 {
    FILE_LOCK_CALLS.load(Ordering::Relaxed)
}

/// What the file holds of one lock for this process.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Held {
    Nothing,
    Shared,
    Exclusive,
}

/// One lock in the table.
#[derive(Clone, Copy, Debug)]
struct Slot {
    /// Connections holding it: -1 one exclusively, n > 0 that many shared, 0 none.
    holders: i32,
    /// What the file holds.
    file: Held,
    /// When the file took what it holds.
    since: Instant,
}

impl Slot {
    /// What the file must hold for the connections that hold this lock.
    fn needed(&self) -> Held {
        match self.holders {
            0 => Held::Nothing,
            n if n < 0 => Held::Exclusive,
            _ => Held::Shared,
        }
    }
}

/// The table of one `-shm` file in this process.
struct Table {
    /// The file's identity (device, inode), which finds the table again.
    key: (u64, u64),
    /// The table's own descriptor of the file, which the file's locks belong to. Never
    /// closed while the file has a name ([`Table`]'s drop, [`PARKED`]).
    fd: RawFd,
    /// The process that made the table: a child of `fork` makes its own.
    pid: u32,
    state: Mutex<State>,
}

impl Drop for Table {
    /// Lets go of the table's own locks on the file and parks its descriptor (or closes
    /// it, if the file has lost its name).
    fn drop(&mut self) {
        set_file_lock(self.fd, libc::F_UNLCK as c_int, 0, NLOCK);
        park_or_close(self.key, self.fd);
    }
}

/// Descriptors of `-shm` files whose table is gone while the file still has a name.
/// Closing a descriptor of a file drops every POSIX lock the process holds on that
/// file, whichever descriptor took it: SQLite's own, its dead-man switch above all
/// (without it, the next process to open the database would truncate the `-shm` file
/// under this one's mapping). So a descriptor waits here, holding no lock, for a table
/// of the same file to take it again, and is closed once the file has no name (SQLite
/// removes it only when no connection of any process has it open).
/// Each is kept with the process that parked it: a child of `fork` inherits the list,
/// but a descriptor shared with the parent would share the parent's locks.
static PARKED: Mutex<Vec<Parked>> = Mutex::new(Vec::new());

/// A parked descriptor: its file's identity, the process that parked it, the descriptor.
struct Parked {
    key: (u64, u64),
    pid: u32,
    fd: RawFd,
}

/// The identity (device, inode) of the open file `fd`, and whether it still has a name.
fn identity(fd: RawFd) -> Option<((u64, u64), bool)> {
    // SAFETY: a zeroed `stat` is a valid value of the plain C struct, filled by fstat.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` lives across the call; a closed `fd` only makes it fail.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return None;
    }
    Some((key_of(&st), st.st_nlink > 0))
}

/// A file's identity (device, inode) as its `stat` gives it.
// `dev_t` and `ino_t` are `u64` on Linux and other widths elsewhere.
#[allow(clippy::unnecessary_cast)]
fn key_of(st: &libc::stat) -> (u64, u64) {
    (st.st_dev as u64, st.st_ino as u64)
}

/// Parks `fd` (of the file `key`), or closes it if its file has no name any more.
fn park_or_close(key: (u64, u64), fd: RawFd) {
    match identity(fd) {
        Some((_, false)) => {
            // SAFETY: `fd` is a descriptor this module opened and nothing else holds.
            unsafe { libc::close(fd) };
        }
        _ => PARKED
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Parked {
                key,
                pid: std::process::id(),
                fd,
            }),
    }
}

/// A parked descriptor of the file `key`, if there is one; closes those whose file has
/// lost its name meanwhile.
fn unpark(key: (u64, u64)) -> Option<RawFd> {
    let mut parked = PARKED.lock().unwrap_or_else(PoisonError::into_inner);
    parked.retain(|p| match identity(p.fd) {
        Some((_, false)) => {
            // SAFETY: as in `park_or_close`.
            unsafe { libc::close(p.fd) };
            false
        }
        _ => true,
    });
    let pid = std::process::id();
    let at = parked.iter().position(|p| p.key == key && p.pid == pid)?;
    Some(parked.swap_remove(at).fd)
}

/// The table's locks.
struct State {
    slots: [Slot; NLOCK],
    /// When a reader here last moved a read mark ([`may_move`]).
    moved: Option<Instant>,
}

impl Table {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The write lock's index, which the file may keep ([`may_keep`]).
const WRITE: usize = 0;
/// The checkpointer's lock's index: its holder moves read marks whenever it can.
const CKPT: usize = 1;
/// The index of read mark 0's lock: marks 1 to 4 follow it.
const READ0: usize = 3;

/// How far behind the WAL's end, in frames, the newest read mark may be for a reader
/// here to share it rather than move a mark ([`may_move`]): a checkpoint beside the
/// writer copies no frame past a mark a reader holds, and the store's checkpoint thread
/// is asked every 500 frames. A move costs two lock calls; a one-row commit writes two
/// frames or so.
pub const MOVE_FRAMES: u32 = 64;

/// Whether a reader here may move a read mark at `now` (take its lock, and only it,
/// exclusively), `moved` being a reader's last move here: once a hold, or sooner when
/// the newest mark is [`MOVE_FRAMES`] behind the WAL's end. Refused, it shares the
/// newest mark (module doc). It is refused only while such a mark is there to share
/// ([`Index`]); the checkpointer (which holds its own lock as it moves marks, to copy
/// the frames past them) and recovery (which holds it too) never are.
fn may_move(moved: Option<Instant>, now: Instant) -> bool {
    moved.is_none_or(|at| now.saturating_duration_since(at) >= hold())
}

/// Whether the file may keep lock `i` as `held` with no holder in this process, for a
/// while: what a run of transactions takes again at once, and no more, so that another
/// process is never shut out of reading.
///
/// - The write lock: each write transaction takes it (another process's writer waits).
/// - A read mark's lock, shared: each transaction reads at a mark, mostly the same one
///   ([`may_move`]), and another process's reader may share it.
///
/// Never the checkpointer's or recovery's lock, nor a read mark's exclusively.
fn may_keep(i: usize, held: Held) -> bool {
    match (i, held) {
        (WRITE, _) => true,
        (i, Held::Shared) => i >= READ0,
        _ => false,
    }
}

/// Sets the file's lock on `n` locks from `first` to `to` (`F_RDLCK`, `F_WRLCK` or
/// `F_UNLCK`), without waiting; whether it did.
fn set_file_lock(fd: RawFd, to: c_int, first: usize, n: usize) -> bool {
    FILE_LOCK_CALLS.fetch_add(1, Ordering::Relaxed);
    let lock = flock(to, first, n);
    // SAFETY: `fd` is an open descriptor this table owns; `lock` lives across the call.
    unsafe { libc::fcntl(fd, SETLK, &lock) != -1 }
}

/// The lock `kind` (`F_RDLCK`, `F_WRLCK`, `F_UNLCK`) on `n` locks from `first`, as
/// `fcntl` takes it.
fn flock(kind: c_int, first: usize, n: usize) -> libc::flock {
    // SAFETY: a zeroed `flock` is a valid value of the plain C struct; open file
    // description locks require `l_pid` 0, which zero leaves.
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = kind as _;
    lock.l_whence = libc::SEEK_SET as _;
    lock.l_start = (BASE + first as i64) as _;
    lock.l_len = n as _;
    lock
}

/// Whether the kernel knows open file description locks: asks it what would stop a
/// write lock on the eight locks' bytes (an older kernel refuses the question).
fn ofd_locks_work(fd: RawFd) -> bool {
    #[cfg(target_os = "linux")]
    {
        let mut lock = flock(libc::F_WRLCK as c_int, 0, NLOCK);
        // SAFETY: `fd` is open; `lock` lives across the call.
        unsafe { libc::fcntl(fd, libc::F_OFD_GETLK, &mut lock) != -1 }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = fd;
        false
    }
}

/// Sets an open file description lock, without waiting.
#[cfg(target_os = "linux")]
const SETLK: c_int = libc::F_OFD_SETLK;
/// Elsewhere no table is made ([`table_of`]), so nothing calls it.
#[cfg(not(target_os = "linux"))]
const SETLK: c_int = libc::F_SETLK;

/// Lowers what the file holds to what the table's connections hold, for every lock the
/// file may not keep ([`may_keep`]) or has kept for the hold ([`hold`]) by `now` (every
/// such lock when `all`); whether the file still keeps some lock.
fn lower_due(table: &Table, state: &mut State, now: Instant, all: bool) -> bool {
    let hold = hold();
    let mut kept = false;
    for i in 0..NLOCK {
        let slot = state.slots[i];
        let needed = slot.needed();
        if slot.file <= needed {
            continue;
        }
        let due =
            all || !may_keep(i, slot.file) || now.saturating_duration_since(slot.since) >= hold;
        if due && lower_file_lock(table, state, i, needed, now) {
            continue;
        }
        kept = true;
    }
    kept
}

/// Lowers the file's lock `i` to `to` (shared, or nothing), which must be no less than
/// the table's connections hold of it; whether the kernel did.
fn lower_file_lock(table: &Table, state: &mut State, i: usize, to: Held, now: Instant) -> bool {
    let kind = match to {
        Held::Nothing => libc::F_UNLCK,
        _ => libc::F_RDLCK,
    };
    if !set_file_lock(table.fd, kind as c_int, i, 1) {
        return false;
    }
    state.slots[i].file = to;
    state.slots[i].since = now;
    true
}

/// A connection's locks: the table it takes them from, which it holds, and the WAL
/// index's first page as the connection maps it.
pub(crate) struct Locks {
    table: Arc<Table>,
    held: Holds,
    index: Option<Index>,
}

/// The WAL index's first page, mapped: where SQLite keeps the WAL's end (its header's
/// `mxFrame`) and the read marks (`aReadMark`), in the machine's byte order.
#[derive(Clone, Copy)]
struct Index(std::ptr::NonNull<u8>);

impl Index {
    /// The first copy of the header's `mxFrame`: the last commit's frame, written last
    /// of the header by a commit (SQLite's `walIndexWriteHdr`).
    const WAL_END: usize = 16;
    /// `aReadMark[0]`, after the header's two copies of 48 bytes and the checkpoint's
    /// `nBackfill`; the five marks follow, and SQLite's eight locks ([`BASE`]) after them.
    const READ_MARKS: usize = 100;
    /// How much of the page the two above need.
    const NEEDED: usize = BASE as usize;

    /// The 32-bit word at `at`.
    fn word(self, at: usize) -> u32 {
        // SAFETY: `Index` is made only for a mapped page of at least `NEEDED` bytes that
        // stays mapped while the connection's locks read it (`Locks::map_first_page`);
        // every offset read is below `NEEDED` and 4-aligned in a page-aligned mapping.
        // Other connections and processes write these words: read atomically.
        unsafe {
            (*self
                .0
                .as_ptr()
                .add(at)
                .cast::<std::sync::atomic::AtomicU32>())
            .load(Ordering::Acquire)
        }
    }

    /// How many frames the newest read mark (1 to 4) at or behind the WAL's end is
    /// behind it: the mark a reader refused every move shares. `None` when there is none,
    /// and such a reader would retry (giving up after about ten seconds). An unused mark
    /// holds `0xffffffff`, past any end.
    fn newest_mark_behind(self) -> Option<u32> {
        let end = self.word(Self::WAL_END);
        (1..=4)
            .map(|m| self.word(Self::READ_MARKS + 4 * m))
            .filter(|&mark| mark <= end)
            .max()
            .map(|newest| end - newest)
    }
}

/// Which locks a connection holds, a bit each.
#[derive(Default)]
struct Holds {
    shared: u8,
    exclusive: u8,
}

impl Locks {
    /// The locks of a connection to the database whose `-shm` file is `shm`: `None`
    /// where this module cannot keep them (not Linux, or the file cannot be opened for
    /// writing), and SQLite's own VFS keeps them.
    pub(crate) fn open(shm: &CStr) -> Option<Locks> {
        let table = table_of(shm)?;
        Some(Locks {
            table,
            held: Holds::default(),
            index: None,
        })
    }

    /// The WAL index's first page, mapped at `page` with `size` bytes: it stays mapped
    /// until the connection's locks are dropped (the VFS's `xShmUnmap` drops them before
    /// it unmaps).
    pub(crate) fn map_first_page(&mut self, page: *mut u8, size: c_int) {
        let big_enough = usize::try_from(size).is_ok_and(|size| size >= Index::NEEDED);
        self.index = std::ptr::NonNull::new(page)
            .filter(|p| big_enough && p.as_ptr().align_offset(4) == 0)
            .map(Index);
    }

    /// SQLite's `xShmLock`: `n` locks from `first`, as `flags` says.
    pub(crate) fn lock(&mut self, first: c_int, n: c_int, flags: c_int) -> c_int {
        let (Ok(first), Ok(n)) = (usize::try_from(first), usize::try_from(n)) else {
            return ffi::SQLITE_IOERR_SHMLOCK;
        };
        if n == 0 || first + n > NLOCK {
            return ffi::SQLITE_IOERR_SHMLOCK;
        }
        let mask = (((1u16 << (first + n)) - (1u16 << first)) & 0xff) as u8;
        let table = &*self.table;
        let mut state = table.state();
        let now = Instant::now();
        let rc = if flags & ffi::SQLITE_SHM_UNLOCK != 0 {
            self.held.release(&mut state.slots, first, n, mask, flags);
            let slot = state.slots[first];
            if flags & ffi::SQLITE_SHM_EXCLUSIVE != 0
                && n == 1
                && first > READ0
                && slot.holders == 0
                && slot.file == Held::Exclusive
            {
                // A mark just set (a reader's move, which the reader shares next, or the
                // checkpointer's or recovery's): the file keeps it shared ([`may_keep`]).
                // One call rather than two for the reader.
                lower_file_lock(table, &mut state, first, Held::Shared, now);
            }
            ffi::SQLITE_OK
        } else if flags & ffi::SQLITE_SHM_SHARED != 0 {
            self.held
                .take_shared(table, &mut state.slots, first, mask, now)
        } else {
            // A reader's move of a read mark, refused within a hold of the last one while
            // there is a mark to share instead, close enough ([`may_move`]).
            let reader_moves = n == 1 && first > READ0 && self.held.exclusive & (1 << CKPT) == 0;
            if reader_moves
                && !may_move(state.moved, now)
                && self
                    .index
                    .and_then(Index::newest_mark_behind)
                    .is_some_and(|behind| behind < MOVE_FRAMES)
            {
                ffi::SQLITE_BUSY
            } else {
                let rc = self
                    .held
                    .take_exclusive(table, &mut state.slots, first, n, mask, now);
                if rc == ffi::SQLITE_OK && reader_moves {
                    state.moved = Some(now);
                }
                rc
            }
        };
        lower_after(table, state, now);
        rc
    }
}

/// After a connection's call: lowers what is due ([`lower_due`]; everything kept when
/// the keeper thread does not run) and, if the file still keeps a lock, makes sure the
/// keeper will look.
fn lower_after(table: &Table, mut state: MutexGuard<'_, State>, now: Instant) {
    let kept = lower_due(table, &mut state, now, !keeper::runs_for(table.pid));
    drop(state);
    if kept {
        keeper::wake();
    }
}

impl Holds {
    /// Lets go of the locks in `mask` that this connection holds (the file keeps them a
    /// while).
    fn release(
        &mut self,
        slots: &mut [Slot; NLOCK],
        first: usize,
        n: usize,
        mask: u8,
        flags: c_int,
    ) {
        if (self.shared | self.exclusive) & mask == 0 {
            return;
        }
        if flags & ffi::SQLITE_SHM_SHARED != 0 {
            let slot = &mut slots[first];
            if self.shared & mask != 0 && slot.holders > 0 {
                slot.holders -= 1;
            }
            self.shared &= !mask;
        } else {
            for (i, slot) in slots.iter_mut().enumerate().skip(first).take(n) {
                if self.exclusive & (1 << i) != 0 {
                    slot.holders = 0;
                }
            }
            self.exclusive &= !mask;
        }
    }

    fn take_shared(
        &mut self,
        table: &Table,
        slots: &mut [Slot; NLOCK],
        first: usize,
        mask: u8,
        now: Instant,
    ) -> c_int {
        if self.shared & mask != 0 {
            return ffi::SQLITE_OK;
        }
        let slot = &mut slots[first];
        if slot.holders < 0 {
            return ffi::SQLITE_BUSY;
        }
        // The file takes the lock shared (or lowers it to shared). A lowering that fails
        // leaves the file holding more than needed, never less.
        if slot.file != Held::Shared {
            if set_file_lock(table.fd, libc::F_RDLCK as c_int, first, 1) {
                slot.file = Held::Shared;
                slot.since = now;
            } else if slot.file == Held::Nothing {
                return ffi::SQLITE_BUSY;
            }
        }
        slot.holders += 1;
        self.shared |= mask;
        ffi::SQLITE_OK
    }

    fn take_exclusive(
        &mut self,
        table: &Table,
        slots: &mut [Slot; NLOCK],
        first: usize,
        n: usize,
        mask: u8,
        now: Instant,
    ) -> c_int {
        let range = first..first + n;
        if slots[range.clone()].iter().any(|s| s.holders != 0) {
            return ffi::SQLITE_BUSY;
        }
        if slots[range.clone()]
            .iter()
            .any(|s| s.file != Held::Exclusive)
        {
            // One call for the range: the kernel takes all of it or none.
            if !set_file_lock(table.fd, libc::F_WRLCK as c_int, first, n) {
                return ffi::SQLITE_BUSY;
            }
            for slot in &mut slots[range.clone()] {
                if slot.file != Held::Exclusive {
                    slot.file = Held::Exclusive;
                    slot.since = now;
                }
            }
        }
        for slot in &mut slots[range] {
            slot.holders = -1;
        }
        self.exclusive |= mask;
        ffi::SQLITE_OK
    }
}

impl Drop for Locks {
    /// A connection that unmaps or closes lets go of whatever it still holds.
    fn drop(&mut self) {
        let table = &*self.table;
        let mut state = table.state();
        for (i, slot) in state.slots.iter_mut().enumerate() {
            let bit = 1u8 << i;
            if self.held.exclusive & bit != 0 {
                slot.holders = 0;
            } else if self.held.shared & bit != 0 && slot.holders > 0 {
                slot.holders -= 1;
            }
        }
        self.held = Holds::default();
        lower_after(table, state, Instant::now());
    }
}

/// The tables of this process, found by their file's identity.
static TABLES: Mutex<Vec<Weak<Table>>> = Mutex::new(Vec::new());

/// Whether open file description locks were found not to work (a kernel before 3.15).
static NO_OFD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The table of the `-shm` file at `shm`, made if this process has none for it.
fn table_of(shm: &CStr) -> Option<Arc<Table>> {
    if !cfg!(target_os = "linux") || NO_OFD.load(Ordering::Relaxed) {
        return None;
    }
    // SAFETY: a zeroed `stat` is a valid value of the plain C struct, filled by stat.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `shm` is a NUL-terminated path and `st` lives across the call.
    if unsafe { libc::stat(shm.as_ptr(), &mut st) } != 0 {
        return None;
    }
    let key = key_of(&st);
    let pid = std::process::id();
    let mut tables = TABLES.lock().unwrap_or_else(PoisonError::into_inner);
    tables.retain(|t| t.strong_count() > 0);
    if let Some(table) = tables
        .iter()
        .filter_map(Weak::upgrade)
        .find(|t| t.key == key && t.pid == pid)
    {
        return Some(table);
    }
    // A descriptor is opened only when no table and no parked descriptor has the file:
    // none is ever closed while the file has a name (see [`PARKED`]).
    let fd = match unpark(key) {
        Some(fd) => fd,
        None => {
            // SAFETY: `shm` is a NUL-terminated path; the descriptor is ours.
            let fd = unsafe { libc::open(shm.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
            if fd < 0 {
                return None;
            }
            fd
        }
    };
    match identity(fd) {
        Some((opened, true)) if opened == key => {}
        Some((opened, _)) => {
            // The file was replaced between the look and the open: SQLite's own locks.
            park_or_close(opened, fd);
            return None;
        }
        None => {
            park_or_close(key, fd);
            return None;
        }
    }
    if !ofd_locks_work(fd) {
        NO_OFD.store(true, Ordering::Relaxed);
        park_or_close(key, fd);
        return None;
    }
    let now = Instant::now();
    let table = Arc::new(Table {
        key,
        fd,
        pid,
        state: Mutex::new(State {
            slots: [Slot {
                holders: 0,
                file: Held::Nothing,
                since: now,
            }; NLOCK],
            moved: None,
        }),
    });
    tables.push(Arc::downgrade(&table));
    drop(tables);
    keeper::start();
    Some(table)
}

/// The thread that lowers the locks the files keep when no connection calls.
mod keeper {
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
    use std::sync::{Condvar, Mutex, PoisonError};
    use std::time::Duration;

    use super::{hold, lower_every_table};

    /// The shortest the thread waits between looks, whatever the hold.
    const MIN_WAIT: Duration = Duration::from_millis(1);

    /// Whether the thread runs (once started, it runs for the rest of the process).
    static RUNNING: AtomicBool = AtomicBool::new(false);
    /// The process the thread runs in: a child of `fork` inherits `RUNNING`, not the
    /// thread.
    static PID: AtomicU32 = AtomicU32::new(0);
    /// Whether the thread waits with no deadline (it found nothing kept).
    static ASLEEP: AtomicBool = AtomicBool::new(false);
    /// What the thread waits on.
    static WAIT: Mutex<()> = Mutex::new(());
    static WAKE: Condvar = Condvar::new();

    /// Whether the thread runs in process `pid` (a table's): without it, no lock is kept
    /// after its last holder.
    pub(super) fn runs_for(pid: u32) -> bool {
        RUNNING.load(Ordering::Acquire) && PID.load(Ordering::Relaxed) == pid
    }

    /// Starts the thread if it has not started.
    pub(super) fn start() {
        static STARTED: std::sync::Once = std::sync::Once::new();
        STARTED.call_once(|| {
            PID.store(std::process::id(), Ordering::Relaxed);
            let spawned = std::thread::Builder::new()
                .name("mqlite-shm-locks".into())
                .spawn(run);
            RUNNING.store(spawned.is_ok(), Ordering::Release);
        });
    }

    /// Wakes the thread if it waits with no deadline: a file keeps a lock now.
    pub(super) fn wake() {
        if ASLEEP.load(Ordering::Relaxed) && ASLEEP.swap(false, Ordering::SeqCst) {
            let _wait = WAIT.lock().unwrap_or_else(PoisonError::into_inner);
            WAKE.notify_one();
        }
    }

    /// Makes the thread look again now, whatever it waits for.
    pub(super) fn nudge() {
        let _wait = WAIT.lock().unwrap_or_else(PoisonError::into_inner);
        WAKE.notify_one();
    }

    fn run() {
        let mut wait = WAIT.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            // Said before looking: a lock kept after the look wakes the thread.
            ASLEEP.store(true, Ordering::SeqCst);
            wait = if lower_every_table(false) {
                ASLEEP.store(false, Ordering::SeqCst);
                WAKE.wait_timeout(wait, hold().max(MIN_WAIT))
                    .unwrap_or_else(PoisonError::into_inner)
                    .0
            } else {
                WAKE.wait(wait).unwrap_or_else(PoisonError::into_inner)
            };
        }
    }
}

//! The WAL index's locks kept from one transaction to the next
//! (`mqlite_sqlite_vfs::shm`): a run of commits takes the file's locks once, where
//! SQLite's own VFS takes them about six times a commit; a connection here moves a read
//! mark once a hold and shares it between, while the checkpointer moves marks whenever
//! it can; connections of this process exclude each other as with SQLite's own VFS;
//! SQLite's dead-man switch stays held; and a connection through SQLite's own VFS (whose
//! locks the kernel keeps apart from the VFS's, as another process's) reads throughout,
//! at once, even one that may not move a mark; it is shut out of writing only while a
//! lock is kept, and gets in once it is let go.
//!
//! The hold is process-wide, so the cases take turns.

use std::sync::Mutex;
use std::time::Duration;

use mqlite_sqlite_vfs::shm;
use rusqlite::{Connection, ErrorCode};

mod common;
use common::{count, insert, integrity, open};

/// The cases take turns: each sets the process's hold.
static TURN: Mutex<()> = Mutex::new(());

/// A hold long enough that nothing kept is let go during a case, but by
/// `shm::release_kept`.
const LONG: Duration = Duration::from_secs(3600);

/// One case's turn, with the process's hold set, and a directory of its own. The hold
/// is the default again when the case ends, however it ends.
struct Case {
    _turn: std::sync::MutexGuard<'static, ()>,
    dir: tempfile::TempDir,
}

impl Case {
    fn new(hold: Duration) -> Case {
        let turn = TURN
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        shm::set_hold(hold);
        Case {
            _turn: turn,
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    /// The database `name` in the case's directory.
    fn path(&self, name: &str) -> std::path::PathBuf {
        self.dir.path().join(name)
    }
}

impl Drop for Case {
    fn drop(&mut self) {
        shm::set_hold(shm::HOLD);
    }
}

/// Whether `result` is SQLite's "database is locked".
fn busy<T: std::fmt::Debug>(result: rusqlite::Result<T>) -> bool {
    match result {
        Err(rusqlite::Error::SqliteFailure(e, _)) => e.code == ErrorCode::DatabaseBusy,
        other => panic!("expected busy, got {other:?}"),
    }
}

/// Whether the case cannot run here (it says so): the locks are kept on Linux only.
fn not_linux() -> bool {
    let skip = !cfg!(target_os = "linux");
    if skip {
        eprintln!("skipped: the locks are kept on Linux only");
    }
    skip
}

/// The rows of `t`, read by `conn`, well within the ten seconds or so SQLite retries a
/// read it cannot lock before it gives up ("locking protocol").
fn count_within_retries(conn: &Connection) -> i64 {
    let started = std::time::Instant::now();
    let rows = count(conn);
    assert!(started.elapsed() < Duration::from_secs(5));
    rows
}

/// Three readers of another process, each in a transaction begun after a commit by
/// `ours`: each moves a mark of its own and holds it shared (2, 3 and 4, while `ours`
/// keeps mark 1).
fn three_readers(ours: &Connection, path: &std::path::Path) -> Vec<Connection> {
    (0..3)
        .map(|_| {
            insert(ours, 1, 64);
            let r = plain(path, Duration::ZERO);
            r.execute_batch("BEGIN").expect("begin read");
            count(&r);
            r
        })
        .collect()
}

/// A thread that commits through `ours` without a pause until stopped.
struct Committing {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<Connection>,
}

impl Committing {
    fn start(ours: Connection) -> Committing {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                insert(&ours, 1, 64);
            }
            ours
        });
        Committing { stop, thread }
    }

    /// Stops the thread; its connection back.
    fn stop(self) -> Connection {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().expect("the committing thread")
    }
}

/// A connection through SQLite's own VFS, which waits `wait` for a lock.
fn plain(path: &std::path::Path, wait: Duration) -> Connection {
    let conn = Connection::open(path).expect("open plainly");
    conn.busy_timeout(wait).expect("busy timeout");
    conn
}

/// Runs a truncating checkpoint on `conn`: whether a reader stopped it (SQLite's
/// "busy" column).
fn truncating_checkpoint(conn: &Connection) -> i64 {
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))
        .expect("checkpoint")
}

/// The `-shm` file of the database at `db`, as another process would read it: the WAL's
/// end (the header's `mxFrame`, offset 16) and read marks 0 to 4 (from offset 100), in
/// this machine's byte order.
fn wal_end_and_marks(db: &std::path::Path) -> (u32, [u32; 5]) {
    let shm = std::fs::read(format!("{}-shm", db.display())).expect("read the -shm file");
    let word = |at: usize| u32::from_ne_bytes(shm[at..at + 4].try_into().expect("4 bytes"));
    (word(16), std::array::from_fn(|m| word(100 + 4 * m)))
}

/// The database at `path`, opened with no automatic checkpoint (a checkpoint takes
/// locks a commit does not, and moves the marks), holding one row.
fn open_without_checkpoints(path: &std::path::Path) -> Connection {
    let conn = open(path);
    conn.execute_batch("PRAGMA wal_autocheckpoint = 0")
        .expect("no checkpoints");
    insert(&conn, 1, 64);
    conn
}

#[test]
fn a_run_of_commits_takes_the_files_locks_once_where_sqlite_takes_them_six_times_a_commit() {
    if not_linux() {
        return;
    }
    let case = Case::new(LONG);
    let path = case.path("n.db");
    // Checkpoints are counted apart, in the store's tests.
    let conn = open_without_checkpoints(&path);
    for n in [100, 1_000] {
        let before = shm::file_lock_calls();
        let (start, _) = wal_end_and_marks(&path);
        for _ in 0..n {
            insert(&conn, 1, 64);
        }
        let calls = shm::file_lock_calls() - before;
        let (end, _) = wal_end_and_marks(&path);
        // None a commit: the write lock and the read mark this process shares are kept
        // from the first commit on. Two for each move of the mark, once it is
        // `MOVE_FRAMES` behind the WAL's end (the hold does not run out).
        let moves = u64::from((end - start) / shm::MOVE_FRAMES) + 1;
        assert!(
            calls <= 2 * moves,
            "{calls} lock calls for {n} commits, {} frames",
            end - start
        );
        assert!(
            u64::from(end - start) > 2 * moves,
            "fewer calls than frames"
        );
    }
    // Reads take none.
    let before = shm::file_lock_calls();
    for _ in 0..100 {
        assert_eq!(count(&conn), count(&conn));
    }
    let calls = shm::file_lock_calls() - before;
    assert!(calls <= 2, "{calls} lock calls for 200 reads");
    // With no hold, as SQLite's own VFS: about six a commit (five here: the mark just
    // moved is lowered to shared in one call, where SQLite unlocks it and locks again).
    shm::set_hold(Duration::ZERO);
    let before = shm::file_lock_calls();
    for _ in 0..100 {
        insert(&conn, 1, 64);
    }
    let calls = shm::file_lock_calls() - before;
    assert!(
        calls >= 500,
        "{calls} lock calls for 100 commits with no hold"
    );
    assert_eq!(count(&conn), 1_201);
    assert_eq!(integrity(&conn), "ok");
}

#[test]
fn connections_of_this_process_exclude_each_other_as_sqlite_does() {
    let case = Case::new(LONG);
    let path = case.path("x.db");
    let a = open(&path);
    let b = open(&path);
    let reader = open(&path);
    insert(&a, 3, 64);

    // A writes: B cannot, and a reader keeps its snapshot.
    reader.execute_batch("BEGIN").expect("begin read");
    assert_eq!(count(&reader), 3);
    a.execute_batch("BEGIN IMMEDIATE; INSERT INTO t (body) VALUES (x'01')")
        .expect("a writes");
    b.busy_timeout(Duration::ZERO).expect("no wait");
    assert!(busy(b.execute_batch("BEGIN IMMEDIATE")));
    a.execute_batch("COMMIT").expect("a commits");
    assert_eq!(count(&reader), 3, "the reader's snapshot holds");

    // A let go: B takes the write lock the file kept.
    b.execute_batch("BEGIN IMMEDIATE; INSERT INTO t (body) VALUES (x'02'); COMMIT")
        .expect("b writes once a let go");

    // The reader's mark holds the WAL: a checkpoint that must pass it cannot (and does
    // not wait for it).
    a.busy_timeout(Duration::ZERO).expect("no wait");
    let busy_ckpt = truncating_checkpoint(&a);
    assert_eq!(
        busy_ckpt, 1,
        "a reader's snapshot stops a truncating checkpoint"
    );
    assert_eq!(count(&reader), 3);
    reader.execute_batch("COMMIT").expect("end read");
    assert_eq!(count(&reader), 5);
    let busy_ckpt = truncating_checkpoint(&a);
    assert_eq!(busy_ckpt, 0, "with no reader the checkpoint passes");
    assert_eq!(count(&b), 5);
    assert_eq!(integrity(&b), "ok");
}

#[test]
fn another_process_reads_throughout_and_writes_once_the_kept_lock_is_let_go() {
    let case = Case::new(LONG);
    let path = case.path("p.db");
    let ours = open(&path);
    insert(&ours, 2, 64);

    // SQLite's own VFS: its locks are the process's, which the kernel keeps apart from
    // the VFS's, as it keeps another process's.
    let other = plain(&path, Duration::ZERO);
    assert_eq!(count(&other), 2, "it reads while the write lock is kept");
    insert(&ours, 1, 64);
    assert_eq!(count(&other), 3, "and reads what commits after");
    other.execute_batch("BEGIN").expect("begin read");
    assert_eq!(count(&other), 3);
    insert(&ours, 1, 64);
    assert_eq!(
        count(&other),
        3,
        "its snapshot holds while this process writes"
    );
    other.execute_batch("COMMIT").expect("end read");

    // The write lock is kept: the other cannot write until it is let go.
    if cfg!(target_os = "linux") {
        assert!(busy(other.execute_batch(
            "BEGIN IMMEDIATE; INSERT INTO t (body) VALUES (x'03'); COMMIT"
        )));
        other.execute_batch("ROLLBACK").ok();
    }
    shm::release_kept();
    other
        .execute_batch("BEGIN IMMEDIATE; INSERT INTO t (body) VALUES (x'03'); COMMIT")
        .expect("the other writes once the lock is let go");
    assert_eq!(count(&ours), 5);
    insert(&ours, 1, 64);
    assert_eq!(count(&other), 6);
    assert_eq!(integrity(&other), "ok");
}

/// What another process would find in the way of a lock of `kind` (`F_RDLCK`,
/// `F_WRLCK`) on `byte` of the `-shm` file of the database at `db`: `F_UNLCK` for
/// nothing. Asked as another process would ask (an open file description's query, which
/// the process's own locks answer as another owner's). The descriptor is left open: the
/// VFS never closes one of a `-shm` file that has a name, as closing one drops every
/// lock the process holds on the file, SQLite's dead-man switch among them.
fn in_the_way(db: &std::path::Path, byte: i64, kind: i32) -> i32 {
    let shm = std::ffi::CString::new(format!("{}-shm", db.display())).expect("path");
    // SAFETY: a NUL-terminated path; the descriptor is never closed (see above).
    let fd = unsafe { libc::open(shm.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    assert!(fd >= 0, "open the -shm file");
    // SAFETY: a zeroed `flock` is a valid value of the plain C struct.
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = kind as _;
    lock.l_whence = libc::SEEK_SET as _;
    lock.l_start = byte as _;
    lock.l_len = 1;
    // SAFETY: `fd` is open and `lock` lives across the call.
    let rc = unsafe { libc::fcntl(fd, libc::F_OFD_GETLK, &mut lock) };
    assert_eq!(rc, 0, "query the lock");
    i32::from(lock.l_type)
}

/// Whether another process could take read mark `mark`'s lock shared now (SQLite's
/// eight locks start at byte 120: the write lock, the checkpointer's, recovery's, then
/// read marks 0 to 4).
fn mark_shareable(db: &std::path::Path, mark: i64) -> bool {
    in_the_way(db, 123 + mark, libc::F_RDLCK) == libc::F_UNLCK
}

#[test]
fn another_process_reads_at_once_after_a_commit_or_a_read_here() {
    let case = Case::new(LONG);
    let path = case.path("m.db");
    let ours = open(&path);
    insert(&ours, 2, 64);
    // The file keeps no read mark exclusive: another process's reader shares the one
    // this process keeps shared, or moves a free one. (One shut out would fail after
    // SQLite's retries, about ten seconds, with "locking protocol".)
    assert_eq!(count(&ours), 2);
    if cfg!(target_os = "linux") {
        assert!(
            (0..=4).all(|m| mark_shareable(&path, m)),
            "a mark kept exclusive"
        );
    }
    let other = plain(&path, Duration::ZERO);
    assert_eq!(count(&other), 2, "the other reads after a read here");
    for rows in 3..6 {
        insert(&ours, 1, 64);
        assert_eq!(count(&other), rows, "the other reads after a commit here");
    }
    assert_eq!(count(&ours), 5);
}

#[test]
fn another_process_shares_the_mark_a_transaction_here_moved_and_reads_at() {
    if not_linux() {
        return;
    }
    let case = Case::new(LONG);
    let path = case.path("h.db");
    let ours = open(&path);
    // Rows enough that the marks fall `MOVE_FRAMES` behind the WAL's end: the next read
    // moves one, whatever the hold.
    insert(&ours, 2, 64);
    insert(&ours, 100, 3_000);
    // This connection moves mark 1 to the WAL's end and stays in its transaction.
    // Another process's reader whose snapshot ends there too shares that mark rather
    // than move another: the mark is shared, not kept exclusive (the nineteenth stop's
    // rule kept it exclusive while read at, and the reader waited).
    ours.execute_batch("BEGIN").expect("begin read");
    assert_eq!(count(&ours), 102);
    let (end, marks) = wal_end_and_marks(&path);
    assert_eq!(marks[1], end, "mark 1 moved to the WAL's end");
    assert!(mark_shareable(&path, 1), "the mark read at is shared");
    let other = plain(&path, Duration::ZERO);
    other.execute_batch("BEGIN").expect("begin read");
    assert_eq!(count_within_retries(&other), 102);
    let (_, now) = wal_end_and_marks(&path);
    assert_eq!(now, marks, "the other moved no mark: it shares mark 1");
    other.execute_batch("COMMIT").expect("end read");
    ours.execute_batch("COMMIT").expect("end read");
}

#[test]
fn another_process_reads_while_this_one_commits_with_every_other_mark_taken() {
    if not_linux() {
        return;
    }
    let case = Case::new(shm::HOLD);
    let path = case.path("s.db");
    let ours = open(&path);
    insert(&ours, 1, 64);
    let readers = three_readers(&ours, &path);
    // This process commits without a pause meanwhile. A fourth reader can move no mark:
    // SQLite's reader then shares the newest, which this process keeps shared.
    let writer = Committing::start(ours);
    let fourth = plain(&path, Duration::ZERO);
    let seen = count_within_retries(&fourth);
    let ours = writer.stop();
    assert!(seen >= 4, "{seen} rows seen");
    for r in &readers {
        r.execute_batch("COMMIT").expect("end read");
    }
    assert_eq!(count(&fourth), count(&ours));
    assert_eq!(integrity(&fourth), "ok");
}

/// The database a child process of this test binary reads with a read-only `-shm` file
/// (`child_reader_with_a_read_only_shm`), named by this variable.
const CHILD_READS: &str = "MQLITE_SHM_TEST_CHILD_READS";

/// Not a case of its own: run by `a_reader_that_may_not_move_a_mark_reads_while_this_one_commits`
/// in a child process (SQLite's own VFS shares one `-shm` mapping per file within a
/// process, so a read-only one must be another process's). Reads the rows of `t` in the
/// database `CHILD_READS` names, through a `-shm` file opened read-only, and prints them.
#[test]
fn child_reader_with_a_read_only_shm() {
    let Some(path) = std::env::var_os(CHILD_READS) else {
        return;
    };
    let uri = format!(
        "file:{}?readonly_shm=1",
        std::path::Path::new(&path).display()
    );
    let reader = Connection::open_with_flags(
        uri,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_URI,
    )
    .expect("open with a read-only -shm");
    let (mut reads, mut raced) = (0, 0);
    while reads < 20 {
        match reader.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0)) {
            Ok(rows) => {
                println!("child read {rows} rows");
                reads += 1;
            }
            // SQLite's own race for a reader that may not move a mark (with its own VFS
            // on both sides too): the mark it found moved past its snapshot between its
            // two looks, and it reports "cannot initialize" rather than retry.
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.extended_code == rusqlite::ffi::SQLITE_READONLY_CANTINIT && raced < 20 =>
            {
                raced += 1;
            }
            Err(e) => panic!("the child's read: {e}"),
        }
    }
}

#[test]
fn a_reader_that_may_not_move_a_mark_reads_while_this_one_commits() {
    if not_linux() {
        return;
    }
    let case = Case::new(shm::HOLD);
    let path = case.path("r.db");
    let ours = open(&path);
    insert(&ours, 1, 64);
    // This process commits without a pause. A reader whose `-shm` file is read-only
    // never moves a mark: it shares the newest, which this process keeps shared (it
    // failed about one run in fifteen when this process kept it exclusive for three
    // holds in four). The child reads twenty times.
    let writer = Committing::start(ours);
    let child = std::process::Command::new(std::env::current_exe().expect("this binary"))
        .args([
            "--exact",
            "child_reader_with_a_read_only_shm",
            "--nocapture",
        ])
        .env(CHILD_READS, &path)
        .output()
        .expect("run the child reader");
    let ours = writer.stop();
    let out = String::from_utf8_lossy(&child.stdout);
    // SQLite gives a read it cannot lock up after about ten seconds ("locking protocol").
    assert!(
        child.status.success() && out.contains("child read"),
        "the child reader failed: {out}{}",
        String::from_utf8_lossy(&child.stderr)
    );
    assert!(count(&ours) >= 2);
}

#[test]
fn a_reader_here_moves_a_mark_once_a_hold_or_far_behind_and_the_checkpointer_whenever_it_can() {
    if not_linux() {
        return;
    }
    let case = Case::new(LONG);
    let path = case.path("f.db");
    let ours = open_without_checkpoints(&path);
    // A read once the hold has run out moves a mark to the WAL's end.
    shm::set_hold(Duration::ZERO);
    assert_eq!(count(&ours), 1);
    shm::set_hold(LONG);
    let (end, marks) = wal_end_and_marks(&path);
    assert_eq!(marks[1], end, "the read moved mark 1 to the WAL's end");
    // Within the hold, reads here share mark 1 where it is while it is less than
    // `MOVE_FRAMES` behind the WAL's end: SQLite's reader, refused the exclusive lock a
    // move takes, shares the newest mark. Each sees every commit. Once it is that far
    // behind, the next read moves it.
    let mut rows = 1;
    loop {
        insert(&ours, 1, 64);
        rows += 1;
        let (wal_end, _) = wal_end_and_marks(&path);
        assert_eq!(count(&ours), rows);
        let (_, marks) = wal_end_and_marks(&path);
        if wal_end - end >= shm::MOVE_FRAMES {
            assert_eq!(marks[1], wal_end, "moved to the WAL's end");
            break;
        }
        assert_eq!(marks[1], end, "mark 1 stayed");
        assert!(
            marks[2..].iter().all(|&m| m == u32::MAX || m <= end),
            "no other mark moved: {marks:?}"
        );
    }
    assert!(rows > 10, "{rows} rows");
    insert(&ours, 1, 64);
    rows += 1;
    // The checkpointer is refused nothing: it moves the mark and copies every frame.
    assert_eq!(truncating_checkpoint(&ours), 0, "the checkpoint passed");
    assert_eq!(
        std::fs::metadata(format!("{}-wal", path.display()))
            .expect("wal")
            .len(),
        0
    );
    // Once the hold has run out, the next read moves the mark again.
    shm::set_hold(Duration::ZERO);
    insert(&ours, 1, 64);
    assert_eq!(count(&ours), rows + 1);
    let (end, marks) = wal_end_and_marks(&path);
    assert_eq!(marks[1], end, "moved to the WAL's end");
    assert_eq!(integrity(&ours), "ok");
}

#[test]
fn a_second_connection_leaves_sqlites_dead_man_switch_held() {
    if not_linux() {
        return;
    }
    let case = Case::new(shm::HOLD);
    let path = case.path("d.db");
    let first = open(&path);
    insert(&first, 1, 64);
    let second = open(&path);
    insert(&second, 1, 64);
    drop(second);
    insert(&first, 1, 64);
    // SQLite's unix VFS holds a read lock on byte 128 of the -shm file while this
    // process maps it; the next process to open the database resets the file only if
    // nobody does. A descriptor of the file closed anywhere in the process drops it, so
    // the VFS never closes one while the file has a name.
    assert_eq!(
        in_the_way(&path, 128, libc::F_WRLCK),
        libc::F_RDLCK,
        "the dead-man switch is still held"
    );
    assert_eq!(count(&first), 3);
}

#[test]
fn an_idle_process_lets_go_of_its_kept_locks_by_itself() {
    let case = Case::new(shm::HOLD);
    let path = case.path("i.db");
    let ours = open(&path);
    insert(&ours, 1, 64);
    // No call comes after the commit: the module's thread lets the lock go within the
    // hold or so; the other process waits for it as for any writer.
    let other = plain(&path, Duration::from_secs(30));
    other
        .execute_batch("BEGIN IMMEDIATE; INSERT INTO t (body) VALUES (x'04'); COMMIT")
        .expect("the other writes once this process is idle");
    assert_eq!(count(&ours), 2);
}

//! The checkpoint thread: WAL checkpoints on a thread and a connection of their own, so
//! that the writer (and a caller committing on its own thread) never waits for one.
//!
//! A checkpoint copies the WAL's pages into the database file and fsyncs it: on the
//! writer thread it held every caller for its whole length (about a sixth of the
//! writer's time under 16 producers, most of it waiting for the disk). SQLite lets a
//! second connection checkpoint while the first one writes (a passive checkpoint copies
//! what every reader is done with and waits for no one). What it cannot do alone is
//! restart the WAL: SQLite starts the log over at a write transaction that began when
//! every frame was copied, and under continuous commits a checkpoint running beside them
//! rarely finishes between two. So the writer still checkpoints on its own connection
//! when the WAL reaches [`CHECKPOINT_FRAMES`], as before, and the WAL stays as small as
//! it was; this thread is asked at [`ASK_FRAMES`] and after, so by then it has copied
//! and synced most of the log, and the writer's pass copies and syncs the rest. (Asked
//! at 1,000 frames with the writer's pass at 4,000, a single producer ran a quarter
//! faster, but the WAL grew to 16 MiB, and on a small full disk completions failed
//! for want of room in it.)

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use mqlite_contract::{Error, Result};
use rusqlite::{Connection, OpenFlags};

use crate::writer::CHECKPOINT_FRAMES;
use crate::{Synchronous, db};

/// The WAL size, in frames, at which this thread is asked for a checkpoint, and again
/// each time the WAL grew by as much: half of [`CHECKPOINT_FRAMES`], at which the writer
/// checkpoints on its own connection (and restarts the WAL), so that most of what the
/// writer's pass would copy and sync is copied and synced by then.
pub(crate) const ASK_FRAMES: i32 = CHECKPOINT_FRAMES / 2;

/// What the store and the thread share.
struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    /// Signalled when a pass ends.
    idle: Condvar,
    /// Checkpoints this thread has run.
    passes: Arc<AtomicU64>,
}

#[derive(Default)]
struct State {
    /// A checkpoint is asked for and has not started.
    asked: bool,
    /// A pass is under way.
    running: bool,
    /// The store is closing: the thread ends.
    closing: bool,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The checkpoint thread of one store; dropping it ends the thread and closes its
/// connection (before the writer's own connection closes, so that the last connection
/// to close is the writer's, which checkpoints and removes the WAL).
pub(crate) struct Checkpointer {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    /// Opens a second connection to the database at `path` (which the writer's
    /// connection has opened and set up) and starts the thread. `through_vfs`: through
    /// the store's VFS, as the writer's connection (which registered it), so that the
    /// two share the WAL index's locks the VFS keeps between transactions; through
    /// SQLite's own, the checkpoint would find the writer's read mark kept from it and
    /// stop short. `passes` counts the checkpoints it runs.
    pub(crate) fn start(
        path: &Path,
        sync: Synchronous,
        through_vfs: bool,
        passes: Arc<AtomicU64>,
    ) -> Result<Self> {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = if through_vfs {
            Connection::open_with_flags_and_vfs(path, flags, mqlite_sqlite_vfs::NAME)
        } else {
            Connection::open_with_flags(path, flags)
        }
        .map_err(db)?;
        // A checkpoint syncs as its connection's setting says: the writer's.
        conn.execute_batch(&format!("PRAGMA synchronous = {}", sync.pragma()))
            .map_err(db)?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            idle: Condvar::new(),
            passes,
        });
        let ours = shared.clone();
        let thread = std::thread::Builder::new()
            .name("mqlite-sqlite-checkpoint".into())
            .spawn(move || serve(&conn, &ours))
            .map_err(|e| Error::backend(crate::BACKEND, e))?;
        Ok(Checkpointer {
            shared,
            thread: Some(thread),
        })
    }

    /// Asks for a checkpoint; returns at once. Asking again before it starts asks once.
    pub(crate) fn ask(&self) {
        let mut state = self.shared.state();
        if !state.asked {
            state.asked = true;
            self.shared.wake.notify_one();
        }
    }

    /// Returns once no pass is under way, and none asked for is waiting to start: only
    /// the writer thread asks for passes, so from its thread none starts until it asks
    /// again. A checkpoint that finds another holding it answers busy at once; this
    /// lets the writer's own run whole.
    pub(crate) fn quiesce(&self) {
        let mut state = self.shared.state();
        state.asked = false;
        while state.running {
            state = self
                .shared
                .idle
                .wait(state)
                .unwrap_or_else(|e| e.into_inner());
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.shared.state().closing = true;
        self.shared.wake.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The thread: a passive checkpoint each time one is asked for, until closing.
fn serve(conn: &Connection, shared: &Shared) {
    loop {
        {
            let mut state = shared.state();
            while !state.asked && !state.closing {
                state = shared.wake.wait(state).unwrap_or_else(|e| e.into_inner());
            }
            if state.closing {
                return;
            }
            state.asked = false;
            state.running = true;
        }
        let ran = passive(conn);
        shared.state().running = false;
        shared.idle.notify_all();
        match ran {
            Ok(true) => {
                shared.passes.fetch_add(1, Ordering::Relaxed);
            }
            // The writer holds the checkpoint (its own, at the WAL's bound).
            Ok(false) => {}
            Err(e) => tracing::warn!(error = %e, "a WAL checkpoint failed; the next one retries"),
        }
    }
}

/// A passive checkpoint on `conn`; whether it ran (false: another connection held the
/// checkpoint, SQLite's busy column).
pub(crate) fn passive(conn: &Connection) -> rusqlite::Result<bool> {
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| r.get::<_, i64>(0))
        .map(|busy| busy == 0)
}

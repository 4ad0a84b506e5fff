//! Headroom for a full disk, for the local stores. A file of [`RESERVE_BYTES`] is kept
//! beside the database (`<db>-reserve`). When a write finds the disk full, the store
//! gives the reserve up ([`Reserve::release`]): the space it held lets receives and
//! settlements go on, so consumers can drain the queues (and completing messages frees
//! room inside the database for new ones). While the reserve is given up, writes that
//! add messages (sends, publishes) are refused at once with `StorageFull`, so they
//! cannot eat the headroom. At most once a second a send is let through to make room
//! first (the SQLite store truncates its WAL, the redb store compacts its file) and to
//! put the reserve back ([`Reserve::rearm`]); once it fits, the store is back to normal.

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use mqlite_contract::clock::SharedClock;
use mqlite_contract::error::{Error, Result};

/// The headroom kept beside the database (8 MiB: a drain of thousands of messages).
pub const RESERVE_BYTES: u64 = 8 << 20;
/// How often a refused send may try to re-create the reserve, ms (the store's clock).
const RETRY_MS: i64 = 1_000;

/// The reserve of one database file (none for a database without a file).
pub struct Reserve {
    path: Option<PathBuf>,
    /// The store and its database, as a refusal names them.
    backend: &'static str,
    location: Arc<str>,
    clock: SharedClock,
    state: Mutex<State>,
}

struct State {
    /// The reserve file is in place.
    armed: bool,
    /// When re-creating it was last tried (epoch ms).
    tried: Option<i64>,
}

impl Reserve {
    /// Arms the reserve beside `db` (where the disk has room for it); a refusal names
    /// `backend` and `location`.
    pub fn beside(
        db: Option<&std::path::Path>,
        backend: &'static str,
        location: Arc<str>,
        clock: SharedClock,
    ) -> Reserve {
        let path = db.map(|p| {
            let mut name = p.as_os_str().to_owned();
            name.push("-reserve");
            PathBuf::from(name)
        });
        let reserve = Reserve {
            path,
            backend,
            location,
            clock,
            state: Mutex::new(State {
                armed: false,
                tried: None,
            }),
        };
        let armed = reserve.arm();
        if !armed {
            tracing::warn!(
                reserve = ?reserve.path,
                "no room for the full-disk reserve: sends are refused until there is"
            );
        }
        reserve.lock().armed = armed;
        reserve
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes the reserve file; false (and nothing left behind) when it does not fit.
    fn arm(&self) -> bool {
        let Some(path) = &self.path else { return true };
        if std::fs::metadata(path).is_ok_and(|m| m.len() >= RESERVE_BYTES) {
            return true;
        }
        // Allocated, not sized: a sparse file would hold no space.
        let written = File::create(path).and_then(|mut f| {
            if allocate(&f).is_ok() {
                return Ok(());
            }
            let chunk = vec![0u8; 1 << 20];
            for _ in 0..RESERVE_BYTES / chunk.len() as u64 {
                f.write_all(&chunk)?;
            }
            f.flush()
        });
        if written.is_err() {
            let _ = std::fs::remove_file(path);
        }
        written.is_ok()
    }

    /// A write found the database full: when the disk itself is (not a page-count cap
    /// of the database), gives the reserve's space up for the writes that drain.
    pub fn release(&self) {
        let Some(path) = &self.path else { return };
        if free_space(path).is_some_and(|free| free >= RESERVE_BYTES) {
            return;
        }
        let mut state = self.lock();
        if state.armed {
            state.armed = false;
            state.tried = Some(self.clock.now_ms());
            let _ = std::fs::remove_file(path);
            tracing::warn!(
                reserve = %path.display(),
                "the disk is full: the reserve is released for receives and settlements; \
                 sends are refused until space returns"
            );
        }
    }

    /// Whether a write that adds messages may run now: yes with the reserve in place; a
    /// retry when the reserve is given up and a second has passed since the last try
    /// (room is made, [`Reserve::rearm`] runs, then the write checks
    /// [`Reserve::ensure_armed`]); else no.
    fn admits_growth(&self) -> Growth {
        let mut state = self.lock();
        if state.armed {
            return Growth::Yes;
        }
        let now = self.clock.now_ms();
        if state.tried.is_some_and(|t| now - t < RETRY_MS) {
            return Growth::No;
        }
        state.tried = Some(now);
        Growth::Retry
    }

    /// The check a write that adds messages makes on the writer thread, before it
    /// writes: `StorageFull` unless the reserve is in place.
    pub fn ensure_armed(&self) -> Result<()> {
        if self.lock().armed {
            Ok(())
        } else {
            Err(self.full())
        }
    }

    /// The refusal of a write that adds messages while the disk is full.
    fn full(&self) -> Error {
        Error::StorageFull {
            backend: self.backend,
            location: self.location.to_string(),
        }
    }

    /// Runs a write that adds messages (a send, a publish) behind the reserve. While
    /// the disk is full it is refused at once with `StorageFull` and never handed
    /// to the store's writer. When a retry is due, `make_room` is queued first (it
    /// frees what the store can, then calls [`Reserve::rearm`]) and `write` behind it;
    /// `write` runs on the writer thread, so it calls [`Reserve::ensure_armed`] there
    /// (after `make_room` ran) before it writes.
    pub fn growing<R, Room, Run>(
        self: &Arc<Self>,
        make_room: impl FnOnce(Arc<Reserve>) -> Room,
        write: impl FnOnce(Arc<Reserve>) -> Run,
    ) -> impl Future<Output = Result<R>> + Send + 'static
    where
        R: Send + 'static,
        Room: Future<Output = Result<()>> + Send + 'static,
        Run: Future<Output = Result<R>> + Send + 'static,
    {
        let growth = self.admits_growth();
        let room = (growth == Growth::Retry).then(|| make_room(self.clone()));
        // The refusal is made only when it is the answer (it names the location).
        let run = match growth {
            Growth::No => Err(self.full()),
            _ => Ok(write(self.clone())),
        };
        async move {
            if let Some(room) = room {
                room.await?;
            }
            run?.await
        }
    }

    /// Tries to put the reserve back ([`Reserve::ensure_armed`] tells whether it is).
    pub fn rearm(&self) {
        let mut state = self.lock();
        if !state.armed {
            state.armed = self.arm();
            if state.armed {
                tracing::info!("space is back: the full-disk reserve is in place, sends resume");
            }
        }
    }
}

/// What [`Reserve::admits_growth`] says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Growth {
    /// The reserve is in place: go on.
    Yes,
    /// The disk is full and a retry is not due: refuse with `StorageFull`.
    No,
    /// A retry is due: make room, [`Reserve::rearm`], and go on if it is armed again.
    Retry,
}

/// Allocates the reserve's blocks without writing them, where the filesystem can.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn allocate(f: &File) -> std::io::Result<()> {
    rustix::fs::fallocate(f, rustix::fs::FallocateFlags::empty(), 0, RESERVE_BYTES)
        .map_err(std::io::Error::from)
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn allocate(_: &File) -> std::io::Result<()> {
    Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
}

/// The space left for unprivileged writes on the filesystem holding `path`, where the
/// platform says.
#[cfg(unix)]
fn free_space(path: &std::path::Path) -> Option<u64> {
    let dir = path.parent()?;
    let st = rustix::fs::statvfs(dir).ok()?;
    Some(st.f_bavail.saturating_mul(st.f_frsize))
}

#[cfg(not(unix))]
fn free_space(_: &std::path::Path) -> Option<u64> {
    None
}

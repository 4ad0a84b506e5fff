//! The one error type at the storage boundary and in the public API.
//!
//! Every variant says what happened in terms a caller can act on; backends convert their
//! native errors into [`Error::Backend`] and never into strings.

use std::fmt;

/// The result type used across mqlite.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in mqlite.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The settlement or renewal found no live lease under this token: the lease expired,
    /// the message was delivered again, settled, or is in another queue (promises 2.6,
    /// 2.9). Nothing changed. `reason` says which, as far as the store can tell.
    #[error("lock lost: {reason}")]
    LockLost {
        /// Why, as far as the store can tell.
        reason: LockLostReason,
    },
    /// A single send repeated a message id, within the dedup window, with another body
    /// (promise 4.2).
    #[error("dedup conflict: message id {message_id:?} was already sent with another body")]
    DedupConflict {
        /// The message id (or content key) that collided.
        message_id: String,
    },
    /// The queue is group_fifo and the message has no group id (promise 5.2).
    #[error(
        "queue {queue:?} is group_fifo: every message needs a group id (set \
         OutMessage::group_id; on the wire `group_id`; `mqlite send --group-id`)"
    )]
    GroupRequired {
        /// The queue that refused the message.
        queue: String,
    },
    /// The queue's status refuses sends (promise 19.1): nothing was stored.
    #[error(
        "queue {queue:?} is paused for sends (status {status}): nothing was stored; resume \
         it (`Engine::set_queue_status`; `mqlite resume {queue}`) or send later"
    )]
    QueuePaused {
        /// The queue that refused the send.
        queue: String,
        /// Its status.
        status: crate::types::QueueStatus,
    },
    /// A named object does not exist.
    #[error("{kind} {name:?} not found{}", not_found_hint(kind))]
    NotFound {
        /// What was looked for ("queue", "message", ...).
        kind: &'static str,
        /// Its name or number.
        name: String,
    },
    /// The name is already taken by an object of another kind (promise 12.1).
    #[error("name {name:?} is already used by a {existing}")]
    NameConflict {
        /// The name asked for.
        name: String,
        /// The kind that holds it.
        existing: String,
    },
    /// Another writer holds the database file (promise 10.1).
    #[error("database {path} is {holder}")]
    DbLocked {
        /// The canonical path of the database.
        path: String,
        /// Who holds it, and so what to do.
        holder: LockHolder,
    },
    /// The database carries another schema guard token (promise 10.2): written by
    /// another layout of mqlite, or by something else. Layouts are never migrated in
    /// place, so the file is left exactly as it was; `mqlite migrate` (the SQLite store's
    /// `migrate`) copies a file of a released layout into a new one.
    #[error(
        "the database's schema is {found:?}, this binary reads {expected:?}: it was written \
         by another mqlite layout. `mqlite migrate <this file> <new file>` copies a SQLite \
         file of a released layout into a new file of this one; or open it with the mqlite \
         version that wrote it (layouts are never migrated in place: the file was not \
         touched)"
    )]
    SchemaVersionMismatch {
        /// The token found in the database.
        found: String,
        /// The token of this binary.
        expected: &'static str,
    },
    /// The path names something that is not a database mqlite can open: a directory, a
    /// file that is not a database of the store's kind, or a database whose own tables
    /// use mqlite's names. Nothing was written to it.
    #[error("{path} is not a database mqlite can open: {detail} (nothing was written to it)")]
    NotADatabase {
        /// The path as given or resolved.
        path: String,
        /// What it is instead, and what to do.
        detail: String,
    },
    /// The engine is closed (or closing) and admits no more work (promise 14.5).
    #[error("engine is closed")]
    Closed,
    /// The caller went away before the work was admitted or committed (promise 13).
    #[error("cancelled")]
    Cancelled,
    /// The request is malformed or outside the documented limits.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A message body exceeds the configured limit.
    #[error(
        "message of {size} bytes exceeds the limit of {limit} bytes (raise it with \
         EngineOptions::max_message_bytes; a broker's is --max-message-bytes, \
         MQLITE_MAX_MESSAGE_BYTES)"
    )]
    MessageTooLarge {
        /// The body size.
        size: usize,
        /// The configured limit.
        limit: usize,
    },
    /// An access key id is already taken (the wire's `key_conflict`).
    #[error("access key {id:?} already exists")]
    KeyConflict {
        /// The id asked for.
        id: String,
    },
    /// This engine no longer owns the store: another owner took it over with a higher
    /// epoch, so this one's writes are refused and change nothing (a remote store's
    /// ownership lease, see [`crate::Ownership`]).
    #[error("the store is owned by another engine now (this owner's epoch {epoch} is stale)")]
    Deposed {
        /// The epoch this engine held.
        epoch: u64,
    },
    /// A commit was sent but its fate is unknown (a remote store lost the connection
    /// before the answer): the work may or may not have committed. Never reported as
    /// success or as plain failure; retrying may repeat the effect (promise 10.3).
    #[error("{backend}: the outcome of the commit is unknown")]
    OutcomeUnknown {
        /// Which backend.
        backend: &'static str,
        /// What was seen.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// The disk (or the quota) holding the database is full: the write was not made.
    /// Settlements, which delete rows, keep working as far as the store's reserve allows;
    /// free space, or drain the queues, and writes resume.
    #[error(
        "{backend}: the disk holding {location} is full: nothing was written; free space \
         on it (completing messages still works and frees space in the file)"
    )]
    StorageFull {
        /// Which backend.
        backend: &'static str,
        /// The database (its path), as far as the store knows it.
        location: String,
    },
    /// The database file was deleted or replaced under the running store: writes are
    /// refused from then on, since they would go to a file nobody will open again.
    #[error(
        "{location} was deleted or replaced while the store had it open ({detail}): writes \
         are refused; put the file back or restart the process on the right file"
    )]
    StoreGone {
        /// The database path.
        location: String,
        /// What was seen.
        detail: String,
    },
    /// A broker refused a call with an error this type has no variant for (401
    /// `unauthenticated`, 403 `permission_denied`, 500 `internal`, ...): the remote
    /// client's answer, with the wire's status, code and message.
    #[error("the broker answered {status} {code}: {message}")]
    Remote {
        /// The HTTP status.
        status: u16,
        /// The wire's error code.
        code: String,
        /// The broker's message.
        message: String,
    },
    /// The storage backend failed. The native error is the [`std::error::Error::source`];
    /// it is not repeated in this message.
    #[error("{backend} backend error")]
    Backend {
        /// Which backend ("sqlite", "libsql", "redb").
        backend: &'static str,
        /// Whether the same call may succeed if retried (a dropped connection, an
        /// overloaded server), as the backend classified it.
        transient: bool,
        /// The native error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
}

/// An error and its sources, `a: b: c`, each source once (a message that already quotes
/// its source does not repeat it): what a log line or a command's last words say.
pub fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let more = s.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = s.source();
    }
    text
}

/// Why a lock token no longer settles its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LockLostReason {
    /// The lease ran out (`locked_until <= now`); the reaper has not run yet.
    Expired,
    /// The message was delivered again, under another token.
    OtherToken,
    /// The message is no longer locked: the reaper returned it, or it was deferred or
    /// dead-lettered.
    NotLocked,
    /// No such message: completed, discarded, purged, or never sent.
    Gone,
    /// The message belongs to another queue than the one named.
    WrongQueue,
    /// The token is not one a receive hands out (a lock token is 32 hexadecimal
    /// characters): it can hold no lease.
    NotIssued,
    /// The store cannot tell.
    Unknown,
}

impl fmt::Display for LockLostReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LockLostReason::Expired => {
                "the lease expired before the call (renew it while the work runs)"
            }
            LockLostReason::OtherToken => {
                "the message was delivered again under another token; this holder is fenced"
            }
            LockLostReason::NotLocked => {
                "the message is no longer locked (returned by the reaper, deferred or \
                 dead-lettered)"
            }
            LockLostReason::Gone => {
                "no such message: it was completed, discarded or never sent (an identical \
                 repeat of a call that succeeded replays Ok for 30 minutes instead)"
            }
            LockLostReason::WrongQueue => "the message belongs to another queue",
            LockLostReason::NotIssued => {
                "the token was never issued for this message (a receive hands out one token \
                 of 32 hexadecimal characters per delivery: settle with the one it gave)"
            }
            LockLostReason::Unknown => "the lease is expired, settled, or held by another token",
        })
    }
}

/// Who holds a database that an open found locked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockHolder {
    /// An engine of this very process: clone it instead of opening the file again.
    ThisProcess,
    /// Another process: one process writes a file.
    AnotherProcess,
    /// Another engine holds the owner lease of a remote database (until it lapses).
    AnotherOwner,
}

impl fmt::Display for LockHolder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LockHolder::ThisProcess => {
                "already open in this process: clone the Engine (clones share one store) \
                 instead of opening the file twice"
            }
            LockHolder::AnotherProcess => {
                "locked by another process: one process writes a file, and other processes \
                 reach its queues through that one (if it is `mqlite serve`, call it over \
                 HTTP: `mqlite --endpoint URL`, or mqlite::remote::Client)"
            }
            LockHolder::AnotherOwner => {
                "owned by another engine, whose lease is live: one owner writes a remote \
                 database; other hosts reach its queues through the owner's broker, and \
                 take over once its lease lapses"
            }
        })
    }
}

/// What to do about a missing object of `kind` (appended to [`Error::NotFound`]).
fn not_found_hint(kind: &str) -> &'static str {
    match kind {
        "queue" => {
            ": create it first (Engine::create_queue; `mqlite create-queue NAME`; \
             CreateQueue on the wire)"
        }
        "topic" => ": a topic comes into being with its first subscription (subscribe)",
        _ => "",
    }
}

impl Error {
    /// Shorthand for [`Error::InvalidArgument`].
    pub fn invalid(msg: impl fmt::Display) -> Self {
        Error::InvalidArgument(msg.to_string())
    }

    /// Shorthand for a missing queue.
    pub fn queue_not_found(name: &str) -> Self {
        Error::NotFound {
            kind: "queue",
            name: name.to_owned(),
        }
    }

    /// A copy of this error for every caller of a failed group commit, when it is one
    /// of the variants that say what to do (a full disk, a vanished file, a deposed
    /// owner); None for the others, which carry a native source.
    pub fn for_each_caller(&self) -> Option<Error> {
        match self {
            Error::StorageFull { backend, location } => Some(Error::StorageFull {
                backend,
                location: location.clone(),
            }),
            Error::StoreGone { location, detail } => Some(Error::StoreGone {
                location: location.clone(),
                detail: detail.clone(),
            }),
            Error::Deposed { epoch } => Some(Error::Deposed { epoch: *epoch }),
            Error::Closed => Some(Error::Closed),
            _ => None,
        }
    }

    /// Names the database in an error that says so without knowing it.
    pub fn at_location(self, path: &str) -> Self {
        match self {
            Error::StorageFull { backend, location } if location.is_empty() => Error::StorageFull {
                backend,
                location: path.to_owned(),
            },
            other => other,
        }
    }

    /// Wraps a native backend error that a retry would not cure.
    pub fn backend(
        backend: &'static str,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::Backend {
            backend,
            transient: false,
            source: Box::new(source),
        }
    }

    /// Wraps a native backend error that a retry of the same call may cure (a remote
    /// store's dropped connection, say), known not to have committed anything.
    pub fn transient(
        backend: &'static str,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::Backend {
            backend,
            transient: true,
            source: Box::new(source),
        }
    }

    /// Whether retrying the same call may succeed and cannot double its effect: only a
    /// backend failure the backend classified as transient. `OutcomeUnknown` is not
    /// transient (the first attempt may have committed), and neither is any refusal.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Error::Backend {
                transient: true,
                ..
            }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::Error;

    #[derive(Debug)]
    struct Native;
    impl std::fmt::Display for Native {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("disk I/O error")
        }
    }
    impl std::error::Error for Native {}

    /// The backend's message is the source, said once: a reporter that walks the chain
    /// prints "sqlite backend error: disk I/O error", not the native text twice.
    #[test]
    fn backend_display_does_not_repeat_its_source() {
        let e = Error::backend("sqlite", Native);
        assert_eq!(e.to_string(), "sqlite backend error");
        let source = std::error::Error::source(&e).map(ToString::to_string);
        assert_eq!(source.as_deref(), Some("disk I/O error"));
    }

    #[test]
    fn only_transient_backend_errors_are_transient() {
        assert!(Error::transient("libsql", Native).is_transient());
        assert!(!Error::backend("sqlite", Native).is_transient());
        let unknown = Error::OutcomeUnknown {
            backend: "libsql",
            source: Box::new(Native),
        };
        assert!(!unknown.is_transient());
        assert!(
            !Error::LockLost {
                reason: super::LockLostReason::Unknown
            }
            .is_transient()
        );
        assert!(!Error::Closed.is_transient());
    }
}

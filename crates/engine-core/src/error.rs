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
    /// The lock token is not the current one, the message is not locked, or the lease
    /// has expired (promises 2.6, 2.9).
    #[error("lock lost: the lease is expired, settled, or held by another token")]
    LockLost,
    /// A single send repeated a message id, within the dedup window, with another body
    /// (promise 4.2).
    #[error("dedup conflict: message id {message_id:?} was already sent with another body")]
    DedupConflict {
        /// The message id (or content key) that collided.
        message_id: String,
    },
    /// The queue is group_fifo and the message has no group id (promise 5.2).
    #[error("queue {queue:?} requires a group id on every message")]
    GroupRequired {
        /// The queue that refused the message.
        queue: String,
    },
    /// A named object does not exist.
    #[error("{kind} {name:?} not found")]
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
    #[error("database {path} is locked by another writer")]
    DbLocked {
        /// The canonical path of the database.
        path: String,
    },
    /// The database carries another schema guard token (promise 10.2).
    #[error("schema mismatch: database has {found:?}, this binary expects {expected:?}")]
    SchemaVersionMismatch {
        /// The token found in the database (empty when the file is not an mqlite database).
        found: String,
        /// The token of this binary.
        expected: &'static str,
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
    #[error("message of {size} bytes exceeds the limit of {limit} bytes")]
    MessageTooLarge {
        /// The body size.
        size: usize,
        /// The configured limit.
        limit: usize,
    },
    /// The storage backend failed.
    #[error("{backend} backend error: {source}")]
    Backend {
        /// Which backend ("sqlite", "libsql", "redb").
        backend: &'static str,
        /// The native error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
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

    /// Wraps a native backend error.
    pub fn backend(
        backend: &'static str,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::Backend {
            backend,
            source: Box::new(source),
        }
    }
}

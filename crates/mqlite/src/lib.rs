//! mqlite: a reliable message queue that lives in one SQLite file.
//!
//! ```no_run
//! # async fn demo() -> mqlite::Result<()> {
//! let mq = mqlite::Engine::open("app.db").await?;
//! mq.create_queue("jobs", mqlite::QueueConfig::default()).await?;
//! mq.send("jobs", mqlite::OutMessage::new("hello")).await?;
//! if let Some(m) = mq.receive_one("jobs").await? {
//!     mq.complete("jobs", &m).await?;
//! }
//! # Ok(()) }
//! ```
//!
//! Two engines, one API:
//! - [`Engine`] is typed over the SQLite store: no boxing, and the transactional outbox
//!   ([`Engine::tx`](mqlite_engine::Engine::tx)) hands you the native rusqlite
//!   transaction.
//! - [`AnyEngine`] holds a store chosen at run time from a location ([`open`]): a file
//!   path, `:memory:`, `redb:<path>` (with the `redb` feature), or `libsql://` and
//!   `https://` (with the `libsql` feature). Every queue
//!   operation works the same; the outbox is reached by naming the concrete store
//!   (`tx::<SqliteStore, _, _>`), since its native handle is the store's own type.
//!
//! With the `remote` feature, `remote::Client` reaches the queues of a broker
//! (`mqlite serve`) with the same methods, types and worker.
//!
//! # Features
//!
//! | feature | default | what it adds |
//! |---|---|---|
//! | `sqlite` | yes | the local SQLite store: [`Engine`], file paths and `:memory:` |
//! | `redb` | no | the redb store: `redb:<path>` locations |
//! | `libsql` | no | the remote libSQL store: `libsql://…`, `http(s)://…` locations |
//! | `serde` | no | typed bodies: `Engine::send_json`, `Message::json` |
//! | `metrics` | no | counters and histograms through the `metrics` facade |
//! | `remote` | no | `remote`: a typed client of a broker, and the worker over it |
//! | `tls` | no | `mqlites://` DSNs for the remote client (HTTPS, rustls) |

// A build with no store compiles (and opens nothing): the registry's code over the
// stores is then empty, and its variables unused.
#![cfg_attr(
    not(any(feature = "sqlite", feature = "redb", feature = "libsql")),
    allow(unused)
)]

// The user's API, by name: `Store` to write code generic over the store, `DynStore` to
// name the run-time engine's; what only a store author needs (`StoreTx`,
// `OutboxStore`, `Ownership`, `WorkStats`, the parameter types such as `ClaimSpec`)
// stays in `mqlite-contract`, and the writer thread, codec and planners in `mqlite-kit`.
pub use mqlite_contract::{
    AccessKey, BatchResult, Clock, CreatedKey, DEFAULT_LOCK_DURATION, DEFAULT_MAX_DELIVERY_COUNT,
    DynStore, EnqueueSlot, Error, EventIdentity, LockHolder, LockLostReason, LockRef, LockToken,
    ManualClock, Message, OutMessage, PeekOptions, Permission, PurgeOptions, QueueConfig,
    QueueInfo, QueueStats, REASON_MAX_DELIVERY, REASON_TTL_EXPIRED, RECEIPT_TTL_MS, ReceiveMode,
    ReceiveOptions, RedriveOptions, Result, RetentionDefaults, SendOptions, SeqNumber, SharedClock,
    Store, Subscription, SystemClock,
};
pub use mqlite_contract::{
    MIN_SCHEDULE_INTERVAL, MessageState, Missed, OrderingMode, QueueKind, QueueStatus, Recurrence,
    Schedule, ScheduleSpec,
};
pub use mqlite_engine::{EngineOptions, EngineTx, LeasesAtOpen, LoopKind, Queue, SweepReport};

/// The worker: handlers over long-polls with renewal, retries and a graceful stop.
pub mod worker {
    pub use mqlite_engine::worker::{
        HandlerError, Heartbeat, REASON_HANDLER_FAILED, REASON_MAX_RUNTIME,
        REASON_RETRIES_EXHAUSTED, REASON_STALLED, RetryPolicy, Source, Worker, WorkerReport,
        heartbeat,
    };
}

/// The engine over any store `S` (generic code that serves the typed and the run-time
/// engine alike).
pub type GenericEngine<S> = mqlite_engine::Engine<S>;

mod registry;
pub use registry::{
    __store_crates, AnyEngine, Location, StoreInfo, open, open_store, open_with, stores,
};

/// What a filter test says: valid or not (with the compile error), and whether a given
/// message matches.
pub use mqlite_engine::FilterTest;

/// The engine's limits: what every call is checked against, and the checks of names.
pub mod limits {
    pub use mqlite_engine::engine::{
        DEFAULT_MAX_MESSAGE_BYTES, MAX_ABANDON_DELAY, MAX_CACHED_FILTERS, MAX_COMPLETE_BATCH,
        MAX_KEY_PAGE, MAX_NAME_BYTES, MAX_PEEK, MAX_RECEIVE_BATCH, MAX_REDRIVE_SELECTION,
        MAX_RENEW_BATCH, MAX_SEND_BATCH, MAX_WAIT, validate_name, validate_new_name,
    };
}

/// Access tokens: minting one, the digest a key is stored by, random secrets.
pub mod access {
    pub use mqlite_contract::access::{mint_token, random_hex, token_digest};
}

/// Hexadecimal text and SHA-256 digests, as the store writes them.
pub mod digest {
    pub use mqlite_contract::digest::{hex, sha256_hex};
}

/// An error and its sources, `a: b: c`, each once: for a log line or a last word.
pub use mqlite_contract::error::chain as error_chain;

pub mod trace;

#[cfg(feature = "remote")]
pub mod remote;

/// Event identity (CloudEvents 1.0.2): the dedup key, the fingerprint, and the HTTP
/// binary and structured modes.
pub mod event {
    pub use mqlite_contract::event::{
        EventIdentity, Fingerprint, fingerprint, from_binary_headers, from_structured,
        to_binary_headers, to_structured,
    };
}

/// The consumer inbox: an effect and its marker in one transaction of the consumer's
/// database (17.2–17.4).
pub mod inbox {
    pub use mqlite_contract::side_tables::InboxMarker;
    pub use mqlite_engine::inbox::{
        DEFAULT_INBOX_RETENTION, Inbox, Processed, REASON_INBOX_CONFLICT, settle,
    };
}

/// The relay from a producer's database to a queue in another.
pub mod relay {
    pub use mqlite_contract::side_tables::{RelayBacklog, RelayIntent};
    pub use mqlite_engine::relay::{
        DEFAULT_RELAY_BATCH, DEFAULT_RELAY_INTERVAL, DEFAULT_RELAY_RETENTION, Relay, RelayRound,
        SentIntents,
    };
}

#[cfg(feature = "sqlite")]
pub use mqlite_store_sqlite::{
    HoldBound, HoldSnapshot, MigrationReport, SqliteOptions, SqliteStore, SqliteTx, Synchronous,
    VacuumReport, migrate, rusqlite,
};

#[cfg(feature = "redb")]
pub use mqlite_store_redb::{RedbOptions, RedbStore, RedbTx, redb};

#[cfg(feature = "libsql")]
pub use mqlite_store_libsql::{LibsqlOptions, LibsqlStore, LibsqlTx};

/// The engine over the default SQLite store: open a file (or `:memory:`), and every
/// queue operation, the worker and the outbox are methods of it. Clones share one store.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let mq = mqlite::Engine::open(":memory:").await?;
/// mq.create_queue("jobs", mqlite::QueueConfig::default()).await?;
/// let seq = mq.send("jobs", mqlite::OutMessage::new("resize photo 1")).await?;
/// let m = mq.receive_one("jobs").await?.expect("the message");
/// assert_eq!((m.seq, m.body()), (seq, &b"resize photo 1"[..]));
/// mq.complete("jobs", &m).await?;
/// mq.close().await;
/// # Ok::<(), mqlite::Error>(()) }).unwrap();
/// ```
#[cfg(feature = "sqlite")]
pub type Engine = mqlite_engine::Engine<SqliteStore>;

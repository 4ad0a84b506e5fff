//! The storage boundary. A [`Store`] implements the queue's transitions natively (SQL
//! text for the SQL stores, hand-built indexes elsewhere); the engine (crate `mqlite-engine`) above it
//! holds what is the same for every store: validation, limits, the clock's loops,
//! long-poll wake-ups and the public API.
//!
//! Three traits, from narrow to wide:
//! - [`Store`]: every queue operation, native async (`impl Future`), so an embedder who
//!   names the store at compile time pays no boxing;
//! - [`OutboxStore`]: a `Store` that can also run the application's own transaction
//!   with its native handle ([`OutboxStore::in_tx`], the transactional outbox);
//! - [`crate::DynStore`]: a run-time choice of store (`Box<dyn …>` inside), for a program
//!   that picks its backend from a URL. It implements `Store`, so `Engine<DynStore>`
//!   runs every operation; the outbox is reached through [`HasOutbox`] by naming the
//!   concrete store.
//!
//! Each method's `# Behavior` list is the contract, numbered as in docs/promises.md;
//! the TCK (`mqlite-tck`) checks every item against every store.
//!
//! # The line rule
//!
//! Ordering (5.1–5.5) is the same on every store, and this is it, stated once:
//!
//! - A message's **line** is fixed when it enters a queue: its group id on a standard or
//!   group_fifo queue, one line for the whole queue on strict_fifo, and no line for an
//!   ungrouped message of a standard queue.
//! - A line's order is sequence order. Its **head** is its oldest message still in play
//!   (active, locked, deferred or scheduled). Only a head is claimable; every other
//!   member of the line waits. Messages without a line are each their own head.
//! - A head keeps its line while locked (even after its lease expired, until the reaper
//!   resettles it: 5.4), while deferred (2.4), and while parked in scheduled after an
//!   Abandon with a delay (5.5).
//! - When the head leaves play (completed, dead-lettered, discarded by TTL, cancelled,
//!   or deleted by receive-and-delete), the operation that removed it promotes the oldest
//!   remaining in-play member of the line to head, in the same transaction.
//! - Enqueue: a message joins its line as head when the line has nothing in play, and
//!   waits otherwise. Two messages of one line in one batch line up behind each other in
//!   batch order (their sequence numbers increase in batch order).
//! - Receive-and-delete leaves nothing in flight, so one batch may take a head, then its
//!   successor, and so on, in line order, while each is active, visible and unexpired.
//!
//! Decided cases (each pinned by a TCK case):
//! - **Scheduled at send time** (5.7): a message sent with a future `scheduled_at_ms`
//!   joins its line at send time like any other, so it holds the line until it is due,
//!   delivered and settled; later messages of its group wait. Sequence order is send
//!   order. Send such a message without a group if it must not hold one.
//! - **Redrive** (5.8): a redriven dead letter keeps its sequence number and re-enters
//!   its target line by it. It never preempts the current head; it goes ahead of
//!   younger members that still wait (when the head leaves, the oldest in-play member,
//!   which may be the redriven one, is promoted).
//! - **Redrive into group_fifo without a group** (5.9): refused with `GroupRequired`
//!   for the whole call, and nothing moves: a group_fifo queue never holds an
//!   ungrouped message.

use std::future::Future;

use crate::clock::SharedClock;
use crate::error::{Error, Result};
use crate::ops::{AdminOps, KeyOps, MessageOps, TopicOps};
use crate::side_tables::{InboxMarker, RelayBacklog, RelayIntent, SentEvidence, SideSweep};
use crate::types::{EnqueueSlot, OutMessage, SendOptions};

/// How an opened store holds its data. Opening a store means owning it; orphan
/// recovery (3.1) runs only under ownership, because resetting every locked row is
/// right only for the sole owner: a second owner would strip the first one's live
/// leases (1.2, 14.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Ownership {
    /// The store alone can write its data: a local file under the one-writer lock
    /// (10.1), or a private in-memory database. Costs nothing per statement.
    Exclusive,
    /// Ownership is a lease kept in the data itself (a remote database several hosts
    /// can reach). Every write checks `epoch` in its own transaction; once another host
    /// takes over with a higher epoch, this owner's writes fail with
    /// [`Error::Deposed`] and change nothing.
    Lease {
        /// This owner's epoch.
        epoch: u64,
    },
}

/// Work a store has done since it opened: how many statements (or transactions' worth
/// of index operations) it ran and how many rows or index entries it visited. Tests
/// read it before and after an operation to pin its cost; a count is stable where a
/// time is not.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkStats {
    /// Statements executed (SQL stores) or lookups issued (key-value stores).
    pub statements: u64,
    /// Rows or index entries visited: SQLite's virtual-machine steps (each visited row
    /// or index entry costs a bounded number of them), a key-value store's entries read.
    pub visits: u64,
}

impl std::ops::Sub for WorkStats {
    type Output = WorkStats;
    fn sub(self, rhs: WorkStats) -> WorkStats {
        WorkStats {
            statements: self.statements.saturating_sub(rhs.statements),
            visits: self.visits.saturating_sub(rhs.visits),
        }
    }
}

/// What a store says about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreStatus {
    /// The backend's short name ("sqlite", "libsql", "redb").
    pub backend: &'static str,
    /// Where the data lives, safe to show: a file path, `:memory:`, a remote host with
    /// credentials removed. Never a secret.
    pub location: String,
    /// Whether the data is on another machine.
    pub remote: bool,
    /// The schema guard token of the data.
    pub schema_token: String,
    /// Size of the data in bytes, when the store can tell.
    pub size_bytes: Option<u64>,
    /// Queues (kind queue).
    pub queues: u64,
    /// Topics.
    pub topics: u64,
    /// Subscriptions.
    pub subscriptions: u64,
    /// The relay's backlog in this database: intents not yet published, and when the
    /// oldest was written (zero without a relay outbox).
    pub relay: RelayBacklog,
}

/// The narrow boundary every backend implements, native async.
///
/// Every method samples the store's clock at statement time (after it is admitted to the
/// writer), never before, so a lease that lapses while a call waits is already expired.
/// A future dropped before the store admits its work executes nothing (13.1, 13.2).
/// Once admitted, work runs to its commit like a request whose client hung up, or is
/// rolled back if the store can still tell the caller is gone before committing (13.4).
///
/// A store may let calls waiting for its writer share one commit (group commit, as the
/// SQLite store does through the store kit's `WriterThread::run_grouped`) under one
/// rule (14.6): each call is independent — its failure undoes its own work alone and
/// its neighbours commit; no call is answered before the commit that holds it; a call
/// admitted into a group commits with the group even if its caller leaves after its
/// work is done; and a commit that fails fails every call it held, with nothing of the
/// group visible. The application's transaction ([`OutboxStore::in_tx`]) is always a
/// transaction of its own.
pub trait Store: MessageOps + AdminOps + KeyOps + TopicOps {
    /// A short name of the backend ("sqlite", "libsql", "redb").
    fn backend(&self) -> &'static str;

    /// The clock every statement reads.
    fn clock(&self) -> &SharedClock;

    /// How this opened store holds its data (see [`Ownership`]).
    fn ownership(&self) -> Ownership;

    /// Work done since open, or None if the store cannot count it.
    fn work(&self) -> Option<WorkStats>;

    /// Whether the store can give free pages back to the file system
    /// ([`RecoverTask::Vacuum`](crate::RecoverTask::Vacuum)): a local SQLite file. The
    /// engine's janitor asks the vacuum step only of a store that says yes, so the
    /// others (a remote server that manages its own file, redb that reuses its pages)
    /// run no transaction for it. The default is no.
    fn reclaims_pages(&self) -> bool {
        false
    }

    /// What the store says about itself: backend, location, schema token, counts.
    fn status(&self) -> impl Future<Output = Result<StoreStatus>> + Send;

    /// Finishes the work already admitted, then releases the data and its ownership
    /// (14.5).
    fn close(&self) -> impl Future<Output = ()> + Send;
}

/// A store that can run the application's own transaction with its native handle: the
/// transactional outbox (16.1, 16.2).
///
/// The body is an async closure, so one shape fits a synchronous native transaction
/// (rusqlite, redb: the body just calls it) and an asynchronous one (libsql: the body
/// awaits it). The store runs the body where its handle lives (the SQLite store: on its
/// writer thread), so the body's future need not be `Send`.
pub trait OutboxStore: Store {
    /// The store's handle inside an application transaction.
    type Tx<'t>: StoreTx;

    /// Runs `f` inside one store transaction with the store's native handle.
    ///
    /// # Behavior
    /// - `Ok` commits the application's writes and every enqueue together; `Err`, a panic
    ///   (re-raised to the caller) or the caller's cancellation before commit rolls all of
    ///   it back (16.1, 13.4).
    fn in_tx<R, E, F>(&self, f: F) -> impl Future<Output = Result<R, E>> + Send
    where
        F: for<'a, 't> AsyncFnOnce(&'a mut Self::Tx<'t>) -> Result<R, E> + Send + 'static,
        R: Send + 'static,
        E: From<Error> + Send + 'static;
}

/// The store's side of an application transaction.
pub trait StoreTx {
    /// Enqueues inside the surrounding transaction, with [`MessageOps::enqueue`]'s
    /// behaviour.
    fn enqueue(
        &mut self,
        queue: &str,
        messages: Vec<OutMessage>,
        options: SendOptions,
    ) -> impl Future<Output = Result<Vec<EnqueueSlot>>>;

    /// `Cancelled` once the caller of the transaction has gone away (13.4).
    fn check_cancelled(&self) -> Result<()>;

    /// The statement time of this transaction (epoch ms, from the store's clock).
    fn now_ms(&self) -> i64;

    // ----- the side tables (crate::side_tables): created by the store on first write; a
    // ----- read of a table never created answers empty and creates nothing ---------

    /// Every consumer's inbox marker for the event `(source, id)`, by consumer.
    fn inbox_markers(
        &mut self,
        source: &str,
        id: &str,
    ) -> impl Future<Output = Result<Vec<InboxMarker>>>;

    /// Records an inbox marker (the caller checked there is none for its consumer).
    fn inbox_insert(&mut self, marker: &InboxMarker) -> impl Future<Output = Result<()>>;

    /// Writes a relay intent for `queue` at this transaction's time; returns its seq.
    fn relay_insert(
        &mut self,
        queue: &str,
        message: &OutMessage,
    ) -> impl Future<Output = Result<i64>>;

    /// Up to `limit` unpublished intents, oldest first (by seq).
    fn relay_pending(&mut self, limit: usize) -> impl Future<Output = Result<Vec<RelayIntent>>>;

    /// Marks these intents published at this transaction's time; returns how many were
    /// still unpublished.
    fn relay_mark(&mut self, seqs: &[i64]) -> impl Future<Output = Result<u64>>;

    /// Marks these intents refused by their target at this transaction's time; returns
    /// how many were still pending.
    fn relay_refuse(&mut self, seqs: &[i64]) -> impl Future<Output = Result<u64>>;

    /// Every intent with the event identity `(source, id)`, by seq.
    fn relay_find(
        &mut self,
        source: &str,
        id: &str,
    ) -> impl Future<Output = Result<Vec<RelayIntent>>>;

    /// The unpublished intents: how many, and the oldest's age.
    fn relay_backlog(&mut self) -> impl Future<Output = Result<RelayBacklog>>;

    /// Deletes inbox markers applied before `markers_before` and published intents
    /// published before `intents_before` (epoch ms).
    fn side_sweep(
        &mut self,
        markers_before: i64,
        intents_before: i64,
    ) -> impl Future<Output = Result<SideSweep>>;

    /// What `queue` holds about the message id `key`: its dedup entry (even expired,
    /// until swept) and the message row while it exists.
    fn find_sent(&mut self, queue: &str, key: &str) -> impl Future<Output = Result<SentEvidence>>;
}

/// A store whose outbox is reachable as the concrete store `N`: `N` itself (the typed
/// engine), or a [`crate::DynStore`] that holds an `N` (the run-time engine, which
/// names the store it expects and gets `InvalidArgument` if it holds another).
pub trait HasOutbox<N: OutboxStore>: Store {
    /// The concrete store.
    fn outbox(&self) -> Result<&N>;
}

impl<N: OutboxStore> HasOutbox<N> for N {
    fn outbox(&self) -> Result<&N> {
        Ok(self)
    }
}

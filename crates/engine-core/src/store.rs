//! The storage boundary. A [`Store`] implements the queue's transitions natively (SQL
//! text for the SQL stores, hand-built indexes elsewhere); the [`crate::Engine`] above it
//! holds what is the same for every store: validation, limits, the clock's loops,
//! long-poll wake-ups and the public API.
//!
//! Each method's `# Behavior` list is the contract, numbered as in the conformance spec;
//! the TCK (`mqlite-tck`) checks every item against every store.

use std::future::Future;

use crate::clock::SharedClock;
use crate::error::{Error, Result};
use crate::types::{
    BatchResult, ClaimSpec, EnqueueSlot, LockRef, Message, OutMessage, PeekOptions, PurgeOptions,
    QueueConfig, QueueInfo, QueueKind, QueueStats, RecoverTask, RedriveOptions, SendOptions,
    SeqNumber, Settlement,
};

/// The narrow boundary every backend implements.
///
/// Every method samples the store's clock at statement time (after it is admitted to the
/// writer), never before, so a lease that lapses while a call waits is already expired.
/// A future dropped before the writer admits its work executes nothing (13.1, 13.2).
pub trait Store: Send + Sync + Sized + 'static {
    /// The store's handle inside an application transaction (see [`StoreTx`]).
    type Tx<'t>: StoreTx;

    /// A short name of the backend ("sqlite", "libsql", "redb").
    fn backend(&self) -> &'static str;

    /// The clock every statement reads.
    fn clock(&self) -> &SharedClock;

    /// Creates a queue or updates its configuration (an upsert for the same name and
    /// kind); with `update_only`, a missing queue is `NotFound` and nothing is created.
    ///
    /// # Behavior
    /// - A name held by another kind is `NameConflict` and changes nothing (12.1).
    /// - The ordering mode changes only while the queue has no message in play (active,
    ///   locked, deferred, scheduled): rows are lined up by the mode at enqueue, so a
    ///   change under them would break 5.1–5.3. Otherwise `InvalidArgument`.
    /// - The existence check and the write are one transaction.
    fn upsert_queue(
        &self,
        name: String,
        kind: QueueKind,
        config: QueueConfig,
        update_only: bool,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Deletes a queue and every message and receipt it holds; false if it did not exist.
    fn delete_queue(&self, name: String) -> impl Future<Output = Result<bool>> + Send;

    /// Lists every queue, by name.
    fn list_queues(&self) -> impl Future<Output = Result<Vec<QueueInfo>>> + Send;

    /// Enqueues messages in one transaction.
    ///
    /// # Behavior
    /// - Sequence numbers strictly increase and are never reused (G1); the batch commits
    ///   once.
    /// - Scheduled sends are hidden until their time (7.1); TTL is anchored at the visible
    ///   time and falls back to the queue default (7.2).
    /// - With a dedup window, a repeated id (or SHA-256 of the body when the id is empty)
    ///   inside the window yields `Duplicate(original)`; another body yields `Conflict`
    ///   for that slot only while the rest commits (4.1–4.4).
    /// - group_fifo without a group is `GroupRequired` for the whole call (5.2).
    /// - A missing queue is `NotFound`.
    fn enqueue(
        &self,
        queue: String,
        messages: Vec<OutMessage>,
        options: SendOptions,
    ) -> impl Future<Output = Result<Vec<EnqueueSlot>>> + Send;

    /// Claims up to `spec.max_messages` eligible messages in one transaction.
    ///
    /// # Behavior
    /// - Oldest eligible first: active, visible, not expired, not behind its line (1.1,
    ///   5.1–5.5); the head's lease is `now + lock_duration`, with a fresh random token.
    /// - delivery_count is incremented inside the claim (1.3); no row is held by two live
    ///   leases (1.2); expired leases are not reclaimed here, the reaper does it (1.5).
    /// - One commit for the whole batch (1.6).
    /// - Receive-and-delete removes the rows in the same transaction: no token, zero
    ///   locked_until (1.7).
    /// - With an attempt id seen within the receipt window, replays the recorded messages
    ///   and tokens without claiming or counting (3.3).
    fn claim(
        &self,
        queue: String,
        spec: ClaimSpec,
    ) -> impl Future<Output = Result<Vec<Message>>> + Send;

    /// Settles one message, fenced on its lock token.
    ///
    /// # Behavior
    /// - Requires the current token, state locked and `locked_until > now` at statement
    ///   time (2.6, 2.9); otherwise `LockLost` and nothing changes, unless an unexpired
    ///   receipt of the identical request exists, which replays success (3.2).
    /// - Complete deletes (2.1); Abandon returns to active or parks in scheduled for the
    ///   delay, dead-lettering at the bound (2.2); Reject dead-letters with the reason
    ///   (2.3); Defer moves to deferred (2.4).
    /// - Writes the receipt in the same transaction (3.2).
    fn settle(
        &self,
        queue: String,
        lock: LockRef,
        settlement: Settlement,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Completes many messages in one transaction with per-item fencing and receipts.
    ///
    /// # Behavior
    /// - Each item is settled as [`Store::settle`] with Complete; a stale item is
    ///   `ok = false` and never fails the batch (2.7).
    fn complete_batch(
        &self,
        queue: String,
        locks: Vec<LockRef>,
    ) -> impl Future<Output = Result<Vec<BatchResult>>> + Send;

    /// Renews leases by the queue's lock duration.
    ///
    /// # Behavior
    /// - Only a live lease with the current token is renewed, to `max(locked_until, now +
    ///   lock_duration)`: never revived, never shortened (2.5); per-item results with the
    ///   committed locked_until (2.8).
    fn renew_batch(
        &self,
        queue: String,
        locks: Vec<LockRef>,
    ) -> impl Future<Output = Result<Vec<BatchResult>>> + Send;

    /// Claims deferred messages by sequence number (2.4).
    ///
    /// # Behavior
    /// - Only rows in state deferred are returned, each locked under a fresh token with
    ///   delivery_count incremented; other numbers are skipped.
    fn receive_deferred(
        &self,
        queue: String,
        seqs: Vec<SeqNumber>,
    ) -> impl Future<Output = Result<Vec<Message>>> + Send;

    /// Deletes a scheduled message that was never delivered (7.1); false otherwise.
    fn cancel(&self, queue: String, seq: SeqNumber) -> impl Future<Output = Result<bool>> + Send;

    /// Browses messages in any state without locking them (6.2).
    fn peek(
        &self,
        queue: String,
        options: PeekOptions,
    ) -> impl Future<Output = Result<Vec<Message>>> + Send;

    /// Counts a queue's messages per state.
    fn stats(&self, queue: String) -> impl Future<Output = Result<QueueStats>> + Send;

    /// Moves dead letters back to active with delivery_count reset, or to a target queue.
    ///
    /// # Behavior
    /// - Oldest dead letters first, bounded by `max` and `older_than_ms` (6.2); the rate
    ///   bound is applied by the engine, which calls this in slices.
    fn redrive(
        &self,
        queue: String,
        options: RedriveOptions,
    ) -> impl Future<Output = Result<u64>> + Send;

    /// Deletes dead letters, bounded by `max` and `older_than_ms` (6.2).
    fn purge(
        &self,
        queue: String,
        options: PurgeOptions,
    ) -> impl Future<Output = Result<u64>> + Send;

    /// Runs one recovery task over every queue; returns how many rows it changed.
    ///
    /// # Behavior
    /// - Orphans: every locked row goes back to active, or is dead-lettered with
    ///   MaxDeliveryCountExceeded at the bound (3.1); the engine runs it at open.
    /// - Reaper: the same rule for leases with `locked_until <= now` (1.4); deferred rows
    ///   are never touched (2.4).
    /// - Scheduler: due scheduled rows become active (7.1).
    /// - Ttl: expired non-terminal rows are dead-lettered or discarded per queue (7.2).
    /// - Retention: oldest dead letters beyond the resolved bounds are dropped (8.1–8.3).
    /// - Janitor: expired receipts, attempts and dedup entries are deleted (3.2).
    fn recover(&self, task: RecoverTask) -> impl Future<Output = Result<u64>> + Send;

    /// Runs `f` inside one store transaction with the store's native handle (16.1, 16.2).
    ///
    /// # Behavior
    /// - `Ok` commits the application's writes and every enqueue together; `Err`, a panic
    ///   (re-raised to the caller) or the caller's cancellation before commit rolls all of
    ///   it back (16.1, 13.4).
    fn in_tx<R, E, F>(&self, f: F) -> impl Future<Output = Result<R, E>> + Send
    where
        F: for<'t> FnOnce(&mut Self::Tx<'t>) -> Result<R, E> + Send + 'static,
        R: Send + 'static,
        E: From<Error> + Send + 'static;

    /// Finishes the work already admitted, then releases the file and its lock (14.5).
    fn close(&self) -> impl Future<Output = ()> + Send;
}

/// The store's side of an application transaction.
pub trait StoreTx {
    /// Enqueues inside the surrounding transaction, with [`Store::enqueue`]'s behaviour.
    fn enqueue(
        &mut self,
        queue: &str,
        messages: Vec<OutMessage>,
        options: SendOptions,
    ) -> Result<Vec<EnqueueSlot>>;

    /// `Cancelled` once the caller of the transaction has gone away (13.4).
    fn check_cancelled(&self) -> Result<()>;
}

/// A store that can be opened from a location string (a path, `:memory:`, a URL).
pub trait OpenStore: Store {
    /// Opens the store at `location`, reading time from `clock`.
    fn open_at(location: &str, clock: SharedClock) -> impl Future<Output = Result<Self>> + Send;
}

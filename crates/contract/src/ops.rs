//! The store's operations by concern, each a trait of native async methods, and their
//! run-time erasure: `concerns!` (in `dyn_store`) writes each trait, its boxed mirror
//! and its impl for [`DynStore`](crate::DynStore) from the one signature below. A
//! [`Store`](crate::Store) implements all four.

use crate::topics::{Route, Subscription};
use crate::types::{
    BatchResult, ClaimSpec, EnqueueSlot, LockRef, Message, OutMessage, PeekOptions, PurgeOptions,
    QueueConfig, QueueInfo, QueueKind, QueueStats, RecoverTask, RedriveOptions, Schedule,
    ScheduleFire, ScheduleSpec, SendOptions, SeqNumber, Settlement,
};
use crate::{access::AccessKey, error::Result};

crate::dyn_store::concerns! {
    /// The message transitions: send, claim, settle, renew, deferred receive, cancel.
    pub trait MessageOps {
        /// Enqueues messages in one transaction.
        ///
        /// # Behavior
        /// - Sequence numbers strictly increase and are never reused (G1), in batch order;
        ///   the batch commits once, at a cost independent of its length.
        /// - Scheduled sends are hidden until their time (7.1); TTL is anchored at the visible
        ///   time and falls back to the queue default (7.2).
        /// - With a dedup window, a repeated id (or SHA-256 of the body when the id is empty)
        ///   inside the window yields `Duplicate(original)`; another body yields `Conflict`
        ///   for that slot only while the rest commits (4.1–4.4). A repeat inside the batch
        ///   itself collapses the same way into its first occurrence.
        /// - Each message joins its line by the line rule (module docs); two messages of one
        ///   line in one batch line up behind each other.
        /// - group_fifo without a group is `GroupRequired` for the whole call (5.2).
        /// - A missing queue is `NotFound`.
        fn enqueue(
            &self,
            queue: String,
            messages: Vec<OutMessage>,
            options: SendOptions,
        ) -> Result<Vec<EnqueueSlot>>;

        /// Claims up to `spec.max_messages` eligible messages in one transaction.
        ///
        /// # Behavior
        /// - Oldest eligible first: active, visible, not expired, the head of its line (1.1,
        ///   5.1–5.5); each lease is `now + lock_duration`, each with its own fresh random
        ///   token.
        /// - delivery_count is incremented inside the claim (1.3); no row is held by two live
        ///   leases (1.2); expired leases are not reclaimed here, the reaper does it (1.5).
        /// - One commit for the whole batch, at a cost independent of its size (1.6).
        /// - Receive-and-delete removes the rows in the same transaction: no token, zero
        ///   locked_until (1.7); a line's next members follow in the same batch, in order.
        /// - With an attempt id seen within the receipt window, replays the recorded messages
        ///   and tokens without claiming or counting (3.3); an empty response is not
        ///   recorded; the same attempt id with the other mode is `InvalidArgument`.
        fn claim(&self, queue: String, spec: ClaimSpec) -> Result<Vec<Message>>;

        /// Settles one message, fenced on its lock token.
        ///
        /// # Behavior
        /// - Requires the current token, state locked and `locked_until > now` at statement
        ///   time (2.6, 2.9); otherwise `LockLost` and nothing changes, unless an unexpired
        ///   receipt of the identical request exists, which replays success (3.2).
        /// - Complete deletes (2.1); Abandon returns to active or parks in scheduled for the
        ///   delay, dead-lettering at the bound (2.2); Reject dead-letters with the reason
        ///   (2.3); Defer moves to deferred (2.4). A head that leaves play promotes its
        ///   line's next member.
        /// - Writes the receipt in the same transaction (3.2).
        fn settle(&self, queue: String, lock: LockRef, settlement: Settlement) -> Result<()>;

        /// Completes many messages in one transaction with per-item fencing and receipts.
        ///
        /// # Behavior
        /// - Each item is settled as [`MessageOps::settle`] with Complete; a stale item is
        ///   `ok = false` and never fails the batch (2.7). The cost is independent of the
        ///   batch size.
        fn complete_batch(&self, queue: String, locks: Vec<LockRef>) -> Result<Vec<BatchResult>>;

        /// Completes `locks` as [`MessageOps::complete_batch`], then claims as
        /// [`MessageOps::claim`], in ONE transaction: a consumer that finished its
        /// messages and wants more pays one commit instead of two.
        ///
        /// # Behavior
        /// - The completions' results are those `complete_batch` would give; the claim
        ///   sees the rows the completions released (a line's next member is claimable).
        /// - A claim that fails (a queue gone, an attempt id reused with the other mode)
        ///   fails the call, and the completions are rolled back with it.
        fn complete_and_claim(
            &self,
            queue: String,
            locks: Vec<LockRef>,
            spec: ClaimSpec,
        ) -> Result<(Vec<BatchResult>, Vec<Message>)>;

        /// Renews leases by the queue's lock duration.
        ///
        /// # Behavior
        /// - Only a live lease with the current token is renewed, to `max(locked_until, now +
        ///   lock_duration)`: never revived, never shortened (2.5); per-item results keyed by
        ///   (seq, token) with the committed locked_until (2.8); one statement.
        fn renew_batch(&self, queue: String, locks: Vec<LockRef>) -> Result<Vec<BatchResult>>;

        /// Claims deferred messages by sequence number (2.4).
        ///
        /// # Behavior
        /// - Only rows in state deferred and not expired are returned, in request order,
        ///   each locked under a fresh token with delivery_count incremented; other numbers
        ///   are skipped.
        fn receive_deferred(&self, queue: String, seqs: Vec<SeqNumber>) -> Result<Vec<Message>>;

        /// Deletes a scheduled message that was never delivered (7.1); false otherwise.
        fn cancel(&self, queue: String, seq: SeqNumber) -> Result<bool>;
    }

    /// Administration: queues, peek, stats, redrive, purge, and the recovery sweeps.
    pub trait AdminOps {
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
        ) -> Result<()>;

        /// Deletes a queue (or topic, or subscription) and every message, receipt, attempt,
        /// dedup entry and subscription row it holds; false if it did not exist.
        fn delete_queue(&self, name: String) -> Result<bool>;

        /// Lists every queue, topic and subscription queue, by name.
        fn list_queues(&self) -> Result<Vec<QueueInfo>>;

        /// Browses messages in any state without locking them (6.2); never returns a token.
        fn peek(&self, queue: String, options: PeekOptions) -> Result<Vec<Message>>;

        /// Counts a queue's messages per state.
        fn stats(&self, queue: String) -> Result<QueueStats>;

        /// Moves dead letters back to active with delivery_count reset, or to a target queue.
        ///
        /// # Behavior
        /// - Oldest dead letters first, bounded by `max` and `older_than_ms` (6.2); the rate
        ///   bound is applied by the engine, which calls this in slices.
        /// - Each re-enters its target line by the line rule (5.8); into a group_fifo
        ///   target, a dead letter without a group refuses the whole call with
        ///   `GroupRequired` and nothing moves (5.9).
        fn redrive(&self, queue: String, options: RedriveOptions) -> Result<u64>;

        /// Deletes dead letters, bounded by `max` and `older_than_ms` (6.2).
        fn purge(&self, queue: String, options: PurgeOptions) -> Result<u64>;

        /// Runs one recovery task over every queue; returns how many rows it changed.
        ///
        /// # Behavior
        /// - Orphans: every locked row goes back to active, or is dead-lettered with
        ///   MaxDeliveryCountExceeded at the bound (3.1); the engine runs it at open, and
        ///   only under [`Ownership`](crate::Ownership).
        /// - Reaper: the same rule for leases with `locked_until <= now` (1.4); deferred rows
        ///   are never touched (2.4).
        /// - Scheduler: due scheduled rows become active (7.1).
        /// - Ttl: expired non-terminal rows are dead-lettered or discarded per queue (7.2).
        /// - Retention: oldest dead letters beyond the resolved bounds are dropped (8.1–8.3).
        /// - Janitor: expired receipts, attempts and dedup entries are deleted (3.2).
        fn recover(&self, task: RecoverTask) -> Result<u64>;

        /// Creates a recurring schedule, or replaces the definition of the one of that
        /// name (21.1), with its next tick at `next_at_ms`; returns it as stored.
        ///
        /// # Behavior
        /// - The queue must exist and hold messages (`NotFound`; a topic is
        ///   `InvalidArgument`).
        /// - A replaced schedule keeps its creation time and fire count and gets a new
        ///   revision, so a fire planned from the old definition changes nothing.
        fn put_schedule(&self, spec: ScheduleSpec, next_at_ms: i64) -> Result<Schedule>;

        /// Every schedule, by name.
        fn list_schedules(&self) -> Result<Vec<Schedule>>;

        /// Deletes a schedule; false if there was none. Deleting a queue deletes its
        /// schedules.
        fn delete_schedule(&self, name: String) -> Result<bool>;

        /// Applies one planned fire in one transaction (21.2): moves the schedule from
        /// `due_at_ms` to `next_at_ms` and enqueues its message, or does nothing.
        ///
        /// # Behavior
        /// - Only a schedule still at `revision` and `due_at_ms` moves; otherwise (another
        ///   process fired the tick, the schedule was changed or deleted) nothing changes
        ///   and the answer is false.
        /// - The message is enqueued as [`MessageOps::enqueue`] in the same transaction:
        ///   an enqueue that fails (a paused queue, a queue deleted) fails the call and the
        ///   schedule stays where it was.
        fn fire_schedule(&self, fire: ScheduleFire) -> Result<bool>;
    }

    /// Access keys (9.3): stored by digest, listed, revoked, looked up.
    pub trait KeyOps {
        /// Stores a new access key.
        ///
        /// # Behavior
        /// - Only the digest is stored, never a token (9.3); an id already present is
        ///   `KeyConflict` and changes nothing.
        fn create_key(&self, key: AccessKey) -> Result<()>;

        /// Lists access keys by id, after `after_id`, at most `limit`.
        fn list_keys(&self, after_id: Option<String>, limit: u32) -> Result<Vec<AccessKey>>;

        /// Revokes a key at statement time; idempotent (a second revoke keeps the first
        /// time). False if no such key.
        ///
        /// # Behavior
        /// - Effective for every lookup that follows (9.3).
        fn revoke_key(&self, id: String) -> Result<bool>;

        /// Looks a key up by the digest of its token (revoked and expired keys included:
        /// the caller decides with [`AccessKey::is_live`]).
        fn key_by_digest(&self, digest: String) -> Result<Option<AccessKey>>;
    }

    /// Topics (11): subscriptions and publish.
    pub trait TopicOps {
        /// Creates or updates a subscription and its backing queue (kind subscription)
        /// with `config`, in one transaction.
        ///
        /// # Behavior
        /// - The topic must exist as a topic (`NotFound` otherwise); the subscription's name
        ///   held by a queue or topic is `NameConflict`, and nothing is left behind (12.1).
        /// - A subscription of another topic under the same name is `NameConflict`.
        fn upsert_subscription(
            &self,
            subscription: Subscription,
            config: QueueConfig,
        ) -> Result<()>;

        /// Lists subscriptions, of one topic or of all, by topic then name.
        fn list_subscriptions(&self, topic: Option<String>) -> Result<Vec<Subscription>>;

        /// Publishes to a topic: every route's messages are enqueued into its
        /// subscription's backing queue, all in ONE transaction (11.2).
        ///
        /// # Behavior
        /// - The topic must exist as a topic (`NotFound`); a route whose subscription is no
        ///   longer a subscription of this topic is skipped (an empty result for it).
        /// - Each copy is enqueued as [`MessageOps::enqueue`] into its backing queue (dedup, lines
        ///   and TTL per that queue); the results are per route, in route order.
        /// - No route is a valid no-op (11.4).
        fn publish(
            &self,
            topic: String,
            routes: Vec<Route>,
            options: SendOptions,
        ) -> Result<Vec<Vec<EnqueueSlot>>>;
    }
}

//! The template a new store starts from (docs/tck.md, "Adding a store"): every trait a
//! store implements, written out, each method handing its call to the SQLite store
//! underneath. Copy the crate, replace each body with your storage's transaction, and
//! keep the `# Behavior` lists of the contract's `ops.rs` true: the conformance kit
//! (`tests/tck.rs`) checks every item.
//!
//! A store of this repository then takes one line in the facade's list (`__stores!`
//! in `crates/mqlite/src/registry.rs`, behind a cargo feature of its name) and its
//! conformance factory in `crates/testbed/src/`; `mqlite::open`, the trace, the broker,
//! the CLI and every test suite pick it up from there. This template is compiled and
//! graded by CI but not listed, so it is not a store a location can name.

use std::future::Future;

use mqlite_contract::{
    AccessKey, AdminOps, BatchResult, ClaimSpec, EnqueueSlot, Error, KeyOps, LockRef, Message,
    MessageOps, OutMessage, OutboxStore, Ownership, PeekOptions, PurgeOptions, QueueConfig,
    QueueInfo, QueueKind, QueueStats, RecoverTask, RedriveOptions, Result, Route, Schedule,
    ScheduleFire, ScheduleSpec, SendOptions, SeqNumber, Settlement, SharedClock, Store, StoreKind,
    StoreStatus, Subscription, TopicOps, WorkStats,
};
use mqlite_store_sqlite::{SqliteOptions, SqliteStore};

/// The template store: its storage (here the SQLite store) and nothing else.
pub struct TemplateStore {
    inner: SqliteStore,
}

/// How a location names the store and how it opens: its one registration, read by the
/// facade's list.
impl StoreKind for TemplateStore {
    const NAME: &'static str = "template";
    const SCHEMES: &'static [&'static str] = &["template"];
    const LOCAL_FILE: bool = true;

    async fn open_at(target: &str, clock: SharedClock) -> Result<Self> {
        Ok(TemplateStore {
            inner: SqliteStore::open(SqliteOptions::new(target).clock(clock)).await?,
        })
    }
}

/// The store itself: its name, clock, how it owns its data, its work counter, its
/// status and its close.
impl Store for TemplateStore {
    fn backend(&self) -> &'static str {
        Self::NAME
    }

    fn clock(&self) -> &SharedClock {
        self.inner.clock()
    }

    fn ownership(&self) -> Ownership {
        self.inner.ownership()
    }

    fn work(&self) -> Option<WorkStats> {
        self.inner.work()
    }

    fn reclaims_pages(&self) -> bool {
        self.inner.reclaims_pages()
    }

    fn status(&self) -> impl Future<Output = Result<StoreStatus>> + Send {
        let status = self.inner.status();
        async move {
            Ok(StoreStatus {
                backend: Self::NAME,
                ..status.await?
            })
        }
    }

    fn close(&self) -> impl Future<Output = ()> + Send {
        self.inner.close()
    }
}

/// The message transitions, each one transaction.
impl MessageOps for TemplateStore {
    fn enqueue(
        &self,
        queue: String,
        messages: Vec<OutMessage>,
        options: SendOptions,
    ) -> impl Future<Output = Result<Vec<EnqueueSlot>>> + Send {
        self.inner.enqueue(queue, messages, options)
    }

    fn claim(
        &self,
        queue: String,
        spec: ClaimSpec,
    ) -> impl Future<Output = Result<Vec<Message>>> + Send {
        self.inner.claim(queue, spec)
    }

    fn settle(
        &self,
        queue: String,
        lock: LockRef,
        settlement: Settlement,
    ) -> impl Future<Output = Result<()>> + Send {
        self.inner.settle(queue, lock, settlement)
    }

    fn complete_batch(
        &self,
        queue: String,
        locks: Vec<LockRef>,
    ) -> impl Future<Output = Result<Vec<BatchResult>>> + Send {
        self.inner.complete_batch(queue, locks)
    }

    fn complete_and_claim(
        &self,
        queue: String,
        locks: Vec<LockRef>,
        spec: ClaimSpec,
    ) -> impl Future<Output = Result<(Vec<BatchResult>, Vec<Message>)>> + Send {
        self.inner.complete_and_claim(queue, locks, spec)
    }

    fn renew_batch(
        &self,
        queue: String,
        locks: Vec<LockRef>,
    ) -> impl Future<Output = Result<Vec<BatchResult>>> + Send {
        self.inner.renew_batch(queue, locks)
    }

    fn receive_deferred(
        &self,
        queue: String,
        seqs: Vec<SeqNumber>,
    ) -> impl Future<Output = Result<Vec<Message>>> + Send {
        self.inner.receive_deferred(queue, seqs)
    }

    fn cancel(&self, queue: String, seq: SeqNumber) -> impl Future<Output = Result<bool>> + Send {
        self.inner.cancel(queue, seq)
    }
}

/// Queues, browsing, dead letters and the recovery sweeps.
impl AdminOps for TemplateStore {
    fn upsert_queue(
        &self,
        name: String,
        kind: QueueKind,
        config: QueueConfig,
        update_only: bool,
    ) -> impl Future<Output = Result<()>> + Send {
        self.inner.upsert_queue(name, kind, config, update_only)
    }

    fn delete_queue(&self, name: String) -> impl Future<Output = Result<bool>> + Send {
        self.inner.delete_queue(name)
    }

    fn list_queues(&self) -> impl Future<Output = Result<Vec<QueueInfo>>> + Send {
        self.inner.list_queues()
    }

    fn peek(
        &self,
        queue: String,
        options: PeekOptions,
    ) -> impl Future<Output = Result<Vec<Message>>> + Send {
        self.inner.peek(queue, options)
    }

    fn stats(&self, queue: String) -> impl Future<Output = Result<QueueStats>> + Send {
        self.inner.stats(queue)
    }

    fn redrive(
        &self,
        queue: String,
        options: RedriveOptions,
    ) -> impl Future<Output = Result<u64>> + Send {
        self.inner.redrive(queue, options)
    }

    fn purge(
        &self,
        queue: String,
        options: PurgeOptions,
    ) -> impl Future<Output = Result<u64>> + Send {
        self.inner.purge(queue, options)
    }

    fn recover(&self, task: RecoverTask) -> impl Future<Output = Result<u64>> + Send {
        self.inner.recover(task)
    }

    fn put_schedule(
        &self,
        spec: ScheduleSpec,
        next_at_ms: i64,
    ) -> impl Future<Output = Result<Schedule>> + Send {
        self.inner.put_schedule(spec, next_at_ms)
    }

    fn list_schedules(&self) -> impl Future<Output = Result<Vec<Schedule>>> + Send {
        self.inner.list_schedules()
    }

    fn delete_schedule(&self, name: String) -> impl Future<Output = Result<bool>> + Send {
        self.inner.delete_schedule(name)
    }

    fn fire_schedule(&self, fire: ScheduleFire) -> impl Future<Output = Result<bool>> + Send {
        self.inner.fire_schedule(fire)
    }
}

/// Access keys, stored by digest.
impl KeyOps for TemplateStore {
    fn create_key(&self, key: AccessKey) -> impl Future<Output = Result<()>> + Send {
        self.inner.create_key(key)
    }

    fn list_keys(
        &self,
        after_id: Option<String>,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<AccessKey>>> + Send {
        self.inner.list_keys(after_id, limit)
    }

    fn revoke_key(&self, id: String) -> impl Future<Output = Result<bool>> + Send {
        self.inner.revoke_key(id)
    }

    fn key_by_digest(
        &self,
        digest: String,
    ) -> impl Future<Output = Result<Option<AccessKey>>> + Send {
        self.inner.key_by_digest(digest)
    }
}

/// Subscriptions and publish.
impl TopicOps for TemplateStore {
    fn upsert_subscription(
        &self,
        subscription: Subscription,
        config: QueueConfig,
    ) -> impl Future<Output = Result<()>> + Send {
        self.inner.upsert_subscription(subscription, config)
    }

    fn list_subscriptions(
        &self,
        topic: Option<String>,
    ) -> impl Future<Output = Result<Vec<Subscription>>> + Send {
        self.inner.list_subscriptions(topic)
    }

    fn publish(
        &self,
        topic: String,
        routes: Vec<Route>,
        options: SendOptions,
    ) -> impl Future<Output = Result<Vec<Vec<EnqueueSlot>>>> + Send {
        self.inner.publish(topic, routes, options)
    }
}

/// The application's own transaction with the store's native handle (the outbox):
/// here the SQLite store's, so the application writes its rows with rusqlite.
impl OutboxStore for TemplateStore {
    type Tx<'t> = <SqliteStore as OutboxStore>::Tx<'t>;

    fn in_tx<R, E, F>(&self, f: F) -> impl Future<Output = std::result::Result<R, E>> + Send
    where
        F: for<'a, 't> AsyncFnOnce(&'a mut Self::Tx<'t>) -> std::result::Result<R, E>
            + Send
            + 'static,
        R: Send + 'static,
        E: From<Error> + Send + 'static,
    {
        self.inner.in_tx(f)
    }
}

//! The report card is itself tested: deliberately broken stores get the failing grades
//! they deserve, and only those. Each is the SQLite store with one flaw:
//!
//! - `unfenced`: a settlement with a stale lock token succeeds instead of `LockLost`
//!   (the fence of 2.6 is gone);
//! - `undying`: a Reject puts the message back instead of dead-lettering it.
//!
//! The healthy SQLite store's card, graded beside them, fails nothing.

use mqlite_contract::{
    AccessKey, AdminOps, BatchResult, ClaimSpec, EnqueueSlot, Error, KeyOps, LockRef, Message,
    MessageOps, OutMessage, OutboxStore, Ownership, PeekOptions, PurgeOptions, QueueConfig,
    QueueInfo, QueueKind, QueueStats, RecoverTask, RedriveOptions, Result, Route, Schedule,
    ScheduleFire, ScheduleSpec, SendOptions, SeqNumber, Settlement, SharedClock, Store,
    StoreStatus, Subscription, TopicOps, WorkStats,
};
use std::path::Path;

use mqlite_store_sqlite::SqliteStore;
use mqlite_tck::report::Grade;
use mqlite_tck::{Capability, ReportCard, StoreFactory};
use mqlite_testbed::sqlite::SqliteFactory;

/// Which flaw a broken store has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flaw {
    /// A stale token settles.
    Unfenced,
    /// Reject abandons instead of dead-lettering.
    Undying,
}

/// The SQLite store with one flaw.
struct Broken {
    inner: SqliteStore,
    flaw: Flaw,
}

/// Delegates the listed methods to the SQLite store unchanged.
macro_rules! delegate {
    ($($name:ident($($arg:ident: $ty:ty),*) -> $out:ty;)*) => {
        $(fn $name(&self, $($arg: $ty),*) -> impl Future<Output = Result<$out>> + Send {
            self.inner.$name($($arg),*)
        })*
    };
}

impl Store for Broken {
    fn backend(&self) -> &'static str {
        self.inner.backend()
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

    fn status(&self) -> impl Future<Output = Result<StoreStatus>> + Send {
        self.inner.status()
    }

    fn close(&self) -> impl Future<Output = ()> + Send {
        self.inner.close()
    }
}

impl MessageOps for Broken {
    delegate! {
        enqueue(queue: String, messages: Vec<OutMessage>, options: SendOptions) -> Vec<EnqueueSlot>;
        claim(queue: String, spec: ClaimSpec) -> Vec<Message>;
        complete_batch(queue: String, locks: Vec<LockRef>) -> Vec<BatchResult>;
        complete_and_claim(queue: String, locks: Vec<LockRef>, spec: ClaimSpec) -> (Vec<BatchResult>, Vec<Message>);
        renew_batch(queue: String, locks: Vec<LockRef>) -> Vec<BatchResult>;
        receive_deferred(queue: String, seqs: Vec<SeqNumber>) -> Vec<Message>;
        cancel(queue: String, seq: SeqNumber) -> bool;
    }

    fn settle(
        &self,
        queue: String,
        lock: LockRef,
        settlement: Settlement,
    ) -> impl Future<Output = Result<()>> + Send {
        let flaw = self.flaw;
        let settlement = match (flaw, settlement) {
            (Flaw::Undying, Settlement::Reject { .. }) => Settlement::Abandon {
                delay: std::time::Duration::ZERO,
            },
            (_, s) => s,
        };
        let settled = self.inner.settle(queue, lock, settlement);
        async move {
            match settled.await {
                Err(Error::LockLost { .. }) if flaw == Flaw::Unfenced => Ok(()),
                other => other,
            }
        }
    }
}

impl AdminOps for Broken {
    delegate! {
        upsert_queue(name: String, kind: QueueKind, config: QueueConfig, update_only: bool) -> ();
        delete_queue(name: String) -> bool;
        list_queues() -> Vec<QueueInfo>;
        peek(queue: String, options: PeekOptions) -> Vec<Message>;
        stats(queue: String) -> QueueStats;
        redrive(queue: String, options: RedriveOptions) -> u64;
        purge(queue: String, options: PurgeOptions) -> u64;
        recover(task: RecoverTask) -> u64;
        put_schedule(spec: ScheduleSpec, next_at_ms: i64) -> Schedule;
        list_schedules() -> Vec<Schedule>;
        delete_schedule(name: String) -> bool;
        fire_schedule(fire: ScheduleFire) -> bool;
    }
}

impl KeyOps for Broken {
    delegate! {
        create_key(key: AccessKey) -> ();
        list_keys(after_id: Option<String>, limit: u32) -> Vec<AccessKey>;
        revoke_key(id: String) -> bool;
        key_by_digest(digest: String) -> Option<AccessKey>;
    }
}

impl TopicOps for Broken {
    delegate! {
        upsert_subscription(subscription: Subscription, config: QueueConfig) -> ();
        list_subscriptions(topic: Option<String>) -> Vec<Subscription>;
        publish(topic: String, routes: Vec<Route>, options: SendOptions) -> Vec<Vec<EnqueueSlot>>;
    }
}

impl OutboxStore for Broken {
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

/// Opens a broken store over what the SQLite factory opens.
#[derive(Debug, Clone, Copy)]
struct BrokenFactory(Flaw);

#[allow(
    clippy::future_not_send,
    reason = "the SQLite store's transaction runs on its writer thread, never on the executor"
)]
impl StoreFactory for BrokenFactory {
    type Store = Broken;

    async fn open(&self, dir: &Path, clock: SharedClock) -> Result<Broken> {
        Ok(Broken {
            inner: SqliteFactory.open(dir, clock).await?,
            flaw: self.0,
        })
    }

    fn unsupported(&self, cap: Capability) -> Option<&'static str> {
        SqliteFactory.unsupported(cap)
    }

    fn set_schema_token(&self, dir: &Path, token: &str) -> Result<()> {
        SqliteFactory.set_schema_token(dir, token)
    }

    fn db_file(&self, dir: &Path) -> Option<std::path::PathBuf> {
        SqliteFactory.db_file(dir)
    }

    async fn insert_business_row(tx: &mut <Broken as OutboxStore>::Tx<'_>, id: i64) -> Result<()> {
        SqliteFactory::insert_business_row(tx, id).await
    }

    async fn business_rows(tx: &mut <Broken as OutboxStore>::Tx<'_>) -> Result<Vec<i64>> {
        SqliteFactory::business_rows(tx).await
    }

    fn integrity_check(&self, dir: &Path) -> Result<Option<String>> {
        SqliteFactory.integrity_check(dir)
    }

    async fn plan_pins(&self, dir: &Path) -> Vec<(String, std::result::Result<(), String>)> {
        SqliteFactory.plan_pins(dir).await
    }
}

fn card(name: &str, flaw: Flaw) -> ReportCard {
    mqlite_tck::grade(name, BrokenFactory(flaw), &mut |_, _, _| {})
}

/// The promise sections and guarantees a card fails.
fn failing(card: &ReportCard) -> (Vec<u32>, Vec<&'static str>) {
    let sections = card
        .sections()
        .into_iter()
        .filter(|(_, _, g)| matches!(g, Grade::Fail(_)))
        .map(|(n, _, _)| n)
        .collect();
    let guarantees = card
        .guarantees()
        .into_iter()
        .filter(|(_, _, g)| matches!(g, Grade::Fail(_)))
        .map(|(id, _, _)| id)
        .collect();
    (sections, guarantees)
}

/// The failing cases of a card, by name, each once.
fn failing_cases(card: &ReportCard) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = card
        .results
        .iter()
        .filter(|r| matches!(r.verdict, mqlite_tck::Verdict::Fail(_)))
        .map(|r| r.case)
        .collect();
    out.dedup();
    out.sort_unstable();
    out.dedup();
    out
}

#[test]
fn broken_stores_fail_exactly_what_they_break() {
    // The cases' panics are the verdicts the cards record; the hook would only print them.
    // The hook is the process's: the other tests of this binary, running meanwhile on
    // threads libtest names after them, still print theirs.
    let print = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let other_test = std::thread::current()
            .name()
            .is_some_and(|n| n.contains("::") && !n.starts_with("report_card::broken_stores"));
        if other_test {
            print(info);
        }
    }));
    let (unfenced, undying, healthy) = std::thread::scope(|s| {
        let a = s.spawn(|| card("unfenced", Flaw::Unfenced));
        let b = s.spawn(|| card("undying", Flaw::Undying));
        let c = mqlite_tck::grade("sqlite", SqliteFactory, &mut |_, _, _| {});
        (
            a.join().expect("unfenced graded"),
            b.join().expect("undying graded"),
            c,
        )
    });
    println!("unfenced fails {:?}", failing_cases(&unfenced));
    println!("undying fails {:?}", failing_cases(&undying));

    assert!(healthy.passed(), "{}", healthy.to_text());
    // No fence: every promise whose cases settle with a stale token (receive-and-delete
    // grants none, settlement, receipts, concurrency, a purged message's lock in 6.2),
    // and the guarantees those cases evidence: exclusive claims, the fenced write,
    // receipts, the lookups a purge of every state walks (G4, through that 6.2 case), a
    // failing call beside committed ones (G5) and the reclaiming of orphaned leases (G6).
    assert_eq!(
        failing(&unfenced),
        (
            vec![1, 2, 3, 6, 14],
            vec!["G2", "G4", "G5", "G6", "F1", "F3"]
        ),
        "{}",
        unfenced.to_text()
    );
    // No dead letters: Reject, what waits on a dead-lettered head, the ordering cases
    // that dead-letter a line's head, dead letters and their retention, receipts of
    // rejects, and the inbox's dead-lettered conflicts (17); the secondary lookups
    // that serve dead letters (G4).
    assert_eq!(
        failing(&undying),
        (vec![1, 2, 3, 5, 6, 8, 17], vec!["G4", "F3"]),
        "{}",
        undying.to_text()
    );
    // The other sections and guarantees of the broken cards are untouched.
    for card in [&unfenced, &undying] {
        assert!(
            card.sections()
                .iter()
                .any(|(n, _, g)| *n == 16 && *g == Grade::Pass),
            "the outbox still passes on {}",
            card.store
        );
    }
}

/// The short benchmark runs on a store and lands on the card as ratios to SQLite (its
/// numbers are a quick look; only that it measured something is asserted).
#[test]
fn the_short_benchmark_lands_on_the_card() {
    let store = mqlite_tck::bench::measure(&SqliteFactory).expect("measured");
    assert!(store.send_per_sec > 0.0 && store.drain_per_sec > 0.0);
    assert!(store.claim_beside_blocked > std::time::Duration::ZERO);
    let card = ReportCard {
        store: "sqlite".into(),
        results: Vec::new(),
        plans: Vec::new(),
        bench: Some(mqlite_tck::bench::Beside {
            store,
            sqlite: store,
        }),
    };
    let md = card.to_markdown();
    assert!(md.contains("| send (one message) |"), "{md}");
    assert!(md.contains("| 1.00 |"), "{md}");
    assert!(
        card.to_json().contains("\"ratio\": 1.0"),
        "{}",
        card.to_json()
    );
}

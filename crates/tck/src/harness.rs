//! The runner: a libtest-mimic trial per case, each on a fresh directory, a fresh manual
//! clock and its own tokio runtime.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;

use libtest_mimic::{Arguments, Completion, Failed, Trial};

use mqlite_contract::{
    DynStore, HasOutbox, ManualClock, OutboxStore, QueueConfig, Result, SharedClock, Store,
};
use mqlite_engine::{Engine, EngineOptions};

/// What a case returns: `Err` (or a panic) fails it.
pub type TckResult = std::result::Result<(), Box<dyn std::error::Error>>;

/// A capability a case may need beyond the core contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capability {
    /// Reopening the same database after close (local durable stores).
    Reopen,
    /// A second open of the same database fails with DbLocked (10.1).
    FileLock,
    /// The store can be handed a database with a foreign schema token (10.2).
    SchemaGuard,
    /// Statements run on a remote server and can be interrupted there (13.5).
    RemoteCancel,
    /// The store counts the rows or index entries an operation visits (`Store::work`),
    /// so cost pins (1.5, 5.6) run on it.
    WorkCounter,
    /// The database is a local file ([`StoreFactory::db_file`]) that a case may delete
    /// or replace under the running store (10.6).
    LocalFile,
}

/// Opens stores for the TCK: what a store crate implements to be graded.
pub trait StoreFactory: Send + Sync + 'static {
    /// The store under test (its concrete, typed form).
    type Store: OutboxStore;

    /// Opens the store kept in `dir` (a fresh, empty directory per case; opening the
    /// same directory again reopens the same database).
    fn open(
        &self,
        dir: &Path,
        clock: SharedClock,
    ) -> impl Future<Output = Result<Self::Store>> + Send;

    /// Why this store cannot offer `cap`, or None if it can.
    fn unsupported(&self, cap: Capability) -> Option<&'static str>;

    /// The database file kept in `dir`, for a store whose database is a local file
    /// ([`Capability::LocalFile`]).
    fn db_file(&self, dir: &Path) -> Option<std::path::PathBuf> {
        let _ = dir;
        None
    }

    /// Why this store cannot run here at all (a server it needs is not installed), or
    /// None. Every case is then skipped with the reason; under `CI=true` it fails.
    fn unavailable(&self) -> Option<String> {
        None
    }

    /// The store's query-plan pins, for the report card's cost pins: each statement
    /// with `Err` saying what is wrong with its plan (a walk of a growing table, an index
    /// it does not seek), run on a fresh database in `dir`, leaving nothing running
    /// behind. Stores without a query planner have none (the default).
    fn plan_pins(
        &self,
        dir: &Path,
    ) -> impl Future<Output = Vec<(String, std::result::Result<(), String>)>> + Send {
        let _ = dir;
        std::future::ready(Vec::new())
    }

    /// Rewrites the schema guard token of the (closed) database in `dir` to `token`
    /// (only called when [`Capability::SchemaGuard`] is supported).
    fn set_schema_token(&self, dir: &Path, token: &str) -> Result<()>;

    /// Inserts the application's own row `id` through the store's native transaction
    /// handle (16.1, 16.2), creating the application's table if needed.
    fn insert_business_row(
        tx: &mut <Self::Store as OutboxStore>::Tx<'_>,
        id: i64,
    ) -> impl Future<Output = Result<()>>;

    /// The ids of the application's rows, as seen inside the transaction, sorted.
    fn business_rows(
        tx: &mut <Self::Store as OutboxStore>::Tx<'_>,
    ) -> impl Future<Output = Result<Vec<i64>>>;

    /// The store's own consistency check of the database in `dir` ("ok" when sound),
    /// or None when the store has none or `dir` holds no database. The runner calls it
    /// after every passing case, once the case's runtime (and every store it left open)
    /// is gone; a store whose handle closes in the background waits for that here.
    fn integrity_check(&self, dir: &Path) -> Result<Option<String>>;
}

/// How a case reaches the store under test: through the typed engine
/// (`Engine<SqliteStore>`, say: [`Typed`]) or the run-time one (`Engine<DynStore>`:
/// [`Erased`]). Every case runs both ways.
pub trait Access: Send + Sync + 'static {
    /// The store crate's factory.
    type Factory: StoreFactory<Store = Self::Native>;
    /// What the engine holds.
    type Store: Store + HasOutbox<Self::Native>;
    /// The concrete store (whose outbox the cases use).
    type Native: OutboxStore;

    /// The factory.
    fn factory(&self) -> &Self::Factory;

    /// How this access path is named in test names ("typed", "dyn").
    fn label(&self) -> &'static str;

    /// Opens the store kept in `dir`, as the engine will hold it.
    fn open(
        &self,
        dir: &Path,
        clock: SharedClock,
    ) -> impl Future<Output = Result<Self::Store>> + Send;

    /// See [`StoreFactory::unsupported`]; a factory that names no database file
    /// ([`StoreFactory::db_file`]) cannot offer [`Capability::LocalFile`].
    fn unsupported(&self, cap: Capability) -> Option<&'static str> {
        self.factory().unsupported(cap).or_else(|| {
            (cap == Capability::LocalFile && self.factory().db_file(Path::new(".")).is_none())
                .then_some("the store's factory names no database file (StoreFactory::db_file)")
        })
    }

    /// See [`StoreFactory::set_schema_token`].
    fn set_schema_token(&self, dir: &Path, token: &str) -> Result<()> {
        self.factory().set_schema_token(dir, token)
    }

    /// See [`StoreFactory::insert_business_row`].
    fn insert_business_row(
        tx: &mut <Self::Native as OutboxStore>::Tx<'_>,
        id: i64,
    ) -> impl Future<Output = Result<()>> {
        Self::Factory::insert_business_row(tx, id)
    }

    /// See [`StoreFactory::business_rows`].
    fn business_rows(
        tx: &mut <Self::Native as OutboxStore>::Tx<'_>,
    ) -> impl Future<Output = Result<Vec<i64>>> {
        Self::Factory::business_rows(tx)
    }
}

/// The typed path: the engine holds the concrete store.
#[derive(Debug, Clone, Copy, Default)]
pub struct Typed<F>(pub F);

/// The run-time path: the engine holds a [`DynStore`] around the concrete store.
#[derive(Debug, Clone, Copy, Default)]
pub struct Erased<F>(pub F);

impl<F: StoreFactory> Access for Typed<F> {
    type Factory = F;
    type Store = F::Store;
    type Native = F::Store;

    fn factory(&self) -> &F {
        &self.0
    }

    fn label(&self) -> &'static str {
        "typed"
    }

    fn open(
        &self,
        dir: &Path,
        clock: SharedClock,
    ) -> impl Future<Output = Result<F::Store>> + Send {
        self.0.open(dir, clock)
    }
}

impl<F: StoreFactory> Access for Erased<F> {
    type Factory = F;
    type Store = DynStore;
    type Native = F::Store;

    fn factory(&self) -> &F {
        &self.0
    }

    fn label(&self) -> &'static str {
        "dyn"
    }

    async fn open(&self, dir: &Path, clock: SharedClock) -> Result<DynStore> {
        self.0.open(dir, clock).await.map(DynStore::new)
    }
}

/// One case's world: the factory, a private directory and a manual clock.
pub struct Ctx<F: Access> {
    /// The access path and its store factory.
    pub factory: Arc<F>,
    /// The case's private directory (shared with the runner, which checks the store's
    /// consistency there after the case).
    pub dir: Arc<tempfile::TempDir>,
    /// The clock every store and engine of the case reads.
    pub clock: ManualClock,
}

/// The epoch-ms reading every case's clock starts at.
pub const START_MS: i64 = 1_700_000_000_000;

impl<F: Access> Ctx<F> {
    /// Opens the store of this case.
    pub async fn store(&self) -> Result<F::Store> {
        self.factory
            .open(self.dir.path(), self.clock.shared())
            .await
    }

    /// Opens an engine with the background loops off: cases run sweeps explicitly.
    pub async fn engine(&self) -> Result<Engine<F::Store>> {
        self.engine_with(EngineOptions {
            background: false,
            ..Default::default()
        })
        .await
    }

    /// Opens an engine with these options.
    pub async fn engine_with(&self, options: EngineOptions) -> Result<Engine<F::Store>> {
        Engine::with_store(self.store().await?, options).await
    }

    /// Opens an engine with one queue of this configuration.
    pub async fn engine_with_queue(
        &self,
        queue: &str,
        config: QueueConfig,
    ) -> Result<Engine<F::Store>> {
        let engine = self.engine().await?;
        engine.create_queue(queue, config).await?;
        Ok(engine)
    }
}

type CaseFn<F> = fn(Ctx<F>) -> Pin<Box<dyn Future<Output = TckResult>>>;

/// One registered case.
pub struct Case<F: Access> {
    /// The test name (the promise number first).
    pub name: &'static str,
    /// Capabilities it needs.
    pub needs: &'static [Capability],
    /// The case body.
    pub run: CaseFn<F>,
}

/// Every case as a libtest-mimic trial against `factory`'s store, through the typed
/// engine and through the run-time (dyn) one: `<store>::<typed|dyn>::<case>`.
pub fn trials<F: StoreFactory + Clone>(store: &str, factory: F) -> Vec<Trial> {
    let mut out = trials_via(store, Typed(factory.clone()));
    out.extend(trials_via(store, Erased(factory)));
    out
}

fn trials_via<A: Access>(store: &str, access: A) -> Vec<Trial> {
    let access = Arc::new(access);
    crate::cases::all::<A>()
        .into_iter()
        .map(|case| {
            let access = access.clone();
            let name = format!("{store}::{}::{}", access.label(), case.name);
            Trial::ignorable_test(name, move || match verdict(&access, &case) {
                Verdict::Pass => Ok(Completion::Completed),
                Verdict::Skip(reason) => Ok(Completion::ignored_with(format!("skipped: {reason}"))),
                Verdict::Fail(why) => Err(Failed::from(why)),
            })
        })
        .collect()
}

/// What became of one case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// It ran and held.
    Pass,
    /// It could not run on this store, for this reason.
    Skip(String),
    /// It ran and failed: the first failing assertion or error.
    Fail(String),
}

/// Runs `case` through `access` (unless the store cannot run it), with the store's
/// consistency check after a pass. A store that cannot run here at all skips every
/// case, and fails it under `CI=true`.
pub(crate) fn verdict<A: Access>(access: &Arc<A>, case: &Case<A>) -> Verdict {
    if let Some(reason) = access.factory().unavailable() {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            return Verdict::Fail(format!("CI=true and {reason}"));
        }
        return Verdict::Skip(reason);
    }
    if let Some(reason) = case.needs.iter().find_map(|c| access.unsupported(*c)) {
        return Verdict::Skip(reason.to_owned());
    }
    let access = access.clone();
    let run = case.run;
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_case(access, run))) {
        Ok(Ok(())) => Verdict::Pass,
        Ok(Err(failed)) => Verdict::Fail(
            failed
                .message()
                .map_or_else(|| "failed".to_owned(), str::to_owned),
        ),
        Err(panic) => Verdict::Fail(panic_text(panic.as_ref())),
    }
}

/// A panic's message.
fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "the case panicked".to_owned()
    }
}

fn run_case<F: Access>(factory: Arc<F>, run: CaseFn<F>) -> std::result::Result<(), Failed> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failed::from(format!("runtime: {e}")))?;
    let dir = Arc::new(tempfile::tempdir().map_err(|e| Failed::from(format!("tempdir: {e}")))?);
    let ctx = Ctx {
        factory: factory.clone(),
        dir: dir.clone(),
        clock: ManualClock::new(START_MS),
    };
    // A guard against a hung case, not a clock: every case drives a manual clock and
    // finishes in seconds; one still running after this has deadlocked. Long runs (the
    // model test with many cases) raise it with MQLITE_TCK_TIMEOUT_SECS.
    let secs = std::env::var("MQLITE_TCK_TIMEOUT_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let limit = std::time::Duration::from_secs(secs);
    let outcome = rt.block_on(async { tokio::time::timeout(limit, run(ctx)).await });
    // Every task of the case ends here, and with it every store the case left open.
    drop(rt);
    match outcome {
        Ok(result) => result.map_err(|e| Failed::from(mqlite_contract::error::chain(&*e)))?,
        Err(_) => return Err(Failed::from(format!("the case did not finish in {secs} s"))),
    }
    consistent(factory.factory(), dir.path())
}

/// The store's own consistency check of what a passing case left behind (every index
/// entry matches its row, every row has its entries; SQLite's integrity check): a case
/// that passes over a store whose data disagrees with itself fails.
fn consistent<F: StoreFactory>(factory: &F, dir: &Path) -> std::result::Result<(), Failed> {
    match factory.integrity_check(dir) {
        Ok(None) => Ok(()),
        Ok(Some(verdict)) if verdict == "ok" => Ok(()),
        Ok(Some(verdict)) => Err(Failed::from(format!(
            "the consistency check after the case failed: {verdict}"
        ))),
        Err(e) => Err(Failed::from(format!(
            "the consistency check after the case could not run: {e}"
        ))),
    }
}

/// Runs every case against `factory`'s store, both ways, as a test binary
/// (`harness = false`): the entry point a store written outside this repository uses.
pub fn run<F: StoreFactory + Clone>(store: &str, factory: F) -> ! {
    let args = Arguments::from_args();
    libtest_mimic::run(&args, trials(store, factory)).exit()
}

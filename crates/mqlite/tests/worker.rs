//! The worker: automatic renewal keeps a slow handler's lock, retries back off and end
//! in the dead-letter state at the bound, a graceful shutdown loses nothing and abandons
//! nothing it finished, and a panicking handler is isolated. The relay task too. Every wait reads a manual
//! clock; the test moves it and waits for the engine to react (no sleeps).

use std::sync::Arc;
use std::time::Duration;

use mqlite::worker::{HandlerError, REASON_RETRIES_EXHAUSTED, RetryPolicy, Source, Worker};
use mqlite::{
    Engine, EngineOptions, GenericEngine, ManualClock, MessageState, OutMessage, PeekOptions,
    QueueConfig, SqliteOptions, SqliteStore, Store,
};
use mqlite_tck::cases::worker::{
    a_hung_handler_is_dropped_at_its_maximum_runtime, eventually,
    only_a_handler_showing_progress_keeps_its_lease,
};
use tokio::sync::{Notify, mpsc};

const Q: &str = "jobs";

async fn engine(clock: &ManualClock, lock_ms: u64) -> Engine {
    let store = SqliteStore::open(SqliteOptions::new(":memory:").clock(clock.shared()))
        .await
        .expect("open");
    let options = EngineOptions {
        background: false,
        long_poll_recheck: Duration::from_millis(100),
        ..Default::default()
    };
    let mq = Engine::with_store(store, options).await.expect("engine");
    let config = QueueConfig {
        lock_duration: Duration::from_millis(lock_ms),
        max_delivery_count: 100,
        ..Default::default()
    };
    mq.create_queue(Q, config).await.expect("queue");
    mq
}

/// A broker serving a memory store on the manual clock (no background loops: the tests
/// drive the sweeps), with a queue as [`engine`] makes it, and a remote client of it on
/// the same clock.
async fn broker(
    clock: &ManualClock,
    lock_ms: u64,
) -> (mqlite_broker::Broker, mqlite::remote::Client) {
    let mut config = mqlite_broker::BrokerConfig::new(
        "127.0.0.1:0".parse().expect("an address"),
        ":memory:",
        mqlite_broker::AuthConfig::Tokens(vec![TOKEN.into()]),
    );
    config.clock = clock.shared();
    config.background = false;
    let broker = mqlite_broker::Broker::start(config)
        .await
        .expect("a broker");
    let mq = broker.engine().expect("serving");
    let queue = QueueConfig {
        lock_duration: Duration::from_millis(lock_ms),
        max_delivery_count: 100,
        ..Default::default()
    };
    mq.create_queue(Q, queue).await.expect("queue");
    let dsn = format!("mqlite://{TOKEN}@{}", broker.addr());
    let client = mqlite::remote::Client::connect(&dsn)
        .expect("a DSN")
        .with_clock(clock.shared());
    (broker, client)
}

const TOKEN: &str = "a-token-for-the-worker-tests";

/// Runs a worker test twice: on the embedded engine, and through a broker serving it
/// with the remote client (the same worker, its calls over HTTP).
macro_rules! both {
    ($name:ident, $lock_ms:expr) => {
        mod $name {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn embedded() {
                let clock = ManualClock::new(1_700_000_000_000);
                let mq = engine(&clock, $lock_ms).await;
                super::$name(&clock, &mq, mq.clone()).await;
                mq.close().await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn through_a_broker() {
                let clock = ManualClock::new(1_700_000_000_000);
                let (broker, client) = broker(&clock, $lock_ms).await;
                let mq = broker.engine().expect("serving").clone();
                super::$name(&clock, &mq, client).await;
                broker.shutdown().await.expect("shutdown");
            }
        }
    };
}

/// Handlers held at a gate: each counts its start, then waits for a permit the test
/// gives ([`Gate::open`]).
#[derive(Clone)]
struct Gate {
    permits: Arc<tokio::sync::Semaphore>,
    started: Arc<std::sync::atomic::AtomicUsize>,
}

impl Gate {
    /// A closed gate: no handler passes until [`Gate::open`].
    fn closed() -> Self {
        Gate {
            permits: Arc::new(tokio::sync::Semaphore::new(0)),
            started: Arc::default(),
        }
    }

    /// A handler's body: counted as started, done once a permit comes.
    async fn pass(&self) {
        self.started
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.permits.acquire().await.expect("gate").forget();
    }

    /// Lets `n` handlers through.
    fn open(&self, n: usize) {
        self.permits.add_permits(n);
    }

    /// Waits until `n` handlers have started.
    async fn started(&self, what: &str, n: usize) {
        eventually(what, || {
            let now = self.started.load(std::sync::atomic::Ordering::SeqCst);
            async move { now == n }
        })
        .await;
    }
}

async fn only_message<S: Store>(mq: &GenericEngine<S>) -> Option<mqlite::Message> {
    mq.peek(Q, PeekOptions::default())
        .await
        .expect("peek")
        .into_iter()
        .next()
}

/// How a slow handler waits for the test to let it finish.
#[derive(Clone, Copy)]
enum Waits {
    /// On an async notification: its task yields.
    Async,
    /// In `tokio::task::spawn_blocking`, its work on a thread of its own, as the
    /// worker's docs tell a handler that blocks: its job task still yields.
    Blocking,
}

/// A handler that takes three lease lengths keeps its lock: the worker renews it
/// whenever two thirds of the lease have passed, and the completion succeeds.
async fn automatic_renewal_keeps_a_slow_handlers_lock<S: Store, C: Source>(
    clock: &ManualClock,
    mq: &GenericEngine<S>,
    source: C,
) {
    slow_handler_keeps_its_lock(clock, mq, source, Waits::Async).await;
}

/// The same for a handler whose work blocks a thread, run in `spawn_blocking`.
async fn a_handler_blocking_in_spawn_blocking_keeps_its_lock<S: Store, C: Source>(
    clock: &ManualClock,
    mq: &GenericEngine<S>,
    source: C,
) {
    slow_handler_keeps_its_lock(clock, mq, source, Waits::Blocking).await;
}

async fn slow_handler_keeps_its_lock<S: Store, C: Source>(
    clock: &ManualClock,
    mq: &GenericEngine<S>,
    source: C,
    waits: Waits,
) {
    mq.send(Q, OutMessage::new("slow")).await.expect("send");
    let started = Arc::new(Notify::new());
    let finish = Arc::new(Notify::new());
    // What the blocking handler's thread waits on.
    let (release, released) = std::sync::mpsc::channel::<()>();
    let released = Arc::new(std::sync::Mutex::new(released));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = {
        let (started, finish) = (started.clone(), finish.clone());
        let w = Worker::new(source.clone(), Q, move |_m| {
            let (started, finish, released) = (started.clone(), finish.clone(), released.clone());
            async move {
                started.notify_one();
                match waits {
                    Waits::Async => finish.notified().await,
                    Waits::Blocking => tokio::task::spawn_blocking(move || {
                        released
                            .lock()
                            .expect("the receiver")
                            .recv()
                            .expect("released")
                    })
                    .await
                    .expect("the blocking work"),
                }
                Ok(())
            }
        });
        tokio::spawn(w.run_until(async {
            let _ = stopped.await;
        }))
    };
    started.notified().await;
    let start = clock.now();
    // Three lease lengths, in steps; after each step the lease reaches past the next.
    while clock.now() < start + 3_000 {
        clock.advance(100);
        eventually("the lease is renewed ahead of the clock", || async {
            only_message(mq)
                .await
                .is_some_and(|m| m.locked_until_ms - clock.now() > 300)
        })
        .await;
    }
    let m = only_message(mq).await.expect("still there");
    assert_eq!(m.state, MessageState::Locked);
    assert_eq!(m.delivery_count, 1, "never redelivered");
    match waits {
        Waits::Async => finish.notify_one(),
        Waits::Blocking => release.send(()).expect("the handler waits"),
    }
    eventually("the slow handler's message is completed", || async {
        only_message(mq).await.is_none()
    })
    .await;
    stop.send(()).expect("stop");
    let report = worker.await.expect("join").expect("worker");
    assert_eq!((report.completed, report.lock_lost), (1, 0), "{report:?}");
}

/// A retryable failure is abandoned with exponential backoff, and at the attempt bound
/// the message is dead-lettered with the handler's error text.
async fn retries_back_off_and_dead_letter_at_the_bound<S: Store, C: Source>(
    clock: &ManualClock,
    mq: &GenericEngine<S>,
    source: C,
) {
    let seq = mq.send(Q, OutMessage::new("doomed")).await.expect("send");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let policy = RetryPolicy {
        initial_backoff: Duration::from_millis(100),
        max_backoff: Duration::from_secs(10),
        multiplier: 2.0,
        jitter: 0.0,
        max_attempts: 3,
    };
    let worker = tokio::spawn(
        Worker::new(source.clone(), Q, |_m| async {
            Err(HandlerError::retry("boom: the service is down"))
        })
        .retry(policy)
        .run_until(async {
            let _ = stopped.await;
        }),
    );
    for (attempt, backoff) in [(1, 100), (2, 200)] {
        eventually("the failed delivery is parked for its backoff", || async {
            only_message(mq)
                .await
                .is_some_and(|m| m.state == MessageState::Scheduled && m.delivery_count == attempt)
        })
        .await;
        let parked = only_message(mq).await.expect("parked");
        assert_eq!(
            parked.visible_at_ms,
            clock.now() + backoff,
            "attempt {attempt}"
        );
        clock.advance(backoff);
        mq.run_sweeps().await.expect("sweeps");
    }
    eventually("the third failure dead-letters", || async {
        only_message(mq)
            .await
            .is_some_and(|m| m.state == MessageState::DeadLettered)
    })
    .await;
    let dead = only_message(mq).await.expect("dead letter");
    assert_eq!((dead.seq, dead.delivery_count), (seq, 3));
    assert_eq!(
        dead.dead_letter_reason.as_deref(),
        Some(REASON_RETRIES_EXHAUSTED)
    );
    assert_eq!(
        dead.dead_letter_description.as_deref(),
        Some("boom: the service is down")
    );
    stop.send(()).expect("stop");
    let report = worker.await.expect("join").expect("worker");
    assert_eq!((report.retried, report.dead_lettered), (2, 1), "{report:?}");
}

/// Shutdown stops receiving, lets running handlers finish within the grace period
/// (their messages are completed), and abandons only what is still running when it
/// ends: nothing is lost and nothing finished is abandoned.
async fn graceful_shutdown_loses_nothing_and_abandons_nothing_finished<S: Store, C: Source>(
    clock: &ManualClock,
    mq: &GenericEngine<S>,
    source: C,
) {
    let batch = (0..10).map(|i| OutMessage::new(format!("m{i}"))).collect();
    mq.send_batch(Q, batch).await.expect("send");
    let (blocked_tx, mut blocked) = mpsc::unbounded_channel::<String>();
    let release_late = Arc::new(Notify::new());
    let release_never = Arc::new(Notify::new());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = {
        let (late, never) = (release_late.clone(), release_never.clone());
        let w = Worker::new(source.clone(), Q, move |m| {
            let (blocked_tx, late, never) = (blocked_tx.clone(), late.clone(), never.clone());
            async move {
                let body = String::from_utf8_lossy(m.body()).into_owned();
                match body.as_str() {
                    "m3" => {
                        let _ = blocked_tx.send(body);
                        late.notified().await;
                    }
                    "m7" => {
                        let _ = blocked_tx.send(body);
                        never.notified().await;
                    }
                    _ => {}
                }
                Ok(())
            }
        })
        .concurrency(4)
        .grace(Duration::from_secs(5));
        tokio::spawn(w.run_until(async {
            let _ = stopped.await;
        }))
    };
    for _ in 0..2 {
        blocked.recv().await.expect("a blocked handler");
    }
    eventually("the other eight are completed", || async {
        mq.stats(Q).await.expect("stats").total == 2
    })
    .await;
    stop.send(()).expect("shutdown");
    // m3 finishes inside the grace period; m7 never does.
    release_late.notify_one();
    eventually("m3 is completed during the grace period", || async {
        mq.stats(Q).await.expect("stats").total == 1
    })
    .await;
    // Move the clock until the grace period ends. The worker reads the clock when it
    // gets to the grace period, which on a loaded machine may be many steps after the
    // shutdown; the lease (10 minutes) outlives every step taken here, so m7 keeps its
    // lock until the worker gives it up.
    for _ in 0..300 {
        if worker.is_finished() {
            break;
        }
        clock.advance(1_000);
        for _ in 0..2_000 {
            tokio::task::yield_now().await;
        }
    }
    assert!(
        worker.is_finished(),
        "the worker has not stopped 300 s after its 5 s grace period began"
    );
    let report = worker.await.expect("join").expect("worker");
    assert_eq!(
        (report.completed, report.abandoned_at_shutdown),
        (9, 1),
        "{report:?}"
    );
    let left = only_message(mq).await.expect("m7 is kept");
    assert_eq!(left.body(), b"m7");
    assert_eq!(
        left.state,
        MessageState::Active,
        "abandoned for another consumer"
    );
}

/// A handler that panics is isolated: its message is abandoned for a retry and the
/// worker goes on with the others.
async fn a_panicking_handler_is_isolated<S: Store, C: Source>(
    _clock: &ManualClock,
    mq: &GenericEngine<S>,
    source: C,
) {
    let batch = ["ok-1", "panic", "ok-2", "ok-3"]
        .iter()
        .map(|b| OutMessage::new(*b))
        .collect();
    mq.send_batch(Q, batch).await.expect("send");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let policy = RetryPolicy {
        initial_backoff: Duration::from_secs(60),
        jitter: 0.0,
        ..Default::default()
    };
    let worker = tokio::spawn(
        Worker::new(source.clone(), Q, |m| async move {
            if m.body() == b"panic" {
                panic!("the handler's own bug");
            }
            Ok(())
        })
        .concurrency(2)
        .retry(policy)
        .run_until(async {
            let _ = stopped.await;
        }),
    );
    eventually(
        "the three good ones are completed and the bad one parked",
        || async {
            let all = mq.peek(Q, PeekOptions::default()).await.expect("peek");
            all.len() == 1 && all[0].state == MessageState::Scheduled
        },
    )
    .await;
    let parked = only_message(mq).await.expect("the panicking one");
    assert_eq!(parked.body(), b"panic");
    assert_eq!(parked.delivery_count, 1);
    // The worker still serves: a new message is handled.
    mq.send(Q, OutMessage::new("after")).await.expect("send");
    eventually("the worker keeps serving", || async {
        mq.stats(Q).await.expect("stats").total == 1
    })
    .await;
    stop.send(()).expect("stop");
    let report = worker.await.expect("join").expect("worker");
    assert_eq!(
        (report.completed, report.panicked, report.retried),
        (4, 1, 1),
        "{report:?}"
    );
}

/// The queue handle names its queue once: sends, receives, batch settlements of what a
/// receive returned, and a worker, all on `jobs`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_handle_settles_what_it_received() {
    let clock = ManualClock::new(1_700_000_000_000);
    let mq = engine(&clock, 60_000).await;
    let jobs = mq.queue(Q);
    assert_eq!(jobs.name(), Q);
    jobs.send_batch((0..5).map(|i| OutMessage::new(format!("m{i}"))).collect())
        .await
        .expect("send");
    let got = jobs
        .receive(mqlite::ReceiveOptions::batch(5))
        .await
        .expect("receive");
    assert!(
        jobs.renew_batch(&got)
            .await
            .expect("renew")
            .iter()
            .all(|r| r.ok)
    );
    assert!(
        jobs.complete_batch(&got)
            .await
            .expect("complete")
            .iter()
            .all(|r| r.ok)
    );
    // Completing again replays Ok (a receipt), it does not fail.
    assert!(
        jobs.complete_batch(&got)
            .await
            .expect("again")
            .iter()
            .all(|r| r.ok)
    );
    assert_eq!(jobs.stats().await.expect("stats").total, 0);
    // A handle on another queue cannot settle these.
    mq.create_queue("other", QueueConfig::default())
        .await
        .expect("queue");
    jobs.send(OutMessage::new("x")).await.expect("send");
    let m = jobs.receive_one().await.expect("receive").expect("one");
    assert!(matches!(
        mq.queue("other").complete(&m).await,
        Err(mqlite::Error::LockLost {
            reason: mqlite::LockLostReason::WrongQueue
        })
    ));
    jobs.complete(&m).await.expect("complete on its own queue");
    mq.close().await;
}

/// The worker's inbox option: through `Inbox::handler`, a handler's local effect and its
/// marker commit together, so a repeat is completed without a second effect and the
/// same identity with another payload is dead-lettered as an inbox conflict.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inbox_handler_applies_once_and_dead_letters_a_conflict() {
    use mqlite::EventIdentity;
    use mqlite::inbox::{Inbox, REASON_INBOX_CONFLICT};

    let clock = ManualClock::new(1_700_000_000_000);
    let mq = engine(&clock, 60_000).await;
    mq.tx(async |t| {
        t.native()
            .sql()?
            .execute("CREATE TABLE effects (body TEXT)", [])
            .map_err(|e| mqlite::Error::backend("sqlite", e))
    })
    .await
    .expect("effects table");
    let event = |body: &str| {
        OutMessage::new(body.to_owned()).with_event(EventIdentity::new("test", "evt-1"))
    };
    // Q has no dedup window: the repeat and the other payload arrive as messages.
    mq.send_batch(Q, vec![event("a"), event("a"), event("b")])
        .await
        .expect("send");
    let inbox = Inbox::new(mq.clone());
    let handler = inbox.handler("projection", async |m: &mqlite::Message, t| {
        let body = String::from_utf8_lossy(m.body()).into_owned();
        t.native()
            .sql()?
            .execute("INSERT INTO effects (body) VALUES (?1)", [body])
            .map_err(HandlerError::retry)?;
        Ok(())
    });
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = tokio::spawn(mq.worker(Q, handler).run_until(async {
        let _ = stopped.await;
    }));
    eventually("every message settled", || async {
        mq.stats(Q).await.expect("stats").active == 0
            && mq.stats(Q).await.expect("stats").locked == 0
    })
    .await;
    let _ = stop.send(());
    let report = worker.await.expect("join").expect("worker");
    assert_eq!((report.completed, report.dead_lettered), (2, 1));
    let effects: Vec<String> = mq
        .tx(async |t| {
            let sql = t.native().sql()?;
            let mut stmt = sql
                .prepare("SELECT body FROM effects")
                .map_err(|e| mqlite::Error::backend("sqlite", e))?;
            let rows = stmt
                .query_map([], |r| r.get(0))
                .and_then(Iterator::collect)
                .map_err(|e| mqlite::Error::backend("sqlite", e))?;
            Ok::<_, mqlite::Error>(rows)
        })
        .await
        .expect("effects");
    assert_eq!(effects, ["a"], "one effect");
    let dead = only_message(&mq).await.expect("the conflict");
    assert_eq!(dead.state, MessageState::DeadLettered);
    assert_eq!(
        dead.dead_letter_reason.as_deref(),
        Some(REASON_INBOX_CONFLICT)
    );
    assert_eq!(dead.body(), b"b");
}

async fn produce_intent(producer: &Engine, queue: &str, id: &str) {
    let m = OutMessage::new("{}").with_event(mqlite::EventIdentity::new("shop", id));
    let queue = queue.to_owned();
    producer
        .tx(async move |t| t.relay(&queue, m).await)
        .await
        .expect("the intent commits");
}

async fn queued_in(queue: &Engine, name: &str) -> usize {
    queue
        .peek(name, PeekOptions::default())
        .await
        .expect("peek")
        .len()
}

/// The relay as a task: `run_until` sends what the producer commits, rests on the
/// producer's clock when nothing is pending, and stops when told; a target queue
/// without a dedup window ends it with the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_run_until_rests_on_the_clock_and_stops() {
    let clock = ManualClock::new(1_700_000_000_000);
    let (producer, queue) = (engine(&clock, 60_000).await, engine(&clock, 60_000).await);
    let window = QueueConfig {
        dedup_window: Duration::from_secs(3600),
        ..Default::default()
    };
    queue.create_queue("orders", window).await.expect("queue");
    produce_intent(&producer, "orders", "order-1").await;

    let relay = std::sync::Arc::new(mqlite::relay::Relay::new(producer.clone(), queue.clone()));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = {
        let relay = relay.clone();
        tokio::spawn(async move {
            relay
                .run_until(
                    async {
                        let _ = stopped.await;
                    },
                    Duration::from_secs(1),
                )
                .await
        })
    };
    eventually("the first intent is sent", || async {
        queued_in(&queue, "orders").await == 1
    })
    .await;
    // Committed while the relay rests: sent once the interval passes on the clock.
    produce_intent(&producer, "orders", "order-2").await;
    clock.advance(1_000);
    eventually("the second intent is sent", || async {
        queued_in(&queue, "orders").await == 2
    })
    .await;
    eventually("nothing pending", || async {
        relay.backlog().await.expect("backlog").pending == 0
    })
    .await;
    let _ = stop.send(());
    task.await.expect("join").expect("stops cleanly");

    // A target without a dedup window ends the task with the reason.
    queue
        .create_queue("plain", QueueConfig::default())
        .await
        .expect("queue");
    produce_intent(&producer, "plain", "order-3").await;
    let ended = relay
        .run_until(std::future::pending(), Duration::from_secs(1))
        .await;
    assert!(
        matches!(&ended, Err(mqlite::Error::InvalidArgument(why)) if why.contains("dedup window")),
        "{ended:?}"
    );
}

/// Completions of handlers that finish together share calls: the worker hands each
/// `Ok` to one completer, which completes whatever gathered while its previous call
/// waited in one batch. Here the store is held by an application transaction while
/// four handlers finish, and the completions gather: four completions take one call
/// (counted by the statements it ran). On the current-thread runtime the yields below
/// let every job hand its completion over before the completer runs, whatever the
/// machine's load.
#[tokio::test]
async fn completions_of_concurrent_handlers_share_commits() {
    let clock = ManualClock::new(1_700_000_000_000);
    let mq = engine(&clock, 30_000).await;
    for i in 0..4 {
        mq.send(Q, OutMessage::new(format!("m{i}")))
            .await
            .expect("send");
    }
    let gate = Gate::closed();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = {
        let (mq, gate) = (mq.clone(), gate.clone());
        tokio::spawn(async move {
            mq.worker(Q, move |_m| {
                let gate = gate.clone();
                async move {
                    gate.pass().await;
                    Ok(())
                }
            })
            .concurrency(4)
            .run_until(async {
                let _ = stopped.await;
            })
            .await
        })
    };
    gate.started("four handlers running", 4).await;
    // Hold the store: the completions will wait for it.
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    let (held, is_held) = tokio::sync::oneshot::channel::<()>();
    let holder = {
        let mq = mq.clone();
        tokio::spawn(async move {
            mq.tx(async move |_t| {
                let _ = held.send(());
                let _ = released.await;
                Ok::<_, mqlite::Error>(())
            })
            .await
        })
    };
    is_held.await.expect("held");
    let before = mq.store().group_commits();
    let statements = mqlite::Store::work(mq.store()).expect("counted").statements;
    gate.open(4);
    stop.send(()).expect("stop");
    for _ in 0..10_000 {
        tokio::task::yield_now().await;
    }
    release.send(()).expect("release");
    holder
        .await
        .expect("holder")
        .expect("the holding transaction");
    let report = worker.await.expect("worker").expect("report");
    assert_eq!(report.completed, 4);
    let commits = mq.store().group_commits() - before;
    let statements = mqlite::Store::work(mq.store()).expect("counted").statements - statements;
    println!("four completions: {commits} commits, {statements} statements");
    // The store's group commit already shares one commit among settlements waiting for
    // it; the worker's coalescing also makes them one call: one complete_batch (3
    // statements) against 12 for four completes (measured). The stop is sent with the
    // gate opened: a worker that took a freed slot for one more receive before its stop
    // would fold the four into that receive and claim too (5 statements; it did in half
    // of the runs once the handlers ran in their jobs' tasks, before the stop came first).
    assert!(
        statements <= 4,
        "four completions ran {statements} statements: they were not coalesced"
    );
    assert_eq!(commits, 1, "four completions, one commit");
    assert_eq!(mq.stats(Q).await.expect("stats").active, 0);
}

/// A worker told to stop starts no other receive: the slot its handler frees as it
/// finishes is not taken for one more claim, which would only give the message back with
/// a delivery spent. On the current-thread runtime the stop and the freed slot are both
/// ready when the receive loop next runs (the loop once picked either at random).
#[tokio::test]
async fn a_worker_told_to_stop_claims_nothing_more() {
    let clock = ManualClock::new(1_700_000_000_000);
    let mq = engine(&clock, 30_000).await;
    for body in ["first", "second"] {
        mq.send(Q, OutMessage::new(body)).await.expect("send");
    }
    let gate = Gate::closed();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = {
        let gate = gate.clone();
        tokio::spawn(
            mq.worker(Q, move |_m| {
                let gate = gate.clone();
                async move {
                    gate.pass().await;
                    Ok(())
                }
            })
            .concurrency(1)
            .prefetch(0)
            .run_until(async {
                let _ = stopped.await;
            }),
        )
    };
    gate.started("the first handler running", 1).await;
    // Enough for a second handler too: a worker that claimed again would finish it.
    gate.open(2);
    stop.send(()).expect("stop");
    let report = worker.await.expect("join").expect("report");
    assert_eq!(
        (report.completed, report.abandoned_at_shutdown),
        (1, 0),
        "{report:?}"
    );
    let left = only_message(&mq).await.expect("the second message is kept");
    assert_eq!(left.body(), b"second");
    assert_eq!(
        (left.state, left.delivery_count),
        (MessageState::Active, 0),
        "never claimed"
    );
}

/// Prefetch: one receive claims for the free handler and the buffer; at shutdown the
/// buffered messages go back at once (active, for another consumer), not at the end of
/// their leases, while the running handler finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefetched_messages_wait_locked_and_go_back_at_shutdown() {
    let clock = ManualClock::new(1_700_000_000_000);
    let mq = engine(&clock, 60_000).await;
    let batch = (0..6).map(|i| OutMessage::new(format!("m{i}"))).collect();
    mq.send_batch(Q, batch).await.expect("send");
    let started = Arc::new(Notify::new());
    let finish = Arc::new(Notify::new());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = {
        let (started, finish) = (started.clone(), finish.clone());
        let w = mq
            .worker(Q, move |_m| {
                let (started, finish) = (started.clone(), finish.clone());
                async move {
                    started.notify_one();
                    finish.notified().await;
                    Ok(())
                }
            })
            .concurrency(1)
            .prefetch(3);
        tokio::spawn(w.run_until(async {
            let _ = stopped.await;
        }))
    };
    started.notified().await;
    let stats = mq.stats(Q).await.expect("stats");
    assert_eq!(
        (stats.locked, stats.active),
        (4, 2),
        "one receive claimed the handler's message and three for the buffer"
    );
    stop.send(()).expect("stop");
    eventually("the buffer goes back at shutdown", || async {
        mq.stats(Q).await.expect("stats").active == 5
    })
    .await;
    finish.notify_one();
    let report = worker.await.expect("join").expect("worker");
    assert_eq!(
        (report.returned_unstarted, report.completed),
        (3, 1),
        "{report:?}"
    );
    let stats = mq.stats(Q).await.expect("stats");
    assert_eq!((stats.active, stats.locked), (5, 0), "the buffer is back");
    mq.close().await;
}

/// A buffered message whose lease is half spent when its handler frees up is renewed
/// first: the handler gets it with a whole lease ahead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_buffered_message_is_renewed_before_its_handler_starts() {
    let clock = ManualClock::new(1_700_000_000_000);
    let mq = engine(&clock, 10_000).await;
    let batch = (0..2).map(|i| OutMessage::new(format!("m{i}"))).collect();
    mq.send_batch(Q, batch).await.expect("send");
    let first_started = Arc::new(Notify::new());
    let release_first = Arc::new(Notify::new());
    let (seen_tx, mut seen) = mpsc::unbounded_channel::<i64>();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = {
        let (started, release) = (first_started.clone(), release_first.clone());
        let w = mq
            .worker(Q, move |m| {
                let (started, release, seen_tx) =
                    (started.clone(), release.clone(), seen_tx.clone());
                async move {
                    if m.body() == b"m0" {
                        started.notify_one();
                        release.notified().await;
                    } else {
                        let _ = seen_tx.send(m.locked_until_ms);
                    }
                    Ok(())
                }
            })
            .concurrency(1)
            .prefetch(1);
        tokio::spawn(w.run_until(async {
            let _ = stopped.await;
        }))
    };
    first_started.notified().await;
    let claimed_at = clock.now();
    // Past half of the second message's lease (10 s), before the first's own renewal
    // (at two thirds).
    clock.advance(6_000);
    release_first.notify_one();
    let until = seen.recv().await.expect("the second handler ran");
    assert_eq!(
        until,
        claimed_at + 6_000 + 10_000,
        "renewed to a whole lease from the moment its handler got it"
    );
    eventually("both completed", || async {
        mq.stats(Q).await.expect("stats").total == 0
    })
    .await;
    stop.send(()).expect("stop");
    let report = worker.await.expect("join").expect("worker");
    assert_eq!(
        (report.completed, report.returned_unstarted),
        (2, 0),
        "{report:?}"
    );
    mq.close().await;
}

both!(automatic_renewal_keeps_a_slow_handlers_lock, 1_000);
both!(a_handler_blocking_in_spawn_blocking_keeps_its_lock, 1_000);

both!(retries_back_off_and_dead_letter_at_the_bound, 30_000);

both!(
    graceful_shutdown_loses_nothing_and_abandons_nothing_finished,
    600_000
);

both!(a_panicking_handler_is_isolated, 60_000);
// Proof of life (18.1): the TCK runs both scenarios on every store; here, through a
// broker too.
both!(a_hung_handler_is_dropped_at_its_maximum_runtime, 1_000);
both!(only_a_handler_showing_progress_keeps_its_lease, 1_000);

/// The remote client answers with the engine's types and errors: queues listed as the
/// engine lists them, a message peeked as sent, a lock fenced (`LockLost`), a missing
/// queue `NotFound`, a wrong token `Error::Remote` 401, access keys, a filter test, a
/// paused queue's `QueuePaused`, schedules.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_remote_client_answers_with_the_engines_types() {
    let clock = ManualClock::new(1_700_000_000_000);
    let (broker, mq) = broker(&clock, 30_000).await;
    let queues = mq.list_queues().await.expect("list");
    assert_eq!(queues[0].name, Q);
    assert_eq!(
        queues[0].config.lock_duration,
        Duration::from_millis(30_000)
    );
    let mut out = OutMessage::new("hello");
    out.subject = Some("greeting".into());
    out.properties.insert("region".into(), "eu".into());
    let seq = mq.send(Q, out.clone()).await.expect("send");
    let peeked = mq.peek(Q, PeekOptions::default()).await.expect("peek");
    assert_eq!((peeked[0].seq, &peeked[0].content), (seq, &out));
    assert_eq!(peeked[0].state, MessageState::Active);
    let got = mq
        .receive_one(Q)
        .await
        .expect("receive")
        .expect("a message");
    assert_eq!(got.state, MessageState::Locked);
    let forged = mqlite::LockRef {
        seq,
        token: "00000000000000000000000000000000".parse().expect("a token"),
    };
    assert!(matches!(
        mq.complete(Q, forged).await,
        Err(mqlite::Error::LockLost { .. })
    ));
    assert!(mq.renew(Q, &got).await.expect("renew") > clock.now());
    mq.complete(Q, &got).await.expect("complete");
    assert_eq!(mq.stats(Q).await.expect("stats").total, 0);
    assert!(matches!(
        mq.send("nope", OutMessage::new("x")).await,
        Err(mqlite::Error::NotFound { .. })
    ));
    let stranger =
        mqlite::remote::Client::connect(&format!("mqlite://wrong-token@{}", broker.addr()))
            .expect("a DSN");
    assert!(matches!(
        stranger.stats(Q).await,
        Err(mqlite::Error::Remote { status: 401, .. })
    ));
    let key = mq
        .create_key(None, "ci", &[mqlite::Permission::Send], 0)
        .await
        .expect("a key");
    assert!(key.token.starts_with("mqk_"));
    let listed = mq.list_keys(None, 10).await.expect("keys");
    assert_eq!(listed[0].permissions, [mqlite::Permission::Send]);
    assert!(mq.revoke_key(&key.key.id).await.expect("revoke"));
    let tested = mq
        .test_filter("subject == \"greeting\"", Some(&out))
        .await
        .expect("test");
    assert!(tested.valid && tested.ran && tested.matched, "{tested:?}");
    assert!(mq.status().await.expect("status").auth);
    // Pause and resume (19.1): the refusal comes back as the engine's error.
    mq.set_queue_status(Q, mqlite::QueueStatus::SendDisabled)
        .await
        .expect("pause");
    let listed = mq.list_queues().await.expect("list");
    assert_eq!(listed[0].config.status, mqlite::QueueStatus::SendDisabled);
    assert!(matches!(
        mq.send(Q, OutMessage::new("x")).await,
        Err(mqlite::Error::QueuePaused {
            status: mqlite::QueueStatus::SendDisabled,
            ..
        })
    ));
    mq.set_queue_status(Q, mqlite::QueueStatus::Active)
        .await
        .expect("resume");
    mq.send(Q, OutMessage::new("x")).await.expect("taken again");
    // Schedules (21) read back as created, cron and interval alike.
    let mut spec = mqlite::ScheduleSpec::new(
        "nightly",
        Q,
        mqlite::Recurrence::Cron {
            expr: "0 2 * * 1-5".into(),
            tz: "Europe/Paris".into(),
        },
        out.clone(),
    );
    spec.missed = mqlite::Missed::Skip;
    let created = mq.create_schedule(spec.clone()).await.expect("schedule");
    assert_eq!(created.spec, spec);
    assert!(created.next_at_ms > clock.now());
    assert_eq!(mq.list_schedules().await.expect("list"), vec![created]);
    assert!(matches!(
        mq.create_schedule(mqlite::ScheduleSpec::new(
            "s",
            "nope",
            mqlite::Recurrence::Every(Duration::from_secs(60)),
            OutMessage::new("x")
        ))
        .await,
        Err(mqlite::Error::NotFound { .. })
    ));
    assert!(mq.delete_schedule("nightly").await.expect("delete"));
    assert!(mq.delete_queue(Q).await.expect("delete"));
    broker.shutdown().await.expect("shutdown");
}

/// A worker folds its completions into its next receive (promise 2.10): a worker of
/// one handler without prefetch, draining 40 messages, commits about once per message
/// (each completion with the next claim), where a receive and a complete apiece
/// would commit twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_folds_its_completions_into_its_next_receive() {
    const N: u64 = 40;
    let clock = ManualClock::new(1_700_000_000_000);
    let mq = engine(&clock, 60_000).await;
    let batch = (0..N).map(|i| OutMessage::new(format!("m{i}"))).collect();
    mq.send_batch(Q, batch).await.expect("send");
    // Every commit counts, on the writer thread or the caller's.
    let transactions = |mq: &Engine| mq.store().group_commits();
    let before = transactions(&mq);
    let handled = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let all = Arc::new(Notify::new());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = {
        let (handled, all) = (handled.clone(), all.clone());
        tokio::spawn(
            mq.worker(Q, move |_m| {
                let (handled, all) = (handled.clone(), all.clone());
                async move {
                    if handled.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1 == N {
                        all.notify_one();
                    }
                    Ok(())
                }
            })
            .concurrency(1)
            .prefetch(0)
            .run_until(async {
                let _ = stopped.await;
            }),
        )
    };
    all.notified().await;
    stop.send(()).expect("stop");
    let report = worker.await.expect("join").expect("worker");
    let spent = transactions(&mq) - before;
    assert_eq!(report.completed, N, "{report:?}");
    println!("{N} messages, {spent} transactions");
    assert!(
        spent <= N + N / 4,
        "{N} messages took {spent} transactions: the completions were not folded"
    );
}

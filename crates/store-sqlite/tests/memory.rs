//! `:memory:` is a private database per store: it takes no file lock, works end to end,
//! and two such stores share nothing.

use mqlite_contract::{Error, ManualClock, MessageState, OutMessage, QueueConfig};
use mqlite_engine::{Engine, EngineOptions};
use mqlite_store_sqlite::{SqliteOptions, SqliteStore};

async fn memory_engine(clock: &ManualClock) -> Engine<SqliteStore> {
    let store = SqliteStore::open(SqliteOptions::new(":memory:").clock(clock.shared()))
        .await
        .expect("open :memory:");
    assert!(store.path().is_none(), ":memory: has no file");
    Engine::with_store(
        store,
        EngineOptions {
            background: false,
            ..Default::default()
        },
    )
    .await
    .expect("engine")
}

/// A queue on `:memory:` sends, receives under a lease, and completes.
#[tokio::test]
async fn memory_store_runs_send_receive_complete() {
    let clock = ManualClock::new(1_700_000_000_000);
    let engine = memory_engine(&clock).await;
    engine
        .create_queue("jobs", QueueConfig::default())
        .await
        .expect("create queue");

    let seq = engine
        .send("jobs", OutMessage::new(b"hello".to_vec()))
        .await
        .expect("send");
    let got = engine
        .receive_one("jobs")
        .await
        .expect("receive")
        .expect("a message");
    assert_eq!(got.seq, seq);
    assert_eq!(got.body(), b"hello");
    assert_eq!(got.state, MessageState::Locked);
    assert_eq!(got.delivery_count, 1);

    engine.complete("jobs", &got).await.expect("complete");
    assert!(engine.receive_one("jobs").await.expect("receive").is_none());
    let stats = engine.stats("jobs").await.expect("stats");
    assert_eq!(stats.total, 0, "completed message is gone: {stats:?}");
    engine.close().await;
}

/// Two `:memory:` stores are separate databases: queues and messages of one are
/// invisible to the other.
#[tokio::test]
async fn two_memory_stores_are_independent() {
    let clock = ManualClock::new(1_700_000_000_000);
    let first = memory_engine(&clock).await;
    let second = memory_engine(&clock).await;

    first
        .create_queue("jobs", QueueConfig::default())
        .await
        .expect("create on first");
    first
        .send("jobs", OutMessage::new(b"only-in-first".to_vec()))
        .await
        .expect("send on first");

    assert!(
        second.list_queues().await.expect("list").is_empty(),
        "the second store sees the first store's queue"
    );
    match second.receive_one("jobs").await {
        Err(Error::NotFound { kind: "queue", .. }) => {}
        other => panic!("expected the queue to be unknown to the second store, got {other:?}"),
    }

    second
        .create_queue("jobs", QueueConfig::default())
        .await
        .expect("create on second");
    assert!(
        second.receive_one("jobs").await.expect("receive").is_none(),
        "the second store's queue of the same name is empty"
    );

    let got = first
        .receive_one("jobs")
        .await
        .expect("receive on first")
        .expect("the first store still holds its message");
    assert_eq!(got.body(), b"only-in-first");
    first.complete("jobs", &got).await.expect("complete");

    first.close().await;
    second.close().await;
}

/// Calling the engine from inside a transaction body (instead of `tx.send`) would wait
/// for the transaction that is running it; it is refused at once with a message that
/// says what to do, and the transaction goes on.
#[tokio::test]
async fn engine_calls_inside_a_transaction_body_are_refused_not_deadlocked() {
    let clock = ManualClock::new(1_700_000_000_000);
    let engine = memory_engine(&clock).await;
    engine
        .create_queue("jobs", QueueConfig::default())
        .await
        .expect("create queue");
    let inner = engine.clone();
    let (refused, seq) = engine
        .tx(async move |tx| {
            let refused = inner.send("jobs", OutMessage::new(b"wrong".to_vec())).await;
            let seq = tx.send("jobs", OutMessage::new(b"right".to_vec())).await?;
            Ok::<_, Error>((refused, seq))
        })
        .await
        .expect("the transaction itself commits");
    match refused {
        Err(Error::InvalidArgument(msg)) => assert!(msg.contains("tx.send"), "{msg}"),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    let got = engine
        .receive_one("jobs")
        .await
        .expect("receive")
        .expect("one");
    assert_eq!((got.seq, got.body()), (seq, &b"right"[..]));
    engine.close().await;
}

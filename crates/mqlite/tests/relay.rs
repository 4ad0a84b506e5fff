//! The relay as a task: `run_until` sends what the producer commits, rests on the
//! producer's clock when nothing is pending (a manual clock here: no sleeps), and stops
//! when told; a target queue without a dedup window ends it with the reason.

use std::time::Duration;

use mqlite::relay::Relay;
use mqlite::{
    Engine, EngineOptions, Error, EventIdentity, ManualClock, OutMessage, PeekOptions, QueueConfig,
    SqliteOptions, SqliteStore,
};

async fn engine(clock: &ManualClock) -> Engine {
    let store = SqliteStore::open(SqliteOptions::new(":memory:").clock(clock.shared()))
        .await
        .expect("open");
    let options = EngineOptions {
        background: false,
        ..Default::default()
    };
    Engine::with_store(store, options).await.expect("engine")
}

async fn produce(producer: &Engine, queue: &str, id: &str) {
    let m = OutMessage::new("{}").with_event(EventIdentity::new("shop", id));
    let queue = queue.to_owned();
    producer
        .tx(async move |t| t.relay(&queue, m).await)
        .await
        .expect("the intent commits");
}

async fn queued(queue: &Engine, name: &str) -> usize {
    queue
        .peek(name, PeekOptions::default())
        .await
        .expect("peek")
        .len()
}

/// Waits, yielding, until `check` holds; a bound on iterations, not on time.
async fn eventually<F: Future<Output = bool>>(what: &str, mut check: impl FnMut() -> F) {
    for _ in 0..200_000 {
        if check().await {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("never happened: {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_until_relays_rests_on_the_clock_and_stops() {
    let clock = ManualClock::new(1_700_000_000_000);
    let (producer, queue) = (engine(&clock).await, engine(&clock).await);
    let window = QueueConfig {
        dedup_window: Duration::from_secs(3600),
        ..Default::default()
    };
    queue.create_queue("orders", window).await.expect("queue");
    produce(&producer, "orders", "order-1").await;

    let relay = std::sync::Arc::new(Relay::new(producer.clone(), queue.clone()));
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
        queued(&queue, "orders").await == 1
    })
    .await;
    // Committed while the relay rests: sent once the interval passes on the clock.
    produce(&producer, "orders", "order-2").await;
    clock.advance(1_000);
    eventually("the second intent is sent", || async {
        queued(&queue, "orders").await == 2
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
    produce(&producer, "plain", "order-3").await;
    let ended = relay
        .run_until(std::future::pending(), Duration::from_secs(1))
        .await;
    assert!(
        matches!(&ended, Err(Error::InvalidArgument(why)) if why.contains("dedup window")),
        "{ended:?}"
    );
}

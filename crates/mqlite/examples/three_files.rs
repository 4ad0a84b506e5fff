//! Producer → relay → queue → consumer across three SQLite files, then the trace of
//! three events: one delivered, one stuck in the producer's outbox, one conflicting.
//!
//! ```text
//! cargo run -p mqlite --example three_files
//! ```

use std::time::Duration;

use mqlite::inbox::{Inbox, Processed, settle};
use mqlite::relay::Relay;
use mqlite::rusqlite::params;
use mqlite::trace::Trace;
use mqlite::{
    Engine, EngineOptions, Error, EventIdentity, ManualClock, OutMessage, QueueConfig,
    SqliteOptions, SqliteStore,
};

const SOURCE: &str = "https://shop.example/orders";

fn order(id: &str, total: i64) -> OutMessage {
    let mut m = OutMessage::new(format!(r#"{{"total":{total}}}"#))
        .with_event(EventIdentity::new(SOURCE, id).with_type("order.created"));
    m.content_type = Some("application/json".into());
    m
}

async fn open(dir: &std::path::Path, file: &str, clock: &ManualClock) -> mqlite::Result<Engine> {
    let path = dir.join(file).display().to_string();
    let store = SqliteStore::open(SqliteOptions::new(path).clock(clock.shared())).await?;
    Engine::with_store(store, EngineOptions::default()).await
}

/// The producer's transaction: its job row and the relay intent, together.
async fn produce(producer: &Engine, id: &str, total: i64) -> mqlite::Result<()> {
    let (id, message) = (id.to_owned(), order(id, total));
    producer
        .tx(async move |t| {
            t.native()
                .sql()?
                .execute(
                    "INSERT OR REPLACE INTO jobs (id, total) VALUES (?1, ?2)",
                    params![id, total],
                )
                .map_err(|e| Error::backend("sqlite", e))?;
            t.relay("orders", message).await.map(drop)
        })
        .await
}

/// The consumer: every delivery through its inbox, the projection in the same
/// transaction as the marker; settled by what the inbox did.
async fn consume(queue: &Engine, inbox: &Inbox<SqliteStore>) -> mqlite::Result<()> {
    while let Some(m) = queue.receive_one("orders").await? {
        let total: i64 = String::from_utf8_lossy(m.body())
            .trim_start_matches(r#"{"total":"#)
            .trim_end_matches('}')
            .parse()
            .unwrap_or(0);
        let outcome = inbox
            .process("billing", &m, async move |t| {
                t.native()
                    .sql()?
                    .execute("UPDATE revenue SET total = total + ?1", params![total])
                    .map_err(|e| Error::backend("sqlite", e))
                    .map(drop)
            })
            .await?;
        let word = match &outcome {
            Processed::Applied(()) => "applied",
            Processed::Duplicate(_) => "duplicate",
            Processed::Conflict { .. } => "conflict: dead-lettered",
        };
        let id = m.content.event.as_ref().map_or("", |e| e.id.as_str());
        println!("consumer billing: {id} {word}");
        settle(queue, "orders", &m, &outcome).await?;
    }
    Ok(())
}

#[tokio::main]
async fn main() -> mqlite::Result<()> {
    let dir = tempfile::tempdir().map_err(|e| Error::invalid(e.to_string()))?;
    let clock = ManualClock::new(1_764_500_000_000);
    let producer = open(dir.path(), "producer.db", &clock).await?;
    let queue = open(dir.path(), "queue.db", &clock).await?;
    let consumer = open(dir.path(), "consumer.db", &clock).await?;
    producer
        .tx(async |t| {
            t.native()
                .sql()?
                .execute("CREATE TABLE jobs (id TEXT PRIMARY KEY, total INTEGER)", [])
                .map_err(|e| Error::backend("sqlite", e))
        })
        .await?;
    consumer
        .tx(async |t| {
            t.native()
                .sql()?
                .execute_batch(
                    "CREATE TABLE revenue (total INTEGER NOT NULL);
                     INSERT INTO revenue VALUES (0);",
                )
                .map_err(|e| Error::backend("sqlite", e))
        })
        .await?;
    let window = QueueConfig {
        dedup_window: Duration::from_secs(3600),
        ..Default::default()
    };
    queue.create_queue("orders", window).await?;
    let relay = Relay::new(producer.clone(), queue.clone());
    let inbox = Inbox::new(consumer.clone());

    // order-1 and order-3 go all the way.
    produce(&producer, "order-1", 7).await?;
    produce(&producer, "order-3", 5).await?;
    println!("relay: {:?}", relay.run_once().await?);
    consume(&queue, &inbox).await?;

    // Two hours later (the dedup window has passed), the producer rewrites order-3 with
    // another total under the same identity; the relay delivers it.
    clock.advance(7_200_000);
    produce(&producer, "order-3", 6).await?;
    println!("relay: {:?}", relay.run_once().await?);
    consume(&queue, &inbox).await?;

    // order-2 is committed by the producer; the relay has not run since.
    produce(&producer, "order-2", 4).await?;
    clock.advance(90_000);
    let backlog = relay.backlog().await?;
    println!(
        "relay backlog: {} pending, the oldest written {} s ago",
        backlog.pending,
        backlog
            .oldest_created_at_ms
            .map_or(0, |t| (clock.now() - t) / 1000)
    );

    for id in ["order-1", "order-2", "order-3"] {
        let mut t = Trace::new(SOURCE, id);
        t.producer(&producer, "producer.db").await?;
        t.queue(&queue, "orders", "queue.db").await?;
        t.consumers(&consumer, "consumer.db", &["billing"]).await?;
        println!("\n{t}");
    }
    for e in [producer, queue, consumer] {
        e.close().await;
    }
    Ok(())
}

//! The transactional outbox with no outbox table: the application's own row and the
//! event that announces it commit in one SQLite transaction, or neither does.
//!
//! ```text
//! cargo run --example outbox [path/to/file.db]
//! ```

use mqlite::{Engine, Error, OutMessage, QueueConfig};

#[tokio::main]
async fn main() -> mqlite::Result<()> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "outbox.db".to_owned());
    let mq = Engine::open(&path).await?;
    mq.create_queue("order-events", QueueConfig::default())
        .await?;
    mq.tx(|tx| {
        tx.native()
            .sql()?
            .execute_batch(
                "CREATE TABLE IF NOT EXISTS orders(id INTEGER PRIMARY KEY, total INTEGER NOT NULL)",
            )
            .map_err(|e| Error::backend("sqlite", e))?;
        Ok::<_, Error>(())
    })
    .await?;

    // Commit: the order and its event together.
    let seq = mq
        .tx(|tx| {
            tx.native()
                .sql()?
                .execute(
                    "INSERT OR REPLACE INTO orders(id, total) VALUES (42, 1999)",
                    [],
                )
                .map_err(|e| Error::backend("sqlite", e))?;
            tx.send("order-events", OutMessage::new(r#"{"order":42}"#))
        })
        .await?;
    println!("order 42 and event #{seq} committed together");

    // Roll back: an error after both writes leaves neither.
    let failed = mq
        .tx(|tx| {
            tx.native()
                .sql()?
                .execute("INSERT INTO orders(id, total) VALUES (43, 500)", [])
                .map_err(|e| Error::backend("sqlite", e))?;
            tx.send("order-events", OutMessage::new(r#"{"order":43}"#))?;
            Err::<(), _>(Error::invalid("payment declined"))
        })
        .await;
    println!("order 43: {failed:?}; neither the order nor its event exists");
    let events = mq.stats("order-events").await?.total;
    println!("events in the queue: {events}");
    mq.close().await;
    Ok(())
}

//! The transactional outbox with no outbox table: the application's own row and the
//! event that announces it commit in one SQLite transaction, or neither does.
//!
//! The transaction body is an async closure over the store's native handle
//! (`tx.native().sql()?` is the rusqlite transaction) and uses the application's own
//! error type, so `?` works on rusqlite's errors and on mqlite's alike.
//!
//! ```text
//! cargo run -p mqlite --example outbox [path/to/file.db]
//! ```

use mqlite::{Engine, OutMessage, QueueConfig, rusqlite};

/// The application's error: its database, the queue, or its own business rule.
#[derive(Debug)]
enum AppError {
    Db(rusqlite::Error),
    Queue(mqlite::Error),
    Declined(&'static str),
}

impl From<rusqlite::Error> for AppError {
    fn from(e: rusqlite::Error) -> Self {
        AppError::Db(e)
    }
}

impl From<mqlite::Error> for AppError {
    fn from(e: mqlite::Error) -> Self {
        AppError::Queue(e)
    }
}

impl std::fmt::Display for AppError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AppError::Db(e) => write!(f, "database: {e}"),
            AppError::Queue(e) => write!(f, "queue: {e}"),
            AppError::Declined(why) => write!(f, "declined: {why}"),
        }
    }
}

impl std::error::Error for AppError {}

#[tokio::main]
async fn main() -> Result<(), AppError> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "outbox.db".to_owned());
    let mq = Engine::open(&path).await?;
    mq.create_queue("order-events", QueueConfig::default())
        .await?;
    mq.purge("order-events", Default::default()).await?;
    mq.tx(async |tx| {
        let sql = tx.native().sql()?;
        sql.execute_batch(
            "CREATE TABLE IF NOT EXISTS orders(id INTEGER PRIMARY KEY, total INTEGER NOT NULL);
             DELETE FROM orders;",
        )?;
        Ok::<_, AppError>(())
    })
    .await?;
    let before = mq.stats("order-events").await?.total;

    // Commit: the order and its event together.
    let seq = mq
        .tx(async |tx| {
            tx.native()
                .sql()?
                .execute("INSERT INTO orders(id, total) VALUES (42, 1999)", [])?;
            Ok::<_, AppError>(
                tx.send("order-events", OutMessage::new(r#"{"order":42}"#))
                    .await?,
            )
        })
        .await?;
    println!("order 42 and event #{seq} committed together");

    // Roll back: an error after both writes leaves neither.
    let failed = mq
        .tx(async |tx| {
            tx.native()
                .sql()?
                .execute("INSERT INTO orders(id, total) VALUES (43, 500)", [])?;
            tx.send("order-events", OutMessage::new(r#"{"order":43}"#))
                .await?;
            Err::<(), _>(AppError::Declined("card refused"))
        })
        .await;
    println!(
        "order 43: {}",
        failed
            .as_ref()
            .map_or_else(ToString::to_string, |_| "committed?".into())
    );

    // Check the claims against the data itself.
    let orders: Vec<i64> = mq
        .tx(async |tx| {
            let sql = tx.native().sql()?;
            let mut stmt = sql.prepare("SELECT id FROM orders ORDER BY id")?;
            let ids = stmt
                .query_map([], |r| r.get(0))?
                .collect::<Result<Vec<i64>, _>>()?;
            Ok::<_, AppError>(ids)
        })
        .await?;
    let events = mq.stats("order-events").await?.total - before;
    println!("orders in the table: {orders:?}; events in the queue: {events}");
    assert!(matches!(failed, Err(AppError::Declined(_))));
    assert_eq!(orders, vec![42], "only the committed order");
    assert_eq!(events, 1, "only the committed order's event");
    mq.close().await;
    Ok(())
}

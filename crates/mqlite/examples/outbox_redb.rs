//! The transactional outbox on redb, a key-value engine: the application opens its own
//! table in the queue's write transaction, so the order and its event commit together
//! or not at all, as on SQLite.
//!
//! ```text
//! cargo run -p mqlite --features redb --example outbox_redb [path/to/file.redb]
//! ```

use mqlite::redb::{ReadableTableMetadata, TableDefinition};
use mqlite::{OutMessage, QueueConfig, RedbOptions, RedbStore};

/// The application's own table: order id to total, in cents.
const ORDERS: TableDefinition<u64, u64> = TableDefinition::new("orders");

/// The application's error: its database, the queue, or its own business rule.
#[derive(Debug)]
enum AppError {
    Db(String),
    Queue(mqlite::Error),
    Declined(&'static str),
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

impl From<mqlite::Error> for AppError {
    fn from(e: mqlite::Error) -> Self {
        AppError::Queue(e)
    }
}

macro_rules! native {
    ($($t:ty),*) => {$(
        impl From<$t> for AppError {
            fn from(e: $t) -> Self {
                AppError::Db(e.to_string())
            }
        }
    )*};
}
native!(mqlite::redb::TableError, mqlite::redb::StorageError);

#[tokio::main]
async fn main() -> Result<(), AppError> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "outbox.redb".to_owned());
    let store = RedbStore::open(RedbOptions::new(&path)).await?;
    let mq = mqlite::GenericEngine::with_store(store, Default::default()).await?;
    mq.create_queue("order-events", QueueConfig::default())
        .await?;
    mq.purge("order-events", Default::default()).await?;
    let before = mq.stats("order-events").await?.total;

    // Commit: the order and its event together.
    let seq = mq
        .tx(async |tx| {
            {
                let mut orders = tx.native().redb()?.open_table(ORDERS)?;
                orders.insert(42, 1999)?;
            }
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
            {
                let mut orders = tx.native().redb()?.open_table(ORDERS)?;
                orders.insert(43, 500)?;
            }
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

    let orders = mq
        .tx(async |tx| {
            let table = tx.native().redb()?.open_table(ORDERS)?;
            Ok::<_, AppError>(table.len()?)
        })
        .await?;
    let events = mq.stats("order-events").await?.total - before;
    println!("orders in the table: {orders}; events in the queue: {events}");
    assert!(matches!(failed, Err(AppError::Declined(_))));
    assert_eq!(
        (orders, events),
        (1, 1),
        "only the committed order and its event"
    );
    mq.close().await;
    Ok(())
}

//! Section 10: storage and schema.

use std::collections::BTreeMap;
use std::path::Path;

use mqlite_contract::{Error, OutMessage, QueueConfig};

use super::receive_one;
use crate::harness::{Access, Ctx, StoreFactory, TckResult};

/// 10.1 One writer per database: a second open in the same process fails fast with
/// DbLocked, and succeeds once the first is closed.
pub async fn p10_1_second_open_is_db_locked<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue("q", QueueConfig::default()).await?;
    mq.send("q", OutMessage::new("kept")).await?;
    match ctx.store().await {
        Err(Error::DbLocked { .. }) => {}
        Err(e) => return Err(format!("expected DbLocked, got {e}").into()),
        Ok(_) => return Err("a second writer opened the same database".into()),
    }
    mq.close().await;
    let mq = ctx.engine().await?;
    assert_eq!(receive_one(&mq, "q").await?.body(), b"kept");
    Ok(())
}

fn snapshot(dir: &Path) -> std::io::Result<BTreeMap<String, Vec<u8>>> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        // The advisory lock file and SQLite's shared-memory index are not data.
        if name.ends_with(".lock") || name.ends_with("-shm") {
            continue;
        }
        if entry.file_type()?.is_file() {
            out.insert(name, std::fs::read(entry.path())?);
        }
    }
    Ok(out)
}

/// 10.2 Open refuses a database whose schema guard token differs from the binary's, and
/// writes nothing to it.
pub async fn p10_2_foreign_schema_token_is_refused<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue("q", QueueConfig::default()).await?;
    mq.send("q", OutMessage::new("kept")).await?;
    mq.close().await;
    ctx.factory
        .set_schema_token(ctx.dir.path(), "someone-else/9")?;
    let before = snapshot(ctx.dir.path())?;
    match ctx.store().await {
        Err(Error::SchemaVersionMismatch { found, .. }) => assert_eq!(found, "someone-else/9"),
        Err(e) => return Err(format!("expected SchemaVersionMismatch, got {e}").into()),
        Ok(_) => return Err("a foreign schema was opened".into()),
    }
    let after = snapshot(ctx.dir.path())?;
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>()
    );
    assert!(
        before == after,
        "the refused database is byte-for-byte unchanged"
    );
    Ok(())
}

/// 10.5 Status names the backend, a location that holds no secret, the schema token
/// of the data, and the counts of queues, topics and subscriptions.
pub async fn p10_5_status_describes_the_store<F: Access>(ctx: Ctx<F>) -> TckResult {
    use mqlite_contract::Store;
    let mq = ctx.engine_with_queue("q", QueueConfig::default()).await?;
    mq.create_queue("r", QueueConfig::default()).await?;
    mq.create_topic("t").await?;
    mq.subscribe("t", "s", "", QueueConfig::default()).await?;
    let status = mq.status().await?;
    assert_eq!(status.backend, mq.store().backend());
    assert!(!status.schema_token.is_empty());
    assert!(!status.location.is_empty());
    assert!(!status.location.contains("token") && !status.location.contains('@'));
    assert_eq!(
        (status.queues, status.topics, status.subscriptions),
        (2, 1, 1)
    );
    Ok(())
}

/// 10.6 A local store refuses writes once its database file is deleted or replaced under
/// it (`StoreGone`, naming the file), instead of acknowledging them into a file nobody
/// will open again; a file put at the path in its place is left untouched.
pub async fn p10_6_a_deleted_or_replaced_file_refuses_writes<F: Access>(ctx: Ctx<F>) -> TckResult {
    let Some(file) = ctx.factory.factory().db_file(ctx.dir.path()) else {
        return Err("a LocalFile store names its database file".into());
    };
    let mq = ctx.engine_with_queue("q", QueueConfig::default()).await?;
    mq.send("q", OutMessage::new("before")).await?;
    let name = file
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_owned();
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", file.display()));
    }
    match mq.send("q", OutMessage::new("after")).await {
        Err(Error::StoreGone { location, detail }) => {
            assert!(location.ends_with(&name), "{location}");
            assert!(detail.contains("names nothing"), "{detail}");
        }
        other => return Err(format!("expected StoreGone, got {other:?}").into()),
    }
    std::fs::write(&file, b"someone else's file")?;
    match mq.send("q", OutMessage::new("after")).await {
        Err(Error::StoreGone { detail, .. }) => {
            assert!(detail.contains("another file"), "{detail}")
        }
        other => return Err(format!("expected StoreGone, got {other:?}").into()),
    }
    assert_eq!(std::fs::read(&file)?, b"someone else's file");
    mq.close().await;
    // The runner's consistency check opens the directory again: a fresh database.
    std::fs::remove_file(&file)?;
    Ok(())
}

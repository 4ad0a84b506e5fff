//! The redb store beyond the TCK: its index tables agree with its rows after a mixed
//! workload (the consistency check), sequence numbers survive a restart without reuse
//! (G1), and the guards of 10.1 and 10.2 on files redb and others wrote.

use mqlite_contract::{
    Error, ManualClock, OrderingMode, OutMessage, QueueConfig, ReceiveMode, ReceiveOptions,
    RedriveOptions, SendOptions, Store, from_millis,
};
use std::path::Path;
use std::time::Duration;

use mqlite_engine::{Engine, EngineOptions};
use mqlite_store_redb::{RedbOptions, RedbStore, SCHEMA_TOKEN, check_file};

async fn open(path: &Path, clock: &ManualClock) -> mqlite_contract::Result<RedbStore> {
    RedbStore::open(RedbOptions::new(path).clock(clock.shared())).await
}

async fn engine(path: &Path, clock: &ManualClock) -> Engine<RedbStore> {
    let store = open(path, clock).await.expect("open");
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

fn cfg(mode: OrderingMode) -> QueueConfig {
    QueueConfig {
        lock_duration: from_millis(1_000),
        max_delivery_count: 2,
        default_ttl: from_millis(0),
        ordering_mode: mode,
        dedup_window: from_millis(60_000),
        ..Default::default()
    }
}

/// Every transition — enqueue with dedup and lines, claims in both modes, each
/// settlement, lapsed leases, scheduling, TTL, redrive, purge, deletion — keeps every
/// index entry in step with its row, checked on the open store and on the closed file.
#[tokio::test]
async fn indexes_agree_with_rows_after_a_mixed_workload() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("mq.redb");
    let clock = ManualClock::new(1_700_000_000_000);
    let mq = engine(&path, &clock).await;
    for (q, mode) in [
        ("std", OrderingMode::Standard),
        ("grp", OrderingMode::GroupFifo),
        ("fifo", OrderingMode::StrictFifo),
    ] {
        mq.create_queue(q, cfg(mode)).await.expect("queue");
        let batch = (0..30)
            .map(|i| {
                OutMessage::new(format!("{q}{i}"))
                    .with_id(format!("{q}-{}", i % 25))
                    .with_group(format!("g{}", i % 3))
            })
            .collect();
        mq.send_batch(q, batch).await.expect("send");
        mq.send_batch_with(
            q,
            vec![OutMessage::new("later").with_group("g9")],
            SendOptions {
                scheduled_at_ms: Some(clock.now() + 500),
                ttl: Some(from_millis(10_000)),
            },
        )
        .await
        .expect("scheduled send");
    }
    for round in 0..6 {
        for q in ["std", "grp", "fifo"] {
            let got = mq
                .receive(q, ReceiveOptions::batch(5))
                .await
                .expect("receive");
            for (i, m) in got.iter().enumerate() {
                match (round + i) % 5 {
                    0 => mq.complete(q, m).await.expect("complete"),
                    1 => mq.abandon(q, m, Duration::ZERO).await.expect("abandon"),
                    2 => mq
                        .abandon(q, m, from_millis(300))
                        .await
                        .expect("abandon later"),
                    3 => mq.defer(q, m).await.expect("defer"),
                    _ => {} // the lease lapses
                }
            }
            mq.receive(
                q,
                ReceiveOptions {
                    max_messages: 3,
                    mode: ReceiveMode::ReceiveAndDelete,
                    ..Default::default()
                },
            )
            .await
            .expect("receive and delete");
        }
        clock.advance(700);
        mq.run_sweeps().await.expect("sweeps");
        assert_eq!(mq.store().check_consistency().await.expect("check"), "ok");
    }
    mq.redrive("std", RedriveOptions::default())
        .await
        .expect("redrive");
    mq.redrive(
        "grp",
        RedriveOptions {
            target: Some("fifo".into()),
            max: 3,
            ..Default::default()
        },
    )
    .await
    .expect("redrive across");
    mq.purge("grp", Default::default()).await.expect("purge");
    clock.advance(60 * 60 * 1000);
    mq.run_sweeps().await.expect("sweeps");
    assert_eq!(mq.store().check_consistency().await.expect("check"), "ok");
    assert!(mq.delete_queue("fifo").await.expect("delete"));
    assert_eq!(mq.store().check_consistency().await.expect("check"), "ok");
    mq.close().await;
    assert_eq!(check_file(&path).expect("file check"), "ok");
}

/// G1: after every message is gone and the store reopened, the next number is still
/// higher than any handed out before.
#[tokio::test]
async fn sequence_numbers_are_never_reused_across_restarts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("mq.redb");
    let clock = ManualClock::new(1_700_000_000_000);
    let mq = engine(&path, &clock).await;
    mq.create_queue("q", QueueConfig::default())
        .await
        .expect("queue");
    let last = mq.send("q", OutMessage::new("a")).await.expect("send");
    let m = mq
        .receive("q", ReceiveOptions::default())
        .await
        .expect("receive");
    mq.complete("q", &m[0]).await.expect("complete");
    mq.close().await;
    let mq = engine(&path, &clock).await;
    let next = mq.send("q", OutMessage::new("b")).await.expect("send");
    assert!(next > last, "{next} after {last}");
    mq.close().await;
}

/// 10.1: a second open is DbLocked and names the file.
#[tokio::test]
async fn a_second_open_is_db_locked_with_the_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("mq.redb");
    let clock = ManualClock::new(1_700_000_000_000);
    let first = open(&path, &clock).await.expect("open");
    match open(&path, &clock).await {
        Err(Error::DbLocked {
            path: p,
            holder: mqlite_contract::LockHolder::ThisProcess,
        }) => assert!(p.ends_with("mq.redb"), "{p}"),
        Err(e) => panic!("expected DbLocked, got {e}"),
        Ok(_) => panic!("a second writer opened the file"),
    }
    first.close().await;
    open(&path, &clock).await.expect("reopen").close().await;
}

async fn assert_refused_untouched(path: &Path, found: &str) {
    let before = std::fs::read(path).expect("read before");
    let clock = ManualClock::new(1_700_000_000_000);
    match open(path, &clock).await {
        Err(Error::SchemaVersionMismatch {
            found: got,
            expected,
        }) => {
            assert_eq!(got, found);
            assert_eq!(expected, SCHEMA_TOKEN);
        }
        Err(e) => panic!("expected SchemaVersionMismatch, got {e:?}"),
        Ok(s) => {
            s.close().await;
            panic!("a foreign file was opened");
        }
    }
    assert!(
        before == std::fs::read(path).expect("read after"),
        "the refused file changed"
    );
}

/// 10.2: a file that is not a redb database is refused and left as it was.
#[tokio::test]
async fn a_file_that_is_not_redb_is_refused_untouched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("mq.redb");
    std::fs::write(
        &path,
        b"SQLite format 3\0 and then some bytes that are not redb",
    )
    .expect("write");
    assert_refused_untouched(&path, "").await;
}

/// 10.2: a redb database written by another application (its own tables, no token) is
/// refused and left as it was.
#[tokio::test]
async fn another_applications_redb_file_is_refused_untouched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("other.redb");
    {
        let db = mqlite_store_redb::redb::Database::create(&path).expect("create");
        let txn = db.begin_write().expect("write");
        {
            let def: mqlite_store_redb::redb::TableDefinition<&str, u64> =
                mqlite_store_redb::redb::TableDefinition::new("theirs");
            let mut t = txn.open_table(def).expect("table");
            t.insert("x", 1).expect("insert");
        }
        txn.commit().expect("commit");
    }
    assert_refused_untouched(&path, "").await;
}

/// 10.2: another token is refused and the file left as it was.
#[tokio::test]
async fn a_foreign_token_is_refused_untouched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("mq.redb");
    let clock = ManualClock::new(1_700_000_000_000);
    open(&path, &clock).await.expect("open").close().await;
    mqlite_store_redb::set_schema_token(&path, "mqlite-redb/0").expect("set token");
    assert_refused_untouched(&path, "mqlite-redb/0").await;
}

/// G7: deleting gives the space back to the file. Rounds of 2,000 messages of 2 KiB,
/// each drained by receive-and-delete, run on one file; after the first rounds the file
/// stops growing, because redb reuses the pages the deletes freed (and shrinks the
/// file when its tail is free).
#[tokio::test]
async fn deleted_messages_give_their_space_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("mq.redb");
    let clock = ManualClock::new(1_700_000_000_000);
    let mq = engine(&path, &clock).await;
    mq.create_queue("q", cfg(OrderingMode::Standard))
        .await
        .expect("queue");
    let mut sizes = Vec::new();
    for round in 0..8 {
        let drained = mqlite_tck::cases::space_reuse_round(&mq, "q", round)
            .await
            .expect("round");
        assert_eq!(drained, 2_000);
        sizes.push(std::fs::metadata(&path).expect("size").len());
        // Past the dedup window, so its entries go too.
        clock.advance(120_000);
        mq.run_sweeps().await.expect("sweeps");
    }
    assert_eq!(mq.store().check_consistency().await.expect("check"), "ok");
    // 8 rounds wrote 32 MiB of bodies; a file that only grew would hold them all.
    let last = *sizes.last().expect("sizes");
    assert!(
        last <= sizes[2],
        "the file kept growing after the space was freed: {sizes:?}"
    );
    assert!(last < 16 << 20, "the file holds deleted bodies: {sizes:?}");
    println!("file size after each round: {sizes:?}");
    mq.close().await;
}

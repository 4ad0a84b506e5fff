//! Two guarantees of the store contract (docs/backends.md) that no TCK case pins: G1's
//! "never reused, even after deletion and restart" and G7's space given back; and a
//! claim past the receive bound, called on the store alone, refused naming the bound.

use mqlite_contract::{
    ManualClock, OrderingMode, OutMessage, QueueConfig, ReceiveOptions, from_millis,
};
use mqlite_engine::{Engine, EngineOptions};
use mqlite_store_sqlite::{SqliteOptions, SqliteStore};

async fn engine(path: &str, clock: &ManualClock) -> Engine<SqliteStore> {
    let store = SqliteStore::open(SqliteOptions::new(path).clock(clock.shared()))
        .await
        .expect("open");
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

/// G1: after every message is gone and the store reopened, the next number is still
/// higher than any handed out before.
#[tokio::test]
async fn sequence_numbers_are_never_reused_across_restarts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("mq.db").to_string_lossy().into_owned();
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

/// G7: deleting gives the space back to the database. Rounds of 2,000 messages of
/// 2 KiB, each drained by receive-and-delete, run on one file; after the first round
/// the database stops growing, because SQLite puts the pages the deletes freed on its
/// freelist and the next round reuses them (the file itself only shrinks on `VACUUM`).
#[tokio::test]
async fn deleted_messages_give_their_pages_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("mq.db").to_string_lossy().into_owned();
    let clock = ManualClock::new(1_700_000_000_000);
    let mq = engine(&path, &clock).await;
    let config = QueueConfig {
        ordering_mode: OrderingMode::Standard,
        dedup_window: from_millis(60_000),
        ..Default::default()
    };
    mq.create_queue("q", config).await.expect("queue");
    let mut pages = Vec::new();
    for round in 0..8 {
        let drained = mqlite_tck::cases::space_reuse_round(&mq, "q", round)
            .await
            .expect("round");
        assert_eq!(drained, 2_000);
        // Past the dedup window, so its entries go too.
        clock.advance(120_000);
        mq.run_sweeps().await.expect("sweeps");
        let count = mq
            .store()
            .query_i64("PRAGMA page_count")
            .await
            .expect("page_count");
        pages.push(count);
    }
    println!("pages after each round: {pages:?}");
    let last = *pages.last().expect("pages");
    assert!(
        last <= pages[2],
        "the database kept growing after the space was freed: {pages:?}"
    );
    mq.close().await;
}

#[tokio::test]
async fn a_claim_past_the_receive_bound_is_refused_naming_it() {
    use mqlite_contract::{ClaimSpec, Error, MessageOps, ReceiveMode, SendOptions};
    let dir = tempfile::tempdir().expect("tempdir");
    let store = crate::support::open_with_queue(&dir, |o| o).await;
    let messages = (0..300u32)
        .map(|i| OutMessage::new(i.to_le_bytes().to_vec()))
        .collect();
    store
        .enqueue("q".into(), messages, SendOptions::default())
        .await
        .expect("send");
    let spec = |max_messages| ClaimSpec {
        max_messages,
        mode: ReceiveMode::PeekLock,
        attempt_id: None,
    };
    let refused = store
        .claim("q".into(), spec(257))
        .await
        .expect_err("past the bound");
    assert!(
        matches!(&refused, Error::InvalidArgument(m) if m.contains("1..=256")),
        "{refused:?}"
    );
    // Nothing was claimed: the bound itself still is.
    let got = store.claim("q".into(), spec(256)).await.expect("claim");
    assert_eq!(got.len(), 256);
}

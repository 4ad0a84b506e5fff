//! G7 (docs/backends.md): deleting gives the space back to the database. Rounds of
//! 2,000 messages of 2 KiB, each drained by receive-and-delete, run on one file; after
//! the first round the database stops growing, because SQLite puts the pages the
//! deletes freed on its freelist and the next round reuses them (the file itself only
//! shrinks on `VACUUM`).

use mqlite_engine_core::{
    Engine, EngineOptions, ManualClock, OrderingMode, OutMessage, QueueConfig, ReceiveMode,
    ReceiveOptions,
};
use mqlite_store_sqlite::{SqliteOptions, SqliteStore};

#[tokio::test]
async fn deleted_messages_give_their_pages_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("mq.db").to_string_lossy().into_owned();
    let clock = ManualClock::new(1_700_000_000_000);
    let store = SqliteStore::open(SqliteOptions::new(path).clock(clock.shared()))
        .await
        .expect("open");
    let mq = Engine::with_store(
        store,
        EngineOptions {
            background: false,
            ..Default::default()
        },
    )
    .await
    .expect("engine");
    let config = QueueConfig {
        ordering_mode: OrderingMode::Standard,
        dedup_window_ms: 60_000,
        ..Default::default()
    };
    mq.create_queue("q", config).await.expect("queue");
    let mut pages = Vec::new();
    for round in 0..8 {
        for chunk in 0..4 {
            let batch = (0..500)
                .map(|i| {
                    let mut body = format!("{round}/{chunk}/{i}/").into_bytes();
                    body.resize(2048, b'a' + ((round + chunk + i) % 26) as u8);
                    OutMessage::new(body)
                })
                .collect();
            mq.send_batch("q", batch).await.expect("send");
        }
        let mut drained = 0;
        loop {
            let got = mq
                .receive(
                    "q",
                    ReceiveOptions {
                        max_messages: 256,
                        mode: ReceiveMode::ReceiveAndDelete,
                        ..Default::default()
                    },
                )
                .await
                .expect("receive and delete");
            if got.is_empty() {
                break;
            }
            drained += got.len();
        }
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

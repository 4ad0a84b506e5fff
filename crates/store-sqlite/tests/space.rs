//! Space given back after a backlog drains (issue 25): a new file is in
//! `auto_vacuum = INCREMENTAL` mode, the janitor's pass gives its free pages back in
//! bounded steps, and `SqliteStore::vacuum` (what `mqlite vacuum` runs) frees the rest
//! now or rewrites a file of an earlier version into incremental mode.
//!
//! The backlog is `MQLITE_SHRINK_MESSAGES` messages of 1 KiB (default 20,000; the
//! figure in docs/benchmark.md is from 100,000).

use mqlite_contract::{OutMessage, Store};
use mqlite_contract::{QueueConfig, ReceiveMode, ReceiveOptions};
use mqlite_engine::Engine;
use mqlite_store_sqlite::SqliteStore;

fn backlog() -> usize {
    std::env::var("MQLITE_SHRINK_MESSAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000)
}

use crate::support;

async fn engine(path: &str) -> Engine<SqliteStore> {
    support::engine_at(path, mqlite_contract::SystemClock::shared()).await
}

/// Sends `n` messages of 1 KiB, then drains them with receive-and-delete.
async fn fill_and_drain(e: &Engine<SqliteStore>, n: usize) {
    e.create_queue("q", QueueConfig::default())
        .await
        .expect("queue");
    let body = vec![b'x'; 1024];
    let mut left = n;
    while left > 0 {
        let k = left.min(1000);
        let batch = (0..k).map(|_| OutMessage::new(body.clone())).collect();
        e.send_batch("q", batch).await.expect("send");
        left -= k;
    }
    let options = ReceiveOptions {
        max_messages: 256,
        mode: ReceiveMode::ReceiveAndDelete,
        ..Default::default()
    };
    let mut drained = 0;
    while drained < n {
        let got = e.receive("q", options.clone()).await.expect("receive");
        assert!(!got.is_empty(), "the backlog drains");
        drained += got.len();
    }
}

fn file_len(path: &str) -> u64 {
    std::fs::metadata(path).expect("the file").len()
}

/// After a drain, janitor passes give the free pages back a bounded step at a time,
/// and the file on disk shrinks to a small fraction of its high-water mark.
#[tokio::test]
async fn the_janitor_gives_a_drained_backlogs_space_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("mq.db").display().to_string();
    let e = engine(&path).await;
    assert_eq!(
        e.store()
            .query_i64("PRAGMA auto_vacuum")
            .await
            .expect("pragma"),
        2,
        "a new file is in incremental auto-vacuum mode"
    );
    let n = backlog();
    fill_and_drain(&e, n).await;
    let free = e
        .store()
        .query_i64("PRAGMA freelist_count")
        .await
        .expect("pragma");
    let pages = e
        .store()
        .query_i64("PRAGMA page_count")
        .await
        .expect("pragma");
    assert!(
        free * 2 > pages,
        "the drained backlog left free pages: {free} of {pages}"
    );
    let mut passes = 0;
    let mut freed = 0;
    loop {
        let report = e.run_sweeps().await.expect("sweeps");
        if report.pages_freed == 0 {
            break;
        }
        assert!(report.pages_freed <= 16 * 1024 + 1024, "a pass is bounded");
        freed += report.pages_freed;
        passes += 1;
        assert!(passes < 100, "the steps end");
    }
    assert!(freed.cast_signed() >= free - 8, "freed {freed} of {free}");
    let high_water = u64::try_from(pages).expect("pages") * 4096;
    // A checkpoint (here forced; otherwise the WAL's own) truncates the file. It answers
    // busy (1) while the store's checkpoint thread holds the checkpoint: asked again.
    let mut busy = 0;
    while e
        .store()
        .query_i64("PRAGMA wal_checkpoint(TRUNCATE)")
        .await
        .expect("checkpoint")
        != 0
    {
        busy += 1;
        assert!(busy < 1_000_000, "the checkpoint thread's pass ends");
    }
    let after = file_len(&path);
    eprintln!(
        "{n} messages of 1 KiB drained: the file's high-water mark {high_water} bytes; \
         {passes} janitor passes freed {freed} pages; {after} bytes after the checkpoint"
    );
    assert!(
        after * 10 < high_water,
        "the file shrank from {high_water} to {after} bytes"
    );
    e.close().await;
}

/// `vacuum(false)` frees every free page now; on a file made without incremental mode
/// (an earlier version's) it frees nothing and says so, and `vacuum(true)` rewrites it
/// into incremental mode.
#[tokio::test]
async fn vacuum_frees_now_and_full_converts_an_earlier_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("mq.db").display().to_string();
    let e = engine(&path).await;
    fill_and_drain(&e, 5_000).await;
    let report = e.store().vacuum(false).await.expect("vacuum");
    assert!(report.incremental);
    assert!(report.free_pages_before > 1000, "{report:?}");
    assert_eq!(report.free_pages_after, 0, "{report:?}");
    assert!(
        report.bytes_after() * 4 < report.bytes_before(),
        "{report:?}"
    );
    assert_eq!(
        file_len(&path),
        report.bytes_after(),
        "the file is its pages"
    );
    e.close().await;

    // A file of an earlier version: auto_vacuum off, set before its tables existed.
    let old = dir.path().join("old.db").display().to_string();
    {
        let conn = rusqlite::Connection::open(&old).expect("open");
        conn.execute_batch("PRAGMA auto_vacuum = NONE; PRAGMA journal_mode = WAL;")
            .expect("pragmas");
    }
    let e = engine(&old).await;
    fill_and_drain(&e, 5_000).await;
    assert_eq!(e.run_sweeps().await.expect("sweeps").pages_freed, 0);
    let report = e.store().vacuum(false).await.expect("vacuum");
    assert!(!report.incremental, "{report:?}");
    assert_eq!(report.pages_after, report.pages_before, "nothing freed");
    let report = e.store().vacuum(true).await.expect("full vacuum");
    assert!(report.incremental, "converted: {report:?}");
    assert!(
        report.bytes_after() * 4 < report.bytes_before(),
        "{report:?}"
    );
    e.close().await;
    let e = engine(&old).await;
    assert_eq!(
        e.store()
            .query_i64("PRAGMA auto_vacuum")
            .await
            .expect("pragma"),
        2
    );
    e.store().close().await;
}

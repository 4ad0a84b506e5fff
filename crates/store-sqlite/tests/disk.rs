//! The SQLite store when its disk misbehaves: a full disk answers `StorageFull` naming
//! the database and the queue can still be drained. (A database deleted or replaced
//! under the running store: the TCK's 10.6, on every local store.)

use std::process::Command;

use mqlite_engine_core::{
    Engine, EngineOptions, Error, ManualClock, OutMessage, QueueConfig, ReceiveOptions,
};
use mqlite_store_sqlite::{SqliteOptions, SqliteStore};

async fn engine(path: &std::path::Path, clock: &ManualClock) -> Engine<SqliteStore> {
    let store =
        SqliteStore::open(SqliteOptions::new(path.display().to_string()).clock(clock.shared()))
            .await
            .expect("opens");
    let options = EngineOptions {
        background: false,
        ..Default::default()
    };
    Engine::with_store(store, options).await.expect("an engine")
}

/// A tmpfs of `size` mounted on a fresh directory, unmounted when dropped; None (with
/// the reason) where this machine does not let the test mount one.
struct Tmpfs(tempfile::TempDir);

impl Tmpfs {
    fn mount(size: &str) -> Result<Tmpfs, String> {
        let dir = tempfile::Builder::new()
            .prefix("mqlite-full-")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .map_err(|e| e.to_string())?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mounting a tmpfs is not allowed here ({})",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Tmpfs(dir))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0.path()).status();
    }
}

/// Fills a 20 MiB tmpfs until a send is refused with `StorageFull` naming the
/// database, then drains every acknowledged message (receive and complete) on the full
/// disk; afterwards a send fits again in the space the drain freed.
#[tokio::test]
async fn a_full_disk_is_storage_full_and_the_queue_still_drains() {
    let fs = match Tmpfs::mount("20m") {
        Ok(fs) => fs,
        Err(why) => {
            assert!(
                std::env::var_os("MQLITE_REQUIRE_TMPFS").is_none(),
                "MQLITE_REQUIRE_TMPFS is set: {why}"
            );
            eprintln!("skipped: {why}");
            return;
        }
    };
    let path = fs.0.path().join("q.db");
    let clock = ManualClock::new(1_700_000_000_000);
    let mq = engine(&path, &clock).await;
    mq.create_queue("q", QueueConfig::default())
        .await
        .expect("a queue");
    let body = vec![7u8; 4 << 10];
    let mut sent = 0usize;
    let refused = loop {
        match mq.send("q", OutMessage::new(body.clone())).await {
            Ok(_) => sent += 1,
            Err(e) => break e,
        }
        assert!(sent < 10_000, "20 MiB never filled");
    };
    match &refused {
        Error::StorageFull { location, .. } => {
            assert!(location.ends_with("q.db"), "{refused}")
        }
        other => panic!("expected StorageFull, got {other:?}"),
    }
    assert!(sent >= 1_000, "only {sent} sends fitted");

    let mut drained = 0usize;
    loop {
        let got = mq
            .receive(
                "q",
                ReceiveOptions {
                    max_messages: 32,
                    ..Default::default()
                },
            )
            .await
            .unwrap_or_else(|e| panic!("receive on the full disk after {drained}: {e}"));
        if got.is_empty() {
            break;
        }
        for m in &got {
            mq.complete("q", m)
                .await
                .unwrap_or_else(|e| panic!("complete on the full disk after {drained}: {e}"));
        }
        drained += got.len();
    }
    assert_eq!(drained, sent, "every acknowledged message drained");
    // Sends stay refused for a second after the disk filled; then one gives the WAL's
    // space back, the reserve fits again, and it goes through.
    assert!(matches!(
        mq.send("q", OutMessage::new(body.clone())).await,
        Err(Error::StorageFull { .. })
    ));
    clock.advance(1_000);
    mq.send("q", OutMessage::new(body))
        .await
        .expect("a send fits again once drained");
    mq.close().await;
}

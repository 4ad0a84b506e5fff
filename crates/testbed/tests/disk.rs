//! Every local store when its disk fills: a send is refused with `StorageFull` naming
//! the database, every acknowledged message can still be received and completed on
//! the full disk (the store keeps a reserve for that), and sends resume once the drain
//! has made room. (A database deleted or replaced under the running store: the TCK's
//! 10.6, on every local store.)

use std::process::Command;

use mqlite_contract::{Error, ManualClock, OutMessage, QueueConfig, ReceiveOptions};
use mqlite_engine::{Engine, EngineOptions};
use mqlite_testbed::mqlite_tck::{Capability, StoreFactory};
use mqlite_testbed::with_each_store;

/// A tmpfs of `size` mounted on a fresh directory, unmounted when dropped; Err (with
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
/// disk; sends stay refused for a second, then one fits again in the space the drain
/// freed.
async fn fill_and_drain<F: StoreFactory>(name: &str, factory: F) -> Result<(), String> {
    let fs = Tmpfs::mount("20m")?;
    let file = factory
        .db_file(fs.0.path())
        .ok_or_else(|| format!("{name} names no database file"))?;
    let clock = ManualClock::new(1_700_000_000_000);
    let store = factory
        .open(fs.0.path(), clock.shared())
        .await
        .map_err(|e| format!("{name} opens: {e}"))?;
    let options = EngineOptions {
        background: false,
        ..Default::default()
    };
    let mq = Engine::with_store(store, options)
        .await
        .map_err(|e| format!("{name} engine: {e}"))?;
    mq.create_queue("q", QueueConfig::default())
        .await
        .map_err(|e| format!("{name} queue: {e}"))?;
    let body = vec![7u8; 4 << 10];
    let mut sent = 0usize;
    let refused = loop {
        match mq.send("q", OutMessage::new(body.clone())).await {
            Ok(_) => sent += 1,
            Err(e) => break e,
        }
        assert!(sent < 10_000, "{name}: 20 MiB never filled");
    };
    let file_name = file.file_name().expect("a file name").to_string_lossy();
    match &refused {
        Error::StorageFull { location, .. } => {
            assert!(location.ends_with(&*file_name), "{name}: {refused}")
        }
        other => panic!("{name}: expected StorageFull, got {other:?}"),
    }
    assert!(sent >= 1_000, "{name}: only {sent} sends fitted");

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
            .unwrap_or_else(|e| {
                panic!(
                    "{name}: receive on the full disk after {drained}: {}",
                    mqlite_contract::error::chain(&e)
                )
            });
        if got.is_empty() {
            break;
        }
        for m in &got {
            mq.complete("q", m).await.unwrap_or_else(|e| {
                panic!("{name}: complete on the full disk after {drained}: {e}")
            });
        }
        drained += got.len();
    }
    assert_eq!(drained, sent, "{name}: every acknowledged message drained");
    eprintln!("{name}: {sent} sends acknowledged before the disk filled, all drained on it");
    assert!(
        matches!(
            mq.send("q", OutMessage::new(body.clone())).await,
            Err(Error::StorageFull { .. })
        ),
        "{name}: sends stay refused until the retry is due"
    );
    clock.advance(1_000);
    mq.send("q", OutMessage::new(body))
        .await
        .unwrap_or_else(|e| panic!("{name}: a send fits again once drained: {e}"));
    mq.close().await;
    Ok(())
}

/// Whether the store keeps its data in a local file this test can put on a tmpfs.
fn local<F: StoreFactory>(factory: &F) -> bool {
    factory.unsupported(Capability::LocalFile).is_none()
}

#[tokio::test]
async fn a_full_disk_is_storage_full_and_the_queue_still_drains() {
    let mut ran = 0;
    with_each_store!(name, factory => {
        if local(&factory) {
            match fill_and_drain(name, factory).await {
                Ok(()) => ran += 1,
                Err(why) => {
                    assert!(
                        std::env::var_os("MQLITE_REQUIRE_TMPFS").is_none(),
                        "MQLITE_REQUIRE_TMPFS is set: {why}"
                    );
                    eprintln!("{name}: skipped: {why}");
                }
            }
        }
    });
    eprintln!("{ran} local stores filled and drained");
}

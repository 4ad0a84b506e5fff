//! One write per commit (docs/internals.md, "One write per commit"): the store's WAL
//! takes each commit's frames in one write of the file, whatever the commit holds — a
//! lone send on its caller's thread, a batch, the merged sends of concurrent producers,
//! a receive, a completion. Kept in its own test binary: the VFS counts its writes per
//! process.

use mqlite_contract::{ClaimSpec, MessageOps, OutMessage, ReceiveMode, SendOptions, Settlement};
use mqlite_store_sqlite::{SqliteStore, Synchronous};

mod support;

/// A store with queue `q` (in a directory of its own), its WAL written through the
/// gathering VFS or not.
async fn open(dir: &tempfile::TempDir, gather: bool) -> SqliteStore {
    support::open_with_queue(dir, |o| {
        o.synchronous(Synchronous::Normal).gather_wal_writes(gather)
    })
    .await
}

fn messages(n: usize) -> Vec<OutMessage> {
    (0..n)
        .map(|i| OutMessage::new(vec![i as u8; 256]))
        .collect()
}

/// Writes to the WAL and commits made while the work `start` begins ran. (The store
/// places a call when it is made, not when it is awaited: the counts are read first.)
async fn counted<T, F: Future<Output = T>>(
    store: &SqliteStore,
    start: impl FnOnce() -> F,
) -> (u64, u64, T) {
    let (writes, commits) = (mqlite_sqlite_vfs::wal_writes(), store.group_commits());
    let out = start().await;
    (
        mqlite_sqlite_vfs::wal_writes() - writes,
        store.group_commits() - commits,
        out,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_commit_reaches_the_wal_in_one_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = std::sync::Arc::new(open(&dir, true).await);
    let send = |n| store.enqueue("q".into(), messages(n), SendOptions::default());

    let (writes, commits, _) = counted(&store, || send(1)).await;
    assert_eq!((writes, commits), (1, 1), "a lone send");
    let (writes, commits, _) = counted(&store, || send(64)).await;
    assert_eq!((writes, commits), (1, 1), "a batch of 64 (about 20 pages)");

    // Sixteen sends at once: merged on the writer thread, in fewer commits than sends,
    // each commit one write.
    let (writes, commits, _) = counted(&store, || async {
        let sends: Vec<_> = (0..16)
            .map(|_| {
                let store = store.clone();
                tokio::spawn(async move {
                    store
                        .enqueue("q".into(), messages(1), SendOptions::default())
                        .await
                })
            })
            .collect();
        for s in sends {
            s.await.expect("task").expect("send");
        }
    })
    .await;
    assert!((1..=16).contains(&commits), "{commits} commits");
    assert_eq!(writes, commits, "one write per commit");

    let spec = ClaimSpec {
        max_messages: 32,
        mode: ReceiveMode::PeekLock,
        attempt_id: None,
    };
    let (writes, commits, got) = counted(&store, || store.claim("q".into(), spec)).await;
    let got = got.expect("claim");
    assert_eq!(got.len(), 32);
    assert_eq!((writes, commits), (1, 1), "a receive of 32");
    let (writes, commits, _) = counted(&store, || async {
        for m in &got[..4] {
            store
                .settle("q".into(), m.into(), Settlement::Complete)
                .await
                .expect("complete");
        }
    })
    .await;
    assert_eq!((writes, commits), (4, 4), "four completions");

    // Off, the store writes its WAL through SQLite's own VFS: none of these writes.
    let other = tempfile::tempdir().expect("tempdir");
    let plain = open(&other, false).await;
    let (writes, commits, _) = counted(&plain, || {
        plain.enqueue("q".into(), messages(64), SendOptions::default())
    })
    .await;
    assert_eq!((writes, commits), (0, 1), "gathering off");
}

//! The key-value counterpart of the SQL plan pins (1.5, 5.6): a claim visits a bounded
//! number of index entries behind a 100,000-message blocked group and beside 100,000
//! expired, unreaped leases. The store counts the entries it visits (`Store::work`); a
//! count is stable where a time is not.

use mqlite_contract::{ManualClock, OutMessage, QueueConfig, ReceiveOptions, Store, from_millis};
use mqlite_engine::{Engine, EngineOptions};
use mqlite_store_redb::{RedbOptions, RedbStore};

const BIG: usize = 100_000;

/// The entries one claim visits on a queue with `blocked` messages behind a locked group
/// head and `expired` lapsed, unreaped leases, with one free message to find.
async fn claim_visits(blocked: usize, expired: usize) -> u64 {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = ManualClock::new(1_700_000_000_000);
    let store = RedbStore::open(RedbOptions::new(dir.path().join("mq.redb")).clock(clock.shared()))
        .await
        .expect("open");
    let options = EngineOptions {
        background: false,
        ..Default::default()
    };
    let mq = Engine::with_store(store, options).await.expect("engine");
    let config = QueueConfig {
        lock_duration: from_millis(1_000),
        ..Default::default()
    };
    mq.create_queue("q", config).await.expect("queue");
    mq.send("q", OutMessage::new("head").with_group("A"))
        .await
        .expect("head");
    mq.receive("q", ReceiveOptions::batch(1))
        .await
        .expect("claim the head");
    for start in (0..blocked).step_by(1_000) {
        let batch = (start..(start + 1_000).min(blocked))
            .map(|i| OutMessage::new(format!("a{i}")).with_group("A"))
            .collect();
        mq.send_batch("q", batch).await.expect("blocked backlog");
    }
    for start in (0..expired).step_by(1_000) {
        let batch = (start..(start + 1_000).min(expired))
            .map(|i| OutMessage::new(format!("l{i}")))
            .collect();
        mq.send_batch("q", batch).await.expect("leases");
    }
    while !mq
        .receive("q", ReceiveOptions::batch(256))
        .await
        .expect("lease them")
        .is_empty()
    {}
    clock.advance(1_000);
    let free = mq
        .send("q", OutMessage::new("free").with_group("B"))
        .await
        .expect("free");
    let before = mq.store().work().expect("redb counts its work");
    let got = mq
        .receive("q", ReceiveOptions::batch(1))
        .await
        .expect("claim");
    let spent = mq.store().work().expect("redb counts its work") - before;
    assert_eq!(got.iter().map(|m| m.seq).collect::<Vec<_>>(), vec![free]);
    mq.close().await;
    spent.visits
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_visits_a_bounded_number_of_entries_behind_100000() {
    let small = claim_visits(10, 10).await;
    let blocked = claim_visits(BIG, 0).await;
    let expired = claim_visits(0, BIG).await;
    println!(
        "entries one claim visits: behind 10 {small}, behind {BIG} blocked {blocked}, beside {BIG} expired {expired}"
    );
    assert!(small > 0, "the counter reads nothing");
    for (what, visits) in [("blocked group", blocked), ("expired leases", expired)] {
        assert!(
            visits <= small + 4,
            "{what}: a claim visited {visits} entries behind {BIG}, {small} behind 10"
        );
    }
}

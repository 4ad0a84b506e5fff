//! How late a message that becomes claimable on a timer reaches a receiver already
//! waiting for it, on the system clock with the engine's default sweeps: a scheduled
//! send, an abandon with a delay, and a lease that lapses. Each scenario makes `--n`
//! such messages (default 200) due at spread-out times over about three seconds while
//! one receiver long-polls, and prints the lateness (receive time minus due time) as
//! p50 / p99 / max; the target is p99 ≤ 50 ms. One JSON line per scenario.
//!
//! `cargo run --release -p mqlite-benches --example timer_wake -- --n 200`

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mqlite_contract::{
    LockRef, Message, OutMessage, QueueConfig, ReceiveOptions, SendOptions, SystemClock,
};
use mqlite_engine::{Engine, EngineOptions};
use mqlite_store_sqlite::{SqliteOptions, SqliteStore};

const Q: &str = "timers";
/// The span over which the messages come due.
const SPREAD_MS: i64 = 3_000;

async fn fresh(dir: &tempfile::TempDir, name: &str, lock: Duration) -> Engine<SqliteStore> {
    let path = dir.path().join(name).display().to_string();
    let store = SqliteStore::open(SqliteOptions::new(path).clock(SystemClock::shared()))
        .await
        .expect("open");
    let mq = Engine::with_store(store, EngineOptions::default())
        .await
        .expect("engine");
    let config = QueueConfig {
        lock_duration: lock,
        max_delivery_count: 1_000,
        ..Default::default()
    };
    mq.create_queue(Q, config).await.expect("queue");
    mq
}

fn now_ms() -> i64 {
    i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_millis(),
    )
    .expect("in range")
}

/// The due time of message `i` of `n`: spread evenly over [`SPREAD_MS`] from `start`.
fn due(start: i64, i: usize, n: usize) -> i64 {
    start + 200 + SPREAD_MS * i as i64 / n as i64
}

/// Receives `n` messages one at a time, long-polling, and returns how late each came
/// after its due time (`due_of` maps a message's body to it), in milliseconds.
async fn receive_late(
    mq: &Engine<SqliteStore>,
    n: usize,
    due_of: impl Fn(&[u8]) -> i64,
) -> Vec<i64> {
    let mut late = Vec::with_capacity(n);
    while late.len() < n {
        let options = ReceiveOptions {
            max_messages: 1,
            wait: Duration::from_secs(20),
            ..Default::default()
        };
        for m in mq.receive(Q, options).await.expect("receive") {
            late.push(now_ms() - due_of(m.body()));
            mq.complete(Q, &m).await.expect("complete");
        }
    }
    late
}

/// Claims the `n` messages of the queue, in batches of at most 256.
async fn claim_all(mq: &Engine<SqliteStore>, n: usize) -> Vec<Message> {
    let mut held = Vec::new();
    while held.len() < n {
        held.extend(
            mq.receive(Q, ReceiveOptions::batch(256))
                .await
                .expect("claim"),
        );
    }
    held
}

fn report(scenario: &str, mut late: Vec<i64>) {
    late.sort_unstable();
    let at = |q: f64| late[((late.len() as f64 * q) as usize).min(late.len() - 1)];
    println!(
        "{{\"scenario\":\"{scenario}\",\"n\":{},\"late_ms_p50\":{},\"late_ms_p99\":{},\"late_ms_max\":{}}}",
        late.len(),
        at(0.50),
        at(0.99),
        late[late.len() - 1]
    );
}

fn parse_n() -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == "--n")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(200)
}

fn main() {
    let n = parse_n();
    let rt = mqlite_benches::runtime();
    let dir = tempfile::tempdir().expect("tempdir");
    rt.block_on(async {
        let body_due = |b: &[u8]| -> i64 {
            std::str::from_utf8(b)
                .ok()
                .and_then(|s| s.parse().ok())
                .expect("a due time")
        };

        // Scheduled sends: each message names its own due time.
        let mq = fresh(&dir, "scheduled.db", Duration::from_secs(30)).await;
        let start = now_ms();
        for i in 0..n {
            let at = due(start, i, n);
            let options = SendOptions {
                scheduled_at_ms: Some(at),
                ..Default::default()
            };
            mq.send_with(Q, OutMessage::new(at.to_string()), options)
                .await
                .expect("send");
        }
        report("scheduled_send", receive_late(&mq, n, body_due).await);
        mq.close().await;

        // Delayed abandons: claimed at once, each abandoned with the delay that makes
        // it due at its time (its body).
        let mq = fresh(&dir, "abandoned.db", Duration::from_secs(30)).await;
        let start = now_ms();
        let bodies = (0..n).map(|i| OutMessage::new(due(start, i, n).to_string()));
        mq.send_batch(Q, bodies.collect()).await.expect("send");
        let held = claim_all(&mq, n).await;
        for m in &held {
            let delay = (body_due(m.body()) - now_ms()).max(0);
            mq.abandon(Q, LockRef::from(m), Duration::from_millis(delay as u64))
                .await
                .expect("abandon");
        }
        report("delayed_abandon", receive_late(&mq, n, body_due).await);
        mq.close().await;

        // Lapsed leases: all claimed at once under a 3 s lock, then each renewed at a
        // spread-out time (renewal sets its end to then + 3 s), while the receiver
        // already waits; each is due when its lease ends.
        let mq = fresh(&dir, "leases.db", Duration::from_secs(3)).await;
        let batch = (0..n).map(|i| OutMessage::new(i.to_string()));
        mq.send_batch(Q, batch.collect()).await.expect("send");
        let held = claim_all(&mq, n).await;
        let until: Arc<Mutex<HashMap<Vec<u8>, i64>>> = Arc::default();
        let renewer = {
            let (mq, until) = (mq.clone(), until.clone());
            tokio::spawn(async move {
                let began = Instant::now();
                for (i, m) in held.iter().enumerate() {
                    let at = began + Duration::from_millis((2_500 * i / n) as u64);
                    tokio::time::sleep_until(at.into()).await;
                    let end = mq.renew(Q, LockRef::from(m)).await.expect("renew");
                    until.lock().expect("map").insert(m.body().to_vec(), end);
                }
            })
        };
        let late = receive_late(&mq, n, |b| {
            until
                .lock()
                .expect("map")
                .get(b)
                .copied()
                .expect("renewed before it lapsed")
        })
        .await;
        renewer.await.expect("renewer");
        report("lapsed_lease", late);
        mq.close().await;
    });
}

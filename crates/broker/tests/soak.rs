//! The soak: the complaint users file against other queues is "jobs silently stopped
//! being processed after a while" (apalis-sqlite#58, bullmq#3289). Producers send,
//! consumers receive (long-polls and plain), complete, abandon, let leases expire and
//! are restarted at random, all through the broker over HTTP, on the real clock with the
//! background loops running. A checker fails the run if:
//!
//! - claimable work waits while nothing is completed for more than 1 s;
//! - a message is delivered again while the lease of an earlier delivery still lives
//!   (its holder neither settled it nor let it run out);
//! - an acknowledged send is never completed once the producers stop and the consumers
//!   drain.
//!
//! `MQLITE_SOAK_SECS` sets the length: 60 s by default (CI runs this); the 10-minute run
//! is `MQLITE_SOAK_SECS=600 cargo test --release -p mqlite-broker --test soak --
//! --nocapture`, recorded in docs/operations.md.

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mqlite_broker::wire::*;
use mqlite_broker::{AuthConfig, Broker, BrokerConfig, Client, Rpc};

/// The queue's lease: short, so expiring leases are part of the run.
const LEASE_MS: i64 = 1_500;
/// How far a second delivery may come before the first lease's end without counting as
/// a violation: the broker's clock and this process's are the same clock, read at
/// slightly different moments.
const CLOCK_SLACK_MS: i64 = 50;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A small deterministic generator (xorshift), one per task.
struct Dice(u64);

impl Dice {
    fn roll(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// What the checker knows.
#[derive(Default)]
struct Ledger {
    /// Bodies whose send was acknowledged.
    acked: HashSet<String>,
    /// Bodies completed (acknowledged by the broker).
    completed: HashSet<String>,
    /// By sequence number: the end of the live lease of its latest delivery, if its
    /// holder has not settled it.
    live: HashMap<i64, i64>,
    /// Second deliveries inside a live lease.
    violations: Vec<String>,
}

struct Run {
    client_base: String,
    ledger: Mutex<Ledger>,
    completions: AtomicU64,
    producing: AtomicBool,
    stop: AtomicBool,
}

impl Run {
    fn client(&self) -> Client {
        Client::new(self.client_base.clone(), None)
    }
}

async fn producer(run: Arc<Run>, id: u64) {
    let client = run.client();
    let mut dice = Dice(0x9E37_79B9_7F4A_7C15 ^ id);
    let mut n = 0u64;
    while run.producing.load(Ordering::Relaxed) {
        let batch = 1 + dice.roll(8);
        let bodies: Vec<String> = (0..batch)
            .map(|_| {
                n += 1;
                format!("p{id}-{n}")
            })
            .collect();
        let r: Result<SendResponse, _> = client
            .call(
                Rpc::Send,
                &SendRequest {
                    queue: "soak".into(),
                    messages: bodies.iter().map(WireMessage::with_body).collect(),
                    ..Default::default()
                },
            )
            .await;
        if r.is_ok() {
            run.ledger.lock().expect("ledger").acked.extend(bodies);
        }
        // Pace the producers a little so consumers keep up on two cores.
        tokio::time::sleep(Duration::from_millis(dice.roll(4))).await;
    }
}

/// One consumer's life: it receives until it "crashes" (leaving what it holds
/// unsettled) or the run stops. Returns whether it crashed.
async fn consumer_life(run: &Run, dice: &mut Dice) -> bool {
    let client = run.client();
    while !run.stop.load(Ordering::Relaxed) {
        let wait = if dice.roll(2) == 0 { 0 } else { 1_000 };
        let got: MessagesResponse = match client
            .call(
                Rpc::Receive,
                &ReceiveRequest {
                    queue: "soak".into(),
                    max_messages: Some(1 + dice.roll(8) as i64),
                    wait_time_ms: Some(wait),
                    ..Default::default()
                },
            )
            .await
        {
            Ok(got) => got,
            Err(_) => continue,
        };
        let now = now_ms();
        {
            let mut l = run.ledger.lock().expect("ledger");
            for m in &got.messages {
                if let Some(until) = l.live.get(&m.seq_number).copied()
                    && now < until - CLOCK_SLACK_MS
                {
                    let v = format!(
                        "seq {} delivered again at {now} inside the lease ending {until}",
                        m.seq_number
                    );
                    l.violations.push(v);
                }
                l.live.insert(m.seq_number, m.locked_until_ms);
            }
        }
        for m in got.messages {
            let body = String::from_utf8(m.decoded_body().expect("base64")).expect("utf-8");
            let settle = SettleRequest {
                queue: "soak".into(),
                seq_number: m.seq_number,
                lock_token: m.lock_token.clone(),
                ..Default::default()
            };
            match dice.roll(100) {
                // Complete.
                0..=79 => {
                    if client
                        .call::<_, OkResponse>(Rpc::Complete, &settle)
                        .await
                        .is_ok()
                    {
                        let mut l = run.ledger.lock().expect("ledger");
                        l.live.remove(&m.seq_number);
                        l.completed.insert(body);
                        run.completions.fetch_add(1, Ordering::Relaxed);
                    }
                }
                // Abandon: back to the queue now. The holder gives the lease up before
                // the call: another consumer may receive it before the answer is back.
                80..=89 => {
                    run.ledger
                        .lock()
                        .expect("ledger")
                        .live
                        .remove(&m.seq_number);
                    let _ = client.call::<_, OkResponse>(Rpc::Abandon, &settle).await;
                }
                // Let the lease run out.
                90..=96 => {}
                // Crash, holding it (and whatever else this consumer holds).
                _ => return true,
            }
        }
    }
    false
}

async fn consumer(run: Arc<Run>, id: u64) {
    let mut dice = Dice(0xD1B5_4A32_D192_ED03 ^ (id + 1));
    // A crashed consumer is replaced by a new one (a new client, new connections).
    while consumer_life(&run, &mut dice).await {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_broker_keeps_processing_under_churn_and_loses_nothing() {
    let secs: u64 = std::env::var("MQLITE_SOAK_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = BrokerConfig::new(
        "127.0.0.1:0".parse().expect("addr"),
        dir.path().join("soak.db").display().to_string(),
        AuthConfig::Off,
    );
    config.background = true;
    let broker = Broker::start(config).await.expect("starts");
    let run = Arc::new(Run {
        client_base: format!("http://{}", broker.addr()),
        ledger: Mutex::default(),
        completions: AtomicU64::new(0),
        producing: AtomicBool::new(true),
        stop: AtomicBool::new(false),
    });
    let _: Empty = run
        .client()
        .call(
            Rpc::CreateQueue,
            &CreateQueueRequest {
                name: "soak".into(),
                config: WireQueueConfig {
                    lock_duration_ms: Some(LEASE_MS),
                    max_delivery_count: Some(1_000_000),
                    ..Default::default()
                },
            },
        )
        .await
        .expect("CreateQueue");

    let mut tasks = Vec::new();
    for id in 0..2 {
        tasks.push(tokio::spawn(producer(run.clone(), id)));
    }
    let consumers: Vec<_> = (0..4)
        .map(|id| tokio::spawn(consumer(run.clone(), id)))
        .collect();

    // The stall checker: claimable work waiting while nothing completes for > 1 s.
    let started = Instant::now();
    let engine = broker.engine().expect("serving").clone();
    let mut last_count = 0;
    let mut last_progress = Instant::now();
    let mut longest_stall = Duration::ZERO;
    let mut stalls = Vec::new();
    let produce_for = Duration::from_secs(secs);
    let drain_by = produce_for + Duration::from_secs(30);
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let elapsed = started.elapsed();
        if elapsed >= produce_for && run.producing.swap(false, Ordering::Relaxed) {
            eprintln!("soak: producers stopped at {elapsed:?}; draining");
        }
        let stats = engine.stats("soak").await.expect("stats");
        let count = run.completions.load(Ordering::Relaxed);
        if count != last_count || stats.active == 0 {
            last_count = count;
            last_progress = Instant::now();
        }
        let stalled = last_progress.elapsed();
        longest_stall = longest_stall.max(stalled);
        if stalled > Duration::from_secs(1) {
            stalls.push(format!(
                "{stalled:?} without a completion at {elapsed:?} with {} active",
                stats.active
            ));
            last_progress = Instant::now();
        }
        let done = !run.producing.load(Ordering::Relaxed)
            && stats.active + stats.locked + stats.scheduled == 0;
        if done || elapsed > drain_by {
            break;
        }
    }
    run.stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.expect("a producer");
    }
    for c in consumers {
        c.await.expect("a consumer");
    }
    broker.shutdown().await.expect("stops");

    let l = run.ledger.lock().expect("ledger");
    let lost: Vec<&String> = l.acked.difference(&l.completed).take(10).collect();
    eprintln!(
        "soak: {} s, {} sends acknowledged, {} completed, longest stall {:?}",
        secs,
        l.acked.len(),
        l.completed.len(),
        longest_stall
    );
    assert!(
        l.acked.len() > 100,
        "too little work to judge: {}",
        l.acked.len()
    );
    assert!(stalls.is_empty(), "processing stalled: {stalls:?}");
    assert!(
        l.violations.is_empty(),
        "{} deliveries inside a live lease, the first: {:?}",
        l.violations.len(),
        l.violations.iter().take(5).collect::<Vec<_>>()
    );
    assert!(
        lost.is_empty(),
        "acknowledged but never completed: {lost:?}"
    );
}

//! The load test over loopback: 64 clients sending and 64 receiving and completing,
//! with single operations, beside 1,000 parked long-polls. Every acknowledged message
//! is delivered and completed, none is held by two receivers at once, nothing answers
//! 5xx, and every parked long-poll gets one message of its own.
//!
//! The quick form (CI) sends 64 × 40 messages. The long form is a documented command:
//!
//! ```text
//! MQLITE_LOAD_PER_SENDER=2000 cargo test --release -p mqlite-broker --test load -- --nocapture
//! ```
//!
//! It prints messages per second end to end through the broker and through the
//! in-process engine (the same workload shape, same run), p99 latency per RPC, and the
//! executor's lateness while the clients ran (the probe of `mqlite_kit::lateness`, on
//! the broker's own runtime: the broker serves from a runtime of its own, two worker
//! threads as on the project machine, and the clients run on the test's); the figures
//! are recorded in docs/benchmark.md. Nothing here asserts a time.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::ADMIN;
use mqlite::SystemClock;
use mqlite_broker::wire::*;
use mqlite_broker::{AuthConfig, Broker, BrokerConfig, Client, ClientError, Rpc};
use mqlite_kit::lateness::{LatenessProbe, Percentiles};

const SENDERS: usize = 64;
const RECEIVERS: usize = 64;
const PARKED: usize = 1000;

fn per_sender() -> usize {
    std::env::var("MQLITE_LOAD_PER_SENDER")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40)
}

/// The soft limit on open files: each parked long-poll holds two sockets here (the
/// client's and the server's).
fn open_file_limit() -> usize {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("Max open files"))
                .and_then(|l| l.split_whitespace().nth(3).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(PARKED * 4)
}

#[derive(Default)]
struct Ledger {
    acked: HashSet<i64>,
    in_flight: HashSet<i64>,
    completed: HashSet<i64>,
    overlaps: u64,
    server_errors: Vec<String>,
    latencies: BTreeMap<&'static str, Vec<Duration>>,
}

impl Ledger {
    fn note<T>(&mut self, rpc: &'static str, took: Duration, r: &Result<T, ClientError>) {
        self.latencies.entry(rpc).or_default().push(took);
        if let Err(e) = r
            && e.status().is_none_or(|s| s >= 500)
        {
            self.server_errors.push(format!("{rpc}: {e}"));
        }
    }
}

async fn timed<T>(
    ledger: &Mutex<Ledger>,
    rpc: &'static str,
    call: impl Future<Output = Result<T, ClientError>>,
) -> Result<T, ClientError> {
    let started = Instant::now();
    let r = call.await;
    ledger
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .note(rpc, started.elapsed(), &r);
    r
}

#[tokio::test(flavor = "multi_thread")]
async fn load_over_loopback_loses_nothing_and_never_answers_5xx() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = BrokerConfig::new(
        "127.0.0.1:0".parse().expect("addr"),
        dir.path().join("load.db").display().to_string(),
        AuthConfig::Tokens(vec![ADMIN.into()]),
    );
    config.clock = SystemClock::shared();
    // The broker on a runtime of its own, so that the probe measures the executor that
    // serves the requests, not the clients'.
    let served = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .on_thread_unpark(mqlite_kit::lateness::unparked)
        .build()
        .expect("the broker's runtime");
    let broker = served
        .spawn(Broker::start(config))
        .await
        .expect("start task")
        .expect("broker");
    let client = Client::new(format!("http://{}", broker.addr()), Some(ADMIN.into()));
    for q in ["work", "idle"] {
        let _: Empty = client
            .call(
                Rpc::CreateQueue,
                &CreateQueueRequest {
                    name: q.into(),
                    config: WireQueueConfig {
                        lock_duration_ms: Some(60_000),
                        ..Default::default()
                    },
                },
            )
            .await
            .expect("queue");
    }
    let ledger = Arc::new(Mutex::new(Ledger::default()));

    // 1,000 long-polls parked on an idle queue for the whole run (fewer only where the
    // open-file limit cannot hold them, and then said).
    let parked_n = PARKED.min(open_file_limit().saturating_sub(512) / 2);
    if parked_n < PARKED {
        eprintln!("open-file limit allows {parked_n} parked long-polls, not {PARKED}");
    }
    let mut waiters = broker.engine().expect("serving").long_poll_waiters();
    let parked: Vec<_> = (0..parked_n)
        .map(|_| {
            let c = client.clone();
            tokio::spawn(async move {
                // Re-poll after a 20 s timeout: the run may outlast one wait.
                loop {
                    let got: MessagesResponse = c
                        .call(
                            Rpc::Receive,
                            &ReceiveRequest {
                                queue: "idle".into(),
                                wait_time_ms: Some(20_000),
                                ..Default::default()
                            },
                        )
                        .await
                        .expect("a parked long-poll answers");
                    if let Some(m) = got.messages.into_iter().next() {
                        return m;
                    }
                }
            })
        })
        .collect();
    waiters
        .wait_for(|n| *n >= parked_n)
        .await
        .expect("every long-poll parked");

    let per = per_sender();
    let total = SENDERS * per;
    let probe = LatenessProbe::start(served.handle());
    let started = Instant::now();
    let senders: Vec<_> = (0..SENDERS)
        .map(|s| {
            let (c, ledger) = (client.clone(), ledger.clone());
            tokio::spawn(async move {
                for i in 0..per {
                    let req = SendRequest {
                        queue: "work".into(),
                        messages: vec![WireMessage::with_body(format!("s{s}-{i}"))],
                        ..Default::default()
                    };
                    let r: Result<SendResponse, _> =
                        timed(&ledger, "Send", c.call(Rpc::Send, &req)).await;
                    if let Ok(r) = r {
                        ledger
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .acked
                            .insert(r.seq_numbers[0]);
                    }
                }
            })
        })
        .collect();
    let receivers: Vec<_> = (0..RECEIVERS)
        .map(|_| {
            let (c, ledger) = (client.clone(), ledger.clone());
            tokio::spawn(async move {
                loop {
                    if ledger
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .completed
                        .len()
                        >= total
                    {
                        return;
                    }
                    let req = ReceiveRequest {
                        queue: "work".into(),
                        wait_time_ms: Some(250),
                        ..Default::default()
                    };
                    let got: Result<MessagesResponse, _> =
                        timed(&ledger, "Receive", c.call(Rpc::Receive, &req)).await;
                    let Ok(got) = got else { continue };
                    for m in got.messages {
                        if !ledger
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .in_flight
                            .insert(m.seq_number)
                        {
                            ledger.lock().unwrap_or_else(|e| e.into_inner()).overlaps += 1;
                        }
                        let req = SettleRequest {
                            queue: "work".into(),
                            seq_number: m.seq_number,
                            lock_token: m.lock_token.clone(),
                            ..Default::default()
                        };
                        let done: Result<OkResponse, _> =
                            timed(&ledger, "Complete", c.call(Rpc::Complete, &req)).await;
                        let mut l = ledger.lock().unwrap_or_else(|e| e.into_inner());
                        l.in_flight.remove(&m.seq_number);
                        if done.is_ok() {
                            l.completed.insert(m.seq_number);
                        }
                    }
                }
            })
        })
        .collect();
    for t in senders {
        t.await.expect("sender");
    }
    for t in receivers {
        t.await.expect("receiver");
    }
    let elapsed = started.elapsed();
    let lateness = probe.finish_within().await;

    // Wake every parked long-poll with a message of its own.
    let wake: Vec<WireMessage> = (0..parked_n)
        .map(|i| WireMessage::with_body(format!("idle-{i}")))
        .collect();
    for chunk in wake.chunks(1000) {
        let _: SendResponse = client
            .call(
                Rpc::Send,
                &SendRequest {
                    queue: "idle".into(),
                    messages: chunk.to_vec(),
                    ..Default::default()
                },
            )
            .await
            .expect("wake sends");
    }
    let mut woken = HashSet::new();
    for p in parked {
        woken.insert(p.await.expect("parked task").seq_number);
    }

    let latencies = {
        let mut l = ledger.lock().unwrap_or_else(|e| e.into_inner());
        assert!(
            l.server_errors.is_empty(),
            "5xx or transport errors: {:?}",
            l.server_errors
        );
        assert_eq!(l.acked.len(), total, "every send acknowledged");
        assert_eq!(l.completed, l.acked, "every acknowledged message completed");
        assert_eq!(l.overlaps, 0, "no message held by two receivers at once");
        std::mem::take(&mut l.latencies)
    };
    assert_eq!(
        woken.len(),
        parked_n,
        "each parked long-poll got its own message"
    );
    let stats: StatsResponse = client
        .call(
            Rpc::Stats,
            &QueueRequest {
                queue: "work".into(),
            },
        )
        .await
        .expect("stats");
    assert_eq!(stats.total, 0, "the queue drained");

    let rate = total as f64 / elapsed.as_secs_f64();
    let mut report = format!(
        "broker end to end: {total} messages, {SENDERS} senders x {RECEIVERS} receivers, \
         single operations, {parked_n} parked long-polls: {rate:.0} msg/s\n"
    );
    for (rpc, v) in latencies {
        let calls = v.len();
        let p99 = Percentiles::of(v).p99;
        report.push_str(&format!("  p99 {rpc}: {p99:?} over {calls} calls\n"));
    }
    report.push_str(&format!("  {}\n", lateness.line("the broker's runtime")));
    served
        .spawn(broker.shutdown())
        .await
        .expect("shutdown task")
        .expect("shutdown");
    served.shutdown_background();

    // The same workload shape in process, same run, for the ratio.
    let in_process = in_process_rate(dir.path(), total).await;
    report.push_str(&format!(
        "in-process end to end, same shape: {in_process:.0} msg/s; broker / in-process = {:.2}\n",
        rate / in_process
    ));
    eprintln!("{report}");
}

async fn in_process_rate(dir: &std::path::Path, total: usize) -> f64 {
    use mqlite::{OutMessage, QueueConfig, ReceiveOptions};
    let mq = mqlite::open(&dir.join("in-process.db").display().to_string())
        .await
        .expect("engine");
    mq.create_queue("work", QueueConfig::default())
        .await
        .expect("queue");
    let per = total / SENDERS;
    let done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let started = Instant::now();
    let senders: Vec<_> = (0..SENDERS)
        .map(|s| {
            let mq = mq.clone();
            tokio::spawn(async move {
                for i in 0..per {
                    mq.send("work", OutMessage::new(format!("s{s}-{i}")))
                        .await
                        .expect("send");
                }
            })
        })
        .collect();
    let receivers: Vec<_> = (0..RECEIVERS)
        .map(|_| {
            let (mq, done) = (mq.clone(), done.clone());
            tokio::spawn(async move {
                while done.load(std::sync::atomic::Ordering::Relaxed) < total {
                    let options = ReceiveOptions {
                        wait: Duration::from_millis(250),
                        ..Default::default()
                    };
                    for m in mq.receive("work", options).await.expect("receive") {
                        mq.complete("work", &m).await.expect("complete");
                        done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for t in senders.into_iter().chain(receivers) {
        t.await.expect("task");
    }
    let rate = total as f64 / started.elapsed().as_secs_f64();
    mq.close().await;
    rate
}

//! The outbox/inbox lab as tests: real child processes over three SQLite files — the
//! producer's (`jobs` and its relay outbox), the queue's, and the consumers' (their
//! inbox and projections) — that no transaction spans. Each child is this test binary,
//! re-run as `lab_child` with its role in the environment; it exits with code 73 at
//! the point a scenario names, as if killed there.
//!
//! The long run (`lab_long_run`) exits children at random points: 25 in `cargo test`,
//! `MQLITE_LAB_KILLS=1000` for the recorded run (docs/operations.md).

use std::path::{Path, PathBuf};
use std::process::Command;

use mqlite::inbox::{Inbox, Processed, settle};
use mqlite::relay::Relay;
use mqlite::rusqlite::{self, Connection, params};
use mqlite::trace::{TraceSources, trace};
use mqlite::{Engine, Error, EventIdentity, OutMessage, QueueConfig, ReceiveOptions};

const ROLE: &str = "MQLITE_LAB_ROLE";
const DIR: &str = "MQLITE_LAB_DIR";
const EXIT_AT: &str = "MQLITE_LAB_EXIT_AT";
const EXIT_AFTER: &str = "MQLITE_LAB_EXIT_AFTER";
const EVENT: &str = "MQLITE_LAB_EVENT";
const BODY: &str = "MQLITE_LAB_BODY";
const QUEUE: &str = "orders";
const SOURCE: &str = "https://shop.example/orders";
const CONSUMERS: [&str; 2] = ["projection-v1", "projection-v2"];
/// The exit code of every interruption: the same code, different states.
const KILLED: i32 = 73;

fn producer_db(dir: &Path) -> PathBuf {
    dir.join("producer.db")
}
fn queue_db(dir: &Path) -> PathBuf {
    dir.join("queue.db")
}
fn consumer_db(dir: &Path) -> PathBuf {
    dir.join("consumer.db")
}

fn sqlite(e: rusqlite::Error) -> Error {
    Error::backend("sqlite", e)
}

// ----- the child ---------------------------------------------------------------------

/// Exits with [`KILLED`], naming the point on stderr for the parent's tally.
fn killed_at(point: &str) -> ! {
    eprintln!("lab: killed at {point}");
    std::process::exit(KILLED);
}

/// Counts interruption points; exits with [`KILLED`] at the named one (`EXIT_AT`) or at
/// the n-th one passed (`EXIT_AFTER`, the long run's random point).
struct Points {
    at: Option<String>,
    after: Option<u64>,
    passed: u64,
}

impl Points {
    fn from_env() -> Self {
        Points {
            at: std::env::var(EXIT_AT).ok(),
            after: std::env::var(EXIT_AFTER).ok().and_then(|n| n.parse().ok()),
            passed: 0,
        }
    }

    /// Passes the point `name`; whether the child dies there. For a point inside a
    /// closure that runs later (a transaction's body), ask before and die in it.
    fn due(&mut self, name: &str) -> bool {
        self.passed += 1;
        self.at.as_deref() == Some(name) || self.after == Some(self.passed)
    }

    fn here(&mut self, name: &str) {
        if self.due(name) {
            killed_at(name);
        }
    }
}

/// Not a test: the body of the lab's child processes (run by the tests below).
#[test]
#[ignore = "a child process of the lab tests; they run it"]
fn lab_child() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let dir = PathBuf::from(std::env::var(DIR).expect("MQLITE_LAB_DIR"));
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let mut points = Points::from_env();
    let r = runtime.block_on(async {
        match role.as_str() {
            "produce" => produce(&dir, &mut points).await,
            "relay" => relay(&dir, &mut points).await,
            "consume" => consume(&dir, &mut points).await.map(drop),
            "run" => run_to_the_end(&dir, &mut points).await,
            other => panic!("unknown role {other}"),
        }
    });
    if let Err(e) = r {
        eprintln!("lab child {role}: {e:?}");
        std::process::exit(1);
    }
}

fn order(id: &str, body: &str) -> OutMessage {
    let mut m = OutMessage::new(body.to_owned())
        .with_event(EventIdentity::new(SOURCE, id).with_type("order.created"));
    m.content_type = Some("application/json".into());
    m
}

/// The producer: the job row and the relay intent in one transaction of its database.
async fn produce(dir: &Path, points: &mut Points) -> mqlite::Result<()> {
    let producer = Engine::open(producer_db(dir)).await?;
    let id = std::env::var(EVENT).expect("MQLITE_LAB_EVENT");
    let body = std::env::var(BODY).unwrap_or_else(|_| r#"{"total":7}"#.into());
    let (before_outbox, before_commit) = (points.due("before_outbox"), points.due("before_commit"));
    producer
        .tx(async move |t| {
            t.native()
                .sql()?
                .execute(
                    "INSERT INTO jobs (id, state) VALUES (?1, 'accepted')",
                    params![id],
                )
                .map_err(sqlite)?;
            if before_outbox {
                killed_at("before_outbox");
            }
            t.relay(QUEUE, order(&id, &body)).await?;
            if before_commit {
                killed_at("before_commit");
            }
            Ok::<_, Error>(())
        })
        .await?;
    points.here("after_commit");
    producer.close().await;
    Ok(())
}

/// The relay: send, (maybe die), mark.
async fn relay(dir: &Path, points: &mut Points) -> mqlite::Result<()> {
    let producer = Engine::open(producer_db(dir)).await?;
    let queue = Engine::open(queue_db(dir)).await?;
    let relay = Relay::new(producer.clone(), queue.clone());
    let sent = relay.send_pending().await?;
    points.here("before_mark");
    relay.mark(sent).await?;
    producer.close().await;
    queue.close().await;
    Ok(())
}

/// The consumers: every delivery, through each consumer's inbox, then settled.
/// Returns how many deliveries it handled.
async fn consume(dir: &Path, points: &mut Points) -> mqlite::Result<u64> {
    let queue = Engine::open(queue_db(dir)).await?;
    let consumer = Engine::open(consumer_db(dir)).await?;
    let inbox = Inbox::new(consumer.clone());
    let handled = consume_with(&queue, &inbox, points).await?;
    queue.close().await;
    consumer.close().await;
    Ok(handled)
}

async fn consume_with(
    queue: &mqlite::Engine,
    inbox: &Inbox<mqlite::SqliteStore>,
    points: &mut Points,
) -> mqlite::Result<u64> {
    let mut handled = 0;
    loop {
        let batch = queue
            .receive(
                QUEUE,
                ReceiveOptions {
                    max_messages: 16,
                    ..Default::default()
                },
            )
            .await?;
        if batch.is_empty() {
            return Ok(handled);
        }
        for m in batch {
            let mut conflict = None;
            for consumer in CONSUMERS {
                let total: i64 = serde_total(m.body());
                let (event, name) = (m.content.event.clone().unwrap_or_default().id, consumer);
                let die_in_effect = points.due("after_marker");
                let outcome = inbox
                    .process(consumer, &m, async move |t| {
                        let sql = t.native().sql()?;
                        sql.execute(
                            "INSERT INTO projection (consumer, total) VALUES (?1, ?2)
                             ON CONFLICT (consumer) DO UPDATE SET total = total + ?2",
                            params![name, total],
                        )
                        .map_err(sqlite)?;
                        sql.execute(
                            "INSERT INTO applied (consumer, event, n) VALUES (?1, ?2, 1)
                             ON CONFLICT (consumer, event) DO UPDATE SET n = n + 1",
                            params![name, event],
                        )
                        .map_err(sqlite)?;
                        // The marker and the projection are written; COMMIT is next.
                        if die_in_effect {
                            killed_at("after_marker");
                        }
                        Ok::<_, Error>(())
                    })
                    .await?;
                points.here("after_effect_commit");
                match outcome {
                    Processed::Conflict { .. } => conflict = Some(outcome),
                    Processed::Duplicate(_) => eprintln!("lab: duplicate absorbed"),
                    Processed::Applied(()) => {}
                }
            }
            match &conflict {
                Some(c) => settle(queue, QUEUE, &m, c).await?,
                None => queue.complete(QUEUE, &m).await?,
            }
            points.here("after_settle");
            handled += 1;
        }
    }
}

fn serde_total(body: &[u8]) -> i64 {
    let text = String::from_utf8_lossy(body);
    text.split("\"total\":")
        .nth(1)
        .and_then(|rest| rest.trim_end_matches('}').trim().parse::<i64>().ok())
        .unwrap_or(0)
}

/// The long run's child: relay and consume until nothing is pending anywhere.
async fn run_to_the_end(dir: &Path, points: &mut Points) -> mqlite::Result<()> {
    let producer = Engine::open(producer_db(dir)).await?;
    let queue = Engine::open(queue_db(dir)).await?;
    let consumer = Engine::open(consumer_db(dir)).await?;
    let relay = Relay::new(producer.clone(), queue.clone()).batch(8);
    let inbox = Inbox::new(consumer.clone());
    loop {
        let sent = relay.send_pending().await?;
        points.here("relay_after_send");
        let round = relay.mark(sent).await?;
        points.here("relay_after_mark");
        let handled = consume_with(&queue, &inbox, points).await?;
        if round.published == 0 && handled == 0 && relay.backlog().await?.pending == 0 {
            break;
        }
    }
    for e in [producer, queue, consumer] {
        e.close().await;
    }
    Ok(())
}

// ----- the parent --------------------------------------------------------------------

/// Runs the child `role` in `dir`, with extra environment; returns its exit code.
fn child(dir: &Path, role: &str, env: &[(&str, String)]) -> i32 {
    child_out(dir, role, env).0
}

/// [`child`], with what the child wrote to stderr.
fn child_out(dir: &Path, role: &str, env: &[(&str, String)]) -> (i32, String) {
    let mut cmd = Command::new(std::env::current_exe().expect("the test binary"));
    cmd.args(["--ignored", "lab_child", "--nocapture", "--quiet"])
        .env(ROLE, role)
        .env(DIR, dir)
        .env_remove(EXIT_AT)
        .env_remove(EXIT_AFTER);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run the lab child");
    let code = out.status.code().unwrap_or(-1);
    if code != 0 && code != KILLED {
        panic!(
            "lab child {role} failed ({code}):\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    (code, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Three fresh files: the producer's `jobs`, the queue `orders` with this dedup window,
/// the consumers' projections.
async fn three_files(dedup_window_ms: u64) -> tempfile::TempDir {
    three_files_with(dedup_window_ms, QueueConfig::default().max_delivery_count).await
}

/// [`three_files`] with this delivery bound.
async fn three_files_with(dedup_window_ms: u64, max_delivery_count: i64) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    let producer = Engine::open(producer_db(dir.path()))
        .await
        .expect("producer");
    producer
        .tx(async |t| {
            t.native()
                .sql()?
                .execute("CREATE TABLE jobs (id TEXT PRIMARY KEY, state TEXT)", [])
                .map_err(sqlite)
        })
        .await
        .expect("jobs table");
    producer.close().await;
    let queue = Engine::open(queue_db(dir.path())).await.expect("queue");
    let config = QueueConfig {
        dedup_window: std::time::Duration::from_millis(dedup_window_ms),
        max_delivery_count,
        ..Default::default()
    };
    queue.create_queue(QUEUE, config).await.expect("queue");
    queue.close().await;
    let consumer = Engine::open(consumer_db(dir.path()))
        .await
        .expect("consumer");
    consumer
        .tx(async |t| {
            let sql = t.native().sql()?;
            sql.execute_batch(
                "CREATE TABLE projection (consumer TEXT PRIMARY KEY, total INTEGER NOT NULL);
                 CREATE TABLE applied (consumer TEXT, event TEXT, n INTEGER NOT NULL,
                                       PRIMARY KEY (consumer, event));",
            )
            .map_err(sqlite)
        })
        .await
        .expect("projection tables");
    consumer.close().await;
    dir
}

/// `SELECT count(*) …` on a file, 0 when the table does not exist yet.
fn count(path: &Path, sql: &str) -> i64 {
    let conn = Connection::open(path).expect("open");
    match conn.query_row(sql, [], |r| r.get(0)) {
        Ok(n) => n,
        Err(e) if e.to_string().contains("no such table") => 0,
        Err(e) => panic!("{sql}: {e}"),
    }
}

fn jobs(dir: &Path) -> i64 {
    count(&producer_db(dir), "SELECT count(*) FROM jobs")
}
fn intents(dir: &Path) -> i64 {
    count(&producer_db(dir), "SELECT count(*) FROM mqlite_relay")
}
fn pending(dir: &Path) -> i64 {
    count(
        &producer_db(dir),
        "SELECT count(*) FROM mqlite_relay WHERE published_at = 0",
    )
}
fn queued(dir: &Path) -> i64 {
    count(&queue_db(dir), "SELECT count(*) FROM mqlite_messages")
}
fn markers(dir: &Path) -> i64 {
    count(&consumer_db(dir), "SELECT count(*) FROM mqlite_inbox")
}
fn total(dir: &Path, consumer: &str) -> i64 {
    let conn = Connection::open(consumer_db(dir)).expect("open");
    conn.query_row(
        "SELECT coalesce((SELECT total FROM projection WHERE consumer = ?1), 0)",
        [consumer],
        |r| r.get(0),
    )
    .expect("total")
}

fn at(point: &str) -> Vec<(&'static str, String)> {
    vec![(EXIT_AT, point.to_owned())]
}

fn event(id: &str) -> Vec<(&'static str, String)> {
    vec![(EVENT, id.to_owned())]
}

/// Killed before the outbox write, and between the outbox write and COMMIT: neither
/// the job nor the intent. Killed after COMMIT: both. The exit code is the same.
#[tokio::test]
async fn the_producer_commits_the_job_and_its_intent_or_neither() {
    for (point, want) in [
        ("before_outbox", 0),
        ("before_commit", 0),
        ("after_commit", 1),
    ] {
        let dir = three_files(3_600_000).await;
        let mut env = event("job-a");
        env.extend(at(point));
        assert_eq!(child(dir.path(), "produce", &env), KILLED, "{point}");
        assert_eq!(
            (jobs(dir.path()), intents(dir.path())),
            (want, want),
            "{point}"
        );
    }
}

/// A relay killed between send and mark leaves an accepted delivery and a still
/// pending intent; its successor sends again. With the dedup window expired in
/// between (a relay down longer than the window), that is two deliveries of one
/// identity, and the inbox applies it once: the projection's total does not double.
#[tokio::test]
async fn a_repeated_send_is_applied_once() {
    let dir = three_files(1).await;
    let d = dir.path();
    assert_eq!(child(d, "produce", &event("evt-1")), 0);
    assert_eq!(child(d, "relay", &at("before_mark")), KILLED);
    assert_eq!((queued(d), pending(d)), (1, 1), "sent, not marked");
    assert_eq!(child(d, "consume", &[]), 0);
    assert_eq!(child(d, "relay", &[]), 0);
    assert_eq!(
        (queued(d), pending(d)),
        (1, 0),
        "the repeat is a second message"
    );
    assert_eq!(child(d, "consume", &[]), 0);
    assert_eq!(queued(d), 0);
    for c in CONSUMERS {
        assert_eq!(total(d, c), 7, "{c}: applied once");
    }
    assert_eq!(markers(d), 2, "one marker per consumer");
}

/// A consumer killed after writing the marker and its effect, before COMMIT, leaves
/// neither; the redelivery applies. Two consumers each apply once.
#[tokio::test]
async fn a_consumer_killed_before_commit_leaves_neither() {
    let dir = three_files(3_600_000).await;
    let d = dir.path();
    assert_eq!(child(d, "produce", &event("evt-1")), 0);
    assert_eq!(child(d, "relay", &[]), 0);
    assert_eq!(child(d, "consume", &at("after_marker")), KILLED);
    assert_eq!((markers(d), total(d, CONSUMERS[0])), (0, 0), "neither");
    assert_eq!(child(d, "consume", &[]), 0);
    for c in CONSUMERS {
        assert_eq!(total(d, c), 7, "{c}");
    }
    assert_eq!(markers(d), 2);

    let t = trace(
        SOURCE,
        "evt-1",
        &TraceSources {
            producer: Some(producer_db(d).display().to_string()),
            queue: Some((queue_db(d).display().to_string(), QUEUE.into())),
            consumers: Some((
                consumer_db(d).display().to_string(),
                CONSUMERS.map(String::from).to_vec(),
            )),
        },
    )
    .await
    .expect("trace");
    let states: Vec<_> = t.rows.iter().map(|r| r.state.as_str()).collect();
    assert_eq!(states, ["published", "completed", "applied", "applied"]);
    assert_eq!(t.verdict(), "applied by every consumer traced");
}

/// The same identity with another payload is a conflict: nothing applied, the
/// delivery dead-lettered with the reason.
#[tokio::test]
async fn the_same_identity_with_another_payload_is_a_conflict() {
    let dir = three_files(1).await;
    let d = dir.path();
    assert_eq!(child(d, "produce", &event("evt-1")), 0);
    assert_eq!(child(d, "relay", &[]), 0);
    // The producer's second job reuses the identity with another payload; the queue's
    // window has expired, so it arrives as a message of its own.
    let conn = Connection::open(producer_db(d)).expect("open");
    conn.execute("DELETE FROM jobs", [])
        .expect("free the job id");
    drop(conn);
    let mut other = event("evt-1");
    other.push((BODY, r#"{"total":9}"#.into()));
    assert_eq!(child(d, "produce", &other), 0);
    assert_eq!(child(d, "relay", &[]), 0);
    assert_eq!(child(d, "consume", &[]), 0);
    for c in CONSUMERS {
        assert_eq!(total(d, c), 7, "{c}: the first payload, never corrected");
    }
    let conn = Connection::open(queue_db(d)).expect("open");
    let reason: String = conn
        .query_row(
            "SELECT dead_letter_reason FROM mqlite_messages WHERE state = 5",
            [],
            |r| r.get(0),
        )
        .expect("one dead letter");
    assert_eq!(reason, mqlite::inbox::REASON_INBOX_CONFLICT);
}

/// xorshift64*: the long run's random points, reproducible from the printed seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % below
    }
}

/// Relays and consumers killed at random points, again and again, then run to the
/// end: every produced event is applied exactly once per consumer.
#[tokio::test]
async fn lab_long_run() {
    let kills: u64 = std::env::var("MQLITE_LAB_KILLS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(25);
    let seed: u64 = std::env::var("MQLITE_LAB_SEED")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
                | 1
        });
    println!("lab_long_run: {kills} kills, MQLITE_LAB_SEED={seed}");
    let events = 60;
    // A message killed in more deliveries than its bound is dead-lettered, by design
    // (2.x); the bound sits above the kill count, since this run measures the inbox.
    let bound = i64::try_from(kills).unwrap_or(i64::MAX).saturating_add(10);
    let dir = three_files_with(3_600_000, bound).await;
    let d = dir.path();
    let producer = Engine::open(producer_db(d)).await.expect("producer");
    for i in 0..events {
        producer
            .tx(async move |t| {
                t.relay(QUEUE, order(&format!("evt-{i}"), r#"{"total":1}"#))
                    .await
                    .map(drop)
            })
            .await
            .expect("produce");
    }
    producer.close().await;

    let mut rng = Rng(seed);
    let mut killed = 0;
    let mut runs = 0;
    let mut tally: std::collections::BTreeMap<String, u64> = Default::default();
    let mut note = |stderr: &str| {
        for line in stderr.lines() {
            if let Some(what) = line.strip_prefix("lab: ") {
                *tally.entry(what.to_owned()).or_default() += 1;
            }
        }
    };
    while killed < kills {
        runs += 1;
        // Each round passes about 2 + 2·(deliveries) + 1 points per message.
        let after = 1 + rng.next(40);
        let (code, stderr) = child_out(d, "run", &[(EXIT_AFTER, after.to_string())]);
        note(&stderr);
        if code == KILLED {
            killed += 1;
        } else {
            // Everything was done before the point: produce more to kill again.
            let producer = Engine::open(producer_db(d)).await.expect("producer");
            let base = events + runs * 1000;
            for i in 0..10 {
                producer
                    .tx(async move |t| {
                        t.relay(QUEUE, order(&format!("evt-{}", base + i), r#"{"total":1}"#))
                            .await
                            .map(drop)
                    })
                    .await
                    .expect("produce");
            }
            producer.close().await;
        }
    }
    let (code, stderr) = child_out(d, "run", &[]);
    note(&stderr);
    assert_eq!(code, 0, "the last run finishes");
    let produced = intents(d);
    assert_eq!(pending(d), 0);
    assert_eq!(queued(d), 0);
    let conn = Connection::open(consumer_db(d)).expect("open");
    let (rows, max): (i64, i64) = conn
        .query_row(
            "SELECT count(*), coalesce(max(n), 0) FROM applied",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("applied");
    assert_eq!(rows, produced * 2, "every event applied by both consumers");
    assert_eq!(max, 1, "none applied twice");
    for c in CONSUMERS {
        assert_eq!(total(d, c), produced, "{c}");
    }
    println!(
        "lab_long_run: {killed} kills in {runs} runs, {produced} events, each applied once \
         per consumer; {tally:?}"
    );
}

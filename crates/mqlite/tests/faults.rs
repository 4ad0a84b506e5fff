//! Faults are reported, never silent, and the engine keeps serving: a store job that
//! panics fails its own call (with a trace event) and the writer serves the next one; a
//! background pass that fails is reported as an event and runs again at the next tick;
//! recovery at open is reported too.

use std::sync::{Arc, Mutex};

use mqlite::{
    Engine, EngineOptions, ManualClock, OutMessage, QueueConfig, ReceiveOptions, SqliteOptions,
    SqliteStore,
};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// Every event, as "LEVEL field=value ...".
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<String>>>);

struct Line(String);

impl Visit for Line {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!(" {}={value:?}", field.name()));
    }
}

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut line = Line(event.metadata().level().to_string());
        event.record(&mut line);
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(line.0);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

impl Capture {
    fn has(&self, level: &str, text: &str) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .any(|l| l.starts_with(level) && l.contains(text))
    }
}

async fn eventually(what: &str, check: impl Fn() -> bool) {
    for _ in 0..200_000 {
        if check() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("never happened: {what}");
}

async fn still_serves(mq: &Engine) {
    let seq = mq.send("q", OutMessage::new("after")).await.expect("send");
    let got = mq
        .receive("q", ReceiveOptions::batch(10))
        .await
        .expect("receive");
    let m = got.iter().find(|m| m.seq == seq).expect("the new message");
    mq.complete("q", m).await.expect("complete");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_job_and_a_failing_loop_are_reported_and_the_engine_serves_on() {
    let capture = Capture::default();
    tracing::subscriber::set_global_default(capture.clone()).expect("the only subscriber");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("mq.db");
    let clock = ManualClock::new(1_700_000_000_000);
    let store = SqliteStore::open(
        SqliteOptions::new(path.to_string_lossy().into_owned()).clock(clock.shared()),
    )
    .await
    .expect("open");
    let options = EngineOptions {
        janitor_interval: std::time::Duration::from_secs(1),
        ..Default::default()
    };
    let mq = Engine::with_store(store, options).await.expect("engine");
    assert!(
        capture.has("INFO", "orphaned leases reclaimed"),
        "recovery at open"
    );
    mq.create_queue("q", QueueConfig::default())
        .await
        .expect("queue");

    // A store job that panics (here, inside a bind callback on the writer thread).
    let failed = mq
        .store()
        .explain("SELECT :x", |_| panic!("injected fault"))
        .await;
    let err = failed.expect_err("the panicking call fails");
    let chain = format!(
        "{err}: {}",
        std::error::Error::source(&err).map_or(String::new(), |s| s.to_string())
    );
    assert!(
        chain.contains("panicked") && chain.contains("injected fault"),
        "{chain}"
    );
    assert!(capture.has("ERROR", "a store job panicked"));
    still_serves(&mq).await;

    // A background pass that fails: the janitor's table is taken away behind its back.
    let raw = rusqlite::Connection::open(&path).expect("a second connection");
    raw.execute_batch("ALTER TABLE mqlite_attempts RENAME TO mqlite_attempts_away")
        .expect("rename");
    clock.advance(1_000);
    eventually("the janitor's failure is reported", || {
        capture.has("WARN", "a background pass failed")
    })
    .await;
    still_serves(&mq).await;
    raw.execute_batch("ALTER TABLE mqlite_attempts_away RENAME TO mqlite_attempts")
        .expect("rename back");
    mq.close().await;
}

//! Metrics through the `metrics` facade (feature `metrics`): every call is counted by
//! operation, queue and outcome with its latency, and the per-state message gauges
//! follow the queue.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use metrics::{
    Counter, CounterFn, Gauge, GaugeFn, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder,
    SharedString, Unit,
};
use mqlite::{Engine, OutMessage, QueueConfig};

/// Every metric by "name{label=value,...}", its last value (counters: their total).
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<BTreeMap<String, f64>>>);

struct Slot(Capture, String);

impl Capture {
    fn slot(&self, key: &Key) -> Arc<Slot> {
        let mut labels: Vec<String> = key
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        labels.sort();
        Arc::new(Slot(
            self.clone(),
            format!("{}{{{}}}", key.name(), labels.join(",")),
        ))
    }

    fn get(&self, name: &str) -> Option<f64> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .copied()
    }

    fn update(&self, name: &str, f: impl FnOnce(f64) -> f64) {
        let mut all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let v = all.entry(name.to_owned()).or_insert(0.0);
        *v = f(*v);
    }
}

impl CounterFn for Slot {
    fn increment(&self, value: u64) {
        self.0.update(&self.1, |v| v + value as f64);
    }
    fn absolute(&self, value: u64) {
        self.0.update(&self.1, |_| value as f64);
    }
}

impl GaugeFn for Slot {
    fn increment(&self, value: f64) {
        self.0.update(&self.1, |v| v + value);
    }
    fn decrement(&self, value: f64) {
        self.0.update(&self.1, |v| v - value);
    }
    fn set(&self, value: f64) {
        self.0.update(&self.1, |_| value);
    }
}

impl HistogramFn for Slot {
    fn record(&self, _value: f64) {
        self.0.update(&self.1, |n| n + 1.0);
    }
}

impl Recorder for Capture {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(self.slot(key))
    }
    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::from_arc(self.slot(key))
    }
    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::from_arc(self.slot(key))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_outcomes_latencies_and_message_gauges_are_recorded() {
    let capture = Capture::default();
    metrics::set_global_recorder(capture.clone()).expect("the only recorder");
    let mq = Engine::open(":memory:").await.expect("open");
    mq.create_queue("jobs", QueueConfig::default())
        .await
        .expect("queue");
    mq.send_batch(
        "jobs",
        (0..3).map(|i| OutMessage::new(format!("m{i}"))).collect(),
    )
    .await
    .expect("send");
    let m = mq.receive_one("jobs").await.expect("receive").expect("one");
    mq.complete("jobs", &m).await.expect("complete");
    assert!(
        mq.complete(
            "jobs",
            mqlite::LockRef {
                seq: m.seq,
                token: mqlite::LockToken::random()
            }
        )
        .await
        .is_err()
    );
    let stats = mq.stats("jobs").await.expect("stats");
    assert_eq!(stats.active, 2);

    let counted = |k: &str| capture.get(k).unwrap_or(0.0);
    assert_eq!(
        counted("mqlite_operations_total{op=send,outcome=ok,queue=jobs}"),
        1.0
    );
    assert_eq!(
        counted("mqlite_operations_total{op=receive,outcome=ok,queue=jobs}"),
        1.0
    );
    assert_eq!(
        counted("mqlite_operations_total{op=complete,outcome=ok,queue=jobs}"),
        1.0
    );
    assert_eq!(
        counted("mqlite_operations_total{op=complete,outcome=lock_lost,queue=jobs}"),
        1.0
    );
    assert!(
        counted("mqlite_operation_seconds{op=complete}") >= 2.0,
        "latencies recorded"
    );
    assert_eq!(
        counted("mqlite_queue_messages{queue=jobs,state=active}"),
        2.0
    );
    assert_eq!(
        counted("mqlite_queue_messages{queue=jobs,state=locked}"),
        0.0
    );
    mq.close().await;
}

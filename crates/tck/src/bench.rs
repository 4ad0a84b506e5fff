//! The report card's short benchmark: a few seconds of the three paths a queue lives
//! on, timed with the wall clock on the store's own engine — single sends, a drain
//! (receive and complete, one at a time), and claims of a free message beside a group
//! whose head is locked with a backlog behind it. The tool runs it on the graded store
//! and on the SQLite store on the same machine and prints the ratios. It is a quick
//! look, not the benchmark suite (`benches/`, docs/benchmark.md).

use std::time::{Duration, Instant};

use mqlite_contract::{OutMessage, QueueConfig, Result, SystemClock};
use mqlite_engine::{Engine, EngineOptions};

use crate::StoreFactory;

/// Messages sent, then drained.
const MESSAGES: usize = 300;
/// Messages queued behind the locked head of the blocked group.
const BLOCKED: usize = 2_000;
/// Claims timed beside the blocked group.
const CLAIMS: usize = 50;

/// What the short benchmark measured on one store.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Speeds {
    /// Single sends per second.
    pub send_per_sec: f64,
    /// Receive-and-complete cycles per second.
    pub drain_per_sec: f64,
    /// Mean time of a claim beside a blocked group of [`BLOCKED`] messages.
    pub claim_beside_blocked: Duration,
}

/// Runs the short benchmark on a fresh store of `factory` in a temporary directory.
pub fn measure<F: StoreFactory>(factory: &F) -> Result<Speeds> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| mqlite_contract::Error::backend("tck", e))?;
    let dir = tempfile::tempdir().map_err(|e| mqlite_contract::Error::backend("tck", e))?;
    rt.block_on(async {
        let store = factory.open(dir.path(), SystemClock::shared()).await?;
        let options = EngineOptions {
            background: false,
            ..Default::default()
        };
        let mq = Engine::with_store(store, options).await?;
        mq.create_queue("bench", QueueConfig::default()).await?;

        let started = Instant::now();
        for i in 0..MESSAGES {
            mq.send("bench", OutMessage::new(format!("m{i}"))).await?;
        }
        let send_per_sec = per_sec(MESSAGES, started.elapsed());

        let started = Instant::now();
        for _ in 0..MESSAGES {
            if let Some(m) = mq.receive_one("bench").await? {
                mq.complete("bench", &m).await?;
            }
        }
        let drain_per_sec = per_sec(MESSAGES, started.elapsed());

        // A group whose head is locked, with a backlog behind it.
        mq.send("bench", OutMessage::new("head").with_group("g"))
            .await?;
        let _head = mq.receive_one("bench").await?;
        let blocked: Vec<OutMessage> = (0..BLOCKED)
            .map(|i| OutMessage::new(format!("b{i}")).with_group("g"))
            .collect();
        for chunk in blocked.chunks(500) {
            mq.send_batch("bench", chunk.to_vec()).await?;
        }
        let mut spent = Duration::ZERO;
        for i in 0..CLAIMS {
            mq.send("bench", OutMessage::new(format!("free{i}")))
                .await?;
            let started = Instant::now();
            let m = mq.receive_one("bench").await?;
            spent += started.elapsed();
            if let Some(m) = m {
                mq.complete("bench", &m).await?;
            }
        }
        mq.close().await;
        Ok(Speeds {
            send_per_sec,
            drain_per_sec,
            claim_beside_blocked: spent / u32::try_from(CLAIMS).unwrap_or(1),
        })
    })
}

fn per_sec(n: usize, spent: Duration) -> f64 {
    n as f64 / spent.as_secs_f64().max(1e-9)
}

/// The graded store's speeds beside the SQLite store's, measured in the same run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Beside {
    /// The graded store.
    pub store: Speeds,
    /// The SQLite store on the same machine.
    pub sqlite: Speeds,
}

impl Beside {
    /// Rows of (path, store, SQLite, ratio as a multiple of SQLite's speed).
    pub fn rows(&self) -> Vec<(&'static str, String, String, f64)> {
        let (s, q) = (self.store, self.sqlite);
        let micros = |d: Duration| d.as_secs_f64() * 1e6;
        vec![
            (
                "send (one message)",
                format!("{:.0}/s", s.send_per_sec),
                format!("{:.0}/s", q.send_per_sec),
                s.send_per_sec / q.send_per_sec.max(1e-9),
            ),
            (
                "drain (receive + complete)",
                format!("{:.0}/s", s.drain_per_sec),
                format!("{:.0}/s", q.drain_per_sec),
                s.drain_per_sec / q.drain_per_sec.max(1e-9),
            ),
            (
                "claim beside a blocked group of 2,000",
                format!("{:.0} µs", micros(s.claim_beside_blocked)),
                format!("{:.0} µs", micros(q.claim_beside_blocked)),
                micros(q.claim_beside_blocked) / micros(s.claim_beside_blocked).max(1e-9),
            ),
        ]
    }
}

//! What criterion does not report: bytes this process passed to write(2) per message
//! (`wchar` of /proc/self/io), write calls per message (`syscw`), and peak RSS, for
//! single sends and sends of 64, through the SQLite store and straight into bare SQLite
//! (the table of docs/benchmark.md), WAL + NORMAL on both sides; and the same for a
//! consumer that receives one message and completes it (two transactions per message
//! on both sides: bare's claim UPDATE and its DELETE).
//!
//! `cargo bench -p mqlite-benches --bench io_per_message` (`MQLITE_IO_MESSAGES` sets
//! how many messages each path writes; 4,000 by default). It also times single sends
//! through the typed and the run-time (dyn) engine interleaved, which criterion's
//! separate groups cannot compare within the 2 % the issue asks for.

use mqlite_benches::body;
use mqlite_contract::{OutMessage, QueueConfig, SystemClock};
use mqlite_store_sqlite::{SqliteOptions, SqliteStore, Synchronous};

#[derive(Clone, Copy, Default)]
struct Io {
    wchar: u64,
    syscw: u64,
}

fn io() -> Io {
    let text = std::fs::read_to_string("/proc/self/io").unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    Io {
        wchar: field("wchar:"),
        syscw: field("syscw:"),
    }
}

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn report(path: &str, n: usize, before: Io) {
    let after = io();
    println!(
        "{path:<32} {:>9.0} bytes/message {:>6.2} writes/message",
        (after.wchar - before.wchar) as f64 / n as f64,
        (after.syscw - before.syscw) as f64 / n as f64
    );
}

fn bare(n: usize, batch: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    let conn = mqlite_benches::bare_sqlite(&dir.path().join("bare.db"), false);
    let before = io();
    for chunk in (0..n).collect::<Vec<_>>().chunks(batch) {
        mqlite_benches::bare_insert_tx(&conn, chunk.iter().map(|i| body(*i as u64)));
    }
    report(&format!("bare, transactions of {batch}"), n, before);
}

/// The SQLite store in `dir` (WAL + NORMAL) with the queue `q`.
async fn engine(dir: &tempfile::TempDir) -> mqlite_engine::Engine<SqliteStore> {
    let path = dir.path().join("store.db").display().to_string();
    let store = SqliteStore::open(
        SqliteOptions::new(path)
            .clock(SystemClock::shared())
            .synchronous(Synchronous::Normal),
    )
    .await
    .expect("open");
    mqlite_benches::engine_with_queue(store, "q", QueueConfig::default()).await
}

fn store(rt: &tokio::runtime::Runtime, n: usize, batch: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    rt.block_on(async {
        let mq = engine(&dir).await;
        let before = io();
        for chunk in (0..n).collect::<Vec<_>>().chunks(batch) {
            let messages = chunk
                .iter()
                .map(|i| OutMessage::new(body(*i as u64)))
                .collect();
            mq.send_batch("q", messages).await.expect("send");
        }
        report(&format!("mqlite, sends of {batch}"), n, before);
        mq.close().await;
    });
}

/// Bare's drain loop one message at a time over `n` rows written first (not counted).
fn bare_claims(n: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    let conn = mqlite_benches::bare_sqlite(&dir.path().join("bare.db"), false);
    mqlite_benches::bare_insert_tx(&conn, (0..n).map(|i| body(i as u64)));
    let before = io();
    for _ in 0..n {
        assert_eq!(mqlite_benches::bare_drain(&conn, 1), 1);
    }
    report("bare, claim + delete of 1", n, before);
}

/// The store's receive of one message and its completion, over `n` messages sent first
/// (not counted).
fn store_claims(rt: &tokio::runtime::Runtime, n: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    rt.block_on(async {
        let mq = engine(&dir).await;
        for chunk in (0..n).collect::<Vec<_>>().chunks(64) {
            let messages = chunk
                .iter()
                .map(|i| OutMessage::new(body(*i as u64)))
                .collect();
            mq.send_batch("q", messages).await.expect("send");
        }
        let before = io();
        for _ in 0..n {
            let m = mq.receive_one("q").await.expect("receive").expect("one");
            mq.complete("q", &m).await.expect("complete");
        }
        report("mqlite, receive 1 + complete", n, before);
        mq.close().await;
    });
}

/// The typed engine against the run-time (dyn) one, interleaved: each round sends once
/// through each, so the thread wake-ups that drift between runs weigh on both alike.
/// Prints both means and the ratio.
fn typed_vs_dyn(rt: &tokio::runtime::Runtime, n: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    rt.block_on(async {
        let open = |name: &str| {
            let path = dir.path().join(name).display().to_string();
            SqliteStore::open(
                SqliteOptions::new(path)
                    .clock(SystemClock::shared())
                    .synchronous(Synchronous::Normal),
            )
        };
        let typed = mqlite_benches::engine_with_queue(
            open("typed.db").await.expect("open"),
            "q",
            QueueConfig::default(),
        )
        .await;
        let dynamic = mqlite_benches::engine_with_queue(
            mqlite_contract::DynStore::new(open("dyn.db").await.expect("open")),
            "q",
            QueueConfig::default(),
        )
        .await;
        let (mut t, mut d) = (std::time::Duration::ZERO, std::time::Duration::ZERO);
        for i in 0..n {
            // Alternate which goes first, so neither always follows the other's wake-up.
            for k in 0..2 {
                let started = std::time::Instant::now();
                if (i + k) % 2 == 0 {
                    typed
                        .send("q", OutMessage::new(body(i as u64)))
                        .await
                        .expect("send");
                    t += started.elapsed();
                } else {
                    dynamic
                        .send("q", OutMessage::new(body(i as u64)))
                        .await
                        .expect("send");
                    d += started.elapsed();
                }
            }
        }
        let (t, d) = (
            t.as_secs_f64() * 1e6 / n as f64,
            d.as_secs_f64() * 1e6 / n as f64,
        );
        println!(
            "single send, interleaved {n}x: typed {t:.1} µs, dyn {d:.1} µs, dyn/typed {:.3}",
            d / t
        );
        typed.close().await;
        dynamic.close().await;
    });
}

fn main() {
    // `cargo test --benches` runs this once as a smoke test with a small count.
    let smoke = std::env::args().any(|a| a == "--test" || a == "--list");
    let n = std::env::var("MQLITE_IO_MESSAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if smoke { 256 } else { 4_000 });
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    // One path alone (`bare-1`, `mqlite-1`, `bare-64`, `mqlite-64`), for a syscall
    // counter around it: `perf stat -e syscalls:sys_enter_fsync` counts the fsyncs.
    if let Ok(only) = std::env::var("MQLITE_IO_ONLY") {
        match only.split_once('-') {
            Some(("bare", "claims")) => bare_claims(n),
            Some(("mqlite", "claims")) => store_claims(&rt, n),
            Some(("bare", b)) => bare(n, b.parse().expect("a batch size")),
            Some(("mqlite", b)) => store(&rt, n, b.parse().expect("a batch size")),
            _ => panic!("MQLITE_IO_ONLY is bare-<N>, mqlite-<N>, bare-claims or mqlite-claims"),
        }
        return;
    }
    for batch in [1, 64] {
        bare(n, batch);
        store(&rt, n, batch);
    }
    bare_claims(n);
    store_claims(&rt, n);
    typed_vs_dyn(&rt, n);
    println!("peak RSS of this process: {} KiB", peak_rss_kib());
}

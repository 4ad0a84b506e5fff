//! The lateness probe beside callers that send to the SQLite store in a loop, each call
//! answered on its caller's own thread (docs/benchmark.md, "Lateness: what the probe
//! waits for"). Each scenario runs `--secs` seconds (default 3), `--runs` times
//! (default 3), the probe on the benches' two-worker runtime:
//!
//! - `thread`: one plain thread sends single messages (`block_on` on that thread, as
//!   the throughput bench's single send does);
//! - `tasks`: two tasks on the runtime send single messages, one per worker thread.
//!
//! One JSON line per run: the probe's p99 / p99.9 / largest lateness, the ticking
//! thread's own wake-up delay in the same window (`wake_*`), in µs, and the sends per
//! second.
//!
//! `cargo run --release -p mqlite-benches --example lateness_callers -- --secs 3 --runs 3`

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use mqlite_benches::{LatenessProbe, body};
use mqlite_contract::{OutMessage, QueueConfig, SystemClock};
use mqlite_engine::Engine;
use mqlite_store_sqlite::{SqliteOptions, SqliteStore};

const SCENARIOS: [&str; 2] = ["thread", "tasks"];
const Q: &str = "q";

fn main() {
    let args = mqlite_benches::ScenarioArgs::parse("lateness_callers");
    let rt = mqlite_benches::runtime();
    let dir = tempfile::tempdir().expect("tempdir");
    for (run, scenario) in args.each(&SCENARIOS) {
        let path = dir.path().join(format!("{scenario}-{run}.db"));
        let engine: Engine<SqliteStore> = rt.block_on(async {
            let store = SqliteStore::open(
                SqliteOptions::new(path.display().to_string()).clock(SystemClock::shared()),
            )
            .await
            .expect("open");
            mqlite_benches::engine_with_queue(store, Q, QueueConfig::default()).await
        });
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU64::new(0));
        let send_loop = {
            let (engine, stop, sent) = (engine.clone(), stop.clone(), sent.clone());
            move || {
                let (engine, stop, sent) = (engine.clone(), stop.clone(), sent.clone());
                async move {
                    while !stop.load(Ordering::Relaxed) {
                        let i = sent.fetch_add(1, Ordering::Relaxed);
                        engine
                            .send(Q, OutMessage::new(body(i)))
                            .await
                            .expect("send");
                    }
                }
            }
        };
        let probe = LatenessProbe::start(rt.handle());
        let started = Instant::now();
        match scenario {
            "thread" => {
                let handle = rt.handle().clone();
                let caller = std::thread::spawn(move || handle.block_on(send_loop()));
                std::thread::sleep(Duration::from_secs(args.secs));
                stop.store(true, Ordering::Relaxed);
                caller.join().expect("caller thread");
            }
            _ => {
                let tasks: Vec<_> = (0..2).map(|_| rt.spawn(send_loop())).collect();
                std::thread::sleep(Duration::from_secs(args.secs));
                stop.store(true, Ordering::Relaxed);
                for t in tasks {
                    rt.block_on(t).expect("caller task");
                }
            }
        }
        let elapsed = started.elapsed();
        let late = probe.finish();
        rt.block_on(engine.close());
        let us = |d: Duration| d.as_micros();
        let (p, w) = (late.probe, late.wake);
        println!(
            "{{\"scenario\":\"{scenario}\",\"run\":{run},\"ticks\":{},\"p99_us\":{},\"p999_us\":{},\"max_us\":{},\"wake_p999_us\":{},\"wake_max_us\":{},\"sends_per_s\":{:.0}}}",
            p.count,
            us(p.p99),
            us(p.p999),
            us(p.max),
            us(w.p999),
            us(w.max),
            sent.load(Ordering::Relaxed) as f64 / elapsed.as_secs_f64()
        );
    }
}

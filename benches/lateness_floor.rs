//! The lateness probe's floor on this machine (docs/benchmark.md, "Where store work
//! runs"): the probe that every bench runs beside its store ([`LatenessProbe`]), here
//! beside work that never touches the runtime, so that whatever lateness it records
//! comes from the operating system and the machine, not from an executor thread held by
//! a store call. Each scenario runs `--secs` seconds (default 3) on a plain thread, the
//! probe on the benches' two-worker runtime, `--runs` times (default 3):
//!
//! - `idle`: the thread sleeps;
//! - `cpu`: the thread keeps one core busy;
//! - `append`: the thread appends 4 KiB writes to a file (page cache only, no fsync);
//! - `append_fsync`: the same, with an fsync every 256 writes (1 MiB, as a checkpoint
//!   syncs what it copied);
//! - `bare_insert`: the bare side's autocommit INSERTs (WAL, NORMAL) on the thread.
//!
//! One JSON line per run: p50, p99, p99.9 and the largest lateness, in µs, and how late
//! the probe's ticking thread woke from its own sleeps (`wake_*`, the machine's wake-up in
//! the same window).
//!
//! `cargo run --release -p mqlite-benches --example lateness_floor -- --secs 3 --runs 3`

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use mqlite_benches::{LatenessProbe, body};

const SCENARIOS: [&str; 5] = ["idle", "cpu", "append", "append_fsync", "bare_insert"];

/// Runs `scenario` on a plain thread until `stop`.
fn work(scenario: &str, dir: &std::path::Path, stop: &AtomicBool) {
    match scenario {
        "idle" => {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        "cpu" => {
            let mut x = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for i in 0..10_000u64 {
                    x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
                }
            }
        }
        "append" | "append_fsync" => {
            let path = dir.join(format!("{scenario}.bin"));
            let mut f = std::fs::File::create(&path).expect("create");
            let page = [7u8; 4096];
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                f.write_all(&page).expect("write");
                n += 1;
                if scenario == "append_fsync" && n.is_multiple_of(256) {
                    f.sync_all().expect("fsync");
                }
            }
            drop(f);
            let _ = std::fs::remove_file(path);
        }
        "bare_insert" => {
            let path = dir.join("bare.db");
            let conn = mqlite_benches::bare_sqlite(&path, false);
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                mqlite_benches::bare_insert(&conn, [body(i)]);
                i += 1;
            }
            drop(conn);
            for end in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{end}", path.display()));
            }
        }
        other => panic!("unknown scenario {other}"),
    }
}

fn main() {
    let args = mqlite_benches::ScenarioArgs::parse("lateness_floor");
    let rt = mqlite_benches::runtime();
    let dir = tempfile::tempdir().expect("tempdir");
    for (run, scenario) in args.each(&SCENARIOS) {
        let stop = Arc::new(AtomicBool::new(false));
        let probe = LatenessProbe::start(rt.handle());
        let worker = {
            let (stop, dir) = (stop.clone(), dir.path().to_owned());
            std::thread::spawn(move || work(scenario, &dir, &stop))
        };
        std::thread::sleep(Duration::from_secs(args.secs));
        stop.store(true, Ordering::Relaxed);
        worker.join().expect("scenario thread");
        let late = probe.finish();
        let us = |d: Duration| d.as_micros();
        let (p, w) = (late.probe, late.wake);
        println!(
            "{{\"scenario\":\"{scenario}\",\"run\":{run},\"ticks\":{},\"p50_us\":{},\"p99_us\":{},\"p999_us\":{},\"max_us\":{},\"wake_p99_us\":{},\"wake_p999_us\":{},\"wake_max_us\":{}}}",
            p.count,
            us(p.p50),
            us(p.p99),
            us(p.p999),
            us(p.max),
            us(w.p99),
            us(w.p999),
            us(w.max)
        );
    }
}

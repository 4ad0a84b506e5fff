//! The crash-injection worker: `mqlite-crash-worker --store sqlite --dir DIR --mode
//! coordinated|random --seed N [--torn]`. It runs until it is killed.

use mqlite_crash::worker::{Mode, WorkerArgs, run};

fn parse() -> Result<(String, WorkerArgs), String> {
    let mut args = std::env::args().skip(1);
    let (mut store, mut dir, mut mode, mut seed, mut torn) = (None, None, None, 1u64, false);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--store" => store = args.next(),
            "--dir" => dir = args.next().map(std::path::PathBuf::from),
            "--mode" => {
                mode = match args.next().as_deref() {
                    Some("coordinated") => Some(Mode::Coordinated),
                    Some("random") => Some(Mode::Random),
                    other => return Err(format!("unknown mode {other:?}")),
                }
            }
            "--seed" => {
                seed = args
                    .next()
                    .and_then(|s| s.parse().ok())
                    .ok_or("bad --seed")?
            }
            "--torn" => torn = true,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    let args = WorkerArgs {
        dir: dir.ok_or("--dir is required")?,
        mode: mode.ok_or("--mode is required")?,
        seed,
        torn,
    };
    Ok((store.ok_or("--store is required")?, args))
}

fn main() {
    let (store, args) = match parse() {
        Ok(v) => v,
        Err(e) => {
            eprintln!("mqlite-crash-worker: {e}");
            std::process::exit(2);
        }
    };
    let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
    let result = mqlite_crash::with_local_store!(store.as_str(), factory => {
        rt.block_on(run(factory, args)).map_err(|e| e.to_string())
    });
    if let Err(e) = result.and_then(|r| r) {
        eprintln!("mqlite-crash-worker: {e}");
        std::process::exit(1);
    }
}

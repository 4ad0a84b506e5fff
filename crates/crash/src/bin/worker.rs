//! The crash-injection worker: `mqlite-crash-worker --store sqlite --path typed|dyn
//! --dir DIR --mode coordinated|random --seed N [--torn]`. It runs until it is killed.

use mqlite_crash::worker::{Mode, WorkerArgs, run};
use mqlite_tck::{Erased, Typed};

fn parse() -> Result<(String, String, WorkerArgs), String> {
    let mut args = std::env::args().skip(1);
    let (mut store, mut dir, mut mode, mut seed, mut torn) = (None, None, None, 1u64, false);
    let mut path = "dyn".to_owned();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--store" => store = args.next(),
            "--path" => path = args.next().ok_or("--path needs typed or dyn")?,
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
    Ok((store.ok_or("--store is required")?, path, args))
}

fn main() {
    let (store, path, args) = match parse() {
        Ok(v) => v,
        Err(e) => {
            eprintln!("mqlite-crash-worker: {e}");
            std::process::exit(2);
        }
    };
    let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
    let result = mqlite_testbed::with_store!(store.as_str(), factory => {
        match path.as_str() {
            "typed" => rt.block_on(run(Typed(factory), args)).map_err(|e| e.to_string()),
            "dyn" => rt.block_on(run(Erased(factory), args)).map_err(|e| e.to_string()),
            other => Err(format!("unknown --path {other:?} (typed or dyn)")),
        }
    });
    if let Err(e) = result.and_then(|r| r) {
        eprintln!("mqlite-crash-worker: {e}");
        std::process::exit(1);
    }
}

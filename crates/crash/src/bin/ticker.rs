//! The schedule ticker: `mqlite-crash-ticker --store sqlite --dir DIR --clock FILE
//! [--torn]`.
//! It waits for the database's one-writer lock, then fires the recurring schedule as
//! the clock file moves, until it is killed (see `mqlite_crash::ticker`).

use mqlite_crash::ticker::run_ticker;
use mqlite_tck::Typed;

type Args = (String, std::path::PathBuf, std::path::PathBuf, bool);

fn parse() -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let (mut store, mut dir, mut clock, mut torn) = (None, None, None, false);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--store" => store = args.next(),
            "--dir" => dir = args.next().map(std::path::PathBuf::from),
            "--clock" => clock = args.next().map(std::path::PathBuf::from),
            "--torn" => torn = true,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok((
        store.ok_or("--store is required")?,
        dir.ok_or("--dir is required")?,
        clock.ok_or("--clock is required")?,
        torn,
    ))
}

fn main() {
    let (store, dir, clock, torn) = match parse() {
        Ok(v) => v,
        Err(e) => {
            eprintln!("mqlite-crash-ticker: {e}");
            std::process::exit(2);
        }
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let result = mqlite_testbed::with_store!(store.as_str(), factory => {
        rt.block_on(run_ticker(Typed(factory), &dir, &clock, torn)).map_err(|e| e.to_string())
    });
    if let Err(e) = result.and_then(|r| r) {
        eprintln!("mqlite-crash-ticker: {e}");
        std::process::exit(1);
    }
}

//! `mqlite-tck --store <store>`: runs every case of the conformance kit against a
//! registered store, through the typed and the run-time engine, with a progress bar,
//! and prints its report card: each promise section, the store contract's guarantees
//! graded from the cases that evidence them, and the cost pins. `--output json` and
//! `--output markdown` for CI and docs. Exit status: 0 when nothing failed, 1 when a
//! case failed, 2 for bad usage.
//!
//! A store outside this repository is graded by the same library call,
//! `mqlite_tck::grade(name, factory, progress)`: see docs/tck.md.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use clap::{Parser, ValueEnum};

/// Grades a store against the mqlite conformance kit and prints its report card.
#[derive(Debug, Parser)]
#[command(name = "mqlite-tck", version)]
struct Args {
    /// The store: a registered name (sqlite, redb, libsql) or a location of one
    /// (`app.db`, `redb:q.redb`, `libsql://…`, `http://…`). Each case runs on a fresh
    /// database of that store that the kit makes itself.
    #[arg(long)]
    store: String,

    /// How to print the card.
    #[arg(long, value_enum, default_value = "text")]
    output: Output,

    /// No progress bar (it is drawn only on a terminal anyway).
    #[arg(long)]
    quiet: bool,

    /// Leave out the short benchmark (a few seconds on the store and on SQLite).
    #[arg(long)]
    no_bench: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Output {
    Text,
    Json,
    Markdown,
}

/// The registered store a name or a location means (a location as the facade reads
/// it: `app.db`, `redb:q.redb`, `libsql://host`, …).
fn registered(store: &str) -> Result<&'static str, String> {
    let names: Vec<&'static str> = mqlite_testbed::stores().iter().map(|s| s.name).collect();
    if let Some(name) = names.iter().find(|n| **n == store) {
        return Ok(name);
    }
    let name = match mqlite::Location::parse(store) {
        Ok(location) => location.store(),
        Err(e) => return Err(format!("{e} (or one of the registered stores: {names:?})")),
    };
    names
        .iter()
        .find(|n| **n == name)
        .copied()
        .ok_or_else(|| format!("{store:?} names the {name} store, which is not registered"))
}

/// A progress bar on stderr: `[#####.....] 45/172 p5_6_…`.
fn bar(done: usize, total: usize, case: &str) {
    let width = 30;
    let filled = done * width / total.max(1);
    let mut err = std::io::stderr();
    let _ = write!(
        err,
        "\r[{}{}] {done}/{total} {:<60.60}",
        "#".repeat(filled),
        ".".repeat(width - filled),
        case
    );
    if done == total {
        let _ = writeln!(err);
    }
    let _ = err.flush();
}

/// The short benchmark on the store and on the SQLite store, or None (with the reason
/// on stderr) when it could not run.
fn beside_sqlite<F: mqlite_tck::StoreFactory>(factory: &F) -> Option<mqlite_tck::bench::Beside> {
    eprintln!("mqlite-tck: the short benchmark (a few seconds)");
    let measured = mqlite_tck::bench::measure(factory).and_then(|store| {
        let sqlite = mqlite_testbed::sqlite::SqliteFactory;
        mqlite_tck::bench::measure(&sqlite)
            .map(|sqlite| mqlite_tck::bench::Beside { store, sqlite })
    });
    match measured {
        Ok(b) => Some(b),
        Err(e) => {
            eprintln!("mqlite-tck: the short benchmark did not run: {e}");
            None
        }
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let name = match registered(&args.store) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("mqlite-tck: {e}");
            return ExitCode::from(2);
        }
    };
    // A failing case's panic is its verdict, recorded on the card; printed, it would
    // only tear the progress bar.
    std::panic::set_hook(Box::new(|_| {}));
    let draw = !args.quiet && std::io::stderr().is_terminal();
    let mut progress = |done: usize, total: usize, case: &str| {
        if draw {
            bar(done, total, case);
        }
    };
    let graded = mqlite_testbed::with_store!(name, factory => {
        let mut card = mqlite_tck::grade(name, factory, &mut progress);
        if !args.no_bench {
            card.bench = beside_sqlite(&factory);
        }
        card
    });
    mqlite_testbed::stop_servers();
    let card = match graded {
        Ok(card) => card,
        Err(e) => {
            eprintln!("mqlite-tck: {e}");
            return ExitCode::from(2);
        }
    };
    let text = match args.output {
        Output::Text => card.to_text(),
        Output::Json => card.to_json(),
        Output::Markdown => card.to_markdown(),
    };
    println!("{text}");
    if card.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

#[cfg(test)]
mod tests {
    use super::registered;

    #[test]
    fn a_store_is_named_or_read_from_a_location() {
        for (given, store) in [
            ("redb", "redb"),
            ("app.db", "sqlite"),
            (":memory:", "sqlite"),
            ("sqlite:app.db", "sqlite"),
            ("redb:q.redb", "redb"),
            ("libsql://db.example", "libsql"),
            ("https://db.example", "libsql"),
        ] {
            assert_eq!(registered(given), Ok(store), "{given}");
        }
        let refused = registered("bogus://x").expect_err("an unknown scheme");
        assert!(refused.contains("unknown store scheme"), "{refused}");
    }
}

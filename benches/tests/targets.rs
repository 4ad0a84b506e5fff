//! `benches/targets.py` marks each target of the throughput and libSQL benches met or
//! missed: run on saved logs of the benches (`fixtures/throughput.log`, run A of the
//! twentieth stop in docs/benchmark.md, and `fixtures/libsql.log`, that stop's libSQL
//! run; their time and lateness lines), it prints the tables that section shows.

use std::path::Path;
use std::process::Command;

/// The script's table for the fixture `log`, or `None` when this machine has no
/// `python3` (the case says so and passes).
fn table(log: &str) -> Option<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = match Command::new("python3")
        .arg(dir.join("targets.py"))
        .arg(dir.join("fixtures").join(log))
        .output()
    {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("skipped: no python3 on this machine");
            return None;
        }
        Err(e) => panic!("run targets.py: {e}"),
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8(out.stdout).expect("UTF-8"))
}

/// The row of `path` in `table`, its cells trimmed.
fn row<'a>(table: &'a str, path: &str) -> Vec<&'a str> {
    let line = table
        .lines()
        .find(|l| l.starts_with(&format!("| {path} |")))
        .unwrap_or_else(|| panic!("no row for {path} in\n{table}"));
    line.trim_matches('|').split('|').map(str::trim).collect()
}

#[test]
fn each_target_is_marked_met_or_missed_with_its_ratio_and_lateness() {
    let Some(table) = table("throughput.log") else {
        return;
    };
    // path | bare | mqlite | ratio | target | met | lateness (floors) | ≤ 1 ms
    assert_eq!(
        row(&table, "single send"),
        [
            "single send",
            "20.5 µs",
            "13.9 µs",
            "1.47",
            "≥ 0.8",
            "met",
            "0.33 ms (0.56 / 0.59)",
            "met"
        ]
    );
    let drain = row(&table, "drain 64");
    assert_eq!(drain[3..6], ["0.69", "≥ 0.8", "**missed**"]);
    let batch = row(&table, "send_batch of 64");
    assert_eq!(batch[6..], ["3.13 ms (3.22 / 3.14)", "**missed**"]);
    // Latency rows: mqlite's time over bare's, at most the target.
    let claim = row(&table, "claim + complete, 200k backlog");
    assert_eq!(claim[3..6], ["0.76 ×", "≤ 1.5 ×", "met"]);
    assert_eq!(
        row(&table, "16 producers under FULL")[3..6],
        ["6.26 ×", "≥ 4 ×", "met"]
    );
    // End to end's bare side is its inserts alone: its target is the peers'.
    let e2e = row(&table, "end to end 4 × 4");
    assert_eq!(e2e[3], "—");
    assert_eq!(e2e[7], "**missed**");
    // Every path of the bench has its row.
    assert_eq!(table.lines().count(), 2 + 10, "{table}");
}

#[test]
fn the_libsql_targets_are_marked_too_sixteen_producers_against_sixteen_times_one() {
    let Some(table) = table("libsql.log") else {
        return;
    };
    assert_eq!(
        row(&table, "libSQL: send 1")[1..6],
        ["820.7 µs", "782.3 µs", "1.05 ×", "≥ 1 ×", "met"]
    );
    // 16 producers of 8 sends against one producer's 8: 16 × one's time is the base.
    assert_eq!(
        row(&table, "libSQL: 16 producers (base: 16 × one)")[1..6],
        ["99.48 ms", "10.48 ms", "9.49 ×", "≥ 8 ×", "met"]
    );
    assert_eq!(
        row(&table, "libSQL: receive 1 + complete")[6..],
        ["1.36 ms (0.68 / 0.48)", "**missed**"]
    );
    assert_eq!(table.lines().count(), 2 + 4, "{table}");
}

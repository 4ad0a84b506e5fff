//! `benches/targets.py` marks each target of the throughput bench met or missed: run on
//! a saved log of the bench (`fixtures/throughput.log`, run A of the twentieth stop in
//! docs/benchmark.md, its time and lateness lines), it prints the table that section
//! shows.

use std::path::Path;
use std::process::Command;

/// The script's table for the fixture, or `None` when this machine has no `python3`
/// (the case says so and passes).
fn table() -> Option<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = match Command::new("python3")
        .arg(dir.join("targets.py"))
        .arg(dir.join("fixtures/throughput.log"))
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
    let Some(table) = table() else { return };
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

//! Keeps docs/promises.md and docs/conformance.md true: the promise list is numbered
//! consistently, every promise number has a row in the map, every row's TCK case exists
//! and carries the row's number, every store-specific test named there exists, and a row
//! without a test says "gap".

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// The promise list, kept in the repository so that a bare clone can check itself.
fn promises() -> String {
    read(&root().join("docs/promises.md"))
}

/// `N.M` with both parts numbers.
fn is_promise_number(n: &str) -> bool {
    n.split('.').count() == 2 && n.split('.').all(|p| p.parse::<u32>().is_ok())
}

/// Promise numbers of the list: lines `- N.M ...`.
fn promise_numbers() -> BTreeSet<String> {
    promises()
        .lines()
        .filter_map(|l| l.strip_prefix("- "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| is_promise_number(n))
        .map(str::to_owned)
        .collect()
}

/// Rows of the map: (number, pinned-by column).
fn map_rows() -> Vec<(String, String)> {
    read(&root().join("docs/conformance.md"))
        .lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            // | # | promise | pinned by |  -> ["", "#", "promise", "pinned by", ""]
            (cells.len() >= 5
                && cells[1].contains('.')
                && cells[1].chars().all(|c| c.is_ascii_digit() || c == '.'))
            .then(|| (cells[1].to_owned(), cells[3].to_owned()))
        })
        .collect()
}

fn backticked(cell: &str) -> Vec<&str> {
    cell.split('`').skip(1).step_by(2).collect()
}

#[test]
fn every_promise_has_a_row() {
    let rows: BTreeSet<String> = map_rows().into_iter().map(|(n, _)| n).collect();
    let missing: Vec<_> = promise_numbers().difference(&rows).cloned().collect();
    assert!(
        missing.is_empty(),
        "promises without a row in docs/conformance.md: {missing:?}"
    );
    let unknown: Vec<_> = rows.difference(&promise_numbers()).cloned().collect();
    assert!(
        unknown.is_empty(),
        "rows for promises docs/promises.md does not have: {unknown:?}"
    );
}

#[test]
fn every_named_test_exists() {
    let cases: BTreeSet<&str> = mqlite_tck::cases::NAMES.iter().copied().collect();
    for (number, cell) in map_rows() {
        let names = backticked(&cell);
        if names.is_empty() {
            assert!(
                cell.contains("**gap**"),
                "{number}: no test and not marked as a gap"
            );
            continue;
        }
        for name in names {
            if let Some((file, func)) = name.split_once("::") {
                let path = if file.starts_with("crates/") {
                    root().join(file)
                } else {
                    root().join("crates").join(file)
                };
                let text = read(&path);
                assert!(
                    text.contains(&format!("fn {func}(")),
                    "{number}: {file} has no test fn {func}"
                );
            } else if name.ends_with(".rs") {
                assert!(root().join(name).is_file(), "{number}: no file {name}");
            } else {
                assert!(cases.contains(name), "{number}: no TCK case {name}");
                let prefix = format!("p{}_", number.replace('.', "_"));
                assert!(
                    name.starts_with(&prefix) || cell.contains(&format!("`{prefix}")),
                    "{number}: case {name} is not named after a promise of this row"
                );
            }
        }
    }
}

#[test]
fn every_tck_case_is_mapped() {
    let map = read(&root().join("docs/conformance.md"));
    for name in mqlite_tck::cases::NAMES {
        assert!(
            map.contains(&format!("`{name}`")),
            "TCK case {name} is not in the map"
        );
    }
}

#[test]
fn promise_numbers_match_their_sections_and_are_unique() {
    let text = promises();
    let mut sections = BTreeSet::new();
    let mut section: Option<u32> = None;
    let mut seen = BTreeSet::new();
    for (i, line) in text.lines().enumerate() {
        let at = i + 1;
        if let Some(heading) = line.strip_prefix("## ") {
            let n = heading.split_whitespace().next().unwrap_or("");
            let n: u32 = n
                .parse()
                .unwrap_or_else(|_| panic!("line {at}: section heading without a number: {line}"));
            assert!(sections.insert(n), "line {at}: section {n} appears twice");
            section = Some(n);
            continue;
        }
        // A promise is a list item whose first word starts with a digit.
        let Some(item) = line.strip_prefix("- ") else {
            continue;
        };
        let number = item.split_whitespace().next().unwrap_or("");
        if !number.starts_with(|c: char| c.is_ascii_digit()) {
            continue;
        }
        assert!(
            is_promise_number(number),
            "line {at}: promise number {number} is not of the form N.M"
        );
        let (n, _) = number.split_once('.').expect("checked above");
        let n: u32 = n.parse().expect("checked above");
        assert_eq!(
            section,
            Some(n),
            "line {at}: promise {number} is not under a `## {n} ` section heading"
        );
        assert!(
            seen.insert(number.to_owned()),
            "line {at}: promise {number} appears twice"
        );
    }
    assert!(!seen.is_empty(), "docs/promises.md lists no promises");
}

//! Keeps docs/conformance.md true: every promise number of the spec has a row, every
//! row's TCK case exists and carries the row's number, every store-specific test named
//! there exists, and a row without a test says "gap".

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// The spec lives in `shared/` beside the checkout (`MQLITE_SHARED` names another place).
fn spec_path() -> PathBuf {
    let shared = std::env::var_os("MQLITE_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("../shared"));
    let spec = shared.join("spec/conformance.md");
    assert!(
        spec.is_file(),
        "{} not found: the conformance spec is read from shared/ beside the checkout \
         (set MQLITE_SHARED to its folder)",
        spec.display()
    );
    spec
}

/// Promise numbers of the spec: lines `- N.M ...`.
fn spec_numbers() -> BTreeSet<String> {
    read(&spec_path())
        .lines()
        .filter_map(|l| l.strip_prefix("- "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.split('.').count() == 2 && n.split('.').all(|p| p.parse::<u32>().is_ok()))
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
    let missing: Vec<_> = spec_numbers().difference(&rows).cloned().collect();
    assert!(
        missing.is_empty(),
        "promises without a row in docs/conformance.md: {missing:?}"
    );
    let unknown: Vec<_> = rows.difference(&spec_numbers()).cloned().collect();
    assert!(
        unknown.is_empty(),
        "rows for promises the spec does not have: {unknown:?}"
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

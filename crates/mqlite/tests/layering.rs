//! The workspace's layering, read from `cargo metadata` (normal dependencies only): the
//! contract depends on no crate of ours, nor does the SQLite VFS; the store kit and the
//! engine only on the contract; a store on the contract, the kit and the SQL flows (the
//! SQLite store also on its VFS), never on the engine, an engine user (the facade, the
//! broker, the CLI) or another store; the broker and the CLI go through the facade
//! alone.

use std::collections::{BTreeMap, BTreeSet};

/// Each workspace crate and the workspace crates it depends on (not dev, not build).
fn layering() -> BTreeMap<String, BTreeSet<String>> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root)
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let mut crates = BTreeMap::new();
    for p in meta["packages"].as_array().expect("packages") {
        let deps = p["dependencies"]
            .as_array()
            .expect("dependencies")
            .iter()
            .filter(|d| d["kind"].is_null())
            .filter_map(|d| d["name"].as_str())
            .filter(|n| n.starts_with("mqlite"))
            .map(str::to_owned)
            .collect();
        crates.insert(p["name"].as_str().expect("a name").to_owned(), deps);
    }
    crates
}

fn deps<'a>(all: &'a BTreeMap<String, BTreeSet<String>>, name: &str) -> &'a BTreeSet<String> {
    all.get(name).unwrap_or_else(|| panic!("no crate {name}"))
}

#[test]
fn contract_kit_engine_and_stores_are_layered_and_the_broker_goes_through_the_facade() {
    let all = layering();
    let only = |name: &str, allowed: &[&str]| {
        let wrong: Vec<_> = deps(&all, name)
            .iter()
            .filter(|d| !allowed.contains(&d.as_str()))
            .collect();
        assert!(wrong.is_empty(), "{name} depends on {wrong:?}");
    };
    only("mqlite-contract", &[]);
    only("mqlite-sqlite-vfs", &[]);
    only("mqlite-kit", &["mqlite-contract"]);
    only("mqlite-engine", &["mqlite-contract"]);
    only("mqlite-sql", &["mqlite-contract", "mqlite-kit"]);
    // The broker and the CLI go through the facade alone.
    only("mqlite-broker", &["mqlite"]);
    only("mqlite-cli", &["mqlite", "mqlite-broker"]);
    let stores: Vec<&String> = all
        .keys()
        .filter(|n| n.starts_with("mqlite-store-"))
        .collect();
    assert!(stores.len() >= 4, "{stores:?}");
    for store in &stores {
        // The template store stands on the SQLite store: it is where a new store
        // starts, each method handed to a working store until replaced.
        let mut allowed = vec!["mqlite-contract", "mqlite-kit", "mqlite-sql"];
        if store.as_str() == "mqlite-store-template" {
            allowed.push("mqlite-store-sqlite");
        }
        // The SQLite store opens its connection through the WAL-gathering VFS.
        if store.as_str() == "mqlite-store-sqlite" {
            allowed.push("mqlite-sqlite-vfs");
        }
        only(store, &allowed);
    }
}

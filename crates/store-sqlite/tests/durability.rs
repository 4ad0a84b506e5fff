//! 10.4 Durability is a knob: `synchronous=NORMAL` by default, FULL through the open
//! options or `MQLITE_SYNC=full`.

use mqlite_store_sqlite::{SqliteOptions, SqliteStore, Synchronous};

async fn synchronous_of(options: SqliteOptions) -> i64 {
    let store = SqliteStore::open(options).await.expect("open");
    let level = store.query_i64("PRAGMA synchronous").await.expect("pragma");
    store_close(store).await;
    level
}

async fn store_close(store: SqliteStore) {
    use mqlite_contract::Store;
    store.close().await;
}

/// NORMAL (1) by default; FULL (2), OFF (0) or EXTRA (3) when the options ask; in WAL
/// mode either way.
#[tokio::test]
async fn synchronous_normal_by_default_full_on_request() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("mq.db").to_string_lossy().into_owned();
    let normal = SqliteOptions::new(path.clone()).synchronous(Synchronous::Normal);
    assert_eq!(synchronous_of(normal).await, 1);
    let full = SqliteOptions::new(path.clone()).synchronous(Synchronous::Full);
    assert_eq!(synchronous_of(full).await, 2);
    let off = SqliteOptions::new(path.clone()).synchronous(Synchronous::Off);
    assert_eq!(synchronous_of(off).await, 0);
    let extra = SqliteOptions::new(path.clone()).synchronous(Synchronous::Extra);
    assert_eq!(synchronous_of(extra).await, 3);
    let store = SqliteStore::open(SqliteOptions::new(path))
        .await
        .expect("open");
    let wal: i64 = store
        .query_i64("SELECT count(*) FROM pragma_journal_mode WHERE journal_mode = 'wal'")
        .await
        .expect("journal mode");
    assert_eq!(wal, 1, "WAL mode");
    store_close(store).await;
}

/// `MQLITE_SYNC=full` selects FULL; anything else is the default.
#[test]
fn mqlite_sync_env_selects_full() {
    // The environment is read in a child process: changing this process's environment
    // would race with the other tests (and needs unsafe in edition 2024).
    let exe = std::env::current_exe().expect("exe");
    for (value, expected) in [
        ("full", "Full"),
        ("FULL", "Full"),
        ("normal", "Normal"),
        ("off", "Off"),
        ("Extra", "Extra"),
        ("x", "Normal"),
    ] {
        let out = std::process::Command::new(&exe)
            .args([
                "--ignored",
                "print_sync_from_env",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("MQLITE_SYNC", value)
            .output()
            .expect("child");
        let stdout = String::from_utf8_lossy(&out.stdout);
        // libtest may print `test print_sync_from_env ... ` on the same line first.
        let lines: Vec<&str> = stdout
            .lines()
            .filter_map(|l| l.find("SYNC=").map(|at| l[at..].trim_end()))
            .collect();
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "the child should run one test and pass; status {}\n--- stdout\n{stdout}\n\
             --- stderr\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            lines,
            [format!("SYNC={value}->{expected}")],
            "MQLITE_SYNC={value} should give {expected}: {stdout}"
        );
    }
}

/// The child half of `mqlite_sync_env_selects_full`: prints the `MQLITE_SYNC` it was
/// given and the level `Synchronous::from_env` read from it.
#[test]
#[ignore = "the child half of mqlite_sync_env_selects_full, which runs it"]
fn print_sync_from_env() {
    let value = std::env::var("MQLITE_SYNC")
        .expect("run by mqlite_sync_env_selects_full, with MQLITE_SYNC set");
    // A line of its own: libtest has already printed `test print_sync_from_env ... `.
    println!("\nSYNC={value}->{:?}", Synchronous::from_env());
}

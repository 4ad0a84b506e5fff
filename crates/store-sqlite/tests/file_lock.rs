//! One writer per database file (promise 10.1): a second open, under any spelling of the
//! path and from this process or another, fails fast with `DbLocked` until the first
//! store closes.
//!
//! The cross-process cases re-execute this test binary with `--ignored --exact
//! child_tries_to_open`: that entry point is `#[ignore]`d in a normal run and, in the
//! child, opens the path in `MQLITE_LOCK_CHILD_DB` and prints one `CHILD_RESULT=...` line
//! for the parent to assert.

use std::path::Path;
use std::process::Command;

use mqlite_contract::{Error, ManualClock, Store};
use mqlite_store_sqlite::{SqliteOptions, SqliteStore};

const CHILD_ENV: &str = "MQLITE_LOCK_CHILD_DB";

async fn open(location: &Path) -> mqlite_contract::Result<SqliteStore> {
    let clock = ManualClock::new(1_700_000_000_000).shared();
    SqliteStore::open(SqliteOptions::new(location.to_str().expect("utf-8 path")).clock(clock)).await
}

/// Fails unless opening `location` is refused with `DbLocked`.
async fn assert_locked(location: &Path) {
    match open(location).await {
        Err(Error::DbLocked { .. }) => {}
        Err(other) => panic!("{}: expected DbLocked, got {other:?}", location.display()),
        Ok(store) => {
            store.close().await;
            panic!(
                "{}: a second writer opened a locked database",
                location.display()
            );
        }
    }
}

/// A second open of the same path in the same process is refused (10.1).
#[tokio::test]
async fn second_open_in_same_process_is_db_locked() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("mq.db");
    let first = open(&path).await.expect("first open");
    assert_locked(&path).await;
    first.close().await;
}

/// Other spellings of the same file collide: `./`, a symlinked file, a symlinked
/// directory (10.1).
#[tokio::test]
async fn other_spellings_of_the_path_are_db_locked() {
    let dir = tempfile::tempdir().expect("temp dir");
    let real_dir = dir.path().join("data");
    std::fs::create_dir(&real_dir).expect("data dir");
    let path = real_dir.join("mq.db");
    let first = open(&path).await.expect("first open");

    assert_locked(&real_dir.join(".").join("mq.db")).await;

    let link = real_dir.join("link.db");
    std::os::unix::fs::symlink(&path, &link).expect("file symlink");
    assert_locked(&link).await;

    let dir_link = dir.path().join("data-link");
    std::os::unix::fs::symlink(&real_dir, &dir_link).expect("dir symlink");
    assert_locked(&dir_link.join("mq.db")).await;

    first.close().await;
}

/// A symlink made before the database exists still names the same database: whichever
/// spelling opens first creates the file, and the other spelling must collide (10.1).
#[tokio::test]
async fn symlink_to_a_database_not_yet_created_is_db_locked() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("mq.db");
    let link = dir.path().join("link.db");
    std::os::unix::fs::symlink(&path, &link).expect("dangling symlink");

    let first = open(&link).await.expect("open through the dangling link");
    assert!(path.exists(), "opening through the link created the target");
    assert_locked(&path).await;
    first.close().await;
}

/// A hard link is another name for the same file, in the same directory or another: it
/// collides (10.1). Without that, SQLite would open the file a second time under another
/// name, with its own `-wal` file.
#[tokio::test]
async fn hard_link_in_same_process_is_db_locked() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (path, link) = hard_linked_pair(dir.path()).await;

    let first = open(&path).await.expect("first open");
    assert_locked(&link).await;
    first.close().await;

    // The other way round: the link opens first, the original name is refused.
    let first = open(&link).await.expect("open through the hard link");
    assert_locked(&path).await;
    first.close().await;
}

/// Creates a database at `<dir>/a/mq.db` and a hard link to it at `<dir>/b/link.db`.
async fn hard_linked_pair(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    for sub in ["a", "b"] {
        std::fs::create_dir(dir.join(sub)).expect("sub dir");
    }
    let path = dir.join("a").join("mq.db");
    open(&path)
        .await
        .expect("create the database")
        .close()
        .await;
    let link = dir.join("b").join("link.db");
    std::fs::hard_link(&path, &link).expect("hard link");
    (path, link)
}

/// Once the holder closes, the database opens again (10.1).
#[tokio::test]
async fn open_succeeds_after_close() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("mq.db");
    let first = open(&path).await.expect("first open");
    first.close().await;
    let second = open(&path).await.expect("open after close");
    second.close().await;
}

/// Runs this test binary as a child that tries to open `db`; returns its result line.
async fn run_child(db: &Path) -> String {
    let exe = std::env::current_exe().expect("current exe");
    let db = db.to_owned();
    // Waiting on a process blocks, so it happens off the executor.
    let output = tokio::task::spawn_blocking(move || {
        Command::new(exe)
            .args([
                "--ignored",
                "child_tries_to_open",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, &db)
            .output()
            .expect("run child")
    })
    .await
    .expect("join child runner");
    let stdout = String::from_utf8_lossy(&output.stdout);
    // libtest may print `test child_tries_to_open ... ` on the same line first.
    let results: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.find("CHILD_RESULT=").map(|at| l[at..].trim_end()))
        .collect();
    assert!(
        output.status.success() && results.len() == 1 && stdout.contains("1 passed"),
        "the child should run one test, pass and print one CHILD_RESULT line; status {}\n\
         --- stdout\n{stdout}\n--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    results[0].to_owned()
}

/// Another process is refused while this one holds the database, and opens it after
/// this one closes (10.1).
#[tokio::test]
async fn another_process_is_db_locked_until_close() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("mq.db");
    let held = open(&path).await.expect("parent open");
    assert_eq!(run_child(&path).await, "CHILD_RESULT=db_locked");
    held.close().await;
    assert_eq!(run_child(&path).await, "CHILD_RESULT=opened");
}

/// Another process opening a hard link to the database is refused too, and opens it
/// after this one closes (10.1): the two names would otherwise give two `-wal` files.
#[tokio::test]
async fn hard_link_in_another_process_is_db_locked_until_close() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (path, link) = hard_linked_pair(dir.path()).await;
    let held = open(&path).await.expect("parent open");
    assert_eq!(run_child(&link).await, "CHILD_RESULT=db_locked");
    held.close().await;
    assert_eq!(run_child(&link).await, "CHILD_RESULT=opened");
}

/// The child half of the cross-process tests, run only by [`run_child`]: it opens the
/// database named by `MQLITE_LOCK_CHILD_DB` and prints what happened.
#[tokio::test]
#[ignore = "the child half of the cross-process tests; run_child runs it"]
async fn child_tries_to_open() {
    let db = std::env::var_os(CHILD_ENV)
        .unwrap_or_else(|| panic!("run by run_child, with {CHILD_ENV} set to the database"));
    let line = match open(Path::new(&db)).await {
        Ok(store) => {
            store.close().await;
            "opened".to_owned()
        }
        // From another process, the refusal names another process as the holder.
        Err(Error::DbLocked {
            holder: mqlite_contract::LockHolder::AnotherProcess,
            ..
        }) => "db_locked".to_owned(),
        Err(other) => format!("error:{other}"),
    };
    // A line of its own: libtest has already printed `test child_tries_to_open ... `.
    println!("\nCHILD_RESULT={line}");
}

/// Dropping every handle without `close` and reopening at once just works: the new open
/// waits for the dropped store to let the file go. 100 times in a row, every send kept.
#[tokio::test]
async fn reopen_right_after_a_drop_waits_for_the_release() {
    use mqlite_contract::{OutMessage, QueueConfig};
    use mqlite_engine::{Engine, EngineOptions};
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("mq.db");
    for i in 0..100 {
        let store = open(&path)
            .await
            .unwrap_or_else(|e| panic!("reopen {i}: {e}"));
        let mq = Engine::with_store(store, EngineOptions::default())
            .await
            .expect("engine");
        mq.create_queue("q", QueueConfig::default())
            .await
            .expect("queue");
        mq.send("q", OutMessage::new(format!("m{i}")))
            .await
            .expect("send");
        drop(mq);
    }
    let store = open(&path).await.expect("last reopen");
    let mq = Engine::with_store(store, EngineOptions::default())
        .await
        .expect("engine");
    assert_eq!(mq.stats("q").await.expect("stats").total, 100);
    mq.close().await;
}

/// A second open while the first engine is alive is refused at once, and the message
/// says the holder is this process and what to do.
#[tokio::test]
async fn a_live_holder_in_this_process_is_named() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("mq.db");
    let first = open(&path).await.expect("first open");
    match open(&path).await {
        Err(
            e @ Error::DbLocked {
                holder: mqlite_contract::LockHolder::ThisProcess,
                ..
            },
        ) => {
            assert!(e.to_string().contains("clone the Engine"), "{e}");
        }
        other => panic!("expected DbLocked by this process, got {other:?}"),
    }
    first.close().await;
}

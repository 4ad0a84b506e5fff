//! Stores opened by location through the registry: the run-time engine works end to
//! end, and a location the registry cannot serve fails with a message that says what
//! to do.

use mqlite::{Error, Location, OutMessage, QueueConfig, SqliteStore, Store};

/// A file path, `sqlite:` and `:memory:` open the SQLite store behind the run-time
/// engine, which runs the whole send / receive / complete cycle, and the outbox by
/// naming the concrete store.
#[tokio::test]
async fn locations_open_the_sqlite_store_at_run_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("mq.db").to_string_lossy().into_owned();
    let other = dir.path().join("other.db").to_string_lossy().into_owned();
    for location in [
        file.clone(),
        format!("sqlite:{other}"),
        ":memory:".to_owned(),
    ] {
        let mq = mqlite::open(&location).await.expect("open by location");
        assert_eq!(mq.store().backend(), "sqlite", "{location}");
        mq.create_queue("q", QueueConfig::default())
            .await
            .expect("queue");
        let seq = mq
            .tx::<SqliteStore, _, _>(async |tx| {
                tx.native()
                    .sql()?
                    .execute_batch("CREATE TABLE IF NOT EXISTS t(x INTEGER)")
                    .map_err(|e| Error::backend("sqlite", e))?;
                tx.send("q", OutMessage::new("in the outbox")).await
            })
            .await
            .expect("outbox through the run-time engine");
        let m = mq
            .receive_one("q")
            .await
            .expect("receive")
            .expect("a message");
        assert_eq!((m.seq, m.body()), (seq, &b"in the outbox"[..]));
        mq.complete("q", &m).await.expect("complete");
        let status = mq.status().await.expect("status");
        assert_eq!(status.schema_token, mqlite_sql::SCHEMA_TOKEN);
        mq.close().await;
    }
    // The file location names the same database as its `sqlite:` spelling would.
    let again = mqlite::open(&format!("sqlite://{file}"))
        .await
        .expect("reopen");
    assert_eq!(again.list_queues().await.expect("list").len(), 1);
    again.close().await;
}

/// An unknown scheme is refused before anything is touched, with the forms understood.
#[tokio::test]
async fn unknown_scheme_says_what_to_do() {
    for location in ["postgres://db.example/q", "s3:bucket/q", ""] {
        match mqlite::open(location).await {
            Err(Error::InvalidArgument(msg)) => {
                assert!(msg.contains("file path"), "{location}: {msg}");
                assert!(msg.contains(":memory:"), "{location}: {msg}");
            }
            other => panic!("{location}: expected InvalidArgument, got {other:?}"),
        }
    }
}

/// Without the `libsql` feature, a libSQL location names the store and the feature
/// that brings it in.
#[cfg(not(feature = "libsql"))]
#[tokio::test]
async fn libsql_without_its_feature_names_the_feature() {
    for location in ["libsql://db.example", "https://db.example"] {
        match mqlite::open(location).await {
            Err(Error::InvalidArgument(msg)) => {
                assert!(msg.contains("libsql store"), "{msg}");
                assert!(msg.contains("`libsql` feature"), "{msg}");
            }
            other => panic!("{location}: expected InvalidArgument, got {other:?}"),
        }
    }
}

/// With the `libsql` feature, a libSQL location whose server is out of reach is a
/// transient backend error (worth retrying), never a panic or a hang.
#[cfg(feature = "libsql")]
#[tokio::test]
async fn libsql_out_of_reach_is_a_transient_error() {
    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    match mqlite::open(&format!("http://127.0.0.1:{port}")).await {
        Err(e) => assert!(e.is_transient(), "{e:?}"),
        Ok(_) => panic!("opened a store with no server"),
    }
}

/// The parser keeps paths paths: a drive letter, a relative path, a path with a colon
/// after a slash.
#[test]
fn paths_without_a_scheme_are_sqlite_files() {
    for (location, expected) in [
        ("app.db", ("sqlite", "app.db")),
        ("C:\\data\\app.db", ("sqlite", "C:\\data\\app.db")),
        ("./dir/a:b.db", ("sqlite", "./dir/a:b.db")),
        ("sqlite:app.db", ("sqlite", "app.db")),
        ("file:///srv/app.db", ("sqlite", "/srv/app.db")),
        (":memory:", ("sqlite", ":memory:")),
    ] {
        let parsed = Location::parse(location).expect(location);
        assert_eq!((parsed.store(), parsed.target()), expected, "{location}");
        assert_eq!(
            parsed.local_file().is_some(),
            location != ":memory:",
            "{location}"
        );
    }
}

/// Without the `redb` feature, a `redb:` location names the store and the feature that
/// brings it in.
#[cfg(not(feature = "redb"))]
#[tokio::test]
async fn redb_without_its_feature_names_the_feature() {
    match mqlite::open("redb:/tmp/q.redb").await {
        Err(Error::InvalidArgument(msg)) => {
            assert!(msg.contains("redb store"), "{msg}");
            assert!(msg.contains("`redb` feature"), "{msg}");
        }
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
}

/// With the `redb` feature, a `redb:` location opens the redb store behind the
/// run-time engine, which runs the send / receive / complete cycle.
#[cfg(feature = "redb")]
#[tokio::test]
async fn redb_location_opens_the_redb_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let location = format!("redb:{}", dir.path().join("mq.redb").display());
    let mq = mqlite::open(&location).await.expect("open by location");
    assert_eq!(mq.store().backend(), "redb");
    mq.create_queue("q", QueueConfig::default())
        .await
        .expect("queue");
    mq.send("q", OutMessage::new("hi")).await.expect("send");
    let m = mq
        .receive_one("q")
        .await
        .expect("receive")
        .expect("a message");
    mq.complete("q", &m).await.expect("complete");
    mq.close().await;
}

/// The redb and libSQL stores take their own schemes: a redb location's target is the
/// path after `redb:`, a libSQL URL is handed over whole.
#[cfg(all(feature = "redb", feature = "libsql"))]
#[test]
fn each_store_takes_its_own_schemes() {
    for (location, expected, local) in [
        ("redb:q.redb", ("redb", "q.redb"), true),
        (
            "libsql://db.example",
            ("libsql", "libsql://db.example"),
            false,
        ),
        (
            "HTTPS://db.example",
            ("libsql", "https://db.example"),
            false,
        ),
    ] {
        let parsed = Location::parse(location).expect(location);
        assert_eq!((parsed.store(), parsed.target()), expected, "{location}");
        assert_eq!(parsed.local_file().is_some(), local, "{location}");
    }
    let names: Vec<&str> = mqlite::stores().0.iter().map(|s| s.name).collect();
    assert_eq!(names, ["sqlite", "redb", "libsql"]);
}

//! Every common misuse gets a typed error whose message names the cause (and, where
//! there is one, what to do), one row each: the wrong file, the wrong place, the file
//! held twice, each way a lock token stops working, and the call that is NOT an error
//! (a repeated completion replays Ok).

use std::time::Duration;

use mqlite::{
    Engine, Error, LockHolder, LockLostReason, ManualClock, OutMessage, QueueConfig, SqliteOptions,
    SqliteStore,
};

/// One misuse: what it is, what happened, and what the error must be.
struct Row {
    what: &'static str,
    got: Result<(), Error>,
    variant: fn(&Error) -> bool,
    names: &'static str,
}

fn check(rows: Vec<Row>) {
    let mut failures = Vec::new();
    for row in rows {
        match &row.got {
            Err(e) if (row.variant)(e) && e.to_string().contains(row.names) => {}
            other => failures.push(format!(
                "{}: expected an error naming {:?}, got {other:?} ({})",
                row.what,
                row.names,
                other
                    .as_ref()
                    .err()
                    .map(ToString::to_string)
                    .unwrap_or_default()
            )),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

async fn open_at(path: &std::path::Path, clock: &ManualClock) -> Result<Engine, Error> {
    let store = SqliteStore::open(
        SqliteOptions::new(path.to_string_lossy().into_owned()).clock(clock.shared()),
    )
    .await?;
    Engine::with_store(
        store,
        mqlite::EngineOptions {
            background: false,
            ..Default::default()
        },
    )
    .await
}

#[tokio::test]
async fn every_misuse_is_a_typed_error_that_names_its_cause() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = ManualClock::new(1_700_000_000_000);
    let text_file = dir.path().join("notes.txt");
    std::fs::write(
        &text_file,
        "these are my notes, not a database\n".repeat(200),
    )
    .expect("write");
    let old_layout = dir.path().join("old.db");
    {
        let conn = mqlite::rusqlite::Connection::open(&old_layout).expect("create");
        conn.execute_batch(
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
             INSERT INTO meta VALUES ('schema_token', 'mqlite-rs/1');",
        )
        .expect("an old file");
    }
    let db = dir.path().join("mq.db");
    let mq = open_at(&db, &clock).await.expect("open");
    mq.create_queue("q", QueueConfig::default())
        .await
        .expect("queue");
    mq.create_queue("other", QueueConfig::default())
        .await
        .expect("queue");
    let grouped = QueueConfig {
        ordering_mode: mqlite::OrderingMode::GroupFifo,
        ..Default::default()
    };
    mq.create_queue("groups", grouped).await.expect("queue");
    mq.send_batch(
        "q",
        (0..4).map(|i| OutMessage::new(format!("m{i}"))).collect(),
    )
    .await
    .expect("send");
    let held = mq
        .receive("q", mqlite::ReceiveOptions::batch(4))
        .await
        .expect("receive");
    // Completing twice is not a misuse: the receipt replays Ok (3.2).
    mq.complete("q", &held[0]).await.expect("complete");
    mq.complete("q", &held[0])
        .await
        .expect("an identical repeat replays Ok");
    let unit = |r: Result<i64, Error>| r.map(|_| ());

    let rows = vec![
        Row {
            what: "a text file",
            got: open_at(&text_file, &clock).await.map(|_| ()),
            variant: |e| matches!(e, Error::NotADatabase { .. }),
            names: "not a SQLite database",
        },
        Row {
            what: "a directory",
            got: open_at(dir.path(), &clock).await.map(|_| ()),
            variant: |e| matches!(e, Error::NotADatabase { .. }),
            names: "is a directory",
        },
        Row {
            what: "a file of an earlier layout",
            got: open_at(&old_layout, &clock).await.map(|_| ()),
            variant: |e| matches!(e, Error::SchemaVersionMismatch { .. }),
            names: "mqlite-rs/1",
        },
        Row {
            what: "a file of another layout: the way forward",
            got: open_at(&old_layout, &clock).await.map(|_| ()),
            variant: |e| matches!(e, Error::SchemaVersionMismatch { .. }),
            names: "`mqlite migrate <this file> <new file>`",
        },
        Row {
            what: "the same file opened twice in this process",
            got: open_at(&db, &clock).await.map(|_| ()),
            variant: |e| {
                matches!(
                    e,
                    Error::DbLocked {
                        holder: LockHolder::ThisProcess,
                        ..
                    }
                )
            },
            names: "clone the Engine",
        },
        Row {
            what: "a settlement naming the wrong queue",
            got: mq.complete("other", &held[1]).await,
            variant: |e| {
                matches!(
                    e,
                    Error::LockLost {
                        reason: LockLostReason::WrongQueue
                    }
                )
            },
            names: "another queue",
        },
        Row {
            what: "another verb after a completion",
            got: mq.abandon("q", &held[0], Duration::ZERO).await,
            variant: |e| {
                matches!(
                    e,
                    Error::LockLost {
                        reason: LockLostReason::Gone
                    }
                )
            },
            names: "completed",
        },
        Row {
            what: "an empty path",
            got: open_at(std::path::Path::new(""), &clock).await.map(|_| ()),
            variant: |e| matches!(e, Error::InvalidArgument(_)),
            names: ":memory: for a private in-memory database",
        },
        Row {
            what: "an empty location",
            got: mqlite::open("").await.map(|_| ()),
            variant: |e| matches!(e, Error::InvalidArgument(_)),
            names: "`:memory:`",
        },
        Row {
            what: "a path in a directory that does not exist",
            got: open_at(&dir.path().join("no/such/dir/app.db"), &clock)
                .await
                .map(|_| ()),
            variant: |e| matches!(e, Error::InvalidArgument(_)),
            names: "create it first (mkdir -p",
        },
        Row {
            what: "a send to a queue that does not exist",
            got: mq.send("nope", OutMessage::new("x")).await.map(|_| ()),
            variant: |e| matches!(e, Error::NotFound { kind: "queue", .. }),
            names: "mqlite create-queue",
        },
        Row {
            what: "a token that was never issued",
            got: mq
                .complete(
                    "q",
                    mqlite::LockRef {
                        seq: held[1].seq,
                        token: "0123456789abcdef0123456789abcdef".parse().expect("hex"),
                    },
                )
                .await,
            variant: |e| {
                matches!(
                    e,
                    Error::LockLost {
                        reason: LockLostReason::NotIssued
                    }
                )
            },
            names: "never issued",
        },
        Row {
            what: "a body over the limit",
            got: mq
                .send("q", OutMessage::new(vec![0u8; 2 << 20]))
                .await
                .map(|_| ()),
            variant: |e| matches!(e, Error::MessageTooLarge { .. }),
            names: "MQLITE_MAX_MESSAGE_BYTES",
        },
        Row {
            what: "a message without a group on a group_fifo queue",
            got: mq.send("groups", OutMessage::new("x")).await.map(|_| ()),
            variant: |e| matches!(e, Error::GroupRequired { .. }),
            names: "OutMessage::group_id",
        },
        Row {
            what: "an unknown store location",
            got: mqlite::open("mysql://db/q").await.map(|_| ()),
            variant: |e| matches!(e, Error::InvalidArgument(_)),
            names: "unknown store scheme",
        },
    ];
    check(rows);

    // Time-dependent rows: the lease runs out, then the message is delivered again.
    clock.advance(30_000);
    let expired = mq.complete("q", &held[1]).await;
    let renew_expired = unit(mq.renew("q", &held[2]).await);
    mq.run_sweeps().await.expect("sweeps");
    let not_locked = mq.defer("q", &held[2]).await;
    let again = mq
        .receive("q", mqlite::ReceiveOptions::batch(4))
        .await
        .expect("redelivery");
    assert_eq!(again.len(), 3);
    let other_token = mq.reject("q", &held[3], "late", "").await;
    check(vec![
        Row {
            what: "a settlement after the lease ran out",
            got: expired,
            variant: |e| {
                matches!(
                    e,
                    Error::LockLost {
                        reason: LockLostReason::Expired
                    }
                )
            },
            names: "expired",
        },
        Row {
            what: "a renewal after the lease ran out",
            got: renew_expired,
            variant: |e| {
                matches!(
                    e,
                    Error::LockLost {
                        reason: LockLostReason::Expired
                    }
                )
            },
            names: "renew it while the work runs",
        },
        Row {
            what: "a settlement after the reaper returned the message",
            got: not_locked,
            variant: |e| {
                matches!(
                    e,
                    Error::LockLost {
                        reason: LockLostReason::NotLocked
                    }
                )
            },
            names: "no longer locked",
        },
        Row {
            what: "a settlement by the previous holder after redelivery",
            got: other_token,
            variant: |e| {
                matches!(
                    e,
                    Error::LockLost {
                        reason: LockLostReason::OtherToken
                    }
                )
            },
            names: "delivered again",
        },
    ]);
    mq.close().await;
}

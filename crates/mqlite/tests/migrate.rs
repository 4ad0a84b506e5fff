//! Upgrades (promise 10.2): `mqlite::migrate` copies a database of a layout a release
//! wrote into a new file of the current layout, and the new file serves every message
//! as the old one would have.
//!
//! The previous layout's database is built here from its frozen DDL
//! (`crates/sql/layouts/<token>.sql`) and the rows checked in beside this test
//! (`tests/golden/<token>.rows.sql`): every queue kind and ordering mode, a topic with a
//! filtered subscription, messages in every state (a live lease with its token, a
//! deferred one, a scheduled one, a dead letter with its reason, one waiting behind its
//! group), a dedup entry, a settlement receipt, a receive attempt, an access key, an
//! inbox marker and relay intents. The rows were written by the engine of that release
//! (`MQLITE_BLESS=1 cargo test -p mqlite --test integration -- migrate::` rewrites them, and only while
//! the current layout is that one).

use std::path::{Path, PathBuf};
use std::time::Duration;

use mqlite::inbox::Inbox;
use mqlite::rusqlite::{Connection, types::ValueRef};
use mqlite::{
    Engine, EngineOptions, Error, EventIdentity, LeasesAtOpen, LockRef, ManualClock, MessageState,
    OrderingMode, OutMessage, PeekOptions, QueueConfig, ReceiveOptions, RedriveOptions, SeqNumber,
    SqliteOptions, SqliteStore,
};
use mqlite_sql::layouts::{LAYOUTS, Layout};

/// The clock the golden rows were written at.
const T0: i64 = 1_800_000_000_000;

fn rows_path(layout: &Layout) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(format!("{}.rows.sql", layout.token.replace('/', "-")))
}

/// An engine on `path` that keeps the leases it finds (as the broker does): the
/// migrated lease must still be settled by its token.
async fn open_at(path: &Path, clock: &ManualClock) -> Result<Engine, Error> {
    let store = SqliteStore::open(
        SqliteOptions::new(path.to_string_lossy().into_owned()).clock(clock.shared()),
    )
    .await?;
    Engine::with_store(
        store,
        EngineOptions {
            background: false,
            leases_at_open: LeasesAtOpen::Keep,
            ..Default::default()
        },
    )
    .await
}

/// Builds the layout's database at `path` from its frozen DDL and golden rows; returns
/// the access key's token the rows were written with.
fn build_golden(layout: &Layout, path: &Path) -> String {
    let rows = std::fs::read_to_string(rows_path(layout)).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; MQLITE_BLESS=1 writes it while {} is the current layout",
            rows_path(layout).display(),
            layout.token
        )
    });
    let conn = Connection::open(path).expect("a new file");
    conn.execute_batch("PRAGMA journal_mode = WAL")
        .expect("WAL");
    for statement in layout.statements() {
        conn.execute(&statement, [])
            .unwrap_or_else(|e| panic!("{statement}: {e}"));
    }
    conn.execute_batch(&rows).expect("the golden rows");
    rows.lines()
        .find_map(|l| l.strip_prefix("-- key token: "))
        .expect("the key's token in the rows file")
        .to_owned()
}

/// Writes the golden rows of the current layout through the engine, at [`T0`].
async fn write_golden_rows(path: &Path) -> String {
    let clock = ManualClock::new(T0);
    let mq = open_at(path, &clock).await.expect("open");
    let work = QueueConfig {
        dedup_window: Duration::from_secs(3600),
        max_delivery_count: 3,
        default_ttl: Duration::from_secs(30 * 24 * 3600),
        ..Default::default()
    };
    mq.create_queue("work", work).await.expect("work");
    let next = async |attempt: Option<&str>| {
        let options = ReceiveOptions {
            attempt_id: attempt.map(str::to_owned),
            ..Default::default()
        };
        mq.receive("work", options)
            .await
            .expect("receive")
            .remove(0)
    };
    // Completed (its receipt and its receive attempt stay), dead-lettered, deferred,
    // locked, active, scheduled: one at a time, so each receive takes the one just sent.
    mq.send("work", OutMessage::new("done"))
        .await
        .expect("send");
    let m = next(Some("attempt-1")).await;
    mq.complete("work", &m).await.expect("complete");
    mq.send("work", OutMessage::new("poison"))
        .await
        .expect("send");
    let m = next(None).await;
    mq.reject("work", &m, "BadInput", "field x is missing")
        .await
        .expect("reject");
    mq.send("work", OutMessage::new("later"))
        .await
        .expect("send");
    let m = next(None).await;
    mq.defer("work", &m).await.expect("defer");
    mq.send("work", OutMessage::new("leased"))
        .await
        .expect("send");
    next(None).await;
    let mut active = OutMessage::new("waiting for a worker")
        .with_id("order-1")
        .with_subject("order.created")
        .with_property("tenant", "acme");
    active.content_type = Some("text/plain".into());
    active.correlation_id = Some("c-1".into());
    active.reply_to = Some("replies".into());
    mq.send("work", active).await.expect("send");
    mq.schedule("work", OutMessage::new("at T0+60s"), T0 + 60_000)
        .await
        .expect("schedule");

    // Group FIFO with an event identity: the head leased and marked in the inbox, the
    // next one waiting behind it.
    let orders = QueueConfig {
        ordering_mode: OrderingMode::GroupFifo,
        ..Default::default()
    };
    mq.create_queue("orders", orders).await.expect("orders");
    for id in ["e-1", "e-2"] {
        let m = OutMessage::new(format!("order {id}"))
            .with_group("customer-7")
            .with_event(EventIdentity::new("https://shop.example", id).with_type("order"));
        mq.send("orders", m).await.expect("send");
    }
    let head = mq
        .receive_one("orders")
        .await
        .expect("receive")
        .expect("the head");
    Inbox::new(mq.clone())
        .process("projection", &head, async |_t| Ok::<_, Error>(()))
        .await
        .expect("the inbox marker");
    mq.create_queue(
        "strict",
        QueueConfig {
            ordering_mode: OrderingMode::StrictFifo,
            ..Default::default()
        },
    )
    .await
    .expect("strict");
    mq.send("strict", OutMessage::new("first in line"))
        .await
        .expect("send");

    // A topic with a filtered subscription; one published message reaches it.
    mq.create_topic("events").await.expect("topic");
    mq.subscribe(
        "events",
        "audit",
        r#"subject == "audit""#,
        QueueConfig::default(),
    )
    .await
    .expect("subscribe");
    mq.publish(
        "events",
        vec![OutMessage::new("audited").with_subject("audit")],
        Default::default(),
    )
    .await
    .expect("publish");

    // A relay intent, pending.
    mq.tx(async |t| {
        let m = OutMessage::new("relayed")
            .with_event(EventIdentity::new("https://shop.example", "r-1"));
        t.relay("elsewhere", m).await
    })
    .await
    .expect("relay intent");

    let key = mq
        .create_key(
            Some("0123456789abcdef0123456789abcdef"),
            "deploy",
            &[mqlite::Permission::Send],
            0,
        )
        .await
        .expect("key");
    mq.close().await;
    key.token
}

/// Every row of every mqlite table as INSERT statements, tables in creation order.
fn dump(path: &Path) -> String {
    let conn = Connection::open(path).expect("open");
    let mut tables = conn
        .prepare(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'mqlite%' \
             ORDER BY rowid",
        )
        .expect("tables");
    let tables: Vec<String> = tables
        .query_map([], |r| r.get(0))
        .expect("tables")
        .collect::<Result<_, _>>()
        .expect("tables");
    let mut out = String::new();
    for table in tables {
        let n = conn
            .prepare(&format!("SELECT * FROM \"{table}\""))
            .expect("columns")
            .column_count();
        let order: Vec<String> = (1..=n).map(|i| i.to_string()).collect();
        let mut stmt = conn
            .prepare(&format!(
                "SELECT * FROM \"{table}\" ORDER BY {}",
                order.join(", ")
            ))
            .expect("rows");
        let mut rows = stmt.query([]).expect("rows");
        while let Some(row) = rows.next().expect("row") {
            let values: Vec<String> = (0..n)
                .map(|i| match row.get_ref(i).expect("value") {
                    ValueRef::Null => "NULL".to_owned(),
                    ValueRef::Integer(v) => v.to_string(),
                    ValueRef::Real(v) => format!("{v:?}"),
                    ValueRef::Text(t) => {
                        format!("'{}'", String::from_utf8_lossy(t).replace('\'', "''"))
                    }
                    ValueRef::Blob(b) => {
                        let hex: String = b.iter().map(|x| format!("{x:02X}")).collect();
                        format!("X'{hex}'")
                    }
                })
                .collect();
            out.push_str(&format!(
                "INSERT INTO \"{table}\" VALUES ({});\n",
                values.join(", ")
            ));
        }
    }
    out
}

/// `MQLITE_BLESS=1`: rewrites the golden rows of the current layout (only while it is
/// a released one: a released layout's rows are never rewritten by a later engine).
#[tokio::test]
async fn bless_golden_rows() {
    if std::env::var_os("MQLITE_BLESS").is_none_or(|v| v != "1") {
        return;
    }
    let Some(layout) = mqlite_sql::layouts::layout(mqlite_sql::SCHEMA_TOKEN) else {
        panic!("the current layout is not a released one: its rows are not golden yet");
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("golden.db");
    let token = write_golden_rows(&path).await;
    let text = format!(
        "-- The rows of a {} database, written by its engine at clock {T0} (see\n\
         -- crates/mqlite/tests/migrate.rs; never rewritten once a newer layout exists).\n\
         -- key token: {token}\n{}",
        layout.token,
        dump(&path)
    );
    std::fs::create_dir_all(rows_path(layout).parent().expect("dir")).expect("mkdir");
    std::fs::write(rows_path(layout), text).expect("write");
}

/// The messages of `path` as the old layout's columns see them, the state read as
/// `state` (the layout's mapping of an old file's column onto the current one).
fn messages(path: &Path, state: &str) -> Vec<Vec<String>> {
    let conn = Connection::open(path).expect("open");
    let mut stmt = conn
        .prepare(&format!(
            "SELECT queue, id, {state}, line, waiting, enqueued_at, visible_at, locked_until, \
             lock_token, delivery_count, expires_at, dead_lettered_at, hex(body), message_id, \
             group_id, subject, correlation_id, reply_to, content_type, properties, \
             dead_letter_reason, dead_letter_description, event FROM mqlite_messages ORDER BY id",
        ))
        .expect("messages");
    let n = stmt.column_count();
    stmt.query_map([], |r| {
        (0..n)
            .map(|i| {
                r.get::<_, mqlite::rusqlite::types::Value>(i)
                    .map(|v| format!("{v:?}"))
            })
            .collect::<Result<Vec<_>, _>>()
    })
    .expect("query")
    .collect::<Result<_, _>>()
    .expect("rows")
}

fn count(path: &Path, table: &str) -> u64 {
    let conn = Connection::open(path).expect("open");
    conn.query_row(&format!("SELECT count(*) FROM \"{table}\""), [], |r| {
        r.get::<_, i64>(0)
    })
    .expect("count") as u64
}

/// The golden database of every released layout migrates: every table's rows arrive,
/// every message keeps its state, lease, token and content, and the new file serves
/// them — the lease settles with its old token, a receipt answers a repeated
/// settlement, the dedup window collapses a repeat, the schedule fires, the dead letter
/// redrives, the key authenticates, the subscription delivers.
#[tokio::test]
async fn the_golden_previous_layout_migrates_and_serves() {
    for layout in LAYOUTS {
        let dir = tempfile::tempdir().expect("tempdir");
        let (old, new) = (dir.path().join("old.db"), dir.path().join("new.db"));
        let token = build_golden(layout, &old);

        // The current engine refuses the old file when the layouts differ, naming the way.
        if layout.token != mqlite_sql::SCHEMA_TOKEN {
            let clock = ManualClock::new(T0);
            let refused = open_at(&old, &clock).await.expect_err("another layout");
            assert!(refused.to_string().contains("mqlite migrate"), "{refused}");
        }

        let report = mqlite::migrate(&old, &new).expect("migrate");
        assert_eq!(report.from, layout.token);
        assert_eq!(report.to, mqlite_sql::SCHEMA_TOKEN);
        for (table, rows) in &report.tables {
            let old_rows = count(&old, table) - u64::from(table == "mqlite_meta");
            assert_eq!(*rows, old_rows, "{table}");
        }
        for table in [
            "mqlite_messages",
            "mqlite_dedup",
            "mqlite_receipts",
            "mqlite_attempts",
            "mqlite_access_keys",
            "mqlite_inbox",
            "mqlite_relay",
            "mqlite_subscriptions",
        ] {
            assert!(report.rows(table) > 0, "the golden rows exercise {table}");
        }
        let old_state = layout.column("mqlite_messages", "state").unwrap_or("state");
        assert_eq!(
            messages(&old, old_state),
            messages(&new, "state"),
            "every message as it was"
        );

        let clock = ManualClock::new(T0 + 1_000);
        let mq = open_at(&new, &clock).await.expect("the new file opens");
        let peek = |queue: &'static str| {
            let mq = mq.clone();
            async move {
                mq.peek(
                    queue,
                    PeekOptions {
                        max: 100,
                        ..Default::default()
                    },
                )
                .await
                .expect("peek")
            }
        };
        let work = peek("work").await;
        let in_state = |s: MessageState| {
            work.iter()
                .find(|m| m.state == s)
                .expect("a message")
                .clone()
        };
        let (leased, deferred, dead) = (
            in_state(MessageState::Locked),
            in_state(MessageState::Deferred),
            in_state(MessageState::DeadLettered),
        );
        assert_eq!(dead.dead_letter_reason.as_deref(), Some("BadInput"));

        // The lease settles with the token it was issued under the old layout.
        let old_token = {
            let conn = Connection::open(&old).expect("open");
            conn.query_row(
                "SELECT lock_token FROM mqlite_messages WHERE id = ?1",
                [leased.seq.0],
                |r| r.get::<_, String>(0),
            )
            .expect("the old token")
        };
        let lock = LockRef {
            seq: leased.seq,
            token: old_token.parse().expect("a token"),
        };
        mq.complete("work", lock)
            .await
            .expect("the old lease settles");
        mq.complete("work", lock)
            .await
            .expect("and its receipt answers a repeat");

        // The group's head is still leased: the next one waits behind it.
        assert!(mq.receive_one("orders").await.expect("receive").is_none());

        // The message sent before the migration is delivered with everything it carried.
        let m = mq
            .receive_one("work")
            .await
            .expect("receive")
            .expect("the active one");
        assert_eq!(m.content.body, b"waiting for a worker");
        assert_eq!(
            m.content.properties.get("tenant").map(String::as_str),
            Some("acme")
        );
        assert_eq!(m.content.reply_to.as_deref(), Some("replies"));
        mq.complete("work", &m).await.expect("complete");
        // Its producer id still collapses a repeat inside the window.
        let again = mq
            .send(
                "work",
                OutMessage::new("waiting for a worker").with_id("order-1"),
            )
            .await
            .expect("send");
        assert_eq!(again, m.seq, "the dedup entry came along");

        let got = mq
            .receive_deferred("work", &[deferred.seq])
            .await
            .expect("deferred");
        assert_eq!(got.len(), 1);
        mq.complete("work", &got[0])
            .await
            .expect("complete the deferred one");
        clock.advance(60_000);
        mq.run_sweeps().await.expect("the scheduler's pass");
        let due = mq
            .receive_one("work")
            .await
            .expect("receive")
            .expect("the scheduled one");
        assert_eq!(due.content.body, b"at T0+60s");
        assert_eq!(
            mq.redrive("work", RedriveOptions::all())
                .await
                .expect("redrive"),
            1
        );

        let key = mq
            .authenticate(&token)
            .await
            .expect("auth")
            .expect("the key");
        assert_eq!(key.name, "deploy");
        let audit = mq
            .receive_one("audit")
            .await
            .expect("receive")
            .expect("published");
        assert_eq!(audit.content.body, b"audited");
        assert_eq!(peek("strict").await.len(), 1);
        let next_seq = mq
            .send("strict", OutMessage::new("next"))
            .await
            .expect("send");
        assert!(next_seq > SeqNumber(work.iter().map(|m| m.seq.0).max().unwrap_or(0)));
        mq.close().await;
    }
}

/// What migrate refuses, each leaving the old file as it was and no new file.
#[tokio::test]
async fn migrate_refuses_what_it_cannot_copy() {
    let dir = tempfile::tempdir().expect("tempdir");
    let new = dir.path().join("new.db");
    // The whole chain, as the command prints it (a failed check's text is the source).
    let message =
        |r: Result<mqlite::MigrationReport, Error>| mqlite::error_chain(&r.expect_err("refused"));

    let missing = message(mqlite::migrate(&dir.path().join("none.db"), &new));
    assert!(missing.contains("is not a file"), "{missing}");

    let plain = dir.path().join("plain.db");
    Connection::open(&plain)
        .and_then(|c| c.execute_batch("CREATE TABLE t (x)"))
        .expect("a plain database");
    let foreign = message(mqlite::migrate(&plain, &new));
    assert!(foreign.contains("nothing to migrate"), "{foreign}");

    let early = dir.path().join("early.db");
    Connection::open(&early)
        .and_then(|c| {
            c.execute_batch(
                "CREATE TABLE mqlite_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
                 INSERT INTO mqlite_meta VALUES ('schema_token', 'mqlite-rs/3');",
            )
        })
        .expect("an unreleased layout");
    let unreleased = message(mqlite::migrate(&early, &new));
    assert!(unreleased.contains("mqlite-rs/4 (v0.1.0)"), "{unreleased}");
    assert!(!new.exists(), "no new file after a refusal");

    let current = dir.path().join("current.db");
    let clock = ManualClock::new(T0);
    let mq = open_at(&current, &clock).await.expect("open");
    let held = message(mqlite::migrate(&current, &new));
    assert!(held.contains("already open"), "{held}");
    mq.close().await;
    std::fs::write(&new, b"").expect("a file in the way");
    let exists = message(mqlite::migrate(&current, &new));
    assert!(exists.contains("already exists"), "{exists}");

    // A table of mqlite's the current layout has no place for is not left behind.
    std::fs::remove_file(&new).expect("remove");
    Connection::open(&current)
        .and_then(|c| c.execute_batch("CREATE TABLE mqlite_extra (x)"))
        .expect("an extra table");
    let orphan = message(mqlite::migrate(&current, &new));
    assert!(orphan.contains("mqlite_extra has no table"), "{orphan}");
    assert!(!new.exists(), "the half-made file is removed");
}

//! What each part of mqlite's layout costs the drain of 64 (docs/benchmark.md, "The
//! drain's anatomy"): the store's own statements for a receive of 64 and a
//! complete_batch of 64, run on a plain rusqlite connection set up as the store sets up
//! its own (WAL, NORMAL, in-memory temporary storage, one plan per statement), over the
//! store's DDL as shipped and over variants of it with one part taken away or changed,
//! beside the bare drain loop that `benches/throughput.rs` measures against.
//!
//! Nothing here is a store: no writer thread, no group, no decoding into messages. It
//! times SQLite's share of the drain (the store's drain of 64 in the throughput bench
//! costs a little more, its Rust side included) and what each part of the layout adds
//! to it. The variants:
//!
//! - `shipped`: the DDL and the statements as the store runs them: pick the heads whole,
//!   lock them; then the completion's delete of the locks in no line, in a savepoint
//!   kept when it took every lock, and the receipts from the locks given, one entry per
//!   page of 32 sequence numbers (`mqlite-rs/15`);
//! - `lock_receipts`: as shipped, but a receipt entry per lock, as `mqlite-rs/14` kept
//!   them (its table and its statement);
//! - `batch_receipt`: as shipped, but one receipt row for the whole completion, keyed by
//!   a prefix its claim's tokens would share, its locks packed in one blob (a form that
//!   would keep 3.2 if a claim's tokens shared that prefix);
//! - `no_receipts`: the completion writes no receipts (promise 3.2's cost);
//! - `no_floor_trigger`: no `mqlite_seq_floor` trigger (how G1 is kept today);
//! - `no_lease_index`: no `mqlite_msg_lease` (what the reaper and peek seek);
//! - `text_state`: the state as its name, as the layouts before `mqlite-rs/14` stored it
//!   (not part of `all`: it puts back what `mqlite-rs/14` took away);
//! - `body_last`: the body as the row's last column;
//! - `all`: every one of the above at once that takes a part away or changes it, so
//!   neither `lock_receipts` nor `text_state` (which put back what a layout took away);
//! - `bare`: the bare drain loop over the bare table (`mqlite_benches::bare_drain`);
//! - `store`: the SQLite store itself through the engine, `receive` of 64 then
//!   `complete_batch` of them, as the throughput bench's `drain_64` runs it (the caller's
//!   thread, background loops off): the shipped statements plus the store's Rust side
//!   (its writer, the decoding into messages, the binding), timed whole.
//!
//! And other forms of the same statements over the shipped DDL (not part of `all`):
//!
//! - `claim_in_one`: the pick and the lock as one `UPDATE … WHERE id IN (pick) RETURNING`,
//!   the bare loop's form, each token drawn by SQLite (`randomblob(16)`);
//! - `lock_sql_token`: the lock of the picked ids bound as an `IN` list, each token drawn
//!   by SQLite and returned (`RETURNING id, lock_token`), no pair bound per row;
//! - `lock_case`: the lock's tokens by a `CASE id WHEN … THEN …` of the bound pairs, the
//!   ids as an `IN` list, where the store joins a `VALUES` list;
//! - `lock_each`, `delete_each`: the lock, or the completion's delete, as one prepared
//!   statement of one row run once per message;
//! - `no_savepoint`: the completion's delete without the savepoint it runs in (which
//!   takes it back when it took fewer than every lock);
//! - `few_indexes`: without the indexes a queue with no lines, priorities, schedules,
//!   deadlines or dead letters never reads (`mqlite_msg_line*`, `_priority`, `_due`,
//!   `_expiry`, `_dlq`): what their upkeep costs such a queue's drain.
//!
//! `--variants a,b+c` runs the ones named (`+` joins parts into one variant).
//!
//! The variants take turns, one drain each, every database its own file; each prints
//! the median per message of the pick (the rows read whole), the lock and its commit,
//! the delete, the receipts and the completion's commit, and their sum.
//!
//! `cargo run --release -p mqlite-benches --example drain_anatomy -- --rounds 1000`

use std::time::Instant;

use mqlite_contract::{
    LockRef, LockToken, OutMessage, QueueConfig, ReceiveOptions, SeqNumber, SystemClock,
};
use mqlite_engine::Engine;
use mqlite_store_sqlite::{SqliteOptions, SqliteStore};
use rusqlite::types::Value;
use rusqlite::{Connection, params_from_iter};

use mqlite_sql::claim::{LOCK_PICKED_PLAIN, PICK_HEADS};
use mqlite_sql::settle::{
    AT_ONCE, AT_ONCE_KEEP, COMPLETE_UNLINED_ROWS, RECEIPT_BUCKET_MS, RECEIPT_ROWS, receipt_pages,
};

/// Messages per drain, as in the throughput bench's `drain_64`.
const N: usize = 64;

const VARIANTS: [&str; 10] = [
    "shipped",
    "lock_receipts",
    "batch_receipt",
    "no_receipts",
    "no_floor_trigger",
    "no_lease_index",
    "text_state",
    "body_last",
    "all",
    "bare",
];

/// The store's states by the number `mqlite-rs/14` stores, from the store's own map.
fn states() -> impl Iterator<Item = (i64, &'static str)> {
    (0..6).map(|code| {
        let state = mqlite_sql::rows::state_of(code).expect("a state");
        assert_eq!(mqlite_sql::rows::state_code(state), code);
        (code, state.as_str())
    })
}

/// The parts of the layout a variant takes away or changes.
#[derive(Clone, Copy, Default)]
struct Parts {
    no_receipts: bool,
    lock_receipts: bool,
    batch_receipt: bool,
    no_trigger: bool,
    no_lease: bool,
    text_state: bool,
    body_last: bool,
    /// Another form of the lock (`claim_in_one`, `lock_sql_token`, `lock_case`,
    /// `lock_each`), or the store's.
    lock: Option<&'static str>,
    delete_each: bool,
    few_indexes: bool,
    no_savepoint: bool,
}

impl Parts {
    /// The parts `name` names, `+` between two (`all`: every one).
    fn of(name: &str) -> Parts {
        let has = |part: &str| name == "all" || name.split('+').any(|p| p == part);
        Parts {
            no_receipts: has("no_receipts"),
            lock_receipts: name.split('+').any(|p| p == "lock_receipts"),
            batch_receipt: has("batch_receipt"),
            no_trigger: has("no_floor_trigger"),
            no_lease: has("no_lease_index"),
            text_state: name.split('+').any(|p| p == "text_state"),
            body_last: has("body_last"),
            lock: ["claim_in_one", "lock_sql_token", "lock_case", "lock_each"]
                .into_iter()
                .find(|form| name.split('+').any(|p| p == *form)),
            delete_each: name.split('+').any(|p| p == "delete_each"),
            few_indexes: name.split('+').any(|p| p == "few_indexes"),
            no_savepoint: name.split('+').any(|p| p == "no_savepoint"),
        }
    }

    /// `text` (DDL or a statement) with the states as their names when the variant says
    /// so: the statements write a state as `1 /* locked */`, the DDL and the shared
    /// predicates as a bare number after `state =` or `state <>`.
    fn states(&self, text: &str) -> String {
        let mut out = text.to_owned();
        if self.text_state {
            for (code, name) in states() {
                out = out.replace(&format!("{code} /* {name} */"), &format!("'{name}'"));
                for op in ["=", "<>"] {
                    out = out.replace(
                        &format!("state {op} {code}"),
                        &format!("state {op} '{name}'"),
                    );
                }
            }
        }
        out
    }

    /// The store's DDL changed as the variant says.
    fn ddl(&self) -> Vec<String> {
        let mut out = Vec::new();
        for stmt in mqlite_sql::SCHEMA {
            if self.no_trigger && stmt.starts_with("CREATE TRIGGER mqlite_seq_floor") {
                continue;
            }
            if self.few_indexes
                && [
                    "mqlite_msg_line",
                    "mqlite_msg_priority",
                    "mqlite_msg_due",
                    "mqlite_msg_expiry",
                    "mqlite_msg_dlq",
                ]
                .iter()
                .any(|i| stmt.starts_with(&format!("CREATE INDEX {i}")))
            {
                continue;
            }
            if self.no_lease && stmt.starts_with("CREATE INDEX mqlite_msg_lease ") {
                continue;
            }
            let mut s = (*stmt).to_owned();
            if self.lock_receipts && s.starts_with("CREATE TABLE mqlite_receipts") {
                s = LOCK_RECEIPTS.to_owned();
            }
            if s.starts_with("CREATE TABLE mqlite_messages") {
                if self.text_state {
                    s = s.replace(
                        "state                   INTEGER NOT NULL DEFAULT 0 CHECK (state BETWEEN 0 AND 5),",
                        "state TEXT NOT NULL DEFAULT 'active' CHECK (state = 'active' \
                         OR state = 'locked' OR state = 'deferred' OR state = 'scheduled' \
                         OR state = 'completed' OR state = 'dead_lettered'),",
                    );
                    assert!(
                        s.contains("state TEXT"),
                        "the state column as the schema writes it"
                    );
                }
                if self.body_last {
                    let start = s.find("\n    body ").expect("the body column");
                    let end = start + s[start + 1..].find('\n').expect("its line") + 1;
                    s.replace_range(start..end, "");
                    let close = s.rfind("\n)").expect("the table's end");
                    s.insert_str(close, ",\n    body BLOB NOT NULL");
                }
            }
            out.push(self.states(&s));
        }
        if self.batch_receipt {
            out.push(BATCH_RECEIPTS.to_owned());
        }
        out
    }
}

/// The `lock_receipts` variant's table: `mqlite-rs/14`'s, an entry per lock.
const LOCK_RECEIPTS: &str = "CREATE TABLE mqlite_receipts (
    bucket     INTEGER NOT NULL,
    seq        INTEGER NOT NULL,
    lock_token TEXT NOT NULL,
    queue      TEXT NOT NULL,
    op         TEXT NOT NULL,
    args       TEXT NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (bucket, seq, lock_token)
) STRICT, WITHOUT ROWID";

/// The `lock_receipts` variant's receipts of `n` locks from bound pairs (`mqlite-rs/14`'s
/// `RECEIPT_ROWS`): queue `?1`, op `?2`, args `?3`, expiry `?4`, then the pairs.
fn lock_receipt_rows(n: usize) -> String {
    format!(
        "INSERT OR REPLACE INTO mqlite_receipts
       (bucket, seq, lock_token, queue, op, args, expires_at)
SELECT ?4 / {RECEIPT_BUCKET_MS}, p.column1, p.column2, ?1, ?2, ?3, ?4 FROM (VALUES {}) AS p
 WHERE p.column1 IS NOT NULL",
        mqlite_sql::values::rows(5, mqlite_sql::values::rows_for(n), 2, false)
    )
}

/// The `batch_receipt` variant's table: one row per completion of a claim's locks, found
/// by the prefix the claim's tokens would share, its locks packed in `items` (each seq
/// and token's text, 40 bytes).
const BATCH_RECEIPTS: &str = "CREATE TABLE mqlite_batch_receipts (
    bucket     INTEGER NOT NULL,
    prefix     BLOB NOT NULL,
    seq        INTEGER NOT NULL,
    queue      TEXT NOT NULL,
    op         TEXT NOT NULL,
    args       TEXT NOT NULL,
    expires_at INTEGER NOT NULL,
    items      BLOB NOT NULL,
    PRIMARY KEY (bucket, prefix, seq)
) STRICT, WITHOUT ROWID";

/// The `batch_receipt` variant's receipt of a completion.
const BATCH_RECEIPT: &str = "INSERT INTO mqlite_batch_receipts
    (bucket, prefix, seq, queue, op, args, expires_at, items)
VALUES (?6, ?2, ?3, ?4, 'complete', '', ?1, ?5)";

/// The lock's `SET` clause under the lock forms' own texts: a token `?1`-free expression
/// `token` for each row, the lease `?1 + ?2`.
fn lock_set(token: &str) -> String {
    format!(
        "UPDATE mqlite_messages SET state = 1 /* locked */, locked_until = ?1 + ?2, \
         lock_token = {token}, delivery_count = delivery_count + 1"
    )
}

/// A token drawn by SQLite, as [`LockToken`]'s text writes one.
const SQL_TOKEN: &str = "lower(hex(randomblob(16)))";

/// `?from`, `?from+step`, … for `n` values, comma-separated.
fn params_list(from: usize, step: usize, n: usize) -> String {
    (0..n)
        .map(|k| format!("?{}", from + step * k))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One variant's database, its statements and its timings.
struct Lane {
    name: String,
    /// The `store` lane's engine, and the runtime it runs on.
    store: Option<(tokio::runtime::Runtime, Engine<SqliteStore>)>,
    parts: Parts,
    conn: Connection,
    insert: String,
    pick: String,
    lock: String,
    /// The `lock_receipts` variant's receipts (the others build theirs per round).
    lock_receipts: String,
    delete: String,
    next_id: i64,
    /// Per message, µs: pick, lock, the lock's commit, the delete (with its BEGIN), the
    /// receipts, the completion's commit.
    spent: [Vec<f64>; 6],
}

/// Runs `sql` with `params` (by position), and the number of rows it changed.
fn changed(c: &Connection, sql: &str, params: &[Value]) -> usize {
    c.prepare_cached(sql)
        .expect("prepare")
        .execute(params_from_iter(params))
        .expect("execute")
}

/// The receipts' leading values: queue, op, args, expiry.
fn receipt_head(expires_at: i64) -> Vec<Value> {
    vec![
        Value::Text("q".into()),
        Value::Text("complete".into()),
        Value::Text(String::new()),
        Value::Integer(expires_at),
    ]
}

/// Opens `path` as the store opens its file (store-sqlite/src/schema.rs).
fn open(path: &std::path::Path) -> Connection {
    let conn = Connection::open(path).expect("open");
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )
    .expect("one plan per statement");
    conn.execute_batch(
        "PRAGMA auto_vacuum = INCREMENTAL; PRAGMA journal_mode = WAL; \
         PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; PRAGMA temp_store = MEMORY;",
    )
    .expect("the store's settings");
    conn
}

impl Lane {
    fn new(name: &str, dir: &std::path::Path) -> Lane {
        let parts = Parts::of(name);
        let path = dir.join(format!("{name}.db"));
        let store = (name == "store").then(|| {
            let rt = mqlite_benches::runtime();
            let engine = rt.block_on(async {
                let store = SqliteStore::open(
                    SqliteOptions::new(path.display().to_string())
                        .clock(SystemClock::shared())
                        .caller_thread(true),
                )
                .await
                .expect("open the store");
                mqlite_benches::engine_with_queue(store, "q", QueueConfig::default()).await
            });
            (rt, engine)
        });
        let conn = if name == "bare" {
            mqlite_benches::bare_sqlite(&path, false)
        } else if store.is_some() {
            Connection::open_in_memory().expect("an unused connection")
        } else {
            let conn = open(&path);
            for stmt in parts.ddl() {
                conn.execute(&stmt, []).expect("the variant's DDL");
            }
            conn
        };
        Lane {
            name: name.to_owned(),
            store,
            parts,
            conn,
            insert: parts.states(
                "INSERT INTO mqlite_messages (id, queue, state, enqueued_at, body) \
                 VALUES (?1, 'q', 0 /* active */, 1, ?2)",
            ),
            pick: parts.states(PICK_HEADS),
            lock: parts.states(LOCK_PICKED_PLAIN.get(N)),
            lock_receipts: lock_receipt_rows(N),
            delete: parts.states(COMPLETE_UNLINED_ROWS.get(N)),
            next_id: 1,
            spent: Default::default(),
        }
    }

    /// Writes `N` messages (untimed), then drains them once, timed.
    fn round(&mut self, body: &[u8]) {
        if let Some((rt, engine)) = &self.store {
            let took = rt.block_on(async {
                let batch = (0..N).map(|_| OutMessage::new(body.to_vec())).collect();
                engine.send_batch("q", batch).await.expect("fill");
                let start = Instant::now();
                let got = engine
                    .receive("q", ReceiveOptions::batch(N as u32))
                    .await
                    .expect("receive");
                let locks: Vec<LockRef> = got.iter().map(LockRef::from).collect();
                let done = engine.complete_batch("q", &locks).await.expect("complete");
                assert_eq!(done.len(), N);
                start.elapsed()
            });
            self.spent[0].push(took.as_secs_f64() * 1e6 / N as f64);
            return;
        }
        if self.name == "bare" {
            mqlite_benches::bare_insert_tx(&self.conn, (0..N).map(|_| body.to_vec()));
            let start = Instant::now();
            assert_eq!(mqlite_benches::bare_drain(&self.conn, N), N);
            self.spent[0].push(start.elapsed().as_secs_f64() * 1e6 / N as f64);
            return;
        }
        let c = &self.conn;
        c.execute_batch("BEGIN").expect("begin");
        {
            let mut insert = c.prepare_cached(&self.insert).expect("insert");
            for _ in 0..N {
                insert
                    .execute(rusqlite::params![self.next_id, body])
                    .expect("a message");
                self.next_id += 1;
            }
        }
        c.execute_batch("COMMIT").expect("commit");
        let now = 100i64;
        let t0 = Instant::now();
        c.execute_batch("BEGIN IMMEDIATE").expect("begin");
        let mut ids = Vec::with_capacity(N);
        // The tokens the lock itself drew (`claim_in_one`, `lock_sql_token`), by id.
        let mut drawn = std::collections::HashMap::new();
        if self.parts.lock == Some("claim_in_one") {
            let sql = self.parts.states(&format!(
                "{} WHERE id IN ({}) AND state = 0 /* active */ RETURNING {}",
                lock_set(SQL_TOKEN),
                mqlite_sql::claim::CLAIM
                    .replace(":now", "?1")
                    .replace(":queue", "?3")
                    .replace(":max", "?4"),
                mqlite_sql::MESSAGE_COLUMNS.join(", ")
            ));
            let mut claim = c.prepare_cached(&sql).expect("the claim");
            let mut rows = claim
                .query(rusqlite::params![now, 30_000, "q", N as i64])
                .expect("the claim");
            while let Some(r) = rows.next().expect("a message") {
                for k in 0..20 {
                    let _: Value = r.get(k).expect("a column");
                }
                let id = r.get::<_, i64>(0).expect("its id");
                ids.push(id);
                drawn.insert(id, r.get::<_, String>(2).expect("its token"));
            }
        } else {
            let mut pick = c.prepare_cached(&self.pick).expect("pick");
            let mut rows = pick
                .query(rusqlite::named_params! {":queue": "q", ":now": now, ":max": N as i64})
                .expect("the heads");
            while let Some(r) = rows.next().expect("a head") {
                // Read as the store's decoder reads a message: every column it returns.
                for k in 0..20 {
                    let _: Value = r.get(k).expect("a column");
                }
                ids.push(r.get::<_, i64>(0).expect("its id"));
            }
        }
        assert_eq!(ids.len(), N);
        let t1 = Instant::now();
        // One read of the random source for the batch, as the store draws its tokens.
        let mut locks: Vec<LockRef> = ids
            .iter()
            .zip(LockToken::random_batch(N))
            .map(|(&id, token)| LockRef {
                seq: SeqNumber(id),
                token,
            })
            .collect();
        let pairs_of = |locks: &[LockRef]| -> Vec<Value> {
            locks
                .iter()
                .flat_map(|l| [Value::Integer(l.seq.0), Value::Text(l.token.to_string())])
                .collect()
        };
        let width = 2 * mqlite_sql::values::rows_for(N);
        let lease = [Value::Integer(now), Value::Integer(30_000)];
        let ids_bound = || {
            let mut v: Vec<Value> = lease.to_vec();
            v.extend(ids.iter().map(|&id| Value::Integer(id)));
            v
        };
        match self.parts.lock {
            Some("claim_in_one") => {}
            Some("lock_sql_token") => {
                let sql = self.parts.states(&format!(
                    "{} WHERE id IN ({}) AND state = 0 /* active */ RETURNING id, lock_token",
                    lock_set(SQL_TOKEN),
                    params_list(3, 1, N)
                ));
                let mut lock = c.prepare_cached(&sql).expect("the lock");
                let mut rows = lock.query(params_from_iter(ids_bound())).expect("the lock");
                while let Some(r) = rows.next().expect("a lock") {
                    let id = r.get::<_, i64>(0).expect("its id");
                    drawn.insert(id, r.get::<_, String>(1).expect("its token"));
                }
            }
            Some("lock_case") => {
                let whens: String = (0..N)
                    .map(|k| format!(" WHEN ?{} THEN ?{}", 3 + 2 * k, 4 + 2 * k))
                    .collect();
                let sql = self.parts.states(&format!(
                    "{} WHERE id IN ({}) AND state = 0 /* active */",
                    lock_set(&format!("CASE id{whens} END")),
                    params_list(3, 2, N)
                ));
                let mut bound = lease.to_vec();
                bound.extend(pairs_of(&locks));
                assert_eq!(changed(c, &sql, &bound), N, "the lock");
            }
            Some("lock_each") => {
                let sql = self.parts.states(&format!(
                    "{} WHERE id = ?4 AND state = 0 /* active */",
                    lock_set("?3")
                ));
                let mut lock = c.prepare_cached(&sql).expect("the lock");
                for l in &locks {
                    let one = rusqlite::params![now, 30_000, l.token.to_string(), l.seq.0];
                    assert_eq!(lock.execute(one).expect("the lock"), 1);
                }
            }
            _ => {
                let mut bound = lease.to_vec();
                bound.extend(pairs_of(&locks));
                bound.resize(2 + width, Value::Null);
                assert_eq!(changed(c, &self.lock, &bound), N, "the lock");
            }
        }
        if !drawn.is_empty() {
            assert_eq!(drawn.len(), N, "a token per lock");
            for l in &mut locks {
                l.token = drawn[&l.seq.0].parse().expect("a token");
            }
        }
        let pairs = pairs_of(&locks);
        let padded = |lead: [Value; 2]| {
            let mut v: Vec<Value> = lead.into();
            v.extend(pairs.iter().cloned());
            v.resize(2 + width, Value::Null);
            v
        };
        let t2 = Instant::now();
        c.execute_batch("COMMIT").expect("commit");
        let t3 = Instant::now();
        let settle = padded([Value::Text("q".into()), Value::Integer(now + 1)]);
        let expires_at = now + 1 + mqlite_contract::RECEIPT_TTL_MS;
        c.execute_batch("BEGIN IMMEDIATE").expect("begin");
        // As the store runs it: in a savepoint, kept when it took every lock.
        if !self.parts.no_savepoint {
            c.execute_batch(AT_ONCE).expect("savepoint");
        }
        if self.parts.delete_each {
            let sql = self.parts.states(mqlite_sql::settle::COMPLETE_UNLINED_ONE);
            let mut delete = c.prepare_cached(&sql).expect("the delete");
            for l in &locks {
                let one = rusqlite::params!["q", now + 1, l.seq.0, l.token.to_string()];
                assert_eq!(delete.execute(one).expect("the delete"), 1);
            }
        } else {
            assert_eq!(changed(c, &self.delete, &settle), N, "the delete");
        }
        if !self.parts.no_savepoint {
            c.execute_batch(AT_ONCE_KEEP).expect("release");
        }
        let t4 = Instant::now();
        if self.parts.no_receipts {
            // Promise 3.2's cost: nothing written.
        } else if self.parts.batch_receipt {
            let mut items = Vec::with_capacity(40 * N);
            for pair in pairs.chunks(2) {
                if let [Value::Integer(id), Value::Text(token)] = pair {
                    items.extend_from_slice(&id.to_be_bytes());
                    items.extend_from_slice(token.as_bytes());
                }
            }
            let receipt = [
                Value::Integer(expires_at),
                Value::Blob(vec![7; 12]),
                Value::Integer(ids[0]),
                Value::Text("q".into()),
                Value::Blob(items),
                Value::Integer(expires_at / RECEIPT_BUCKET_MS),
            ];
            assert_eq!(changed(c, BATCH_RECEIPT, &receipt), 1, "the receipt");
        } else if self.parts.lock_receipts {
            let mut receipts = receipt_head(expires_at);
            receipts.extend(pairs.iter().cloned());
            receipts.resize(4 + width, Value::Null);
            assert_eq!(
                changed(c, &self.lock_receipts, &receipts),
                N,
                "the receipts"
            );
        } else {
            // One entry per page, built by the store's own `receipt_pages`.
            let mut receipts = receipt_head(expires_at);
            let pages = receipt_pages(&locks);
            let entries = pages.len();
            for p in pages {
                receipts.extend([
                    Value::Integer(p.page),
                    Value::Integer(p.seq),
                    Value::Text(p.token),
                    Value::Blob(p.items),
                ]);
            }
            receipts.resize(4 + 4 * mqlite_sql::values::rows_for(entries), Value::Null);
            assert_eq!(
                changed(c, RECEIPT_ROWS.get(entries), &receipts),
                entries,
                "the receipts"
            );
        }
        let t5 = Instant::now();
        c.execute_batch("COMMIT").expect("commit");
        let t6 = Instant::now();
        let us = |d: std::time::Duration| d.as_secs_f64() * 1e6 / N as f64;
        let steps = [
            us(t1 - t0),
            us(t2 - t1),
            us(t3 - t2),
            us(t4 - t3),
            us(t5 - t4),
            us(t6 - t5),
        ];
        for (k, v) in steps.into_iter().enumerate() {
            self.spent[k].push(v);
        }
    }

    /// The median of each step, µs per message.
    fn medians(&mut self) -> Vec<f64> {
        self.spent
            .iter_mut()
            .filter(|v| !v.is_empty())
            .map(|v| {
                v.sort_by(f64::total_cmp);
                v[v.len() / 2]
            })
            .collect()
    }
}

fn main() {
    let mut rounds = 1000usize;
    let mut variants: Vec<String> = VARIANTS.iter().map(|v| (*v).to_owned()).collect();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--rounds" => {
                rounds = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .filter(|&n| n > 0)
                    .expect("--rounds N, N at least 1");
            }
            "--variants" => {
                variants = args
                    .next()
                    .expect("--variants a,b+c,...")
                    .split(',')
                    .map(str::to_owned)
                    .collect();
            }
            other => panic!("unknown argument {other}: --rounds N, --variants a,b+c,..."),
        }
    }
    let dir = tempfile::tempdir().expect("a directory");
    let mut lanes: Vec<Lane> = variants.iter().map(|v| Lane::new(v, dir.path())).collect();
    let body = mqlite_benches::body(0);
    for _ in 0..rounds {
        for lane in lanes.iter_mut() {
            lane.round(&body);
        }
    }
    println!(
        "{:40} {:>6} {:>6} {:>7} {:>6} {:>8} {:>7} {:>7}   µs per message, medians of {rounds} drains of {N}",
        "variant", "pick", "lock", "commit", "delete", "receipts", "commit", "total"
    );
    for lane in lanes.iter_mut() {
        let m = lane.medians();
        let total: f64 = m.iter().sum();
        if m.len() == 1 {
            println!("{:40} {:>55.2}", lane.name, total);
            continue;
        }
        println!(
            "{:40} {:6.2} {:6.2} {:7.2} {:8.2} {:6.2} {:7.2} {:7.2}",
            lane.name, m[0], m[1], m[2], m[3], m[4], m[5], total
        );
    }
}

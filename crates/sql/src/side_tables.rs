//! The side tables (`mqlite_contract::side_tables`): the consumer inbox and the producer's
//! relay outbox, created on first use in the database the application's transaction
//! runs in. Every operation runs inside the caller's transaction; the first write to
//! find a table missing creates it (in that same transaction) and runs again, and a
//! read of a missing table answers no rows.

use mqlite_contract::{
    Error, Fingerprint, InboxMarker, RelayBacklog, RelayIntent, Result, SentEvidence, SeqNumber,
    SideSweep,
};
use mqlite_kit::codec::{decode_out, encode_out};

use crate::exec::{CorruptRow, Params, Row, SqlExec, Value};

/// The side tables' DDL, run on first use. The golden file holds it beside
/// [`crate::SCHEMA`] and the schema token covers both.
pub const DDL: &[&str] = &[
    // One row per (event, consumer): the inbox is scoped by consumer (17.2), and the
    // key leads with the identity so the trace reads every consumer's marker in one seek.
    "CREATE TABLE IF NOT EXISTS mqlite_inbox (
    source      TEXT NOT NULL,
    id          TEXT NOT NULL,
    consumer    TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    applied_at  INTEGER NOT NULL,
    PRIMARY KEY (source, id, consumer)
) STRICT, WITHOUT ROWID",
    // The retention sweep.
    "CREATE INDEX IF NOT EXISTS mqlite_inbox_applied ON mqlite_inbox(applied_at)",
    "CREATE TABLE IF NOT EXISTS mqlite_relay (
    seq          INTEGER PRIMARY KEY,
    queue        TEXT NOT NULL,
    source       TEXT NOT NULL,
    id           TEXT NOT NULL,
    message      BLOB NOT NULL,
    created_at   INTEGER NOT NULL,
    published_at INTEGER NOT NULL DEFAULT 0,
    refused_at   INTEGER NOT NULL DEFAULT 0
) STRICT",
    // Only the pending intents: what the relay reads next and the backlog it reports.
    "CREATE INDEX IF NOT EXISTS mqlite_relay_pending ON mqlite_relay(seq) \
     WHERE published_at = 0 AND refused_at = 0",
    // Only the refused ones, for the backlog's count.
    "CREATE INDEX IF NOT EXISTS mqlite_relay_refused ON mqlite_relay(seq) WHERE refused_at > 0",
    // The trace's lookup by identity.
    "CREATE INDEX IF NOT EXISTS mqlite_relay_event ON mqlite_relay(source, id)",
    // The retention sweep of published intents.
    "CREATE INDEX IF NOT EXISTS mqlite_relay_published \
     ON mqlite_relay(published_at) WHERE published_at > 0",
];

/// Every consumer's marker of one event.
pub const INBOX_MARKERS: &str = "SELECT consumer, fingerprint, applied_at FROM mqlite_inbox
 WHERE source = :source AND id = :id ORDER BY consumer";

/// One marker.
pub const INBOX_INSERT: &str = "INSERT INTO mqlite_inbox
       (source, id, consumer, fingerprint, applied_at)
VALUES (:source, :id, :consumer, :fingerprint, :applied_at)";

/// One intent.
pub const RELAY_INSERT: &str = "INSERT INTO mqlite_relay (queue, source, id, message, created_at)
VALUES (:queue, :source, :id, :message, :now)";

/// The next pending intents, in order (a seek of the partial index).
pub const RELAY_PENDING: &str = "SELECT seq, queue, message, created_at, published_at,
       refused_at
  FROM mqlite_relay WHERE published_at = 0 AND refused_at = 0 ORDER BY seq LIMIT :limit";

/// Marks intents published.
pub const RELAY_MARK: &str = "UPDATE mqlite_relay SET published_at = :now
 WHERE published_at = 0 AND refused_at = 0 AND seq IN (SELECT value FROM json_each(:seqs))";

/// Marks intents refused by their target.
pub const RELAY_REFUSE: &str = "UPDATE mqlite_relay SET refused_at = :now
 WHERE published_at = 0 AND refused_at = 0 AND seq IN (SELECT value FROM json_each(:seqs))";

/// Every intent of one identity.
pub const RELAY_FIND: &str = "SELECT seq, queue, message, created_at, published_at,
       refused_at
  FROM mqlite_relay WHERE source = :source AND id = :id ORDER BY seq";

/// The backlog.
pub const RELAY_BACKLOG: &str = "SELECT
    (SELECT count(*) FROM mqlite_relay WHERE published_at = 0 AND refused_at = 0),
    (SELECT min(created_at) FROM mqlite_relay WHERE published_at = 0 AND refused_at = 0),
    (SELECT count(*) FROM mqlite_relay WHERE refused_at > 0)";

/// Markers past retention.
pub const INBOX_SWEEP: &str = "DELETE FROM mqlite_inbox WHERE applied_at < :before";

/// Published intents past retention.
pub const RELAY_SWEEP: &str =
    "DELETE FROM mqlite_relay WHERE published_at > 0 AND published_at < :before";

/// A queue's dedup entry for a message id, expired or not (until swept).
pub const DEDUP_ENTRY: &str =
    "SELECT seq, expires_at FROM mqlite_dedup WHERE queue = :queue AND dedup_key = :key";

/// A message row of a queue by sequence number, in any state.
pub const MESSAGE_BY_SEQ: &str = concat!(
    "SELECT ",
    message_columns!(),
    " FROM mqlite_messages WHERE id = :seq AND queue = :queue"
);

/// Whether an error says a side table does not exist yet (first use).
fn missing_side_table(e: &Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if s.to_string().contains("no such table: mqlite_") {
            return true;
        }
        source = s.source();
    }
    false
}

/// Creates the side tables in the surrounding transaction.
pub async fn create<X: SqlExec>(x: &mut X) -> Result<()> {
    for ddl in DDL {
        x.execute(ddl, &[]).await?;
    }
    Ok(())
}

/// Runs the write `op`; if a side table is missing, creates the tables and runs it
/// once more.
async fn first_use<X: SqlExec, T>(x: &mut X, op: impl AsyncFn(&mut X) -> Result<T>) -> Result<T> {
    match op(x).await {
        Err(e) if missing_side_table(&e) => {
            create(x).await?;
            op(x).await
        }
        other => other,
    }
}

/// Runs the read `op`; a side table never created reads as no rows (and stays
/// uncreated: a read, the trace's or the status's, writes nothing).
async fn read<X: SqlExec>(x: &mut X, sql: &'static str, params: Params<'_>) -> Result<Vec<Row>> {
    match x.query(sql, params).await {
        Err(e) if missing_side_table(&e) => Ok(Vec::new()),
        other => other,
    }
}

fn corrupt(what: &str) -> Error {
    Error::backend("sql", CorruptRow(what.to_owned()))
}

fn intent(r: &Row) -> Result<RelayIntent> {
    let (published, refused) = (r.int(4)?, r.int(5)?);
    Ok(RelayIntent {
        refused_at_ms: (refused > 0).then_some(refused),
        seq: r.int(0)?,
        queue: r.text(1)?,
        message: decode_out(&r.blob(2)?).ok_or_else(|| corrupt("a relay intent"))?,
        created_at_ms: r.int(3)?,
        published_at_ms: (published > 0).then_some(published),
    })
}

/// Every consumer's marker of `(source, id)`.
pub async fn inbox_markers<X: SqlExec>(
    x: &mut X,
    source: &str,
    id: &str,
) -> Result<Vec<InboxMarker>> {
    let p = [(":source", Value::from(source)), (":id", Value::from(id))];
    let rows = read(x, INBOX_MARKERS, &p).await?;
    rows.iter()
        .map(|r| {
            Ok(InboxMarker {
                consumer: r.text(0)?,
                source: source.to_owned(),
                id: id.to_owned(),
                fingerprint: r.text(1)?.parse::<Fingerprint>()?,
                applied_at_ms: r.int(2)?,
            })
        })
        .collect()
}

/// Records one marker.
pub async fn inbox_insert<X: SqlExec>(x: &mut X, m: &InboxMarker) -> Result<()> {
    first_use(x, async |x: &mut X| {
        let p = [
            (":source", Value::from(m.source.as_str())),
            (":id", Value::from(m.id.as_str())),
            (":consumer", Value::from(m.consumer.as_str())),
            (":fingerprint", Value::from(m.fingerprint.to_string())),
            (":applied_at", Value::from(m.applied_at_ms)),
        ];
        x.execute(INBOX_INSERT, &p).await
    })
    .await
    .map(drop)
}

/// Writes one intent; returns its seq.
pub async fn relay_insert<X: SqlExec>(
    x: &mut X,
    now: i64,
    queue: &str,
    message: &mqlite_contract::OutMessage,
) -> Result<i64> {
    let e = message
        .event
        .as_ref()
        .ok_or_else(|| Error::invalid("a relay intent needs an event identity"))?;
    let done = first_use(x, async |x: &mut X| {
        let p = [
            (":queue", Value::from(queue)),
            (":source", Value::from(e.source.as_str())),
            (":id", Value::from(e.id.as_str())),
            (":message", Value::from(encode_out(message))),
            (":now", Value::from(now)),
        ];
        x.execute(RELAY_INSERT, &p).await
    })
    .await?;
    Ok(done.last_insert_rowid)
}

/// The next `limit` pending intents.
pub async fn relay_pending<X: SqlExec>(x: &mut X, limit: usize) -> Result<Vec<RelayIntent>> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let rows = read(x, RELAY_PENDING, &[(":limit", Value::from(limit))]).await?;
    rows.iter().map(intent).collect()
}

/// Marks intents published at `now`.
pub async fn relay_mark<X: SqlExec>(x: &mut X, now: i64, seqs: &[i64]) -> Result<u64> {
    relay_set(x, RELAY_MARK, now, seqs).await
}

/// Marks intents refused by their target at `now`.
pub async fn relay_refuse<X: SqlExec>(x: &mut X, now: i64, seqs: &[i64]) -> Result<u64> {
    relay_set(x, RELAY_REFUSE, now, seqs).await
}

async fn relay_set<X: SqlExec>(
    x: &mut X,
    sql: &'static str,
    now: i64,
    seqs: &[i64],
) -> Result<u64> {
    let list = serde_json::Value::from(seqs.to_vec()).to_string();
    let done = first_use(x, async |x: &mut X| {
        let p = [
            (":now", Value::from(now)),
            (":seqs", Value::from(list.as_str())),
        ];
        x.execute(sql, &p).await
    })
    .await?;
    Ok(done.changes)
}

/// Every intent of `(source, id)`.
pub async fn relay_find<X: SqlExec>(x: &mut X, source: &str, id: &str) -> Result<Vec<RelayIntent>> {
    let p = [(":source", Value::from(source)), (":id", Value::from(id))];
    let rows = read(x, RELAY_FIND, &p).await?;
    rows.iter().map(intent).collect()
}

/// The pending intents' count and oldest time.
pub async fn relay_backlog<X: SqlExec>(x: &mut X) -> Result<RelayBacklog> {
    let rows = read(x, RELAY_BACKLOG, &[]).await?;
    let Some(r) = rows.first() else {
        return Ok(RelayBacklog::default());
    };
    Ok(RelayBacklog {
        pending: r.int(0)?.max(0) as u64,
        oldest_created_at_ms: r.opt_int(1)?,
        refused: r.int(2)?.max(0) as u64,
    })
}

/// Deletes markers and published intents past retention.
pub async fn sweep<X: SqlExec>(
    x: &mut X,
    markers_before: i64,
    intents_before: i64,
) -> Result<SideSweep> {
    let mut out = SideSweep::default();
    for (sql, before, n) in [
        (INBOX_SWEEP, markers_before, &mut out.markers),
        (RELAY_SWEEP, intents_before, &mut out.intents),
    ] {
        // A table never created has nothing to sweep.
        match x.execute(sql, &[(":before", Value::from(before))]).await {
            Ok(done) => *n = done.changes,
            Err(e) if missing_side_table(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// A queue's evidence of a message id: the dedup entry and the row.
pub async fn find_sent<X: SqlExec>(x: &mut X, queue: &str, key: &str) -> Result<SentEvidence> {
    let p = [(":queue", Value::from(queue)), (":key", Value::from(key))];
    let rows = x.query(DEDUP_ENTRY, &p).await?;
    let Some(r) = rows.first() else {
        return Ok(SentEvidence::default());
    };
    let (seq, expires) = (r.int(0)?, r.int(1)?);
    let p = [(":queue", Value::from(queue)), (":seq", Value::from(seq))];
    let found = x.query_messages(MESSAGE_BY_SEQ, &p, false).await?;
    Ok(SentEvidence {
        dedup: Some((SeqNumber(seq), expires)),
        message: found.into_iter().next(),
    })
}

//! Receipt entries (3.2, `mqlite-rs/15`): a settlement's locks in one page of 32
//! sequence numbers share one entry, keyed by its first lock, `items` holding each
//! lock's 24 bytes. The two ways a store writes entries (bound rows, and JSON for a
//! batch past the bound rows) write the same entries, and the lookup finds a lock
//! anywhere in its page's entry, only under the identical request and before expiry.

use mqlite_contract::clock::ManualClock;
use mqlite_contract::{LockToken, digest};
use mqlite_sql::settle::{
    RECEIPT_BUCKET_MS, RECEIPT_INSERT, RECEIPT_LOOKUP, RECEIPT_PAGE, RECEIPT_ROWS,
};
use rusqlite::Connection;
use rusqlite::types::Value;

use crate::support;

/// A fresh store's file, as the store laid it out, opened directly.
async fn schema(dir: &tempfile::TempDir) -> Connection {
    let path = dir.path().join("mq.db").to_string_lossy().into_owned();
    let mq = support::engine_at(&path, ManualClock::new(1_700_000_000_000).shared()).await;
    mq.close().await;
    Connection::open(&path).expect("open")
}

/// A lock's 24 bytes in an entry's `items`.
fn item(seq: i64, token: LockToken) -> Vec<u8> {
    let mut out = seq.to_be_bytes().to_vec();
    out.extend_from_slice(&token.as_u128().to_be_bytes());
    out
}

/// Every entry, in key order: (bucket, page, seq, token, op, args, expires_at, items).
type Entry = (i64, i64, i64, String, String, String, i64, Vec<u8>);

fn entries(c: &Connection) -> Vec<Entry> {
    c.prepare(
        "SELECT bucket, page, seq, lock_token, op, args, expires_at, items
           FROM mqlite_receipts ORDER BY bucket, page, seq",
    )
    .expect("prepare")
    .query_map([], |r| {
        Ok((
            r.get(0)?,
            r.get(1)?,
            r.get(2)?,
            r.get(3)?,
            r.get(4)?,
            r.get(5)?,
            r.get(6)?,
            r.get(7)?,
        ))
    })
    .expect("entries")
    .collect::<Result<_, _>>()
    .expect("rows")
}

#[tokio::test]
async fn entries_hold_a_page_of_locks_and_the_lookup_finds_each_under_its_own_request() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = schema(&dir).await;
    let expires_at: i64 = 1_700_001_800_000;
    let locks: Vec<(i64, LockToken)> = [96, 100, 127, 128]
        .into_iter()
        .map(|seq| (seq, LockToken::random()))
        .collect();
    // Pages 3 (96, 100, 127) and 4 (128).
    let pages: Vec<(i64, i64, String, Vec<u8>)> = vec![
        (
            3,
            96,
            locks[0].1.to_string(),
            locks[..3].iter().flat_map(|&(s, t)| item(s, t)).collect(),
        ),
        (4, 128, locks[3].1.to_string(), item(128, locks[3].1)),
    ];
    assert!(pages.iter().all(|p| p.1 / RECEIPT_PAGE == p.0));

    // JSON, items in hexadecimal.
    let json = serde_json::Value::from_iter(pages.iter().map(|(page, seq, token, items)| {
        serde_json::json!({"page": page, "seq": seq, "token": token, "items": digest::hex(items)})
    }));
    c.execute(
        RECEIPT_INSERT,
        rusqlite::named_params! {
            ":queue": "q", ":op": "complete", ":args": "", ":expires_at": expires_at,
            ":pages": json.to_string(),
        },
    )
    .expect("json entries");
    let by_json = entries(&c);
    assert_eq!(by_json.len(), 2, "one entry per page");
    assert_eq!(by_json[0].1, 3);
    assert_eq!(by_json[0].7.len(), 3 * 24);
    assert_eq!(by_json[0].0, expires_at / RECEIPT_BUCKET_MS);
    c.execute("DELETE FROM mqlite_receipts", []).expect("clear");

    // Bound rows: queue, op, args, expiry, then each page's four values, padded.
    let text = RECEIPT_ROWS.get(pages.len());
    let mut params: Vec<Value> = vec![
        "q".to_owned().into(),
        "complete".to_owned().into(),
        String::new().into(),
        expires_at.into(),
    ];
    for (page, seq, token, items) in &pages {
        params.extend([
            Value::from(*page),
            Value::from(*seq),
            Value::from(token.clone()),
            Value::from(items.clone()),
        ]);
    }
    let stmt_params = c.prepare(text).expect("prepare").parameter_count();
    params.resize(stmt_params, Value::Null);
    c.execute(text, rusqlite::params_from_iter(params))
        .expect("bound entries");
    assert_eq!(entries(&c), by_json, "both ways write the same entries");

    // The lookup: each lock found in its page's entry, a lock of the middle included; a
    // wrong token, another operation, or a time past the expiry finds nothing.
    let lookup = |items: &[(i64, LockToken)], op: &str, now: i64| -> Vec<(i64, String)> {
        let json = serde_json::Value::from_iter(items.iter().map(|&(seq, token)| {
            serde_json::json!({
                "seq": seq, "token": token.to_string(), "item": digest::hex(&item(seq, token))
            })
        }));
        let mut found: Vec<(i64, String)> = c
            .prepare(RECEIPT_LOOKUP)
            .expect("prepare")
            .query_map(
                rusqlite::named_params! {
                    ":items": json.to_string(), ":queue": "q", ":op": op, ":args": "",
                    ":now": now, ":bucket": now / RECEIPT_BUCKET_MS,
                },
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .expect("lookup")
            .collect::<Result<_, _>>()
            .expect("rows");
        found.sort();
        found
    };
    let now = expires_at - 1_000;
    let mut want: Vec<(i64, String)> = locks.iter().map(|&(s, t)| (s, t.to_string())).collect();
    want.sort();
    assert_eq!(lookup(&locks, "complete", now), want);
    let wrong = [(100, LockToken::random()), (129, locks[3].1)];
    assert!(
        lookup(&wrong, "complete", now).is_empty(),
        "a wrong token, a wrong seq"
    );
    assert!(lookup(&locks, "defer", now).is_empty(), "another operation");
    assert!(
        lookup(&locks, "complete", expires_at).is_empty(),
        "at its expiry a receipt replays nothing"
    );
}

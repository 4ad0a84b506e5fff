//! The canonical DDL and its guard token (10.2).

/// The schema guard token stored in `meta`. Open refuses any other (10.2); an
/// incompatible layout change must change this token, never migrate in place. The
/// golden test of the SQLite store holds the two together.
pub const SCHEMA_TOKEN: &str = "mqlite-rs/15";

/// The nine STRICT tables and their indexes, in creation order.
///
/// `mqlite_messages.line` is a message's ordering line (see the line rule in
/// `mqlite_contract::store`): its group id on standard and group_fifo queues, `''`
/// (one line for the whole queue) on strict_fifo, NULL when unordered.
/// `messages.waiting` is 1 while an older message of the same line is still in play;
/// only the line's head has 0, so a claim never walks a blocked backlog (5.6).
/// `mqlite_messages.state` is an integer ([`crate::rows::state_code`]): 0 active,
/// 1 locked, 2 deferred, 3 scheduled, 4 completed, 5 dead_lettered. Every partial index
/// tests it, so every row written evaluates it a dozen times; an integer compares in
/// fewer steps than text (`mqlite-rs/14`; the statements write the name beside each
/// number, `state = 1 /* locked */`).
pub const SCHEMA: &[&str] = &[
    "CREATE TABLE mqlite_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) STRICT",
    "CREATE TABLE mqlite_queues (
    name                  TEXT PRIMARY KEY,
    kind                  TEXT NOT NULL DEFAULT 'queue'
                              CHECK (kind IN ('queue','topic','subscription')),
    lock_duration_ms      INTEGER NOT NULL CHECK (lock_duration_ms > 0),
    max_delivery_count    INTEGER NOT NULL CHECK (max_delivery_count > 0),
    default_ttl_ms        INTEGER NOT NULL DEFAULT 0,
    dead_letter_on_expire INTEGER NOT NULL DEFAULT 1 CHECK (dead_letter_on_expire IN (0,1)),
    dedup_window_ms       INTEGER NOT NULL DEFAULT 0,
    ordering_mode         TEXT NOT NULL DEFAULT 'standard'
                              CHECK (ordering_mode IN ('standard','group_fifo','strict_fifo')),
    dlq_max_age_ms        INTEGER NOT NULL DEFAULT 0,
    dlq_max_count         INTEGER NOT NULL DEFAULT 0,
    dlq_max_bytes         INTEGER NOT NULL DEFAULT 0,
    dead_letter_target    TEXT,
    require_message_id    INTEGER NOT NULL DEFAULT 0 CHECK (require_message_id IN (0,1)),
    status                TEXT NOT NULL DEFAULT 'active'
                              CHECK (status IN ('active','send_disabled','receive_disabled',
                                                'disabled')),
    created_at            INTEGER NOT NULL
) STRICT",
    "CREATE TABLE mqlite_subscriptions (
    name       TEXT PRIMARY KEY REFERENCES mqlite_queues(name) ON DELETE CASCADE,
    topic      TEXT NOT NULL REFERENCES mqlite_queues(name) ON DELETE CASCADE,
    filter     TEXT NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL
) STRICT",
    // A topic's subscriptions, for publish and for deleting a topic.
    "CREATE INDEX mqlite_sub_topic ON mqlite_subscriptions(topic, name)",
    "CREATE TABLE mqlite_messages (
    id                      INTEGER PRIMARY KEY,
    queue                   TEXT NOT NULL,
    state                   INTEGER NOT NULL DEFAULT 0 CHECK (state BETWEEN 0 AND 5),
    line                    TEXT,
    waiting                 INTEGER NOT NULL DEFAULT 0 CHECK (waiting IN (0,1)),
    enqueued_at             INTEGER NOT NULL,
    visible_at              INTEGER NOT NULL DEFAULT 0,
    locked_until            INTEGER NOT NULL DEFAULT 0,
    lock_token              TEXT,
    delivery_count          INTEGER NOT NULL DEFAULT 0,
    expires_at              INTEGER NOT NULL DEFAULT 0,
    dead_lettered_at        INTEGER NOT NULL DEFAULT 0,
    body                    BLOB NOT NULL,
    message_id              TEXT,
    group_id                TEXT,
    subject                 TEXT,
    correlation_id          TEXT,
    reply_to                TEXT,
    content_type            TEXT,
    properties              TEXT,
    dead_letter_reason      TEXT,
    dead_letter_description TEXT,
    event                   TEXT,
    priority                INTEGER NOT NULL DEFAULT 0 CHECK (priority BETWEEN 0 AND 9)
) STRICT",
    // Sequence numbers never repeat (G1): deleting the largest row records it as the
    // floor the next send starts above (see rows::SELECT_QUEUE_NEXT_SEQ).
    // (Written as the libSQL client renders it, so both stores keep the same text.)
    "CREATE TRIGGER mqlite_seq_floor AFTER DELETE ON mqlite_messages \
WHEN old.id > coalesce((SELECT max(id) FROM mqlite_messages), 0) BEGIN
INSERT INTO mqlite_meta(KEY, value) VALUES('seq_floor', old.id) \
ON CONFLICT(KEY) DO UPDATE SET value = excluded.value \
WHERE CAST(value AS INTEGER) < CAST(excluded.value AS INTEGER);
END",
    // The claim seeks this index: only claimable-shaped rows of priority 0 live in it
    // (1.5).
    concat!(
        "CREATE INDEX mqlite_msg_active ON mqlite_messages(queue, id) WHERE ",
        active_rows!()
    ),
    // Every other row but the locked ones (`mqlite_msg_lease`). The three together hold
    // each message of a queue exactly once (Peek, stats, deleting a queue), a send of a
    // claimable message of priority 0 writes one index entry, not two, and a lock and
    // its completion each touch one index, not two.
    concat!(
        "CREATE INDEX mqlite_msg_rest ON mqlite_messages(queue, id) WHERE ",
        rest_rows!()
    ),
    // The claimable-shaped rows of a priority above 0, highest first (20.1): the claim
    // seeks it before `mqlite_msg_active`.
    "CREATE INDEX mqlite_msg_priority ON mqlite_messages(queue, priority DESC, id) \
WHERE state = 0 AND waiting = 0 AND priority > 0",
    // The claimable rows that head their line, or are in none (1.1, 5.1–5.5): the claim
    // reads it with its own terms (queue, priority, visible and unexpired at now), and
    // SQLite folds the view into the claim's query, so the plan is the same as with the
    // rule written out. A remote server parses the claim afresh on every request; the
    // rule's text lives here, parsed once with the schema. (On one line, as the libSQL
    // client renders it, so both stores keep the same text.)
    concat!(
        "CREATE VIEW mqlite_heads AS SELECT m.id, m.queue, m.priority, m.visible_at, \
         m.expires_at FROM mqlite_messages m WHERE m.state = 0 AND m.waiting = 0 AND ",
        line_free!()
    ),
    // One index per blocking state for the head-of-line probes (5.6): rows of a line only.
    "CREATE INDEX mqlite_msg_line_locked ON mqlite_messages(queue, line, id) WHERE state = 1 AND line IS NOT NULL",
    "CREATE INDEX mqlite_msg_line_deferred ON mqlite_messages(queue, line, id) WHERE state = 2 AND line IS NOT NULL",
    "CREATE INDEX mqlite_msg_line_scheduled ON mqlite_messages(queue, line, id) WHERE state = 3 AND line IS NOT NULL",
    // Every row still in play per line: who waits behind whom.
    "CREATE INDEX mqlite_msg_line ON mqlite_messages(queue, line, id) WHERE line IS NOT NULL AND state <> 5",
    // The locked rows of each queue by lease end: the reaper seeks each queue's expired
    // leases; Peek, stats and deleting a queue find its locked rows here.
    "CREATE INDEX mqlite_msg_lease ON mqlite_messages(queue, locked_until) WHERE state = 1",
    // The scheduler: scheduled rows by due time.
    "CREATE INDEX mqlite_msg_due ON mqlite_messages(visible_at) WHERE state = 3",
    // The TTL sweep: deadlines of rows not yet dead-lettered.
    "CREATE INDEX mqlite_msg_expiry ON mqlite_messages(expires_at) WHERE expires_at > 0 AND state <> 5",
    // Dead letters per queue, oldest first (redrive, purge, retention).
    "CREATE INDEX mqlite_msg_dlq ON mqlite_messages(queue, dead_lettered_at, id) WHERE state = 5",
    "CREATE TABLE mqlite_dedup (
    queue      TEXT NOT NULL,
    dedup_key  TEXT NOT NULL,
    body_hash  TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (queue, dedup_key)
) STRICT, WITHOUT ROWID",
    "CREATE INDEX mqlite_dedup_expiry ON mqlite_dedup(expires_at)",
    // Receipts (3.2), one B-tree entry per settlement and page of 32 sequence numbers
    // (`page`, `seq / 32`): keyed by the five minutes their expiry falls in (`bucket`,
    // `expires_at / 300000`), the page, and the first lock the entry holds (`seq`,
    // `lock_token`); `items` holds every lock of the settlement in that page, 24 bytes
    // each (the sequence number, 8 bytes big-endian, then the token's 16). A drain's
    // completion of 64 writes two or three entries, not 64. A replay seeks the page in
    // each bucket a live receipt can be in and looks for its lock's 24 bytes in
    // `items`; the janitor deletes whole buckets from the front of the key, so no
    // second index orders them by expiry.
    "CREATE TABLE mqlite_receipts (
    bucket     INTEGER NOT NULL,
    page       INTEGER NOT NULL,
    seq        INTEGER NOT NULL,
    lock_token TEXT NOT NULL,
    queue      TEXT NOT NULL,
    op         TEXT NOT NULL,
    args       TEXT NOT NULL,
    expires_at INTEGER NOT NULL,
    items      BLOB NOT NULL,
    PRIMARY KEY (bucket, page, seq, lock_token)
) STRICT, WITHOUT ROWID",
    "CREATE TABLE mqlite_attempts (
    queue      TEXT NOT NULL,
    attempt_id TEXT NOT NULL,
    mode       INTEGER NOT NULL,
    response   BLOB NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (queue, attempt_id)
) STRICT, WITHOUT ROWID",
    "CREATE INDEX mqlite_attempt_expiry ON mqlite_attempts(expires_at)",
    // Recurring schedules (21): `every_ms` for an interval, `cron` and `tz` for a cron
    // expression; `message` in the store kit's message codec; `next_at` is the guard a
    // fire moves on from.
    "CREATE TABLE mqlite_schedules (
    name       TEXT PRIMARY KEY,
    queue      TEXT NOT NULL,
    every_ms   INTEGER NOT NULL DEFAULT 0,
    cron       TEXT,
    tz         TEXT,
    missed     TEXT NOT NULL DEFAULT 'fire_once' CHECK (missed IN ('fire_once','skip')),
    message    BLOB NOT NULL,
    next_at    INTEGER NOT NULL,
    revision   INTEGER NOT NULL,
    fired      INTEGER NOT NULL DEFAULT 0,
    last_tick  INTEGER,
    created_at INTEGER NOT NULL
) STRICT",
    "CREATE TABLE mqlite_access_keys (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    digest      TEXT NOT NULL UNIQUE,
    permissions TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL DEFAULT 0,
    revoked_at  INTEGER NOT NULL DEFAULT 0
) STRICT",
];

/// Reads the guard token of an opened database (`None`: no `meta` table or no token).
pub const SELECT_TOKEN: &str = "SELECT value FROM mqlite_meta WHERE key = 'schema_token'";

/// Records the guard token in a freshly created schema.
pub const INSERT_TOKEN: &str =
    "INSERT INTO mqlite_meta (key, value) VALUES ('schema_token', :token)";

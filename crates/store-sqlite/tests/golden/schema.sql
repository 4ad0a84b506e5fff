-- The DDL of a fresh mqlite SQLite database, as sqlite_master holds it.
-- Checked by tests/schema_golden.rs; rewrite with MQLITE_BLESS=1.
-- schema token: mqlite-rs/2

-- index idx_attempt_expiry
CREATE INDEX idx_attempt_expiry ON receive_attempts(expires_at);

-- index idx_dedup_expiry
CREATE INDEX idx_dedup_expiry ON dedup(expires_at);

-- index idx_msg_active
CREATE INDEX idx_msg_active ON messages(queue, id) WHERE state = 'active' AND waiting = 0;

-- index idx_msg_dlq
CREATE INDEX idx_msg_dlq ON messages(queue, dead_lettered_at, id) WHERE state = 'dead_lettered';

-- index idx_msg_due
CREATE INDEX idx_msg_due ON messages(visible_at) WHERE state = 'scheduled';

-- index idx_msg_expiry
CREATE INDEX idx_msg_expiry ON messages(expires_at) WHERE expires_at > 0 AND state <> 'dead_lettered';

-- index idx_msg_lease
CREATE INDEX idx_msg_lease ON messages(locked_until) WHERE state = 'locked';

-- index idx_msg_line
CREATE INDEX idx_msg_line ON messages(queue, line, id) WHERE state <> 'dead_lettered';

-- index idx_msg_line_deferred
CREATE INDEX idx_msg_line_deferred ON messages(queue, line, id) WHERE state = 'deferred';

-- index idx_msg_line_locked
CREATE INDEX idx_msg_line_locked ON messages(queue, line, id) WHERE state = 'locked';

-- index idx_msg_line_scheduled
CREATE INDEX idx_msg_line_scheduled ON messages(queue, line, id) WHERE state = 'scheduled';

-- index idx_msg_queue
CREATE INDEX idx_msg_queue ON messages(queue, id);

-- index idx_receipt_expiry
CREATE INDEX idx_receipt_expiry ON settlement_receipts(expires_at);

-- index idx_sub_topic
CREATE INDEX idx_sub_topic ON subscriptions(topic, name);

-- table access_keys
CREATE TABLE access_keys (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    digest      TEXT NOT NULL UNIQUE,
    permissions TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL DEFAULT 0,
    revoked_at  INTEGER NOT NULL DEFAULT 0
) STRICT;

-- table dedup
CREATE TABLE dedup (
    queue      TEXT NOT NULL,
    dedup_key  TEXT NOT NULL,
    body_hash  TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (queue, dedup_key)
) STRICT, WITHOUT ROWID;

-- table messages
CREATE TABLE messages (
    id                      INTEGER PRIMARY KEY AUTOINCREMENT,
    queue                   TEXT NOT NULL REFERENCES queues(name) ON DELETE CASCADE,
    state                   TEXT NOT NULL DEFAULT 'active'
                                CHECK (state IN ('active','locked','deferred',
                                                 'scheduled','completed','dead_lettered')),
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
    dead_letter_description TEXT
) STRICT;

-- table meta
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) STRICT;

-- table queues
CREATE TABLE queues (
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
    created_at            INTEGER NOT NULL
) STRICT;

-- table receive_attempts
CREATE TABLE receive_attempts (
    queue      TEXT NOT NULL,
    attempt_id TEXT NOT NULL,
    mode       INTEGER NOT NULL,
    response   BLOB NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (queue, attempt_id)
) STRICT, WITHOUT ROWID;

-- table settlement_receipts
CREATE TABLE settlement_receipts (
    queue      TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    lock_token TEXT NOT NULL,
    op         TEXT NOT NULL,
    args       TEXT NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (queue, seq, lock_token, op, args)
) STRICT, WITHOUT ROWID;

-- table subscriptions
CREATE TABLE subscriptions (
    name       TEXT PRIMARY KEY REFERENCES queues(name) ON DELETE CASCADE,
    topic      TEXT NOT NULL REFERENCES queues(name) ON DELETE CASCADE,
    filter     TEXT NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL
) STRICT;

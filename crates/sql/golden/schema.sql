-- The DDL of a fresh mqlite SQLite database, as sqlite_master holds it.
-- Checked by tests/schema_golden.rs; rewrite with MQLITE_BLESS=1.
-- schema token: mqlite-rs/15

-- index mqlite_attempt_expiry
CREATE INDEX mqlite_attempt_expiry ON mqlite_attempts(expires_at);

-- index mqlite_dedup_expiry
CREATE INDEX mqlite_dedup_expiry ON mqlite_dedup(expires_at);

-- index mqlite_inbox_applied
CREATE INDEX mqlite_inbox_applied ON mqlite_inbox(applied_at);

-- index mqlite_msg_active
CREATE INDEX mqlite_msg_active ON mqlite_messages(queue, id) WHERE state = 0 AND waiting = 0 AND priority = 0;

-- index mqlite_msg_dlq
CREATE INDEX mqlite_msg_dlq ON mqlite_messages(queue, dead_lettered_at, id) WHERE state = 5;

-- index mqlite_msg_due
CREATE INDEX mqlite_msg_due ON mqlite_messages(visible_at) WHERE state = 3;

-- index mqlite_msg_expiry
CREATE INDEX mqlite_msg_expiry ON mqlite_messages(expires_at) WHERE expires_at > 0 AND state <> 5;

-- index mqlite_msg_lease
CREATE INDEX mqlite_msg_lease ON mqlite_messages(queue, locked_until) WHERE state = 1;

-- index mqlite_msg_line
CREATE INDEX mqlite_msg_line ON mqlite_messages(queue, line, id) WHERE line IS NOT NULL AND state <> 5;

-- index mqlite_msg_line_deferred
CREATE INDEX mqlite_msg_line_deferred ON mqlite_messages(queue, line, id) WHERE state = 2 AND line IS NOT NULL;

-- index mqlite_msg_line_locked
CREATE INDEX mqlite_msg_line_locked ON mqlite_messages(queue, line, id) WHERE state = 1 AND line IS NOT NULL;

-- index mqlite_msg_line_scheduled
CREATE INDEX mqlite_msg_line_scheduled ON mqlite_messages(queue, line, id) WHERE state = 3 AND line IS NOT NULL;

-- index mqlite_msg_priority
CREATE INDEX mqlite_msg_priority ON mqlite_messages(queue, priority DESC, id) WHERE state = 0 AND waiting = 0 AND priority > 0;

-- index mqlite_msg_rest
CREATE INDEX mqlite_msg_rest ON mqlite_messages(queue, id) WHERE (state <> 0 OR waiting <> 0 OR priority > 0) AND state <> 1;

-- index mqlite_relay_event
CREATE INDEX mqlite_relay_event ON mqlite_relay(source, id);

-- index mqlite_relay_pending
CREATE INDEX mqlite_relay_pending ON mqlite_relay(seq) WHERE published_at = 0 AND refused_at = 0;

-- index mqlite_relay_published
CREATE INDEX mqlite_relay_published ON mqlite_relay(published_at) WHERE published_at > 0;

-- index mqlite_relay_refused
CREATE INDEX mqlite_relay_refused ON mqlite_relay(seq) WHERE refused_at > 0;

-- index mqlite_sub_topic
CREATE INDEX mqlite_sub_topic ON mqlite_subscriptions(topic, name);

-- table mqlite_access_keys
CREATE TABLE mqlite_access_keys (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    digest      TEXT NOT NULL UNIQUE,
    permissions TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL DEFAULT 0,
    revoked_at  INTEGER NOT NULL DEFAULT 0
) STRICT;

-- table mqlite_attempts
CREATE TABLE mqlite_attempts (
    queue      TEXT NOT NULL,
    attempt_id TEXT NOT NULL,
    mode       INTEGER NOT NULL,
    response   BLOB NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (queue, attempt_id)
) STRICT, WITHOUT ROWID;

-- table mqlite_dedup
CREATE TABLE mqlite_dedup (
    queue      TEXT NOT NULL,
    dedup_key  TEXT NOT NULL,
    body_hash  TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (queue, dedup_key)
) STRICT, WITHOUT ROWID;

-- table mqlite_inbox
CREATE TABLE mqlite_inbox (
    source      TEXT NOT NULL,
    id          TEXT NOT NULL,
    consumer    TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    applied_at  INTEGER NOT NULL,
    PRIMARY KEY (source, id, consumer)
) STRICT, WITHOUT ROWID;

-- table mqlite_messages
CREATE TABLE mqlite_messages (
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
) STRICT;

-- table mqlite_meta
CREATE TABLE mqlite_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) STRICT;

-- table mqlite_queues
CREATE TABLE mqlite_queues (
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
) STRICT;

-- table mqlite_receipts
CREATE TABLE mqlite_receipts (
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
) STRICT, WITHOUT ROWID;

-- table mqlite_relay
CREATE TABLE mqlite_relay (
    seq          INTEGER PRIMARY KEY,
    queue        TEXT NOT NULL,
    source       TEXT NOT NULL,
    id           TEXT NOT NULL,
    message      BLOB NOT NULL,
    created_at   INTEGER NOT NULL,
    published_at INTEGER NOT NULL DEFAULT 0,
    refused_at   INTEGER NOT NULL DEFAULT 0
) STRICT;

-- table mqlite_schedules
CREATE TABLE mqlite_schedules (
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
) STRICT;

-- table mqlite_subscriptions
CREATE TABLE mqlite_subscriptions (
    name       TEXT PRIMARY KEY REFERENCES mqlite_queues(name) ON DELETE CASCADE,
    topic      TEXT NOT NULL REFERENCES mqlite_queues(name) ON DELETE CASCADE,
    filter     TEXT NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL
) STRICT;

-- trigger mqlite_seq_floor
CREATE TRIGGER mqlite_seq_floor AFTER DELETE ON mqlite_messages WHEN old.id > coalesce((SELECT max(id) FROM mqlite_messages), 0) BEGIN
INSERT INTO mqlite_meta(KEY, value) VALUES('seq_floor', old.id) ON CONFLICT(KEY) DO UPDATE SET value = excluded.value WHERE CAST(value AS INTEGER) < CAST(excluded.value AS INTEGER);
END;

-- view mqlite_heads
CREATE VIEW mqlite_heads AS SELECT m.id, m.queue, m.priority, m.visible_at, m.expires_at FROM mqlite_messages m WHERE m.state = 0 AND m.waiting = 0 AND (m.line IS NULL OR NOT (EXISTS (SELECT 1 FROM mqlite_messages b WHERE b.queue = m.queue AND b.line = m.line AND b.state = 1 AND b.id < m.id) OR EXISTS (SELECT 1 FROM mqlite_messages b WHERE b.queue = m.queue AND b.line = m.line AND b.state = 2 AND b.id < m.id) OR EXISTS (SELECT 1 FROM mqlite_messages b WHERE b.queue = m.queue AND b.line = m.line AND b.state = 3 AND b.id < m.id)));

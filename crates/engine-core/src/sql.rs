//! The canonical SQL text, kept in one place so that every SQL store (the local rusqlite
//! store now, the remote libSQL store later) runs the same schema and statements.
//!
//! Each statement's comment names the promise it keeps and why it is shaped as it is.
//! The plan-pinning tests of the SQL stores run `EXPLAIN QUERY PLAN` over these texts.

/// The schema guard token stored in `meta`. Open refuses any other (10.2); an
/// incompatible layout change must change this token, never migrate in place.
pub const SCHEMA_TOKEN: &str = "mqlite-rs/1";

/// The eight STRICT tables and their partial indexes, in creation order.
///
/// `messages.line` is a message's ordering line: its group id on standard and group_fifo
/// queues, `''` (one line for the whole queue) on strict_fifo, NULL when unordered.
/// `messages.waiting` is 1 while an older message of the same line is still in play
/// (active, locked, deferred or scheduled); only the line's head has 0, so a claim never
/// walks a blocked backlog (5.6). The head-of-line probes in [`CLAIM`] check the same
/// rule from the other side.
pub const SCHEMA: &[&str] = &[
    "CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) STRICT",
    "CREATE TABLE queues (
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
) STRICT",
    "CREATE TABLE subscriptions (
    name       TEXT PRIMARY KEY REFERENCES queues(name) ON DELETE CASCADE,
    topic      TEXT NOT NULL REFERENCES queues(name) ON DELETE CASCADE,
    filter     TEXT NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL
) STRICT",
    "CREATE TABLE messages (
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
) STRICT",
    // The claim seeks this index: only claimable-shaped rows live in it (1.5).
    "CREATE INDEX idx_msg_active ON messages(queue, id) WHERE state = 'active' AND waiting = 0",
    // One index per blocking state for the head-of-line probes (5.6).
    "CREATE INDEX idx_msg_line_locked ON messages(queue, line, id) WHERE state = 'locked'",
    "CREATE INDEX idx_msg_line_deferred ON messages(queue, line, id) WHERE state = 'deferred'",
    "CREATE INDEX idx_msg_line_scheduled ON messages(queue, line, id) WHERE state = 'scheduled'",
    // Every row still in play per line: who waits behind whom.
    "CREATE INDEX idx_msg_line ON messages(queue, line, id) WHERE state <> 'dead_lettered'",
    // The reaper: leases by expiry.
    "CREATE INDEX idx_msg_lease ON messages(locked_until) WHERE state = 'locked'",
    // The scheduler: scheduled rows by due time.
    "CREATE INDEX idx_msg_due ON messages(visible_at) WHERE state = 'scheduled'",
    // The TTL sweep: deadlines of rows not yet dead-lettered.
    "CREATE INDEX idx_msg_expiry ON messages(expires_at) WHERE expires_at > 0 AND state <> 'dead_lettered'",
    // Dead letters per queue, oldest first (peek, redrive, purge, retention).
    "CREATE INDEX idx_msg_dlq ON messages(queue, dead_lettered_at, id) WHERE state = 'dead_lettered'",
    "CREATE TABLE dedup (
    queue      TEXT NOT NULL,
    dedup_key  TEXT NOT NULL,
    body_hash  TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (queue, dedup_key)
) STRICT, WITHOUT ROWID",
    "CREATE INDEX idx_dedup_expiry ON dedup(expires_at)",
    "CREATE TABLE settlement_receipts (
    queue      TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    lock_token TEXT NOT NULL,
    op         TEXT NOT NULL,
    args       TEXT NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (queue, seq, lock_token, op, args)
) STRICT, WITHOUT ROWID",
    "CREATE INDEX idx_receipt_expiry ON settlement_receipts(expires_at)",
    "CREATE TABLE receive_attempts (
    queue      TEXT NOT NULL,
    attempt_id TEXT NOT NULL,
    mode       INTEGER NOT NULL,
    response   BLOB NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (queue, attempt_id)
) STRICT, WITHOUT ROWID",
    "CREATE INDEX idx_attempt_expiry ON receive_attempts(expires_at)",
    "CREATE TABLE access_keys (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    digest      TEXT NOT NULL UNIQUE,
    permissions TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL DEFAULT 0,
    revoked_at  INTEGER NOT NULL DEFAULT 0
) STRICT",
];

/// The message columns as a literal, so that every statement returning messages can
/// splice them in with `concat!` and the decoder's order has one definition.
macro_rules! message_columns {
    () => {
        "id, delivery_count, lock_token, state, enqueued_at, expires_at, visible_at, \
         locked_until, dead_letter_reason, dead_letter_description, body, message_id, \
         group_id, subject, correlation_id, reply_to, content_type, properties"
    };
}

/// The columns every message read returns, in the order the stores decode them.
pub const MESSAGE_COLUMNS: &str = message_columns!();

/// The claim: one statement picks the eligible head and locks it (1.1–1.3, 5.1–5.5).
///
/// The inner SELECT seeks `idx_msg_active`; the probes are one EXISTS per blocking state
/// so that each matches its own partial index (5.6). The locked probe deliberately
/// ignores `locked_until`: an expired but unreaped lease still holds its line (5.4).
pub const CLAIM: &str = concat!(
    "UPDATE messages
   SET state = 'locked',
       locked_until = :now + :lock_ms,
       lock_token = :token,
       delivery_count = delivery_count + 1
 WHERE id = (
       SELECT m.id FROM messages m
        WHERE m.queue = :queue AND m.state = 'active' AND m.waiting = 0
          AND m.visible_at <= :now
          AND (m.expires_at = 0 OR m.expires_at > :now)
          AND (m.line IS NULL OR NOT (
                  EXISTS (SELECT 1 FROM messages b WHERE b.queue = m.queue
                            AND b.line = m.line AND b.state = 'locked' AND b.id < m.id)
               OR EXISTS (SELECT 1 FROM messages b WHERE b.queue = m.queue
                            AND b.line = m.line AND b.state = 'deferred' AND b.id < m.id)
               OR EXISTS (SELECT 1 FROM messages b WHERE b.queue = m.queue
                            AND b.line = m.line AND b.state = 'scheduled' AND b.id < m.id)))
        ORDER BY m.id ASC
        LIMIT 1)
RETURNING ",
    message_columns!(),
    ", line"
);

/// Whether a line already has a row in play (a new message of that line waits).
pub const LINE_BUSY: &str = "SELECT EXISTS (SELECT 1 FROM messages
    WHERE queue = :queue AND line = :line AND state <> 'dead_lettered')";

/// After a line's head leaves play (completed, dead-lettered, discarded, cancelled), the
/// oldest row still in play becomes the head. Only a departing head calls this (every
/// other row of its line waits), so it is one seek of `idx_msg_line`, never a walk of
/// the line (5.6).
pub const RELEASE_LINE: &str = "UPDATE messages SET waiting = 0
 WHERE id = (SELECT id FROM messages
              WHERE queue = :queue AND line = :line AND state <> 'dead_lettered'
              ORDER BY id LIMIT 1)
   AND waiting = 1";

/// The reaper and the orphan sweep, first half (1.4, 3.1): expired leases at the
/// delivery bound are dead-lettered. `:cutoff` is `now` for the reaper (equality at the
/// deadline is already expired) and the largest integer at open, where every lock is an
/// orphan. Found by `idx_msg_lease`.
pub const REAP_TO_DLQ: &str = "UPDATE messages
   SET state = 'dead_lettered', dead_letter_reason = 'MaxDeliveryCountExceeded',
       dead_letter_description = 'the lease expired on the final allowed delivery',
       dead_lettered_at = :now, lock_token = NULL, locked_until = 0
 WHERE state = 'locked' AND locked_until <= :cutoff
   AND delivery_count >= (SELECT q.max_delivery_count FROM queues q WHERE q.name = messages.queue)
RETURNING queue, line, waiting";

/// The reaper, second half: the remaining expired leases go back to active.
pub const REAP_TO_ACTIVE: &str = "UPDATE messages
   SET state = 'active', lock_token = NULL, locked_until = 0
 WHERE state = 'locked' AND locked_until <= :cutoff";

/// The scheduler (7.1): due rows, found by `idx_msg_due`, become active.
pub const ACTIVATE_DUE: &str = "UPDATE messages SET state = 'active'
 WHERE state = 'scheduled' AND visible_at <= :now";

/// TTL (7.2): expired rows not yet dead-lettered, found by `idx_msg_expiry`.
pub const SELECT_EXPIRED: &str = "SELECT m.id, m.queue, m.line, m.waiting, q.dead_letter_on_expire
  FROM messages m JOIN queues q ON q.name = m.queue
 WHERE m.expires_at > 0 AND m.state <> 'dead_lettered' AND m.expires_at <= :now
 ORDER BY m.expires_at LIMIT 512";

/// TTL, dead-letter branch.
pub const EXPIRE_TO_DLQ: &str = "UPDATE messages
   SET state = 'dead_lettered', dead_letter_reason = 'TTLExpiredException',
       dead_letter_description = 'the message expired before it was completed',
       dead_lettered_at = :now, lock_token = NULL, locked_until = 0
 WHERE id = :id";

/// Deletes one message by id (TTL discard; receive-and-delete).
pub const DELETE_BY_ID: &str = "DELETE FROM messages WHERE id = :id";

/// A queue's configuration.
pub const SELECT_QUEUE: &str = "SELECT kind, lock_duration_ms, max_delivery_count,
       default_ttl_ms, dead_letter_on_expire, dedup_window_ms, ordering_mode,
       dlq_max_age_ms, dlq_max_count, dlq_max_bytes
  FROM queues WHERE name = :name";

/// The kind and ordering mode of a queue (the upsert's checks, 12.1 and 5.x).
pub const SELECT_QUEUE_KIND: &str = "SELECT kind, ordering_mode FROM queues WHERE name = :name";

/// Every queue's dead-letter bounds (retention, 8.1–8.3).
pub const RETENTION_BOUNDS: &str =
    "SELECT name, dlq_max_age_ms, dlq_max_count, dlq_max_bytes FROM queues";

/// Browsing from a sequence number, optionally in one state (6.2).
pub const PEEK: &str = concat!(
    "SELECT ",
    message_columns!(),
    " FROM messages
 WHERE queue = :queue AND id >= :from AND (:state IS NULL OR state = :state)
 ORDER BY id LIMIT :max"
);

/// Every queue, by name.
pub const LIST_QUEUES: &str = "SELECT name, kind, lock_duration_ms, max_delivery_count,
       default_ttl_ms, dead_letter_on_expire, dedup_window_ms, ordering_mode,
       dlq_max_age_ms, dlq_max_count, dlq_max_bytes
  FROM queues ORDER BY name";

/// Create-or-update of a queue (the kind was checked first: 12.1).
pub const UPSERT_QUEUE: &str = "INSERT INTO queues (name, kind, lock_duration_ms,
       max_delivery_count, default_ttl_ms, dead_letter_on_expire, dedup_window_ms,
       ordering_mode, dlq_max_age_ms, dlq_max_count, dlq_max_bytes, created_at)
VALUES (:name, :kind, :lock_ms, :max_dc, :ttl, :dloe, :dedup, :mode, :age, :count, :bytes, :now)
ON CONFLICT (name) DO UPDATE SET
       lock_duration_ms = excluded.lock_duration_ms,
       max_delivery_count = excluded.max_delivery_count,
       default_ttl_ms = excluded.default_ttl_ms,
       dead_letter_on_expire = excluded.dead_letter_on_expire,
       dedup_window_ms = excluded.dedup_window_ms,
       ordering_mode = excluded.ordering_mode,
       dlq_max_age_ms = excluded.dlq_max_age_ms,
       dlq_max_count = excluded.dlq_max_count,
       dlq_max_bytes = excluded.dlq_max_bytes";

/// Whether a queue holds a message in play (its ordering mode is then fixed).
pub const QUEUE_IN_PLAY: &str = "SELECT EXISTS (SELECT 1 FROM messages
    WHERE queue = :queue AND state <> 'dead_lettered')";

/// Everything a queue owns, deleted with it (children first).
pub const DELETE_QUEUE: &[&str] = &[
    "DELETE FROM messages WHERE queue = :name",
    "DELETE FROM dedup WHERE queue = :name",
    "DELETE FROM settlement_receipts WHERE queue = :name",
    "DELETE FROM receive_attempts WHERE queue = :name",
    "DELETE FROM subscriptions WHERE name = :name OR topic = :name",
    "DELETE FROM queues WHERE name = :name",
];

/// One message stored (G1: the rowid is the sequence number).
pub const INSERT_MESSAGE: &str = "INSERT INTO messages (queue, state, line, waiting,
       enqueued_at, visible_at, expires_at, body, message_id, group_id, subject,
       correlation_id, reply_to, content_type, properties)
VALUES (:queue, :state, :line, :waiting, :now, :visible_at, :expires_at, :body,
        :message_id, :group_id, :subject, :correlation_id, :reply_to, :content_type,
        :properties)
RETURNING id";

/// A live dedup entry for a key (4.1).
pub const DEDUP_LOOKUP: &str = "SELECT seq, body_hash FROM dedup
 WHERE queue = :queue AND dedup_key = :key AND expires_at > :now";

/// Records the dedup entry of a fresh enqueue; an expired entry for the key is replaced.
pub const DEDUP_INSERT: &str = "INSERT OR REPLACE INTO dedup
       (queue, dedup_key, body_hash, seq, expires_at)
VALUES (:queue, :key, :hash, :seq, :expires_at)";

/// Settlement fence (2.6): the token, the locked state and a live lease, at statement
/// time. Complete deletes (2.1).
pub const SETTLE_COMPLETE: &str = "DELETE FROM messages
 WHERE id = :seq AND queue = :queue AND lock_token = :token
   AND state = 'locked' AND locked_until > :now
RETURNING line, waiting";

/// Abandon (2.2): back to active, parked in scheduled for a delay (holding its line), or
/// dead-lettered at the delivery bound.
pub const SETTLE_ABANDON: &str = "UPDATE messages
   SET state = CASE WHEN delivery_count >= :max_dc THEN 'dead_lettered'
                    WHEN :delay_ms > 0 THEN 'scheduled' ELSE 'active' END,
       visible_at = CASE WHEN :delay_ms > 0 THEN :now + :delay_ms ELSE visible_at END,
       dead_letter_reason = CASE WHEN delivery_count >= :max_dc
                    THEN 'MaxDeliveryCountExceeded' ELSE dead_letter_reason END,
       dead_letter_description = CASE WHEN delivery_count >= :max_dc
                    THEN 'abandoned on the final allowed delivery'
                    ELSE dead_letter_description END,
       dead_lettered_at = CASE WHEN delivery_count >= :max_dc THEN :now ELSE 0 END,
       lock_token = NULL, locked_until = 0
 WHERE id = :seq AND queue = :queue AND lock_token = :token
   AND state = 'locked' AND locked_until > :now
RETURNING line, waiting, state";

/// Reject (2.3): dead-lettered with the caller's reason.
pub const SETTLE_REJECT: &str = "UPDATE messages
   SET state = 'dead_lettered', dead_letter_reason = :reason,
       dead_letter_description = :description, dead_lettered_at = :now,
       lock_token = NULL, locked_until = 0
 WHERE id = :seq AND queue = :queue AND lock_token = :token
   AND state = 'locked' AND locked_until > :now
RETURNING line, waiting, state";

/// Defer (2.4): set aside; it keeps its place at the head of its line.
pub const SETTLE_DEFER: &str = "UPDATE messages
   SET state = 'deferred', lock_token = NULL, locked_until = 0
 WHERE id = :seq AND queue = :queue AND lock_token = :token
   AND state = 'locked' AND locked_until > :now
RETURNING line, waiting, state";

/// A settlement receipt, written in the settlement's own transaction (3.2).
pub const RECEIPT_INSERT: &str = "INSERT OR REPLACE INTO settlement_receipts
       (queue, seq, lock_token, op, args, expires_at)
VALUES (:queue, :seq, :token, :op, :args, :expires_at)";

/// Whether an identical request has a live receipt; expiry is checked here, at
/// statement time, not by the janitor (3.2).
pub const RECEIPT_LOOKUP: &str = "SELECT EXISTS (SELECT 1 FROM settlement_receipts
 WHERE queue = :queue AND seq = :seq AND lock_token = :token AND op = :op
   AND args = :args AND expires_at > :now)";

/// ReceiveDeferred (2.4): a deferred row, locked under a fresh token.
pub const CLAIM_DEFERRED: &str = concat!(
    "UPDATE messages
   SET state = 'locked', locked_until = :now + :lock_ms, lock_token = :token,
       delivery_count = delivery_count + 1
 WHERE id = :seq AND queue = :queue AND state = 'deferred'
   AND (expires_at = 0 OR expires_at > :now)
RETURNING ",
    message_columns!()
);

/// Cancel (7.1): only a scheduled message that was never delivered; a backoff-parked
/// redelivery has a delivery count and stays.
pub const CANCEL_SCHEDULED: &str = "DELETE FROM messages
 WHERE id = :seq AND queue = :queue AND state = 'scheduled' AND delivery_count = 0
RETURNING line, waiting";

/// Receive attempt replay (3.3).
pub const ATTEMPT_LOOKUP: &str = "SELECT mode, response FROM receive_attempts
 WHERE queue = :queue AND attempt_id = :attempt AND expires_at > :now";

/// Receive attempt record, in the claim's transaction (3.3).
pub const ATTEMPT_INSERT: &str = "INSERT OR REPLACE INTO receive_attempts
       (queue, attempt_id, mode, response, expires_at)
VALUES (:queue, :attempt, :mode, :response, :expires_at)";

/// The janitor: expired receipts, attempts and dedup entries.
pub const JANITOR: &[&str] = &[
    "DELETE FROM settlement_receipts WHERE expires_at <= :now",
    "DELETE FROM receive_attempts WHERE expires_at <= :now",
    "DELETE FROM dedup WHERE expires_at <= :now",
];

/// Dead letters of a queue, oldest first, dead-lettered at or before `:cutoff`: id,
/// group and body size (redrive, purge, retention; found by `idx_msg_dlq`).
pub const SELECT_DLQ: &str = "SELECT id, group_id, length(body) FROM messages
 WHERE queue = :queue AND state = 'dead_lettered' AND dead_lettered_at <= :cutoff
 ORDER BY dead_lettered_at, id LIMIT :limit";

/// Redrive (6.2): back to active with the count reset, in the target queue's line.
pub const REDRIVE_ONE: &str = "UPDATE messages
   SET queue = :target, state = 'active', line = :line, waiting = :waiting,
       delivery_count = 0, dead_letter_reason = NULL, dead_letter_description = NULL,
       dead_lettered_at = 0, visible_at = :now, expires_at = 0, lock_token = NULL,
       locked_until = 0
 WHERE id = :id AND state = 'dead_lettered'";

/// Dead-letter count and bytes of a queue (retention, 8.1).
pub const DLQ_TOTALS: &str = "SELECT count(*), coalesce(sum(length(body)), 0) FROM messages
 WHERE queue = :queue AND state = 'dead_lettered'";

/// Stats of one queue: rows in play, locked, deferred, scheduled, dead letters, and the
/// oldest enqueue time in play. Each count names its state as a literal so that it walks
/// that state's partial index (no scan of messages); active = in play - the others.
pub const QUEUE_STATS: &str = "SELECT
    (SELECT count(*) FROM messages WHERE queue = :queue AND state <> 'dead_lettered'),
    (SELECT count(*) FROM messages WHERE queue = :queue AND state = 'locked'),
    (SELECT count(*) FROM messages WHERE queue = :queue AND state = 'deferred'),
    (SELECT count(*) FROM messages WHERE queue = :queue AND state = 'scheduled'),
    (SELECT count(*) FROM messages WHERE queue = :queue AND state = 'dead_lettered'),
    (SELECT min(enqueued_at) FROM messages WHERE queue = :queue AND state <> 'dead_lettered')";

/// RenewBatch (2.5, 2.8) for `items` pairs, one statement: positional parameters are
/// `?1` now, `?2` the lock duration, `?3` the queue, then (seq, token) pairs. A lease is
/// extended to `max(locked_until, now + lock)`: never revived, never shortened.
pub fn renew_batch(items: usize) -> String {
    let pairs = vec!["(?, ?)"; items.max(1)].join(", ");
    format!(
        "UPDATE messages SET locked_until = max(locked_until, ?1 + ?2)
  WHERE queue = ?3 AND state = 'locked' AND locked_until > ?1
    AND (id, lock_token) IN (VALUES {pairs})
RETURNING id, lock_token, locked_until"
    )
}

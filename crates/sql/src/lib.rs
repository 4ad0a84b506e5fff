//! What mqlite's SQL stores share: the canonical schema and its guard token, every
//! statement, and the operation flows between statements, written once over the
//! [`SqlExec`] seam so that the local SQLite store and the remote libSQL store run the
//! same operations.
//!
//! Each statement's comment names the promise it keeps and why it is shaped as it is.
//! Every operation costs a fixed, small number of statements, independent of its batch
//! size: a batch of messages is one multi-row INSERT (values bound by position),
//! other batches travel as one JSON array parameter (`json_each`). [`STATEMENTS`] lists
//! every statement for the stores' plan-pinning tests.
//!
//! The flows are generic over the driver, so their futures are `Send` exactly when the
//! driver's are (auto traits leak through the concrete driver's futures): a remote
//! driver with `Send` futures awaits them on the executor, and the rusqlite driver,
//! whose connection is not `Sync`, drives them on its own writer thread. Hence
//! `clippy::future_not_send` is allowed here and nowhere else.
#![allow(clippy::future_not_send)]

/// The message columns as a literal, so that every statement returning messages can
/// splice them in with `concat!` and [`rows::message`]'s order has one definition.
macro_rules! message_columns {
    () => {
        "id, delivery_count, lock_token, state, enqueued_at, expires_at, visible_at, \
         locked_until, dead_letter_reason, dead_letter_description, body, message_id, \
         group_id, subject, correlation_id, reply_to, content_type, properties, event, \
         priority"
    };
}

/// The names of the message columns ([`claim::CLAIM_ONE`] returns them), in the order
/// a message row is decoded in: a driver that asks for every column
/// ([`claim::CLAIM_ONE_OWNED_ALL`]) puts its answer's columns in this order by name.
pub static MESSAGE_COLUMNS: std::sync::LazyLock<Vec<&'static str>> =
    std::sync::LazyLock::new(|| message_columns!().split(',').map(str::trim).collect());

/// The queue columns [`rows::queue_row`] decodes, in its order.
macro_rules! queue_columns {
    () => {
        "kind, lock_duration_ms, max_delivery_count, default_ttl_ms, dead_letter_on_expire, \
         dedup_window_ms, ordering_mode, dlq_max_age_ms, dlq_max_count, dlq_max_bytes, \
         dead_letter_target, require_message_id, status"
    };
}

/// The settlement fence (2.6): the row is locked, in this queue, under a live lease at
/// statement time (equality at the deadline is already expired). The token is matched
/// next to it, per statement. `+queue` keeps the planner on the rows' ids: the terms
/// would otherwise match `mqlite_msg_lease (queue, locked_until)` and walk every live
/// lease of the queue.
macro_rules! fence {
    () => {
        fence!(":queue", ":now")
    };
    ($queue:literal, $now:literal) => {
        concat!(
            "+queue = ",
            $queue,
            " AND state = 1 AND locked_until > ",
            $now
        )
    };
}

/// Holds while the owner epoch in force (`mqlite_meta`'s `owner_epoch`, which a remote
/// store's owner lease raises at each takeover) is `:epoch`: the check such a store
/// folds into a statement its request sends anyway, where it would otherwise send a
/// guard statement of its own ([`enqueue::INSERT_ONE_OWNED`],
/// [`exec::REFUSE_UNLESS_CHANGED_OWNED`]).
macro_rules! owner_holds {
    () => {
        "EXISTS (SELECT 1 FROM mqlite_meta WHERE key = 'owner_epoch' AND value = :epoch)"
    };
}

/// 0 while the owner epoch in force is `:epoch`; otherwise its evaluation fails the
/// statement ([`exec::OWNER_REFUSED`]: `json` refuses the text `{`). Added to a value
/// the statement computes once, it makes the statement fail for a deposed owner
/// whether or not it would have found a row ([`claim::CLAIM_ONE_OWNED`]).
macro_rules! owner_zero {
    () => {
        "json(coalesce((SELECT '0' FROM mqlite_meta \
         WHERE key = 'owner_epoch' AND value = :epoch), '{'))"
    };
}

/// The rule that makes a row of `mqlite_heads` ([`line_free!`]) an eligible head (1.1,
/// 5.1–5.5): visible and unexpired at `:now`.
macro_rules! head_rule {
    () => {
        "m.visible_at <= :now AND (m.expires_at = 0 OR m.expires_at > :now)"
    };
}

/// The line half of the head rule, over a row `m` of `mqlite_messages`, and the text of
/// the schema's view `mqlite_heads` (the active `waiting = 0` rows it admits): the rule
/// of `waiting` from the other side, no older member of its line locked, deferred or
/// parked. One EXISTS per blocking state, so that each matches its own partial index.
/// The locked probe ignores `locked_until`: an expired but unreaped lease still holds
/// its line (5.4).
macro_rules! line_free {
    () => {
        "(m.line IS NULL OR NOT (\
         EXISTS (SELECT 1 FROM mqlite_messages b WHERE b.queue = m.queue \
                   AND b.line = m.line AND b.state = 1 AND b.id < m.id) \
         OR EXISTS (SELECT 1 FROM mqlite_messages b WHERE b.queue = m.queue \
                   AND b.line = m.line AND b.state = 2 AND b.id < m.id) \
         OR EXISTS (SELECT 1 FROM mqlite_messages b WHERE b.queue = m.queue \
                   AND b.line = m.line AND b.state = 3 AND b.id < m.id)))"
    };
}

/// The eligible heads of a queue in claim order, at most `:max`: the highest priority
/// first, oldest first within one (20.1). Active, `waiting = 0` rows only (so the
/// seeks never walk a blocked backlog, 5.6), from two indexes: the first `:max` of
/// `mqlite_msg_priority` (priority above 0, highest first) and the first `:max` of
/// `mqlite_msg_active` (priority 0, oldest first), merged.
macro_rules! pick_heads {
    () => {
        concat!(
            "SELECT id FROM (
    SELECT id, priority FROM (",
            priority_heads!("m.id, m.priority", ":max"),
            ")
    UNION ALL
    SELECT id, priority FROM (",
            plain_heads!("m.id, m.priority", ":max"),
            "))
 ORDER BY priority DESC, id LIMIT :max"
        )
    };
}

/// The first `$limit` eligible heads of a priority above 0, highest first (then
/// oldest), as `$cols` of `mqlite_heads m`: the arm of [`pick_heads!`] and
/// [`pick_one!`] that seeks `mqlite_msg_priority`.
macro_rules! priority_heads {
    ($cols:literal, $limit:literal) => {
        concat!(
            "SELECT ",
            $cols,
            " FROM mqlite_heads m
        WHERE m.queue = :queue AND m.priority > 0 AND ",
            head_rule!(),
            "
        ORDER BY m.priority DESC, m.id LIMIT ",
            $limit
        )
    };
}

/// The first `$limit` eligible heads of priority 0, oldest first, as `$cols` of
/// `mqlite_heads m`: the arm of [`pick_heads!`] and [`pick_one!`] that seeks
/// `mqlite_msg_active`.
macro_rules! plain_heads {
    ($cols:literal, $limit:literal) => {
        concat!(
            "SELECT ",
            $cols,
            " FROM mqlite_heads m
        WHERE m.queue = :queue AND m.priority = 0 AND ",
            head_rule!(),
            "
        ORDER BY m.id LIMIT ",
            $limit
        )
    };
}

/// The id of the one eligible head [`pick_heads!`] with `:max` 1 would pick: the first
/// of the priority arm, else the first of the plain one (every row of the first ranks
/// above every row of the second). Each arm is a scalar subquery that stops at its
/// first row, and `coalesce` runs the second only when the first found none: no union
/// to sort again, no list of ids to build (a scratch loop on the store's settings: the
/// claim of one, lock and all, 12.3 → 10.6 µs).
macro_rules! pick_one {
    () => {
        concat!(
            "coalesce((",
            priority_heads!("m.id", "1"),
            "),
    (",
            plain_heads!("m.id", "1"),
            "))"
        )
    };
}

/// The predicates of `mqlite_msg_active` and `mqlite_msg_rest`, which with
/// `mqlite_msg_lease` (`state = 1`, locked) hold each message of a queue once: written
/// once for the schema and for every statement that walks a queue's rows (Peek, stats,
/// the in-play check, deleting a queue), since SQLite uses a partial index only for a
/// query whose terms imply its predicate.
/// (The schema and the views hold these texts, so they carry no comments: the state
/// numbers are `crate::rows::state_code`'s, 0 active and 1 locked.)
macro_rules! active_rows {
    () => {
        "state = 0 AND waiting = 0 AND priority = 0"
    };
}

/// See [`active_rows!`].
macro_rules! rest_rows {
    () => {
        "(state <> 0 OR waiting <> 0 OR priority > 0) AND state <> 1"
    };
}

/// The sequence number the next message takes: above both the largest number present
/// and the `seq_floor` that the `mqlite_seq_floor` trigger records when the largest row
/// is deleted, so numbers never repeat (G1) without AUTOINCREMENT's `sqlite_sequence`
/// row rewritten on every insert. Read inside the send's own transaction, which the one
/// writer holds.
macro_rules! next_seq {
    () => {
        "max(coalesce((SELECT max(id) FROM mqlite_messages), 0),
            coalesce((SELECT CAST(value AS INTEGER) FROM mqlite_meta
                       WHERE key = 'seq_floor'), 0)) + 1"
    };
}

/// The width of a receipt's bucket in ms, as SQL text: a receipt is kept in the bucket
/// of its expiry, `expires_at / 300000` (see the schema's `mqlite_receipts`;
/// `settle::RECEIPT_BUCKET_MS` is the same number).
macro_rules! receipt_bucket {
    () => {
        "300000"
    };
}

/// How many sequence numbers one receipt entry's page spans, as SQL text (see the
/// schema's `mqlite_receipts`; `settle::RECEIPT_PAGE` is the same number).
macro_rules! receipt_page {
    () => {
        "32"
    };
}

pub mod admin;
pub mod claim;
pub mod enqueue;
pub mod exec;
pub mod golden;
pub mod keys;
pub mod layouts;
pub mod line;
pub mod plan;
pub mod rows;
pub mod schedules;
pub mod schema;
pub mod settle;
pub mod side_tables;
mod store_ops;
pub mod sweeps;
pub mod topics;
pub mod values;

pub use exec::{
    Columns, Executed, KnownQueues, Numbered, OWNER_REFUSED, Params, QueueRow,
    REFUSE_UNLESS_CHANGED, REFUSE_UNLESS_CHANGED_OWNED, Row, STEP_REFUSED, SqlExec, Value,
};
/// The contract, for [`store_ops!`]'s expansion.
#[doc(hidden)]
pub use mqlite_contract as core;
pub use schema::{SCHEMA, SCHEMA_TOKEN};

/// The size [`store_ops!`] gives a call whose work its caller does not bound (a scan,
/// a sweep, a purge): a local store runs it off the caller's thread.
pub const LONG: usize = usize::MAX;

/// Every statement the flows run, by name, for the plan pins: the fixed texts of
/// [`FIXED_STATEMENTS`] and each size of the statements over rows of bound values
/// ([`values`]).
pub static STATEMENTS: std::sync::LazyLock<Vec<(&'static str, &'static str)>> =
    std::sync::LazyLock::new(|| {
        let sized = [
            ("INSERT_ROWS", &enqueue::INSERT_ROWS),
            ("INSERT_ROWS_NEXT", &enqueue::INSERT_ROWS_NEXT),
            ("INSERT_ROWS_NEXT_PLAIN", &enqueue::INSERT_ROWS_NEXT_PLAIN),
            ("INSERT_ROWS_NEXT_BODIES", &enqueue::INSERT_ROWS_NEXT_BODIES),
            ("INSERT_ROWS_AT_BODIES", &enqueue::INSERT_ROWS_AT_BODIES),
            ("LOCK_PICKED", &claim::LOCK_PICKED),
            ("LOCK_PICKED_PLAIN", &claim::LOCK_PICKED_PLAIN),
            ("COMPLETE_ROWS", &settle::COMPLETE_ROWS),
            ("RENEW_ROWS", &settle::RENEW_ROWS),
            ("RECEIPT_ROWS", &settle::RECEIPT_ROWS),
            ("COMPLETE_UNLINED_ROWS", &settle::COMPLETE_UNLINED_ROWS),
        ];
        let rows = sized.into_iter().flat_map(|(name, texts)| {
            texts.all().map(move |(n, text)| {
                let name: &'static str = Box::leak(format!("{name}_{n}").into_boxed_str());
                (name, text)
            })
        });
        FIXED_STATEMENTS.iter().copied().chain(rows).collect()
    });

/// The statements whose text is a constant.
pub const FIXED_STATEMENTS: &[(&str, &str)] = &[
    ("SELECT_QUEUE", rows::SELECT_QUEUE),
    ("SELECT_QUEUE_NEXT_SEQ", rows::SELECT_QUEUE_NEXT_SEQ),
    ("SELECT_NEXT_SEQ", rows::SELECT_NEXT_SEQ),
    ("DEDUP_LOOKUP", enqueue::DEDUP_LOOKUP),
    ("DEDUP_INSERT", enqueue::DEDUP_INSERT),
    ("INSERT_ONE", enqueue::INSERT_ONE),
    ("INSERT_ONE_PLAIN", enqueue::INSERT_ONE_PLAIN),
    ("INSERT_ONE_OWNED", enqueue::INSERT_ONE_OWNED),
    ("INSERT_BODY_OWNED", enqueue::INSERT_BODY_OWNED),
    ("CLAIM_ONE_OWNED_ALL", claim::CLAIM_ONE_OWNED_ALL),
    ("INSERT_BODY_AT_OWNED", enqueue::INSERT_BODY_AT_OWNED),
    ("BUSY_LINES", line::BUSY_LINES),
    ("RELEASE_LINES", line::RELEASE_LINES),
    ("CLAIM", claim::CLAIM),
    ("LOCK_ONE", claim::LOCK_ONE),
    ("CLAIM_ONE", claim::CLAIM_ONE),
    ("CLAIM_ONE_OWNED", claim::CLAIM_ONE_OWNED),
    ("PICK_HEADS", claim::PICK_HEADS),
    ("LINE_SUCCESSORS", claim::LINE_SUCCESSORS),
    ("DELETE_IDS", claim::DELETE_IDS),
    ("CLAIM_DEFERRED", claim::CLAIM_DEFERRED),
    ("ATTEMPT_LOOKUP", claim::ATTEMPT_LOOKUP),
    ("ATTEMPT_INSERT", claim::ATTEMPT_INSERT),
    ("SETTLE_COMPLETE", settle::SETTLE_COMPLETE),
    ("SETTLE_ABANDON", settle::SETTLE_ABANDON),
    ("SETTLE_REJECT", settle::SETTLE_REJECT),
    ("SETTLE_DEFER", settle::SETTLE_DEFER),
    ("COMPLETE_MANY", settle::COMPLETE_MANY),
    ("COMPLETE_UNLINED_ONE", settle::COMPLETE_UNLINED_ONE),
    ("RECEIPT_INSERT", settle::RECEIPT_INSERT),
    ("RECEIPT_ONE", settle::RECEIPT_ONE),
    ("RECEIPT_LOOKUP", settle::RECEIPT_LOOKUP),
    ("LOCK_STATE", settle::LOCK_STATE),
    ("REFUSE_UNLESS_CHANGED", exec::REFUSE_UNLESS_CHANGED),
    (
        "REFUSE_UNLESS_CHANGED_OWNED",
        exec::REFUSE_UNLESS_CHANGED_OWNED,
    ),
    ("REAP_TO_DLQ", sweeps::REAP_TO_DLQ),
    ("REAP_TO_ACTIVE", sweeps::REAP_TO_ACTIVE),
    ("ACTIVATE_DUE", sweeps::ACTIVATE_DUE),
    ("EXPIRE_TO_DLQ", sweeps::EXPIRE_TO_DLQ),
    ("EXPIRE_DISCARD", sweeps::EXPIRE_DISCARD),
    ("RETENTION_BOUNDS", sweeps::RETENTION_BOUNDS),
    ("DLQ_OLDEST", sweeps::DLQ_OLDEST),
    ("DLQ_PICKED", sweeps::DLQ_PICKED),
    ("DLQ_TOTALS", sweeps::DLQ_TOTALS),
    ("JANITOR_RECEIPTS", sweeps::JANITOR[0]),
    ("JANITOR_ATTEMPTS", sweeps::JANITOR[1]),
    ("JANITOR_DEDUP", sweeps::JANITOR[2]),
    ("SELECT_QUEUE_KIND", admin::SELECT_QUEUE_KIND),
    ("UPSERT_QUEUE", admin::UPSERT_QUEUE),
    ("QUEUE_IN_PLAY", admin::QUEUE_IN_PLAY),
    ("DELETE_QUEUE_ACTIVE", admin::DELETE_QUEUE[0]),
    ("DELETE_QUEUE_LOCKED", admin::DELETE_QUEUE[1]),
    ("DELETE_QUEUE_REST", admin::DELETE_QUEUE[2]),
    ("DELETE_QUEUE_DEDUP", admin::DELETE_QUEUE[3]),
    ("DELETE_QUEUE_ATTEMPTS", admin::DELETE_QUEUE[4]),
    ("DELETE_QUEUE_SUBSCRIPTIONS", admin::DELETE_QUEUE[5]),
    ("DELETE_QUEUE_SCHEDULES", admin::DELETE_QUEUE[6]),
    ("DELETE_QUEUE_ROW", admin::DELETE_QUEUE[7]),
    ("LIST_QUEUES", admin::LIST_QUEUES),
    ("CANCEL_SCHEDULED", admin::CANCEL_SCHEDULED),
    ("PEEK", admin::PEEK),
    ("QUEUE_STATS", admin::QUEUE_STATS),
    ("REDRIVE_MANY", admin::REDRIVE_MANY),
    ("PURGE", admin::PURGE),
    ("KEY_EXISTS", keys::KEY_EXISTS),
    ("KEY_INSERT", keys::KEY_INSERT),
    ("KEY_LIST", keys::KEY_LIST),
    ("KEY_REVOKE", keys::KEY_REVOKE),
    ("KEY_BY_ID", keys::KEY_BY_ID),
    ("KEY_BY_DIGEST", keys::KEY_BY_DIGEST),
    ("SUB_SELECT", topics::SUB_SELECT),
    ("SUB_UPSERT", topics::SUB_UPSERT),
    ("SUB_LIST_ALL", topics::SUB_LIST_ALL),
    ("SUB_LIST_TOPIC", topics::SUB_LIST_TOPIC),
    ("STATUS", admin::STATUS),
];

#[cfg(test)]
mod tests {
    #[test]
    fn the_message_columns_are_the_claims_and_each_a_column_of_the_table() {
        assert_eq!(super::MESSAGE_COLUMNS.join(", "), message_columns!());
        let table = super::SCHEMA
            .iter()
            .find(|s| s.starts_with("CREATE TABLE mqlite_messages ("))
            .expect("the messages table");
        for name in super::MESSAGE_COLUMNS.iter() {
            assert!(
                table
                    .lines()
                    .any(|l| l.split_whitespace().next() == Some(*name)),
                "{name} is no column of mqlite_messages"
            );
        }
        assert_eq!(super::MESSAGE_COLUMNS.len(), 20);
    }
}

//! The operations, over [`Tables`]: the SQL stores' flows (crates/sql) reproduced step
//! for step on hand-built indexes, so both kinds of store keep the same promises and the
//! same line rule (see `mqlite_contract::store`).
//!
//! One file per mechanism, named as in crates/sql so the two kinds of store can be read
//! side by side: `admin`, `claim`, `enqueue`, `keys`, `line`, `settle`, `sweeps`,
//! `topics`. This file holds what they share.

mod admin;
mod claim;
mod enqueue;
mod keys;
mod line;
mod schedules;
mod settle;
mod sweeps;
mod topics;

use line::{Departed, busy_lines};

pub(crate) use admin::*;
pub(crate) use claim::*;
pub(crate) use enqueue::*;
pub(crate) use keys::*;
pub(crate) use schedules::*;
pub(crate) use settle::*;
pub(crate) use sweeps::*;
pub(crate) use topics::*;

use redb::ReadableTable;

use mqlite_contract::{Error, MessageState, QueueConfig, QueueKind, Result};
use mqlite_kit::decide;

use crate::db;
use crate::enc::{Key, decode_queue, trailing_i64};
use crate::tables::{Ix, Tables};

/// The kind and configuration of an existing name, or `NotFound`.
pub(crate) fn load_any(t: &Tables<'_>, name: &str) -> Result<(QueueKind, QueueConfig)> {
    t.work.lookup();
    match t.queues.get(name).map_err(db)? {
        Some(v) => decode_queue(v.value()).map(|(k, c, _)| (k, c)),
        None => Err(Error::queue_not_found(name)),
    }
}

/// The configuration of a queue that holds messages; a topic is refused.
pub(crate) fn load_queue(t: &Tables<'_>, name: &str) -> Result<QueueConfig> {
    decide::holding(name, load_any(t, name)?)
}

const IN_PLAY: [MessageState; 4] = [
    MessageState::Active,
    MessageState::Locked,
    MessageState::Deferred,
    MessageState::Scheduled,
];

fn expiring_key(which: u8, exp: i64, key: &[u8]) -> Vec<u8> {
    let mut x = Key::new().b(which).i(exp);
    x.0.extend_from_slice(key);
    x.0
}

/// A queue's dead letters dead-lettered at or before `cutoff`, oldest first.
fn dlq_oldest(t: &Tables<'_>, queue: &str, cutoff: i64, limit: usize) -> Result<Vec<i64>> {
    let prefix = Key::new().s(queue);
    let end = prefix.clone().i(cutoff).end();
    Ok(t.scan(Ix::Dlq, prefix.bytes(), &end, limit)?
        .iter()
        .map(|k| trailing_i64(k))
        .collect())
}

//! Recovery and the background sweeps (reaper, TTL, retention, janitor): crates/sql's
//! `sweeps`.

use std::collections::HashMap;

use redb::ReadableTable;

use mqlite_contract::{
    Error, MessageState, QueueConfig, REASON_MAX_DELIVERY, REASON_TTL_EXPIRED, RecoverTask, Result,
    RetentionDefaults,
};
use mqlite_kit::decide;

use crate::db;
use crate::enc::{Key, trailing_i64};
use crate::tables::{EXP_ATTEMPT, EXP_DEDUP, EXP_RECEIPT, Ix, Tables};

use super::{Departed, dlq_oldest, list_queues, load_any};

pub(crate) fn recover(t: &mut Tables<'_>, now: i64, task: RecoverTask) -> Result<u64> {
    match task {
        RecoverTask::Orphans => reap(t, now, i64::MAX),
        RecoverTask::Reaper => reap(t, now, now),
        RecoverTask::Scheduler => {
            let end = Key::new().i(now).end();
            let mut n = 0;
            for k in t.scan(Ix::Due, &[], &end, usize::MAX)? {
                let seq = trailing_i64(&k);
                if let Some(row) = t.row(seq)? {
                    let mut new = row.clone();
                    new.m.state = MessageState::Active;
                    t.put(seq, Some(&row), Some(&new))?;
                    n += 1;
                }
            }
            Ok(n)
        }
        RecoverTask::Ttl => expire(t, now),
        RecoverTask::Retention(d) => retention(t, now, d),
        RecoverTask::Janitor => janitor(t, now),
        // redb gives space back only by compaction, which needs the database to itself
        // (the engine does not ask: `reclaims_pages` is false).
        RecoverTask::Vacuum { .. } => Ok(0),
    }
}

fn cached_cfg<'c>(
    t: &Tables<'_>,
    cache: &'c mut HashMap<String, QueueConfig>,
    queue: &str,
) -> Result<&'c QueueConfig> {
    if !cache.contains_key(queue) {
        let cfg = load_any(t, queue)?.1;
        cache.insert(queue.to_owned(), cfg);
    }
    cache
        .get(queue)
        .ok_or_else(|| Error::queue_not_found(queue))
}

fn reap(t: &mut Tables<'_>, now: i64, cutoff: i64) -> Result<u64> {
    let end = Key::new().i(cutoff).end();
    let mut rows = Vec::new();
    for k in t.scan(Ix::Lease, &[], &end, usize::MAX)? {
        if let Some(r) = t.row(trailing_i64(&k))? {
            rows.push(r);
        }
    }
    let mut cache = HashMap::new();
    let mut dead = Vec::new();
    let mut back = Vec::new();
    for r in rows {
        if r.m.delivery_count >= cached_cfg(t, &mut cache, &r.queue)?.max_delivery_count {
            dead.push(r);
        } else {
            back.push(r);
        }
    }
    let n = (dead.len() + back.len()) as u64;
    let mut departed = Departed::default();
    for row in dead {
        let mut new = row.clone();
        new.m.state = MessageState::DeadLettered;
        new.m.dead_letter_reason = Some(REASON_MAX_DELIVERY.to_owned());
        new.m.dead_letter_description =
            Some("the lease expired on the final allowed delivery".to_owned());
        new.dead_lettered_at = now;
        new.m.lock_token = None;
        new.m.locked_until_ms = 0;
        t.put(row.m.seq.0, Some(&row), Some(&new))?;
        departed.add(&row);
    }
    departed.release(t)?;
    for row in back {
        // Re-read: a release above never touches a locked row, but stay exact.
        let Some(row) = t.row(row.m.seq.0)? else {
            continue;
        };
        let mut new = row.clone();
        new.m.state = MessageState::Active;
        new.m.lock_token = None;
        new.m.locked_until_ms = 0;
        t.put(row.m.seq.0, Some(&row), Some(&new))?;
    }
    Ok(n)
}

fn expire(t: &mut Tables<'_>, now: i64) -> Result<u64> {
    let end = Key::new().i(now).end();
    let mut rows = Vec::new();
    for k in t.scan(Ix::Expiry, &[], &end, usize::MAX)? {
        if let Some(r) = t.row(trailing_i64(&k))? {
            rows.push(r);
        }
    }
    let mut cache = HashMap::new();
    let mut departed = Departed::default();
    let n = rows.len() as u64;
    for row in rows {
        let seq = row.m.seq.0;
        if cached_cfg(t, &mut cache, &row.queue)?.dead_letter_on_expire {
            let mut new = row.clone();
            new.m.state = MessageState::DeadLettered;
            new.m.dead_letter_reason = Some(REASON_TTL_EXPIRED.to_owned());
            new.m.dead_letter_description =
                Some("the message expired before it was completed".to_owned());
            new.dead_lettered_at = now;
            new.m.lock_token = None;
            new.m.locked_until_ms = 0;
            t.put(seq, Some(&row), Some(&new))?;
        } else {
            t.put(seq, Some(&row), None)?;
        }
        departed.add(&row);
    }
    departed.release(t)?;
    Ok(n)
}

fn retention(t: &mut Tables<'_>, now: i64, defaults: RetentionDefaults) -> Result<u64> {
    let mut doomed = Vec::new();
    for q in list_queues(t)? {
        let c = &q.config;
        let bounds = (c.dlq_max_age_ms, c.dlq_max_count, c.dlq_max_bytes);
        let Some(retention) = decide::Retention::of(bounds, defaults, now) else {
            continue;
        };
        let mut oldest = Vec::new();
        for seq in dlq_oldest(t, &q.name, i64::MAX, usize::MAX)? {
            if let Some(r) = t.row(seq)? {
                oldest.push((seq, r.m.content.body.len() as i64, r.dead_lettered_at));
            }
        }
        let totals = (oldest.len() as i64, oldest.iter().map(|(_, l, _)| l).sum());
        doomed.extend(retention.doomed(oldest, totals));
    }
    let mut n = 0;
    for seq in doomed {
        if let Some(r) = t.row(seq)? {
            t.put(seq, Some(&r), None)?;
            n += 1;
        }
    }
    Ok(n)
}

fn janitor(t: &mut Tables<'_>, now: i64) -> Result<u64> {
    let mut n = 0;
    for which in [EXP_RECEIPT, EXP_ATTEMPT, EXP_DEDUP] {
        let start = Key::new().b(which);
        let end = Key::new().b(which).i(now).end();
        let mut doomed = Vec::new();
        for e in t
            .expiring
            .range::<&[u8]>(start.bytes()..end.as_slice())
            .map_err(db)?
        {
            doomed.push(e.map_err(db)?.0.value().to_vec());
        }
        for k in doomed {
            t.expiring.remove(k.as_slice()).map_err(db)?;
            // The entry's own key follows the kind byte and the 8-byte expiry.
            let key = &k[9..];
            let gone = match which {
                EXP_RECEIPT => t.receipts.remove(key).map_err(db)?.is_some(),
                EXP_ATTEMPT => t.attempts.remove(key).map_err(db)?.is_some(),
                _ => t.dedup.remove(key).map_err(db)?.is_some(),
            };
            n += u64::from(gone);
        }
    }
    Ok(n)
}

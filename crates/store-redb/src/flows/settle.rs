//! Settlements, their receipts and batches: crates/sql's `settle`.

use mqlite_contract::{
    BatchResult, Error, LockLostReason, LockRef, LockToken, MessageState, REASON_MAX_DELIVERY,
    RECEIPT_TTL_MS, Result, Settlement, types::millis,
};
use mqlite_kit::decide;
use std::collections::{HashMap, HashSet};

use redb::ReadableTable;

use crate::db;
use crate::enc::{Key, MessageRow};
use crate::tables::{EXP_RECEIPT, Tables};

use super::{Departed, expiring_key, load_queue};

/// The row under `lock` if its fence holds: in `queue`, locked, the lease live at `now`
/// and the token the current one (2.6, 2.9).
/// Why `lock` finds no live lease (only asked once the fence refused it).
fn lost_reason(t: &Tables<'_>, now: i64, queue: &str, lock: &LockRef) -> Result<LockLostReason> {
    let found = t.row(lock.seq.0)?.map(|r| decide::FoundLock {
        in_queue: r.queue == queue,
        locked: r.m.state == MessageState::Locked,
        same_token: r.m.lock_token == Some(lock.token),
        locked_until_ms: r.m.locked_until_ms,
        delivery_count: r.m.delivery_count,
    });
    Ok(decide::lost_reason(found, now))
}

fn fenced(t: &Tables<'_>, now: i64, queue: &str, lock: &LockRef) -> Result<Option<MessageRow>> {
    Ok(t.row(lock.seq.0)?.filter(|r| {
        r.queue == queue
            && r.m.state == MessageState::Locked
            && r.m.locked_until_ms > now
            && r.m.lock_token == Some(lock.token)
    }))
}

fn receipt_key(queue: &str, lock: &LockRef, s: &Settlement) -> Key {
    Key::new()
        .s(queue)
        .i(lock.seq.0)
        .s(&lock.token.to_string())
        .s(s.op())
        .s(&s.receipt_args())
}

fn write_receipts(
    t: &mut Tables<'_>,
    now: i64,
    queue: &str,
    s: &Settlement,
    done: &[LockRef],
) -> Result<()> {
    let exp = now.saturating_add(RECEIPT_TTL_MS);
    for lock in done {
        let key = receipt_key(queue, lock, s);
        let old = t
            .receipts
            .insert(key.bytes(), exp)
            .map_err(db)?
            .map(|v| v.value());
        if let Some(old) = old {
            t.expiring
                .remove(expiring_key(EXP_RECEIPT, old, key.bytes()).as_slice())
                .map_err(db)?;
        }
        t.expiring
            .insert(expiring_key(EXP_RECEIPT, exp, key.bytes()).as_slice(), ())
            .map_err(db)?;
    }
    Ok(())
}

fn replays(t: &Tables<'_>, now: i64, queue: &str, s: &Settlement, lock: &LockRef) -> Result<bool> {
    t.work.lookup();
    Ok(t.receipts
        .get(receipt_key(queue, lock, s).bytes())
        .map_err(db)?
        .is_some_and(|v| v.value() > now))
}

pub(crate) fn settle(
    t: &mut Tables<'_>,
    now: i64,
    queue: &str,
    lock: LockRef,
    s: &Settlement,
) -> Result<()> {
    let cfg = load_queue(t, queue)?;
    let Some(row) = fenced(t, now, queue, &lock)? else {
        return if replays(t, now, queue, s, &lock)? {
            Ok(())
        } else {
            Err(Error::LockLost {
                reason: lost_reason(t, now, queue, &lock)?,
            })
        };
    };
    let seq = lock.seq.0;
    let mut new = row.clone();
    new.m.lock_token = None;
    new.m.locked_until_ms = 0;
    match s {
        Settlement::Complete => {}
        Settlement::Abandon { delay } => {
            let delay_ms = millis(*delay);
            if row.m.delivery_count >= cfg.max_delivery_count {
                new.m.state = MessageState::DeadLettered;
                new.m.dead_letter_reason = Some(REASON_MAX_DELIVERY.to_owned());
                new.m.dead_letter_description =
                    Some("abandoned on the final allowed delivery".to_owned());
                new.dead_lettered_at = now;
            } else {
                new.dead_lettered_at = 0;
                if delay_ms > 0 {
                    new.m.state = MessageState::Scheduled;
                    new.m.visible_at_ms = now + delay_ms;
                } else {
                    new.m.state = MessageState::Active;
                }
            }
        }
        Settlement::Reject {
            reason,
            description,
        } => {
            new.m.state = MessageState::DeadLettered;
            new.m.dead_letter_reason = Some(reason.clone());
            new.m.dead_letter_description = Some(description.clone());
            new.dead_lettered_at = now;
        }
        Settlement::Defer => new.m.state = MessageState::Deferred,
    }
    let gone = matches!(s, Settlement::Complete);
    t.put(seq, Some(&row), (!gone).then_some(&new))?;
    if gone || new.m.state == MessageState::DeadLettered {
        let mut departed = Departed::default();
        departed.add(&row);
        departed.release(t)?;
    }
    write_receipts(t, now, queue, s, &[lock])
}

pub(crate) fn complete_batch(
    t: &mut Tables<'_>,
    now: i64,
    queue: &str,
    locks: &[LockRef],
) -> Result<Vec<BatchResult>> {
    load_queue(t, queue)?;
    let mut completed: HashSet<(i64, LockToken)> = HashSet::new();
    let mut departed = Departed::default();
    for l in locks {
        if completed.contains(&(l.seq.0, l.token)) {
            continue;
        }
        if let Some(row) = fenced(t, now, queue, l)? {
            t.put(l.seq.0, Some(&row), None)?;
            departed.add(&row);
            completed.insert((l.seq.0, l.token));
        }
    }
    departed.release(t)?;
    let (done, missed): (Vec<LockRef>, Vec<LockRef>) = locks
        .iter()
        .partition(|l| completed.contains(&(l.seq.0, l.token)));
    write_receipts(t, now, queue, &Settlement::Complete, &done)?;
    let mut replayed = HashSet::new();
    for l in &missed {
        if replays(t, now, queue, &Settlement::Complete, l)? {
            replayed.insert((l.seq.0, l.token));
        }
    }
    locks
        .iter()
        .map(|l| {
            let key = (l.seq.0, l.token);
            let ok = completed.contains(&key) || replayed.contains(&key);
            Ok(BatchResult {
                seq: l.seq,
                ok,
                locked_until_ms: 0,
                lost: if ok {
                    None
                } else {
                    Some(lost_reason(t, now, queue, l)?)
                },
            })
        })
        .collect()
}

pub(crate) fn renew_batch(
    t: &mut Tables<'_>,
    now: i64,
    queue: &str,
    locks: &[LockRef],
) -> Result<Vec<BatchResult>> {
    let cfg = load_queue(t, queue)?;
    let mut renewed: HashMap<(i64, LockToken), i64> = HashMap::new();
    for l in locks {
        if let Some(row) = fenced(t, now, queue, l)? {
            let mut new = row.clone();
            new.m.locked_until_ms = row.m.locked_until_ms.max(now + cfg.lock_ms());
            t.put(l.seq.0, Some(&row), Some(&new))?;
            renewed.insert((l.seq.0, l.token), new.m.locked_until_ms);
        }
    }
    locks
        .iter()
        .map(|l| {
            let until = renewed.get(&(l.seq.0, l.token)).copied();
            Ok(BatchResult {
                seq: l.seq,
                ok: until.is_some(),
                locked_until_ms: until.unwrap_or(0),
                lost: match until {
                    Some(_) => None,
                    None => Some(lost_reason(t, now, queue, l)?),
                },
            })
        })
        .collect()
}

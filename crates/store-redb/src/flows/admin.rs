//! Queues (create, update, delete, list) and what an operator does to one (cancel,
//! peek, stats, redrive, purge): crates/sql's `admin`.

use mqlite_contract::{
    Error, Message, MessageState, OrderingMode, PeekOptions, PurgeOptions, QueueConfig, QueueInfo,
    QueueKind, QueueStats, RedriveOptions, Result, SeqNumber, types::millis,
};
use std::collections::BTreeSet;

use redb::ReadableTable;

use mqlite_kit::enqueue::{line_of, waiting_flags};
use mqlite_kit::upsert::{Upsert, decide, mode_change_refused};

use crate::db;
use crate::enc::{
    Decoder, Key, MessageRow, decode_queue, encode_queue, key_str, state_code, trailing_i64,
};
use crate::tables::{EXP_ATTEMPT, EXP_DEDUP, EXP_RECEIPT, Ix, Tables};

use super::{Departed, IN_PLAY, busy_lines, dlq_oldest, load_queue};

fn queue_in_play(t: &Tables<'_>, queue: &str) -> Result<bool> {
    for s in IN_PLAY {
        if t.first_seq(Ix::State, &Key::new().s(queue).b(state_code(s)))?
            .is_some()
        {
            return Ok(true);
        }
    }
    Ok(false)
}

pub(crate) fn upsert_queue(
    t: &mut Tables<'_>,
    now: i64,
    name: &str,
    kind: QueueKind,
    cfg: &QueueConfig,
    update_only: bool,
) -> Result<()> {
    t.work.lookup();
    let existing = t
        .queues
        .get(name)
        .map_err(db)?
        .map(|v| decode_queue(v.value()))
        .transpose()?;
    let held = existing.as_ref().map(|(k, old, _)| (*k, old.ordering_mode));
    if decide(name, kind, cfg, update_only, held)? == Upsert::WriteIfIdle && queue_in_play(t, name)?
    {
        let current = held.map_or(cfg.ordering_mode, |(_, mode)| mode);
        return Err(mode_change_refused(name, current));
    }
    let created_at = existing.map_or(now, |(_, _, created_at)| created_at);
    t.queues
        .insert(name, encode_queue(kind, cfg, created_at).as_slice())
        .map_err(db)?;
    Ok(())
}

/// Removes the entries of a keyed table under `prefix` and their janitor entries.
fn drop_prefixed(t: &mut Tables<'_>, which: u8, prefix: &Key) -> Result<()> {
    let end = prefix.end();
    let mut doomed: Vec<(Vec<u8>, i64)> = Vec::new();
    match which {
        EXP_DEDUP => {
            for e in t
                .dedup
                .range::<&[u8]>(prefix.bytes()..end.as_slice())
                .map_err(db)?
            {
                let (k, v) = e.map_err(db)?;
                let mut r = Decoder(v.value());
                let (_, _, exp) = (r.s()?, r.i()?, r.i()?);
                doomed.push((k.value().to_vec(), exp));
            }
        }
        EXP_RECEIPT => {
            for e in t
                .receipts
                .range::<&[u8]>(prefix.bytes()..end.as_slice())
                .map_err(db)?
            {
                let (k, v) = e.map_err(db)?;
                doomed.push((k.value().to_vec(), v.value()));
            }
        }
        _ => {
            for e in t
                .attempts
                .range::<&[u8]>(prefix.bytes()..end.as_slice())
                .map_err(db)?
            {
                let (k, v) = e.map_err(db)?;
                let mut r = Decoder(v.value());
                let (_, exp) = (r.i()?, r.i()?);
                doomed.push((k.value().to_vec(), exp));
            }
        }
    }
    for (k, exp) in doomed {
        match which {
            EXP_DEDUP => t.dedup.remove(k.as_slice()).map_err(db)?.is_some(),
            EXP_RECEIPT => t.receipts.remove(k.as_slice()).map_err(db)?.is_some(),
            _ => t.attempts.remove(k.as_slice()).map_err(db)?.is_some(),
        };
        let mut x = Key::new().b(which).i(exp);
        x.0.extend_from_slice(&k);
        t.expiring.remove(x.bytes()).map_err(db)?;
    }
    Ok(())
}

/// Deletes every message of a queue, in any state, with its index entries.
fn drop_messages(t: &mut Tables<'_>, name: &str) -> Result<u64> {
    let mut n = 0;
    for seq in t.seqs(Ix::Queue, &Key::new().s(name), usize::MAX)? {
        if let Some(row) = t.row(seq)? {
            t.put(seq, Some(&row), None)?;
            n += 1;
        }
    }
    Ok(n)
}

pub(crate) fn delete_queue(t: &mut Tables<'_>, name: &str) -> Result<bool> {
    drop_messages(t, name)?;
    super::delete_schedules_of(t, name)?;
    let q = Key::new().s(name);
    drop_prefixed(t, EXP_DEDUP, &q)?;
    drop_prefixed(t, EXP_RECEIPT, &q)?;
    drop_prefixed(t, EXP_ATTEMPT, &q)?;
    // Its own subscription row, and a topic's subscription rows.
    if let Some(v) = t.subs.remove(name).map_err(db)? {
        let topic = Decoder(v.value()).s()?;
        drop(v);
        t.subs_by_topic
            .remove(Key::new().s(&topic).s(name).bytes())
            .map_err(db)?;
    }
    let end = q.end();
    let mut children = Vec::new();
    for e in t
        .subs_by_topic
        .range::<&[u8]>(q.bytes()..end.as_slice())
        .map_err(db)?
    {
        children.push(e.map_err(db)?.0.value().to_vec());
    }
    for k in children {
        t.subs_by_topic.remove(k.as_slice()).map_err(db)?;
        let (_, pos) = key_str(&k, 0).ok_or_else(|| crate::enc::corrupt("key"))?;
        let (sub, _) = key_str(&k, pos).ok_or_else(|| crate::enc::corrupt("key"))?;
        t.subs.remove(sub.as_str()).map_err(db)?;
    }
    Ok(t.queues.remove(name).map_err(db)?.is_some())
}

pub(crate) fn list_queues(t: &Tables<'_>) -> Result<Vec<QueueInfo>> {
    let mut out = Vec::new();
    for e in t.queues.iter().map_err(db)? {
        let (k, v) = e.map_err(db)?;
        let (kind, config, _) = decode_queue(v.value())?;
        out.push(QueueInfo {
            name: k.value().to_owned(),
            kind,
            config,
        });
    }
    Ok(out)
}

pub(crate) fn cancel(t: &mut Tables<'_>, queue: &str, seq: SeqNumber) -> Result<bool> {
    load_queue(t, queue)?;
    let Some(row) = t.row(seq.0)?.filter(|r| {
        r.queue == queue && r.m.state == MessageState::Scheduled && r.m.delivery_count == 0
    }) else {
        return Ok(false);
    };
    t.put(seq.0, Some(&row), None)?;
    let mut departed = Departed::default();
    departed.add(&row);
    departed.release(t)?;
    Ok(true)
}

pub(crate) fn peek(t: &Tables<'_>, queue: &str, o: &PeekOptions) -> Result<Vec<Message>> {
    load_queue(t, queue)?;
    let from = o.from_seq.map_or(0, |s| s.0);
    let (prefix, start) = match o.state {
        Some(s) => {
            let p = Key::new().s(queue).b(state_code(s));
            let start = p.clone().i(from);
            (p, start)
        }
        None => {
            let p = Key::new().s(queue);
            let start = p.clone().i(from);
            (p, start)
        }
    };
    let ix = if o.state.is_some() {
        Ix::State
    } else {
        Ix::Queue
    };
    let mut out = Vec::new();
    for k in t.scan(ix, start.bytes(), &prefix.end(), o.max as usize)? {
        if let Some(r) = t.row(trailing_i64(&k))? {
            out.push(Message {
                lock_token: None,
                ..r.m
            });
        }
    }
    Ok(out)
}

pub(crate) fn stats(t: &Tables<'_>, now: i64, queue: &str) -> Result<QueueStats> {
    load_queue(t, queue)?;
    let count = |s: MessageState| t.count(Ix::State, &Key::new().s(queue).b(state_code(s)));
    let (active, locked, deferred, scheduled, dead) = (
        count(MessageState::Active)?,
        count(MessageState::Locked)?,
        count(MessageState::Deferred)?,
        count(MessageState::Scheduled)?,
        count(MessageState::DeadLettered)?,
    );
    // Sequence order is enqueue order, so each in-play state's first row is its oldest.
    let mut oldest: Option<i64> = None;
    for s in IN_PLAY {
        if let Some(seq) = t.first_seq(Ix::State, &Key::new().s(queue).b(state_code(s)))?
            && let Some(r) = t.row(seq)?
        {
            oldest = Some(oldest.map_or(r.m.enqueued_at_ms, |o| o.min(r.m.enqueued_at_ms)));
        }
    }
    Ok(QueueStats {
        active,
        locked,
        deferred,
        scheduled,
        dead_lettered: dead,
        total: active + locked + deferred + scheduled + dead,
        oldest_message_age_ms: oldest.map_or(0, |o| (now - o).max(0)),
    })
}

pub(crate) fn redrive(
    t: &mut Tables<'_>,
    now: i64,
    queue: &str,
    o: &RedriveOptions,
) -> Result<u64> {
    load_queue(t, queue)?;
    let target = o.target.as_deref().unwrap_or(queue);
    let target_cfg = load_queue(t, target)?;
    let limit = if o.max == 0 {
        usize::MAX
    } else {
        o.max as usize
    };
    let cutoff = now.saturating_sub(millis(o.older_than));
    let mut picked: Vec<MessageRow> = Vec::new();
    if let Some(selected) = &o.seq_numbers {
        // A selected redrive: one lookup per number, then the order and bounds of the
        // dead-letter index (an empty selection picks nothing).
        let mut seqs: Vec<i64> = selected.iter().map(|s| s.0).collect();
        seqs.sort_unstable();
        seqs.dedup();
        for seq in seqs {
            if let Some(r) = t.row(seq)?.filter(|r| {
                r.queue == queue
                    && r.m.state == MessageState::DeadLettered
                    && r.dead_lettered_at <= cutoff
            }) {
                picked.push(r);
            }
        }
        picked.sort_by_key(|r| (r.dead_lettered_at, r.m.seq));
        picked.truncate(limit);
    } else {
        for seq in dlq_oldest(t, queue, cutoff, limit)? {
            if let Some(r) = t.row(seq)? {
                picked.push(r);
            }
        }
    }
    if picked.is_empty() {
        return Ok(0);
    }
    if target_cfg.ordering_mode == OrderingMode::GroupFifo
        && picked
            .iter()
            .any(|r| r.m.content.group_id.as_deref().is_none_or(str::is_empty))
    {
        return Err(Error::GroupRequired {
            queue: target.to_owned(),
        });
    }
    picked.sort_by_key(|r| r.m.seq);
    let lines: Vec<Option<String>> = picked
        .iter()
        .map(|r| line_of(target_cfg.ordering_mode, r.m.content.group_id.as_deref()))
        .collect();
    let distinct: BTreeSet<String> = lines.iter().flatten().cloned().collect();
    let busy = busy_lines(t, target, &distinct)?;
    let waiting = waiting_flags(&lines, &busy);
    let n = picked.len() as u64;
    for ((row, line), waits) in picked.into_iter().zip(lines).zip(waiting) {
        let mut new = row.clone();
        new.queue = target.to_owned();
        new.line = line;
        new.waiting = waits;
        new.dead_lettered_at = 0;
        new.m.state = MessageState::Active;
        new.m.delivery_count = 0;
        new.m.dead_letter_reason = None;
        new.m.dead_letter_description = None;
        new.m.visible_at_ms = now;
        new.m.expires_at_ms = 0;
        new.m.lock_token = None;
        new.m.locked_until_ms = 0;
        t.put(row.m.seq.0, Some(&row), Some(&new))?;
    }
    Ok(n)
}

pub(crate) fn purge(t: &mut Tables<'_>, now: i64, queue: &str, o: &PurgeOptions) -> Result<u64> {
    load_queue(t, queue)?;
    if o.every_state {
        return drop_messages(t, queue);
    }
    let limit = if o.max == 0 {
        usize::MAX
    } else {
        o.max as usize
    };
    let mut n = 0;
    for seq in dlq_oldest(t, queue, now.saturating_sub(millis(o.older_than)), limit)? {
        if let Some(r) = t.row(seq)? {
            t.put(seq, Some(&r), None)?;
            n += 1;
        }
    }
    Ok(n)
}

/// The counts [`crate::RedbStore::status`] reports: queues, topics, subscriptions.
pub(crate) fn counts(t: &Tables<'_>) -> Result<(u64, u64, u64)> {
    let (mut queues, mut topics) = (0, 0);
    for q in list_queues(t)? {
        match q.kind {
            QueueKind::Queue => queues += 1,
            QueueKind::Topic => topics += 1,
            QueueKind::Subscription => {}
        }
    }
    let subs = redb::ReadableTableMetadata::len(&t.subs).map_err(db)?;
    Ok((queues, topics, subs))
}

//! The operations, over [`Tables`]: the SQL stores' flows (crates/sql) reproduced step
//! for step on hand-built indexes, so both kinds of store keep the same promises and the
//! same line rule (see `mqlite_engine_core::store`).

use mqlite_engine_core::types::millis;
use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};

use redb::ReadableTable;

use mqlite_engine_core::codec::{decode_messages, encode_messages};
use mqlite_engine_core::enqueue::{
    Fresh, Plan, Timing, dedup_keys, line_of, plan, require_groups, slots, waiting_flags,
};
use mqlite_engine_core::upsert::{Upsert, decide, mode_change_refused};
use mqlite_engine_core::{
    AccessKey, BatchResult, ClaimSpec, EnqueueSlot, Error, LockLostReason, LockRef, LockToken,
    Message, MessageState, OrderingMode, OutMessage, PeekOptions, PurgeOptions, QueueConfig,
    QueueInfo, QueueKind, QueueStats, REASON_MAX_DELIVERY, REASON_TTL_EXPIRED, RECEIPT_TTL_MS,
    ReceiveMode, RecoverTask, RedriveOptions, Result, RetentionDefaults, Route, SendOptions,
    SeqNumber, Settlement, Subscription,
};

use crate::db;
use crate::enc::{
    Key, R, Row, W, decode_key, decode_queue, encode_key, encode_queue, key_str, state_code,
    trailing_i64,
};
use crate::tables::{EXP_ATTEMPT, EXP_DEDUP, EXP_RECEIPT, Ix, Tables};

/// The meta key of the sequence counter (the last number handed out).
const LAST_SEQ: &str = "last_seq";

// ---------------------------------------------------------------- queues

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
    match load_any(t, name)? {
        (QueueKind::Topic, _) => Err(Error::invalid(format!(
            "{name:?} is a topic: publish to it, receive from its subscriptions"
        ))),
        (_, c) => Ok(c),
    }
}

const IN_PLAY: [MessageState; 4] = [
    MessageState::Active,
    MessageState::Locked,
    MessageState::Deferred,
    MessageState::Scheduled,
];

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
                let mut r = R(v.value());
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
                let mut r = R(v.value());
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

fn expiring_key(which: u8, exp: i64, key: &[u8]) -> Vec<u8> {
    let mut x = Key::new().b(which).i(exp);
    x.0.extend_from_slice(key);
    x.0
}

pub(crate) fn delete_queue(t: &mut Tables<'_>, name: &str) -> Result<bool> {
    for seq in t.seqs(Ix::Queue, &Key::new().s(name), usize::MAX)? {
        if let Some(row) = t.row(seq)? {
            t.put(seq, Some(&row), None)?;
        }
    }
    let q = Key::new().s(name);
    drop_prefixed(t, EXP_DEDUP, &q)?;
    drop_prefixed(t, EXP_RECEIPT, &q)?;
    drop_prefixed(t, EXP_ATTEMPT, &q)?;
    // Its own subscription row, and a topic's subscription rows.
    if let Some(v) = t.subs.remove(name).map_err(db)? {
        let topic = R(v.value()).s()?;
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

// ---------------------------------------------------------------- lines

/// The lines among `lines` that already have a member in play in `queue`.
fn busy_lines(t: &Tables<'_>, queue: &str, lines: &BTreeSet<String>) -> Result<HashSet<String>> {
    let mut out = HashSet::new();
    for l in lines {
        if t.first_seq(Ix::Line, &Key::new().s(queue).s(l))?.is_some() {
            out.insert(l.clone());
        }
    }
    Ok(out)
}

/// Lines whose head left play: (queue, line).
#[derive(Debug, Default)]
struct Departed(BTreeSet<(String, String)>);

impl Departed {
    fn add(&mut self, row: &Row) {
        if let (Some(line), false) = (&row.line, row.waiting) {
            self.0.insert((row.queue.clone(), line.clone()));
        }
    }

    /// Promotes the oldest in-play member of every line a head left (one seek each).
    fn release(self, t: &mut Tables<'_>) -> Result<()> {
        for (q, l) in self.0 {
            if let Some(seq) = t.first_seq(Ix::Line, &Key::new().s(&q).s(&l))?
                && let Some(row) = t.row(seq)?.filter(|r| r.waiting)
            {
                let new = Row {
                    waiting: false,
                    ..row.clone()
                };
                t.put(seq, Some(&row), Some(&new))?;
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------- enqueue

fn next_seq(t: &mut Tables<'_>) -> Result<i64> {
    let last = match t.meta.get(LAST_SEQ).map_err(db)? {
        Some(v) => R(v.value()).i()?,
        None => 0,
    };
    let next = last + 1;
    t.meta
        .insert(LAST_SEQ, next.to_le_bytes().as_slice())
        .map_err(db)?;
    Ok(next)
}

pub(crate) fn enqueue(
    t: &mut Tables<'_>,
    now: i64,
    queue: &str,
    messages: Vec<OutMessage>,
    options: SendOptions,
) -> Result<Vec<EnqueueSlot>> {
    let cfg = load_queue(t, queue)?;
    require_groups(queue, &cfg, &messages)?;
    let Timing {
        state,
        visible_at,
        expires_at,
    } = Timing::of(now, &options, &cfg);
    let keys = dedup_keys(&messages, &cfg);
    // Live dedup entries: key -> (seq, hash).
    let mut seen: HashMap<String, (SeqNumber, String)> = HashMap::new();
    for (k, _) in keys.iter().flatten() {
        t.work.lookup();
        if let Some(v) = t.dedup.get(Key::new().s(queue).s(k).bytes()).map_err(db)? {
            let mut r = R(v.value());
            let (hash, seq, exp) = (r.s()?, r.i()?, r.i()?);
            if exp > now {
                seen.insert(k.clone(), (SeqNumber(seq), hash));
            }
        }
    }
    let plans = plan(&keys, &seen);
    let fresh = Fresh::of(&plans, &messages, cfg.ordering_mode);
    let busy = busy_lines(t, queue, &fresh.distinct_lines())?;
    let Fresh {
        slots: fresh,
        lines,
    } = fresh;
    let waiting = waiting_flags(&lines, &busy);
    let mut seqs: HashMap<usize, SeqNumber> = HashMap::new();
    let mut messages: Vec<Option<OutMessage>> = messages.into_iter().map(Some).collect();
    for (pos, i) in fresh.iter().enumerate() {
        let seq = next_seq(t)?;
        let mut content = messages[*i].take().unwrap_or_default();
        content.group_id = content.group_id.filter(|g| !g.is_empty());
        let row = Row {
            queue: queue.to_owned(),
            line: lines[pos].clone(),
            waiting: waiting[pos],
            dead_lettered_at: 0,
            m: Message {
                seq: SeqNumber(seq),
                delivery_count: 0,
                lock_token: None,
                state,
                enqueued_at_ms: now,
                expires_at_ms: expires_at,
                visible_at_ms: visible_at,
                locked_until_ms: 0,
                dead_letter_reason: None,
                dead_letter_description: None,
                content,
            },
        };
        t.put(seq, None, Some(&row))?;
        seqs.insert(*i, SeqNumber(seq));
        if let Plan::Insert { key: Some((k, h)) } = &plans[*i] {
            let key = Key::new().s(queue).s(k);
            let exp = now.saturating_add(cfg.dedup_window_ms());
            // An expired entry for the key is replaced, with its janitor entry.
            if let Some(old) = t.dedup.get(key.bytes()).map_err(db)? {
                let mut r = R(old.value());
                let (_, _, old_exp) = (r.s()?, r.i()?, r.i()?);
                drop(old);
                t.expiring
                    .remove(expiring_key(EXP_DEDUP, old_exp, key.bytes()).as_slice())
                    .map_err(db)?;
            }
            let mut w = W::default();
            w.s(h).i(seq).i(exp);
            t.dedup.insert(key.bytes(), w.0.as_slice()).map_err(db)?;
            t.expiring
                .insert(expiring_key(EXP_DEDUP, exp, key.bytes()).as_slice(), ())
                .map_err(db)?;
        }
    }
    Ok(slots(&plans, &seqs))
}

// ---------------------------------------------------------------- claim

fn claimable(m: &Message, now: i64) -> bool {
    m.state == MessageState::Active
        && m.visible_at_ms <= now
        && (m.expires_at_ms == 0 || m.expires_at_ms > now)
}

/// The eligible heads of `queue`, oldest first, at most `max`: a walk of the ready
/// index (active, not waiting), so a blocked backlog and locked rows are never visited
/// (5.6); a line member is skipped if an older member of its line is locked, deferred
/// or scheduled (one seek of the blocking index), as in the SQL stores.
fn pick_heads(t: &Tables<'_>, now: i64, queue: &str, max: usize) -> Result<Vec<Row>> {
    let prefix = Key::new().s(queue);
    let end = prefix.end();
    let mut out = Vec::new();
    if max == 0 {
        return Ok(out);
    }
    t.work.lookup();
    for e in t.ix[Ix::Ready as usize]
        .range::<&[u8]>(prefix.bytes()..end.as_slice())
        .map_err(db)?
    {
        let (k, _) = e.map_err(db)?;
        t.work.visit();
        let seq = trailing_i64(k.value());
        let Some(row) = t.row(seq)? else { continue };
        if !claimable(&row.m, now) {
            continue;
        }
        if let Some(line) = &row.line {
            let older = t.first_seq(Ix::LineBlock, &Key::new().s(queue).s(line))?;
            if older.is_some_and(|o| o < seq) {
                continue;
            }
        }
        out.push(row);
        if out.len() >= max {
            break;
        }
    }
    Ok(out)
}

pub(crate) fn claim(
    t: &mut Tables<'_>,
    now: i64,
    queue: &str,
    spec: &ClaimSpec,
) -> Result<Vec<Message>> {
    let cfg = load_queue(t, queue)?;
    let mode_code = match spec.mode {
        ReceiveMode::PeekLock => 0i64,
        ReceiveMode::ReceiveAndDelete => 1,
    };
    if let Some(attempt) = &spec.attempt_id {
        t.work.lookup();
        let key = Key::new().s(queue).s(attempt);
        if let Some(v) = t.attempts.get(key.bytes()).map_err(db)? {
            let mut r = R(v.value());
            let (mode, exp) = (r.i()?, r.i()?);
            if exp > now {
                if mode != mode_code {
                    return Err(Error::invalid(
                        "receive_attempt_id was used with another receive mode",
                    ));
                }
                return Ok(decode_messages(&r.bytes()?));
            }
        }
    }
    let max = spec.max_messages as usize;
    let out = match spec.mode {
        ReceiveMode::PeekLock => {
            let heads = pick_heads(t, now, queue, max)?;
            let tokens = LockToken::random_batch(heads.len());
            let mut out = Vec::with_capacity(heads.len());
            for (row, token) in heads.into_iter().zip(tokens) {
                let mut new = row.clone();
                new.m.state = MessageState::Locked;
                new.m.locked_until_ms = now + cfg.lock_ms();
                new.m.lock_token = Some(token);
                new.m.delivery_count += 1;
                t.put(row.m.seq.0, Some(&row), Some(&new))?;
                out.push(new.m);
            }
            out
        }
        ReceiveMode::ReceiveAndDelete => receive_and_delete(t, now, queue, max)?,
    };
    if let Some(attempt) = spec.attempt_id.as_ref().filter(|_| !out.is_empty()) {
        let key = Key::new().s(queue).s(attempt);
        let exp = now.saturating_add(RECEIPT_TTL_MS);
        if let Some(old) = t.attempts.get(key.bytes()).map_err(db)? {
            let mut r = R(old.value());
            let (_, old_exp) = (r.i()?, r.i()?);
            drop(old);
            t.expiring
                .remove(expiring_key(EXP_ATTEMPT, old_exp, key.bytes()).as_slice())
                .map_err(db)?;
        }
        let mut w = W::default();
        w.i(mode_code).i(exp).bytes(&encode_messages(&out));
        t.attempts.insert(key.bytes(), w.0.as_slice()).map_err(db)?;
        t.expiring
            .insert(expiring_key(EXP_ATTEMPT, exp, key.bytes()).as_slice(), ())
            .map_err(db)?;
    }
    Ok(out)
}

/// Receive-and-delete: the heads, then each head's line in order while its members
/// are claimable, the oldest `max` of all that deleted; the lines they left get their
/// next heads (1.7).
fn receive_and_delete(
    t: &mut Tables<'_>,
    now: i64,
    queue: &str,
    max: usize,
) -> Result<Vec<Message>> {
    let heads = pick_heads(t, now, queue, max)?;
    let mut chains: Vec<(Option<String>, VecDeque<Row>)> = Vec::new();
    for head in heads {
        let line = head.line.clone();
        let mut chain: VecDeque<Row> = VecDeque::new();
        let head_seq = head.m.seq.0;
        chain.push_back(head);
        if let Some(l) = &line {
            let mut members = Vec::new();
            for seq in t.seqs(Ix::Line, &Key::new().s(queue).s(l), max + 1)? {
                if seq == head_seq {
                    continue;
                }
                if let Some(r) = t.row(seq)? {
                    members.push(r);
                }
            }
            members.truncate(max);
            chain.extend(members.into_iter().take_while(|r| claimable(&r.m, now)));
        }
        chains.push((line, chain));
    }
    let mut taken: Vec<Row> = Vec::new();
    while taken.len() < max {
        let Some((_, chain)) = chains
            .iter_mut()
            .filter(|(_, c)| !c.is_empty())
            .min_by_key(|(_, c)| c[0].m.seq)
        else {
            break;
        };
        if let Some(r) = chain.pop_front() {
            taken.push(r);
        }
    }
    let mut departed = Departed::default();
    for r in &taken {
        t.put(r.m.seq.0, Some(r), None)?;
        if let Some(l) = &r.line {
            departed.0.insert((queue.to_owned(), l.clone()));
        }
    }
    departed.release(t)?;
    Ok(taken
        .into_iter()
        .map(|r| {
            let mut m = r.m;
            m.delivery_count += 1;
            m.state = MessageState::Locked;
            m.lock_token = None;
            m.locked_until_ms = 0;
            m
        })
        .collect())
}

pub(crate) fn receive_deferred(
    t: &mut Tables<'_>,
    now: i64,
    queue: &str,
    seqs: &[SeqNumber],
) -> Result<Vec<Message>> {
    let cfg = load_queue(t, queue)?;
    let mut out = Vec::new();
    for s in seqs {
        let Some(row) = t.row(s.0)? else { continue };
        if row.queue != queue
            || row.m.state != MessageState::Deferred
            || (row.m.expires_at_ms != 0 && row.m.expires_at_ms <= now)
        {
            continue;
        }
        let mut new = row.clone();
        new.m.state = MessageState::Locked;
        new.m.locked_until_ms = now + cfg.lock_ms();
        new.m.lock_token = Some(LockToken::random());
        new.m.delivery_count += 1;
        t.put(s.0, Some(&row), Some(&new))?;
        out.push(new.m);
    }
    Ok(out)
}

// ---------------------------------------------------------------- settle

/// The row under `lock` if its fence holds: in `queue`, locked, the lease live at `now`
/// and the token the current one (2.6, 2.9).
/// Why `lock` finds no live lease (only asked once the fence refused it).
fn lost_reason(t: &Tables<'_>, now: i64, queue: &str, lock: &LockRef) -> Result<LockLostReason> {
    Ok(match t.row(lock.seq.0)? {
        None => LockLostReason::Gone,
        Some(r) if r.queue != queue => LockLostReason::WrongQueue,
        Some(r) if r.m.state != MessageState::Locked => LockLostReason::NotLocked,
        Some(r) if r.m.lock_token != Some(lock.token) => LockLostReason::OtherToken,
        Some(r) if r.m.locked_until_ms <= now => LockLostReason::Expired,
        Some(_) => LockLostReason::Unknown,
    })
}

fn fenced(t: &Tables<'_>, now: i64, queue: &str, lock: &LockRef) -> Result<Option<Row>> {
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

// ---------------------------------------------------------------- admin reads

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

/// A queue's dead letters dead-lettered at or before `cutoff`, oldest first.
fn dlq_oldest(t: &Tables<'_>, queue: &str, cutoff: i64, limit: usize) -> Result<Vec<i64>> {
    let prefix = Key::new().s(queue);
    let end = prefix.clone().i(cutoff).end();
    Ok(t.scan(Ix::Dlq, prefix.bytes(), &end, limit)?
        .iter()
        .map(|k| trailing_i64(k))
        .collect())
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
    let mut picked: Vec<Row> = Vec::new();
    if o.seq_numbers.is_empty() {
        for seq in dlq_oldest(t, queue, cutoff, limit)? {
            if let Some(r) = t.row(seq)? {
                picked.push(r);
            }
        }
    } else {
        // A selected redrive: one lookup per number, then the order and bounds of the
        // dead-letter index.
        let mut seqs: Vec<i64> = o.seq_numbers.iter().map(|s| s.0).collect();
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

// ---------------------------------------------------------------- recovery

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
        let age = RetentionDefaults::resolve(c.dlq_max_age_ms, defaults.max_age_ms());
        let count = RetentionDefaults::resolve(c.dlq_max_count, defaults.max_count);
        let bytes = RetentionDefaults::resolve(c.dlq_max_bytes, defaults.max_bytes);
        if age == 0 && count == 0 && bytes == 0 {
            continue;
        }
        let mut oldest = Vec::new();
        for seq in dlq_oldest(t, &q.name, i64::MAX, usize::MAX)? {
            if let Some(r) = t.row(seq)? {
                oldest.push((seq, r.m.content.body.len() as i64, r.dead_lettered_at));
            }
        }
        let mut n = oldest.len() as i64;
        let mut size: i64 = oldest.iter().map(|(_, l, _)| l).sum();
        let age_cutoff = if age > 0 {
            now.saturating_sub(age)
        } else {
            i64::MIN
        };
        for (seq, len, at) in oldest {
            let over = at <= age_cutoff || (count > 0 && n > count) || (bytes > 0 && size > bytes);
            if !over {
                break;
            }
            doomed.push(seq);
            n -= 1;
            size -= len;
        }
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

// ---------------------------------------------------------------- access keys

pub(crate) fn create_key(t: &mut Tables<'_>, k: &AccessKey) -> Result<()> {
    if t.keys.get(k.id.as_str()).map_err(db)?.is_some() {
        return Err(Error::KeyConflict { id: k.id.clone() });
    }
    t.keys
        .insert(k.id.as_str(), encode_key(k).as_slice())
        .map_err(db)?;
    t.keys_by_digest
        .insert(k.digest.as_str(), k.id.as_str())
        .map_err(db)?;
    Ok(())
}

pub(crate) fn list_keys(t: &Tables<'_>, after: Option<&str>, limit: u32) -> Result<Vec<AccessKey>> {
    let mut out = Vec::new();
    let range = match after {
        Some(a) => t
            .keys
            .range::<&str>((std::ops::Bound::Excluded(a), std::ops::Bound::Unbounded)),
        None => t.keys.iter(),
    }
    .map_err(db)?;
    for e in range {
        if out.len() >= limit as usize {
            break;
        }
        let (k, v) = e.map_err(db)?;
        out.push(decode_key(k.value(), v.value())?);
    }
    Ok(out)
}

pub(crate) fn revoke_key(t: &mut Tables<'_>, now: i64, id: &str) -> Result<bool> {
    let key = match t.keys.get(id).map_err(db)? {
        Some(v) => decode_key(id, v.value())?,
        None => return Ok(false),
    };
    if key.revoked_at_ms == 0 {
        let k = AccessKey {
            revoked_at_ms: now,
            ..key
        };
        t.keys.insert(id, encode_key(&k).as_slice()).map_err(db)?;
    }
    Ok(true)
}

pub(crate) fn key_by_digest(t: &Tables<'_>, digest: &str) -> Result<Option<AccessKey>> {
    let Some(id) = t
        .keys_by_digest
        .get(digest)
        .map_err(db)?
        .map(|v| v.value().to_owned())
    else {
        return Ok(None);
    };
    match t.keys.get(id.as_str()).map_err(db)? {
        Some(v) => decode_key(&id, v.value()).map(Some),
        None => Ok(None),
    }
}

// ---------------------------------------------------------------- topics

fn subscription(name: &str, buf: &[u8]) -> Result<Subscription> {
    let mut r = R(buf);
    Ok(Subscription {
        topic: r.s()?,
        name: name.to_owned(),
        filter: r.s()?,
    })
}

pub(crate) fn upsert_subscription(
    t: &mut Tables<'_>,
    now: i64,
    s: &Subscription,
    config: &QueueConfig,
) -> Result<()> {
    match load_any(t, &s.topic)? {
        (QueueKind::Topic, _) => {}
        (kind, _) => {
            return Err(Error::invalid(format!(
                "{:?} is a {kind}, not a topic",
                s.topic
            )));
        }
    }
    let existing = t
        .subs
        .get(s.name.as_str())
        .map_err(db)?
        .map(|v| {
            let sub = subscription(&s.name, v.value())?;
            let mut r = R(v.value());
            let (_, _, created) = (r.s()?, r.s()?, r.i()?);
            Ok::<_, Error>((sub, created))
        })
        .transpose()?;
    if let Some((other, _)) = &existing
        && other.topic != s.topic
    {
        return Err(Error::NameConflict {
            name: s.name.clone(),
            existing: format!("subscription of topic {:?}", other.topic),
        });
    }
    upsert_queue(t, now, &s.name, QueueKind::Subscription, config, false)?;
    let created = existing.map_or(now, |(_, c)| c);
    let mut w = W::default();
    w.s(&s.topic).s(&s.filter).i(created);
    t.subs.insert(s.name.as_str(), w.0.as_slice()).map_err(db)?;
    t.subs_by_topic
        .insert(Key::new().s(&s.topic).s(&s.name).bytes(), ())
        .map_err(db)?;
    Ok(())
}

pub(crate) fn list_subscriptions(t: &Tables<'_>, topic: Option<&str>) -> Result<Vec<Subscription>> {
    let (start, end) = match topic {
        Some(tp) => {
            let k = Key::new().s(tp);
            (k.0.clone(), k.end())
        }
        // Every key starts with an encoded string, whose first byte is never 0xFF.
        None => (Vec::new(), vec![0xFF; 8]),
    };
    let mut names = Vec::new();
    for e in t
        .subs_by_topic
        .range::<&[u8]>(start.as_slice()..end.as_slice())
        .map_err(db)?
    {
        let k = e.map_err(db)?.0.value().to_vec();
        let (_, pos) = key_str(&k, 0).ok_or_else(|| crate::enc::corrupt("key"))?;
        names.push(
            key_str(&k, pos)
                .ok_or_else(|| crate::enc::corrupt("key"))?
                .0,
        );
    }
    let mut out = Vec::new();
    for n in names {
        if let Some(v) = t.subs.get(n.as_str()).map_err(db)? {
            out.push(subscription(&n, v.value())?);
        }
    }
    Ok(out)
}

pub(crate) fn publish(
    t: &mut Tables<'_>,
    now: i64,
    topic: &str,
    routes: Vec<Route>,
    options: SendOptions,
) -> Result<Vec<Vec<EnqueueSlot>>> {
    // As the SQL flow: a missing name is the queue lookup's NotFound, another kind is
    // a missing topic.
    if load_any(t, topic)?.0 != QueueKind::Topic {
        return Err(Error::NotFound {
            kind: "topic",
            name: topic.to_owned(),
        });
    }
    let current: HashSet<String> = list_subscriptions(t, Some(topic))?
        .into_iter()
        .map(|s| s.name)
        .collect();
    let mut out = Vec::with_capacity(routes.len());
    for route in routes {
        if !current.contains(&route.subscription) || route.messages.is_empty() {
            out.push(Vec::new());
            continue;
        }
        out.push(enqueue(
            t,
            now,
            &route.subscription,
            route.messages,
            options,
        )?);
    }
    Ok(out)
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

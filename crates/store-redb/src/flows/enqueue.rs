//! Sends and their dedup entries: crates/sql's `enqueue`.

use std::collections::HashMap;

use redb::ReadableTable;

use mqlite_contract::{EnqueueSlot, Message, OutMessage, Result, SendOptions, SeqNumber};
use mqlite_kit::enqueue::{
    Fresh, Plan, Timing, dedup_keys, plan, require_groups, slots, waiting_flags,
};

use crate::db;
use crate::enc::{Decoder, Encoder, Key, MessageRow};
use crate::tables::{EXP_DEDUP, Tables};

use super::{busy_lines, expiring_key, load_queue};

/// The meta key of the sequence counter (the last number handed out).
pub(super) const LAST_SEQ: &str = "last_seq";

fn next_seq(t: &mut Tables<'_>) -> Result<i64> {
    let last = match t.meta.get(LAST_SEQ).map_err(db)? {
        Some(v) => Decoder(v.value()).i()?,
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
            let mut r = Decoder(v.value());
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
        let row = MessageRow {
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
                let mut r = Decoder(old.value());
                let (_, _, old_exp) = (r.s()?, r.i()?, r.i()?);
                drop(old);
                t.expiring
                    .remove(expiring_key(EXP_DEDUP, old_exp, key.bytes()).as_slice())
                    .map_err(db)?;
            }
            let mut w = Encoder::default();
            w.s(h).i(seq).i(exp);
            t.dedup.insert(key.bytes(), w.0.as_slice()).map_err(db)?;
            t.expiring
                .insert(expiring_key(EXP_DEDUP, exp, key.bytes()).as_slice(), ())
                .map_err(db)?;
        }
    }
    Ok(slots(&plans, &seqs))
}

//! Claims (peek-lock and receive-and-delete), receive attempts, deferred messages:
//! crates/sql's `claim`.

use std::collections::VecDeque;

use redb::ReadableTable;

use mqlite_contract::{
    ClaimSpec, LockToken, Message, MessageState, RECEIPT_TTL_MS, ReceiveMode, Result, SeqNumber,
    limits,
};
use mqlite_kit::codec::{decode_messages, encode_messages};
use mqlite_kit::decide;

use crate::db;
use crate::enc::{Decoder, Encoder, Key, MessageRow, trailing_i64};
use crate::tables::{EXP_ATTEMPT, Ix, Tables};

use super::{Departed, expiring_key, load_queue};

/// The eligible heads of `queue`, oldest first, at most `max`: a walk of the ready
/// index (active, not waiting), so a blocked backlog and locked rows are never visited
/// (5.6); a line member is skipped if an older member of its line is locked, deferred
/// or scheduled (one seek of the blocking index), as in the SQL stores.
fn pick_heads(t: &Tables<'_>, now: i64, queue: &str, max: usize) -> Result<Vec<MessageRow>> {
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
        if !decide::claimable(&row.m, now) {
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
    // Refused as the engine and the SQL stores refuse it: a caller of the store alone
    // would otherwise claim without bound in one transaction.
    if spec.max_messages > limits::MAX_RECEIVE_BATCH {
        return Err(limits::receive_batch_out_of_range());
    }
    let cfg = load_queue(t, queue)?;
    let mode_code = decide::mode_code(spec.mode);
    if let Some(attempt) = &spec.attempt_id {
        t.work.lookup();
        let key = Key::new().s(queue).s(attempt);
        if let Some(v) = t.attempts.get(key.bytes()).map_err(db)? {
            let mut r = Decoder(v.value());
            let (mode, exp) = (r.i()?, r.i()?);
            if exp > now {
                decide::replay_attempt(mode, spec.mode)?;
                return Ok(decode_messages(&r.bytes()?));
            }
        }
    }
    // A queue paused for receives hands out nothing (19.2); a replayed attempt above
    // answers what it was given before the pause.
    if !cfg.status.hands_out() {
        return Ok(Vec::new());
    }
    let max = spec.max_messages as usize;
    let out = match spec.mode {
        ReceiveMode::PeekLock => {
            let heads = pick_heads(t, now, queue, max)?;
            let tokens = LockToken::random_batch(heads.len());
            let mut out = Vec::with_capacity(heads.len());
            for (row, token) in heads.into_iter().zip(tokens) {
                let mut new = row.clone();
                decide::lock(&mut new.m, now, cfg.lock_ms(), token);
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
            let mut r = Decoder(old.value());
            let (_, old_exp) = (r.i()?, r.i()?);
            drop(old);
            t.expiring
                .remove(expiring_key(EXP_ATTEMPT, old_exp, key.bytes()).as_slice())
                .map_err(db)?;
        }
        let mut w = Encoder::default();
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
    let mut chains: Vec<(Option<String>, VecDeque<MessageRow>)> = Vec::new();
    for head in heads {
        let line = head.line.clone();
        let mut chain: VecDeque<MessageRow> = VecDeque::new();
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
            chain.extend(
                members
                    .into_iter()
                    .take_while(|r| decide::claimable(&r.m, now)),
            );
        }
        chains.push((line, chain));
    }
    let mut taken: Vec<MessageRow> = Vec::new();
    while taken.len() < max {
        let Some((_, chain)) = chains
            .iter_mut()
            .filter(|(_, c)| !c.is_empty())
            .min_by_key(|(_, c)| decide::claim_order(&c[0].m))
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
    if !cfg.status.hands_out() {
        return Ok(Vec::new());
    }
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
        decide::lock(&mut new.m, now, cfg.lock_ms(), LockToken::random());
        t.put(s.0, Some(&row), Some(&new))?;
        out.push(new.m);
    }
    Ok(out)
}

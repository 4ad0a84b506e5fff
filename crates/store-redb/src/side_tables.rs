//! The side tables (`mqlite_contract::side_tables`) in redb: the consumer inbox and the
//! producer's relay outbox, each with the hand-built indexes its lookups need. redb
//! creates a table the first time a write transaction opens it, so the tables appear on
//! first use, inside the application's transaction.

use redb::{ReadableTable, TableDefinition, TableHandle, WriteTransaction};

use mqlite_contract::{
    Fingerprint, InboxMarker, OutMessage, RelayBacklog, RelayIntent, Result, SentEvidence,
    SeqNumber, SideSweep,
};
use mqlite_kit::codec::{decode_out, encode_out};

use crate::db;
use crate::enc::{Decoder, Encoder, Key, corrupt, key_str, trailing_i64};
use crate::tables::{DEDUP, MESSAGES};

/// (source, id, consumer) -> (fingerprint, applied_at).
const INBOX: TableDefinition<&[u8], &[u8]> = TableDefinition::new("mq_inbox");
/// (applied_at, source, id, consumer) -> (): the retention sweep.
const INBOX_APPLIED: TableDefinition<&[u8], ()> = TableDefinition::new("mq_inbox_applied");
/// seq -> (queue, source, id, created_at, published_at, message).
const RELAY: TableDefinition<u64, &[u8]> = TableDefinition::new("mq_relay");
/// seq -> (): only the pending intents.
const RELAY_PENDING: TableDefinition<u64, ()> = TableDefinition::new("mq_relay_pending");
/// (source, id, seq) -> (): the trace's lookup.
const RELAY_EVENT: TableDefinition<&[u8], ()> = TableDefinition::new("mq_relay_event");
/// (published_at, seq) -> (): the retention sweep of published intents.
const RELAY_PUBLISHED: TableDefinition<&[u8], ()> = TableDefinition::new("mq_relay_published");
/// seq -> (): the intents their target refused (kept for an operator).
const RELAY_REFUSED: TableDefinition<u64, ()> = TableDefinition::new("mq_relay_refused");

/// Whether a side table was ever created: a read of one never created answers empty
/// and creates nothing (redb creates a table a write transaction opens).
fn exists(txn: &WriteTransaction, name: &str) -> Result<bool> {
    Ok(txn.list_tables().map_err(db)?.any(|t| t.name() == name))
}

fn seq_key(seq: i64) -> Result<u64> {
    u64::try_from(seq).map_err(|_| corrupt("relay seq"))
}

struct Stored {
    queue: String,
    source: String,
    id: String,
    created_at: i64,
    published_at: i64,
    refused_at: i64,
    message: Vec<u8>,
}

impl Stored {
    fn encode(&self) -> Vec<u8> {
        let mut w = Encoder::default();
        w.s(&self.queue)
            .s(&self.source)
            .s(&self.id)
            .i(self.created_at)
            .i(self.published_at)
            .i(self.refused_at)
            .bytes(&self.message);
        w.0
    }

    fn decode(buf: &[u8]) -> Result<Self> {
        let mut r = Decoder(buf);
        Ok(Stored {
            queue: r.s()?,
            source: r.s()?,
            id: r.s()?,
            created_at: r.i()?,
            published_at: r.i()?,
            refused_at: r.i()?,
            message: r.bytes()?,
        })
    }

    fn intent(self, seq: i64) -> Result<RelayIntent> {
        Ok(RelayIntent {
            seq,
            queue: self.queue,
            message: decode_out(&self.message).ok_or_else(|| corrupt("relay intent"))?,
            created_at_ms: self.created_at,
            published_at_ms: (self.published_at > 0).then_some(self.published_at),
            refused_at_ms: (self.refused_at > 0).then_some(self.refused_at),
        })
    }
}

pub(crate) fn inbox_markers(
    txn: &WriteTransaction,
    source: &str,
    id: &str,
) -> Result<Vec<InboxMarker>> {
    if !exists(txn, INBOX.name())? {
        return Ok(Vec::new());
    }
    let t = txn.open_table(INBOX).map_err(db)?;
    let prefix = Key::new().s(source).s(id);
    let mut out = Vec::new();
    for e in t
        .range::<&[u8]>(prefix.bytes()..prefix.end().as_slice())
        .map_err(db)?
    {
        let (k, v) = e.map_err(db)?;
        let (consumer, _) =
            key_str(k.value(), prefix.bytes().len()).ok_or_else(|| corrupt("inbox key"))?;
        let mut r = Decoder(v.value());
        out.push(InboxMarker {
            consumer,
            source: source.to_owned(),
            id: id.to_owned(),
            fingerprint: r.s()?.parse::<Fingerprint>()?,
            applied_at_ms: r.i()?,
        });
    }
    Ok(out)
}

pub(crate) fn inbox_insert(txn: &WriteTransaction, m: &InboxMarker) -> Result<()> {
    let key = Key::new().s(&m.source).s(&m.id).s(&m.consumer);
    let mut w = Encoder::default();
    w.s(&m.fingerprint.to_string()).i(m.applied_at_ms);
    let mut inbox = txn.open_table(INBOX).map_err(db)?;
    if inbox.get(key.bytes()).map_err(db)?.is_some() {
        // As the SQL stores' primary key: a marker is written once.
        return Err(mqlite_contract::Error::invalid(format!(
            "consumer {} already has a marker for ({}, {})",
            m.consumer, m.source, m.id
        )));
    }
    inbox.insert(key.bytes(), w.0.as_slice()).map_err(db)?;
    drop(inbox);
    let applied = Key::new()
        .i(m.applied_at_ms)
        .s(&m.source)
        .s(&m.id)
        .s(&m.consumer);
    txn.open_table(INBOX_APPLIED)
        .map_err(db)?
        .insert(applied.bytes(), ())
        .map_err(db)?;
    Ok(())
}

pub(crate) fn relay_insert(
    txn: &WriteTransaction,
    now: i64,
    queue: &str,
    message: &OutMessage,
) -> Result<i64> {
    let e = message
        .event
        .as_ref()
        .ok_or_else(|| mqlite_contract::Error::invalid("a relay intent needs an event identity"))?;
    let mut relay = txn.open_table(RELAY).map_err(db)?;
    let last = relay.last().map_err(db)?.map(|(k, _)| k.value());
    let seq = last.unwrap_or(0) + 1;
    let stored = Stored {
        queue: queue.to_owned(),
        source: e.source.clone(),
        id: e.id.clone(),
        created_at: now,
        published_at: 0,
        refused_at: 0,
        message: encode_out(message),
    };
    relay.insert(seq, stored.encode().as_slice()).map_err(db)?;
    let seq = i64::try_from(seq).map_err(|_| corrupt("relay seq"))?;
    txn.open_table(RELAY_PENDING)
        .map_err(db)?
        .insert(seq_key(seq)?, ())
        .map_err(db)?;
    txn.open_table(RELAY_EVENT)
        .map_err(db)?
        .insert(Key::new().s(&e.source).s(&e.id).i(seq).bytes(), ())
        .map_err(db)?;
    Ok(seq)
}

fn intent_at(relay: &impl ReadableTable<u64, &'static [u8]>, seq: i64) -> Result<RelayIntent> {
    let v = relay
        .get(seq_key(seq)?)
        .map_err(db)?
        .ok_or_else(|| corrupt("relay index entry without its intent"))?;
    Stored::decode(v.value())?.intent(seq)
}

pub(crate) fn relay_pending(txn: &WriteTransaction, limit: usize) -> Result<Vec<RelayIntent>> {
    if !exists(txn, RELAY_PENDING.name())? {
        return Ok(Vec::new());
    }
    let pending = txn.open_table(RELAY_PENDING).map_err(db)?;
    let relay = txn.open_table(RELAY).map_err(db)?;
    let mut out = Vec::new();
    for e in pending.iter().map_err(db)?.take(limit) {
        let seq = i64::try_from(e.map_err(db)?.0.value()).map_err(|_| corrupt("relay seq"))?;
        out.push(intent_at(&relay, seq)?);
    }
    Ok(out)
}

/// Takes pending intents out of the pending index, setting `published_at` (or, when
/// `refused`, `refused_at`) and the matching index entry; returns how many were pending.
fn settle_intents(txn: &WriteTransaction, now: i64, seqs: &[i64], refused: bool) -> Result<u64> {
    let mut pending = txn.open_table(RELAY_PENDING).map_err(db)?;
    let mut relay = txn.open_table(RELAY).map_err(db)?;
    let mut published = txn.open_table(RELAY_PUBLISHED).map_err(db)?;
    let mut refused_ix = txn.open_table(RELAY_REFUSED).map_err(db)?;
    let mut n = 0;
    for &seq in seqs {
        if pending.remove(seq_key(seq)?).map_err(db)?.is_none() {
            continue;
        }
        let mut s = match relay.get(seq_key(seq)?).map_err(db)? {
            Some(v) => Stored::decode(v.value())?,
            None => return Err(corrupt("pending intent without its row")),
        };
        if refused {
            s.refused_at = now;
            refused_ix.insert(seq_key(seq)?, ()).map_err(db)?;
        } else {
            s.published_at = now;
            published
                .insert(Key::new().i(now).i(seq).bytes(), ())
                .map_err(db)?;
        }
        relay
            .insert(seq_key(seq)?, s.encode().as_slice())
            .map_err(db)?;
        n += 1;
    }
    Ok(n)
}

pub(crate) fn relay_mark(txn: &WriteTransaction, now: i64, seqs: &[i64]) -> Result<u64> {
    settle_intents(txn, now, seqs, false)
}

pub(crate) fn relay_refuse(txn: &WriteTransaction, now: i64, seqs: &[i64]) -> Result<u64> {
    settle_intents(txn, now, seqs, true)
}

pub(crate) fn relay_find(
    txn: &WriteTransaction,
    source: &str,
    id: &str,
) -> Result<Vec<RelayIntent>> {
    if !exists(txn, RELAY_EVENT.name())? {
        return Ok(Vec::new());
    }
    let index = txn.open_table(RELAY_EVENT).map_err(db)?;
    let relay = txn.open_table(RELAY).map_err(db)?;
    let prefix = Key::new().s(source).s(id);
    let mut out = Vec::new();
    for e in index
        .range::<&[u8]>(prefix.bytes()..prefix.end().as_slice())
        .map_err(db)?
    {
        let seq = trailing_i64(e.map_err(db)?.0.value());
        out.push(intent_at(&relay, seq)?);
    }
    Ok(out)
}

pub(crate) fn relay_backlog(txn: &WriteTransaction) -> Result<RelayBacklog> {
    if !exists(txn, RELAY_PENDING.name())? {
        return Ok(RelayBacklog::default());
    }
    let refused = txn.open_table(RELAY_REFUSED).map_err(db)?;
    let refused = redb::ReadableTableMetadata::len(&refused).map_err(db)?;
    let pending = txn.open_table(RELAY_PENDING).map_err(db)?;
    let relay = txn.open_table(RELAY).map_err(db)?;
    let count = redb::ReadableTableMetadata::len(&pending).map_err(db)?;
    let oldest = match pending.first().map_err(db)? {
        Some((k, _)) => {
            let seq = i64::try_from(k.value()).map_err(|_| corrupt("relay seq"))?;
            Some(intent_at(&relay, seq)?.created_at_ms)
        }
        None => None,
    };
    Ok(RelayBacklog {
        pending: count,
        oldest_created_at_ms: oldest,
        refused,
    })
}

pub(crate) fn sweep(
    txn: &WriteTransaction,
    markers_before: i64,
    intents_before: i64,
) -> Result<SideSweep> {
    let mut out = SideSweep::default();
    if exists(txn, INBOX_APPLIED.name())? {
        sweep_markers(txn, markers_before, &mut out)?;
    }
    if exists(txn, RELAY_PUBLISHED.name())? {
        sweep_intents(txn, intents_before, &mut out)?;
    }
    Ok(out)
}

fn sweep_markers(txn: &WriteTransaction, markers_before: i64, out: &mut SideSweep) -> Result<()> {
    let mut applied = txn.open_table(INBOX_APPLIED).map_err(db)?;
    let mut inbox = txn.open_table(INBOX).map_err(db)?;
    let end = Key::new().i(markers_before);
    let old: Vec<Vec<u8>> = applied
        .range::<&[u8]>(..end.bytes())
        .map_err(db)?
        .map(|e| e.map(|(k, _)| k.value().to_vec()).map_err(db))
        .collect::<Result<_>>()?;
    for k in old {
        applied.remove(k.as_slice()).map_err(db)?;
        // The marker's key is the sweep key without its leading time.
        inbox.remove(&k[8..]).map_err(db)?;
        out.markers += 1;
    }
    Ok(())
}

fn sweep_intents(txn: &WriteTransaction, intents_before: i64, out: &mut SideSweep) -> Result<()> {
    let mut published = txn.open_table(RELAY_PUBLISHED).map_err(db)?;
    let mut relay = txn.open_table(RELAY).map_err(db)?;
    let mut by_event = txn.open_table(RELAY_EVENT).map_err(db)?;
    let end = Key::new().i(intents_before);
    let old: Vec<Vec<u8>> = published
        .range::<&[u8]>(..end.bytes())
        .map_err(db)?
        .map(|e| e.map(|(k, _)| k.value().to_vec()).map_err(db))
        .collect::<Result<_>>()?;
    for k in old {
        published.remove(k.as_slice()).map_err(db)?;
        let seq = trailing_i64(&k);
        if let Some(v) = relay.remove(seq_key(seq)?).map_err(db)? {
            let s = Stored::decode(v.value())?;
            drop(v);
            by_event
                .remove(Key::new().s(&s.source).s(&s.id).i(seq).bytes())
                .map_err(db)?;
        }
        out.intents += 1;
    }
    Ok(())
}

pub(crate) fn find_sent(txn: &WriteTransaction, queue: &str, key: &str) -> Result<SentEvidence> {
    let dedup = txn.open_table(DEDUP).map_err(db)?;
    let Some(v) = dedup.get(Key::new().s(queue).s(key).bytes()).map_err(db)? else {
        return Ok(SentEvidence::default());
    };
    let mut r = Decoder(v.value());
    let (_hash, seq, exp) = (r.s()?, r.i()?, r.i()?);
    let messages = txn.open_table(MESSAGES).map_err(db)?;
    let message = match messages.get(seq_key(seq)?).map_err(db)? {
        Some(v) => {
            let row = crate::enc::MessageRow::decode(v.value())?;
            (row.queue == queue).then_some(row.m)
        }
        None => None,
    };
    Ok(SentEvidence {
        dedup: Some((SeqNumber(seq), exp)),
        message,
    })
}

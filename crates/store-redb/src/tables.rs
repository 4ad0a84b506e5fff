//! The tables of one write transaction: the rows, the hand-built indexes (one per
//! lookup the SQL schema gets from a partial index) and the auxiliary tables. Every
//! transition goes through [`Tables::put`], which rewrites a row and its index entries
//! together, so an index can never disagree with its row.

use std::sync::atomic::{AtomicU64, Ordering};

use redb::{ReadableTable, ReadableTableMetadata, Table, TableDefinition, WriteTransaction};

use mqlite_contract::{Error, MessageState, Result, WorkStats};

use crate::db;
use crate::enc::{Key, MessageRow, state_code, trailing_i64};

pub(crate) const META: TableDefinition<&str, &[u8]> = TableDefinition::new("mq_meta");
pub(crate) const QUEUES: TableDefinition<&str, &[u8]> = TableDefinition::new("mq_queues");
/// Subscription name -> (topic, filter, created_at).
pub(crate) const SUBS: TableDefinition<&str, &[u8]> = TableDefinition::new("mq_subscriptions");
/// (topic, name) -> ().
pub(crate) const SUBS_BY_TOPIC: TableDefinition<&[u8], ()> =
    TableDefinition::new("mq_subscriptions_by_topic");
/// Sequence number -> row.
pub(crate) const MESSAGES: TableDefinition<u64, &[u8]> = TableDefinition::new("mq_messages");
/// (queue, dedup key) -> (body hash, seq, expires_at).
pub(crate) const DEDUP: TableDefinition<&[u8], &[u8]> = TableDefinition::new("mq_dedup");
/// (queue, seq, token, op, args) -> expires_at.
pub(crate) const RECEIPTS: TableDefinition<&[u8], i64> = TableDefinition::new("mq_receipts");
/// (queue, attempt id) -> (mode, expires_at, response).
pub(crate) const ATTEMPTS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("mq_attempts");
/// (kind, expires_at, key of the entry) -> (): the janitor's walk.
pub(crate) const EXPIRING: TableDefinition<&[u8], ()> = TableDefinition::new("mq_expiring");
pub(crate) const ACCESS_KEYS: TableDefinition<&str, &[u8]> = TableDefinition::new("mq_access_keys");
pub(crate) const KEYS_BY_DIGEST: TableDefinition<&str, &str> =
    TableDefinition::new("mq_access_keys_by_digest");
/// Schedule name -> the schedule (21): created on first write, so a file of an older
/// build opens and gains it.
pub(crate) const SCHEDULES: TableDefinition<&str, &[u8]> = TableDefinition::new("mq_schedules");

/// The kinds of [`EXPIRING`] entries.
pub(crate) const EXP_DEDUP: u8 = 1;
pub(crate) const EXP_RECEIPT: u8 = 2;
pub(crate) const EXP_ATTEMPT: u8 = 3;

/// The message indexes. Each maps a key ending in the sequence number to ().
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ix {
    /// (queue, seq), or (queue, -priority, seq) for a priority above 0: active and not
    /// waiting — the line heads a claim walks (5.6), highest priority first (20.1).
    Ready = 0,
    /// (queue, seq): every message of a queue (peek, delete).
    Queue,
    /// (queue, state, seq): every message by state (stats, peek by state, deferred).
    State,
    /// (queue, line, seq): members of a line still in play (busy lines, promotion).
    Line,
    /// (queue, line, seq): members of a line locked, deferred or scheduled (the
    /// head-of-line probe).
    LineBlock,
    /// (locked_until, seq): leases (the reaper).
    Lease,
    /// (visible_at, seq): scheduled rows (the scheduler).
    Due,
    /// (expires_at, seq): deadlines of rows in play (TTL).
    Expiry,
    /// (queue, dead_lettered_at, seq): dead letters, oldest first.
    Dlq,
}

pub(crate) const IXS: [Ix; 9] = [
    Ix::Ready,
    Ix::Queue,
    Ix::State,
    Ix::Line,
    Ix::LineBlock,
    Ix::Lease,
    Ix::Due,
    Ix::Expiry,
    Ix::Dlq,
];

pub(crate) const IX_DEFS: [TableDefinition<&[u8], ()>; 9] = [
    TableDefinition::new("ix_ready"),
    TableDefinition::new("ix_queue"),
    TableDefinition::new("ix_state"),
    TableDefinition::new("ix_line"),
    TableDefinition::new("ix_line_block"),
    TableDefinition::new("ix_lease"),
    TableDefinition::new("ix_due"),
    TableDefinition::new("ix_expiry"),
    TableDefinition::new("ix_dlq"),
];

/// The index entries a row has: exactly these, no more.
pub(crate) fn entries(seq: i64, r: &MessageRow) -> Vec<(Ix, Vec<u8>)> {
    let q = || Key::new().s(&r.queue);
    let st = r.state();
    let mut out = vec![
        (Ix::Queue, q().i(seq).0),
        (Ix::State, q().b(state_code(st)).i(seq).0),
    ];
    if st == MessageState::Active && !r.waiting {
        // A priority above 0 leads with its negation, which orders before every
        // sequence number (20.1): the claim's walk meets the highest priority first.
        // Priority 0 keeps the key it always had.
        let key = match r.m.content.priority {
            0 => q().i(seq),
            p => q().i(-i64::from(p)).i(seq),
        };
        out.push((Ix::Ready, key.0));
    }
    if let (Some(line), true) = (&r.line, r.in_play()) {
        out.push((Ix::Line, q().s(line).i(seq).0));
        if matches!(
            st,
            MessageState::Locked | MessageState::Deferred | MessageState::Scheduled
        ) {
            out.push((Ix::LineBlock, q().s(line).i(seq).0));
        }
    }
    match st {
        MessageState::Locked => out.push((Ix::Lease, Key::new().i(r.m.locked_until_ms).i(seq).0)),
        MessageState::Scheduled => out.push((Ix::Due, Key::new().i(r.m.visible_at_ms).i(seq).0)),
        MessageState::DeadLettered => out.push((Ix::Dlq, q().i(r.dead_lettered_at).i(seq).0)),
        _ => {}
    }
    if r.m.expires_at_ms > 0 && r.in_play() {
        out.push((Ix::Expiry, Key::new().i(r.m.expires_at_ms).i(seq).0));
    }
    out
}

/// Work since open: lookups issued and entries visited.
#[derive(Debug, Default)]
pub(crate) struct WorkCounter {
    lookups: AtomicU64,
    visits: AtomicU64,
}

impl WorkCounter {
    pub(crate) fn get(&self) -> WorkStats {
        WorkStats {
            statements: self.lookups.load(Ordering::Relaxed),
            visits: self.visits.load(Ordering::Relaxed),
        }
    }
    pub(crate) fn lookup(&self) {
        self.lookups.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn visit(&self) {
        self.visits.fetch_add(1, Ordering::Relaxed);
    }
}

/// Every table of mqlite, opened in one write transaction.
pub(crate) struct Tables<'t> {
    pub(crate) meta: Table<'t, &'static str, &'static [u8]>,
    pub(crate) queues: Table<'t, &'static str, &'static [u8]>,
    pub(crate) subs: Table<'t, &'static str, &'static [u8]>,
    pub(crate) subs_by_topic: Table<'t, &'static [u8], ()>,
    pub(crate) messages: Table<'t, u64, &'static [u8]>,
    pub(crate) ix: Vec<Table<'t, &'static [u8], ()>>,
    pub(crate) dedup: Table<'t, &'static [u8], &'static [u8]>,
    pub(crate) receipts: Table<'t, &'static [u8], i64>,
    pub(crate) attempts: Table<'t, &'static [u8], &'static [u8]>,
    pub(crate) expiring: Table<'t, &'static [u8], ()>,
    pub(crate) keys: Table<'t, &'static str, &'static [u8]>,
    pub(crate) keys_by_digest: Table<'t, &'static str, &'static str>,
    pub(crate) schedules: Table<'t, &'static str, &'static [u8]>,
    pub(crate) work: &'t WorkCounter,
}

impl<'t> Tables<'t> {
    /// Opens (creating when missing) every table in `txn`.
    pub(crate) fn open(txn: &'t WriteTransaction, work: &'t WorkCounter) -> Result<Self> {
        let mut ix = Vec::with_capacity(IX_DEFS.len());
        for def in IX_DEFS {
            ix.push(txn.open_table(def).map_err(db)?);
        }
        Ok(Tables {
            meta: txn.open_table(META).map_err(db)?,
            queues: txn.open_table(QUEUES).map_err(db)?,
            subs: txn.open_table(SUBS).map_err(db)?,
            subs_by_topic: txn.open_table(SUBS_BY_TOPIC).map_err(db)?,
            messages: txn.open_table(MESSAGES).map_err(db)?,
            ix,
            dedup: txn.open_table(DEDUP).map_err(db)?,
            receipts: txn.open_table(RECEIPTS).map_err(db)?,
            attempts: txn.open_table(ATTEMPTS).map_err(db)?,
            expiring: txn.open_table(EXPIRING).map_err(db)?,
            keys: txn.open_table(ACCESS_KEYS).map_err(db)?,
            keys_by_digest: txn.open_table(KEYS_BY_DIGEST).map_err(db)?,
            schedules: txn.open_table(SCHEDULES).map_err(db)?,
            work,
        })
    }

    /// A row by sequence number.
    pub(crate) fn row(&self, seq: i64) -> Result<Option<MessageRow>> {
        self.work.lookup();
        let Ok(k) = u64::try_from(seq) else {
            return Ok(None);
        };
        match self.messages.get(k).map_err(db)? {
            Some(v) => {
                self.work.visit();
                MessageRow::decode(v.value()).map(Some)
            }
            None => Ok(None),
        }
    }

    /// Writes `new` in place of `old` (None: absent) under `seq`, with its index
    /// entries: the old row's entries go, the new row's come, in this transaction.
    pub(crate) fn put(
        &mut self,
        seq: i64,
        old: Option<&MessageRow>,
        new: Option<&MessageRow>,
    ) -> Result<()> {
        let old_e = old.map(|r| entries(seq, r)).unwrap_or_default();
        let new_e = new.map(|r| entries(seq, r)).unwrap_or_default();
        for e in &old_e {
            if !new_e.contains(e) {
                self.ix[e.0 as usize].remove(e.1.as_slice()).map_err(db)?;
            }
        }
        for e in &new_e {
            if !old_e.contains(e) {
                self.ix[e.0 as usize]
                    .insert(e.1.as_slice(), ())
                    .map_err(db)?;
            }
        }
        let k = u64::try_from(seq).map_err(|_| Error::invalid("negative sequence number"))?;
        match new {
            Some(r) => {
                self.messages.insert(k, r.encode().as_slice()).map_err(db)?;
            }
            None => {
                self.messages.remove(k).map_err(db)?;
            }
        }
        Ok(())
    }

    /// Up to `limit` keys of index `ix` in `[start, end)`, in key order.
    pub(crate) fn scan(
        &self,
        ix: Ix,
        start: &[u8],
        end: &[u8],
        limit: usize,
    ) -> Result<Vec<Vec<u8>>> {
        self.work.lookup();
        let mut out = Vec::new();
        if limit == 0 || start >= end {
            return Ok(out);
        }
        for e in self.ix[ix as usize]
            .range::<&[u8]>(start..end)
            .map_err(db)?
        {
            let (k, _) = e.map_err(db)?;
            self.work.visit();
            out.push(k.value().to_vec());
            if out.len() >= limit {
                break;
            }
        }
        Ok(out)
    }

    /// The sequence numbers of index `ix` under `prefix`, from `from` on, at most
    /// `limit`.
    pub(crate) fn seqs(&self, ix: Ix, prefix: &Key, limit: usize) -> Result<Vec<i64>> {
        Ok(self
            .scan(ix, prefix.bytes(), &prefix.end(), limit)?
            .iter()
            .map(|k| trailing_i64(k))
            .collect())
    }

    /// The first sequence number of index `ix` under `prefix`.
    pub(crate) fn first_seq(&self, ix: Ix, prefix: &Key) -> Result<Option<i64>> {
        Ok(self.seqs(ix, prefix, 1)?.first().copied())
    }

    /// How many entries index `ix` holds under `prefix`.
    pub(crate) fn count(&self, ix: Ix, prefix: &Key) -> Result<u64> {
        self.work.lookup();
        let end = prefix.end();
        let mut n = 0;
        for e in self.ix[ix as usize]
            .range::<&[u8]>(prefix.bytes()..end.as_slice())
            .map_err(db)?
        {
            e.map_err(db)?;
            self.work.visit();
            n += 1;
        }
        Ok(n)
    }

    /// Every index entry matches its row and every row has its entries: "ok", or the
    /// first disagreement found.
    pub(crate) fn check(&self) -> Result<String> {
        let mut expected: Vec<std::collections::BTreeSet<Vec<u8>>> =
            vec![Default::default(); IXS.len()];
        for e in self.messages.iter().map_err(db)? {
            let (k, v) = e.map_err(db)?;
            let seq = k.value() as i64;
            let row = MessageRow::decode(v.value())?;
            for (ix, key) in entries(seq, &row) {
                expected[ix as usize].insert(key);
            }
        }
        for ix in IXS {
            let table = &self.ix[ix as usize];
            let mut found = std::collections::BTreeSet::new();
            for e in table.iter().map_err(db)? {
                found.insert(e.map_err(db)?.0.value().to_vec());
            }
            if let Some(k) = expected[ix as usize].difference(&found).next() {
                return Ok(format!("{ix:?}: row {} lacks its entry", trailing_i64(k)));
            }
            if let Some(k) = found.difference(&expected[ix as usize]).next() {
                return Ok(format!("{ix:?}: stray entry for row {}", trailing_i64(k)));
            }
            if table.len().map_err(db)? != expected[ix as usize].len() as u64 {
                return Ok(format!("{ix:?}: entry count differs"));
            }
        }
        Ok("ok".to_owned())
    }
}

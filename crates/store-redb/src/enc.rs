//! Encodings: order-preserving composite keys for the index tables, and the compact
//! binary values of rows (a message row reuses the store kit's codec for the message).

use mqlite_contract::{
    AccessKey, Error, Message, MessageState, Missed, OrderingMode, QueueConfig, QueueKind,
    QueueStatus, Recurrence, Result, Schedule, ScheduleSpec, types::from_millis,
};
use mqlite_kit::codec::{decode_messages, decode_out, encode_messages, encode_out};

/// A composite key whose byte order is the order of its components: a string is its
/// bytes with 0x00 escaped as 0x00 0xFF and a 0x00 0x01 terminator; an integer is
/// big-endian with the sign bit flipped; a byte is itself.
#[derive(Debug, Clone, Default)]
pub(crate) struct Key(pub(crate) Vec<u8>);

impl Key {
    pub(crate) fn new() -> Self {
        Key(Vec::with_capacity(32))
    }
    pub(crate) fn s(mut self, s: &str) -> Self {
        for &b in s.as_bytes() {
            self.0.push(b);
            if b == 0 {
                self.0.push(0xFF);
            }
        }
        self.0.extend_from_slice(&[0, 1]);
        self
    }
    pub(crate) fn i(mut self, v: i64) -> Self {
        self.0
            .extend_from_slice(&((v as u64) ^ (1u64 << 63)).to_be_bytes());
        self
    }
    pub(crate) fn b(mut self, v: u8) -> Self {
        self.0.push(v);
        self
    }
    /// The smallest key greater than every key that starts with this one.
    pub(crate) fn end(&self) -> Vec<u8> {
        let mut out = self.0.clone();
        while let Some(last) = out.pop() {
            if last < 0xFF {
                out.push(last + 1);
                return out;
            }
        }
        vec![0xFF; 64]
    }
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.0
    }
}

/// The integer at the end of a key (every message index key ends with the sequence
/// number).
pub(crate) fn trailing_i64(key: &[u8]) -> i64 {
    let mut b = [0u8; 8];
    if key.len() >= 8 {
        b.copy_from_slice(&key[key.len() - 8..]);
    }
    (u64::from_be_bytes(b) ^ (1u64 << 63)) as i64
}

/// A decoded string component at `pos`, and the position after it.
pub(crate) fn key_str(key: &[u8], mut pos: usize) -> Option<(String, usize)> {
    let mut out = Vec::new();
    while pos + 1 < key.len() + 1 {
        let b = *key.get(pos)?;
        if b == 0 {
            match key.get(pos + 1)? {
                0xFF => out.push(0),
                1 => return Some((String::from_utf8(out).ok()?, pos + 2)),
                _ => return None,
            }
            pos += 2;
        } else {
            out.push(b);
            pos += 1;
        }
    }
    None
}

/// A length-prefixed value writer.
#[derive(Default)]
pub(crate) struct Encoder(pub(crate) Vec<u8>);

impl Encoder {
    pub(crate) fn i(&mut self, v: i64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub(crate) fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.i(b.len() as i64);
        self.0.extend_from_slice(b);
        self
    }
    pub(crate) fn s(&mut self, s: &str) -> &mut Self {
        self.bytes(s.as_bytes())
    }
    pub(crate) fn opt(&mut self, s: Option<&str>) -> &mut Self {
        match s {
            None => self.i(-1),
            Some(s) => self.s(s),
        }
    }
}

/// The reader of [`Encoder`]'s values.
pub(crate) struct Decoder<'a>(pub(crate) &'a [u8]);

pub(crate) fn corrupt(what: &str) -> Error {
    Error::backend("redb", CorruptValue(what.to_owned()))
}

/// A stored value that does not decode.
#[derive(Debug)]
pub(crate) struct CorruptValue(pub(crate) String);

impl std::fmt::Display for CorruptValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a stored {} does not decode", self.0)
    }
}

impl std::error::Error for CorruptValue {}

impl Decoder<'_> {
    pub(crate) fn i(&mut self) -> Result<i64> {
        let (head, rest) = self
            .0
            .split_first_chunk::<8>()
            .ok_or_else(|| corrupt("integer"))?;
        self.0 = rest;
        Ok(i64::from_le_bytes(*head))
    }
    pub(crate) fn bytes(&mut self) -> Result<Vec<u8>> {
        let n = usize::try_from(self.i()?).map_err(|_| corrupt("length"))?;
        if n > self.0.len() {
            return Err(corrupt("length"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head.to_vec())
    }
    pub(crate) fn s(&mut self) -> Result<String> {
        String::from_utf8(self.bytes()?).map_err(|_| corrupt("string"))
    }
    pub(crate) fn opt(&mut self) -> Result<Option<String>> {
        let n = self.i()?;
        if n < 0 {
            return Ok(None);
        }
        let n = usize::try_from(n).map_err(|_| corrupt("length"))?;
        if n > self.0.len() {
            return Err(corrupt("length"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        String::from_utf8(head.to_vec())
            .map(Some)
            .map_err(|_| corrupt("string"))
    }
    pub(crate) fn rest(&self) -> &[u8] {
        self.0
    }
}

/// A message row: the message and what the SQL schema keeps beside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MessageRow {
    pub(crate) queue: String,
    /// Its ordering line (see the line rule), fixed at enqueue (and redrive).
    pub(crate) line: Option<String>,
    /// An older member of its line is still in play.
    pub(crate) waiting: bool,
    pub(crate) dead_lettered_at: i64,
    pub(crate) m: Message,
}

impl MessageRow {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut w = Encoder::default();
        w.s(&self.queue)
            .opt(self.line.as_deref())
            .i(i64::from(self.waiting))
            .i(self.dead_lettered_at);
        w.0.extend_from_slice(&encode_messages(std::slice::from_ref(&self.m)));
        w.0
    }

    pub(crate) fn decode(buf: &[u8]) -> Result<MessageRow> {
        let mut r = Decoder(buf);
        let queue = r.s()?;
        let line = r.opt()?;
        let waiting = r.i()? != 0;
        let dead_lettered_at = r.i()?;
        let m = decode_messages(r.rest())
            .pop()
            .ok_or_else(|| corrupt("message"))?;
        Ok(MessageRow {
            queue,
            line,
            waiting,
            dead_lettered_at,
            m,
        })
    }

    pub(crate) fn state(&self) -> MessageState {
        self.m.state
    }

    /// Active, locked, deferred or scheduled.
    pub(crate) fn in_play(&self) -> bool {
        !matches!(
            self.m.state,
            MessageState::DeadLettered | MessageState::Completed
        )
    }
}

pub(crate) fn state_code(s: MessageState) -> u8 {
    match s {
        MessageState::Active => 1,
        MessageState::Locked => 2,
        MessageState::Deferred => 3,
        MessageState::Scheduled => 4,
        MessageState::Completed => 5,
        MessageState::DeadLettered => 6,
    }
}

pub(crate) fn encode_queue(kind: QueueKind, c: &QueueConfig, created_at: i64) -> Vec<u8> {
    let mut w = Encoder::default();
    w.s(kind.as_str())
        .i(c.lock_ms())
        .i(c.max_delivery_count)
        .i(c.default_ttl_ms())
        .i(i64::from(c.dead_letter_on_expire))
        .i(c.dedup_window_ms())
        .s(c.ordering_mode.as_str())
        .i(c.dlq_max_age_ms)
        .i(c.dlq_max_count)
        .i(c.dlq_max_bytes)
        .i(created_at)
        // Appended after the first layout's fields: a row written before them ends at
        // created_at and reads as no target, no required id.
        .i(i64::from(c.require_message_id))
        .i(i64::from(c.dead_letter_target.is_some()))
        .s(c.dead_letter_target.as_deref().unwrap_or(""))
        // Appended after those: a row that ends before it reads as active.
        .s(c.status.as_str());
    w.0
}

pub(crate) fn decode_queue(buf: &[u8]) -> Result<(QueueKind, QueueConfig, i64)> {
    let mut r = Decoder(buf);
    let kind: QueueKind = r.s()?.parse()?;
    let lock_duration_ms = r.i()?;
    let max_delivery_count = r.i()?;
    let default_ttl_ms = r.i()?;
    let dead_letter_on_expire = r.i()? != 0;
    let dedup_window_ms = r.i()?;
    let ordering_mode: OrderingMode = r.s()?.parse()?;
    let mut cfg = QueueConfig {
        lock_duration: from_millis(lock_duration_ms),
        max_delivery_count,
        default_ttl: from_millis(default_ttl_ms),
        dead_letter_on_expire,
        dedup_window: from_millis(dedup_window_ms),
        ordering_mode,
        dlq_max_age_ms: r.i()?,
        dlq_max_count: r.i()?,
        dlq_max_bytes: r.i()?,
        dead_letter_target: None,
        require_message_id: false,
        status: QueueStatus::Active,
    };
    let created_at = r.i()?;
    if !r.rest().is_empty() {
        cfg.require_message_id = r.i()? != 0;
        let has_target = r.i()? != 0;
        let target = r.s()?;
        cfg.dead_letter_target = has_target.then_some(target);
    }
    if !r.rest().is_empty() {
        cfg.status = r.s()?.parse()?;
    }
    Ok((kind, cfg, created_at))
}

pub(crate) fn encode_key(k: &AccessKey) -> Vec<u8> {
    let mut w = Encoder::default();
    w.s(&k.name)
        .s(&k.digest)
        .s(&k.permissions_text())
        .i(k.created_at_ms)
        .i(k.expires_at_ms)
        .i(k.revoked_at_ms);
    w.0
}

pub(crate) fn decode_key(id: &str, buf: &[u8]) -> Result<AccessKey> {
    let mut r = Decoder(buf);
    Ok(AccessKey {
        id: id.to_owned(),
        name: r.s()?,
        digest: r.s()?,
        permissions: AccessKey::parse_permissions(&r.s()?)?,
        created_at_ms: r.i()?,
        expires_at_ms: r.i()?,
        revoked_at_ms: r.i()?,
    })
}

/// A schedule's value: everything but its name (the key). `last_tick` is `i64::MIN`
/// while none fired.
pub(crate) fn encode_schedule(s: &Schedule) -> Vec<u8> {
    let (every_ms, cron, tz) = s.spec.every.parts();
    let mut w = Encoder::default();
    w.s(&s.spec.queue)
        .i(every_ms)
        .opt(cron)
        .opt(tz)
        .s(s.spec.missed.as_str())
        .bytes(&encode_out(&s.spec.message))
        .i(s.next_at_ms)
        .i(s.revision)
        .i(i64::try_from(s.fired).unwrap_or(i64::MAX))
        .i(s.last_tick_ms.unwrap_or(i64::MIN))
        .i(s.created_at_ms);
    w.0
}

pub(crate) fn decode_schedule(name: &str, buf: &[u8]) -> Result<Schedule> {
    let mut r = Decoder(buf);
    let queue = r.s()?;
    let every_ms = r.i()?;
    let every = Recurrence::from_parts(every_ms, r.opt()?, r.opt()?);
    let missed = r.s()?.parse::<Missed>()?;
    let message = decode_out(&r.bytes()?).ok_or_else(|| corrupt("a schedule's message"))?;
    Ok(Schedule {
        spec: ScheduleSpec {
            name: name.to_owned(),
            queue,
            every,
            message,
            missed,
        },
        next_at_ms: r.i()?,
        revision: r.i()?,
        fired: u64::try_from(r.i()?).map_err(|_| corrupt("a schedule's fire count"))?,
        last_tick_ms: Some(r.i()?).filter(|t| *t != i64::MIN),
        created_at_ms: r.i()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_by_their_components() {
        let a = Key::new().s("q").i(-5).i(3);
        let b = Key::new().s("q").i(7).i(1);
        let c = Key::new().s("q\0").i(0);
        let d = Key::new().s("qa").i(0);
        assert!(a.0 < b.0 && b.0 < c.0 && c.0 < d.0);
        assert!(b.0 < Key::new().s("q").end());
        assert!(c.0 >= Key::new().s("q").end());
        assert_eq!(trailing_i64(&b.0), 1);
        assert_eq!(key_str(&c.0, 0).map(|x| x.0), Some("q\0".to_owned()));
    }
}

//! A compact, length-prefixed encoding of a receive response, stored in
//! `receive_attempts.response` so that a retried attempt replays exactly what the first
//! one returned (3.3), receive-and-delete included.

use std::collections::BTreeMap;

use mqlite_contract::event::EventIdentity;
use mqlite_contract::types::{LockToken, Message, MessageState, OutMessage, SeqNumber};

struct Writer(Vec<u8>);

impl Writer {
    fn int(&mut self, v: i64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.int(b.len() as i64);
        self.0.extend_from_slice(b);
    }
    fn opt(&mut self, s: &Option<String>) {
        match s {
            None => self.int(-1),
            Some(s) => self.bytes(s.as_bytes()),
        }
    }
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn int(&mut self) -> Option<i64> {
        let (head, rest) = self.0.split_first_chunk::<8>()?;
        self.0 = rest;
        Some(i64::from_le_bytes(*head))
    }
    fn bytes(&mut self) -> Option<Vec<u8>> {
        let n = usize::try_from(self.int()?).ok()?;
        if n > self.0.len() {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head.to_vec())
    }
    fn opt(&mut self) -> Option<Option<String>> {
        let n = self.int()?;
        if n < 0 {
            return Some(None);
        }
        let n = usize::try_from(n).ok()?;
        if n > self.0.len() {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(Some(String::from_utf8_lossy(head).into_owned()))
    }
}

/// Encodes messages for the attempt record.
pub fn encode_messages(messages: &[Message]) -> Vec<u8> {
    let mut w = Writer(Vec::new());
    w.int(messages.len() as i64);
    for m in messages {
        w.int(m.seq.0);
        w.int(m.delivery_count);
        w.opt(&m.lock_token.map(|t| t.to_string()));
        w.bytes(m.state.as_str().as_bytes());
        for v in [
            m.enqueued_at_ms,
            m.expires_at_ms,
            m.visible_at_ms,
            m.locked_until_ms,
        ] {
            w.int(v);
        }
        w.opt(&m.dead_letter_reason);
        w.opt(&m.dead_letter_description);
        let c = &m.content;
        w.bytes(&c.body);
        for f in [
            &c.message_id,
            &c.group_id,
            &c.subject,
            &c.correlation_id,
            &c.reply_to,
            &c.content_type,
        ] {
            w.opt(f);
        }
        w.int(c.properties.len() as i64);
        for (k, v) in &c.properties {
            w.bytes(k.as_bytes());
            w.bytes(v.as_bytes());
        }
        // One tag: bit 0 says an event identity follows, the bits above hold the
        // priority (records written before priorities existed read as priority 0).
        let tag = i64::from(c.event.is_some()) | (i64::from(c.priority) << 1);
        w.int(tag);
        match &c.event {
            None => {}
            Some(e) => {
                w.bytes(e.source.as_bytes());
                w.bytes(e.id.as_bytes());
                for f in [&e.kind, &e.specversion, &e.time] {
                    w.opt(f);
                }
            }
        }
    }
    w.0
}

/// Decodes what [`encode_messages`] wrote; a damaged record decodes to what it can.
pub fn decode_messages(buf: &[u8]) -> Vec<Message> {
    let mut r = Reader(buf);
    let mut out = Vec::new();
    let Some(n) = r.int() else { return out };
    for _ in 0..n {
        match decode_one(&mut r) {
            Some(m) => out.push(m),
            None => break,
        }
    }
    out
}

fn decode_one(r: &mut Reader<'_>) -> Option<Message> {
    let seq = SeqNumber(r.int()?);
    let delivery_count = r.int()?;
    let lock_token = r.opt()?.and_then(|t| t.parse::<LockToken>().ok());
    let state: MessageState = String::from_utf8(r.bytes()?).ok()?.parse().ok()?;
    let (enqueued_at_ms, expires_at_ms, visible_at_ms, locked_until_ms) =
        (r.int()?, r.int()?, r.int()?, r.int()?);
    let dead_letter_reason = r.opt()?;
    let dead_letter_description = r.opt()?;
    let body = r.bytes()?;
    let (message_id, group_id, subject) = (r.opt()?, r.opt()?, r.opt()?);
    let (correlation_id, reply_to, content_type) = (r.opt()?, r.opt()?, r.opt()?);
    let mut properties = BTreeMap::new();
    for _ in 0..r.int()? {
        let k = String::from_utf8(r.bytes()?).ok()?;
        let v = String::from_utf8(r.bytes()?).ok()?;
        properties.insert(k, v);
    }
    let tag = r.int()?;
    let priority = u8::try_from(tag >> 1).ok()?;
    let event = match tag & 1 {
        0 => None,
        _ => Some(EventIdentity {
            source: String::from_utf8(r.bytes()?).ok()?,
            id: String::from_utf8(r.bytes()?).ok()?,
            kind: r.opt()?,
            specversion: r.opt()?,
            time: r.opt()?,
        }),
    };
    Some(Message {
        seq,
        delivery_count,
        lock_token,
        state,
        enqueued_at_ms,
        expires_at_ms,
        visible_at_ms,
        locked_until_ms,
        dead_letter_reason,
        dead_letter_description,
        content: OutMessage {
            body,
            message_id,
            group_id,
            subject,
            correlation_id,
            reply_to,
            content_type,
            properties,
            event,
            priority,
        },
    })
}

/// Encodes one message to send (the relay's stored intent).
pub fn encode_out(m: &OutMessage) -> Vec<u8> {
    encode_messages(&[Message {
        seq: SeqNumber(0),
        delivery_count: 0,
        lock_token: None,
        state: MessageState::Active,
        enqueued_at_ms: 0,
        expires_at_ms: 0,
        visible_at_ms: 0,
        locked_until_ms: 0,
        dead_letter_reason: None,
        dead_letter_description: None,
        content: m.clone(),
    }])
}

/// Decodes what [`encode_out`] wrote; `None` for a damaged record.
pub fn decode_out(buf: &[u8]) -> Option<OutMessage> {
    decode_messages(buf).pop().map(|m| m.content)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(priority: u8, event: bool) -> Message {
        let mut content = OutMessage::new("body")
            .with_id("m1")
            .with_property("k", "v")
            .with_priority(priority);
        if event {
            content.event = Some(EventIdentity {
                source: "/orders".into(),
                id: "7".into(),
                kind: Some("order.placed".into()),
                specversion: None,
                time: None,
            });
        }
        Message {
            seq: SeqNumber(3),
            delivery_count: 1,
            lock_token: Some(LockToken::from_u128(9)),
            state: MessageState::Locked,
            enqueued_at_ms: 1,
            expires_at_ms: 2,
            visible_at_ms: 3,
            locked_until_ms: 4,
            dead_letter_reason: None,
            dead_letter_description: Some("d".into()),
            content,
        }
    }

    #[test]
    fn priorities_and_events_round_trip() {
        let all: Vec<Message> = [(0, false), (9, true), (4, false), (0, true)]
            .into_iter()
            .map(|(p, e)| message(p, e))
            .collect();
        assert_eq!(decode_messages(&encode_messages(&all)), all);
    }

    /// A record written before priorities existed (its tag is 0 or 1) reads as priority
    /// 0 with its event intact: the tag's low bit is what it always was.
    #[test]
    fn records_from_before_priorities_read_as_priority_zero() {
        let old = [message(0, true), message(0, false)];
        let bytes = encode_messages(&old);
        let read = decode_messages(&bytes);
        assert_eq!(read, old);
        assert!(read.iter().all(|m| m.content.priority == 0));
        assert!(read[0].content.event.is_some() && read[1].content.event.is_none());
    }
}

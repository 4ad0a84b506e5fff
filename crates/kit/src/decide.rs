//! Decisions every store takes the same way, written once: the stores' flows (the SQL
//! stores' in crates/sql, redb's in its `flows`) read their rows their own way and hand
//! what they found to these functions, so a change of meaning is made in one place.

use std::collections::HashSet;

use mqlite_contract::error::{Error, LockLostReason, Result};
use mqlite_contract::topics::Route;
use mqlite_contract::types::{
    Message, MessageState, QueueConfig, QueueKind, ReceiveMode, RetentionDefaults,
};

/// How a receive attempt's record stores its receive mode (3.3).
pub fn mode_code(mode: ReceiveMode) -> i64 {
    match mode {
        ReceiveMode::PeekLock => 0,
        ReceiveMode::ReceiveAndDelete => 1,
    }
}

/// A live record of a receive attempt replays only under the mode it was made with
/// (`recorded`: its [`mode_code`]); reusing its id with the other mode is refused.
pub fn replay_attempt(recorded: i64, mode: ReceiveMode) -> Result<()> {
    if recorded == mode_code(mode) {
        Ok(())
    } else {
        Err(Error::invalid(
            "receive_attempt_id was used with another receive mode",
        ))
    }
}

/// Whether a message read at `now` can be claimed: active, visible, not expired.
pub fn claimable(m: &Message, now: i64) -> bool {
    m.state == MessageState::Active
        && m.visible_at_ms <= now
        && (m.expires_at_ms == 0 || m.expires_at_ms > now)
}

/// A claimed message as its peek-lock leaves it: locked under `token` for `lock_ms`
/// from `now`, its delivery counted (1.1, 1.3, 5.1).
pub fn lock(m: &mut Message, now: i64, lock_ms: i64, token: mqlite_contract::LockToken) {
    m.state = MessageState::Locked;
    m.locked_until_ms = now + lock_ms;
    m.lock_token = Some(token);
    m.delivery_count += 1;
}

/// The order claims hand messages out in (20.1): the highest priority first, then the
/// oldest; a batch's messages come back in it.
pub fn claim_order(m: &Message) -> (std::cmp::Reverse<u8>, mqlite_contract::SeqNumber) {
    (std::cmp::Reverse(m.content.priority), m.seq)
}

/// What a settlement whose fence refused it finds under its sequence number.
#[derive(Debug, Clone, Copy)]
pub struct FoundLock {
    /// Whether the message is in the queue the settlement named.
    pub in_queue: bool,
    /// Whether it is locked.
    pub locked: bool,
    /// Whether its lock token is the one the settlement carried.
    pub same_token: bool,
    /// Its deliveries so far: at 1, the current token is the only one ever issued.
    pub delivery_count: i64,
    /// When its lease ends (epoch ms).
    pub locked_until_ms: i64,
}

/// Why a settlement at `now` lost its lock, from what it found (None: no message under
/// its sequence number).
pub fn lost_reason(found: Option<FoundLock>, now: i64) -> LockLostReason {
    match found {
        None => LockLostReason::Gone,
        Some(f) if !f.in_queue => LockLostReason::WrongQueue,
        Some(f) if !f.locked => LockLostReason::NotLocked,
        Some(f) if !f.same_token && f.delivery_count <= 1 => LockLostReason::NotIssued,
        Some(f) if !f.same_token => LockLostReason::OtherToken,
        Some(f) if f.locked_until_ms <= now => LockLostReason::Expired,
        Some(_) => LockLostReason::Unknown,
    }
}

/// The configuration of `name` where a queue that holds messages is needed (a queue or
/// a subscription's backing queue); a topic holds none and is refused.
pub fn holding(name: &str, found: (QueueKind, QueueConfig)) -> Result<QueueConfig> {
    match found {
        (QueueKind::Topic, _) => Err(Error::invalid(format!(
            "{name:?} is a topic: publish to it, receive from its subscriptions"
        ))),
        (_, config) => Ok(config),
    }
}

/// A subscription names a topic: `kind` is what its `topic` names.
pub fn subscribable(topic: &str, kind: QueueKind) -> Result<()> {
    match kind {
        QueueKind::Topic => Ok(()),
        kind => Err(Error::invalid(format!(
            "{topic:?} is a {kind}, not a topic"
        ))),
    }
}

/// A publish names a topic: `kind` is what `topic` names (anything else is a missing
/// topic).
pub fn publishable(topic: &str, kind: QueueKind) -> Result<()> {
    match kind {
        QueueKind::Topic => Ok(()),
        _ => Err(Error::NotFound {
            kind: "topic",
            name: topic.to_owned(),
        }),
    }
}

/// Whether a route of a publish gets copies: it carries messages and its subscription
/// is still one of the topic's (`current`); else it gets nothing (11.2).
pub fn delivers(route: &Route, current: &HashSet<String>) -> bool {
    !route.messages.is_empty() && current.contains(&route.subscription)
}

/// A subscription's name is held by a subscription of another topic (12.1).
pub fn subscription_taken(name: &str, of_topic: &str) -> Error {
    Error::NameConflict {
        name: name.to_owned(),
        existing: format!("subscription of topic {of_topic:?}"),
    }
}

/// One queue's dead-letter retention (8.1–8.3): its bounds, each resolved against the
/// engine's defaults (0: none).
#[derive(Debug, Clone, Copy)]
pub struct Retention {
    /// Dead letters dead-lettered at or before this go (i64::MIN: no age bound).
    age_cutoff: i64,
    count: i64,
    bytes: i64,
}

impl Retention {
    /// The retention at `now` of a queue whose own bounds are `age_ms`, `count` and
    /// `bytes` (0: the default's), or None when no bound applies.
    pub fn of(
        (age_ms, count, bytes): (i64, i64, i64),
        defaults: RetentionDefaults,
        now: i64,
    ) -> Option<Retention> {
        let age = RetentionDefaults::resolve(age_ms, defaults.max_age_ms());
        let count = RetentionDefaults::resolve(count, defaults.max_count);
        let bytes = RetentionDefaults::resolve(bytes, defaults.max_bytes);
        if age == 0 && count == 0 && bytes == 0 {
            return None;
        }
        let age_cutoff = if age > 0 {
            now.saturating_sub(age)
        } else {
            i64::MIN
        };
        Some(Retention {
            age_cutoff,
            count,
            bytes,
        })
    }

    /// Which dead letters go, given them oldest first as (sequence number, body bytes,
    /// dead-lettered at) and their totals: everything past the age bound, then more
    /// while over the count or the bytes.
    pub fn doomed(
        &self,
        oldest: impl IntoIterator<Item = (i64, i64, i64)>,
        (mut n, mut size): (i64, i64),
    ) -> Vec<i64> {
        let mut out = Vec::new();
        for (seq, len, at) in oldest {
            let over = at <= self.age_cutoff
                || (self.count > 0 && n > self.count)
                || (self.bytes > 0 && size > self.bytes);
            if !over {
                break;
            }
            out.push(seq);
            n -= 1;
            size -= len;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_lock_names_the_first_reason_that_holds() {
        let found = |queue: &str, locked, same_token, until| FoundLock {
            in_queue: queue == "q",
            locked,
            same_token,
            delivery_count: 2,
            locked_until_ms: until,
        };
        assert_eq!(lost_reason(None, 10), LockLostReason::Gone);
        let other = Some(found("p", false, false, 0));
        assert_eq!(lost_reason(other, 10), LockLostReason::WrongQueue);
        let unlocked = Some(found("q", false, false, 0));
        assert_eq!(lost_reason(unlocked, 10), LockLostReason::NotLocked);
        let retaken = Some(found("q", true, false, 0));
        assert_eq!(lost_reason(retaken, 10), LockLostReason::OtherToken);
        let first = Some(FoundLock {
            delivery_count: 1,
            ..found("q", true, false, 0)
        });
        assert_eq!(lost_reason(first, 10), LockLostReason::NotIssued);
        let lapsed = Some(found("q", true, true, 10));
        assert_eq!(lost_reason(lapsed, 10), LockLostReason::Expired);
        let live = Some(found("q", true, true, 11));
        assert_eq!(lost_reason(live, 10), LockLostReason::Unknown);
    }

    #[test]
    fn retention_drops_the_oldest_past_age_then_while_over_count_or_bytes() {
        let none = RetentionDefaults {
            max_age: std::time::Duration::ZERO,
            max_count: 0,
            max_bytes: 0,
        };
        assert!(Retention::of((0, 0, 0), none, 1_000).is_none());
        // Age 100 ms at now 1,000: dead-lettered at or before 900 go.
        let by_age = Retention::of((100, 0, 0), none, 1_000).expect("a bound");
        let oldest = [(1, 5, 800), (2, 5, 900), (3, 5, 950)];
        assert_eq!(by_age.doomed(oldest, (3, 15)), vec![1, 2]);
        // At most 1 message: the two oldest go.
        let by_count = Retention::of((0, 1, 0), none, 1_000).expect("a bound");
        assert_eq!(by_count.doomed(oldest, (3, 15)), vec![1, 2]);
        // At most 6 bytes: 15 → 10 → 5.
        let by_bytes = Retention::of((0, 0, 6), none, 1_000).expect("a bound");
        assert_eq!(by_bytes.doomed(oldest, (3, 15)), vec![1, 2]);
    }
}

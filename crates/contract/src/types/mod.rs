//! Domain types: what goes into a queue, what comes out, and how a queue is configured.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::error::{Error, Result};

/// The default lock (lease) duration of a queue.
pub const DEFAULT_LOCK_DURATION: Duration = Duration::from_secs(30);
/// The longest lock (lease) a queue may configure.
pub const MAX_LOCK_DURATION: Duration = Duration::from_secs(24 * 3600);
/// The longest TTL or dedup window a queue may configure, and the longest age bound of a
/// redrive or purge: about a hundred years, so a time plus a span never overflows.
pub const MAX_SPAN: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
/// The default delivery bound of a queue.
pub const DEFAULT_MAX_DELIVERY_COUNT: i64 = 10;
/// How long a settlement receipt or a receive attempt replays (promises 3.2, 3.3).
pub const RECEIPT_TTL_MS: i64 = 30 * 60 * 1000;
/// How long after its expiry a store may still hold a settlement receipt before its
/// janitor removes it (promise 3.2; it never replays it meanwhile): the SQL stores keep
/// receipts in buckets of this width and prune whole buckets.
pub const RECEIPT_PRUNE_GRACE_MS: i64 = 5 * 60 * 1000;
/// The reason written on a message dead-lettered by the delivery bound (promise 6.1).
pub const REASON_MAX_DELIVERY: &str = "MaxDeliveryCountExceeded";
/// The reason written on a message dead-lettered by its TTL (promise 7.2).
pub const REASON_TTL_EXPIRED: &str = "TTLExpiredException";

/// A message's sequence number: strictly increasing per database, never reused (G1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct SeqNumber(pub i64);

impl fmt::Display for SeqNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A 128-bit random fencing token handed to the claimer of a message (promise 1.1).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct LockToken(u128);

impl LockToken {
    /// A fresh token from the operating system's random source.
    pub fn random() -> Self {
        let mut buf = [0u8; 16];
        // The OS random source failing is not recoverable in any useful way: a token that
        // is not random would silently break fencing, so refuse to go on.
        getrandom::fill(&mut buf).expect("the OS random source failed");
        LockToken(u128::from_be_bytes(buf))
    }

    /// `n` fresh tokens from one read of the operating system's random source.
    pub fn random_batch(n: usize) -> Vec<Self> {
        let mut buf = vec![0u8; n * 16];
        // As in `random`: a token that is not random would silently break fencing.
        getrandom::fill(&mut buf).expect("the OS random source failed");
        buf.chunks_exact(16)
            .map(|c| {
                let mut b = [0u8; 16];
                b.copy_from_slice(c);
                LockToken(u128::from_be_bytes(b))
            })
            .collect()
    }

    /// The token's 128 bits.
    pub fn as_u128(&self) -> u128 {
        self.0
    }

    /// A token from its 128 bits.
    pub fn from_u128(v: u128) -> Self {
        LockToken(v)
    }
}

impl LockToken {
    /// The token's text, as `Display` writes it (32 lowercase hexadecimal digits), made
    /// in one allocation without the formatting machinery: every lock and settlement
    /// binds its tokens as text.
    pub fn text(&self) -> String {
        let hex = self.hex();
        // Hexadecimal digits are ASCII, so the check cannot fail; an empty text (which
        // no lock matches) would stand for it if it ever did.
        std::str::from_utf8(&hex)
            .map(str::to_owned)
            .unwrap_or_default()
    }

    /// The token's text, 32 lowercase hexadecimal digits, without the formatting
    /// machinery: every lock and settlement binds a token as text.
    fn hex(self) -> [u8; 32] {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut out = [0u8; 32];
        for (pair, byte) in out.chunks_exact_mut(2).zip(self.0.to_be_bytes()) {
            pair[0] = DIGITS[usize::from(byte >> 4)];
            pair[1] = DIGITS[usize::from(byte & 0xf)];
        }
        out
    }
}

impl fmt::Display for LockToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hex = self.hex();
        match std::str::from_utf8(&hex) {
            Ok(text) => f.pad(text),
            Err(_) => Err(fmt::Error),
        }
    }
}

impl fmt::Debug for LockToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LockToken({self})")
    }
}

impl FromStr for LockToken {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        if s.len() != 32 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Error::invalid("a lock token is 32 hexadecimal characters"));
        }
        u128::from_str_radix(s, 16)
            .map(LockToken)
            .map_err(|_| Error::invalid("a lock token is 32 hexadecimal characters"))
    }
}

macro_rules! string_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name { $($(#[$vm])* $variant),+ }

        impl $name {
            /// The canonical text, as stored and as spoken on the wire.
            pub fn as_str(&self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = Error;
            fn from_str(s: &str) -> Result<Self> {
                match s {
                    $($text => Ok($name::$variant),)+
                    other => Err(Error::invalid(format!(
                        concat!("unknown ", stringify!($name), " {:?}"), other))),
                }
            }
        }
    };
}

string_enum! {
    /// How a queue orders the messages it hands out (promises 5.1–5.3).
    OrderingMode {
        /// Groups are FIFO among themselves; ungrouped messages are unordered.
        Standard => "standard",
        /// As standard, and every message must carry a group id.
        GroupFifo => "group_fifo",
        /// One line for the whole queue: at most one message in flight.
        StrictFifo => "strict_fifo",
    }
}

string_enum! {
    /// The state column of a message.
    MessageState {
        /// Waiting to be received.
        Active => "active",
        /// Claimed under a lease.
        Locked => "locked",
        /// Set aside; only ReceiveDeferred returns it.
        Deferred => "deferred",
        /// Hidden until its visible time.
        Scheduled => "scheduled",
        /// Settled (rows are deleted on completion; the state exists for the schema).
        Completed => "completed",
        /// In the dead-letter state.
        DeadLettered => "dead_lettered",
    }
}

string_enum! {
    /// What a queue name denotes (queues, topics and subscriptions share one namespace).
    QueueKind {
        /// A plain queue.
        Queue => "queue",
        /// A topic (fans out to subscriptions).
        Topic => "topic",
        /// A subscription of a topic.
        Subscription => "subscription",
    }
}

string_enum! {
    /// Whether a queue takes sends and hands out messages (promise 19), as Azure
    /// Service Bus names an entity's status. Pausing changes no message: leases held
    /// while paused still settle and renew.
    #[derive(Default)]
    QueueStatus {
        /// Takes sends and hands out messages (the default).
        #[default]
        Active => "active",
        /// Sends are refused (`QueuePaused`); receives go on.
        SendDisabled => "send_disabled",
        /// Receives get nothing (a long-poll waits for the resume); sends go on.
        ReceiveDisabled => "receive_disabled",
        /// Both.
        Disabled => "disabled",
    }
}

impl QueueStatus {
    /// Whether producers' sends are taken (an operator's redrive and the forwarding of
    /// dead letters still move messages in).
    pub fn takes_sends(self) -> bool {
        matches!(self, QueueStatus::Active | QueueStatus::ReceiveDisabled)
    }

    /// Whether receives get messages.
    pub fn hands_out(self) -> bool {
        matches!(self, QueueStatus::Active | QueueStatus::SendDisabled)
    }
}

/// Whole milliseconds of a duration, saturating at `i64::MAX`: the unit stores record.
pub fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// The duration of `ms` recorded milliseconds; a negative count is zero.
pub fn from_millis(ms: i64) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

mod message;
mod queue;
mod receive;
mod schedule;

pub use message::*;
pub use queue::*;
pub use receive::*;
pub use schedule::*;

#[cfg(test)]
mod token_text {
    use super::LockToken;

    /// The token's text is its 32 lowercase hexadecimal digits, zero-padded, and reads
    /// back as the same token.
    #[test]
    fn a_token_prints_as_32_hex_digits_and_reads_back() {
        for v in [
            0u128,
            1,
            0xabc,
            u128::MAX,
            0x0123_4567_89ab_cdef_fedc_ba98_7654_3210,
        ] {
            let token = LockToken(v);
            let text = token.to_string();
            assert_eq!(text, format!("{v:032x}"));
            assert_eq!(token.text(), text, "text() writes what Display writes");
            assert_eq!(text.parse::<LockToken>().expect("reads back"), token);
        }
        assert_eq!(
            format!("{:>34}", LockToken(1)).len(),
            34,
            "width still pads"
        );
    }
}

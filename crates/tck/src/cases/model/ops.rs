//! The operations a case is made of, and the strategies that draw them.

use super::*;

/// A queue's configuration apart from its ordering mode.
#[derive(Debug, Clone)]
pub(super) struct CfgSpec {
    pub(super) lock_ms: i64,
    pub(super) max_delivery: i64,
    pub(super) default_ttl_ms: i64,
    pub(super) dead_letter_on_expire: bool,
    pub(super) dedup_ms: i64,
}

impl CfgSpec {
    pub(super) fn config(&self, mode: OrderingMode) -> QueueConfig {
        QueueConfig {
            lock_duration: from_millis(self.lock_ms),
            max_delivery_count: self.max_delivery,
            default_ttl: from_millis(self.default_ttl_ms),
            dead_letter_on_expire: self.dead_letter_on_expire,
            dedup_window: from_millis(self.dedup_ms),
            ordering_mode: mode,
            ..Default::default()
        }
    }
}

pub(super) fn cfg_spec() -> impl Strategy<Value = CfgSpec> {
    (
        prop::sample::select(vec![2_000i64, 3_000, 5_000]),
        1i64..=3,
        prop::sample::select(vec![0i64, 0, 4_000, 9_000]),
        any::<bool>(),
        prop::sample::select(vec![0i64, 3_000, 10_000]),
    )
        .prop_map(
            |(lock_ms, max_delivery, default_ttl_ms, dead_letter_on_expire, dedup_ms)| CfgSpec {
                lock_ms,
                max_delivery,
                default_ttl_ms,
                dead_letter_on_expire,
                dedup_ms,
            },
        )
}

/// One message of a send: id `m<id>`, body `a + body`, group `g<group>`.
#[derive(Debug, Clone)]
pub(super) struct SendSpec {
    pub(super) id: Option<u8>,
    pub(super) body: u8,
    pub(super) group: Option<u8>,
    pub(super) priority: u8,
}

/// A settlement verb.
#[derive(Debug, Clone, Copy)]
pub(super) enum Verb {
    Complete,
    Abandon(i64),
    Reject(usize),
    Defer,
}

/// How a settlement's lock is spoiled before it is presented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tamper {
    None,
    /// A random token for the right sequence number.
    Token,
    /// The right token on the wrong queue.
    Queue,
}

/// One step of a run. `pick` fields choose among the locks handed out so far (mostly the
/// latest few) or among known sequence numbers.
#[derive(Debug, Clone)]
pub(super) enum Op {
    Send {
        q: usize,
        msgs: Vec<SendSpec>,
        /// scheduled_at_ms relative to now.
        sched: Option<i64>,
        ttl: Option<i64>,
        /// On a group_fifo queue, keep ungrouped messages ungrouped (else they get g0).
        missing_group: bool,
    },
    Receive {
        q: usize,
        n: u32,
        delete: bool,
        attempt: Option<u8>,
    },
    Settle {
        pick: usize,
        verb: Verb,
        tamper: Tamper,
    },
    Renew {
        pick: usize,
        tamper: Tamper,
    },
    CompleteBatch {
        picks: Vec<(usize, bool)>,
        /// Complete and receive up to this many in one call (2.10).
        and_receive: Option<u32>,
    },
    RenewBatch {
        picks: Vec<(usize, bool)>,
    },
    ReceiveDeferred {
        q: usize,
        picks: Vec<usize>,
        /// Pick among every known number, not only the queue's deferred ones.
        any: bool,
    },
    Cancel {
        q: usize,
        pick: usize,
        any: bool,
    },
    Redrive {
        from: usize,
        to: Option<usize>,
        max: u64,
        older: bool,
    },
    Purge {
        q: usize,
        max: u64,
        older: bool,
    },
    Update {
        q: usize,
        cfg: CfgSpec,
        mode: Option<usize>,
    },
    /// Pause or resume (an index into [`STATUSES`]).
    Status {
        q: usize,
        status: usize,
    },
    /// Peek from a known sequence number, optionally in one state (index into
    /// [`PEEK_STATES`]), at most `max`.
    Peek {
        q: usize,
        from: Option<usize>,
        state: Option<usize>,
        max: u32,
    },
    Advance {
        ms: i64,
    },
    Sweep,
    Reopen,
}

/// The statuses a step sets, active three times as often as each paused one (a queue
/// left paused would starve the other steps of work).
pub(super) const STATUSES: [QueueStatus; 6] = [
    QueueStatus::Active,
    QueueStatus::Active,
    QueueStatus::Active,
    QueueStatus::SendDisabled,
    QueueStatus::ReceiveDisabled,
    QueueStatus::Disabled,
];

pub(super) fn tamper() -> impl Strategy<Value = Tamper> {
    prop_oneof![
        8 => Just(Tamper::None),
        1 => Just(Tamper::Token),
        1 => Just(Tamper::Queue),
    ]
}

pub(super) fn verb() -> impl Strategy<Value = Verb> {
    prop_oneof![
        4 => Just(Verb::Complete),
        3 => prop::sample::select(vec![0i64, 0, 1_000, 3_000, 6_000]).prop_map(Verb::Abandon),
        2 => (0..REASONS.len()).prop_map(Verb::Reject),
        2 => Just(Verb::Defer),
    ]
}

pub(super) fn send_spec() -> impl Strategy<Value = SendSpec> {
    (
        proptest::option::of(0u8..4),
        0u8..3,
        proptest::option::weighted(0.75, 0u8..3),
        prop_oneof![3 => Just(0u8), 1 => Just(4u8), 1 => Just(9u8)],
    )
        .prop_map(|(id, body, group, priority)| SendSpec {
            id,
            body,
            group,
            priority,
        })
}

pub(super) fn op() -> impl Strategy<Value = Op> {
    let q = 0usize..3;
    prop_oneof![
        5 => (
            q.clone(),
            proptest::collection::vec(send_spec(), 1..=4),
            proptest::option::weighted(
                0.2,
                prop_oneof![Just(-1_000i64), Just(0i64), 1i64..8_000],
            ),
            proptest::option::weighted(
                0.4,
                prop::sample::select(vec![0i64, 1_500, 5_000, 10_000]),
            ),
            proptest::bool::weighted(0.1),
        )
            .prop_map(|(q, msgs, sched, ttl, missing_group)| Op::Send {
                q,
                msgs,
                sched,
                ttl,
                missing_group,
            }),
        8 => (
            q.clone(),
            1u32..=5,
            proptest::bool::weighted(0.25),
            proptest::option::weighted(0.3, 0u8..3),
        )
            .prop_map(|(q, n, delete, attempt)| Op::Receive { q, n, delete, attempt }),
        12 => (any::<usize>(), verb(), tamper())
            .prop_map(|(pick, verb, tamper)| Op::Settle { pick, verb, tamper }),
        1 => (any::<usize>(), tamper()).prop_map(|(pick, tamper)| Op::Renew { pick, tamper }),
        2 => (
            proptest::collection::vec((any::<usize>(), proptest::bool::weighted(0.2)), 1..=4),
            proptest::option::weighted(0.5, 1u32..=3),
        )
            .prop_map(|(picks, and_receive)| Op::CompleteBatch { picks, and_receive }),
        1 => proptest::collection::vec((any::<usize>(), proptest::bool::weighted(0.2)), 1..=4)
            .prop_map(|picks| Op::RenewBatch { picks }),
        2 => (
            q.clone(),
            proptest::collection::vec(any::<usize>(), 1..=3),
            proptest::bool::weighted(0.2),
        )
            .prop_map(|(q, picks, any)| Op::ReceiveDeferred { q, picks, any }),
        1 => (q.clone(), any::<usize>(), proptest::bool::weighted(0.2))
            .prop_map(|(q, pick, any)| Op::Cancel { q, pick, any }),
        3 => (
            q.clone(),
            proptest::option::weighted(0.4, q.clone()),
            prop::sample::select(vec![0u64, 0, 1, 2]),
            proptest::bool::weighted(0.2),
        )
            .prop_map(|(from, to, max, older)| Op::Redrive { from, to, max, older }),
        1 => (q.clone(), 0u64..3, proptest::bool::weighted(0.3))
            .prop_map(|(q, max, older)| Op::Purge { q, max, older }),
        1 => (q.clone(), cfg_spec(), proptest::option::weighted(0.3, q.clone()))
            .prop_map(|(q, cfg, mode)| Op::Update { q, cfg, mode }),
        1 => (q.clone(), 0..STATUSES.len()).prop_map(|(q, status)| Op::Status { q, status }),
        1 => (
            q.clone(),
            proptest::option::of(any::<usize>()),
            proptest::option::of(0..PEEK_STATES.len()),
            1u32..=4,
        )
            .prop_map(|(q, from, state, max)| Op::Peek { q, from, state, max }),
        5 => prop_oneof![
            6 => 0i64..1_500,
            3 => prop::sample::select(vec![1i64, 999, 1_000, 2_000, 3_000, 5_000]),
            1 => prop::sample::select(vec![
                RECEIPT_TTL_MS - 1,
                RECEIPT_TTL_MS,
                RECEIPT_TTL_MS + 1,
            ]),
        ]
        .prop_map(|ms| Op::Advance { ms }),
        3 => Just(Op::Sweep),
        1 => Just(Op::Reopen),
    ]
}

//! Recurring schedules (promise 21): a message sent to a queue at every tick of a cron
//! expression in a time zone, or of a fixed interval, stored in the database beside the
//! queues. Each tick is fired by one transaction that enqueues the tick's message and
//! moves the schedule on, guarded by the schedule's next time: several processes, a
//! crash or a restart fire each tick once.

use std::time::Duration;

use super::*;

string_enum! {
    /// What a schedule does about the ticks that passed while nothing fired them (no
    /// process ran, or its queue refused sends): a *missed* tick is one found later than
    /// its grace (the smaller of a minute and the time to the tick after it).
    #[derive(Default)]
    Missed {
        /// One message stands for the whole missed window (it names the latest missed
        /// tick), then the schedule goes on (the default).
        #[default]
        FireOnce => "fire_once",
        /// Nothing fires for a missed window; the schedule goes on at its next tick.
        Skip => "skip",
    }
}

/// When a schedule ticks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recurrence {
    /// Every `interval`, counted from the schedule's creation (at least
    /// [`MIN_SCHEDULE_INTERVAL`]).
    Every(Duration),
    /// At every time a cron expression names, in a time zone: five fields (minute,
    /// hour, day of month, month, day of week) or six with seconds first, as Vixie cron
    /// reads them (and `L`, `W`, `#`); `tz` is an IANA name (`Europe/Paris`), UTC by
    /// default.
    Cron {
        /// The expression.
        expr: String,
        /// The time zone the expression is read in.
        tz: String,
    },
}

impl Recurrence {
    /// Its stored form: the interval in ms (0 for a cron expression), and the
    /// expression with its zone (None for an interval).
    pub fn parts(&self) -> (i64, Option<&str>, Option<&str>) {
        match self {
            Recurrence::Every(d) => (millis(*d), None, None),
            Recurrence::Cron { expr, tz } => (0, Some(expr.as_str()), Some(tz.as_str())),
        }
    }

    /// From its stored form ([`Recurrence::parts`]): the expression when there is one
    /// (in UTC when no zone was stored), else the interval.
    pub fn from_parts(every_ms: i64, cron: Option<String>, tz: Option<String>) -> Recurrence {
        match cron {
            Some(expr) => Recurrence::Cron {
                expr,
                tz: tz.unwrap_or_else(|| "UTC".to_owned()),
            },
            None => Recurrence::Every(from_millis(every_ms)),
        }
    }
}

/// The shortest interval a schedule ticks at.
pub const MIN_SCHEDULE_INTERVAL: Duration = Duration::from_secs(1);

/// The longest a missed tick's grace can be.
pub const MISSED_GRACE: Duration = Duration::from_secs(60);

/// A recurring schedule as created.
///
/// ```
/// use std::time::Duration;
/// use mqlite_contract::{OutMessage, Recurrence, ScheduleSpec};
/// let nightly = ScheduleSpec::new(
///     "nightly-report",
///     "reports",
///     Recurrence::Cron { expr: "0 2 * * 1-5".into(), tz: "Europe/Paris".into() },
///     OutMessage::new(r#"{"report":"daily"}"#),
/// );
/// let heartbeat = ScheduleSpec::new(
///     "heartbeat", "pings", Recurrence::Every(Duration::from_secs(300)), OutMessage::new("ping"),
/// );
/// assert_eq!(nightly.missed, mqlite_contract::Missed::FireOnce);
/// # let _ = heartbeat;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleSpec {
    /// Its name, unique in the database.
    pub name: String,
    /// The queue every tick sends to.
    pub queue: String,
    /// When it ticks.
    pub every: Recurrence,
    /// What each tick sends. Its `message_id` is set by the tick: `<name>@<tick in
    /// epoch ms>`, so a queue's dedup window collapses any repeat of a tick.
    pub message: OutMessage,
    /// The missed-window policy.
    pub missed: Missed,
}

impl ScheduleSpec {
    /// A schedule with the default policy ([`Missed::FireOnce`]).
    pub fn new(
        name: impl Into<String>,
        queue: impl Into<String>,
        every: Recurrence,
        message: OutMessage,
    ) -> Self {
        ScheduleSpec {
            name: name.into(),
            queue: queue.into(),
            every,
            message,
            missed: Missed::default(),
        }
    }

    /// The identity of the message fired for the tick at `tick_ms`.
    pub fn tick_id(&self, tick_ms: i64) -> String {
        tick_id(&self.name, tick_ms)
    }
}

/// The message id of a schedule's tick: `<name>@<tick in epoch ms>`.
pub fn tick_id(name: &str, tick_ms: i64) -> String {
    format!("{name}@{tick_ms}")
}

/// A schedule as stored: what was created and where it stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// What was created.
    pub spec: ScheduleSpec,
    /// The next tick (epoch ms): the schedule's guard. A fire moves it on in the same
    /// transaction that sends, and only from the value it read.
    pub next_at_ms: i64,
    /// Changes with every create or update of the schedule, so a fire planned from an
    /// older definition changes nothing.
    pub revision: i64,
    /// Messages fired so far.
    pub fired: u64,
    /// The tick the last fire stood for, if any fired.
    pub last_tick_ms: Option<i64>,
    /// When the schedule was first created (epoch ms).
    pub created_at_ms: i64,
}

/// One fire of a schedule, planned by the engine and applied by the store in one
/// transaction ([`AdminOps::fire_schedule`](crate::AdminOps::fire_schedule)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleFire {
    /// The schedule.
    pub name: String,
    /// The revision the plan was made from.
    pub revision: i64,
    /// The next time the plan read: the guard.
    pub due_at_ms: i64,
    /// Where the schedule moves on to.
    pub next_at_ms: i64,
    /// The tick the message stands for, and the message (its id set to the tick's);
    /// None when the policy skips a missed window.
    pub send: Option<(i64, OutMessage)>,
}

//! The AdminService's bodies: queues, subscriptions, filters, redrive, purge, status.

use serde::{Deserialize, Serialize};

use std::time::Duration;

use crate::{Error, Missed, QueueInfo, Recurrence, Result, Schedule, ScheduleSpec};

use super::{WireMessage, empty};

/// A queue's configuration as CreateQueue takes it (absent fields: the defaults).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct WireQueueConfig {
    /// queue (default) or topic.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Lease length, ms (30000).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lock_duration_ms: Option<i64>,
    /// Delivery bound (10).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_delivery_count: Option<i64>,
    /// Default TTL, ms (0 = none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_ttl_ms: Option<i64>,
    /// Dead-letter expired messages (true) or discard them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dead_letter_on_expire: Option<bool>,
    /// Dedup window, ms (0 = off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dedup_window_ms: Option<i64>,
    /// standard, group_fifo or strict_fifo.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ordering_mode: Option<String>,
    /// Dead-letter retention by age, ms (0 inherit, -1 unbounded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dlq_max_age_ms: Option<i64>,
    /// Dead-letter retention by count.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dlq_max_count: Option<i64>,
    /// Dead-letter retention by bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dlq_max_bytes: Option<i64>,
    /// Where dead letters move (empty: they stay in the queue).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dead_letter_target: Option<String>,
    /// Refuse sends without a message id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub require_message_id: Option<bool>,
    /// active (the default), send_disabled, receive_disabled or disabled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

/// CreateQueue.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct CreateQueueRequest {
    /// The name.
    pub name: String,
    /// Its configuration.
    pub config: WireQueueConfig,
}

/// An empty object (`{}`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Empty {}

/// Subscribe.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct SubscribeRequest {
    /// The topic.
    pub topic: String,
    /// The subscription's name.
    pub name: String,
    /// Its filter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filter: Option<FilterSpec>,
}

/// A filter expression.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct FilterSpec {
    /// The expression text.
    pub expr: String,
}

/// Unsubscribe (an extension beyond the contract: the subscription and its backing
/// queue with its messages are deleted).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct UnsubscribeRequest {
    /// The topic.
    pub topic: String,
    /// The subscription's name.
    pub name: String,
}

/// DeleteQueue (an extension beyond the contract): a queue, topic or subscription and
/// everything it holds.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct DeleteQueueRequest {
    /// The name.
    pub name: String,
}

/// What DeleteQueue did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct DeleteQueueResponse {
    /// Whether the name existed (false: nothing to delete).
    pub deleted: bool,
}

/// TestFilter: whether a filter is valid and, given a sample message, whether it
/// matches. Nothing is stored.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct TestFilterRequest {
    /// The filter expression.
    pub expr: String,
    /// A sample message to evaluate it on (its body base64, as in Send).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<WireMessage>,
}

/// TestFilter's answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TestFilterResponse {
    /// Whether Subscribe would accept the filter.
    pub valid: bool,
    /// Why it is not valid, or why its evaluation on the sample failed.
    #[serde(skip_serializing_if = "empty")]
    pub error: String,
    /// Whether the sample message was evaluated.
    pub ran: bool,
    /// Whether the sample matched (false when it did not run or failed).
    pub matched: bool,
}

impl From<crate::FilterTest> for TestFilterResponse {
    fn from(t: crate::FilterTest) -> Self {
        TestFilterResponse {
            valid: t.valid,
            error: t.error.unwrap_or_default(),
            ran: t.ran,
            matched: t.matched,
        }
    }
}

/// One subscription.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct WireSubscription {
    /// The topic.
    pub topic: String,
    /// The name.
    pub name: String,
    /// Its filter expression (empty: every message).
    pub expr: String,
}

/// ListSubscriptions.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct SubscriptionsResponse {
    /// Every subscription.
    pub subscriptions: Vec<WireSubscription>,
}

/// One queue of ListQueues.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct WireQueue {
    /// The name.
    pub name: String,
    /// queue, topic or subscription.
    pub kind: String,
    /// Lease length, ms.
    pub lock_duration_ms: i64,
    /// Delivery bound.
    pub max_delivery_count: i64,
    /// Default TTL, ms.
    pub default_ttl_ms: i64,
    /// Dedup window, ms.
    pub dedup_window_ms: i64,
    /// standard, group_fifo or strict_fifo (beyond the contract's fields, as are the
    /// rest: every option CreateQueue takes).
    pub ordering_mode: String,
    /// On TTL expiry: dead-letter (true) or discard.
    pub dead_letter_on_expire: bool,
    /// Dead-letter retention: the oldest kept, ms (0: the broker's default; -1:
    /// unbounded).
    pub dlq_max_age_ms: i64,
    /// Dead letters kept (0: the broker's default; -1: unbounded).
    pub dlq_max_count: i64,
    /// Dead-letter body bytes kept (0: the broker's default; -1: unbounded).
    pub dlq_max_bytes: i64,
    /// Where dead letters move (empty: they stay in the queue).
    #[serde(skip_serializing_if = "empty")]
    pub dead_letter_target: String,
    /// Sends without a message id are refused.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub require_message_id: bool,
    /// Whether it takes sends and hands out messages: active, send_disabled,
    /// receive_disabled or disabled (absent: active).
    #[serde(skip_serializing_if = "is_active")]
    pub status: String,
}

fn is_active(status: &str) -> bool {
    status.is_empty() || status == "active"
}

impl From<QueueInfo> for WireQueue {
    fn from(q: QueueInfo) -> Self {
        WireQueue {
            kind: q.kind.as_str().to_owned(),
            lock_duration_ms: q.config.lock_ms(),
            max_delivery_count: q.config.max_delivery_count,
            default_ttl_ms: q.config.default_ttl_ms(),
            dedup_window_ms: q.config.dedup_window_ms(),
            ordering_mode: q.config.ordering_mode.as_str().to_owned(),
            dead_letter_on_expire: q.config.dead_letter_on_expire,
            dlq_max_age_ms: q.config.dlq_max_age_ms,
            dlq_max_count: q.config.dlq_max_count,
            dlq_max_bytes: q.config.dlq_max_bytes,
            dead_letter_target: q.config.dead_letter_target.unwrap_or_default(),
            require_message_id: q.config.require_message_id,
            status: q.config.status.as_str().to_owned(),
            name: q.name,
        }
    }
}

/// ListQueues.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct QueuesResponse {
    /// Every queue, topic and subscription.
    pub queues: Vec<WireQueue>,
}

/// Redrive.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RedriveRequest {
    /// The queue whose dead letters move.
    pub queue: String,
    /// Move them here instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// At most this many (0 = all).
    pub max: i64,
    /// Only dead letters at least this old, ms.
    pub older_than_ms: i64,
    /// At most this many per second (0 = unthrottled).
    pub rate_per_sec: i64,
    /// Only these dead letters (an extension; empty or absent: any).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub seq_numbers: Vec<i64>,
}

/// Redrive's answer.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RedriveResponse {
    /// How many moved.
    pub moved: u64,
}

/// Purge.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct PurgeRequest {
    /// The queue whose dead letters go.
    pub queue: String,
    /// At most this many (0 = all).
    pub max: i64,
    /// Only dead letters at least this old, ms.
    pub older_than_ms: i64,
}

/// Purge's answer.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct PurgeResponse {
    /// How many were deleted.
    pub purged: u64,
}

/// SetQueueStatus: pause or resume a queue.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct SetQueueStatusRequest {
    /// The queue (or subscription).
    pub name: String,
    /// active, send_disabled, receive_disabled or disabled.
    pub status: String,
}

/// Status.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct StatusResponse {
    /// The broker's version.
    pub version: String,
    /// memory, local file or remote libSQL/Turso.
    pub backend: String,
    /// Whether the data is on another machine.
    pub remote: bool,
    /// Where the data lives (remote hosts masked, never a secret).
    pub location: String,
    /// The schema token.
    pub schema_version: String,
    /// How long the store took to answer, ms.
    pub ping_ms: i64,
    /// The data's size, bytes (0 when the store cannot tell).
    pub db_size_bytes: u64,
    /// Queues.
    pub queues: u64,
    /// Topics (beyond the contract's fields; clients ignore unknown fields).
    pub topics: u64,
    /// Subscriptions.
    pub subscriptions: u64,
    /// Since the broker started, ms.
    pub uptime_ms: i64,
    /// Whether RPCs need a bearer token (the discovery card says `bearer` or `none`).
    pub auth: bool,
    /// Relay intents in the served database not yet published (mqlite extension).
    pub relay_pending: u64,
    /// The age of the oldest of them, ms; 0 without one (mqlite extension).
    pub relay_oldest_pending_ms: i64,
}

/// CreateSchedule (an extension, promise 21): a recurring schedule, or a new definition
/// of the one of that name. Exactly one of `every_ms` and `cron`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct CreateScheduleRequest {
    /// The schedule's name.
    pub name: String,
    /// The queue each tick sends to.
    pub queue: String,
    /// A fixed interval, ms (at least 1000), counted from now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub every_ms: Option<i64>,
    /// A cron expression: five fields, or six with seconds first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    /// The IANA time zone the cron expression is read in (UTC).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tz: Option<String>,
    /// fire_once (default) or skip: what a missed window fires.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missed: Option<String>,
    /// What each tick sends (its message_id is set by the tick).
    pub message: WireMessage,
}

impl CreateScheduleRequest {
    /// The schedule it asks for.
    pub fn into_spec(self) -> Result<ScheduleSpec> {
        let every = match (self.every_ms, self.cron.filter(|c| !c.is_empty())) {
            (Some(ms), None) => Recurrence::Every(Duration::from_millis(
                u64::try_from(ms).map_err(|_| Error::invalid("every_ms is not negative"))?,
            )),
            (None, Some(expr)) => Recurrence::Cron {
                expr,
                tz: self
                    .tz
                    .filter(|t| !t.is_empty())
                    .unwrap_or_else(|| "UTC".to_owned()),
            },
            _ => {
                return Err(Error::invalid(
                    "a schedule has exactly one of every_ms (an interval) and cron (an \
                     expression, with tz)",
                ));
            }
        };
        let missed = match self.missed.as_deref() {
            None | Some("") => Missed::default(),
            Some(m) => m.parse()?,
        };
        Ok(ScheduleSpec {
            name: self.name,
            queue: self.queue,
            every,
            message: self.message.into_out()?,
            missed,
        })
    }

    /// The request that creates `spec`.
    pub fn from_spec(spec: ScheduleSpec) -> Self {
        let (every_ms, cron, tz) = recurrence(&spec.every);
        CreateScheduleRequest {
            name: spec.name,
            queue: spec.queue,
            every_ms: (cron.is_empty()).then_some(every_ms),
            cron: (!cron.is_empty()).then_some(cron),
            tz: (!tz.is_empty()).then_some(tz),
            missed: Some(spec.missed.as_str().to_owned()),
            message: WireMessage::from_content(spec.message),
        }
    }
}

fn recurrence(every: &Recurrence) -> (i64, String, String) {
    let (every_ms, cron, tz) = every.parts();
    (
        every_ms,
        cron.unwrap_or_default().to_owned(),
        tz.unwrap_or_default().to_owned(),
    )
}

/// A schedule as stored (CreateSchedule, ListSchedules).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct WireSchedule {
    /// Its name.
    pub name: String,
    /// The queue each tick sends to.
    pub queue: String,
    /// The interval, ms (0 for a cron schedule).
    pub every_ms: i64,
    /// The cron expression ("" for an interval).
    pub cron: String,
    /// The cron expression's time zone ("" for an interval).
    pub tz: String,
    /// fire_once or skip.
    pub missed: String,
    /// What each tick sends.
    pub message: WireMessage,
    /// The next tick, epoch ms.
    pub next_at_ms: i64,
    /// Messages fired so far.
    pub fired: u64,
    /// The tick the last fire stood for, epoch ms (0: none yet).
    pub last_tick_ms: i64,
    /// When it was created, epoch ms.
    pub created_at_ms: i64,
    /// Changes with every new definition.
    pub revision: i64,
}

impl From<Schedule> for WireSchedule {
    fn from(s: Schedule) -> Self {
        let (every_ms, cron, tz) = recurrence(&s.spec.every);
        WireSchedule {
            name: s.spec.name,
            queue: s.spec.queue,
            every_ms,
            cron,
            tz,
            missed: s.spec.missed.as_str().to_owned(),
            message: WireMessage::from_content(s.spec.message),
            next_at_ms: s.next_at_ms,
            fired: s.fired,
            last_tick_ms: s.last_tick_ms.unwrap_or(0),
            created_at_ms: s.created_at_ms,
            revision: s.revision,
        }
    }
}

impl WireSchedule {
    /// The schedule it describes.
    pub fn into_schedule(self) -> Result<Schedule> {
        let request = CreateScheduleRequest {
            name: self.name,
            queue: self.queue,
            every_ms: self.cron.is_empty().then_some(self.every_ms),
            cron: (!self.cron.is_empty()).then_some(self.cron),
            tz: Some(self.tz),
            missed: Some(self.missed),
            message: self.message,
        };
        Ok(Schedule {
            spec: request.into_spec()?,
            next_at_ms: self.next_at_ms,
            revision: self.revision,
            fired: self.fired,
            last_tick_ms: (self.last_tick_ms != 0).then_some(self.last_tick_ms),
            created_at_ms: self.created_at_ms,
        })
    }
}

/// ListSchedules' answer: every schedule, by name.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct SchedulesResponse {
    /// The schedules.
    pub schedules: Vec<WireSchedule>,
}

/// DeleteSchedule.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct DeleteScheduleRequest {
    /// The schedule's name.
    pub name: String,
}

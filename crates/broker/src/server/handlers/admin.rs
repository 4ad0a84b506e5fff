//! The AdminService's RPCs: queues, subscriptions, filters, redrive, purge, status.

use super::*;
use mqlite::{FilterTest, OutMessage, QueueInfo};

/// CreateQueue: a queue or a topic, or an update of one.
pub(super) async fn create_queue(mut c: Call<'_>) -> Result<Response, ApiError> {
    let mq = &c.s.engine;
    let r: CreateQueueRequest = c.request()?;
    let topic_with_options = r.config.kind.as_deref() == Some("topic")
        && (r.config.lock_duration_ms.is_some()
            || r.config.max_delivery_count.is_some()
            || r.config.default_ttl_ms.is_some()
            || r.config.dead_letter_on_expire.is_some()
            || r.config.dedup_window_ms.is_some()
            || r.config.ordering_mode.is_some()
            || r.config.dlq_max_age_ms.is_some()
            || r.config.dlq_max_count.is_some()
            || r.config.dlq_max_bytes.is_some()
            || r.config.dead_letter_target.is_some()
            || r.config.require_message_id.is_some()
            || r.config.status.is_some());
    if topic_with_options {
        // A topic holds no messages: its subscriptions carry the options.
        return Err(ApiError::invalid(
            "a topic takes no queue options: set them on its subscriptions",
        ));
    }
    let (kind, config) = queue_config(r.config)?;
    match kind {
        QueueKind::Queue => mq.create_queue(&r.name, config).await?,
        QueueKind::Topic => mq.create_topic(&r.name).await?,
        // The contract's form for a subscription's backing queue: an update of an
        // existing subscription's options; any other kind under the name is a conflict.
        QueueKind::Subscription => match kind_in(&mq.list_queues().await?, &r.name) {
            Some(QueueKind::Subscription) => {
                let found = mq.list_subscriptions(None).await?;
                let Some(s) = found.into_iter().find(|s| s.name == r.name) else {
                    return Err(Error::queue_not_found(&r.name).into());
                };
                mq.subscribe(&s.topic, &s.name, &s.filter, config).await?
            }
            Some(other) => return Err(conflict(&r.name, other)),
            None => {
                return Err(ApiError::invalid(
                    "a subscription is created with Subscribe {topic, name}",
                ));
            }
        },
    }
    ok(Empty {})
}

/// The kind that holds `name` among `queues` (one ListQueues: admin calls are rare).
fn kind_in(queues: &[QueueInfo], name: &str) -> Option<QueueKind> {
    queues.iter().find(|q| q.name == name).map(|q| q.kind)
}

/// Checks `expr` (and evaluates it on `message`, if given) off the async workers: the
/// evaluation is synchronous and its cost grows with the sample, so a slow filter does
/// not stall other requests.
async fn filter_test(
    mq: &AnyEngine,
    expr: String,
    message: Option<OutMessage>,
) -> Result<FilterTest, ApiError> {
    let engine = mq.clone();
    tokio::task::spawn_blocking(move || engine.test_filter(&expr, message.as_ref()))
        .await
        .map_err(|e| {
            tracing::error!(error = %e, "a filter test failed to run");
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "internal error",
            )
        })
}

/// 409 `name_conflict`: `name` is held by an entity of another kind.
fn conflict(name: &str, existing: QueueKind) -> ApiError {
    Error::NameConflict {
        name: name.to_owned(),
        existing: existing.as_str().to_owned(),
    }
    .into()
}

/// Subscribe: a subscription of a topic, with its filter.
pub(super) async fn subscribe(mut c: Call<'_>) -> Result<Response, ApiError> {
    let mq = &c.s.engine;
    let r: SubscribeRequest = c.request()?;
    let expr = r.filter.map(|f| f.expr).unwrap_or_default();
    if r.topic == r.name {
        return Err(conflict(&r.name, QueueKind::Topic));
    }
    // As the contract has it, a topic comes into being with its first subscription; a
    // topic that names a queue or a subscription is a conflict. A Subscribe that would
    // fail (its filter, its name) fails before it creates the topic.
    let queues = mq.list_queues().await?;
    match kind_in(&queues, &r.topic) {
        Some(QueueKind::Topic) => {}
        Some(other) => return Err(conflict(&r.topic, other)),
        None => {
            if let Some(other) = kind_in(&queues, &r.name).filter(|k| *k != QueueKind::Subscription)
            {
                return Err(conflict(&r.name, other));
            }
            let tested = filter_test(mq, expr.clone(), None).await?;
            if !tested.valid {
                return Err(ApiError::invalid(format!(
                    "filter: {}",
                    tested.error.unwrap_or_default()
                )));
            }
            mq.create_topic(&r.topic).await?;
        }
    }
    mq.subscribe(&r.topic, &r.name, &expr, QueueConfig::default())
        .await?;
    ok(Empty {})
}

/// ListSubscriptions: every subscription, or a topic's.
pub(super) async fn list_subscriptions(c: Call<'_>) -> Result<Response, ApiError> {
    let s = c.s;
    let mq = &s.engine;
    let subscriptions = mq.list_subscriptions(None).await?;
    ok(SubscriptionsResponse {
        subscriptions: subscriptions
            .into_iter()
            .map(|s| WireSubscription {
                topic: s.topic,
                name: s.name,
                expr: s.filter,
            })
            .collect(),
    })
}

/// DeleteQueue: a queue, topic or subscription with everything it holds; `deleted:
/// false` when the name did not exist.
pub(super) async fn delete_queue(mut c: Call<'_>) -> Result<Response, ApiError> {
    let mq = &c.s.engine;
    let r: DeleteQueueRequest = c.request()?;
    let deleted = mq.delete_queue(&r.name).await?;
    ok(DeleteQueueResponse { deleted })
}

/// Unsubscribe: removes a subscription and its messages.
pub(super) async fn unsubscribe(mut c: Call<'_>) -> Result<Response, ApiError> {
    let mq = &c.s.engine;
    let r: UnsubscribeRequest = c.request()?;
    if !mq.unsubscribe(&r.topic, &r.name).await? {
        return Err(Error::NotFound {
            kind: "subscription",
            name: format!("{}/{}", r.topic, r.name),
        }
        .into());
    }
    tracing::info!(target: "mqlite::audit", topic = %r.topic, subscription = %r.name, by = %c.principal, "unsubscribed");
    ok(Empty {})
}

/// TestFilter: whether a filter compiles, and whether a message matches it.
pub(super) async fn test_filter(mut c: Call<'_>) -> Result<Response, ApiError> {
    let mq = &c.s.engine;
    let r: TestFilterRequest = c.request()?;
    let message = r.message.map(WireMessage::into_out).transpose()?;
    // A sample is judged like a message sent: no larger than Send would take.
    let limit = mq.options().max_message_bytes;
    if let Some(m) = &message
        && m.body.len() > limit
    {
        return Err(Error::MessageTooLarge {
            size: m.body.len(),
            limit,
        }
        .into());
    }
    let tested = filter_test(mq, r.expr, message).await?;
    ok(TestFilterResponse::from(tested))
}

/// ListQueues: every queue, topic and subscription.
pub(super) async fn list_queues(c: Call<'_>) -> Result<Response, ApiError> {
    let mq = &c.s.engine;
    let queues = mq.list_queues().await?;
    ok(QueuesResponse {
        queues: queues.into_iter().map(WireQueue::from).collect(),
    })
}

/// Redrive: dead letters back to active (or to another queue), bounded.
pub(super) async fn redrive(mut c: Call<'_>) -> Result<Response, ApiError> {
    let mq = &c.s.engine;
    let r: RedriveRequest = c.request()?;
    let options = RedriveOptions {
        target: r.target.filter(|t| !t.is_empty()),
        max: non_negative("max", r.max)?,
        older_than: span("older_than_ms", r.older_than_ms)?,
        rate_per_sec: non_negative("rate_per_sec", r.rate_per_sec)?,
        // The wire's absent or empty selection means every dead letter (the contract
        // has no selection at all).
        seq_numbers: (!r.seq_numbers.is_empty())
            .then(|| r.seq_numbers.into_iter().map(SeqNumber).collect()),
    };
    let moved = mq.redrive(&r.queue, options).await?;
    tracing::info!(target: "mqlite::audit", queue = %r.queue, moved, by = %c.principal, "dead letters redriven");
    ok(RedriveResponse { moved })
}

/// SetQueueStatus: pauses or resumes a queue (promise 19).
pub(super) async fn set_queue_status(mut c: Call<'_>) -> Result<Response, ApiError> {
    let mq = &c.s.engine;
    let r: SetQueueStatusRequest = c.request()?;
    let status: mqlite::QueueStatus = r.status.parse()?;
    mq.set_queue_status(&r.name, status).await?;
    tracing::info!(target: "mqlite::audit", queue = %r.name, status = %status, by = %c.principal, "queue status set");
    ok(Empty {})
}

/// CreateSchedule: a recurring schedule, or a new definition of one (promise 21).
pub(super) async fn create_schedule(mut c: Call<'_>) -> Result<Response, ApiError> {
    let mq = &c.s.engine;
    let r: CreateScheduleRequest = c.request()?;
    let spec = r.into_spec()?;
    let stored = mq.create_schedule(spec).await?;
    tracing::info!(target: "mqlite::audit", schedule = %stored.spec.name, queue = %stored.spec.queue, by = %c.principal, "schedule created");
    ok(WireSchedule::from(stored))
}

/// ListSchedules: every schedule, by name.
pub(super) async fn list_schedules(c: Call<'_>) -> Result<Response, ApiError> {
    let schedules = c.s.engine.list_schedules().await?;
    ok(SchedulesResponse {
        schedules: schedules.into_iter().map(WireSchedule::from).collect(),
    })
}

/// DeleteSchedule: a schedule (the messages it sent stay).
pub(super) async fn delete_schedule(mut c: Call<'_>) -> Result<Response, ApiError> {
    let mq = &c.s.engine;
    let r: DeleteScheduleRequest = c.request()?;
    let deleted = mq.delete_schedule(&r.name).await?;
    if deleted {
        tracing::info!(target: "mqlite::audit", schedule = %r.name, by = %c.principal, "schedule deleted");
    }
    ok(DeleteQueueResponse { deleted })
}

/// Purge: deletes a queue's dead letters, bounded by count and age.
pub(super) async fn purge(mut c: Call<'_>) -> Result<Response, ApiError> {
    let mq = &c.s.engine;
    let r: PurgeRequest = c.request()?;
    let options = PurgeOptions {
        max: non_negative("max", r.max)?,
        older_than: span("older_than_ms", r.older_than_ms)?,
        every_state: false,
    };
    let purged = mq.purge(&r.queue, options).await?;
    tracing::info!(target: "mqlite::audit", queue = %r.queue, purged, by = %c.principal, "dead letters purged");
    ok(PurgeResponse { purged })
}

/// Status: the broker's and the store's state.
pub(super) async fn status(c: Call<'_>) -> Result<Response, ApiError> {
    let s = c.s;
    let mq = &s.engine;
    let started = Instant::now();
    let st = mq.status().await?;
    let ping_ms = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
    let backend = if st.remote {
        "remote libSQL/Turso"
    } else if st.location == ":memory:" {
        "memory"
    } else {
        "local file"
    };
    ok(StatusResponse {
        version: VERSION.into(),
        backend: backend.into(),
        remote: st.remote,
        location: st.location,
        schema_version: st.schema_token,
        ping_ms,
        db_size_bytes: st.size_bytes.unwrap_or(0),
        queues: st.queues,
        topics: st.topics,
        subscriptions: st.subscriptions,
        uptime_ms: i64::try_from(s.started.elapsed().as_millis()).unwrap_or(i64::MAX),
        auth: s.auth.is_on(),
        relay_pending: st.relay.pending,
        relay_oldest_pending_ms: st
            .relay
            .oldest_created_at_ms
            .map_or(0, |t| (s.engine.clock().now_ms() - t).max(0)),
    })
}

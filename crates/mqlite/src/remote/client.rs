//! The typed client: each RPC as the engine's method of the same name, the answers
//! turned back into the engine's types and the error envelope into its
//! [`Error`] variants.

use std::future::Future;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

use mqlite_engine::worker::{HandlerError, Worker};

use super::wire::*;
use super::{ClientError, Http, Rpc};
use crate::{
    AccessKey, BatchResult, CreatedKey, Error, FilterTest, LockLostReason, LockRef, Message,
    MessageState, OutMessage, PeekOptions, Permission, PurgeOptions, QueueConfig, QueueInfo,
    QueueKind, QueueStats, QueueStatus, ReceiveMode, ReceiveOptions, RedriveOptions, Result,
    Schedule, ScheduleSpec, SendOptions, SeqNumber, SharedClock, Subscription, SystemClock,
};

/// Where a broker is, as a DSN says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dsn {
    /// The HTTP endpoint (`http://host:port`, `https://host:port`).
    pub endpoint: String,
    /// The bearer token, when the DSN carries one.
    pub token: Option<String>,
}

/// The broker's port when a DSN names none.
const DEFAULT_PORT: u16 = 6754;

impl std::str::FromStr for Dsn {
    type Err = Error;

    /// `mqlite://[token@]host[:port]` (HTTP, port 6754 by default),
    /// `mqlites://[token@]host[:port]` (HTTPS, port 443 by default: a broker behind a
    /// TLS proxy; needs the `tls` feature), or an `http://` / `https://` URL (no token).
    fn from_str(text: &str) -> Result<Dsn> {
        let text = text.trim();
        let bad = |why: &str| Error::invalid(format!("{text:?} is not a broker DSN: {why}"));
        let (scheme, rest) = text.split_once("://").ok_or_else(|| {
            bad("write mqlite://[token@]host[:port] or mqlites://[token@]host[:port]")
        })?;
        let (https, default_port) = match scheme.to_ascii_lowercase().as_str() {
            "http" | "https" => {
                return Ok(Dsn {
                    endpoint: text.trim_end_matches('/').to_owned(),
                    token: None,
                });
            }
            "mqlite" => (false, DEFAULT_PORT),
            "mqlites" => (true, 443),
            other => return Err(bad(&format!("unknown scheme {other}"))),
        };
        if https && !cfg!(feature = "tls") {
            return Err(bad(
                "mqlites:// needs TLS: build mqlite with the `tls` feature",
            ));
        }
        let rest = rest.trim_end_matches('/');
        let (token, host) = match rest.rsplit_once('@') {
            Some((t, h)) if !t.is_empty() => (Some(t.to_owned()), h),
            Some((_, h)) => (None, h),
            None => (None, rest),
        };
        if host.is_empty() || host.contains('/') {
            return Err(bad("name a host (and no path)"));
        }
        // A port is digits after the last colon (an IPv6 literal ends in `]`, so its
        // own colons never qualify).
        let has_port = host
            .rsplit_once(':')
            .is_some_and(|(_, p)| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()));
        let host = if has_port {
            host.to_owned()
        } else {
            format!("{host}:{default_port}")
        };
        let scheme = if https { "https" } else { "http" };
        Ok(Dsn {
            endpoint: format!("{scheme}://{host}"),
            token,
        })
    }
}

/// A broker's queues, with the engine's methods and types. Clones share the connection
/// pool.
#[derive(Debug, Clone)]
pub struct Client {
    http: Http,
    clock: SharedClock,
}

impl Client {
    /// A client of the broker a DSN names (see [`Dsn`]); nothing is sent until the
    /// first call.
    pub fn connect(dsn: &str) -> Result<Client> {
        let dsn: Dsn = dsn.parse()?;
        Ok(Client::new(dsn.endpoint, dsn.token))
    }

    /// A client of the broker at `endpoint` with `token`.
    pub fn new(endpoint: impl Into<String>, token: Option<String>) -> Client {
        Client {
            http: Http::new(endpoint, token),
            clock: SystemClock::shared(),
        }
    }

    /// The same client whose workers read `clock` (tests share a manual clock with the
    /// broker).
    pub fn with_clock(mut self, clock: SharedClock) -> Client {
        self.clock = clock;
        self
    }

    /// The clock its workers read.
    pub fn clock(&self) -> &SharedClock {
        &self.clock
    }

    /// The untyped client beneath: one POST per RPC with the wire types.
    pub fn http(&self) -> &Http {
        &self.http
    }

    async fn call<Q: Serialize + Sync, A: DeserializeOwned>(
        &self,
        rpc: Rpc,
        name: &str,
        request: &Q,
    ) -> Result<A> {
        self.http
            .call(rpc, request)
            .await
            .map_err(|e| into_error(e, name))
    }

    /// Creates a queue, or replaces an existing one's configuration.
    pub async fn create_queue(&self, name: &str, config: QueueConfig) -> Result<()> {
        let request = CreateQueueRequest {
            name: name.to_owned(),
            config: wire_config(&config, "queue"),
        };
        let _: Empty = self.call(Rpc::CreateQueue, name, &request).await?;
        Ok(())
    }

    /// Deletes a queue, topic or subscription with its messages; false when there was
    /// none.
    pub async fn delete_queue(&self, name: &str) -> Result<bool> {
        let request = DeleteQueueRequest {
            name: name.to_owned(),
        };
        let r: DeleteQueueResponse = self.call(Rpc::DeleteQueue, name, &request).await?;
        Ok(r.deleted)
    }

    /// Every queue, topic and subscription.
    pub async fn list_queues(&self) -> Result<Vec<QueueInfo>> {
        let r: QueuesResponse = self.call(Rpc::ListQueues, "", &Empty {}).await?;
        r.queues.into_iter().map(queue_info).collect()
    }

    /// Sends one message.
    pub async fn send(&self, queue: &str, message: OutMessage) -> Result<SeqNumber> {
        self.send_with(queue, message, SendOptions::default()).await
    }

    /// Sends one message with options (scheduled, a TTL).
    pub async fn send_with(
        &self,
        queue: &str,
        message: OutMessage,
        options: SendOptions,
    ) -> Result<SeqNumber> {
        let seqs = self.send_batch_with(queue, vec![message], options).await?;
        match seqs.first() {
            Some(s) if s.0 > 0 => Ok(*s),
            _ => Err(Error::DedupConflict {
                message_id: String::new(),
            }),
        }
    }

    /// Sends a batch in one transaction; a dedup-conflicting slot is 0.
    pub async fn send_batch(
        &self,
        queue: &str,
        messages: Vec<OutMessage>,
    ) -> Result<Vec<SeqNumber>> {
        self.send_batch_with(queue, messages, SendOptions::default())
            .await
    }

    /// Sends a batch with options.
    pub async fn send_batch_with(
        &self,
        queue: &str,
        messages: Vec<OutMessage>,
        options: SendOptions,
    ) -> Result<Vec<SeqNumber>> {
        let request = SendRequest {
            queue: queue.to_owned(),
            messages: messages.iter().map(WireMessage::from_out).collect(),
            scheduled_enqueue_time_ms: options.scheduled_at_ms,
            ttl_ms: options.ttl.map(ms),
        };
        let rpc = if options.scheduled_at_ms.is_some() {
            Rpc::Schedule
        } else {
            Rpc::Send
        };
        let r: SendResponse = self.call(rpc, queue, &request).await?;
        Ok(r.seq_numbers.into_iter().map(SeqNumber).collect())
    }

    /// Schedules one message for `at_ms`.
    pub async fn schedule(
        &self,
        queue: &str,
        message: OutMessage,
        at_ms: i64,
    ) -> Result<SeqNumber> {
        let options = SendOptions {
            scheduled_at_ms: Some(at_ms),
            ttl: None,
        };
        self.send_with(queue, message, options).await
    }

    /// Cancels a scheduled message; false when it was not one.
    pub async fn cancel(&self, queue: &str, seq: SeqNumber) -> Result<bool> {
        let request = CancelRequest {
            queue: queue.to_owned(),
            seq_number: seq.0,
        };
        let r: OkResponse = self.call(Rpc::Cancel, queue, &request).await?;
        Ok(r.ok)
    }

    /// Receives under a lease (or receive-and-delete), long-polling up to `wait`.
    pub async fn receive(&self, queue: &str, options: ReceiveOptions) -> Result<Vec<Message>> {
        let request = ReceiveRequest {
            queue: queue.to_owned(),
            max_messages: Some(i64::from(options.max_messages)),
            wait_time_ms: Some(ms(options.wait)),
            receive_mode: (options.mode == ReceiveMode::ReceiveAndDelete).then_some(1),
            receive_attempt_id: options.attempt_id.clone(),
        };
        let r: MessagesResponse = self.call(Rpc::Receive, queue, &request).await?;
        r.messages
            .into_iter()
            .map(WireMessage::into_message)
            .collect()
    }

    /// One message, if one is ready now.
    pub async fn receive_one(&self, queue: &str) -> Result<Option<Message>> {
        let options = ReceiveOptions {
            max_messages: 1,
            wait: Duration::ZERO,
            ..Default::default()
        };
        Ok(self.receive(queue, options).await?.into_iter().next())
    }

    /// Deferred messages by number, under a new lease.
    pub async fn receive_deferred(&self, queue: &str, seqs: &[SeqNumber]) -> Result<Vec<Message>> {
        let request = ReceiveDeferredRequest {
            queue: queue.to_owned(),
            seq_numbers: seqs.iter().map(|s| s.0).collect(),
        };
        let r: MessagesResponse = self.call(Rpc::ReceiveDeferred, queue, &request).await?;
        r.messages
            .into_iter()
            .map(WireMessage::into_message)
            .collect()
    }

    async fn settle(
        &self,
        rpc: Rpc,
        queue: &str,
        lock: LockRef,
        extra: SettleRequest,
    ) -> Result<i64> {
        let request = SettleRequest {
            queue: queue.to_owned(),
            seq_number: lock.seq.0,
            lock_token: lock.token.to_string(),
            ..extra
        };
        let r: OkResponse = self.call(rpc, queue, &request).await?;
        Ok(r.locked_until_ms)
    }

    /// Completes a received message.
    pub async fn complete(&self, queue: &str, lock: impl Into<LockRef>) -> Result<()> {
        self.settle(Rpc::Complete, queue, lock.into(), SettleRequest::default())
            .await
            .map(|_| ())
    }

    /// Releases a received message for delivery again after `delay`.
    pub async fn abandon(
        &self,
        queue: &str,
        lock: impl Into<LockRef>,
        delay: Duration,
    ) -> Result<()> {
        let extra = SettleRequest {
            delay_ms: ms(delay),
            ..Default::default()
        };
        self.settle(Rpc::Abandon, queue, lock.into(), extra)
            .await
            .map(|_| ())
    }

    /// Dead-letters a received message.
    pub async fn reject(
        &self,
        queue: &str,
        lock: impl Into<LockRef>,
        reason: &str,
        description: &str,
    ) -> Result<()> {
        let extra = SettleRequest {
            dead_letter_reason: reason.to_owned(),
            dead_letter_description: description.to_owned(),
            ..Default::default()
        };
        self.settle(Rpc::Reject, queue, lock.into(), extra)
            .await
            .map(|_| ())
    }

    /// Sets a received message aside for [`Client::receive_deferred`].
    pub async fn defer(&self, queue: &str, lock: impl Into<LockRef>) -> Result<()> {
        self.settle(Rpc::Defer, queue, lock.into(), SettleRequest::default())
            .await
            .map(|_| ())
    }

    /// Extends a live lease; the new lease end.
    pub async fn renew(&self, queue: &str, lock: impl Into<LockRef>) -> Result<i64> {
        self.settle(Rpc::Renew, queue, lock.into(), SettleRequest::default())
            .await
    }

    async fn batch(&self, rpc: Rpc, queue: &str, locks: &[LockRef]) -> Result<Vec<BatchResult>> {
        let request = BatchRequest {
            queue: queue.to_owned(),
            messages: locks
                .iter()
                .map(|l| LockItem {
                    seq_number: l.seq.0,
                    lock_token: l.token.to_string(),
                })
                .collect(),
        };
        let r: BatchResponse = self.call(rpc, queue, &request).await?;
        Ok(r.results
            .into_iter()
            .map(|i| BatchResult {
                seq: SeqNumber(i.seq_number),
                ok: i.ok,
                locked_until_ms: i.locked_until_ms,
                lost: (!i.ok).then_some(LockLostReason::Unknown),
            })
            .collect())
    }

    /// Completes many in one transaction; a stale item is `ok: false`.
    pub async fn complete_batch(&self, queue: &str, locks: &[LockRef]) -> Result<Vec<BatchResult>> {
        self.batch(Rpc::CompleteBatch, queue, locks).await
    }

    /// Completes `completed` (when there are any) and receives: two calls over the
    /// wire, which has no call that does both (the engine's
    /// `Engine::complete_and_receive` does them in one transaction).
    pub async fn complete_and_receive(
        &self,
        queue: &str,
        completed: &[LockRef],
        options: ReceiveOptions,
    ) -> Result<(Vec<BatchResult>, Vec<Message>)> {
        let done = if completed.is_empty() {
            Vec::new()
        } else {
            self.complete_batch(queue, completed).await?
        };
        Ok((done, self.receive(queue, options).await?))
    }

    /// Renews many leases in one transaction.
    pub async fn renew_batch(&self, queue: &str, locks: &[LockRef]) -> Result<Vec<BatchResult>> {
        self.batch(Rpc::RenewBatch, queue, locks).await
    }

    /// Messages without locking them.
    pub async fn peek(&self, queue: &str, options: PeekOptions) -> Result<Vec<Message>> {
        let request = PeekRequest {
            queue: queue.to_owned(),
            from_seq: options.from_seq.map(|s| s.0),
            state: options.state.map(|s| s.as_str().to_owned()),
            max: Some(i64::from(options.max)),
        };
        let r: MessagesResponse = self.call(Rpc::Peek, queue, &request).await?;
        r.messages
            .into_iter()
            .map(WireMessage::into_message)
            .collect()
    }

    /// Counts per state.
    pub async fn stats(&self, queue: &str) -> Result<QueueStats> {
        let request = QueueRequest {
            queue: queue.to_owned(),
        };
        let r: StatsResponse = self.call(Rpc::Stats, queue, &request).await?;
        Ok(QueueStats {
            active: r.active,
            locked: r.locked,
            deferred: r.deferred,
            scheduled: r.scheduled,
            dead_lettered: r.dead_lettered,
            total: r.total,
            oldest_message_age_ms: r.oldest_message_age_ms,
        })
    }

    /// Moves dead letters back; how many moved. An empty selection moves nothing (and
    /// is not sent: on the wire, no selection means every dead letter).
    pub async fn redrive(&self, queue: &str, options: RedriveOptions) -> Result<u64> {
        if options.seq_numbers.as_ref().is_some_and(Vec::is_empty) {
            return Ok(0);
        }
        let request = RedriveRequest {
            queue: queue.to_owned(),
            target: options.target,
            max: i64::try_from(options.max).unwrap_or(i64::MAX),
            older_than_ms: ms(options.older_than),
            rate_per_sec: i64::try_from(options.rate_per_sec).unwrap_or(i64::MAX),
            seq_numbers: options.seq_numbers.iter().flatten().map(|s| s.0).collect(),
        };
        let r: RedriveResponse = self.call(Rpc::Redrive, queue, &request).await?;
        Ok(r.moved)
    }

    /// Deletes dead letters; how many.
    pub async fn purge(&self, queue: &str, options: PurgeOptions) -> Result<u64> {
        let request = PurgeRequest {
            queue: queue.to_owned(),
            max: i64::try_from(options.max).unwrap_or(i64::MAX),
            older_than_ms: ms(options.older_than),
        };
        let r: PurgeResponse = self.call(Rpc::Purge, queue, &request).await?;
        Ok(r.purged)
    }

    /// Pauses or resumes a queue (`Engine::set_queue_status`).
    pub async fn set_queue_status(&self, name: &str, status: QueueStatus) -> Result<()> {
        let request = SetQueueStatusRequest {
            name: name.to_owned(),
            status: status.as_str().to_owned(),
        };
        let _: Empty = self.call(Rpc::SetQueueStatus, name, &request).await?;
        Ok(())
    }

    /// Creates a recurring schedule, or replaces its definition
    /// (`Engine::create_schedule`).
    pub async fn create_schedule(&self, spec: ScheduleSpec) -> Result<Schedule> {
        let name = spec.name.clone();
        let request = CreateScheduleRequest::from_spec(spec);
        let r: WireSchedule = self.call(Rpc::CreateSchedule, &name, &request).await?;
        r.into_schedule()
    }

    /// Every schedule, by name.
    pub async fn list_schedules(&self) -> Result<Vec<Schedule>> {
        let r: SchedulesResponse = self.call(Rpc::ListSchedules, "", &Empty {}).await?;
        r.schedules
            .into_iter()
            .map(WireSchedule::into_schedule)
            .collect()
    }

    /// Deletes a schedule; false if there was none.
    pub async fn delete_schedule(&self, name: &str) -> Result<bool> {
        let request = DeleteScheduleRequest {
            name: name.to_owned(),
        };
        let r: DeleteQueueResponse = self.call(Rpc::DeleteSchedule, name, &request).await?;
        Ok(r.deleted)
    }

    /// Subscribes `name` to `topic` with a filter (empty: every message).
    pub async fn subscribe(&self, topic: &str, name: &str, filter: &str) -> Result<()> {
        let request = SubscribeRequest {
            topic: topic.to_owned(),
            name: name.to_owned(),
            filter: (!filter.trim().is_empty()).then(|| FilterSpec {
                expr: filter.to_owned(),
            }),
        };
        let _: Empty = self.call(Rpc::Subscribe, name, &request).await?;
        Ok(())
    }

    /// Deletes a subscription with its messages.
    pub async fn unsubscribe(&self, topic: &str, name: &str) -> Result<()> {
        let request = UnsubscribeRequest {
            topic: topic.to_owned(),
            name: name.to_owned(),
        };
        let _: Empty = self.call(Rpc::Unsubscribe, name, &request).await?;
        Ok(())
    }

    /// Every subscription.
    pub async fn list_subscriptions(&self) -> Result<Vec<Subscription>> {
        let r: SubscriptionsResponse = self.call(Rpc::ListSubscriptions, "", &Empty {}).await?;
        Ok(r.subscriptions
            .into_iter()
            .map(|s| Subscription {
                topic: s.topic,
                name: s.name,
                filter: s.expr,
            })
            .collect())
    }

    /// Checks a filter as Subscribe would and, given a sample message, evaluates it.
    pub async fn test_filter(
        &self,
        filter: &str,
        message: Option<&OutMessage>,
    ) -> Result<FilterTest> {
        let request = TestFilterRequest {
            expr: filter.to_owned(),
            message: message.map(WireMessage::from_out),
        };
        let r: TestFilterResponse = self.call(Rpc::TestFilter, "", &request).await?;
        Ok(FilterTest {
            valid: r.valid,
            error: (!r.error.is_empty()).then_some(r.error),
            ran: r.ran,
            matched: r.matched,
        })
    }

    /// Creates an access key; its token is in the answer, and only there. The key's
    /// `digest` is not on the wire: it is empty here.
    pub async fn create_key(
        &self,
        id: Option<&str>,
        name: &str,
        permissions: &[Permission],
        expires_at_ms: i64,
    ) -> Result<CreatedKey> {
        let request = CreateKeyRequest {
            id: id.unwrap_or_default().to_owned(),
            name: name.to_owned(),
            permissions: permissions.iter().map(|p| p.as_str().to_owned()).collect(),
            expires_at_ms,
        };
        let k: WireKey = self
            .call(Rpc::CreateKey, id.unwrap_or_default(), &request)
            .await?;
        let token = k.token.clone();
        Ok(CreatedKey {
            key: access_key(k)?,
            token,
        })
    }

    /// Access keys by id, after `after_id`, at most `limit` (never their tokens).
    pub async fn list_keys(&self, after_id: Option<&str>, limit: u32) -> Result<Vec<AccessKey>> {
        let request = ListKeysRequest {
            after_id: after_id.map(str::to_owned),
            limit: Some(i64::from(limit)),
        };
        let r: ListKeysResponse = self.call(Rpc::ListKeys, "", &request).await?;
        r.keys.into_iter().map(access_key).collect()
    }

    /// Revokes an access key; false when there was none.
    pub async fn revoke_key(&self, id: &str) -> Result<bool> {
        let request = RevokeKeyRequest { id: id.to_owned() };
        match self.call::<_, Empty>(Rpc::RevokeKey, id, &request).await {
            Ok(Empty {}) => Ok(true),
            Err(Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// What the broker serves: version, store, counts, uptime (the wire's answer).
    pub async fn status(&self) -> Result<StatusResponse> {
        self.call(Rpc::Status, "", &Empty {}).await
    }

    /// Who this client's token is, and what it may do (the wire's answer).
    pub async fn who_am_i(&self) -> Result<WhoAmIResponse> {
        self.call(Rpc::WhoAmI, "", &Empty {}).await
    }

    /// A worker that hands each message of `queue` to `handler`: the embedded worker
    /// (concurrency, prefetch, renewal, retries to the dead-letter state, a graceful
    /// stop), its calls sent to the broker.
    pub fn worker<F, Fut>(&self, queue: &str, handler: F) -> Worker<Client, F>
    where
        F: Fn(Message) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<(), HandlerError>> + Send + 'static,
    {
        Worker::new(self.clone(), queue, handler)
    }
}

mqlite_engine::source_by_inherent_methods!([] Client);

/// Milliseconds of a duration, saturating.
fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// A queue's configuration as CreateQueue takes it.
fn wire_config(c: &QueueConfig, kind: &str) -> WireQueueConfig {
    WireQueueConfig {
        kind: Some(kind.to_owned()),
        lock_duration_ms: Some(c.lock_ms()),
        max_delivery_count: Some(c.max_delivery_count),
        default_ttl_ms: Some(c.default_ttl_ms()),
        dead_letter_on_expire: Some(c.dead_letter_on_expire),
        dedup_window_ms: Some(c.dedup_window_ms()),
        ordering_mode: Some(c.ordering_mode.as_str().to_owned()),
        dlq_max_age_ms: Some(c.dlq_max_age_ms),
        dlq_max_count: Some(c.dlq_max_count),
        dlq_max_bytes: Some(c.dlq_max_bytes),
        dead_letter_target: c.dead_letter_target.clone(),
        require_message_id: Some(c.require_message_id),
        status: Some(c.status.as_str().to_owned()),
    }
}

/// A ListQueues entry as the engine lists it.
fn queue_info(q: WireQueue) -> Result<QueueInfo> {
    let span = |v: i64| Duration::from_millis(u64::try_from(v).unwrap_or(0));
    Ok(QueueInfo {
        kind: q.kind.parse::<QueueKind>()?,
        config: QueueConfig {
            lock_duration: span(q.lock_duration_ms),
            max_delivery_count: q.max_delivery_count,
            default_ttl: span(q.default_ttl_ms),
            dead_letter_on_expire: q.dead_letter_on_expire,
            dedup_window: span(q.dedup_window_ms),
            ordering_mode: q.ordering_mode.parse()?,
            dlq_max_age_ms: q.dlq_max_age_ms,
            dlq_max_count: q.dlq_max_count,
            dlq_max_bytes: q.dlq_max_bytes,
            dead_letter_target: Some(q.dead_letter_target).filter(|t| !t.is_empty()),
            require_message_id: q.require_message_id,
            status: if q.status.is_empty() {
                QueueStatus::Active
            } else {
                q.status.parse()?
            },
        },
        name: q.name,
    })
}

/// An access key as the wire lists it (no digest on the wire).
fn access_key(k: WireKey) -> Result<AccessKey> {
    Ok(AccessKey {
        permissions: k
            .permissions
            .iter()
            .map(|p| p.parse())
            .collect::<Result<Vec<Permission>>>()?,
        id: k.id,
        name: k.name,
        digest: String::new(),
        created_at_ms: k.created_at_ms,
        expires_at_ms: k.expires_at_ms,
        revoked_at_ms: k.revoked_at_ms,
    })
}

/// The engine's error for a broker's refusal of a call that names `name`.
fn into_error(e: ClientError, name: &str) -> Error {
    let (status, code, message) = match e {
        ClientError::Api {
            status,
            code,
            message,
        } => (status, code, message),
        ClientError::Transport { .. } => return Error::transient("remote", e),
        ClientError::Decode { .. } => return Error::backend("remote", e),
    };
    match code.as_str() {
        "lock_lost" => Error::LockLost {
            reason: LockLostReason::Unknown,
        },
        "invalid_argument" => Error::InvalidArgument(message),
        "not_found" => Error::NotFound {
            kind: "queue",
            name: name.to_owned(),
        },
        "group_required" => Error::GroupRequired {
            queue: name.to_owned(),
        },
        "queue_paused" => Error::QueuePaused {
            queue: name.to_owned(),
            // The broker's message names the status: "(status send_disabled)".
            status: message
                .split_once("(status ")
                .and_then(|(_, rest)| rest.split_once(')'))
                .and_then(|(s, _)| s.parse().ok())
                .unwrap_or(QueueStatus::Disabled),
        },
        "name_conflict" => Error::NameConflict {
            name: name.to_owned(),
            existing: message,
        },
        "already_exists" => Error::DedupConflict {
            message_id: String::new(),
        },
        "cancelled" => Error::Cancelled,
        "resource_exhausted" => Error::StorageFull {
            backend: "remote",
            location: message,
        },
        "outcome_unknown" => Error::OutcomeUnknown {
            backend: "remote",
            source: message.into(),
        },
        _ => Error::Remote {
            status,
            code,
            message,
        },
    }
}

impl WireMessage {
    /// A message to send, in the wire's form.
    pub fn from_out(m: &OutMessage) -> Self {
        WireMessage::from_content(m.clone())
    }

    /// A received or peeked message as the engine returns it. Receive leaves out the
    /// state: a message with a lock token is locked, one without active.
    pub fn into_message(self) -> Result<Message> {
        let token = match self.lock_token.as_str() {
            "" => None,
            t => Some(t.parse()?),
        };
        let state = match self.state.as_str() {
            "" if token.is_some() => MessageState::Locked,
            "" => MessageState::Active,
            s => s.parse()?,
        };
        let some = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        Ok(Message {
            seq: SeqNumber(self.seq_number),
            delivery_count: self.delivery_count,
            lock_token: token,
            state,
            enqueued_at_ms: self.enqueued_at_ms,
            expires_at_ms: self.expires_at_ms,
            visible_at_ms: self.visible_at_ms,
            locked_until_ms: self.locked_until_ms,
            dead_letter_reason: some(&self.dead_letter_reason),
            dead_letter_description: some(&self.dead_letter_description),
            content: self.into_out()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dsns_name_an_endpoint_and_a_token() {
        let d: Dsn = "mqlite://tok@broker.internal:7000".parse().expect("a DSN");
        assert_eq!(d.endpoint, "http://broker.internal:7000");
        assert_eq!(d.token.as_deref(), Some("tok"));
        let d: Dsn = "mqlite://127.0.0.1".parse().expect("a DSN");
        assert_eq!(d.endpoint, "http://127.0.0.1:6754");
        assert_eq!(d.token, None);
        let d: Dsn = "mqlite://[::1]".parse().expect("an IPv6 DSN");
        assert_eq!(d.endpoint, "http://[::1]:6754");
        let d: Dsn = "mqlite://[::1]:7000".parse().expect("an IPv6 DSN");
        assert_eq!(d.endpoint, "http://[::1]:7000");
        let d: Dsn = "http://10.0.0.1:6754/".parse().expect("a URL");
        assert_eq!(d.endpoint, "http://10.0.0.1:6754");
        for bad in ["broker:6754", "mqlite://", "redis://x", "mqlite://h/path"] {
            assert!(bad.parse::<Dsn>().is_err(), "{bad}");
        }
        let tls = "mqlites://tok@mq.example.com".parse::<Dsn>();
        if cfg!(feature = "tls") {
            assert_eq!(tls.expect("a DSN").endpoint, "https://mq.example.com:443");
        } else {
            let e = tls.expect_err("needs the tls feature").to_string();
            assert!(e.contains("`tls` feature"), "{e}");
        }
    }

    #[test]
    fn a_message_goes_out_and_comes_back_the_same() {
        let mut out = OutMessage::new("hi");
        out.group_id = Some("g".into());
        out.properties.insert("k".into(), "v".into());
        let mut w = WireMessage::from_out(&out);
        w.seq_number = 7;
        w.lock_token = "0123456789abcdef0123456789abcdef".into();
        let m = w.into_message().expect("a message");
        assert_eq!(m.seq, SeqNumber(7));
        assert_eq!(m.state, MessageState::Locked);
        assert_eq!(m.content, out);
    }
}

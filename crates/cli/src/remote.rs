//! The client subcommands: one wire call each (receive adds CompleteBatch), the wire
//! types in and out, the answer printed as JSON or as a table.

use std::io::Read;

use mqlite_broker::wire::{
    BatchRequest, BatchResponse, CancelRequest, CreateKeyRequest, CreateQueueRequest,
    CreateScheduleRequest, DeleteQueueRequest, DeleteQueueResponse, DeleteScheduleRequest, Empty,
    FilterSpec, ListKeysRequest, ListKeysResponse, LockItem, MessagesResponse, OkResponse,
    PeekRequest, PurgeRequest, PurgeResponse, QueueRequest, QueuesResponse, ReceiveDeferredRequest,
    ReceiveRequest, RedriveRequest, RedriveResponse, RevokeKeyRequest, SchedulesResponse,
    SendRequest, SendResponse, SetQueueStatusRequest, SettleRequest, StatsResponse, StatusResponse,
    SubscribeRequest, SubscriptionsResponse, TestFilterRequest, TestFilterResponse,
    UnsubscribeRequest, WireKey, WireMessage, WireQueue, WireQueueConfig, WireSchedule,
};
use mqlite_broker::{Client, Rpc};

use crate::Failure;
use crate::args::{
    Command, CreateQueueArgs, KeyCommand, KeyCreateArgs, KeyListArgs, MessageArgs, Output,
    PeekArgs, ReceiveArgs, RecurringCommand, RecurringCreateArgs, SettleArgs, SubscribeArgs,
    TestFilterArgs, UpdateQueueArgs,
};
use crate::output::{self, body, ms_or_dash, or_dash};

/// Runs one client subcommand against the broker `client` talks to.
pub(crate) async fn run(client: &Client, out: Output, command: Command) -> Result<(), Failure> {
    match command {
        Command::CreateQueue(a) => create_queue(client, out, a).await,
        Command::ListQueues => list_queues(client, out).await,
        Command::Send(a) => {
            let at_ms = match &a.delay {
                Some(d) => Some(now_ms().saturating_add(ms("--delay", d)?)),
                None => a.at_ms,
            };
            send(client, out, Rpc::Send, a.message, at_ms).await
        }
        Command::Schedule(a) => {
            let at_ms = at_time(&a.at)?;
            send(client, out, Rpc::Schedule, a.message, Some(at_ms)).await
        }
        Command::UpdateQueue(a) => update_queue(client, out, a).await,
        Command::Receive(a) => receive(client, out, a).await,
        Command::Complete(a) => settle(client, out, Rpc::Complete, a, 0, "", "").await,
        Command::Abandon(a) => settle(client, out, Rpc::Abandon, a.lock, a.delay_ms, "", "").await,
        Command::Reject(a) => {
            settle(
                client,
                out,
                Rpc::Reject,
                a.lock,
                0,
                &a.reason,
                &a.description,
            )
            .await
        }
        Command::Defer(a) => settle(client, out, Rpc::Defer, a, 0, "", "").await,
        Command::Renew(a) => settle(client, out, Rpc::Renew, a, 0, "", "").await,
        Command::Peek(a) => peek(client, out, a).await,
        Command::Stats(a) => stats(client, out, a.queue).await,
        Command::Redrive(a) => {
            let request = RedriveRequest {
                queue: a.queue,
                target: a.target,
                max: a.max,
                older_than_ms: a.older_than_ms,
                rate_per_sec: a.rate_per_sec,
                seq_numbers: a.seq_numbers,
            };
            let r: RedriveResponse = client.call(Rpc::Redrive, &request).await?;
            match out {
                Output::Json => output::json(&r),
                Output::Table => output::line(&format!("moved {} dead letters", r.moved)),
            }
        }
        Command::Purge(a) => {
            let request = PurgeRequest {
                queue: a.queue,
                max: a.max,
                older_than_ms: a.older_than_ms,
            };
            let r: PurgeResponse = client.call(Rpc::Purge, &request).await?;
            match out {
                Output::Json => output::json(&r),
                Output::Table => output::line(&format!("purged {} dead letters", r.purged)),
            }
        }
        Command::Pause(a) => set_status(client, out, a.queue.clone(), a.status()).await,
        Command::Resume(a) => set_status(client, out, a.queue, "active").await,
        Command::DeleteQueue(a) => {
            if !a.yes {
                return Err(Failure::from(format!(
                    "delete-queue deletes {} and every message it holds: add --yes to confirm",
                    a.name
                )));
            }
            let request = DeleteQueueRequest { name: a.name };
            let r: DeleteQueueResponse = client.call(Rpc::DeleteQueue, &request).await?;
            match out {
                Output::Json => output::json(&r),
                Output::Table if r.deleted => {
                    output::line(&format!("deleted {} and its messages", request.name))
                }
                Output::Table => {
                    output::line(&format!("no queue {}: nothing deleted", request.name))
                }
            }
        }
        Command::ReceiveDeferred(a) => {
            let request = ReceiveDeferredRequest {
                queue: a.queue,
                seq_numbers: a.seqs,
            };
            let r: MessagesResponse = client.call(Rpc::ReceiveDeferred, &request).await?;
            locked(out, &r)
        }
        Command::Cancel(a) => {
            let request = CancelRequest {
                queue: a.queue,
                seq_number: a.seq,
            };
            let r: OkResponse = client.call(Rpc::Cancel, &request).await?;
            match out {
                Output::Json => output::json(&r),
                Output::Table if r.ok => output::line(&format!("cancelled {}", request.seq_number)),
                Output::Table => output::line(&format!(
                    "{} was not a scheduled message of {}: nothing cancelled",
                    request.seq_number, request.queue
                )),
            }
        }
        Command::Subscribe(a) => subscribe(client, out, a).await,
        Command::Unsubscribe(a) => {
            let request = UnsubscribeRequest {
                topic: a.topic,
                name: a.name,
            };
            let r: Empty = client.call(Rpc::Unsubscribe, &request).await?;
            match out {
                Output::Json => output::json(&r),
                Output::Table => output::line(&format!(
                    "unsubscribed {} from topic {}",
                    request.name, request.topic
                )),
            }
        }
        Command::Subscriptions => subscriptions(client, out).await,
        Command::TestFilter(a) => test_filter(client, out, a).await,
        Command::Status => status(client, out).await,
        Command::Recurring(RecurringCommand::Create(a)) => recurring_create(client, out, *a).await,
        Command::Recurring(RecurringCommand::List) => recurring_list(client, out).await,
        Command::Recurring(RecurringCommand::Delete { name }) => {
            let request = DeleteScheduleRequest { name };
            let r: DeleteQueueResponse = client.call(Rpc::DeleteSchedule, &request).await?;
            match out {
                Output::Json => output::json(&r),
                Output::Table if r.deleted => {
                    output::line(&format!("deleted schedule {}", request.name))
                }
                Output::Table => {
                    output::line(&format!("no schedule {}: nothing deleted", request.name))
                }
            }
        }
        Command::Key(KeyCommand::Create(a)) => key_create(client, out, a).await,
        Command::Key(KeyCommand::List(a)) => key_list(client, out, a).await,
        Command::Key(KeyCommand::Revoke { id }) => {
            let r: Empty = client
                .call(Rpc::RevokeKey, &RevokeKeyRequest { id: id.clone() })
                .await?;
            match out {
                Output::Json => output::json(&r),
                Output::Table => output::line(&format!("revoked key {id}")),
            }
        }
        Command::Serve(_)
        | Command::Backup(_)
        | Command::Trace(_)
        | Command::Version
        | Command::Vacuum(_)
        | Command::Migrate(_)
        | Command::Mcp
        | Command::Completions { .. }
        | Command::Man => Err("serve, backup, trace, vacuum, migrate, mcp, completions, \
                               man and version are not broker calls"
            .into()),
    }
}

async fn create_queue(client: &Client, out: Output, a: CreateQueueArgs) -> Result<(), Failure> {
    let request = CreateQueueRequest {
        name: a.name.clone(),
        config: WireQueueConfig {
            kind: Some(a.kind.as_str().to_owned()),
            ..a.options.config()
        },
    };
    // CreateQueue is an upsert: say which it was, and show what the queue now is.
    let before: QueuesResponse = client.call(Rpc::ListQueues, &Empty {}).await?;
    let existed = before.queues.iter().any(|q| q.name == a.name);
    let r: Empty = client.call(Rpc::CreateQueue, &request).await?;
    if out == Output::Json {
        return output::json(&r);
    }
    let verb = if existed { "updated" } else { "created" };
    output::line(&format!("{verb} {} {}", a.kind.as_str(), a.name))?;
    let after: QueuesResponse = client.call(Rpc::ListQueues, &Empty {}).await?;
    match after.queues.iter().find(|q| q.name == a.name) {
        Some(q) if q.kind != "topic" => output::pairs(&config_pairs(q)),
        _ => Ok(()),
    }
}

/// Changes only the given options of an existing queue: its current configuration, the
/// flags laid over it, written back whole (CreateQueue is an upsert).
async fn update_queue(client: &Client, out: Output, a: UpdateQueueArgs) -> Result<(), Failure> {
    let before: QueuesResponse = client.call(Rpc::ListQueues, &Empty {}).await?;
    let Some(q) = before.queues.iter().find(|q| q.name == a.name) else {
        return Err(format!("no queue {}: create it with create-queue", a.name).into());
    };
    if q.kind == "topic" {
        return Err(format!("{} is a topic: a topic has no queue options", a.name).into());
    }
    let given = a.options.config();
    let request = CreateQueueRequest {
        name: a.name.clone(),
        config: WireQueueConfig {
            kind: Some(q.kind.clone()),
            lock_duration_ms: given.lock_duration_ms.or(Some(q.lock_duration_ms)),
            max_delivery_count: given.max_delivery_count.or(Some(q.max_delivery_count)),
            default_ttl_ms: given.default_ttl_ms.or(Some(q.default_ttl_ms)),
            dead_letter_on_expire: given
                .dead_letter_on_expire
                .or(Some(q.dead_letter_on_expire)),
            dedup_window_ms: given.dedup_window_ms.or(Some(q.dedup_window_ms)),
            ordering_mode: given.ordering_mode.or(Some(q.ordering_mode.clone())),
            dlq_max_age_ms: given.dlq_max_age_ms.or(Some(q.dlq_max_age_ms)),
            dlq_max_count: given.dlq_max_count.or(Some(q.dlq_max_count)),
            dlq_max_bytes: given.dlq_max_bytes.or(Some(q.dlq_max_bytes)),
            dead_letter_target: given
                .dead_letter_target
                .or(Some(q.dead_letter_target.clone())),
            require_message_id: given.require_message_id.or(Some(q.require_message_id)),
            status: Some(q.status.clone()).filter(|s| !s.is_empty()),
        },
    };
    let _: Empty = client.call(Rpc::CreateQueue, &request).await?;
    let after: QueuesResponse = client.call(Rpc::ListQueues, &Empty {}).await?;
    let q = after
        .queues
        .into_iter()
        .find(|q| q.name == a.name)
        .ok_or_else(|| Failure::from(format!("{} vanished while it was updated", a.name)))?;
    match out {
        Output::Json => output::json(&q),
        Output::Table => {
            output::line(&format!("updated queue {}", a.name))?;
            output::pairs(&config_pairs(&q))
        }
    }
}

/// Pause or Resume: sets the queue's status and says what it now does.
async fn set_status(
    client: &Client,
    out: Output,
    name: String,
    status: &str,
) -> Result<(), Failure> {
    let request = SetQueueStatusRequest {
        name,
        status: status.to_owned(),
    };
    let _: Empty = client.call(Rpc::SetQueueStatus, &request).await?;
    match out {
        Output::Json => output::json(&request),
        Output::Table => output::line(&format!(
            "{}: {}",
            request.name,
            match status {
                "active" => "active: takes sends and hands out messages",
                "send_disabled" => "send_disabled: sends are refused; receives go on",
                "receive_disabled" => "receive_disabled: receives get nothing; sends go on",
                _ => "disabled: sends are refused and receives get nothing",
            }
        )),
    }
}

/// A per-queue dead-letter bound: `default` (0, the broker's), `-` (-1, unbounded), or
/// the bound.
fn dlq_bound(v: i64) -> String {
    match v {
        0 => "default".to_owned(),
        n if n < 0 => "-".to_owned(),
        n => n.to_string(),
    }
}

/// A queue's configuration as `name: value` pairs.
fn config_pairs(q: &WireQueue) -> Vec<(&'static str, String)> {
    let mut pairs = vec![
        ("ordering_mode", q.ordering_mode.clone()),
        ("lock_duration_ms", q.lock_duration_ms.to_string()),
        ("max_delivery_count", q.max_delivery_count.to_string()),
        ("default_ttl_ms", q.default_ttl_ms.to_string()),
        ("dead_letter_on_expire", q.dead_letter_on_expire.to_string()),
        ("dedup_window_ms", q.dedup_window_ms.to_string()),
        ("dlq_max_age_ms", q.dlq_max_age_ms.to_string()),
        ("dlq_max_count", q.dlq_max_count.to_string()),
        ("dlq_max_bytes", q.dlq_max_bytes.to_string()),
    ];
    // Shown when set, so a plain queue's lines stay as they were.
    if !q.dead_letter_target.is_empty() {
        pairs.push(("dead_letter_target", q.dead_letter_target.clone()));
    }
    if q.require_message_id {
        pairs.push(("require_message_id", "true".into()));
    }
    if !q.status.is_empty() && q.status != "active" {
        pairs.push(("status", q.status.clone()));
    }
    pairs
}

async fn list_queues(client: &Client, out: Output) -> Result<(), Failure> {
    let r: QueuesResponse = client.call(Rpc::ListQueues, &Empty {}).await?;
    if out == Output::Json {
        return output::json(&r);
    }
    if r.queues.is_empty() {
        eprintln!("no queues");
        return Ok(());
    }
    let rows: Vec<Vec<String>> = r
        .queues
        .iter()
        .map(|q| {
            vec![
                q.name.clone(),
                q.kind.clone(),
                q.ordering_mode.clone(),
                q.lock_duration_ms.to_string(),
                q.max_delivery_count.to_string(),
                ms_or_dash(q.default_ttl_ms),
                q.dead_letter_on_expire.to_string(),
                ms_or_dash(q.dedup_window_ms),
                dlq_bound(q.dlq_max_age_ms),
                dlq_bound(q.dlq_max_count),
                dlq_bound(q.dlq_max_bytes),
            ]
        })
        .collect();
    output::table(
        &[
            "NAME",
            "KIND",
            "ORDERING",
            "LOCK_MS",
            "MAX_DELIVERIES",
            "TTL_MS",
            "DLQ_ON_EXPIRE",
            "DEDUP_MS",
            "DLQ_MAX_AGE_MS",
            "DLQ_MAX_COUNT",
            "DLQ_MAX_BYTES",
        ],
        &rows,
    )
}

/// Whether any message carries an event identity (its table gets an EVENT column).
fn has_events(messages: &[WireMessage]) -> bool {
    messages.iter().any(|m| !m.event_id.is_empty())
}

/// A message's event identity as `source id`, or `-`.
fn event(m: &WireMessage) -> String {
    if m.event_id.is_empty() {
        "-".into()
    } else {
        format!("{} {}", m.event_source, m.event_id)
    }
}

/// The body to send: the argument's text, or a file's (`-`: stdin) bytes.
fn read_body(a: &MessageArgs) -> Result<Vec<u8>, Failure> {
    let stdin = |p: &std::path::Path| p.as_os_str() == "-";
    match (&a.body, &a.file) {
        (Some(text), None) if text != "-" => Ok(text.as_bytes().to_vec()),
        (Some(_), None) => read_stdin(),
        (None, Some(path)) if stdin(path) => read_stdin(),
        (None, Some(path)) => std::fs::read(path)
            .map_err(|e| Failure::from(format!("cannot read {}: {e}", path.display()))),
        // clap requires exactly one of them.
        _ => Err("give the body as an argument or with --file, not both".into()),
    }
}

/// The body from standard input.
fn read_stdin() -> Result<Vec<u8>, Failure> {
    let mut bytes = Vec::new();
    std::io::stdin()
        .read_to_end(&mut bytes)
        .map_err(|e| Failure::from(format!("cannot read standard input: {e}")))?;
    Ok(bytes)
}

/// Milliseconds since the epoch, now.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A duration flag's value (30s, 2h, or ms) in ms.
fn ms(name: &str, text: &str) -> Result<i64, Failure> {
    mqlite_broker::config::parse_duration(name, text)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .map_err(|e| Failure::from(e.to_string()))
}

/// `schedule --at`: an RFC 3339 time, or a duration from now; epoch ms.
fn at_time(text: &str) -> Result<i64, Failure> {
    if let Ok(t) = humantime::parse_rfc3339_weak(text) {
        let ms = t
            .duration_since(std::time::UNIX_EPOCH)
            .map_err(|_| Failure::from(format!("--at {text}: before 1970")))?
            .as_millis();
        return Ok(i64::try_from(ms).unwrap_or(i64::MAX));
    }
    let after = ms("--at", text).map_err(|_| {
        Failure::from(format!(
            "--at {text:?} is neither an RFC 3339 time (2027-01-02T15:04:05Z) nor a \
             duration from now (30s, 15m, 2h, 7d)"
        ))
    })?;
    Ok(now_ms().saturating_add(after))
}

/// The message `a` describes, and its time to live in ms.
fn message_of(a: &MessageArgs) -> Result<(WireMessage, Option<i64>), Failure> {
    let mut message = WireMessage::with_body(read_body(a)?);
    message.message_id = a.message_id.clone().unwrap_or_default();
    message.group_id = a.group_id.clone().unwrap_or_default();
    message.subject = a.subject.clone().unwrap_or_default();
    message.reply_to = a.reply_to.clone().unwrap_or_default();
    message.correlation_id = a.correlation_id.clone().unwrap_or_default();
    message.priority = a.priority.unwrap_or(0);
    let ttl_ms = match &a.ttl {
        Some(t) => Some(ms("--ttl", t)?),
        None => a.ttl_ms,
    };
    message.event_source = a.event_source.clone().unwrap_or_default();
    message.event_id = a.event_id.clone().unwrap_or_default();
    message.event_type = a.event_type.clone().unwrap_or_default();
    Ok((message, ttl_ms))
}

async fn recurring_create(
    client: &Client,
    out: Output,
    a: RecurringCreateArgs,
) -> Result<(), Failure> {
    let (message, ttl_ms) = message_of(&a.message)?;
    if ttl_ms.is_some() || a.message.message_id.is_some() || a.message.event_id.is_some() {
        return Err(Failure::from(
            "a recurring message takes no --ttl (give the queue a default TTL) and no \
             --message-id or --event-id (each tick's id is <name>@<tick ms>)",
        ));
    }
    let request = CreateScheduleRequest {
        name: a.name,
        queue: a.message.queue,
        every_ms: a.every.as_deref().map(|e| ms("--every", e)).transpose()?,
        cron: a.cron,
        tz: a.tz,
        missed: Some(if a.skip_missed { "skip" } else { "fire_once" }.to_owned()),
        message,
    };
    let r: WireSchedule = client.call(Rpc::CreateSchedule, &request).await?;
    match out {
        Output::Json => output::json(&r),
        Output::Table => output::line(&format!(
            "schedule {} sends to {} {}; next tick at {} (epoch ms)",
            r.name,
            r.queue,
            recurrence(&r),
            r.next_at_ms
        )),
    }
}

/// `every 300000 ms` or `at "0 2 * * 1-5" in Europe/Paris`.
fn recurrence(s: &WireSchedule) -> String {
    if s.cron.is_empty() {
        format!("every {} ms", s.every_ms)
    } else {
        format!("at {:?} in {}", s.cron, s.tz)
    }
}

async fn recurring_list(client: &Client, out: Output) -> Result<(), Failure> {
    let r: SchedulesResponse = client.call(Rpc::ListSchedules, &Empty {}).await?;
    if out == Output::Json {
        return output::json(&r);
    }
    if r.schedules.is_empty() {
        eprintln!("no schedules");
        return Ok(());
    }
    let rows: Vec<Vec<String>> = r
        .schedules
        .iter()
        .map(|s| {
            vec![
                s.name.clone(),
                s.queue.clone(),
                recurrence(s),
                s.missed.clone(),
                s.next_at_ms.to_string(),
                s.fired.to_string(),
                if s.last_tick_ms == 0 {
                    "-".to_owned()
                } else {
                    s.last_tick_ms.to_string()
                },
            ]
        })
        .collect();
    output::table(
        &[
            "NAME",
            "QUEUE",
            "WHEN",
            "MISSED",
            "NEXT_AT_MS",
            "FIRED",
            "LAST_TICK_MS",
        ],
        &rows,
    )
}

async fn send(
    client: &Client,
    out: Output,
    rpc: Rpc,
    a: MessageArgs,
    at_ms: Option<i64>,
) -> Result<(), Failure> {
    let (message, ttl_ms) = message_of(&a)?;
    let request = SendRequest {
        queue: a.queue,
        messages: vec![message],
        scheduled_enqueue_time_ms: at_ms,
        ttl_ms,
    };
    let r: SendResponse = client.call(rpc, &request).await?;
    match out {
        Output::Json => output::json(&r),
        Output::Table => {
            let seqs: Vec<String> = r.seq_numbers.iter().map(i64::to_string).collect();
            output::line(&seqs.join("\n"))
        }
    }
}

/// Messages received under a lock, with the tokens to settle them by.
fn locked(out: Output, r: &MessagesResponse) -> Result<(), Failure> {
    match out {
        Output::Json => output::json(r),
        Output::Table if r.messages.is_empty() => {
            eprintln!("no messages");
            Ok(())
        }
        Output::Table => {
            let rows: Vec<Vec<String>> = r
                .messages
                .iter()
                .map(|m| {
                    vec![
                        m.seq_number.to_string(),
                        m.delivery_count.to_string(),
                        m.lock_token.clone(),
                        body(m),
                    ]
                })
                .collect();
            output::table(&["SEQ", "DELIVERIES", "LOCK_TOKEN", "BODY"], &rows)
        }
    }
}

async fn receive(client: &Client, out: Output, a: ReceiveArgs) -> Result<(), Failure> {
    let request = ReceiveRequest {
        queue: a.queue.clone(),
        max_messages: Some(a.max),
        wait_time_ms: Some(a.wait_ms),
        receive_mode: a.delete.then_some(1),
        ..Default::default()
    };
    let r: MessagesResponse = client.call(Rpc::Receive, &request).await?;
    match out {
        Output::Json => output::json(&r)?,
        Output::Table if a.raw => output::raw_bodies(&r.messages)?,
        Output::Table if r.messages.is_empty() => eprintln!("no messages"),
        Output::Table => {
            let mut headers = vec!["SEQ", "DELIVERIES"];
            if a.no_complete {
                headers.push("LOCK_TOKEN");
            }
            let events = has_events(&r.messages);
            if events {
                headers.push("EVENT");
            }
            headers.push("BODY");
            let rows: Vec<Vec<String>> = r
                .messages
                .iter()
                .map(|m| {
                    let mut row = vec![m.seq_number.to_string(), m.delivery_count.to_string()];
                    if a.no_complete {
                        row.push(m.lock_token.clone());
                    }
                    if events {
                        row.push(event(m));
                    }
                    row.push(body(m));
                    row
                })
                .collect();
            output::table(&headers, &rows)?;
        }
    }
    if a.no_complete || a.delete || r.messages.is_empty() {
        return Ok(());
    }
    let batch = BatchRequest {
        queue: a.queue,
        messages: r
            .messages
            .iter()
            .map(|m| LockItem {
                seq_number: m.seq_number,
                lock_token: m.lock_token.clone(),
            })
            .collect(),
    };
    let done: BatchResponse = client.call(Rpc::CompleteBatch, &batch).await?;
    let lost: Vec<String> = done
        .results
        .iter()
        .filter(|i| !i.ok)
        .map(|i| i.seq_number.to_string())
        .collect();
    if lost.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "not completed (the lock was lost; it will be delivered again): seq {}",
            lost.join(", ")
        )
        .into())
    }
}

async fn settle(
    client: &Client,
    out: Output,
    rpc: Rpc,
    a: SettleArgs,
    delay_ms: i64,
    reason: &str,
    description: &str,
) -> Result<(), Failure> {
    let request = SettleRequest {
        queue: a.queue,
        seq_number: a.seq,
        lock_token: a.lock_token,
        delay_ms,
        dead_letter_reason: reason.to_owned(),
        dead_letter_description: description.to_owned(),
    };
    let r: OkResponse = client.call(rpc, &request).await?;
    if out == Output::Json {
        return output::json(&r);
    }
    let seq = a.seq;
    let text = match rpc {
        Rpc::Complete => format!("completed seq {seq}"),
        Rpc::Abandon => format!("abandoned seq {seq}"),
        Rpc::Reject => format!("rejected seq {seq} (dead-lettered)"),
        Rpc::Defer => format!("deferred seq {seq}"),
        _ => format!(
            "renewed seq {seq}: locked until {} (epoch ms)",
            r.locked_until_ms
        ),
    };
    output::line(&text)
}

async fn peek(client: &Client, out: Output, a: PeekArgs) -> Result<(), Failure> {
    let request = PeekRequest {
        queue: a.queue,
        from_seq: a.from_seq,
        state: a.state,
        max: a.max,
    };
    let r: MessagesResponse = client.call(Rpc::Peek, &request).await?;
    if out == Output::Json {
        return output::json(&r);
    }
    if a.raw {
        return output::raw_bodies(&r.messages);
    }
    if r.messages.is_empty() {
        eprintln!("no messages");
        return Ok(());
    }
    let reasons = r.messages.iter().any(|m| !m.dead_letter_reason.is_empty());
    let mut headers = vec!["SEQ", "STATE", "DELIVERIES", "GROUP", "ENQUEUED_AT_MS"];
    if reasons {
        headers.push("DLQ_REASON");
    }
    let events = has_events(&r.messages);
    if events {
        headers.push("EVENT");
    }
    headers.push("BODY");
    let rows: Vec<Vec<String>> = r
        .messages
        .iter()
        .map(|m| {
            let mut row = vec![
                m.seq_number.to_string(),
                or_dash(&m.state),
                m.delivery_count.to_string(),
                or_dash(&m.group_id),
                m.enqueued_at_ms.to_string(),
            ];
            if reasons {
                row.push(or_dash(&m.dead_letter_reason));
            }
            if events {
                row.push(event(m));
            }
            row.push(body(m));
            row
        })
        .collect();
    output::table(&headers, &rows)
}

async fn stats(client: &Client, out: Output, queue: String) -> Result<(), Failure> {
    let r: StatsResponse = client.call(Rpc::Stats, &QueueRequest { queue }).await?;
    match out {
        Output::Json => output::json(&r),
        Output::Table => output::pairs(&[
            ("queue", r.queue.clone()),
            ("active", r.active.to_string()),
            ("locked", r.locked.to_string()),
            ("deferred", r.deferred.to_string()),
            ("scheduled", r.scheduled.to_string()),
            ("dead_lettered", r.dead_lettered.to_string()),
            ("total", r.total.to_string()),
            ("oldest_message_age_ms", r.oldest_message_age_ms.to_string()),
        ]),
    }
}

async fn subscribe(client: &Client, out: Output, a: SubscribeArgs) -> Result<(), Failure> {
    let request = SubscribeRequest {
        topic: a.topic,
        name: a.name,
        filter: a.filter.map(|expr| FilterSpec { expr }),
    };
    let r: Empty = client.call(Rpc::Subscribe, &request).await?;
    match out {
        Output::Json => output::json(&r),
        Output::Table => output::line(&format!(
            "subscribed {} to topic {}{}",
            request.name,
            request.topic,
            match &request.filter {
                Some(f) if !f.expr.trim().is_empty() => format!(" with filter {}", f.expr.trim()),
                _ => " (every message)".to_owned(),
            }
        )),
    }
}

async fn subscriptions(client: &Client, out: Output) -> Result<(), Failure> {
    let r: SubscriptionsResponse = client.call(Rpc::ListSubscriptions, &Empty {}).await?;
    if out == Output::Json {
        return output::json(&r);
    }
    if r.subscriptions.is_empty() {
        eprintln!("no subscriptions");
        return Ok(());
    }
    let rows: Vec<Vec<String>> = r
        .subscriptions
        .iter()
        .map(|s| vec![s.topic.clone(), s.name.clone(), or_dash(&s.expr)])
        .collect();
    output::table(&["TOPIC", "NAME", "FILTER"], &rows)
}

async fn test_filter(client: &Client, out: Output, a: TestFilterArgs) -> Result<(), Failure> {
    let message = a.has_sample().then(|| WireMessage {
        subject: a.subject.clone().unwrap_or_default(),
        content_type: a.content_type.clone().unwrap_or_default(),
        properties: a.properties.iter().cloned().collect(),
        ..WireMessage::with_body(a.body.as_deref().unwrap_or_default())
    });
    let request = TestFilterRequest {
        expr: a.expr,
        message,
    };
    let r: TestFilterResponse = client.call(Rpc::TestFilter, &request).await?;
    if out == Output::Json {
        output::json(&r)?;
    } else {
        let mut pairs = vec![("valid", r.valid.to_string())];
        if request.message.is_some() {
            pairs.push(("ran", r.ran.to_string()));
            pairs.push(("matched", r.matched.to_string()));
        }
        if !r.error.is_empty() {
            pairs.push(("error", r.error.clone()));
        }
        output::pairs(&pairs)?;
    }
    // An invalid filter is a refusal, for a script as for a person.
    if r.valid {
        Ok(())
    } else {
        Err("the filter is not valid".into())
    }
}

async fn status(client: &Client, out: Output) -> Result<(), Failure> {
    let r: StatusResponse = client.call(Rpc::Status, &Empty {}).await?;
    match out {
        Output::Json => output::json(&r),
        Output::Table => output::pairs(&[
            ("version", r.version.clone()),
            ("backend", r.backend.clone()),
            ("location", r.location.clone()),
            ("remote", r.remote.to_string()),
            ("schema_version", r.schema_version.clone()),
            ("db_size_bytes", r.db_size_bytes.to_string()),
            ("queues", r.queues.to_string()),
            ("subscriptions", r.subscriptions.to_string()),
            ("ping_ms", r.ping_ms.to_string()),
            ("uptime_ms", r.uptime_ms.to_string()),
            ("auth", r.auth.to_string()),
            ("relay_pending", r.relay_pending.to_string()),
            (
                "relay_oldest_pending_ms",
                r.relay_oldest_pending_ms.to_string(),
            ),
        ]),
    }
}

async fn key_create(client: &Client, out: Output, a: KeyCreateArgs) -> Result<(), Failure> {
    let mut permissions: Vec<String> = Vec::new();
    for p in &a.permission {
        let p = p.as_str().to_owned();
        if !permissions.contains(&p) {
            permissions.push(p);
        }
    }
    let request = CreateKeyRequest {
        id: a.id.unwrap_or_default(),
        name: a.name,
        permissions,
        expires_at_ms: a.expires_at_ms.unwrap_or(0),
    };
    let k: WireKey = client.call(Rpc::CreateKey, &request).await?;
    if out == Output::Json {
        return output::json(&k);
    }
    let mut pairs = vec![
        ("id", k.id.clone()),
        ("name", k.name.clone()),
        ("permissions", k.permissions.join(",")),
        ("expires_at_ms", ms_or_dash(k.expires_at_ms)),
        ("token", k.token.clone()),
    ];
    if !k.sqs_secret_access_key.is_empty() {
        pairs.push(("sqs_secret_access_key", k.sqs_secret_access_key.clone()));
    }
    output::pairs(&pairs)?;
    eprintln!("mqlite: the token is shown only this once; keep it");
    Ok(())
}

async fn key_list(client: &Client, out: Output, a: KeyListArgs) -> Result<(), Failure> {
    let request = ListKeysRequest {
        after_id: a.after_id,
        limit: a.limit,
    };
    let r: ListKeysResponse = client.call(Rpc::ListKeys, &request).await?;
    if out == Output::Json {
        return output::json(&r);
    }
    if r.keys.is_empty() {
        eprintln!("no keys");
        return Ok(());
    }
    let rows: Vec<Vec<String>> = r
        .keys
        .iter()
        .map(|k| {
            vec![
                k.id.clone(),
                k.permissions.join(","),
                k.created_at_ms.to_string(),
                ms_or_dash(k.expires_at_ms),
                ms_or_dash(k.revoked_at_ms),
                k.name.clone(),
            ]
        })
        .collect();
    output::table(
        &[
            "ID",
            "PERMISSIONS",
            "CREATED_AT_MS",
            "EXPIRES_AT_MS",
            "REVOKED_AT_MS",
            "NAME",
        ],
        &rows,
    )?;
    if !r.next_after_id.is_empty() {
        eprintln!("more keys: mqlite key list --after-id {}", r.next_after_id);
    }
    Ok(())
}

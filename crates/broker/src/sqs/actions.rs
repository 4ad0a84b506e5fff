//! The SQS actions over the engine.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Map, Value, json};

use mqlite::{
    LockRef, LockToken, OrderingMode, OutMessage, Permission, PurgeOptions, QueueConfig, QueueKind,
    ReceiveMode, ReceiveOptions, RedriveOptions, SendOptions, SeqNumber,
};

use super::attributes::{self, Attribute};
use super::{ACCOUNT, Ctx, REGION, SqsError};

type Input = Map<String, Value>;

/// The most entries in one batch, and messages in one receive (SQS's bound).
const MAX_BATCH: usize = 10;

/// The longest long-poll (SQS's bound).
const MAX_WAIT_SECONDS: i64 = 20;

/// The longest visibility timeout, and delay (SQS's bounds).
const MAX_VISIBILITY_SECONDS: i64 = 43_200;
const MAX_DELAY_SECONDS: i64 = 900;

/// How long a message of a queue made over SQS is kept by default (SQS's four days),
/// and the bounds of `MessageRetentionPeriod`.
const DEFAULT_RETENTION_SECONDS: i64 = 345_600;
const RETENTION_SECONDS: std::ops::RangeInclusive<i64> = 60..=1_209_600;

/// SQS's deduplication window on FIFO queues.
const FIFO_DEDUP_WINDOW: Duration = Duration::from_secs(300);

/// Deliveries before dead-lettering when a queue has no redrive policy: SQS redelivers
/// such a message until its retention ends.
const UNBOUNDED_DELIVERIES: i64 = 1_000_000_000;

/// The actions served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Action {
    CreateQueue,
    GetQueueUrl,
    ListQueues,
    DeleteQueue,
    GetQueueAttributes,
    SetQueueAttributes,
    SendMessage,
    SendMessageBatch,
    ReceiveMessage,
    DeleteMessage,
    DeleteMessageBatch,
    ChangeMessageVisibility,
    ChangeMessageVisibilityBatch,
    PurgeQueue,
    ListDeadLetterSourceQueues,
    StartMessageMoveTask,
}

/// SQS actions this broker refuses by name, with the reason.
const REFUSED: &[(&str, &str)] = &[
    (
        "ListMessageMoveTasks",
        "StartMessageMoveTask moves every message before it answers: there is no task \
         left to list",
    ),
    (
        "CancelMessageMoveTask",
        "StartMessageMoveTask moves every message before it answers: there is no task \
         left to cancel",
    ),
    ("TagQueue", "queue tags are not served"),
    ("UntagQueue", "queue tags are not served"),
    ("ListQueueTags", "queue tags are not served"),
    (
        "AddPermission",
        "SQS permissions are not served: use mqlite's access keys",
    ),
    (
        "RemovePermission",
        "SQS permissions are not served: use mqlite's access keys",
    ),
];

impl Action {
    pub(super) fn parse(name: &str) -> Result<Self, SqsError> {
        use Action::*;
        Ok(match name {
            "CreateQueue" => CreateQueue,
            "GetQueueUrl" => GetQueueUrl,
            "ListQueues" => ListQueues,
            "DeleteQueue" => DeleteQueue,
            "GetQueueAttributes" => GetQueueAttributes,
            "SetQueueAttributes" => SetQueueAttributes,
            "SendMessage" => SendMessage,
            "SendMessageBatch" => SendMessageBatch,
            "ReceiveMessage" => ReceiveMessage,
            "DeleteMessage" => DeleteMessage,
            "DeleteMessageBatch" => DeleteMessageBatch,
            "ChangeMessageVisibility" => ChangeMessageVisibility,
            "ChangeMessageVisibilityBatch" => ChangeMessageVisibilityBatch,
            "PurgeQueue" => PurgeQueue,
            "ListDeadLetterSourceQueues" => ListDeadLetterSourceQueues,
            "StartMessageMoveTask" => StartMessageMoveTask,
            other => {
                return Err(match REFUSED.iter().find(|(n, _)| *n == other) {
                    Some((_, why)) => SqsError::unsupported(*why),
                    None => SqsError::unknown_operation(format!(
                        "AmazonSQS.{other} is not an SQS action this broker knows"
                    )),
                });
            }
        })
    }

    /// The mqlite permission an access key needs for it.
    pub(super) fn needs(self) -> Permission {
        use Action::*;
        match self {
            SendMessage | SendMessageBatch => Permission::Send,
            ReceiveMessage
            | DeleteMessage
            | DeleteMessageBatch
            | ChangeMessageVisibility
            | ChangeMessageVisibilityBatch
            | GetQueueUrl
            | GetQueueAttributes
            | ListDeadLetterSourceQueues => Permission::Listen,
            CreateQueue | ListQueues | DeleteQueue | SetQueueAttributes | PurgeQueue
            | StartMessageMoveTask => Permission::Manage,
        }
    }
}

pub(super) async fn run(ctx: &Ctx<'_>, action: Action, input: &Input) -> Result<Value, SqsError> {
    use Action::*;
    match action {
        CreateQueue => create_queue(ctx, input).await,
        GetQueueUrl => get_queue_url(ctx, input).await,
        ListQueues => list_queues(ctx, input).await,
        DeleteQueue => {
            let queue = queue_of(input)?;
            if ctx.engine.delete_queue(&queue).await? {
                Ok(json!({}))
            } else {
                Err(SqsError::no_queue())
            }
        }
        ListDeadLetterSourceQueues => list_dead_letter_sources(ctx, input).await,
        StartMessageMoveTask => move_messages(ctx, input).await,
        PurgeQueue => {
            // At once and in one transaction (SQS takes up to 60 s and refuses a second
            // purge meanwhile; here a second one simply finds less to delete).
            let queue = queue_of(input)?;
            gather(ctx, &queue).await?;
            let every = PurgeOptions {
                every_state: true,
                ..Default::default()
            };
            ctx.engine.purge(&queue, every).await?;
            Ok(json!({}))
        }
        GetQueueAttributes => get_queue_attributes(ctx, input).await,
        SetQueueAttributes => set_queue_attributes(ctx, input).await,
        SendMessage => {
            let queue = queue_of(input)?;
            let config = config_of(ctx, &queue).await?;
            send(ctx, &queue, &config, input, false).await
        }
        SendMessageBatch => send_batch(ctx, input).await,
        ReceiveMessage => receive(ctx, input).await,
        DeleteMessage => {
            let queue = queue_of(input)?;
            let lock = handle_of(input)?;
            ctx.engine.complete(&queue, lock).await?;
            Ok(json!({}))
        }
        DeleteMessageBatch => {
            let queue = queue_of(input)?;
            let mut out = Batch::default();
            for entry in entries(input)? {
                let done = async {
                    ctx.engine.complete(&queue, handle_of(&entry)?).await?;
                    Ok(json!({}))
                };
                out.push(&entry, done.await);
            }
            Ok(out.answer())
        }
        ChangeMessageVisibility => {
            let queue = queue_of(input)?;
            let config = config_of(ctx, &queue).await?;
            change_visibility(ctx, &queue, &config, input).await?;
            Ok(json!({}))
        }
        ChangeMessageVisibilityBatch => {
            let queue = queue_of(input)?;
            let config = config_of(ctx, &queue).await?;
            let mut out = Batch::default();
            for entry in entries(input)? {
                let done = change_visibility(ctx, &queue, &config, &entry).await;
                out.push(&entry, done.map(|()| json!({})));
            }
            Ok(out.answer())
        }
    }
}

// ----- fields ------------------------------------------------------------------------

fn string<'a>(input: &'a Input, field: &str) -> Result<Option<&'a str>, SqsError> {
    match input.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(SqsError::serialization(format!("{field} is a string"))),
    }
}

fn required<'a>(input: &'a Input, field: &str) -> Result<&'a str, SqsError> {
    string(input, field)?
        .filter(|s| !s.is_empty())
        .ok_or_else(|| SqsError::missing(field))
}

/// An integer field within `range`, if given.
fn integer(
    input: &Input,
    field: &str,
    range: std::ops::RangeInclusive<i64>,
    why: &str,
) -> Result<Option<i64>, SqsError> {
    let Some(v) = input.get(field).filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let n = v
        .as_i64()
        .ok_or_else(|| SqsError::serialization(format!("{field} is an integer")))?;
    if range.contains(&n) {
        Ok(Some(n))
    } else {
        Err(SqsError::invalid(format!(
            "Value {n} for parameter {field} is invalid. Reason: {why}"
        )))
    }
}

fn strings(input: &Input, field: &str) -> Result<Vec<String>, SqsError> {
    match input.get(field) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| SqsError::serialization(format!("{field} lists strings")))
            })
            .collect(),
        Some(_) => Err(SqsError::serialization(format!("{field} is a list"))),
    }
}

/// The queue a request names: `QueueUrl`'s last path segment, or a bare queue name.
fn queue_of(input: &Input) -> Result<String, SqsError> {
    let url = required(input, "QueueUrl")?;
    let name = url.trim_end_matches('/').rsplit('/').next().unwrap_or("");
    if name.is_empty() {
        return Err(SqsError::no_queue());
    }
    Ok(name.to_owned())
}

/// A receipt handle: base64 of `<sequence number>:<lock token>`.
fn handle(m: &mqlite::Message) -> String {
    base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", m.seq.0, m.token()))
}

fn handle_of(input: &Input) -> Result<LockRef, SqsError> {
    let text = required(input, "ReceiptHandle")?;
    let invalid = || {
        SqsError::handle_invalid(format!(
            "The input receipt handle \"{text}\" is not a valid receipt handle."
        ))
    };
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|_| invalid())?;
    let decoded = String::from_utf8(decoded).map_err(|_| invalid())?;
    let (seq, token) = decoded.split_once(':').ok_or_else(invalid)?;
    Ok(LockRef {
        seq: SeqNumber(seq.parse().map_err(|_| invalid())?),
        token: LockToken::from_str(token).map_err(|_| invalid())?,
    })
}

async fn config_of(ctx: &Ctx<'_>, queue: &str) -> Result<QueueConfig, SqsError> {
    Ok(lookup(ctx, queue).await?.0)
}

/// A queue's configuration, and the queues whose redrive policy names it (its
/// dead-letter sources).
async fn lookup(ctx: &Ctx<'_>, queue: &str) -> Result<(QueueConfig, Vec<String>), SqsError> {
    let mut config = None;
    let mut sources = Vec::new();
    for q in ctx.engine.list_queues().await? {
        if q.kind == QueueKind::Topic {
            continue;
        }
        if q.config.dead_letter_target.as_deref() == Some(queue) {
            sources.push(q.name.clone());
        }
        if q.name == queue {
            config = Some(q.config);
        }
    }
    Ok((config.ok_or_else(SqsError::no_queue)?, sources))
}

/// A queue's configuration, once the dead letters of its sources have moved into it:
/// the janitor sweep forwards them on every pass, and a reader of a dead-letter queue
/// (receive, attributes, purge, a move) sees them at once.
async fn gather(ctx: &Ctx<'_>, queue: &str) -> Result<QueueConfig, SqsError> {
    let (config, sources) = lookup(ctx, queue).await?;
    gather_from(ctx, queue, &sources).await?;
    Ok(config)
}

/// Moves the dead letters of `sources` (whose target is `queue`, as [`lookup`] found)
/// into `queue`: the forwarding move itself, without looking each source up again.
async fn gather_from(ctx: &Ctx<'_>, queue: &str, sources: &[String]) -> Result<(), SqsError> {
    for source in sources {
        let forward = RedriveOptions {
            target: Some(queue.to_owned()),
            ..Default::default()
        };
        ctx.engine.redrive(source, forward).await?;
    }
    Ok(())
}

/// The ARN of a queue.
fn arn(queue: &str) -> String {
    format!("arn:aws:sqs:{REGION}:{ACCOUNT}:{queue}")
}

/// The queue an ARN of this broker names.
fn queue_of_arn(field: &str, text: &str) -> Result<String, SqsError> {
    let prefix = format!("arn:aws:sqs:{REGION}:{ACCOUNT}:");
    text.strip_prefix(&prefix)
        .filter(|name| !name.is_empty() && !name.contains(':'))
        .map(str::to_owned)
        .ok_or_else(|| {
            SqsError::invalid(format!(
                "Value {text} for parameter {field} is invalid. Reason: a queue ARN of this \
                 broker is {prefix}<name>"
            ))
        })
}

// ----- queues ------------------------------------------------------------------------

/// Whether a queue is an SQS FIFO queue: made over SQS with a `.fifo` name, so group
/// FIFO with a deduplication window.
fn is_fifo(name: &str, config: &QueueConfig) -> bool {
    name.ends_with(".fifo") && config.ordering_mode == OrderingMode::GroupFifo
}

/// SQS's rule for queue names and batch entry ids: 1 to 80 letters, digits, `-` and `_`.
fn sqs_name(text: &str) -> bool {
    (1..=80).contains(&text.len())
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// SQS's queue name rule ([`sqs_name`]), a FIFO queue's ending in `.fifo` (counted in
/// the 80), a standard queue's not.
fn check_queue_name(name: &str, fifo: bool) -> Result<(), SqsError> {
    let base = if fifo {
        name.strip_suffix(".fifo").ok_or_else(|| {
            SqsError::invalid(
                "The name of a FIFO queue can only include alphanumeric characters, \
                 hyphens, or underscores, must end with .fifo suffix and be 1 to 80 in \
                 length.",
            )
        })?
    } else {
        name
    };
    if sqs_name(base) && name.len() <= 80 {
        Ok(())
    } else {
        Err(SqsError::invalid(
            "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in \
             length",
        ))
    }
}

fn attributes_map(input: &Input) -> Result<BTreeMap<String, String>, SqsError> {
    match input.get("Attributes") {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                _ => Err(SqsError::serialization("Attributes maps names to strings")),
            })
            .collect(),
        Some(_) => Err(SqsError::serialization("Attributes is an object")),
    }
}

fn seconds(name: &str, value: &str, range: std::ops::RangeInclusive<i64>) -> Result<i64, SqsError> {
    value
        .parse::<i64>()
        .ok()
        .filter(|n| range.contains(n))
        .ok_or_else(|| {
            SqsError::attribute_value(format!(
                "Invalid value for the parameter {name}: {value:?} is not a whole number of \
                 seconds in {}..={}",
                range.start(),
                range.end()
            ))
        })
}

/// Applies queue attributes to `config`, refusing what mqlite cannot honour.
fn apply(
    ctx: &Ctx<'_>,
    config: &mut QueueConfig,
    fifo: bool,
    attributes: &BTreeMap<String, String>,
) -> Result<(), SqsError> {
    let limit = ctx.engine.options().max_message_bytes;
    let fixed = |name: &str, value: &str, served: &str, why: &str| {
        if value == served {
            Ok(())
        } else {
            Err(SqsError::attribute_value(format!(
                "Invalid value for the parameter {name}: {why}"
            )))
        }
    };
    for (name, value) in attributes {
        match name.as_str() {
            "FifoQueue"
            | "ContentBasedDeduplication"
            | "DeduplicationScope"
            | "FifoThroughputLimit"
                if !fifo =>
            {
                return Err(SqsError::attribute_name(name));
            }
            "FifoQueue" => fixed(
                name,
                value,
                "true",
                "Modifying queue type is not supported.",
            )?,
            // mqlite deduplicates an id-less message by its body's SHA-256 (4.1): on,
            // sends may leave MessageDeduplicationId out; off, each must give one.
            "ContentBasedDeduplication" => match value.as_str() {
                "true" => config.require_message_id = false,
                "false" => config.require_message_id = true,
                _ => {
                    return Err(SqsError::attribute_value(
                        "Invalid value for the parameter ContentBasedDeduplication: true \
                         or false",
                    ));
                }
            },
            "DeduplicationScope" => fixed(
                name,
                value,
                "queue",
                "mqlite deduplicates per queue (messageGroup is not served)",
            )?,
            "FifoThroughputLimit" => fixed(
                name,
                value,
                "perQueue",
                "mqlite has no per-group throughput quotas (perMessageGroupId is not served)",
            )?,
            "VisibilityTimeout" => {
                let n = seconds(name, value, 0..=MAX_VISIBILITY_SECONDS)?;
                if n == 0 {
                    return Err(SqsError::attribute_value(
                        "Invalid value for the parameter VisibilityTimeout: mqlite's lease \
                         is at least 1 second",
                    ));
                }
                config.lock_duration = Duration::from_secs(n as u64);
            }
            "MessageRetentionPeriod" => {
                let n = seconds(name, value, RETENTION_SECONDS)?;
                config.default_ttl = Duration::from_secs(n as u64);
            }
            "DelaySeconds" | "ReceiveMessageWaitTimeSeconds" => {
                if value != "0" {
                    return Err(SqsError::attribute_value(format!(
                        "Invalid value for the parameter {name}: mqlite has no per-queue \
                         default; give it on each SendMessage (DelaySeconds) or \
                         ReceiveMessage (WaitTimeSeconds)"
                    )));
                }
            }
            "MaximumMessageSize" => {
                if value.parse::<usize>().ok() != Some(limit) {
                    return Err(SqsError::attribute_value(format!(
                        "Invalid value for the parameter MaximumMessageSize: this broker's \
                         limit is {limit} bytes for every queue (--max-message-bytes, \
                         MQLITE_MAX_MESSAGE_BYTES)"
                    )));
                }
            }
            "RedrivePolicy" => redrive_policy(config, value)?,
            "RedriveAllowPolicy" => {
                let allow_all = value.is_empty()
                    || serde_json::from_str::<Value>(value).is_ok_and(|v| {
                        v.as_object().is_some_and(|m| {
                            m.len() == 1 && m.get("redrivePermission") == Some(&json!("allowAll"))
                        })
                    });
                if !allow_all {
                    return Err(SqsError::attribute_value(
                        "Invalid value for the parameter RedriveAllowPolicy: mqlite lets \
                         any queue name this one as its dead-letter queue; only \
                         {\"redrivePermission\":\"allowAll\"} is served",
                    ));
                }
            }
            "Policy" | "KmsMasterKeyId" | "KmsDataKeyReusePeriodSeconds" => {
                return Err(SqsError::attribute_value(format!(
                    "Invalid value for the parameter {name}: not served by mqlite"
                )));
            }
            "SqsManagedSseEnabled" => {
                if value != "false" {
                    return Err(SqsError::attribute_value(
                        "Invalid value for the parameter SqsManagedSseEnabled: mqlite does \
                         not encrypt at rest; the value is false",
                    ));
                }
            }
            other => return Err(SqsError::attribute_name(other)),
        }
    }
    Ok(())
}

/// A `RedrivePolicy`: `{"deadLetterTargetArn": <ARN>, "maxReceiveCount": 1..=1000}`
/// makes the queue's dead letters (at that many receives) move to the target; the empty
/// string removes it (SQS then redelivers until the retention period ends).
fn redrive_policy(config: &mut QueueConfig, value: &str) -> Result<(), SqsError> {
    let bad = |why: &str| {
        SqsError::attribute_value(format!(
            "Value {value} for parameter RedrivePolicy is invalid. Reason: {why}"
        ))
    };
    if value.is_empty() {
        config.dead_letter_target = None;
        config.max_delivery_count = UNBOUNDED_DELIVERIES;
        return Ok(());
    }
    let policy: Map<String, Value> =
        serde_json::from_str(value).map_err(|_| bad("it is a JSON object"))?;
    if let Some(other) = policy
        .keys()
        .find(|k| !["deadLetterTargetArn", "maxReceiveCount"].contains(&k.as_str()))
    {
        return Err(bad(&format!("{other} is not a field of a redrive policy")));
    }
    let target = policy
        .get("deadLetterTargetArn")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("deadLetterTargetArn is required"))?;
    let target = queue_of_arn("RedrivePolicy", target)?;
    let count = match policy.get("maxReceiveCount") {
        Some(Value::Number(n)) => n.as_i64(),
        Some(Value::String(s)) => s.parse().ok(),
        _ => None,
    }
    .filter(|n| (1..=1000).contains(n))
    .ok_or_else(|| bad("maxReceiveCount is a whole number from 1 to 1000"))?;
    config.dead_letter_target = Some(target);
    config.max_delivery_count = count;
    Ok(())
}

/// A redrive policy's target exists and is of the source's type (FIFO for FIFO).
async fn check_redrive_target(
    ctx: &Ctx<'_>,
    fifo: bool,
    config: &QueueConfig,
) -> Result<(), SqsError> {
    let Some(target) = config.dead_letter_target.as_deref() else {
        return Ok(());
    };
    let why = match config_of(ctx, target).await {
        Ok(t) if is_fifo(target, &t) == fifo => return Ok(()),
        Ok(_) if fifo => "the dead-letter queue of a FIFO queue must be a FIFO queue",
        Ok(_) => "the dead-letter queue of a standard queue must be a standard queue",
        Err(_) => "Dead letter target does not exist.",
    };
    Err(SqsError::attribute_value(format!(
        "Value for parameter RedrivePolicy is invalid. Reason: {why}"
    )))
}

async fn create_queue(ctx: &Ctx<'_>, input: &Input) -> Result<Value, SqsError> {
    let name = required(input, "QueueName")?;
    let attributes = attributes_map(input)?;
    let fifo = attributes.get("FifoQueue").is_some_and(|v| v == "true");
    check_queue_name(name, fifo)?;
    if input
        .get("tags")
        .is_some_and(|t| t.as_object().is_some_and(|m| !m.is_empty()))
    {
        return Err(SqsError::invalid("queue tags are not served"));
    }
    let mut config = QueueConfig {
        max_delivery_count: UNBOUNDED_DELIVERIES,
        default_ttl: Duration::from_secs(DEFAULT_RETENTION_SECONDS as u64),
        dead_letter_on_expire: false,
        ..Default::default()
    };
    if fifo {
        // A FIFO queue: order per message group, one group's messages in flight one at
        // a time, and SQS's five-minute deduplication window.
        config.ordering_mode = OrderingMode::GroupFifo;
        config.dedup_window = FIFO_DEDUP_WINDOW;
        config.require_message_id = true;
    }
    apply(ctx, &mut config, fifo, &attributes)?;
    check_redrive_target(ctx, fifo, &config).await?;
    // An existing queue is answered when its attributes are the ones asked for (the
    // engine's create would update them).
    match config_of(ctx, name).await {
        Ok(existing) if existing == config => {}
        Ok(_) => {
            return Err(SqsError::name_exists(
                "A queue already exists with the same name and a different value for an \
                 attribute",
            ));
        }
        Err(_) => match ctx.engine.create_queue(name, config).await {
            Ok(()) => {}
            Err(mqlite::Error::NameConflict { .. }) => {
                return Err(SqsError::name_exists(format!(
                    "{name} is the name of a topic"
                )));
            }
            Err(e) => return Err(e.into()),
        },
    }
    Ok(json!({ "QueueUrl": ctx.queue_url(name) }))
}

async fn get_queue_url(ctx: &Ctx<'_>, input: &Input) -> Result<Value, SqsError> {
    let name = required(input, "QueueName")?;
    config_of(ctx, name).await?;
    Ok(json!({ "QueueUrl": ctx.queue_url(name) }))
}

async fn list_queues(ctx: &Ctx<'_>, input: &Input) -> Result<Value, SqsError> {
    let prefix = string(input, "QueueNamePrefix")?.unwrap_or("");
    let names: Vec<String> = ctx
        .engine
        .list_queues()
        .await?
        .into_iter()
        .filter(|q| q.kind != QueueKind::Topic && q.name.starts_with(prefix))
        .map(|q| q.name)
        .collect();
    url_page(ctx, input, "QueueUrls", names)
}

/// A page of queue URLs under `key`, as SQS's list actions answer: the names after
/// `NextToken`, in order, at most `MaxResults` (1 to 1,000), with a `NextToken` when
/// more remain and `MaxResults` was given.
fn url_page(
    ctx: &Ctx<'_>,
    input: &Input,
    key: &str,
    mut names: Vec<String>,
) -> Result<Value, SqsError> {
    let max = integer(
        input,
        "MaxResults",
        1..=1000,
        "Must be between 1 and 1000, if provided.",
    )?;
    let after = string(input, "NextToken")?.unwrap_or("");
    names.retain(|n| n.as_str() > after);
    names.sort();
    let limit = max.unwrap_or(1000) as usize;
    let more = names.len() > limit;
    names.truncate(limit);
    let mut out = Map::new();
    out.insert(
        key.to_owned(),
        json!(names.iter().map(|n| ctx.queue_url(n)).collect::<Vec<_>>()),
    );
    if more && max.is_some() {
        out.insert("NextToken".into(), json!(names.last()));
    }
    Ok(Value::Object(out))
}

async fn get_queue_attributes(ctx: &Ctx<'_>, input: &Input) -> Result<Value, SqsError> {
    let queue = queue_of(input)?;
    let config = gather(ctx, &queue).await?;
    let stats = ctx.engine.stats(&queue).await?;
    let mut all: Vec<(&str, String)> = vec![
        ("ApproximateNumberOfMessages", stats.active.to_string()),
        (
            "ApproximateNumberOfMessagesNotVisible",
            (stats.locked + stats.deferred).to_string(),
        ),
        (
            "ApproximateNumberOfMessagesDelayed",
            stats.scheduled.to_string(),
        ),
        (
            "VisibilityTimeout",
            config.lock_duration.as_secs().to_string(),
        ),
        (
            "MessageRetentionPeriod",
            config.default_ttl.as_secs().to_string(),
        ),
        ("DelaySeconds", "0".into()),
        ("ReceiveMessageWaitTimeSeconds", "0".into()),
        (
            "MaximumMessageSize",
            ctx.engine.options().max_message_bytes.to_string(),
        ),
        ("QueueArn", arn(&queue)),
        ("SqsManagedSseEnabled", "false".into()),
    ];
    if let Some(target) = &config.dead_letter_target {
        let policy = json!({
            "deadLetterTargetArn": arn(target),
            "maxReceiveCount": config.max_delivery_count,
        });
        all.push(("RedrivePolicy", policy.to_string()));
    }
    if is_fifo(&queue, &config) {
        all.extend([
            ("FifoQueue", "true".to_owned()),
            (
                "ContentBasedDeduplication",
                (!config.require_message_id).to_string(),
            ),
            ("DeduplicationScope", "queue".to_owned()),
            ("FifoThroughputLimit", "perQueue".to_owned()),
        ]);
    }
    let names = strings(input, "AttributeNames")?;
    let mut out = Map::new();
    for name in &names {
        if name == "All" {
            out.extend(all.iter().map(|(n, v)| ((*n).to_owned(), json!(v))));
            continue;
        }
        match all.iter().find(|(n, _)| n == name) {
            Some((n, v)) => {
                out.insert((*n).to_owned(), json!(v));
            }
            None if [
                "CreatedTimestamp",
                "LastModifiedTimestamp",
                "Policy",
                "RedrivePolicy",
                "RedriveAllowPolicy",
                "KmsMasterKeyId",
                "KmsDataKeyReusePeriodSeconds",
            ]
            .contains(&name.as_str()) => {}
            None => return Err(SqsError::attribute_name(name)),
        }
    }
    Ok(if out.is_empty() {
        json!({})
    } else {
        json!({ "Attributes": out })
    })
}

async fn set_queue_attributes(ctx: &Ctx<'_>, input: &Input) -> Result<Value, SqsError> {
    let queue = queue_of(input)?;
    let mut config = config_of(ctx, &queue).await?;
    if !input.contains_key("Attributes") {
        return Err(SqsError::missing("Attributes"));
    }
    let fifo = is_fifo(&queue, &config);
    apply(ctx, &mut config, fifo, &attributes_map(input)?)?;
    check_redrive_target(ctx, fifo, &config).await?;
    ctx.engine.update_queue(&queue, config).await?;
    Ok(json!({}))
}

// ----- dead-letter queues ------------------------------------------------------------

/// The queues whose redrive policy names this one, by name, a page at a time.
async fn list_dead_letter_sources(ctx: &Ctx<'_>, input: &Input) -> Result<Value, SqsError> {
    let queue = queue_of(input)?;
    let (_, names) = lookup(ctx, &queue).await?;
    url_page(ctx, input, "queueUrls", names)
}

/// How many messages one round of a move takes from the dead-letter queue.
const MOVE_ROUND: u32 = 100;

/// StartMessageMoveTask: every message of a dead-letter queue goes to `DestinationArn`,
/// or back to its one source queue, before the answer. Each round leases up to
/// [`MOVE_ROUND`] messages, dead-letters them in the dead-letter queue and redrives
/// exactly those to the destination in one store transaction, so a message keeps its
/// body, attributes and group, and a move cut off midway is finished by the next one
/// (which first redrives the dead-letter queue's own dead letters).
async fn move_messages(ctx: &Ctx<'_>, input: &Input) -> Result<Value, SqsError> {
    let source = queue_of_arn("SourceArn", required(input, "SourceArn")?)?;
    if input
        .get("MaxNumberOfMessagesPerSecond")
        .is_some_and(|v| !v.is_null())
    {
        return Err(SqsError::invalid(
            "MaxNumberOfMessagesPerSecond is not served: the move runs at once",
        ));
    }
    let (config, sources) = lookup(ctx, &source).await?;
    let destination = match string(input, "DestinationArn")? {
        Some(arn) => queue_of_arn("DestinationArn", arn)?,
        None => match sources.as_slice() {
            [one] => one.clone(),
            [] => {
                return Err(SqsError::invalid(format!(
                    "Value {} for parameter SourceArn is invalid. Reason: {source} is not \
                     the dead-letter queue of any queue: give DestinationArn",
                    arn(&source)
                )));
            }
            several => {
                return Err(SqsError::invalid(format!(
                    "Value {} for parameter SourceArn is invalid. Reason: {source} is the \
                     dead-letter queue of {}: give DestinationArn (mqlite does not keep \
                     each message's source queue)",
                    arn(&source),
                    several.join(", ")
                )));
            }
        },
    };
    if destination == source {
        return Err(SqsError::invalid(
            "Value for parameter DestinationArn is invalid. Reason: it is the source queue",
        ));
    }
    let target = config_of(ctx, &destination).await?;
    if is_fifo(&destination, &target) != is_fifo(&source, &config) {
        return Err(SqsError::invalid(
            "Value for parameter DestinationArn is invalid. Reason: the source and the \
             destination are not of one type (FIFO or standard)",
        ));
    }
    gather_from(ctx, &source, &sources).await?;
    let to = |seqs: Vec<SeqNumber>| RedriveOptions {
        target: Some(destination.clone()),
        seq_numbers: Some(seqs),
        ..Default::default()
    };
    // The dead-letter queue's own dead letters: a move cut off midway.
    let leftover = RedriveOptions {
        target: Some(destination.clone()),
        ..Default::default()
    };
    let mut moved = ctx.engine.redrive(&source, leftover).await?;
    loop {
        let options = ReceiveOptions {
            max_messages: MOVE_ROUND,
            wait: Duration::ZERO,
            mode: ReceiveMode::PeekLock,
            attempt_id: None,
        };
        let round = ctx.engine.receive(&source, options).await?;
        if round.is_empty() {
            break;
        }
        let mut seqs = Vec::with_capacity(round.len());
        for m in &round {
            match ctx.engine.reject(&source, m, "MovedBySqs", "").await {
                Ok(()) => seqs.push(m.seq),
                // Its lease lapsed meanwhile: the next round takes it again.
                Err(mqlite::Error::LockLost { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        moved += ctx.engine.redrive(&source, to(seqs)).await?;
    }
    let handle = base64::engine::general_purpose::STANDARD.encode(
        json!({ "source": arn(&source), "destination": arn(&destination), "moved": moved })
            .to_string(),
    );
    Ok(json!({ "TaskHandle": handle }))
}

// ----- messages ----------------------------------------------------------------------

/// SQS's body characters: tab, newline, carriage return, and Unicode from U+0020 but
/// the surrogates and U+FFFE/U+FFFF.
fn check_body(body: &str) -> Result<(), SqsError> {
    let bad = body.chars().find(|&c| {
        !(matches!(c, '\t' | '\n' | '\r')
            || ('\u{20}'..='\u{D7FF}').contains(&c)
            || ('\u{E000}'..='\u{FFFD}').contains(&c)
            || c >= '\u{10000}')
    });
    match bad {
        Some(c) => Err(SqsError::message_contents(format!(
            "Invalid characters found. Valid unicode characters are #x9 | #xA | #xD | \
             #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF (found U+{:04X})",
            c as u32
        ))),
        None => Ok(()),
    }
}

/// A FIFO group or deduplication id: 1 to 128 letters, digits and ASCII punctuation.
fn check_fifo_id(field: &str, id: &str) -> Result<(), SqsError> {
    let ok = (1..=128).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_graphic());
    if ok {
        Ok(())
    } else {
        Err(SqsError::invalid(format!(
            "Value {id} for parameter {field} is invalid. Reason: it is 1 to 128 \
             alphanumeric or punctuation characters."
        )))
    }
}

/// Sends one message (`SendMessage`, or one entry of a batch).
async fn send(
    ctx: &Ctx<'_>,
    queue: &str,
    config: &QueueConfig,
    input: &Input,
    in_batch: bool,
) -> Result<Value, SqsError> {
    let body = required(input, "MessageBody")?;
    check_body(body)?;
    let fifo = is_fifo(queue, config);
    let group = string(input, "MessageGroupId")?;
    let dedup = string(input, "MessageDeduplicationId")?;
    if fifo {
        let group = group.filter(|g| !g.is_empty()).ok_or_else(|| {
            if in_batch {
                SqsError::invalid("The request must contain the parameter MessageGroupId.")
            } else {
                SqsError::missing("MessageGroupId")
            }
        })?;
        check_fifo_id("MessageGroupId", group)?;
        match dedup {
            Some(dedup) => check_fifo_id("MessageDeduplicationId", dedup)?,
            // ContentBasedDeduplication: the body's SHA-256 names the message (4.1).
            None if !config.require_message_id => {}
            None => {
                return Err(SqsError::invalid(
                    "The queue should either have ContentBasedDeduplication enabled or \
                     MessageDeduplicationId provided explicitly",
                ));
            }
        }
    } else {
        for (field, given) in [("MessageGroupId", group), ("MessageDeduplicationId", dedup)] {
            if given.is_some() {
                return Err(SqsError::invalid(format!(
                    "Value for parameter {field} is invalid. Reason: The request include \
                     parameter that is not valid for this queue type (a standard queue)"
                )));
            }
        }
    }
    if input
        .get("MessageSystemAttributes")
        .is_some_and(|v| !v.is_null())
    {
        return Err(SqsError::invalid(
            "MessageSystemAttributes (AWSTraceHeader) are not served",
        ));
    }
    let delay = integer(
        input,
        "DelaySeconds",
        0..=MAX_DELAY_SECONDS,
        "Must be between 0 and 900, if provided.",
    )?
    .unwrap_or(0);
    if fifo && delay > 0 {
        return Err(SqsError::invalid(format!(
            "Value {delay} for parameter DelaySeconds is invalid. Reason: The request \
             include parameter that is not valid for this queue type."
        )));
    }
    let attributes = attributes::parse(input.get("MessageAttributes"))?;
    let limit = ctx.engine.options().max_message_bytes;
    if body.len() + attributes::size(&attributes) > limit {
        return Err(SqsError::invalid(format!(
            "One or more parameters are invalid. Reason: Message must be shorter than \
             {limit} bytes."
        )));
    }
    let mut message = OutMessage::new(body.as_bytes().to_vec());
    message.properties = attributes::to_properties(&attributes);
    if fifo {
        // The deduplication id is the producer's message id: the queue's window
        // collapses a repeat into the first one's sequence number (4.1).
        message.group_id = group.map(str::to_owned);
        message.message_id = dedup.map(str::to_owned);
    }
    let options = SendOptions {
        scheduled_at_ms: (delay > 0).then(|| ctx.engine.clock().now_ms() + delay * 1000),
        ttl: (config.default_ttl > Duration::ZERO).then_some(config.default_ttl),
    };
    let seq = ctx.engine.send_with(queue, message, options).await?;
    let mut out = json!({
        "MessageId": seq.0.to_string(),
        "MD5OfMessageBody": attributes::md5_of_body(body.as_bytes()),
    });
    if let Some(md5) = attributes::md5_of_attributes(&attributes) {
        out["MD5OfMessageAttributes"] = json!(md5);
    }
    if fifo {
        out["SequenceNumber"] = json!(seq.0.to_string());
    }
    if in_batch {
        out["Id"] = input.get("Id").cloned().unwrap_or(Value::Null);
    }
    Ok(out)
}

async fn send_batch(ctx: &Ctx<'_>, input: &Input) -> Result<Value, SqsError> {
    let queue = queue_of(input)?;
    let config = config_of(ctx, &queue).await?;
    // The whole batch's size is bounded as one message's is.
    let limit = ctx.engine.options().max_message_bytes;
    let entries = entries(input)?;
    let total: usize = entries
        .iter()
        .map(|e| {
            e.get("MessageBody")
                .and_then(Value::as_str)
                .map_or(0, str::len)
                + attributes::parse(e.get("MessageAttributes")).map_or(0, |a| attributes::size(&a))
        })
        .sum();
    if total > limit {
        return Err(SqsError::batch(
            "BatchRequestTooLong",
            "AWS.SimpleQueueService.BatchRequestTooLong",
            format!(
                "Batch requests cannot be longer than {limit} bytes. You have sent {total} bytes."
            ),
        ));
    }
    let mut out = Batch::default();
    for entry in entries {
        let done = send(ctx, &queue, &config, &entry, true).await;
        out.push(&entry, done);
    }
    Ok(out.answer())
}

/// A batch's entries, checked: 1 to 10, ids of 1-80 letters, digits, `-` and `_`,
/// distinct.
fn entries(input: &Input) -> Result<Vec<Input>, SqsError> {
    let Some(list) = input.get("Entries").filter(|v| !v.is_null()) else {
        return Err(SqsError::missing("Entries"));
    };
    let list = list
        .as_array()
        .ok_or_else(|| SqsError::serialization("Entries is a list"))?;
    if list.is_empty() {
        return Err(SqsError::batch(
            "EmptyBatchRequest",
            "AWS.SimpleQueueService.EmptyBatchRequest",
            "There should be at least one entry in the request.".into(),
        ));
    }
    if list.len() > MAX_BATCH {
        return Err(SqsError::batch(
            "TooManyEntriesInBatchRequest",
            "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
            format!(
                "Maximum number of entries per request are {MAX_BATCH}. You have sent {}.",
                list.len()
            ),
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for entry in list {
        let entry = entry
            .as_object()
            .ok_or_else(|| SqsError::serialization("each entry is an object"))?;
        let id = required(entry, "Id")?;
        if !sqs_name(id) {
            return Err(SqsError::batch(
                "InvalidBatchEntryId",
                "AWS.SimpleQueueService.InvalidBatchEntryId",
                "A batch entry id can only contain alphanumeric characters, hyphens and \
                 underscores. It can be at most 80 letters long."
                    .into(),
            ));
        }
        if !seen.insert(id.to_owned()) {
            return Err(SqsError::batch(
                "BatchEntryIdsNotDistinct",
                "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
                format!("Id {id} repeated."),
            ));
        }
        out.push(entry.clone());
    }
    Ok(out)
}

/// A batch's answer: `Successful` and `Failed` entries, each failure with its code (a
/// batch fails as a whole only for its shape, see [`entries`]).
#[derive(Default)]
struct Batch {
    successful: Vec<Value>,
    failed: Vec<Value>,
}

impl Batch {
    fn push(&mut self, entry: &Input, done: Result<Value, SqsError>) {
        let id = entry.get("Id").and_then(Value::as_str).unwrap_or("");
        match done {
            Ok(mut answer) => {
                answer["Id"] = json!(id);
                self.successful.push(answer);
            }
            Err(e) => self.failed.push(e.failed_entry(id)),
        }
    }

    fn answer(self) -> Value {
        json!({ "Successful": self.successful, "Failed": self.failed })
    }
}

async fn receive(ctx: &Ctx<'_>, input: &Input) -> Result<Value, SqsError> {
    let queue = queue_of(input)?;
    let config = gather(ctx, &queue).await?;
    let max = integer(
        input,
        "MaxNumberOfMessages",
        1..=MAX_BATCH as i64,
        "Must be between 1 and 10, if provided.",
    )?
    .unwrap_or(1);
    let wait = integer(
        input,
        "WaitTimeSeconds",
        0..=MAX_WAIT_SECONDS,
        "Must be >= 0 and <= 20, if provided.",
    )?
    .unwrap_or(0);
    if let Some(v) = integer(
        input,
        "VisibilityTimeout",
        0..=MAX_VISIBILITY_SECONDS,
        "Must be >= 0 and <= 43200, if provided.",
    )? && v as u64 != config.lock_duration.as_secs()
    {
        return Err(SqsError::invalid(format!(
            "Value {v} for parameter VisibilityTimeout is invalid. Reason: mqlite leases \
             for the queue's VisibilityTimeout ({} s); set it on the queue",
            config.lock_duration.as_secs()
        )));
    }
    let mut system = strings(input, "AttributeNames")?;
    system.extend(strings(input, "MessageSystemAttributeNames")?);
    let wanted = strings(input, "MessageAttributeNames")?;
    let options = ReceiveOptions {
        max_messages: max as u32,
        wait: Duration::from_secs(wait as u64),
        mode: ReceiveMode::PeekLock,
        attempt_id: string(input, "ReceiveRequestAttemptId")?.map(str::to_owned),
    };
    let mut draining = ctx.draining.clone();
    if *draining.borrow() {
        return Ok(json!({}));
    }
    // A shutdown wakes a parked long-poll: it answers with none.
    let messages = tokio::select! {
        got = ctx.engine.receive(&queue, options) => match got {
            Err(mqlite::Error::Closed) => Vec::new(),
            other => other?,
        },
        _ = draining.wait_for(|d| *d) => Vec::new(),
    };
    if messages.is_empty() {
        return Ok(json!({}));
    }
    let answered: Vec<Value> = messages
        .iter()
        .map(|m| message_json(m, &system, &wanted))
        .collect();
    Ok(json!({ "Messages": answered }))
}

fn message_json(m: &mqlite::Message, system: &[String], wanted: &[String]) -> Value {
    let (body, base64_body) = match std::str::from_utf8(&m.content.body) {
        Ok(text) => (text.to_owned(), false),
        // A body sent through mqlite's own API need not be text: it is delivered
        // base64-encoded, with an attribute saying so.
        Err(_) => (
            base64::engine::general_purpose::STANDARD.encode(&m.content.body),
            true,
        ),
    };
    let mut out = json!({
        "MessageId": m.seq.0.to_string(),
        "ReceiptHandle": handle(m),
        "MD5OfBody": attributes::md5_of_body(body.as_bytes()),
        "Body": body,
    });
    let all = |name: &str| system.iter().any(|s| s == "All" || s == name);
    let mut sys = Map::new();
    if all("ApproximateReceiveCount") {
        sys.insert(
            "ApproximateReceiveCount".into(),
            json!(m.delivery_count.to_string()),
        );
    }
    if all("SentTimestamp") {
        sys.insert("SentTimestamp".into(), json!(m.enqueued_at_ms.to_string()));
    }
    if let Some(group) = m.content.group_id.as_deref() {
        if all("MessageGroupId") {
            sys.insert("MessageGroupId".into(), json!(group));
        }
        if all("MessageDeduplicationId") {
            // A message deduplicated by content is named by its body's SHA-256, as SQS
            // answers it.
            let id = m
                .content
                .message_id
                .clone()
                .unwrap_or_else(|| mqlite::digest::sha256_hex(&m.content.body));
            sys.insert("MessageDeduplicationId".into(), json!(id));
        }
        if all("SequenceNumber") {
            sys.insert("SequenceNumber".into(), json!(m.seq.0.to_string()));
        }
    }
    if !sys.is_empty() {
        out["Attributes"] = Value::Object(sys);
    }
    let mut attributes = attributes::from_properties(&m.content.properties);
    if base64_body {
        attributes.insert(
            "mqlite.body-encoding".into(),
            Attribute {
                data_type: "String".into(),
                value: b"base64".to_vec(),
            },
        );
    }
    let selected = attributes::select(attributes, wanted);
    if let Some(md5) = attributes::md5_of_attributes(&selected) {
        out["MD5OfMessageAttributes"] = json!(md5);
        out["MessageAttributes"] = attributes::to_json(&selected);
    }
    out
}

/// ChangeMessageVisibility: 0 gives the message back now (Abandon); the queue's
/// VisibilityTimeout renews the lease (Renew); other values are refused, since a lease
/// is renewed for the queue's timeout.
async fn change_visibility(
    ctx: &Ctx<'_>,
    queue: &str,
    config: &QueueConfig,
    input: &Input,
) -> Result<(), SqsError> {
    let lock = handle_of(input)?;
    let Some(v) = input.get("VisibilityTimeout").filter(|v| !v.is_null()) else {
        return Err(SqsError::missing("VisibilityTimeout"));
    };
    let v = v
        .as_i64()
        .ok_or_else(|| SqsError::serialization("VisibilityTimeout is an integer"))?;
    if v == 0 {
        ctx.engine.abandon(queue, lock, Duration::ZERO).await?;
    } else if v as u64 == config.lock_duration.as_secs() {
        ctx.engine.renew(queue, lock).await?;
    } else {
        return Err(SqsError::invalid(format!(
            "Value {v} for parameter VisibilityTimeout is invalid. Reason: mqlite gives a \
             message back (0) or renews its lease for the queue's VisibilityTimeout ({} s)",
            config.lock_duration.as_secs()
        )));
    }
    Ok(())
}

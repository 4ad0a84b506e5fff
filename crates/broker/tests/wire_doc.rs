//! docs/wire.md is generated here from the wire types, so it cannot drift from them:
//! every RPC's path, permission, request and answer fields (names, JSON types,
//! defaults and the field's own doc comment, read from `crates/mqlite/src/remote/wire/`), its notes and a
//! curl line. The examples are not only shown: they run, in order, against the
//! broker's handlers over a memory store, and each answer must decode into the type the
//! page names for it, with no field the type lacks. Every error code the broker's
//! source can answer must be in the page's table.
//!
//! After changing a wire type or a note: `MQLITE_BLESS=1 cargo test -p mqlite-broker
//! --test integration -- wire_doc::` rewrites the page; without it, a stale page fails.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde_json::Value;

use mqlite_broker::wire::*;
use mqlite_broker::{AuthConfig, BrokerConfig, Local, Rpc};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// One field of a wire struct, as its source declares it.
#[derive(Debug, Clone)]
struct Field {
    name: String,
    ty: String,
    doc: String,
}

/// Every `pub struct` of the wire sources with its doc and fields.
fn wire_structs() -> BTreeMap<String, (String, Vec<Field>)> {
    let dir = root().join("crates/mqlite/src/remote/wire");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("src/wire")
        .map(|e| e.expect("an entry").path())
        .collect();
    files.sort();
    let mut out = BTreeMap::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("a wire source");
        let mut doc: Vec<String> = Vec::new();
        let mut current: Option<(String, String, Vec<Field>)> = None;
        for line in text.lines() {
            let t = line.trim();
            if let Some(d) = t.strip_prefix("///") {
                doc.push(d.trim().to_owned());
                continue;
            }
            if t.starts_with("#[") {
                assert!(
                    !t.contains("rename") && !t.contains("flatten") && !t.contains("tag"),
                    "{}: the generator reads field names from the source; teach it {t}",
                    file.display()
                );
                continue;
            }
            if let Some(rest) = t.strip_prefix("pub struct ") {
                let name = rest
                    .split([' ', '{', '('])
                    .next()
                    .expect("a name")
                    .to_owned();
                let fields = Vec::new();
                if rest.trim_end().ends_with("{}") {
                    out.insert(name, (doc.join(" "), fields));
                } else {
                    current = Some((name, doc.join(" "), fields));
                }
                doc.clear();
                continue;
            }
            if let Some((name, sdoc, fields)) = current.as_mut() {
                if t == "}" {
                    out.insert(name.clone(), (sdoc.clone(), std::mem::take(fields)));
                    current = None;
                } else if let Some(rest) = t.strip_prefix("pub ") {
                    let (field, ty) = rest.split_once(':').expect("name: type");
                    fields.push(Field {
                        name: field.trim().to_owned(),
                        ty: ty.trim().trim_end_matches(',').to_owned(),
                        doc: doc.join(" "),
                    });
                }
            }
            doc.clear();
        }
    }
    out
}

/// A Rust field type as JSON: its type, and the default an omitted field takes.
fn json_type(ty: &str) -> (String, String) {
    let inner = |prefix: &str| ty.strip_prefix(prefix).and_then(|r| r.strip_suffix('>'));
    if let Some(t) = inner("Option<") {
        return (json_type(t).0, "unset".into());
    }
    if let Some(t) = inner("Vec<") {
        return (format!("array of {}", json_type(t).0), "`[]`".into());
    }
    match ty {
        "String" => ("string".into(), "`\"\"`".into()),
        "i64" | "u64" | "u32" | "usize" => ("integer".into(), "0".into()),
        "bool" => ("boolean".into(), "false".into()),
        "BTreeMap<String, String>" => ("object of strings".into(), "`{}`".into()),
        other => (
            format!("[{other}](#{})", other.to_lowercase()),
            "none".into(),
        ),
    }
}

/// One RPC's page entry: its types, what to say, and its example (which the story
/// runs).
struct Entry {
    rpc: Rpc,
    request: &'static str,
    answer: &'static str,
    notes: &'static str,
}

/// Checks that `body` parses as `Q` and an answer as `A`, with no field `A` lacks.
fn typed<Q: DeserializeOwned, A: DeserializeOwned + serde::Serialize>(
    body: &str,
    answer: &[u8],
) -> Result<(), String> {
    serde_json::from_str::<Q>(body).map_err(|e| format!("the example does not parse: {e}"))?;
    let raw: Value = serde_json::from_slice(answer).map_err(|e| e.to_string())?;
    let typed: A = serde_json::from_value(raw.clone()).map_err(|e| e.to_string())?;
    let back = serde_json::to_value(typed).map_err(|e| e.to_string())?;
    let keys = |v: &Value| -> BTreeSet<String> {
        v.as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default()
    };
    let extra: Vec<String> = keys(&raw).difference(&keys(&back)).cloned().collect();
    if extra.is_empty() {
        Ok(())
    } else {
        Err(format!("the answer has fields its type lacks: {extra:?}"))
    }
}

macro_rules! entries {
    ($($rpc:ident: $req:ident -> $ans:ident, $notes:expr;)*) => {
        const ENTRIES: &[Entry] = &[$(Entry {
            rpc: Rpc::$rpc,
            request: stringify!($req),
            answer: stringify!($ans),
            notes: $notes,
        }),*];

        fn check_types(rpc: Rpc, body: &str, answer: &[u8]) -> Result<(), String> {
            match rpc {
                $(Rpc::$rpc => typed::<$req, $ans>(body, answer),)*
                #[allow(unreachable_patterns)]
                other => Err(format!("{} has no entry", other.label())),
            }
        }
    };
}

entries! {
    Send: SendRequest -> SendResponse,
        "Sends 1..=1000 messages in one transaction; each body at most the broker's \
         `--max-message-bytes` (1 MiB by default; larger: 413 `message_too_large`). \
         Answers one sequence number per message, in order: a repeat inside the queue's \
         dedup window answers the original's; 0 marks a message whose id was reused \
         with another body (409 `already_exists` when it is the only one). Sent to a \
         topic, the message goes to every subscription whose filter accepts it (0 when \
         none does). A `group_fifo` queue needs `group_id` on every message (400 \
         `group_required`). A missing queue is 404 `not_found`.";
    Schedule: SendRequest -> SendResponse,
        "Send with `scheduled_enqueue_time_ms` required: the messages stay `scheduled`, \
         invisible, until then. Cancel takes one back before it is due.";
    Cancel: CancelRequest -> OkResponse,
        "Deletes a scheduled message before it is due: `ok: false` when the number is not \
         a scheduled message of the queue (already due, or never scheduled).";
    Receive: ReceiveRequest -> MessagesResponse,
        "Claims up to `max_messages` messages under a lease of the queue's lock duration, \
         each with its own `lock_token`. `max_messages` 0 is taken as 1, more than 256 as \
         256; `wait_time_ms` more than 20,000 as 20,000; negatives are 400. With nothing \
         eligible it waits up to `wait_time_ms` for a send (a long-poll) and answers an \
         empty list. `receive_mode: 1` is receive-and-delete (no lease, no token). A \
         retried receive with the same `receive_attempt_id` (within 5 minutes) answers \
         the same messages and tokens without claiming again. The answer stops adding \
         messages before the broker's answer cap (`--max-answer-bytes`).";
    Complete: SettleRequest -> OkResponse,
        "Deletes a received message. Fenced on the token: a lease that expired, a message \
         delivered again under another token, or a token that was never issued is 409 \
         `lock_lost` and changes nothing. Repeating a settlement that succeeded answers \
         success again (idempotent).";
    Abandon: SettleRequest -> OkResponse,
        "Releases a received message for delivery again, after `delay_ms` when given; at \
         the queue's delivery bound it is dead-lettered instead. Fenced as Complete.";
    Reject: SettleRequest -> OkResponse,
        "Dead-letters a received message with `dead_letter_reason` and \
         `dead_letter_description`. Fenced as Complete.";
    Defer: SettleRequest -> OkResponse,
        "Sets a received message aside in the `deferred` state; only ReceiveDeferred by \
         its number brings it back. Fenced as Complete.";
    Renew: SettleRequest -> OkResponse,
        "Extends a live lease by the queue's lock duration from now, never shortening it; \
         answers the new lease end. An expired lease is 409 `lock_lost` (never revived).";
    CompleteBatch: BatchRequest -> BatchResponse,
        "Completes many messages in one transaction: each item is fenced on its own, and \
         a stale item is `ok: false` without failing the others.";
    RenewBatch: BatchRequest -> BatchResponse,
        "Renews many leases in one transaction, item by item as Renew; each answers its \
         new lease end.";
    ReceiveDeferred: ReceiveDeferredRequest -> MessagesResponse,
        "Receives deferred messages by number under a new lease (numbers that are not \
         deferred messages of the queue are left out).";
    Peek: PeekRequest -> MessagesResponse,
        "Reads messages without locking them, in sequence order from `from_seq`, \
         optionally only those in `state` (`active`, `locked`, `deferred`, `scheduled`, \
         `dead_lettered`; another is 400). `max` 0 is taken as 32, more than 1,000 as \
         1,000. Each message carries its `state`.";
    Stats: QueueRequest -> StatsResponse,
        "A queue's counts by state and the age of its oldest message.";
    CreateQueue: CreateQueueRequest -> Empty,
        "Creates a queue, or replaces an existing one's whole configuration (an upsert: \
         options not given take their defaults). `kind` is `queue` (the default) or \
         `subscription` (changes an existing subscription's options); `topic` makes a \
         topic, an extension (the contract's topics come into being with their first \
         subscription). A name held by another kind is 409 `name_conflict`.";
    Subscribe: SubscribeRequest -> Empty,
        "Creates a subscription `name` on `topic` (creating the topic when it does not \
         exist yet), or replaces its filter: one boolean expression over the message \
         ([filters.md](filters.md)); none takes every message. An invalid filter is 400 \
         and stores nothing. A `topic` that names a queue, a `name` held by a queue or a \
         topic, or `topic` equal to `name` is 409 `name_conflict`.";
    ListSubscriptions: Empty -> SubscriptionsResponse,
        "Every subscription with its topic and filter.";
    Unsubscribe: UnsubscribeRequest -> Empty,
        "An extension: deletes a subscription with its queue and messages; 404 when the \
         topic has no such subscription.";
    DeleteQueue: DeleteQueueRequest -> DeleteQueueResponse,
        "An extension: deletes a queue, topic or subscription with every message it \
         holds; `deleted: false` when there was none.";
    TestFilter: TestFilterRequest -> TestFilterResponse,
        "Checks a filter as Subscribe would and, given a sample `message`, evaluates it. \
         Stores nothing. An invalid filter is a 200 with `valid: false` and the reason.";
    ListQueues: Empty -> QueuesResponse,
        "Every queue, topic and subscription with every option CreateQueue takes (the \
         fields beyond the contract's are extensions that other clients ignore).";
    Redrive: RedriveRequest -> RedriveResponse,
        "Moves dead letters back to the queue (or to `target`), oldest first, bounded by \
         `max` (0: all), `older_than_ms` and `rate_per_sec`; `seq_numbers` (an \
         extension, at most 1,000) moves only those.";
    Purge: PurgeRequest -> PurgeResponse,
        "Deletes dead letters, oldest first, bounded by `max` (0: all) and \
         `older_than_ms`.";
    SetQueueStatus: SetQueueStatusRequest -> Empty,
        "An extension: pauses or resumes a queue. `status` is `active`, \
         `send_disabled` (sends are 409 `queue_paused` and store nothing), \
         `receive_disabled` (receives answer no message; a long-poll waits for the \
         resume) or `disabled` (both). Messages and held locks are untouched: they \
         still settle and renew. A subscription takes `active` or `receive_disabled`; \
         a topic none (400). ListQueues shows `status` when it is not `active`.";
    CreateSchedule: CreateScheduleRequest -> WireSchedule,
        "An extension: creates a recurring schedule, or replaces the definition of the \
         one of that `name` (its fire count and creation time stay). Each tick sends \
         `message` to `queue`, once however many brokers and restarts there are, with \
         `message_id` set to `<name>@<tick ms>`. Exactly one of `every_ms` (at least \
         1,000, counted from now) and `cron` (five fields, or six with seconds first; \
         read in `tz`, an IANA zone, UTC by default). `missed`: `fire_once` (default: \
         one message for a window of ticks that passed with nothing running, or while \
         the queue refused sends) or `skip` (none). A missing queue is 404; a bad \
         interval, expression or zone is 400.";
    ListSchedules: Empty -> SchedulesResponse,
        "An extension: every schedule with its next tick (`next_at_ms`), how many \
         messages it fired and the tick of the last.";
    DeleteSchedule: DeleteScheduleRequest -> DeleteQueueResponse,
        "An extension: deletes a schedule (the messages it sent stay); `deleted: false` \
         when there was none. Deleting a queue deletes its schedules.";
    Status: Empty -> StatusResponse,
        "What the broker serves: version, store, size, counts, uptime, whether auth is \
         on, the relay's backlog.";
    CreateKey: CreateKeyRequest -> WireKey,
        "An extension: creates an access key with `permissions` (`send`, `listen`, \
         `manage`); the answer carries its `token`, shown only this once. An `id` given \
         is 32 hexadecimal characters; one in use is 409 `key_conflict`.";
    ListKeys: ListKeysRequest -> ListKeysResponse,
        "An extension: access keys by id, a page at a time (`limit` at most 1,000), never \
         their tokens.";
    RevokeKey: RevokeKeyRequest -> Empty,
        "An extension: revokes an access key at once; 404 when there is no such key.";
    WhoAmI: Empty -> WhoAmIResponse,
        "An extension: who the credential is (`admin`, `key`, or `anyone` with auth off) \
         and what it may do. Any valid credential may ask.";
}

/// The examples in story order: (RPC, request body). `LOCK_TOKEN`, `SEQ` and `KEY_ID`
/// stand for the last receive's token and number and the created key's id; the page
/// shows an RPC's first example.
const STORY: &[(Rpc, &str)] = &[
    (
        Rpc::CreateQueue,
        r#"{"name":"jobs","config":{"max_delivery_count":5,"lock_duration_ms":30000}}"#,
    ),
    (Rpc::ListQueues, "{}"),
    (
        Rpc::Send,
        r#"{"queue":"jobs","messages":[{"body":"aGVsbG8=","subject":"greeting","properties":{"region":"eu"}}]}"#,
    ),
    (
        Rpc::Schedule,
        r#"{"queue":"jobs","messages":[{"body":"bGF0ZXI="}],"scheduled_enqueue_time_ms":4102444800000}"#,
    ),
    (Rpc::Cancel, r#"{"queue":"jobs","seq_number":2}"#),
    (Rpc::Peek, r#"{"queue":"jobs","state":"active","max":10}"#),
    (Rpc::Stats, r#"{"queue":"jobs"}"#),
    (
        Rpc::Receive,
        r#"{"queue":"jobs","max_messages":10,"wait_time_ms":5000}"#,
    ),
    (
        Rpc::Renew,
        r#"{"queue":"jobs","seq_number":SEQ,"lock_token":"LOCK_TOKEN"}"#,
    ),
    (
        Rpc::RenewBatch,
        r#"{"queue":"jobs","messages":[{"seq_number":SEQ,"lock_token":"LOCK_TOKEN"}]}"#,
    ),
    (
        Rpc::Defer,
        r#"{"queue":"jobs","seq_number":SEQ,"lock_token":"LOCK_TOKEN"}"#,
    ),
    (
        Rpc::ReceiveDeferred,
        r#"{"queue":"jobs","seq_numbers":[SEQ]}"#,
    ),
    (
        Rpc::Abandon,
        r#"{"queue":"jobs","seq_number":SEQ,"lock_token":"LOCK_TOKEN","delay_ms":0}"#,
    ),
    (
        Rpc::Receive,
        r#"{"queue":"jobs","max_messages":10,"wait_time_ms":5000}"#,
    ),
    (
        Rpc::Reject,
        r#"{"queue":"jobs","seq_number":SEQ,"lock_token":"LOCK_TOKEN","dead_letter_reason":"bad_input","dead_letter_description":"no customer id"}"#,
    ),
    (Rpc::Redrive, r#"{"queue":"jobs","max":100}"#),
    (
        Rpc::Receive,
        r#"{"queue":"jobs","max_messages":10,"wait_time_ms":5000}"#,
    ),
    (
        Rpc::Complete,
        r#"{"queue":"jobs","seq_number":SEQ,"lock_token":"LOCK_TOKEN"}"#,
    ),
    (
        Rpc::Send,
        r#"{"queue":"jobs","messages":[{"body":"aGVsbG8=","subject":"greeting","properties":{"region":"eu"}}]}"#,
    ),
    (
        Rpc::Receive,
        r#"{"queue":"jobs","max_messages":10,"wait_time_ms":5000}"#,
    ),
    (
        Rpc::CompleteBatch,
        r#"{"queue":"jobs","messages":[{"seq_number":SEQ,"lock_token":"LOCK_TOKEN"}]}"#,
    ),
    (Rpc::Purge, r#"{"queue":"jobs","max":0,"older_than_ms":0}"#),
    (
        Rpc::SetQueueStatus,
        r#"{"name":"jobs","status":"send_disabled"}"#,
    ),
    (Rpc::SetQueueStatus, r#"{"name":"jobs","status":"active"}"#),
    (
        Rpc::CreateSchedule,
        r#"{"name":"nightly-report","queue":"jobs","cron":"0 2 * * 1-5","tz":"Europe/Paris","message":{"body":"cmVwb3J0","subject":"report"}}"#,
    ),
    (Rpc::ListSchedules, "{}"),
    (Rpc::DeleteSchedule, r#"{"name":"nightly-report"}"#),
    (
        Rpc::Subscribe,
        r#"{"topic":"orders","name":"orders-eu","filter":{"expr":"properties[\"region\"] == \"eu\""}}"#,
    ),
    (Rpc::ListSubscriptions, "{}"),
    (
        Rpc::TestFilter,
        r#"{"expr":"subject == \"greeting\"","message":{"body":"aGk=","subject":"greeting"}}"#,
    ),
    (Rpc::Unsubscribe, r#"{"topic":"orders","name":"orders-eu"}"#),
    (
        Rpc::CreateKey,
        r#"{"name":"ci-producer","permissions":["send"]}"#,
    ),
    (Rpc::ListKeys, r#"{"limit":100}"#),
    (Rpc::RevokeKey, r#"{"id":"KEY_ID"}"#),
    (Rpc::WhoAmI, "{}"),
    (Rpc::Status, "{}"),
    (Rpc::DeleteQueue, r#"{"name":"jobs"}"#),
];

/// What the page says before the RPCs.
const PRELUDE: &str = r#"# The wire contract, as this broker serves it

<!-- Generated by crates/broker/tests/wire_doc.rs from the wire types (crates/mqlite/src/remote/wire/);
     edit the types' doc comments or the generator, then MQLITE_BLESS=1 cargo test -p mqlite-broker --test integration -- wire_doc:: -->

Every RPC is `POST /mqlite.v1.<Service>/<Method>` with a JSON object body
(`Content-Type: application/json`; other content types are 415) and answers a JSON
object. The broker speaks the public mqlite v1 wire contract; what goes beyond it is
marked as an extension, and the contract's own form always works. Bodies are base64.
Times are epoch milliseconds, durations milliseconds. Every request field may be
omitted: it then takes the default shown. Unknown fields are ignored.

Auth: `Authorization: Bearer <token>`, an administrator token (`MQLITE_TOKENS`) or an
access key's. Each RPC needs the permission shown (`send`, `listen`, `manage`); an
administrator token has them all. With auth off, no header is needed (and only
loopback `Host`s are answered). The open routes: `GET /` (the discovery card: every
RPC path), `GET /healthz`, `GET /readyz`, `GET /metrics` (`manage`), `GET /ui`.

Limits: a request body at most 32 MiB; a message body at most `--max-message-bytes`
(1 MiB); Send at most 1,000 messages; Receive at most 256 messages and 20 s of waiting,
Peek at most 1,000 (larger values are taken as the largest); an answer at most
`--max-answer-bytes` (16 MiB), which ends a Receive or Peek early.

## Errors

An error answers its HTTP status with the envelope `{"code": "...", "message": "..."}`;
the message says what to do, for a person.

| status | code | when |
|---|---|---|
| 400 | `invalid_argument` | a malformed body, a field out of range, an invalid filter or name |
| 400 | `group_required` | a message without `group_id` sent to a `group_fifo` queue |
| 401 | `unauthenticated` | no token, or one the broker does not know (revoked, expired) |
| 403 | `permission_denied` | the key lacks the RPC's permission; a browser request from a foreign origin; with auth off, a non-loopback `Host` |
| 404 | `not_found` | the queue (or subscription, key) does not exist; a path that is no RPC |
| 405 | `unimplemented` | another method than POST on an RPC path |
| 408 | `deadline_exceeded` | the request body did not arrive within `--body-timeout-ms` |
| 409 | `already_exists` | a message id reused with another body inside the dedup window |
| 409 | `lock_lost` | a settlement whose lease expired, whose message was delivered again, or whose token was never issued |
| 409 | `name_conflict` | a name already held by another kind (queue, topic, subscription) |
| 409 | `key_conflict` | an access key id already in use |
| 409 | `queue_paused` | a send to a queue whose sends are paused (status `send_disabled` or `disabled`) |
| 413 | `message_too_large` | a message body past `--max-message-bytes`, a request past 32 MiB |
| 415 | `invalid_argument` | a body that is not `application/json` |
| 499 | `cancelled` | the client went away before the answer |
| 500 | `internal` | a fault the log explains (never shown on the wire) |
| 503 | `unavailable` | shutting down; a standby; the store refuses writes (its file gone) |
| 503 | `outcome_unknown` | a remote store's commit whose outcome could not be learned: look before retrying |
| 507 | `resource_exhausted` | the disk is full: nothing was written |

"#;

/// The page, from the types and the entries.
fn render(
    structs: &BTreeMap<String, (String, Vec<Field>)>,
    examples: &BTreeMap<String, String>,
) -> String {
    let mut page = PRELUDE.to_owned();
    let mut used: BTreeSet<String> = BTreeSet::new();
    let fields_table = |page: &mut String, used: &mut BTreeSet<String>, ty: &str, head: &str| {
        let (_, fields) = structs
            .get(ty)
            .unwrap_or_else(|| panic!("{ty} is not a wire struct"));
        if fields.is_empty() {
            let _ = writeln!(page, "{head}: `{{}}` (no fields).\n");
            return;
        }
        let _ = writeln!(
            page,
            "| {head} | type | default | meaning |\n|---|---|---|---|"
        );
        for f in fields {
            let (json, default) = json_type(&f.ty);
            let inner =
                f.ty.trim_start_matches("Option<")
                    .trim_start_matches("Vec<")
                    .trim_end_matches('>');
            if structs.contains_key(inner) {
                used.insert(inner.to_owned());
            }
            let _ = writeln!(page, "| `{}` | {json} | {default} | {} |", f.name, f.doc);
        }
        page.push('\n');
    };
    for service in ["QueueService", "AdminService", "AuthService"] {
        let _ = writeln!(page, "## {service}\n");
        for rpc in Rpc::ALL.iter().filter(|r| r.service() == service) {
            let e = ENTRIES
                .iter()
                .find(|e| e.rpc == *rpc)
                .unwrap_or_else(|| panic!("{} has no entry", rpc.label()));
            let needs = match rpc.needs() {
                Some(p) => format!("`{p}`"),
                None => "any valid credential".to_owned(),
            };
            let _ = writeln!(
                page,
                "### {}\n\n`POST {}` · permission {needs} · request `{}` · answer `{}`\n\n{}\n",
                rpc.label(),
                rpc.path(),
                e.request,
                e.answer,
                e.notes
            );
            fields_table(&mut page, &mut used, e.request, "request field");
            fields_table(&mut page, &mut used, e.answer, "answer field");
            let example = examples
                .get(rpc.label())
                .unwrap_or_else(|| panic!("{} has no example in the story", rpc.label()));
            let _ = writeln!(
                page,
                "```sh\ncurl -s -H \"Authorization: Bearer $MQLITE_TOKEN\" --json '{example}' \\\n     http://127.0.0.1:6754{}\n```\n",
                rpc.path()
            );
        }
    }
    page.push_str("## Objects\n\nThe objects inside the requests and answers above, and the error envelope and discovery card.\n\n");
    let mut named: BTreeSet<String> = used.iter().cloned().collect();
    named.insert("ErrorBody".into());
    named.insert("DiscoveryCard".into());
    // Nested types of nested types.
    loop {
        let mut more = BTreeSet::new();
        for ty in &named {
            for f in &structs[ty].1 {
                let inner =
                    f.ty.trim_start_matches("Option<")
                        .trim_start_matches("Vec<")
                        .trim_end_matches('>');
                if structs.contains_key(inner) && !named.contains(inner) {
                    more.insert(inner.to_owned());
                }
            }
        }
        if more.is_empty() {
            break;
        }
        named.extend(more);
    }
    for ty in &named {
        let (doc, _) = &structs[ty];
        let _ = writeln!(page, "### {ty}\n\n{doc}\n");
        fields_table(&mut page, &mut used, ty, "field");
    }
    page.trim_end().to_owned() + "\n"
}

/// Runs the story against the handlers over a memory store: each answer 200 and of its
/// declared type. Returns each RPC's first example, as the page shows it.
async fn run_story() -> BTreeMap<String, String> {
    let config = BrokerConfig::new(
        "127.0.0.1:0".parse().expect("an address"),
        ":memory:",
        AuthConfig::Off,
    );
    let local = Local::open(&config).await.expect("a memory store");
    let mut examples = BTreeMap::new();
    let (mut token, mut seq, mut key) = (String::new(), 0i64, String::new());
    for (rpc, example) in STORY {
        examples
            .entry(rpc.label().to_owned())
            .or_insert_with(|| (*example).to_owned());
        let body = example
            .replace("LOCK_TOKEN", &token)
            .replace("SEQ", &seq.to_string())
            .replace("KEY_ID", &key);
        let (status, answer) = local.call_bytes(*rpc, body.as_bytes()).await;
        assert_eq!(
            status,
            200,
            "{} {body}: {}",
            rpc.label(),
            String::from_utf8_lossy(&answer)
        );
        if let Err(e) = check_types(*rpc, &body, &answer) {
            panic!("{}: {e}", rpc.label());
        }
        let v: Value = serde_json::from_slice(&answer).expect("JSON");
        if let Some(m) = v["messages"].as_array().and_then(|m| m.first()) {
            token = m["lock_token"].as_str().unwrap_or_default().to_owned();
            seq = m["seq_number"].as_i64().unwrap_or_default();
        }
        if *rpc == Rpc::CreateKey {
            key = v["id"].as_str().expect("a key id").to_owned();
        }
    }
    local.close().await;
    examples
}

/// The codes the broker's source can answer: each quoted code after a `StatusCode::`.
fn codes_in_source() -> BTreeSet<String> {
    let mut codes = BTreeSet::new();
    let mut stack = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("src")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("a source dir") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("a source");
            let lines: Vec<&str> = text.lines().collect();
            for (i, line) in lines.iter().enumerate() {
                let Some(at) = line.find("StatusCode::") else {
                    continue;
                };
                let window = std::iter::once(&line[at..])
                    .chain(lines.iter().skip(i + 1).take(2).copied())
                    .collect::<Vec<_>>()
                    .join(" ");
                if let Some(code) = window.split('"').nth(1)
                    && !code.is_empty()
                    && code.chars().all(|c| c.is_ascii_lowercase() || c == '_')
                {
                    codes.insert(code.to_owned());
                }
            }
        }
    }
    codes
}

#[tokio::test]
async fn the_wire_page_is_the_wire_types() {
    let structs = wire_structs();
    for e in ENTRIES {
        for ty in [e.request, e.answer] {
            assert!(
                structs.contains_key(ty),
                "{ty} is read from the wire sources"
            );
        }
    }
    for rpc in Rpc::ALL {
        assert!(
            ENTRIES.iter().any(|e| e.rpc == *rpc),
            "{} has no entry",
            rpc.label()
        );
    }
    let examples = run_story().await;
    let page = render(&structs, &examples);
    for code in codes_in_source() {
        assert!(
            page.contains(&format!("`{code}`")),
            "the broker can answer `{code}`: add it to the page's error table"
        );
    }
    let path = root().join("docs/wire.md");
    if std::env::var_os("MQLITE_BLESS").is_some() {
        std::fs::write(&path, &page).expect("write docs/wire.md");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == page,
        "docs/wire.md is stale: run MQLITE_BLESS=1 cargo test -p mqlite-broker --test integration -- wire_doc::"
    );
}

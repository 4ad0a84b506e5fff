//! `mqlite mcp`: a Model Context Protocol server on stdin/stdout, so an agent can
//! create queues, send, receive and settle through tools. Each tool is one RPC of the
//! wire contract, called through the same client as the other subcommands: a broker
//! (`--endpoint`, `MQLITE_ENDPOINT` or `MQLITE_URL`, with `--token`) or, without one, the
//! store `--db` names, opened in this process.
//!
//! The transport is MCP's stdio one: JSON-RPC 2.0 messages, one per line. Served:
//! `initialize`, `ping`, `tools/list`, `tools/call`; notifications are read and not
//! answered. A tool's failure (the broker refused) is a tool result with `isError`, as
//! MCP asks, so the agent reads the error; a malformed call is a JSON-RPC error.

use std::io::{BufRead, Write};

use serde_json::{Map, Value, json};

use mqlite_broker::wire::WireMessage;
use mqlite_broker::{Client, ClientError, Rpc};

use crate::Failure;

/// The MCP revision this server speaks (it answers with the client's when it is one of
/// [`PROTOCOLS`]).
const PROTOCOL: &str = "2025-06-18";
/// The revisions whose tool methods are the ones served here.
const PROTOCOLS: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18"];

/// JSON-RPC's codes.
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;

/// Serves MCP on stdin/stdout until stdin closes.
pub(crate) fn run(
    endpoint: Option<String>,
    token: Option<String>,
    db: Option<String>,
) -> Result<(), Failure> {
    // One worker: the calls, and an in-process store's background loops between them.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| Failure::from(format!("cannot start the async runtime: {e}")))?;
    let endpoint = endpoint.or_else(|| std::env::var("MQLITE_URL").ok());
    let client = runtime.block_on(crate::connect(endpoint, token, db, true))?;
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let line = line.map_err(|e| Failure::from(format!("cannot read stdin: {e}")))?;
        if line.trim().is_empty() {
            continue;
        }
        if let Some(answer) = runtime.block_on(answer(&client, &line)) {
            writeln!(stdout, "{answer}")
                .and_then(|()| stdout.flush())
                .map_err(|e| Failure::from(format!("cannot write to stdout: {e}")))?;
        }
    }
    if let Some(local) = client.in_process() {
        runtime.block_on(local.close());
    }
    Ok(())
}

/// The answer to one line: None for a notification.
async fn answer(client: &Client, line: &str) -> Option<Value> {
    let message: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => return Some(error(Value::Null, PARSE_ERROR, &format!("not JSON: {e}"))),
    };
    let id = message.get("id").cloned();
    let Some(method) = message.get("method").and_then(Value::as_str) else {
        // A response or a malformed request; only a request with an id is answered.
        return id.map(|id| error(id, INVALID_REQUEST, "a request names its method"));
    };
    // A notification (no id) is never answered.
    let id = id?;
    let params = message.get("params").cloned().unwrap_or(Value::Null);
    let result = match method {
        "initialize" => Ok(initialize(&params)),
        "ping" => Ok(json!({})),
        "tools/list" => Ok(json!({ "tools": tools() })),
        "tools/call" => call(client, &params).await,
        other => Err((METHOD_NOT_FOUND, format!("no method {other}"))),
    };
    Some(match result {
        Ok(result) => json!({ "jsonrpc": "2.0", "id": id, "result": result }),
        Err((code, text)) => error(id, code, &text),
    })
}

fn error(id: Value, code: i64, message: &str) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } })
}

fn initialize(params: &Value) -> Value {
    let asked = params.get("protocolVersion").and_then(Value::as_str);
    let version = asked.filter(|v| PROTOCOLS.contains(v)).unwrap_or(PROTOCOL);
    json!({
        "protocolVersion": version,
        "capabilities": { "tools": { "listChanged": false } },
        "serverInfo": { "name": "mqlite", "version": mqlite_broker::VERSION },
        "instructions": "mqlite is a message queue. Delivery is at-least-once: a received \
            message is locked under its lock_token until you complete, abandon, reject, \
            defer or renew it; an unsettled lock expires and the message is delivered \
            again, so handle messages idempotently.",
    })
}

/// One tool: its name, the RPC it calls, what it does, its arguments (JSON Schema
/// properties) and which of them are required.
struct Tool {
    name: &'static str,
    rpc: Rpc,
    description: &'static str,
    properties: fn() -> Value,
    required: &'static [&'static str],
}

fn queue_prop() -> Value {
    json!({ "type": "string", "description": "The queue's name." })
}

fn lock_props() -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("queue".into(), queue_prop());
    m.insert(
        "seq_number".into(),
        json!({ "type": "integer", "description": "The message's sequence number, from receive." }),
    );
    m.insert(
        "lock_token".into(),
        json!({ "type": "string", "description": "The lock token receive returned with it." }),
    );
    m
}

fn with(mut m: Map<String, Value>, extra: &[(&str, Value)]) -> Value {
    for (k, v) in extra {
        m.insert((*k).to_owned(), v.clone());
    }
    Value::Object(m)
}

const LOCK: &[&str] = &["queue", "seq_number", "lock_token"];

/// The tools, in the order `tools/list` lists them.
const TOOLS: &[Tool] = &[
    Tool {
        name: "list_queues",
        rpc: Rpc::ListQueues,
        description: "List every queue, topic and subscription with its configuration.",
        properties: || json!({}),
        required: &[],
    },
    Tool {
        name: "create_queue",
        rpc: Rpc::CreateQueue,
        description: "Create a queue, or replace an existing queue's whole configuration \
            (options not given take their defaults).",
        properties: || {
            json!({
                "name": { "type": "string", "description": "The queue's name." },
                "lock_duration_ms": { "type": "integer", "description": "Lease of a receive, ms (default 30000)." },
                "max_delivery_count": { "type": "integer", "description": "Deliveries before dead-lettering (default 10)." },
                "default_ttl_ms": { "type": "integer", "description": "Default time to live, ms (0: none)." },
                "dedup_window_ms": { "type": "integer", "description": "Duplicate detection window by message_id, ms (0: off)." },
                "ordering_mode": { "type": "string", "enum": ["standard", "group_fifo", "strict_fifo"] }
            })
        },
        required: &["name"],
    },
    Tool {
        name: "send",
        rpc: Rpc::Send,
        description: "Send one message with a text body; returns its sequence number.",
        properties: || {
            json!({
                "queue": queue_prop(),
                "body": { "type": "string", "description": "The body, as text." },
                "message_id": { "type": "string", "description": "Producer id, for duplicate detection." },
                "group_id": { "type": "string", "description": "Ordering group (required on group_fifo queues)." },
                "subject": { "type": "string" },
                "properties": { "type": "object", "additionalProperties": { "type": "string" } },
                "ttl_ms": { "type": "integer", "description": "Time to live, ms." },
                "scheduled_enqueue_time_ms": { "type": "integer", "description": "Deliver no earlier than this epoch-ms time." }
            })
        },
        required: &["queue", "body"],
    },
    Tool {
        name: "receive",
        rpc: Rpc::Receive,
        description: "Receive messages under a lock: each comes with seq_number and \
            lock_token to settle it by (complete when done).",
        properties: || {
            json!({
                "queue": queue_prop(),
                "max_messages": { "type": "integer", "description": "At most this many (1..256, default 1)." },
                "wait_time_ms": { "type": "integer", "description": "Wait up to this long for a message, ms (at most 20000)." }
            })
        },
        required: &["queue"],
    },
    Tool {
        name: "complete",
        rpc: Rpc::Complete,
        description: "Complete a received message: it is done and leaves the queue.",
        properties: || Value::Object(lock_props()),
        required: LOCK,
    },
    Tool {
        name: "abandon",
        rpc: Rpc::Abandon,
        description: "Release a received message for delivery again (optionally after delay_ms).",
        properties: || {
            with(
                lock_props(),
                &[(
                    "delay_ms",
                    json!({ "type": "integer", "description": "Deliver again after this long, ms." }),
                )],
            )
        },
        required: LOCK,
    },
    Tool {
        name: "renew",
        rpc: Rpc::Renew,
        description: "Extend a received message's lock, so long work is not delivered again.",
        properties: || Value::Object(lock_props()),
        required: LOCK,
    },
    Tool {
        name: "defer",
        rpc: Rpc::Defer,
        description: "Set a received message aside; fetch it later with receive_deferred.",
        properties: || Value::Object(lock_props()),
        required: LOCK,
    },
    Tool {
        name: "receive_deferred",
        rpc: Rpc::ReceiveDeferred,
        description: "Receive deferred messages by sequence number, under a new lock.",
        properties: || {
            json!({
                "queue": queue_prop(),
                "seq_numbers": { "type": "array", "items": { "type": "integer" } }
            })
        },
        required: &["queue", "seq_numbers"],
    },
    Tool {
        name: "reject",
        rpc: Rpc::Reject,
        description: "Dead-letter a received message, with a reason.",
        properties: || {
            with(
                lock_props(),
                &[
                    ("dead_letter_reason", json!({ "type": "string" })),
                    ("dead_letter_description", json!({ "type": "string" })),
                ],
            )
        },
        required: LOCK,
    },
    Tool {
        name: "peek",
        rpc: Rpc::Peek,
        description: "Look at messages without locking them, optionally in one state.",
        properties: || {
            json!({
                "queue": queue_prop(),
                "from_seq": { "type": "integer" },
                "state": { "type": "string", "enum": ["active", "locked", "deferred", "scheduled", "dead_lettered"] },
                "max": { "type": "integer", "description": "At most this many (default 32, at most 1000)." }
            })
        },
        required: &["queue"],
    },
    Tool {
        name: "stats",
        rpc: Rpc::Stats,
        description: "A queue's message counts by state, and its oldest message's age.",
        properties: || json!({ "queue": queue_prop() }),
        required: &["queue"],
    },
    Tool {
        name: "redrive",
        rpc: Rpc::Redrive,
        description: "Move a queue's dead letters back to it (or to target).",
        properties: || {
            json!({
                "queue": queue_prop(),
                "target": { "type": "string" },
                "max": { "type": "integer", "description": "At most this many (0: all)." },
                "older_than_ms": { "type": "integer" },
                "seq_numbers": { "type": "array", "items": { "type": "integer" }, "description": "Only these dead letters." }
            })
        },
        required: &["queue"],
    },
    Tool {
        name: "purge",
        rpc: Rpc::Purge,
        description: "Delete a queue's dead letters permanently.",
        properties: || {
            json!({
                "queue": queue_prop(),
                "max": { "type": "integer", "description": "At most this many (0: all)." },
                "older_than_ms": { "type": "integer" }
            })
        },
        required: &["queue"],
    },
];

/// `tools/list`'s answer.
fn tools() -> Vec<Value> {
    TOOLS
        .iter()
        .map(|t| {
            json!({
                "name": t.name,
                "description": t.description,
                "inputSchema": {
                    "type": "object",
                    "properties": (t.properties)(),
                    "required": t.required,
                },
            })
        })
        .collect()
}

/// `tools/call`: the tool's RPC, its answer as the result's text (and structured
/// content); a refusal is a result with `isError`.
async fn call(client: &Client, params: &Value) -> Result<Value, (i64, String)> {
    let name = params
        .get("name")
        .and_then(Value::as_str)
        .ok_or((INVALID_PARAMS, "tools/call names a tool".to_owned()))?;
    let tool = TOOLS
        .iter()
        .find(|t| t.name == name)
        .ok_or_else(|| (INVALID_PARAMS, format!("no tool {name}")))?;
    let args = match params.get("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => return Err((INVALID_PARAMS, "arguments is an object".to_owned())),
    };
    if let Some(missing) = tool.required.iter().find(|r| !args.contains_key(**r)) {
        return Err((
            INVALID_PARAMS,
            format!("{name} needs the argument {missing}"),
        ));
    }
    let request = request(tool.rpc, args);
    let answer: Result<Value, ClientError> = client.call(tool.rpc, &request).await;
    Ok(match answer {
        Ok(mut value) => {
            with_body_text(&mut value);
            let text = serde_json::to_string_pretty(&value).unwrap_or_default();
            json!({
                "content": [{ "type": "text", "text": text }],
                "structuredContent": value,
                "isError": false,
            })
        }
        Err(e) => json!({
            "content": [{ "type": "text", "text": crate::chain(&e) }],
            "isError": true,
        }),
    })
}

/// The wire request of a tool's arguments: send's text body becomes the wire's one
/// base64 message, create_queue's options its config; the others are the wire request
/// as they stand.
fn request(rpc: Rpc, mut args: Map<String, Value>) -> Value {
    match rpc {
        Rpc::Send => {
            let mut message = Map::new();
            for key in [
                "message_id",
                "group_id",
                "subject",
                "correlation_id",
                "reply_to",
                "content_type",
                "properties",
            ] {
                if let Some(v) = args.remove(key) {
                    message.insert(key.to_owned(), v);
                }
            }
            let body = match args.remove("body") {
                Some(Value::String(text)) => text,
                Some(other) => other.to_string(),
                None => String::new(),
            };
            message.insert(
                "body".into(),
                Value::String(WireMessage::with_body(body).body),
            );
            args.insert(
                "messages".into(),
                Value::Array(vec![Value::Object(message)]),
            );
            Value::Object(args)
        }
        Rpc::CreateQueue => {
            let name = args.remove("name").unwrap_or(Value::Null);
            json!({ "name": name, "config": args })
        }
        _ => Value::Object(args),
    }
}

/// Adds `body_text` beside each message's base64 `body` when the body is UTF-8, so an
/// agent reads it without decoding.
fn with_body_text(value: &mut Value) {
    let Some(messages) = value.get_mut("messages").and_then(Value::as_array_mut) else {
        return;
    };
    for m in messages {
        let text = m
            .get("body")
            .and_then(Value::as_str)
            .map(|b| WireMessage {
                body: b.to_owned(),
                ..Default::default()
            })
            .and_then(|w| w.decoded_body().ok())
            .and_then(|bytes| String::from_utf8(bytes).ok());
        if let (Some(text), Some(obj)) = (text, m.as_object_mut()) {
            obj.insert("body_text".into(), Value::String(text));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fourteen_tools_each_with_an_object_schema_naming_its_required_arguments() {
        let tools = tools();
        assert_eq!(tools.len(), 14);
        for t in &tools {
            let schema = &t["inputSchema"];
            assert_eq!(schema["type"], "object");
            for r in schema["required"].as_array().expect("required") {
                let r = r.as_str().expect("a name");
                assert!(
                    schema["properties"].get(r).is_some(),
                    "{}: required {r} is a property",
                    t["name"]
                );
            }
        }
    }

    #[test]
    fn send_becomes_one_base64_message() {
        let args = json!({ "queue": "q", "body": "hi", "group_id": "g" });
        let Value::Object(args) = args else {
            unreachable!()
        };
        let r = request(Rpc::Send, args);
        assert_eq!(r["queue"], "q");
        assert_eq!(r["messages"][0]["body"], "aGk=");
        assert_eq!(r["messages"][0]["group_id"], "g");
    }
}

//! The SQS endpoint as an AWS SDK sees it: `POST /` with `X-Amz-Target` and
//! `application/x-amz-json-1.0`, answers and errors in SQS's shapes (the error's
//! `__type` and its `x-amzn-query-error` code), digests as SQS computes them, receipt
//! handles fenced by the lock token, batches with partial failures, and a long-poll
//! woken by a send. (The boto3 and JavaScript SDK suites run against the release
//! binary; these pin the protocol from Rust.)

use serde_json::{Value, json};

use mqlite_broker::AuthConfig;

use crate::common::{World, world_with};

/// One SQS call: (status, the query-error code or "", the JSON answer).
async fn sqs(w: &World, action: &str, body: Value) -> (u16, String, Value) {
    let response = reqwest::Client::new()
        .post(format!("http://{}/", w.broker.addr()))
        .header("X-Amz-Target", format!("AmazonSQS.{action}"))
        .header("Content-Type", "application/x-amz-json-1.0")
        .body(body.to_string())
        .send()
        .await
        .expect("the broker answers");
    let status = response.status().as_u16();
    let code = response
        .headers()
        .get("x-amzn-query-error")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let text = response.text().await.expect("a body");
    let json = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{action}: {e}: {text}"));
    (status, code, json)
}

async fn ok(w: &World, action: &str, body: Value) -> Value {
    let (status, code, json) = sqs(w, action, body).await;
    assert_eq!(status, 200, "{action}: {code} {json}");
    json
}

/// A queue's URL by name (created standard, or FIFO with `.fifo` and `attributes`).
async fn queue(w: &World, name: &str, attributes: Value) -> String {
    ok(
        w,
        "CreateQueue",
        json!({ "QueueName": name, "Attributes": attributes }),
    )
    .await["QueueUrl"]
        .as_str()
        .expect("a url")
        .to_owned()
}

async fn open() -> (World, String) {
    let w = world_with(AuthConfig::Off, |_| {}).await;
    let url = queue(&w, "orders", json!({})).await;
    (w, url)
}

/// A call that must fail with this status and query-error code.
async fn refused(w: &World, action: &str, body: Value, expected: (u16, &str)) {
    let (status, code, json) = sqs(w, action, body).await;
    assert_eq!((status, code.as_str()), expected, "{action}: {json}");
}

#[tokio::test]
async fn queues_are_created_found_listed_and_deleted() {
    let (w, url) = open().await;
    assert!(url.ends_with("/000000000000/orders"), "{url}");
    assert!(
        url.starts_with(&format!("http://{}", w.broker.addr())),
        "{url}"
    );
    // The same attributes again: the same queue.
    let again = ok(&w, "CreateQueue", json!({ "QueueName": "orders" })).await;
    assert_eq!(again["QueueUrl"], url.as_str());
    let (status, code, body) = sqs(
        &w,
        "CreateQueue",
        json!({ "QueueName": "orders", "Attributes": { "VisibilityTimeout": "60" } }),
    )
    .await;
    assert_eq!(
        (status, code.as_str()),
        (400, "QueueAlreadyExists;Sender"),
        "{body}"
    );
    assert_eq!(body["__type"], "com.amazonaws.sqs#QueueNameExists");

    let found = ok(&w, "GetQueueUrl", json!({ "QueueName": "orders" })).await;
    assert_eq!(found["QueueUrl"], url.as_str());
    let listed = ok(&w, "ListQueues", json!({ "QueueNamePrefix": "ord" })).await;
    assert_eq!(listed["QueueUrls"], json!([url]));
    let attributes = ok(
        &w,
        "GetQueueAttributes",
        json!({ "QueueUrl": url, "AttributeNames": ["All"] }),
    )
    .await;
    assert_eq!(attributes["Attributes"]["VisibilityTimeout"], "30");
    assert_eq!(attributes["Attributes"]["MessageRetentionPeriod"], "345600");
    assert_eq!(
        attributes["Attributes"]["QueueArn"],
        "arn:aws:sqs:mqlite:000000000000:orders"
    );
    ok(
        &w,
        "SetQueueAttributes",
        json!({ "QueueUrl": url, "Attributes": { "VisibilityTimeout": "45" } }),
    )
    .await;
    refused(
        &w,
        "SetQueueAttributes",
        json!({ "QueueUrl": url, "Attributes": { "Colour": "blue" } }),
        (400, "InvalidAttributeName;Sender"),
    )
    .await;

    ok(&w, "DeleteQueue", json!({ "QueueUrl": url })).await;
    let (status, code, body) = sqs(&w, "GetQueueUrl", json!({ "QueueName": "orders" })).await;
    assert_eq!(status, 400);
    assert_eq!(code, "AWS.SimpleQueueService.NonExistentQueue;Sender");
    assert_eq!(body["__type"], "com.amazonaws.sqs#QueueDoesNotExist");
    assert_eq!(body["message"], "The specified queue does not exist.");
}

/// A message with attributes: the digests SQS gives, the attributes back with their
/// types, the receive count, and the handle that deletes it.
#[tokio::test]
async fn a_message_and_its_attributes_go_round_with_sqs_digests() {
    let (w, url) = open().await;
    let sent = ok(
        &w,
        "SendMessage",
        json!({
            "QueueUrl": url,
            "MessageBody": "test",
            "MessageAttributes": { "MyAttribute": { "DataType": "String", "StringValue": "foobar" } },
        }),
    )
    .await;
    assert_eq!(sent["MD5OfMessageBody"], "098f6bcd4621d373cade4e832627b4f6");
    assert_eq!(
        sent["MD5OfMessageAttributes"],
        "adb59cd4678ea5a855436b949cd07ab6"
    );
    ok(
        &w,
        "SendMessage",
        json!({
            "QueueUrl": url,
            "MessageBody": "second",
            "MessageAttributes": {
                "count": { "DataType": "Number", "StringValue": "42" },
                "blob": { "DataType": "Binary", "BinaryValue": "AAEC" },
            },
        }),
    )
    .await;
    let got = ok(
        &w,
        "ReceiveMessage",
        json!({
            "QueueUrl": url,
            "MaxNumberOfMessages": 10,
            "MessageAttributeNames": ["All"],
            "MessageSystemAttributeNames": ["ApproximateReceiveCount"],
        }),
    )
    .await;
    let messages = got["Messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0]["Body"], "test");
    assert_eq!(messages[0]["MD5OfBody"], "098f6bcd4621d373cade4e832627b4f6");
    assert_eq!(
        messages[0]["MD5OfMessageAttributes"],
        "adb59cd4678ea5a855436b949cd07ab6"
    );
    assert_eq!(messages[0]["Attributes"]["ApproximateReceiveCount"], "1");
    assert_eq!(
        messages[1]["MessageAttributes"]["count"],
        json!({ "DataType": "Number", "StringValue": "42" })
    );
    assert_eq!(
        messages[1]["MessageAttributes"]["blob"],
        json!({ "DataType": "Binary", "BinaryValue": "AAEC" })
    );
    for m in messages {
        ok(
            &w,
            "DeleteMessage",
            json!({ "QueueUrl": url, "ReceiptHandle": m["ReceiptHandle"] }),
        )
        .await;
    }
    let empty = ok(&w, "ReceiveMessage", json!({ "QueueUrl": url })).await;
    assert!(empty.get("Messages").is_none(), "{empty}");
}

/// Visibility: 0 gives the message back at once; its old handle is then refused (the
/// lock token fences it), a malformed handle is ReceiptHandleIsInvalid, and a lease
/// that lapses redelivers the message with a count of 2.
#[tokio::test]
async fn handles_are_fenced_and_visibility_gives_messages_back() {
    let (w, url) = open().await;
    ok(
        &w,
        "SendMessage",
        json!({ "QueueUrl": url, "MessageBody": "job" }),
    )
    .await;
    let first = ok(&w, "ReceiveMessage", json!({ "QueueUrl": url })).await["Messages"][0].clone();
    ok(
        &w,
        "ChangeMessageVisibility",
        json!({ "QueueUrl": url, "ReceiptHandle": first["ReceiptHandle"], "VisibilityTimeout": 0 }),
    )
    .await;
    let second = ok(
        &w,
        "ReceiveMessage",
        json!({ "QueueUrl": url, "AttributeNames": ["All"] }),
    )
    .await["Messages"][0]
        .clone();
    assert_eq!(second["MessageId"], first["MessageId"]);
    assert_eq!(second["Attributes"]["ApproximateReceiveCount"], "2");
    refused(
        &w,
        "DeleteMessage",
        json!({ "QueueUrl": url, "ReceiptHandle": first["ReceiptHandle"] }),
        (400, "InvalidParameterValue;Sender"),
    )
    .await;
    refused(
        &w,
        "DeleteMessage",
        json!({ "QueueUrl": url, "ReceiptHandle": "not-a-handle" }),
        (404, "ReceiptHandleIsInvalid;Sender"),
    )
    .await;
    // The queue's own timeout renews; another is refused by name.
    ok(
        &w,
        "ChangeMessageVisibility",
        json!({ "QueueUrl": url, "ReceiptHandle": second["ReceiptHandle"], "VisibilityTimeout": 30 }),
    )
    .await;
    let (status, code, body) = sqs(
        &w,
        "ChangeMessageVisibility",
        json!({ "QueueUrl": url, "ReceiptHandle": second["ReceiptHandle"], "VisibilityTimeout": 7 }),
    )
    .await;
    assert_eq!(
        (status, code.as_str()),
        (400, "InvalidParameterValue;Sender"),
        "{body}"
    );
    // The lease lapses: the message comes back.
    w.clock.advance(120_000);
    // The reaper's pass (a served broker runs it in the background).
    w.run_sweeps().await;
    let third = ok(&w, "ReceiveMessage", json!({ "QueueUrl": url })).await;
    assert_eq!(third["Messages"][0]["MessageId"], first["MessageId"]);
}

/// Batches: each entry succeeds or fails on its own; the batch's shape is checked
/// whole.
#[tokio::test]
async fn batches_answer_per_entry() {
    let (w, url) = open().await;
    let sent = ok(
        &w,
        "SendMessageBatch",
        json!({ "QueueUrl": url, "Entries": [
            { "Id": "a", "MessageBody": "one" },
            { "Id": "b", "MessageBody": "bad \u{1} body" },
            { "Id": "c", "MessageBody": "three", "DelaySeconds": 5 },
        ]}),
    )
    .await;
    let ids = |list: &Value| -> Vec<String> {
        list.as_array()
            .expect("a list")
            .iter()
            .map(|e| e["Id"].as_str().expect("an id").to_owned())
            .collect()
    };
    assert_eq!(ids(&sent["Successful"]), ["a", "c"]);
    assert_eq!(ids(&sent["Failed"]), ["b"]);
    assert_eq!(sent["Failed"][0]["Code"], "InvalidMessageContents");
    assert_eq!(sent["Failed"][0]["SenderFault"], true);

    for (entries, expected) in [
        (json!([]), "AWS.SimpleQueueService.EmptyBatchRequest;Sender"),
        (
            json!([{ "Id": "x", "MessageBody": "1" }, { "Id": "x", "MessageBody": "2" }]),
            "AWS.SimpleQueueService.BatchEntryIdsNotDistinct;Sender",
        ),
        (
            json!([{ "Id": "no spaces", "MessageBody": "1" }]),
            "AWS.SimpleQueueService.InvalidBatchEntryId;Sender",
        ),
        (
            Value::Array(
                (0..11)
                    .map(|i| json!({ "Id": format!("m{i}"), "MessageBody": "x" }))
                    .collect(),
            ),
            "AWS.SimpleQueueService.TooManyEntriesInBatchRequest;Sender",
        ),
    ] {
        refused(
            &w,
            "SendMessageBatch",
            json!({ "QueueUrl": url, "Entries": entries }),
            (400, expected),
        )
        .await;
    }

    // The delayed one is not visible yet; the first is.
    let got = ok(
        &w,
        "ReceiveMessage",
        json!({ "QueueUrl": url, "MaxNumberOfMessages": 10 }),
    )
    .await;
    let messages = got["Messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 1);
    let deleted = ok(
        &w,
        "DeleteMessageBatch",
        json!({ "QueueUrl": url, "Entries": [
            { "Id": "ok", "ReceiptHandle": messages[0]["ReceiptHandle"] },
            { "Id": "stale", "ReceiptHandle": "bm90OmE=" },
        ]}),
    )
    .await;
    assert_eq!(ids(&deleted["Successful"]), ["ok"]);
    assert_eq!(deleted["Failed"][0]["Code"], "ReceiptHandleIsInvalid");
}

/// A long-poll parks until a send wakes it.
#[tokio::test]
async fn a_long_poll_is_woken_by_a_send() {
    let (w, url) = open().await;
    let poll = {
        let w = &w;
        let url = url.clone();
        async move {
            ok(
                w,
                "ReceiveMessage",
                json!({ "QueueUrl": url, "WaitTimeSeconds": 20 }),
            )
            .await
        }
    };
    let send = async {
        // The poll parks first: the broker counts it.
        let mut parked = w.broker.engine().expect("serving").long_poll_waiters();
        parked.wait_for(|n| *n > 0).await.expect("a parked poll");
        ok(
            &w,
            "SendMessage",
            json!({ "QueueUrl": url, "MessageBody": "wake up" }),
        )
        .await
    };
    let (got, _) = tokio::join!(poll, send);
    assert_eq!(got["Messages"][0]["Body"], "wake up");
}

/// A FIFO queue: order per message group across groups, one message of a group in
/// flight at a time, the deduplication id collapsing a repeat inside the five-minute
/// window, the group and deduplication ids required, and the FIFO system attributes.
#[tokio::test]
async fn fifo_queues_keep_group_order_and_deduplicate() {
    let w = world_with(AuthConfig::Off, |_| {}).await;
    let url = queue(&w, "jobs.fifo", json!({ "FifoQueue": "true" })).await;
    let attributes = ok(
        &w,
        "GetQueueAttributes",
        json!({ "QueueUrl": url, "AttributeNames": ["FifoQueue", "ContentBasedDeduplication"] }),
    )
    .await;
    assert_eq!(
        attributes["Attributes"],
        json!({ "FifoQueue": "true", "ContentBasedDeduplication": "false" })
    );
    let send = |group: &str, id: &str, body: &str| {
        json!({ "QueueUrl": url, "MessageBody": body, "MessageGroupId": group,
                "MessageDeduplicationId": id })
    };
    let mut seqs = Vec::new();
    for (group, id) in [("a", "a1"), ("b", "b1"), ("a", "a2"), ("b", "b2")] {
        let sent = ok(&w, "SendMessage", send(group, id, id)).await;
        assert_eq!(sent["SequenceNumber"], sent["MessageId"]);
        seqs.push(sent["MessageId"].clone());
    }
    // A repeat of a deduplication id inside the window is the first message.
    let again = ok(&w, "SendMessage", send("a", "a1", "a1")).await;
    assert_eq!(again["MessageId"], seqs[0]);
    // The same id with another body is a conflict mqlite reports (SQS would drop it).
    refused(
        &w,
        "SendMessage",
        send("a", "a1", "changed"),
        (400, "InvalidParameterValue;Sender"),
    )
    .await;

    let receive = async || {
        ok(
            &w,
            "ReceiveMessage",
            json!({ "QueueUrl": url, "MaxNumberOfMessages": 10, "AttributeNames": ["All"] }),
        )
        .await["Messages"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let heads = receive().await;
    let bodies: Vec<&str> = heads
        .iter()
        .map(|m| m["Body"].as_str().expect("a body"))
        .collect();
    assert_eq!(bodies, ["a1", "b1"], "one message per group in flight");
    assert_eq!(heads[0]["Attributes"]["MessageGroupId"], "a");
    assert_eq!(heads[0]["Attributes"]["MessageDeduplicationId"], "a1");
    assert_eq!(heads[0]["Attributes"]["SequenceNumber"], seqs[0]);
    assert!(
        receive().await.is_empty(),
        "both groups are blocked behind their heads"
    );
    for m in &heads {
        ok(
            &w,
            "DeleteMessage",
            json!({ "QueueUrl": url, "ReceiptHandle": m["ReceiptHandle"] }),
        )
        .await;
    }
    let next = receive().await;
    let bodies: Vec<&str> = next
        .iter()
        .map(|m| m["Body"].as_str().expect("a body"))
        .collect();
    assert_eq!(bodies, ["a2", "b2"]);

    for (body, expected) in [
        (
            json!({ "QueueUrl": url, "MessageBody": "x", "MessageDeduplicationId": "d" }),
            "MissingParameter;Sender",
        ),
        (
            json!({ "QueueUrl": url, "MessageBody": "x", "MessageGroupId": "g" }),
            "InvalidParameterValue;Sender",
        ),
        (
            json!({ "QueueUrl": url, "MessageBody": "x", "MessageGroupId": "g",
                    "MessageDeduplicationId": "d", "DelaySeconds": 5 }),
            "InvalidParameterValue;Sender",
        ),
    ] {
        let (status, code, answer) = sqs(&w, "SendMessage", body).await;
        assert_eq!((status, code.as_str()), (400, expected), "{answer}");
    }
}

/// What is refused: bad input with SQS's codes, actions not served by name, FIFO, and
/// SDK-signed requests while the broker's auth is on.
#[tokio::test]
async fn purge_deletes_every_message_and_fences_their_handles() {
    let (w, url) = open().await;
    for body in ["a", "b", "c"] {
        ok(
            &w,
            "SendMessage",
            json!({ "QueueUrl": url, "MessageBody": body }),
        )
        .await;
    }
    ok(
        &w,
        "SendMessage",
        json!({ "QueueUrl": url, "MessageBody": "later", "DelaySeconds": 600 }),
    )
    .await;
    let got = ok(&w, "ReceiveMessage", json!({ "QueueUrl": url })).await;
    let handle = got["Messages"][0]["ReceiptHandle"].clone();
    ok(&w, "PurgeQueue", json!({ "QueueUrl": url })).await;
    let attrs = ok(
        &w,
        "GetQueueAttributes",
        json!({ "QueueUrl": url, "AttributeNames": ["All"] }),
    )
    .await;
    for name in [
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed",
    ] {
        assert_eq!(attrs["Attributes"][name], "0", "{name}: {attrs}");
    }
    // The handle of a purged message no longer deletes it; the queue takes new sends.
    refused(
        &w,
        "DeleteMessage",
        json!({ "QueueUrl": url, "ReceiptHandle": handle }),
        (400, "InvalidParameterValue;Sender"),
    )
    .await;
    ok(
        &w,
        "SendMessage",
        json!({ "QueueUrl": url, "MessageBody": "d" }),
    )
    .await;
    let got = ok(&w, "ReceiveMessage", json!({ "QueueUrl": url })).await;
    assert_eq!(got["Messages"][0]["Body"], "d");
}

#[tokio::test]
async fn dead_letters_go_to_the_redrive_target_and_move_back() {
    let w = world_with(AuthConfig::Off, |_| {}).await;
    let dlq = queue(&w, "orders-dlq", json!({})).await;
    let policy = json!({
        "deadLetterTargetArn": "arn:aws:sqs:mqlite:000000000000:orders-dlq",
        "maxReceiveCount": 2,
    })
    .to_string();
    let url = queue(&w, "orders", json!({ "RedrivePolicy": policy })).await;
    // The policy reads back; the dead-letter queue lists its source.
    let attrs = ok(
        &w,
        "GetQueueAttributes",
        json!({ "QueueUrl": url, "AttributeNames": ["RedrivePolicy"] }),
    )
    .await;
    let read: Value = serde_json::from_str(
        attrs["Attributes"]["RedrivePolicy"]
            .as_str()
            .expect("a policy"),
    )
    .expect("JSON");
    assert_eq!(read["maxReceiveCount"], 2);
    assert_eq!(
        read["deadLetterTargetArn"],
        "arn:aws:sqs:mqlite:000000000000:orders-dlq"
    );
    let sources = ok(&w, "ListDeadLetterSourceQueues", json!({ "QueueUrl": dlq })).await;
    assert_eq!(sources["queueUrls"], json!([url]));

    // Two receives given back, then the third finds nothing: the message went to the
    // dead-letter queue, where a receive finds it.
    ok(
        &w,
        "SendMessage",
        json!({ "QueueUrl": url, "MessageBody": "poison" }),
    )
    .await;
    for _ in 0..2 {
        let got = ok(&w, "ReceiveMessage", json!({ "QueueUrl": url })).await;
        let handle = got["Messages"][0]["ReceiptHandle"].clone();
        ok(
            &w,
            "ChangeMessageVisibility",
            json!({ "QueueUrl": url, "ReceiptHandle": handle, "VisibilityTimeout": 0 }),
        )
        .await;
    }
    assert_eq!(
        ok(&w, "ReceiveMessage", json!({ "QueueUrl": url })).await,
        json!({})
    );
    let attrs = ok(
        &w,
        "GetQueueAttributes",
        json!({ "QueueUrl": dlq, "AttributeNames": ["ApproximateNumberOfMessages"] }),
    )
    .await;
    assert_eq!(attrs["Attributes"]["ApproximateNumberOfMessages"], "1");
    let got = ok(
        &w,
        "ReceiveMessage",
        json!({ "QueueUrl": dlq, "MessageSystemAttributeNames": ["ApproximateReceiveCount"] }),
    )
    .await;
    assert_eq!(got["Messages"][0]["Body"], "poison");
    assert_eq!(
        got["Messages"][0]["Attributes"]["ApproximateReceiveCount"],
        "1"
    );

    // Redrive back to the source (its one source queue): the messages that are not in
    // flight move, so the lease is given up first.
    let handle = got["Messages"][0]["ReceiptHandle"].clone();
    ok(
        &w,
        "ChangeMessageVisibility",
        json!({ "QueueUrl": dlq, "ReceiptHandle": handle, "VisibilityTimeout": 0 }),
    )
    .await;
    let moved = ok(
        &w,
        "StartMessageMoveTask",
        json!({ "SourceArn": "arn:aws:sqs:mqlite:000000000000:orders-dlq" }),
    )
    .await;
    assert!(moved["TaskHandle"].as_str().is_some_and(|h| !h.is_empty()));
    let back = ok(&w, "ReceiveMessage", json!({ "QueueUrl": url })).await;
    assert_eq!(back["Messages"][0]["Body"], "poison");
    assert_eq!(
        ok(&w, "ReceiveMessage", json!({ "QueueUrl": dlq })).await,
        json!({})
    );

    // Refusals: a target that does not exist, a FIFO target for a standard queue, a
    // count out of range, a move from a queue that is no dead-letter queue.
    queue(&w, "jobs.fifo", json!({ "FifoQueue": "true" })).await;
    for (target, count) in [("missing", 2), ("jobs.fifo", 2), ("orders-dlq", 1001)] {
        let policy = json!({
            "deadLetterTargetArn": format!("arn:aws:sqs:mqlite:000000000000:{target}"),
            "maxReceiveCount": count,
        })
        .to_string();
        let (status, code, body) = sqs(
            &w,
            "SetQueueAttributes",
            json!({ "QueueUrl": url, "Attributes": { "RedrivePolicy": policy } }),
        )
        .await;
        assert_eq!(
            (status, code.as_str()),
            (400, "InvalidAttributeValue;Sender"),
            "{body}"
        );
    }
    refused(
        &w,
        "StartMessageMoveTask",
        json!({ "SourceArn": "arn:aws:sqs:mqlite:000000000000:orders" }),
        (400, "InvalidParameterValue;Sender"),
    )
    .await;
    // An empty policy removes it.
    ok(
        &w,
        "SetQueueAttributes",
        json!({ "QueueUrl": url, "Attributes": { "RedrivePolicy": "" } }),
    )
    .await;
    let sources = ok(&w, "ListDeadLetterSourceQueues", json!({ "QueueUrl": dlq })).await;
    assert_eq!(sources["queueUrls"], json!([]));
}

#[tokio::test]
async fn content_based_deduplication_names_a_message_by_its_body() {
    let w = world_with(AuthConfig::Off, |_| {}).await;
    let url = queue(
        &w,
        "cbd.fifo",
        json!({ "FifoQueue": "true", "ContentBasedDeduplication": "true" }),
    )
    .await;
    let send = |body: &str| json!({ "QueueUrl": url, "MessageBody": body, "MessageGroupId": "g" });
    let first = ok(&w, "SendMessage", send("same")).await;
    let again = ok(&w, "SendMessage", send("same")).await;
    assert_eq!(first["MessageId"], again["MessageId"]);
    let other = ok(&w, "SendMessage", send("other")).await;
    assert_ne!(first["MessageId"], other["MessageId"]);
    // Turned off, a send must give MessageDeduplicationId.
    ok(
        &w,
        "SetQueueAttributes",
        json!({ "QueueUrl": url, "Attributes": { "ContentBasedDeduplication": "false" } }),
    )
    .await;
    refused(
        &w,
        "SendMessage",
        send("third"),
        (400, "InvalidParameterValue;Sender"),
    )
    .await;
}

#[tokio::test]
async fn a_key_without_the_permission_is_denied() {
    let w = crate::common::world().await;
    let listener = w.create_key("listener", &["listen"]).await;
    let call = |action: &str, body: Value| {
        reqwest::Client::new()
            .post(format!("http://{}/", w.broker.addr()))
            .header("X-Amz-Target", format!("AmazonSQS.{action}"))
            .header("Content-Type", "application/x-amz-json-1.0")
            .header("Authorization", format!("Bearer {}", listener.token))
            .body(body.to_string())
            .send()
    };
    let response = call("CreateQueue", json!({ "QueueName": "q" }))
        .await
        .expect("an answer");
    assert_eq!(response.status().as_u16(), 403);
    assert_eq!(
        response.headers()["x-amzn-query-error"]
            .to_str()
            .expect("text"),
        "AccessDenied;Sender"
    );
    // CreateKey answers the key's SQS secret when the broker has an administrator token.
    assert_eq!(listener.sqs_secret_access_key.len(), 64);
}

#[tokio::test]
async fn refusals_carry_sqs_codes() {
    let (w, url) = open().await;
    for (action, body, expected) in [
        (
            "SendMessage",
            json!({ "QueueUrl": url }),
            "MissingParameter;Sender",
        ),
        (
            "ReceiveMessage",
            json!({ "QueueUrl": url, "MaxNumberOfMessages": 11 }),
            "InvalidParameterValue;Sender",
        ),
        (
            "SendMessage",
            json!({ "QueueUrl": url, "MessageBody": "x", "DelaySeconds": 901 }),
            "InvalidParameterValue;Sender",
        ),
        (
            "SendMessage",
            json!({ "QueueUrl": url, "MessageBody": "x", "MessageGroupId": "g" }),
            "InvalidParameterValue;Sender",
        ),
        (
            "SendMessage",
            json!({ "QueueUrl": url, "MessageBody": "x",
                    "MessageAttributes": { "AWS.x": { "DataType": "String", "StringValue": "v" } } }),
            "InvalidParameterValue;Sender",
        ),
        (
            "CreateQueue",
            json!({ "QueueName": "jobs.fifo" }),
            "InvalidParameterValue;Sender",
        ),
        (
            "CreateQueue",
            json!({ "QueueName": "jobs", "Attributes": { "FifoQueue": "true" } }),
            "InvalidParameterValue;Sender",
        ),
        (
            "CreateQueue",
            json!({ "QueueName": "jobs", "Attributes": { "FifoQueue": "false" } }),
            "InvalidAttributeName;Sender",
        ),
        (
            "CreateQueue",
            json!({ "QueueName": "has space" }),
            "InvalidParameterValue;Sender",
        ),
        (
            "TagQueue",
            json!({ "QueueUrl": url }),
            "AWS.SimpleQueueService.UnsupportedOperation;Sender",
        ),
        (
            "PurgeQueue",
            json!({ "QueueUrl": "http://x/000000000000/none" }),
            "AWS.SimpleQueueService.NonExistentQueue;Sender",
        ),
        ("Frobnicate", json!({}), "UnknownOperationException;Sender"),
        (
            "SendMessage",
            json!({ "QueueUrl": "http://x/000000000000/none", "MessageBody": "x" }),
            "AWS.SimpleQueueService.NonExistentQueue;Sender",
        ),
    ] {
        let (status, code, body) = sqs(&w, action, body).await;
        assert_eq!((status, code.as_str()), (400, expected), "{action}: {body}");
        assert!(
            body["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{body}"
        );
    }

    // Auth on: a key id other than `admin` cannot sign (mqlite's keys keep no secret
    // yet), and `admin` with a wrong secret does not match; a bad header is incomplete.
    let guarded = crate::common::world().await;
    let signed = |authorization: String| {
        reqwest::Client::new()
            .post(format!("http://{}/", guarded.broker.addr()))
            .header("X-Amz-Target", "AmazonSQS.ListQueues")
            .header("Content-Type", "application/x-amz-json-1.0")
            .header("X-Amz-Date", "20231114T221320Z")
            .header("Authorization", authorization)
            .body("{}")
            .send()
    };
    let zeros = "0".repeat(64);
    for (key, expected) in [
        ("someone", (403, "InvalidClientTokenId;Sender")),
        ("admin", (403, "SignatureDoesNotMatch;Sender")),
    ] {
        let response = signed(format!(
            "AWS4-HMAC-SHA256 Credential={key}/20231114/us-east-1/sqs/aws4_request, \
             SignedHeaders=host;x-amz-date, Signature={zeros}"
        ))
        .await
        .expect("an answer");
        let code = response.headers()["x-amzn-query-error"]
            .to_str()
            .expect("text")
            .to_owned();
        assert_eq!(
            (response.status().as_u16(), code.as_str()),
            expected,
            "{key}"
        );
    }
    let response = signed("AWS4-HMAC-SHA256 Credential=admin".into())
        .await
        .expect("an answer");
    assert_eq!(response.status().as_u16(), 400);
    assert_eq!(
        response.headers()["x-amzn-query-error"]
            .to_str()
            .expect("text"),
        "IncompleteSignature;Sender"
    );
}

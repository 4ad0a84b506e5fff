//! Each error code of the wire contract, auth (missing, wrong, revoked, expired,
//! insufficient), limits, and a table of malformed requests that all get 4xx and
//! change nothing.

use crate::common;

use common::*;
use mqlite_broker::wire::*;
use mqlite_broker::{AuthConfig, Rpc};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_error_code_with_its_status() {
    let w = world_with(AuthConfig::Tokens(vec![ADMIN.into()]), |c| {
        c.max_message_bytes = 1024;
    })
    .await;
    w.create_queue(
        "q",
        WireQueueConfig {
            dedup_window_ms: Some(60_000),
            ..Default::default()
        },
    )
    .await;
    w.create_queue(
        "fifo",
        WireQueueConfig {
            ordering_mode: Some("group_fifo".into()),
            ..Default::default()
        },
    )
    .await;
    let send = |queue: &str, m: WireMessage| SendRequest {
        queue: queue.into(),
        messages: vec![m],
        ..Default::default()
    };

    // 400 invalid_argument: a bad queue name.
    let r = w
        .client
        .call::<_, SendResponse>(Rpc::Send, &send("", WireMessage::with_body("x")))
        .await;
    assert_eq!(code(r), (400, "invalid_argument".into()));
    // 400 group_required.
    let r = w
        .client
        .call::<_, SendResponse>(Rpc::Send, &send("fifo", WireMessage::with_body("x")))
        .await;
    assert_eq!(code(r), (400, "group_required".into()));
    // 404 not_found.
    let r = w
        .client
        .call::<_, SendResponse>(Rpc::Send, &send("missing", WireMessage::with_body("x")))
        .await;
    assert_eq!(code(r), (404, "not_found".into()));
    // 409 already_exists: the same id with another body, within the window.
    let first = WireMessage {
        message_id: "m-1".into(),
        ..WireMessage::with_body("one")
    };
    let other = WireMessage {
        message_id: "m-1".into(),
        ..WireMessage::with_body("two")
    };
    let _: SendResponse = w
        .client
        .call(Rpc::Send, &send("q", first))
        .await
        .expect("send");
    let r = w
        .client
        .call::<_, SendResponse>(Rpc::Send, &send("q", other.clone()))
        .await;
    assert_eq!(code(r), (409, "already_exists".into()));
    // In a batch, the conflicting slot is 0 and the rest go through.
    let batch: SendResponse = w
        .client
        .call(
            Rpc::Send,
            &SendRequest {
                queue: "q".into(),
                messages: vec![other, WireMessage::with_body("fresh")],
                ..Default::default()
            },
        )
        .await
        .expect("batch");
    assert_eq!(batch.seq_numbers[0], 0);
    assert!(batch.seq_numbers[1] > 0);
    // 409 lock_lost: a token that never held the message.
    let m = w.receive("q", 1).await.remove(0);
    let r = w
        .settle(Rpc::Complete, "q", &m, |r| {
            r.lock_token = "0".repeat(31) + "1";
        })
        .await;
    assert_eq!(code(r), (409, "lock_lost".into()));
    // 409 name_conflict: a topic over a queue's name.
    let r = w
        .client
        .call::<_, Empty>(
            Rpc::CreateQueue,
            &CreateQueueRequest {
                name: "q".into(),
                config: WireQueueConfig {
                    kind: Some("topic".into()),
                    ..Default::default()
                },
            },
        )
        .await;
    assert_eq!(code(r), (409, "name_conflict".into()));
    // 409 key_conflict: a repeated key id.
    let key = CreateKeyRequest {
        id: "ab".repeat(16),
        name: "k".into(),
        permissions: vec!["listen".into()],
        expires_at_ms: 0,
    };
    let _: WireKey = w.client.call(Rpc::CreateKey, &key).await.expect("key");
    let r = w.client.call::<_, WireKey>(Rpc::CreateKey, &key).await;
    assert_eq!(code(r), (409, "key_conflict".into()));
    // 404 for revoking a key that never existed.
    let r = w
        .client
        .call::<_, Empty>(
            Rpc::RevokeKey,
            &RevokeKeyRequest {
                id: "cd".repeat(16),
            },
        )
        .await;
    assert_eq!(code(r), (404, "not_found".into()));
    // 413 message_too_large: a body over the configured 1 KiB.
    let r = w
        .client
        .call::<_, SendResponse>(
            Rpc::Send,
            &send("q", WireMessage::with_body(vec![b'x'; 1025])),
        )
        .await;
    assert_eq!(code(r), (413, "message_too_large".into()));
    // 413 for a request over 32 MiB, whatever it holds.
    let huge = vec![b' '; mqlite_broker::MAX_REQUEST_BYTES + 1];
    let r = w
        .client
        .call_raw::<SendResponse>(&Rpc::Send.path(), huge)
        .await;
    assert_eq!(code(r), (413, "message_too_large".into()));
    // RenewBatch over 512 items is 400.
    let items: Vec<LockItem> = (1..=513)
        .map(|i| LockItem {
            seq_number: i,
            lock_token: m.lock_token.clone(),
        })
        .collect();
    let r = w
        .client
        .call::<_, BatchResponse>(
            Rpc::RenewBatch,
            &BatchRequest {
                queue: "q".into(),
                messages: items,
            },
        )
        .await;
    assert_eq!(code(r), (400, "invalid_argument".into()));
    // Receive and Peek refuse a negative count or wait (zero and over-large ones are
    // clamped, as the contract says: dropin.rs).
    for (max, wait) in [(-1, 0), (1, -1)] {
        let r = w
            .client
            .call::<_, MessagesResponse>(
                Rpc::Receive,
                &ReceiveRequest {
                    queue: "q".into(),
                    max_messages: Some(max),
                    wait_time_ms: Some(wait),
                    ..Default::default()
                },
            )
            .await;
        assert_eq!(
            code(r),
            (400, "invalid_argument".into()),
            "max {max} wait {wait}"
        );
    }
    let r = w
        .client
        .call::<_, MessagesResponse>(
            Rpc::Peek,
            &PeekRequest {
                queue: "q".into(),
                max: Some(-1),
                ..Default::default()
            },
        )
        .await;
    assert_eq!(code(r), (400, "invalid_argument".into()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_missing_wrong_revoked_expired_and_insufficient() {
    let w = world().await;
    w.create_queue("q", WireQueueConfig::default()).await;
    let stats = QueueRequest { queue: "q".into() };

    // Missing and wrong tokens are 401.
    let anonymous = w.client.with_token(None);
    let r = anonymous.call::<_, StatsResponse>(Rpc::Stats, &stats).await;
    assert_eq!(code(r), (401, "unauthenticated".into()));
    let wrong = w.client.with_token(Some("not-a-token".into()));
    let r = wrong.call::<_, StatsResponse>(Rpc::Stats, &stats).await;
    assert_eq!(code(r), (401, "unauthenticated".into()));

    // A send-only key sends, and may not receive or administer: 403.
    let key: WireKey = w
        .client
        .call(
            Rpc::CreateKey,
            &CreateKeyRequest {
                name: "producer".into(),
                permissions: vec!["send".into()],
                ..Default::default()
            },
        )
        .await
        .expect("key");
    let producer = w.client.with_token(Some(key.token.clone()));
    let sent: SendResponse = producer
        .call(
            Rpc::Send,
            &SendRequest {
                queue: "q".into(),
                messages: vec![WireMessage::with_body("from the key")],
                ..Default::default()
            },
        )
        .await
        .expect("a send key sends");
    assert_eq!(sent.seq_numbers.len(), 1);
    let r = producer
        .call::<_, MessagesResponse>(
            Rpc::Receive,
            &ReceiveRequest {
                queue: "q".into(),
                ..Default::default()
            },
        )
        .await;
    assert_eq!(code(r), (403, "permission_denied".into()));
    let r = producer
        .call::<_, QueuesResponse>(Rpc::ListQueues, &Empty {})
        .await;
    assert_eq!(code(r), (403, "permission_denied".into()));
    let (status, _) = producer.get("/metrics").await.expect("metrics");
    assert_eq!(status, 403);

    // A listen key receives; a manage key administers.
    let listen: WireKey = w
        .client
        .call(
            Rpc::CreateKey,
            &CreateKeyRequest {
                name: "consumer".into(),
                permissions: vec!["listen".into()],
                ..Default::default()
            },
        )
        .await
        .expect("key");
    let consumer = w.client.with_token(Some(listen.token));
    let got: MessagesResponse = consumer
        .call(
            Rpc::Receive,
            &ReceiveRequest {
                queue: "q".into(),
                ..Default::default()
            },
        )
        .await
        .expect("a listen key receives");
    assert_eq!(got.messages.len(), 1);
    let manage: WireKey = w
        .client
        .call(
            Rpc::CreateKey,
            &CreateKeyRequest {
                name: "ops".into(),
                permissions: vec!["manage".into()],
                ..Default::default()
            },
        )
        .await
        .expect("key");
    let ops = w.client.with_token(Some(manage.token));
    let _: QueuesResponse = ops
        .call(Rpc::ListQueues, &Empty {})
        .await
        .expect("a manage key administers");

    // Revocation takes effect on the next call.
    let _: Empty = w
        .client
        .call(Rpc::RevokeKey, &RevokeKeyRequest { id: key.id })
        .await
        .expect("revoke");
    let r = producer
        .call::<_, SendResponse>(
            Rpc::Send,
            &SendRequest {
                queue: "q".into(),
                messages: vec![WireMessage::with_body("after revocation")],
                ..Default::default()
            },
        )
        .await;
    assert_eq!(code(r), (401, "unauthenticated".into()));

    // An expired key is refused from its expiry on.
    let expiring: WireKey = w
        .client
        .call(
            Rpc::CreateKey,
            &CreateKeyRequest {
                name: "temp".into(),
                permissions: vec!["listen".into()],
                expires_at_ms: START_MS + 1_000,
                ..Default::default()
            },
        )
        .await
        .expect("key");
    let temp = w.client.with_token(Some(expiring.token));
    let _: StatsResponse = temp.call(Rpc::Stats, &stats).await.expect("before expiry");
    w.clock.advance(1_000);
    let r = temp.call::<_, StatsResponse>(Rpc::Stats, &stats).await;
    assert_eq!(code(r), (401, "unauthenticated".into()));
    assert_eq!(
        w.stats("q").await.total,
        1,
        "nothing a refused call sent landed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_off_lets_anyone_call() {
    let w = world_with(AuthConfig::Off, |_| {}).await;
    let anonymous = w.client.with_token(None);
    let _: Empty = anonymous
        .call(
            Rpc::CreateQueue,
            &CreateQueueRequest {
                name: "open".into(),
                config: WireQueueConfig::default(),
            },
        )
        .await
        .expect("auth off");
    let (_, card) = anonymous.get("/").await.expect("card");
    assert!(card.contains(r#""auth":"none""#), "{card}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_get_4xx_and_change_nothing() {
    let w = world().await;
    w.create_queue("q", WireQueueConfig::default()).await;
    w.send("q", &["kept"]).await;
    let held = w.receive("q", 1).await.remove(0);
    w.send("q", &["waiting"]).await;
    let before = w.stats("q").await;
    let token = held.lock_token.clone();
    let seq = held.seq_number;
    let rows: Vec<(Rpc, String)> = vec![
        (Rpc::Send, "not json".into()),
        (Rpc::Send, "[1,2,3]".into()),
        (Rpc::Send, r#""a string""#.into()),
        (Rpc::Send, r#"{"queue": 7, "messages": []}"#.into()),
        (Rpc::Send, r#"{"queue": "q", "messages": "no"}"#.into()),
        (Rpc::Send, r#"{"queue": "q", "messages": []}"#.into()),
        (
            Rpc::Send,
            r#"{"queue": "q", "messages": [{"body": "%%%not base64"}]}"#.into(),
        ),
        (
            Rpc::Send,
            r#"{"queue": "q", "messages": [{"body": "eA=="}], "ttl_ms": -5}"#.into(),
        ),
        (
            Rpc::Send,
            r#"{"queue": "q", "messages": [{"body": "eA=="}], "ttl_ms": 1e40}"#.into(),
        ),
        (
            Rpc::Send,
            r#"{"queue": "q", "messages": [{"body": "eA=="}], "scheduled_enqueue_time_ms": -1}"#
                .into(),
        ),
        (
            Rpc::Send,
            r#"{"queue": "q\u0000", "messages": [{"body": "eA=="}]}"#.into(),
        ),
        (
            Rpc::Schedule,
            r#"{"queue": "q", "messages": [{"body": "eA=="}]}"#.into(),
        ),
        (
            Rpc::Receive,
            r#"{"queue": "q", "max_messages": 99999999999999999999}"#.into(),
        ),
        (Rpc::Receive, r#"{"queue": "q", "receive_mode": 7}"#.into()),
        (
            Rpc::Receive,
            r#"{"queue": "q", "wait_time_ms": "soon"}"#.into(),
        ),
        (
            Rpc::Complete,
            format!(r#"{{"queue": "q", "seq_number": {seq}, "lock_token": "xyz"}}"#),
        ),
        (
            Rpc::Complete,
            format!(r#"{{"queue": "q", "seq_number": "{seq}", "lock_token": "{token}"}}"#),
        ),
        (
            Rpc::Abandon,
            format!(
                r#"{{"queue": "q", "seq_number": {seq}, "lock_token": "{token}", "delay_ms": -1}}"#
            ),
        ),
        (
            Rpc::Abandon,
            format!(
                r#"{{"queue": "q", "seq_number": {seq}, "lock_token": "{token}", "delay_ms": 999999999999}}"#
            ),
        ),
        (
            Rpc::Complete,
            format!(r#"{{"queue": "other", "seq_number": {seq}, "lock_token": "{token}"}}"#),
        ),
        (
            Rpc::CompleteBatch,
            r#"{"queue": "q", "messages": [{"seq_number": "one"}]}"#.into(),
        ),
        (
            Rpc::CompleteBatch,
            r#"{"queue": "q", "messages": []}"#.into(),
        ),
        (Rpc::Peek, r#"{"queue": "q", "state": "sleeping"}"#.into()),
        (Rpc::Peek, r#"{"queue": "q", "max": -3}"#.into()),
        (Rpc::Stats, r#"{"queue": "nope"}"#.into()),
        (Rpc::CreateQueue, r#"{"name": "", "config": {}}"#.into()),
        (
            Rpc::CreateQueue,
            r#"{"name": "x", "config": {"lock_duration_ms": 0}}"#.into(),
        ),
        (
            Rpc::CreateQueue,
            r#"{"name": "x", "config": {"lock_duration_ms": -10}}"#.into(),
        ),
        (
            Rpc::CreateQueue,
            r#"{"name": "x", "config": {"ordering_mode": "random"}}"#.into(),
        ),
        (
            Rpc::CreateQueue,
            r#"{"name": "x", "config": {"kind": "stream"}}"#.into(),
        ),
        (
            Rpc::CreateQueue,
            r#"{"name": "x", "config": {"max_delivery_count": 0}}"#.into(),
        ),
        (
            Rpc::CreateQueue,
            r#"{"name": "t", "config": {"kind": "topic", "lock_duration_ms": 5000}}"#.into(),
        ),
        (Rpc::Redrive, r#"{"queue": "q", "max": -1}"#.into()),
        (Rpc::Purge, r#"{"queue": "q", "older_than_ms": -1}"#.into()),
        (
            Rpc::CreateKey,
            r#"{"name": "k", "permissions": ["root"]}"#.into(),
        ),
        (Rpc::CreateKey, r#"{"name": "k", "permissions": []}"#.into()),
        (
            Rpc::CreateKey,
            r#"{"id": "short", "name": "k", "permissions": ["send"]}"#.into(),
        ),
        (Rpc::ListKeys, r#"{"limit": 5000}"#.into()),
        (
            Rpc::Subscribe,
            r#"{"topic": "t", "name": "s", "filter": {"expr": "subject =="}}"#.into(),
        ),
        (
            Rpc::Subscribe,
            r#"{"topic": "t", "name": "s", "filter": "subject == \"a\""}"#.into(),
        ),
        (Rpc::TestFilter, r#"{"expr": 7}"#.into()),
        (
            Rpc::TestFilter,
            r#"{"expr": "true", "message": {"body": "%%%not base64"}}"#.into(),
        ),
        (
            Rpc::TestFilter,
            r#"{"expr": "true", "message": "x"}"#.into(),
        ),
        (Rpc::Unsubscribe, r#"{"topic": "t", "name": "s"}"#.into()),
    ];
    for (rpc, body) in &rows {
        let (status, bytes) = w
            .client
            .post_raw(&rpc.path(), body.clone())
            .await
            .expect("answered");
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            (400..500).contains(&status),
            "{} {body}: status {status}, {text}",
            rpc.method()
        );
        let envelope: ErrorBody = serde_json::from_slice(&bytes)
            .unwrap_or_else(|e| panic!("{} {body}: not an envelope ({e}): {text}", rpc.method()));
        assert!(!envelope.code.is_empty() && !envelope.message.is_empty());
    }
    let after = w.stats("q").await;
    assert_eq!(
        (after.active, after.locked, after.total),
        (before.active, before.locked, before.total),
        "nothing changed"
    );
    let queues: QueuesResponse = w
        .client
        .call(Rpc::ListQueues, &Empty {})
        .await
        .expect("list");
    assert_eq!(queues.queues.len(), 1, "no queue was created");
    let keys: ListKeysResponse = w
        .client
        .call(Rpc::ListKeys, &ListKeysRequest::default())
        .await
        .expect("keys");
    assert!(keys.keys.is_empty(), "no key was created");
    // The held message is still held by its token.
    assert!(
        w.settle(Rpc::Complete, "q", &held, |_| {})
            .await
            .expect("complete")
            .ok
    );
}

/// Configured tokens: `off` alone turns auth off, but is never a token in a list; a
/// token shorter than 16 characters is refused with the rule (and without echoing the
/// token); a tokens file reads one per line.
#[test]
fn configured_tokens_are_long_and_never_reserved_words() {
    use mqlite_broker::config::MIN_TOKEN_LEN;
    assert_eq!(
        AuthConfig::parse(Some("off")).expect("off"),
        Some(AuthConfig::Off)
    );
    assert_eq!(AuthConfig::parse(None).expect("unset"), None);
    let long = "a-token-of-enough-length";
    for (value, says) in [
        ("off,a-token-of-enough-length", "the word \"off\""),
        ("a-token-of-enough-length,NONE", "the word \"NONE\""),
        ("s3cret", "at least 16"),
        (" , ", "holds no token"),
    ] {
        let e = AuthConfig::parse(Some(value)).expect_err(value).to_string();
        assert!(e.contains(says), "{value}: {e}");
        assert!(!e.contains("s3cret"), "the token is echoed: {e}");
    }
    assert_eq!(
        AuthConfig::parse(Some(&format!(" {long} ,{long}2 "))).expect("tokens"),
        Some(AuthConfig::Tokens(vec![long.into(), format!("{long}2")]))
    );
    assert_eq!(MIN_TOKEN_LEN, 16);

    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("tokens");
    std::fs::write(&file, format!("# admins\n{long}\n\n{long}2\n")).expect("writes");
    assert_eq!(
        AuthConfig::from_file(&file).expect("reads"),
        AuthConfig::Tokens(vec![long.into(), format!("{long}2")])
    );
    std::fs::write(&file, "short\n").expect("writes");
    let e = AuthConfig::from_file(&file).expect_err("short").to_string();
    assert!(
        e.contains("MQLITE_TOKENS_FILE") && e.contains("at least 16"),
        "{e}"
    );
    let e = AuthConfig::from_file(&dir.path().join("missing"))
        .expect_err("missing")
        .to_string();
    assert!(e.contains("cannot read"), "{e}");
}

/// The auth scheme is matched case-insensitively (RFC 7235); a key whose expiry has
/// already passed is refused at create.
#[tokio::test]
async fn the_bearer_scheme_is_case_insensitive_and_keys_are_not_born_expired() {
    let w = world().await;
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        let status = reqwest::Client::new()
            .post(format!("http://{}{}", w.broker.addr(), Rpc::WhoAmI.path()))
            .header("authorization", format!("{scheme} {ADMIN}"))
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await
            .expect("answered")
            .status();
        assert_eq!(status, 200, "{scheme}");
    }
    let r = w
        .client
        .call::<_, WireKey>(
            Rpc::CreateKey,
            &CreateKeyRequest {
                name: "late".into(),
                permissions: vec!["send".into()],
                expires_at_ms: START_MS - 1,
                ..Default::default()
            },
        )
        .await;
    assert_eq!(code(r), (400, "invalid_argument".into()));
}

/// A look-alike name (a bidi override, a zero-width space, a BOM) is refused at create
/// with the rule and the offending code point.
#[tokio::test]
async fn look_alike_names_are_refused_with_the_rule() {
    let w = world().await;
    for name in ["jobs\u{202E}", "\u{FEFF}jobs", "jo\u{200B}bs"] {
        let r = w
            .client
            .call::<_, Empty>(
                Rpc::CreateQueue,
                &CreateQueueRequest {
                    name: name.into(),
                    config: Default::default(),
                },
            )
            .await;
        let (status, code, message) = api_error(r);
        assert_eq!(
            (status, code.as_str()),
            (400, "invalid_argument"),
            "{name:?}"
        );
        assert!(message.contains("format characters"), "{message}");
    }
    let queues: QueuesResponse = w
        .client
        .call(Rpc::ListQueues, &Empty {})
        .await
        .expect("ListQueues");
    assert!(queues.queues.is_empty());
}

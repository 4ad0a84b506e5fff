//! The public mqlite broker's wire contract, row by row, as its published documentation
//! (docs/api-reference.md of mqlitehq/mqlite) states it: a client written against that
//! broker gets the same status and code here. Each test names the row it pins.

use crate::common;

use common::*;
use mqlite_broker::Rpc;
use mqlite_broker::wire::*;

/// Posts `body` to `rpc` and reads the status and the error envelope's code (empty on
/// success).
async fn post(w: &World, rpc: Rpc, body: String) -> (u16, String, serde_json::Value) {
    let (status, bytes) = w
        .client
        .post_raw(&rpc.path(), body)
        .await
        .expect("answered");
    let json: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
    let code = json["code"].as_str().unwrap_or_default().to_owned();
    (status, code, json)
}

/// "Settling with an expired or wrong `lock_token` → `409 lock_lost`": a token that is
/// not even a lock token is wrong, not malformed; in a batch it is that item's
/// `ok: false`, and the other items settle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_lock_token_is_lock_lost() {
    let w = world().await;
    w.create_queue("q", WireQueueConfig::default()).await;
    w.send("q", &["a", "b"]).await;
    let held = w.receive("q", 2).await;
    for rpc in [
        Rpc::Complete,
        Rpc::Abandon,
        Rpc::Renew,
        Rpc::Defer,
        Rpc::Reject,
    ] {
        for token in [
            "deadbeef",
            "",
            "not hex at all, and far too long for a token",
        ] {
            let body = format!(
                r#"{{"queue": "q", "seq_number": {}, "lock_token": "{token}"}}"#,
                held[0].seq_number
            );
            let (status, code, _) = post(&w, rpc, body).await;
            assert_eq!(
                (status, code.as_str()),
                (409, "lock_lost"),
                "{rpc:?} {token:?}"
            );
        }
    }
    let body = format!(
        r#"{{"queue": "q", "messages": [{{"seq_number": {}, "lock_token": "deadbeef"}}, {{"seq_number": {}, "lock_token": "{}"}}]}}"#,
        held[0].seq_number, held[1].seq_number, held[1].lock_token
    );
    let (status, _, json) = post(&w, Rpc::CompleteBatch, body).await;
    assert_eq!(status, 200, "{json}");
    let oks: Vec<(i64, bool)> = json["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            (
                r["seq_number"].as_i64().unwrap_or(0),
                r["ok"].as_bool().unwrap_or(false),
            )
        })
        .collect();
    assert_eq!(
        oks,
        [(held[0].seq_number, false), (held[1].seq_number, true)]
    );
    let stats = w.stats("q").await;
    assert_eq!(
        (stats.locked, stats.total),
        (1, 1),
        "only the good item settled"
    );
}

/// Status's `auth` is a boolean (`StatusResponse`: "`auth` (bool)"); the discovery card
/// keeps its string (`bearer` / `none`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_says_auth_as_a_boolean() {
    let w = world().await;
    let (status, _, json) = post(&w, Rpc::Status, "{}".into()).await;
    assert_eq!(
        (status, &json["auth"]),
        (200, &serde_json::Value::Bool(true))
    );
    let open = world_with(mqlite_broker::AuthConfig::Off, |_| {}).await;
    let (_, _, json) = post(&open, Rpc::Status, "{}".into()).await;
    assert_eq!(json["auth"], false);
    let (_, card) = open.client.get("/").await.expect("card");
    assert!(card.contains(r#""auth":"none""#), "{card}");
}

/// Receive's and Peek's counts are clamped, not refused: `max_messages` 0 takes one and
/// more than 256 takes 256, `wait_time_ms` over 20,000 waits 20 s at most, Peek's `max`
/// 0 is the default page of 32 and more than 1,000 is 1,000.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receive_and_peek_counts_are_clamped() {
    let w = world().await;
    w.create_queue("q", WireQueueConfig::default()).await;
    let bodies: Vec<String> = (0..300).map(|i| format!("m{i}")).collect();
    let refs: Vec<&str> = bodies.iter().map(String::as_str).collect();
    for chunk in refs.chunks(100) {
        w.send("q", chunk).await;
    }
    for (max, got) in [(0, 32), (5000, 300)] {
        let (status, _, json) =
            post(&w, Rpc::Peek, format!(r#"{{"queue": "q", "max": {max}}}"#)).await;
        assert_eq!(status, 200, "{json}");
        assert_eq!(
            json["messages"].as_array().map(Vec::len),
            Some(got),
            "Peek max {max}"
        );
    }
    for (max, got) in [(0, 1), (1000, 256)] {
        let body = format!(r#"{{"queue": "q", "max_messages": {max}, "wait_time_ms": 99999}}"#);
        let (status, _, json) = post(&w, Rpc::Receive, body).await;
        assert_eq!(status, 200, "{json}");
        assert_eq!(
            json["messages"].as_array().map(Vec::len),
            Some(got),
            "Receive max {max}"
        );
    }
}

/// A GET on an RPC route is 405 with the error envelope (`unimplemented`), so a client
/// that decodes every error body can read it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_method_on_an_rpc_route_is_405_with_an_envelope() {
    let w = world().await;
    let url = format!("http://{}{}", w.broker.addr(), Rpc::Send.path());
    let answer = reqwest::Client::new()
        .get(&url)
        .send()
        .await
        .expect("answered");
    assert_eq!(answer.status().as_u16(), 405);
    let json: serde_json::Value = answer.json().await.expect("a JSON body");
    assert_eq!(json["code"], "unimplemented", "{json}");
    assert!(
        json["message"].as_str().is_some_and(|m| m.contains("POST")),
        "{json}"
    );
}

/// "A topic comes into being with its first subscription": Subscribe to a topic that
/// does not exist creates it, and a publish reaches the subscription.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribe_creates_its_topic() {
    let w = world().await;
    w.subscribe("orders", "audit", "").await.expect("Subscribe");
    let queues: QueuesResponse = w
        .client
        .call(Rpc::ListQueues, &Empty {})
        .await
        .expect("ListQueues");
    let kinds: Vec<(String, String)> = queues
        .queues
        .iter()
        .map(|q| (q.name.clone(), q.kind.clone()))
        .collect();
    assert!(
        kinds.contains(&("orders".into(), "topic".into())),
        "{kinds:?}"
    );
    w.send("orders", &["o1"]).await;
    assert_eq!(
        w.stats("audit").await.active,
        1,
        "published to the subscription"
    );
}

/// Name conflicts are 409 `name_conflict`: a Subscribe whose topic names a queue or a
/// subscription, a Subscribe whose topic is its own name, and CreateQueue with `kind:
/// "subscription"` over a plain queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn name_conflicts_are_409() {
    let w = world().await;
    w.create_queue("plain", WireQueueConfig::default()).await;
    w.subscribe("t", "s", "").await.expect("Subscribe");
    for (rpc, body) in [
        (Rpc::Subscribe, r#"{"topic": "plain", "name": "x"}"#),
        (Rpc::Subscribe, r#"{"topic": "s", "name": "y"}"#),
        (Rpc::Subscribe, r#"{"topic": "same", "name": "same"}"#),
        (Rpc::Subscribe, r#"{"topic": "t", "name": "plain"}"#),
        (
            Rpc::CreateQueue,
            r#"{"name": "plain", "config": {"kind": "subscription"}}"#,
        ),
    ] {
        let (status, code, json) = post(&w, rpc, body.into()).await;
        assert_eq!(
            (status, code.as_str()),
            (409, "name_conflict"),
            "{body}: {json}"
        );
    }
    // Re-subscribing, and CreateQueue over the subscription's own backing queue, update it.
    w.subscribe("t", "s", "").await.expect("re-Subscribe");
    let (status, _, json) = post(
        &w,
        Rpc::CreateQueue,
        r#"{"name": "s", "config": {"kind": "subscription", "max_delivery_count": 3}}"#.into(),
    )
    .await;
    assert_eq!(status, 200, "{json}");
    let queues: QueuesResponse = w
        .client
        .call(Rpc::ListQueues, &Empty {})
        .await
        .expect("ListQueues");
    let s = queues.queues.iter().find(|q| q.name == "s").expect("s");
    assert_eq!(s.max_delivery_count, 3, "{s:?}");
}

/// An unattended broker bounds its dead letters by default (14 days, 1,000,000 per
/// queue), the bounds set by `MQLITE_DLQ_MAX_*`, `MQLITE_DLQ_RETENTION=off` keeping
/// every one; here a count of 2 drops the oldest at the sweep.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letter_retention_has_defaults_and_settings() {
    use mqlite_broker::config::{DEFAULT_RETENTION, retention};
    let fourteen_days = std::time::Duration::from_secs(14 * 24 * 3600);
    assert_eq!(
        (DEFAULT_RETENTION.max_age, DEFAULT_RETENTION.max_count),
        (fourteen_days, 1_000_000)
    );
    assert_eq!(
        retention(None, None, None, None).expect("defaults"),
        DEFAULT_RETENTION
    );
    let set = retention(None, Some("336h"), Some("2"), Some("0")).expect("set");
    assert_eq!(
        (set.max_age, set.max_count, set.max_bytes),
        (fourteen_days, 2, 0)
    );
    let off = retention(Some("off"), Some("1d"), None, None).expect("off");
    assert_eq!(
        off,
        mqlite::RetentionDefaults::default(),
        "off keeps every dead letter"
    );
    assert!(retention(None, Some("soon"), None, None).is_err());
    assert!(retention(None, None, Some("-1"), None).is_err());

    let w = world_with(
        mqlite_broker::AuthConfig::Tokens(vec![ADMIN.to_owned()]),
        |c| c.retention = set,
    )
    .await;
    w.create_queue("q", WireQueueConfig::default()).await;
    w.send("q", &["a", "b", "c"]).await;
    for m in w.receive("q", 3).await {
        let body = format!(
            r#"{{"queue": "q", "seq_number": {}, "lock_token": "{}"}}"#,
            m.seq_number, m.lock_token
        );
        assert_eq!(post(&w, Rpc::Reject, body).await.0, 200);
    }
    assert_eq!(w.stats("q").await.dead_lettered, 3);
    w.run_sweeps().await;
    assert_eq!(
        w.stats("q").await.dead_lettered,
        2,
        "the oldest was dropped"
    );
}

/// `/metrics` speaks the public broker's names: messages by state, the total and the
/// oldest message's age per queue, completions since start, and the RPC latency
/// histogram labelled `Service/Method`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_carry_the_public_names() {
    let w = world().await;
    w.create_queue("orders", WireQueueConfig::default()).await;
    w.send("orders", &["a", "b", "c"]).await;
    let got = w.receive("orders", 2).await;
    let body = format!(
        r#"{{"queue": "orders", "seq_number": {}, "lock_token": "{}"}}"#,
        got[0].seq_number, got[0].lock_token
    );
    assert_eq!(post(&w, Rpc::Complete, body).await.0, 200);
    let body = format!(
        r#"{{"queue": "orders", "messages": [{{"seq_number": {}, "lock_token": "{}"}}]}}"#,
        got[1].seq_number, got[1].lock_token
    );
    assert_eq!(post(&w, Rpc::CompleteBatch, body).await.0, 200);
    w.clock.advance(1_500);
    let (status, text) = w.client.get("/metrics").await.expect("scrape");
    assert_eq!(status, 200);
    for line in [
        r#"mqlite_queue_messages{queue="orders",state="active"} 1"#,
        r#"mqlite_queue_total{queue="orders"} 1"#,
        r#"mqlite_queue_oldest_message_age_ms{queue="orders"} 1500"#,
        r#"mqlite_messages_completed_total{queue="orders"} 2"#,
        r#"mqlite_rpc_duration_seconds_count{rpc="QueueService/Receive"} 1"#,
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
    }
}

/// CORS (`MQLITE_CORS`): with auth on, any origin by default (a call still needs the
/// bearer token); with auth off, none unless origins are named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cors_answers_preflights_for_the_allowed_origins() {
    use mqlite_broker::config::Cors;
    async fn preflight(w: &World, origin: &str) -> reqwest::Response {
        let url = format!("http://{}{}", w.broker.addr(), Rpc::Send.path());
        reqwest::Client::new()
            .request(reqwest::Method::OPTIONS, &url)
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "authorization, content-type",
            )
            .send()
            .await
            .expect("answered")
    }
    let allow = |r: &reqwest::Response| {
        r.headers()
            .get("access-control-allow-origin")
            .map(|v| v.to_str().unwrap_or_default().to_owned())
    };

    let w = world().await;
    let r = preflight(&w, "https://app.example").await;
    assert_eq!(r.status().as_u16(), 204);
    assert_eq!(allow(&r).as_deref(), Some("*"));
    let headers = r.headers()["access-control-allow-headers"]
        .to_str()
        .unwrap_or_default();
    assert!(headers.contains("authorization") && headers.contains("content-type"));
    w.create_queue("q", WireQueueConfig::default()).await;
    let sent = reqwest::Client::new()
        .post(format!("http://{}{}", w.broker.addr(), Rpc::Send.path()))
        .header("origin", "https://app.example")
        .header("content-type", "application/json")
        .bearer_auth(ADMIN)
        .body(r#"{"queue": "q", "messages": [{"body": "aGk="}]}"#)
        .send()
        .await
        .expect("answered");
    assert_eq!(sent.status().as_u16(), 200);
    assert_eq!(allow(&sent).as_deref(), Some("*"));

    let closed = world_with(mqlite_broker::AuthConfig::Off, |_| {}).await;
    let r = preflight(&closed, "https://app.example").await;
    assert_eq!(r.status().as_u16(), 405, "auth off: no CORS unless asked");
    assert_eq!(allow(&r), None);

    let named = world_with(mqlite_broker::AuthConfig::Off, |c| {
        c.cors = Cors::parse("https://app.example, http://localhost:3000/").expect("origins");
    })
    .await;
    let r = preflight(&named, "https://app.example").await;
    assert_eq!(r.status().as_u16(), 204);
    assert_eq!(allow(&r).as_deref(), Some("https://app.example"));
    assert_eq!(
        allow(&preflight(&named, "https://evil.example").await),
        None
    );
    assert_eq!(Cors::parse("off").expect("off"), Cors::Off);
    assert!(
        Cors::parse("app.example").is_err(),
        "an origin has a scheme"
    );
}

/// DeleteQueue (an extension: the engine always could): a mistyped queue can be removed
/// from the broker, with its messages; a second delete says there was nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_can_be_deleted() {
    let w = world().await;
    w.create_queue("ordres", WireQueueConfig::default()).await;
    w.send("ordres", &["x"]).await;
    let (status, _, json) = post(&w, Rpc::DeleteQueue, r#"{"name": "ordres"}"#.into()).await;
    assert_eq!(
        (status, &json["deleted"]),
        (200, &serde_json::Value::Bool(true))
    );
    let (status, _, json) = post(&w, Rpc::DeleteQueue, r#"{"name": "ordres"}"#.into()).await;
    assert_eq!(
        (status, &json["deleted"]),
        (200, &serde_json::Value::Bool(false))
    );
    let (status, code, _) = post(&w, Rpc::Stats, r#"{"queue": "ordres"}"#.into()).await;
    assert_eq!((status, code.as_str()), (404, "not_found"));
}

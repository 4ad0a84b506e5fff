//! Topics with filtered subscriptions over the wire: Subscribe with a filter, Send to a
//! topic routing by it, TestFilter, an invalid filter refused with nothing stored, and
//! the Unsubscribe extension.

use crate::common;

use common::*;
use mqlite_broker::wire::*;
use mqlite_broker::{ClientError, Rpc};

impl World {
    async fn subscriptions(&self) -> Vec<(String, String, String)> {
        let r: SubscriptionsResponse = self
            .client
            .call(Rpc::ListSubscriptions, &Empty {})
            .await
            .expect("ListSubscriptions");
        r.subscriptions
            .into_iter()
            .map(|s| (s.topic, s.name, s.expr))
            .collect()
    }

    async fn send_messages(&self, queue: &str, messages: Vec<WireMessage>) -> Vec<i64> {
        let r: SendResponse = self
            .client
            .call(
                Rpc::Send,
                &SendRequest {
                    queue: queue.into(),
                    messages,
                    ..Default::default()
                },
            )
            .await
            .expect("Send");
        r.seq_numbers
    }

    /// Every body waiting in `queue`, received and completed.
    async fn drain(&self, queue: &str) -> Vec<String> {
        let got = self.receive(queue, 256).await;
        for m in &got {
            assert!(
                self.settle(Rpc::Complete, queue, m, |_| {})
                    .await
                    .expect("Complete")
                    .ok
            );
        }
        got.iter().map(text).collect()
    }

    async fn test_filter(
        &self,
        expr: &str,
        message: Option<WireMessage>,
    ) -> Result<TestFilterResponse, ClientError> {
        self.client
            .call(
                Rpc::TestFilter,
                &TestFilterRequest {
                    expr: expr.into(),
                    message,
                },
            )
            .await
    }
}

/// A message with this body and these properties.
fn message(body: &str, properties: &[(&str, &str)]) -> WireMessage {
    WireMessage {
        properties: properties
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        ..WireMessage::with_body(body)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filtered_subscription_takes_only_the_matching_messages_sent_to_its_topic() {
    let w = world().await;
    w.create_topic("orders").await;
    w.subscribe("orders", "big", "body_json.amount > 100")
        .await
        .expect("Subscribe big");
    w.subscribe("orders", "eu", r#"properties.region == "eu""#)
        .await
        .expect("Subscribe eu");
    w.subscribe("orders", "all", "")
        .await
        .expect("Subscribe all");
    assert_eq!(
        w.subscriptions().await,
        [
            ("orders".into(), "all".into(), String::new()),
            (
                "orders".into(),
                "big".into(),
                "body_json.amount > 100".into()
            ),
            (
                "orders".into(),
                "eu".into(),
                r#"properties.region == "eu""#.into()
            ),
        ]
    );

    // A batch (one transaction) and a single Send: both publish to the topic.
    let seqs = w
        .send_messages(
            "orders",
            vec![
                message(r#"{"amount":50}"#, &[("region", "eu")]),
                message(r#"{"amount":150}"#, &[("region", "us")]),
                message(r#"{"amount":500}"#, &[("region", "eu")]),
                WireMessage {
                    content_type: "text/plain".into(),
                    ..message("amount 1000", &[])
                },
            ],
        )
        .await;
    assert_eq!(seqs.len(), 4);
    assert!(
        seqs.iter().all(|s| *s > 0),
        "every message was routed: {seqs:?}"
    );
    let one = w
        .send_messages("orders", vec![message(r#"{"amount":101}"#, &[])])
        .await;
    assert!(one[0] > 0);

    assert_eq!(
        w.drain("big").await,
        [
            r#"{"amount":150}"#,
            r#"{"amount":500}"#,
            r#"{"amount":101}"#
        ]
    );
    assert_eq!(
        w.drain("eu").await,
        [r#"{"amount":50}"#, r#"{"amount":500}"#]
    );
    assert_eq!(w.drain("all").await.len(), 5);

    // A topic whose only subscription is filtered: a message it refuses is a valid
    // no-op, reported as sequence number 0.
    w.create_topic("alerts").await;
    w.subscribe("alerts", "pager", r#"body_json.level == "high""#)
        .await
        .expect("Subscribe pager");
    let seqs = w
        .send_messages(
            "alerts",
            vec![
                message(r#"{"level":"low"}"#, &[]),
                message(r#"{"level":"high"}"#, &[]),
            ],
        )
        .await;
    assert_eq!(seqs[0], 0, "unrouted");
    assert!(seqs[1] > 0);
    let low = w
        .send_messages("alerts", vec![message(r#"{"level":"low"}"#, &[])])
        .await;
    assert_eq!(low, [0]);
    assert_eq!(w.drain("pager").await, [r#"{"level":"high"}"#]);

    // Subscribe again with another filter: the next publish routes by the new one.
    w.subscribe("alerts", "pager", r#"body_json.level == "low""#)
        .await
        .expect("Subscribe pager again");
    let seqs = w
        .send_messages(
            "alerts",
            vec![
                message(r#"{"level":"low"}"#, &[]),
                message(r#"{"level":"high"}"#, &[]),
            ],
        )
        .await;
    assert!(seqs[0] > 0);
    assert_eq!(seqs[1], 0);
    assert_eq!(w.drain("pager").await, [r#"{"level":"low"}"#]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_filter_judges_the_expression_and_runs_it_on_a_sample() {
    let w = world().await;

    // Valid, no sample: nothing ran; the JSON answer leaves the empty error out.
    let valid = w
        .test_filter(r#"subject == "orders.created""#, None)
        .await
        .expect("TestFilter");
    assert_eq!(
        valid,
        TestFilterResponse {
            valid: true,
            ..Default::default()
        }
    );
    let (status, raw) = w
        .client
        .post_raw(&Rpc::TestFilter.path(), r#"{"expr": "body_size > 0"}"#)
        .await
        .expect("answered");
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&raw).expect("json"),
        serde_json::json!({"valid": true, "ran": false, "matched": false})
    );

    // Invalid: a syntax error, an unknown name, a non-boolean result. A 200 with
    // valid=false and the reason, not an error status.
    for bad in [
        "subject ==",
        "colour == \"red\"",
        "body_size",
        "1..3 == [1, 2, 3]",
    ] {
        let r = w.test_filter(bad, None).await.expect("TestFilter");
        assert!(!r.valid && !r.ran && !r.matched, "{bad}: {r:?}");
        assert!(!r.error.is_empty(), "{bad}: a reason");
    }
    let unknown = w
        .test_filter("colour == \"red\"", None)
        .await
        .expect("TestFilter");
    assert!(unknown.error.contains("colour"), "{}", unknown.error);

    // With a sample: matching and not matching.
    let expr = r#"body_json.amount > 100 && properties.region == "eu""#;
    let yes = w
        .test_filter(
            expr,
            Some(message(r#"{"amount":150}"#, &[("region", "eu")])),
        )
        .await
        .expect("TestFilter");
    assert_eq!(
        yes,
        TestFilterResponse {
            valid: true,
            error: String::new(),
            ran: true,
            matched: true,
        }
    );
    let no = w
        .test_filter(
            expr,
            Some(message(r#"{"amount":150}"#, &[("region", "us")])),
        )
        .await
        .expect("TestFilter");
    assert_eq!(
        no,
        TestFilterResponse {
            valid: true,
            error: String::new(),
            ran: true,
            matched: false,
        }
    );
    // The subject and the content type of the sample count.
    let sample = WireMessage {
        subject: "orders.created".into(),
        content_type: "text/plain".into(),
        ..WireMessage::with_body("{\"amount\":150}")
    };
    let r = w
        .test_filter(
            r#"subject_parts[0] == "orders" && len(body_json) == 0"#,
            Some(sample),
        )
        .await
        .expect("TestFilter");
    assert!(r.ran && r.matched, "{r:?}");
    // A sample the filter fails on: valid, ran, not matched, with the evaluation's
    // error (such a message is routed nowhere: fail-closed).
    let failed = w
        .test_filter("body_json.amount > 100", Some(message("not json", &[])))
        .await
        .expect("TestFilter");
    assert!(failed.valid && failed.ran && !failed.matched, "{failed:?}");
    assert!(!failed.error.is_empty());
    // An invalid filter with a sample does not run.
    let r = w
        .test_filter("subject ==", Some(message("x", &[])))
        .await
        .expect("TestFilter");
    assert!(!r.valid && !r.ran, "{r:?}");

    // A sample whose body is not base64 is a 400, like a Send's.
    let bad = WireMessage {
        body: "%%%not base64".into(),
        ..Default::default()
    };
    assert_eq!(
        code(w.test_filter("true", Some(bad)).await),
        (400, "invalid_argument".into())
    );
    // Nothing was stored by any of it.
    let queues: QueuesResponse = w
        .client
        .call(Rpc::ListQueues, &Empty {})
        .await
        .expect("ListQueues");
    assert!(queues.queues.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_filter_refuses_a_sample_larger_than_a_message() {
    let w = world_with(mqlite_broker::AuthConfig::Tokens(vec![ADMIN.into()]), |c| {
        c.max_message_bytes = 64
    })
    .await;
    let r = w
        .test_filter(
            "body_size > 0",
            Some(WireMessage::with_body("x".repeat(65))),
        )
        .await;
    assert_eq!(code(r), (413, "message_too_large".into()));
    let r = w
        .test_filter(
            "body_size > 0",
            Some(WireMessage::with_body("x".repeat(64))),
        )
        .await
        .expect("TestFilter");
    assert!(r.matched);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribe_with_an_invalid_filter_is_400_and_stores_nothing() {
    let w = world().await;
    w.create_topic("orders").await;
    w.subscribe("orders", "big", "body_json.amount > 100")
        .await
        .expect("Subscribe");
    let before = w.subscriptions().await;
    let queues_before: QueuesResponse = w
        .client
        .call(Rpc::ListQueues, &Empty {})
        .await
        .expect("ListQueues");

    for bad in [
        "body_json.amount >",
        "amount > 100",
        "body_size",
        "repeat(subject, 1000) == \"\"",
        r#"subject matches "(""#,
        r#"subject matches "\\w{1000}\\w{1000}\\w{1000}""#,
        "subject matches properties.pattern",
    ] {
        // A new subscription, and the existing one's filter replaced: both refused.
        for name in ["new", "big"] {
            let r = w.subscribe("orders", name, bad).await;
            assert_eq!(code(r), (400, "invalid_argument".into()), "{name}: {bad}");
        }
    }
    assert_eq!(w.subscriptions().await, before);
    let queues_after: QueuesResponse = w
        .client
        .call(Rpc::ListQueues, &Empty {})
        .await
        .expect("ListQueues");
    assert_eq!(queues_after.queues.len(), queues_before.queues.len());
    // The existing subscription still routes by its old filter.
    w.send_messages("orders", vec![message(r#"{"amount":150}"#, &[])])
        .await;
    assert_eq!(w.drain("big").await, [r#"{"amount":150}"#]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsubscribe_deletes_the_subscription_and_404s_when_there_is_none() {
    let w = world().await;
    w.create_topic("orders").await;
    w.create_queue("plain", WireQueueConfig::default()).await;
    w.subscribe("orders", "audit", "").await.expect("Subscribe");
    w.send("orders", &["kept?"]).await;
    assert_eq!(w.stats("audit").await.active, 1);

    let unsubscribe = |topic: &str, name: &str| {
        let request = UnsubscribeRequest {
            topic: topic.into(),
            name: name.into(),
        };
        let client = w.client.clone();
        async move { client.call::<_, Empty>(Rpc::Unsubscribe, &request).await }
    };
    unsubscribe("orders", "audit").await.expect("Unsubscribe");
    assert!(w.subscriptions().await.is_empty());
    // Its backing queue went with it.
    let r = w
        .client
        .call::<_, StatsResponse>(
            Rpc::Stats,
            &QueueRequest {
                queue: "audit".into(),
            },
        )
        .await;
    assert_eq!(code(r), (404, "not_found".into()));
    // A publish now routes nowhere.
    assert_eq!(w.send("orders", &["dropped"]).await, [0]);

    // Again, of an unknown topic, and a queue that is not a subscription: 404.
    for (topic, name) in [("orders", "audit"), ("nope", "audit"), ("orders", "plain")] {
        assert_eq!(
            code(unsubscribe(topic, name).await),
            (404, "not_found".into()),
            "{topic}/{name}"
        );
    }
    // The plain queue is untouched.
    assert_eq!(w.stats("plain").await.total, 0);
    // A bad name is 400.
    assert_eq!(
        code(unsubscribe("orders", "").await),
        (400, "invalid_argument".into())
    );
}

/// A pattern that does not compile, or compiles too big, is invalid for TestFilter
/// (naming the regex's complaint) as for Subscribe.
#[tokio::test]
async fn test_filter_refuses_a_pattern_that_does_not_compile() {
    let w = world().await;
    for (expr, says) in [
        (r#"subject matches "(""#, "does not compile"),
        (
            r#"subject matches "\\w{1000}\\w{1000}\\w{1000}""#,
            "compiles to more than",
        ),
    ] {
        let t = w.test_filter(expr, None).await.expect("TestFilter");
        assert!(!t.valid, "{expr}");
        assert!(t.error.contains(says), "{expr}: {}", t.error);
    }
}

/// The compiled-filter cache holds only filters that were stored, and at most
/// MAX_CACHED_FILTERS of them: 10,000 distinct filters sent to a missing topic leave
/// nothing behind.
#[tokio::test]
async fn the_filter_cache_is_filled_on_success_only_and_bounded() {
    let w = world().await;
    // Subscribes that fail (their topic names a queue) cache nothing.
    w.create_queue("plain", WireQueueConfig::default()).await;
    for i in 0..10_000 {
        let r = w.subscribe("plain", "s", &format!("body_size > {i}")).await;
        assert_eq!(code(r).0, 409);
    }
    assert_eq!(w.broker.engine().expect("serving").cached_filters(), 0);
    let engine = w.broker.engine().expect("serving");
    engine.create_topic("t").await.expect("topic");
    let max = mqlite::limits::MAX_CACHED_FILTERS;
    for i in 0..max + 50 {
        engine
            .subscribe(
                "t",
                &format!("s{i}"),
                &format!("body_size > {i}"),
                Default::default(),
            )
            .await
            .expect("subscribes");
    }
    assert_eq!(engine.cached_filters(), max);
}

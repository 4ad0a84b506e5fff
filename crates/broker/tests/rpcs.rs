//! Every RPC of the wire contract over real HTTP on loopback: the happy paths, the
//! open GET routes, and long-poll wake-ups.

use crate::common;

use common::*;
use mqlite_broker::wire::*;
use mqlite_broker::{AuthConfig, Rpc};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_service_happy_paths() {
    let w = world().await;
    w.create_queue("jobs", WireQueueConfig::default()).await;

    // Send: one, then a batch; positional sequence numbers.
    let one = w.send("jobs", &["a"]).await;
    assert_eq!(one.len(), 1);
    let batch = w.send("jobs", &["b", "c", "d"]).await;
    assert_eq!(batch.len(), 3);
    assert!(batch.windows(2).all(|p| p[0] < p[1]) && one[0] < batch[0]);

    // Receive with properties round-tripped.
    let got = w.receive("jobs", 2).await;
    assert_eq!(got.iter().map(text).collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!(got[0].delivery_count, 1);
    assert_eq!(got[0].lock_token.len(), 32);
    assert!(got[0].locked_until_ms > START_MS);

    // Renew, then Complete; a second Complete replays ok (3.2).
    let renewed = w
        .settle(Rpc::Renew, "jobs", &got[0], |_| {})
        .await
        .expect("Renew");
    assert!(renewed.ok && renewed.locked_until_ms >= got[0].locked_until_ms);
    assert!(
        w.settle(Rpc::Complete, "jobs", &got[0], |_| {})
            .await
            .expect("Complete")
            .ok
    );
    assert!(
        w.settle(Rpc::Complete, "jobs", &got[0], |_| {})
            .await
            .expect("replay")
            .ok
    );

    // Abandon with a delay: scheduled until the clock passes it.
    w.settle(Rpc::Abandon, "jobs", &got[1], |r| r.delay_ms = 5_000)
        .await
        .expect("Abandon");
    assert_eq!(w.stats("jobs").await.scheduled, 1);

    // Defer, then ReceiveDeferred by number.
    let c = w.receive("jobs", 1).await;
    assert_eq!(text(&c[0]), "c");
    w.settle(Rpc::Defer, "jobs", &c[0], |_| {})
        .await
        .expect("Defer");
    let deferred: MessagesResponse = w
        .client
        .call(
            Rpc::ReceiveDeferred,
            &ReceiveDeferredRequest {
                queue: "jobs".into(),
                seq_numbers: vec![c[0].seq_number],
            },
        )
        .await
        .expect("ReceiveDeferred");
    assert_eq!(deferred.messages.len(), 1);

    // RenewBatch and CompleteBatch take what Receive returned.
    let items: Vec<LockItem> = deferred
        .messages
        .iter()
        .map(|m| LockItem {
            seq_number: m.seq_number,
            lock_token: m.lock_token.clone(),
        })
        .collect();
    let renewed: BatchResponse = w
        .client
        .call(
            Rpc::RenewBatch,
            &BatchRequest {
                queue: "jobs".into(),
                messages: items.clone(),
            },
        )
        .await
        .expect("RenewBatch");
    assert!(renewed.results[0].ok && renewed.results[0].locked_until_ms > 0);
    let completed: BatchResponse = w
        .client
        .call(
            Rpc::CompleteBatch,
            &BatchRequest {
                queue: "jobs".into(),
                messages: items,
            },
        )
        .await
        .expect("CompleteBatch");
    assert!(completed.results[0].ok);

    // Reject: a dead letter with the caller's reason, seen by Peek with its state.
    let d = w.receive("jobs", 1).await;
    assert_eq!(text(&d[0]), "d");
    w.settle(Rpc::Reject, "jobs", &d[0], |r| {
        r.dead_letter_reason = "bad".into();
        r.dead_letter_description = "unparseable".into();
    })
    .await
    .expect("Reject");
    let peeked: MessagesResponse = w
        .client
        .call(
            Rpc::Peek,
            &PeekRequest {
                queue: "jobs".into(),
                state: Some("dead_lettered".into()),
                ..Default::default()
            },
        )
        .await
        .expect("Peek");
    assert_eq!(peeked.messages.len(), 1);
    assert_eq!(peeked.messages[0].state, "dead_lettered");
    assert_eq!(peeked.messages[0].dead_letter_reason, "bad");
    assert_eq!(peeked.messages[0].dead_letter_description, "unparseable");

    // Schedule and Cancel.
    let scheduled: SendResponse = w
        .client
        .call(
            Rpc::Schedule,
            &SendRequest {
                queue: "jobs".into(),
                messages: vec![WireMessage::with_body("later")],
                scheduled_enqueue_time_ms: Some(START_MS + 60_000),
                ttl_ms: None,
            },
        )
        .await
        .expect("Schedule");
    let cancelled: OkResponse = w
        .client
        .call(
            Rpc::Cancel,
            &CancelRequest {
                queue: "jobs".into(),
                seq_number: scheduled.seq_numbers[0],
            },
        )
        .await
        .expect("Cancel");
    assert!(cancelled.ok);

    let stats = w.stats("jobs").await;
    assert_eq!(
        (
            stats.active,
            stats.locked,
            stats.deferred,
            stats.scheduled,
            stats.dead_lettered
        ),
        (0, 0, 0, 1, 1)
    );
    assert_eq!(stats.queue, "jobs");

    // The abandoned message comes back once its delay passes.
    w.clock.advance(5_001);
    w.run_sweeps().await;
    let again = w.receive("jobs", 1).await;
    assert_eq!((text(&again[0]), again[0].delivery_count), ("b".into(), 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_and_auth_service_happy_paths() {
    let w = world().await;
    w.create_queue(
        "orders",
        WireQueueConfig {
            lock_duration_ms: Some(10_000),
            max_delivery_count: Some(3),
            dedup_window_ms: Some(60_000),
            ordering_mode: Some("group_fifo".into()),
            ..Default::default()
        },
    )
    .await;
    // An upsert of the same name and kind is fine.
    w.create_queue("orders", WireQueueConfig::default()).await;
    w.create_topic("events").await;
    w.subscribe("events", "audit", "").await.expect("Subscribe");
    let subs: SubscriptionsResponse = w
        .client
        .call(Rpc::ListSubscriptions, &Empty {})
        .await
        .expect("ListSubscriptions");
    assert_eq!(subs.subscriptions.len(), 1);
    assert_eq!(
        (
            subs.subscriptions[0].topic.as_str(),
            subs.subscriptions[0].name.as_str()
        ),
        ("events", "audit")
    );
    let queues: QueuesResponse = w
        .client
        .call(Rpc::ListQueues, &Empty {})
        .await
        .expect("ListQueues");
    let names: Vec<(&str, &str)> = queues
        .queues
        .iter()
        .map(|q| (q.name.as_str(), q.kind.as_str()))
        .collect();
    assert!(names.contains(&("orders", "queue")));
    assert!(names.contains(&("events", "topic")));
    assert!(names.contains(&("audit", "subscription")));
    let tested: TestFilterResponse = w
        .client
        .call(
            Rpc::TestFilter,
            &TestFilterRequest {
                expr: "true".into(),
                message: None,
            },
        )
        .await
        .expect("TestFilter");
    assert_eq!(
        tested,
        TestFilterResponse {
            valid: true,
            ..Default::default()
        }
    );

    // Redrive and Purge over dead letters.
    w.create_queue(
        "work",
        WireQueueConfig {
            max_delivery_count: Some(1),
            ..Default::default()
        },
    )
    .await;
    w.send("work", &["x", "y", "z"]).await;
    for m in w.receive("work", 3).await {
        w.settle(Rpc::Abandon, "work", &m, |_| {})
            .await
            .expect("abandon");
    }
    assert_eq!(w.stats("work").await.dead_lettered, 3);
    let moved: RedriveResponse = w
        .client
        .call(
            Rpc::Redrive,
            &RedriveRequest {
                queue: "work".into(),
                max: 1,
                ..Default::default()
            },
        )
        .await
        .expect("Redrive");
    assert_eq!(moved.moved, 1);
    let purged: PurgeResponse = w
        .client
        .call(
            Rpc::Purge,
            &PurgeRequest {
                queue: "work".into(),
                ..Default::default()
            },
        )
        .await
        .expect("Purge");
    assert_eq!(purged.purged, 2);
    let s = w.stats("work").await;
    assert_eq!((s.active, s.dead_lettered), (1, 0));

    let status: StatusResponse = w.client.call(Rpc::Status, &Empty {}).await.expect("Status");
    assert_eq!(status.backend, "local file");
    assert!(!status.remote);
    assert!(status.auth, "the contract's Status says auth as a boolean");
    assert_eq!(status.version, mqlite_broker::VERSION);
    assert!(status.schema_version.starts_with("mqlite-rs/"));
    assert!(status.queues >= 2 && status.subscriptions == 1);

    // Keys: created with a token shown once, listed without it, revoked.
    let key: WireKey = w
        .client
        .call(
            Rpc::CreateKey,
            &CreateKeyRequest {
                id: "0123456789abcdef0123456789abcdef".into(),
                name: "producer".into(),
                permissions: vec!["send".into()],
                expires_at_ms: 0,
            },
        )
        .await
        .expect("CreateKey");
    assert!(key.token.starts_with("mqk_") && key.token.len() == 68);
    assert_eq!(key.permissions, ["send"]);
    let listed: ListKeysResponse = w
        .client
        .call(Rpc::ListKeys, &ListKeysRequest::default())
        .await
        .expect("ListKeys");
    assert_eq!(listed.keys.len(), 1);
    assert!(
        listed.keys[0].token.is_empty(),
        "a listed key never shows its token"
    );
    let _: Empty = w
        .client
        .call(Rpc::RevokeKey, &RevokeKeyRequest { id: key.id.clone() })
        .await
        .expect("RevokeKey");
    // Idempotent.
    let _: Empty = w
        .client
        .call(Rpc::RevokeKey, &RevokeKeyRequest { id: key.id })
        .await
        .expect("RevokeKey again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_routes_discovery_health_and_metrics() {
    let w = world().await;
    let anonymous = w.client.with_token(None);
    let (status, body) = anonymous.get("/healthz").await.expect("healthz");
    assert_eq!((status, body.as_str()), (200, "ok"));
    let (status, body) = anonymous.get("/").await.expect("card");
    assert_eq!(status, 200);
    let card: DiscoveryCard = serde_json::from_str(&body).expect("card json");
    assert_eq!((card.name.as_str(), card.status.as_str()), ("mqlite", "ok"));
    assert_eq!(card.auth, "bearer");
    assert_eq!(card.health, "/healthz");
    for rpc in Rpc::ALL {
        assert!(
            card.endpoints.contains(&rpc.path()),
            "{} listed",
            rpc.path()
        );
    }
    assert_eq!(card.endpoints.len(), Rpc::ALL.len());

    // /metrics needs auth.
    let (status, _) = anonymous.get("/metrics").await.expect("metrics");
    assert_eq!(status, 401);
    w.create_queue("jobs", WireQueueConfig::default()).await;
    w.send("jobs", &["a", "b"]).await;
    w.receive("jobs", 1).await;
    let (status, text) = w.client.get("/metrics").await.expect("metrics");
    assert_eq!(status, 200);
    assert!(
        text.contains(r#"mqlite_queue_messages{queue="jobs",state="active"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"mqlite_queue_messages{queue="jobs",state="locked"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"mqlite_requests_total{rpc="QueueService/Send",code="200"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"mqlite_rpc_duration_seconds_count{rpc="QueueService/Receive"} 1"#),
        "{text}"
    );

    // An unknown route is a 404 envelope.
    let (status, body) = w.client.get("/nope").await.expect("404");
    assert_eq!(status, 404);
    assert!(body.contains("not_found"));
}

/// A Receive that waits up to 20 s, on its own task.
fn long_poll(
    client: &mqlite_broker::Client,
    queue: &str,
) -> tokio::task::JoinHandle<Result<MessagesResponse, mqlite_broker::ClientError>> {
    let (client, queue) = (client.clone(), queue.to_owned());
    tokio::spawn(async move {
        client
            .call(
                Rpc::Receive,
                &ReceiveRequest {
                    queue,
                    wait_time_ms: Some(20_000),
                    ..Default::default()
                },
            )
            .await
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_wakes_on_a_send_and_on_shutdown() {
    let w = world().await;
    w.create_queue("jobs", WireQueueConfig::default()).await;
    let mut parked = w.broker.engine().expect("serving").long_poll_waiters();
    let waiting = long_poll(&w.client, "jobs");
    parked.wait_for(|n| *n == 1).await.expect("parked");
    // The manual clock never moves: only the send can wake it.
    w.send("jobs", &["wake"]).await;
    let got = waiting.await.expect("join").expect("Receive");
    assert_eq!(got.messages.iter().map(text).collect::<Vec<_>>(), ["wake"]);

    // A parked long-poll answers (empty) when the broker shuts down.
    let waiting = long_poll(&w.client, "jobs");
    parked.wait_for(|n| *n == 1).await.expect("parked again");
    w.broker.shutdown().await.expect("graceful shutdown");
    let got = waiting.await.expect("join").expect("answered, not cut");
    assert!(got.messages.is_empty());
}

/// The console: off by default in the library (a 404 that says how to turn it on, no
/// `ui` in the card); on, its page and assets are served with a policy that forbids
/// inline script and framing, and the card names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_is_off_by_default_and_served_when_on() {
    let off = world().await;
    let anonymous = off.client.with_token(None);
    let (status, body) = anonymous.get("/ui").await.expect("ui");
    assert_eq!(status, 404);
    assert!(body.contains("--ui on"), "{body}");
    let (_, card) = anonymous.get("/").await.expect("card");
    let card: DiscoveryCard = serde_json::from_str(&card).expect("card json");
    assert_eq!(card.ui, None);

    let on = world_with(AuthConfig::Tokens(vec![ADMIN.to_owned()]), |c| c.ui = true).await;
    let (_, card) = on.client.with_token(None).get("/").await.expect("card");
    let card: DiscoveryCard = serde_json::from_str(&card).expect("card json");
    assert_eq!(card.ui.as_deref(), Some("/ui"));
    let http = reqwest::Client::new();
    for (path, kind) in [
        ("/ui", "text/html"),
        ("/ui/app.js", "text/javascript"),
        ("/ui/app.css", "text/css"),
    ] {
        let res = http
            .get(format!("http://{}{path}", on.broker.addr()))
            .send()
            .await
            .expect(path);
        assert_eq!(res.status(), 200, "{path}");
        let header = |name: &str| {
            res.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned()
        };
        assert!(header("content-type").starts_with(kind), "{path}");
        let policy = header("content-security-policy");
        assert!(
            policy.contains("script-src 'self'") && policy.contains("frame-ancestors 'none'"),
            "{path}: {policy}"
        );
        assert_eq!(header("x-content-type-options"), "nosniff");
    }
    // The page asks for a token; it holds none.
    let (_, page) = on.client.with_token(None).get("/ui").await.expect("page");
    assert!(page.contains("id=\"token\""), "a login field");
    assert!(!page.contains(ADMIN));
}

/// WhoAmI: any valid credential may ask; an administrator may do everything, a key
/// what it was given; no credential is 401.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whoami_names_the_caller_and_its_permissions() {
    let w = world().await;
    let me: WhoAmIResponse = w.client.call(Rpc::WhoAmI, &Empty {}).await.expect("admin");
    assert_eq!(me.principal, "admin");
    assert_eq!(me.permissions, ["send", "listen", "manage"]);
    let key = w.create_key("watcher", &["listen"]).await;
    let as_key = w.client.with_token(Some(key.token.clone()));
    let me: WhoAmIResponse = as_key.call(Rpc::WhoAmI, &Empty {}).await.expect("key");
    assert_eq!(
        (me.principal.as_str(), me.id.as_str(), me.name.as_str()),
        ("key", key.id.as_str(), "watcher")
    );
    assert_eq!(me.permissions, ["listen"]);
    let anonymous = w.client.with_token(None);
    let refused = anonymous
        .call::<_, WhoAmIResponse>(Rpc::WhoAmI, &Empty {})
        .await;
    assert!(
        matches!(&refused, Err(e) if e.to_string().contains("unauthenticated")),
        "{refused:?}"
    );
}

/// Redrive with `seq_numbers` (an extension) moves only those dead letters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redrive_of_selected_dead_letters() {
    let w = world().await;
    w.create_queue(
        "jobs",
        WireQueueConfig {
            max_delivery_count: Some(1),
            ..Default::default()
        },
    )
    .await;
    w.send("jobs", &["a", "b", "c"]).await;
    let got = w.receive("jobs", 3).await;
    for m in &got {
        w.settle(Rpc::Reject, "jobs", m, |_| {})
            .await
            .expect("Reject");
    }
    let r: RedriveResponse = w
        .client
        .call(
            Rpc::Redrive,
            &RedriveRequest {
                queue: "jobs".into(),
                seq_numbers: vec![got[0].seq_number, got[2].seq_number],
                ..Default::default()
            },
        )
        .await
        .expect("Redrive");
    assert_eq!(r.moved, 2);
    let st = w.stats("jobs").await;
    assert_eq!((st.active, st.dead_lettered), (2, 1));
}

/// The event identity travels as named fields of a message: sent, it is the dedup key
/// (a repeat collapses into the original), and every receive carries it back; one of
/// `event_source` / `event_id` alone is invalid_argument.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_identity_travels_as_named_fields() {
    let w = world().await;
    w.create_queue(
        "events",
        WireQueueConfig {
            dedup_window_ms: Some(60_000),
            ..Default::default()
        },
    )
    .await;
    let event = WireMessage {
        event_source: "https://shop.example/orders".into(),
        event_id: "evt-1".into(),
        event_type: "order.created".into(),
        ..WireMessage::with_body("{}")
    };
    let send = |m: WireMessage| SendRequest {
        queue: "events".into(),
        messages: vec![m.clone(), m],
        ..Default::default()
    };
    let sent: SendResponse = w
        .client
        .call(Rpc::Send, &send(event.clone()))
        .await
        .expect("send");
    assert_eq!(
        sent.seq_numbers[0], sent.seq_numbers[1],
        "one identity, one message"
    );
    let got: MessagesResponse = w
        .client
        .call(
            Rpc::Receive,
            &ReceiveRequest {
                queue: "events".into(),
                max_messages: Some(10),
                ..Default::default()
            },
        )
        .await
        .expect("receive");
    assert_eq!(got.messages.len(), 1);
    let m = &got.messages[0];
    assert_eq!(
        (
            m.event_source.as_str(),
            m.event_id.as_str(),
            m.event_type.as_str()
        ),
        ("https://shop.example/orders", "evt-1", "order.created")
    );
    let half = WireMessage {
        event_source: String::new(),
        ..event
    };
    let r = w
        .client
        .call::<_, SendResponse>(Rpc::Send, &send(half))
        .await;
    assert_eq!(code(r), (400, "invalid_argument".into()));
}

/// A relay outbox in the served database shows in Status and /metrics: its pending
/// intents and the age of the oldest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_and_metrics_show_stuck_relay_intents() {
    let w = world().await;
    let before: StatusResponse = w.client.call(Rpc::Status, &Empty {}).await.expect("status");
    assert_eq!(
        (before.relay_pending, before.relay_oldest_pending_ms),
        (0, 0)
    );
    w.broker
        .engine()
        .expect("serving")
        .tx::<mqlite::SqliteStore, _, _>(async |t| {
            let m = mqlite::OutMessage::new("{}")
                .with_event(mqlite::EventIdentity::new("shop", "order-1"));
            t.relay("elsewhere", m).await
        })
        .await
        .expect("an intent");
    w.clock.advance(90_000);
    let after: StatusResponse = w.client.call(Rpc::Status, &Empty {}).await.expect("status");
    assert_eq!(
        (after.relay_pending, after.relay_oldest_pending_ms),
        (1, 90_000)
    );
    let (_, text) = w.client.get("/metrics").await.expect("metrics");
    assert!(text.contains("mqlite_relay_pending 1\n"), "{text}");
    assert!(
        text.contains("mqlite_relay_oldest_pending_seconds 90\n"),
        "{text}"
    );
}

/// SetQueueStatus (promise 19) over the wire: a paused send is 409 `queue_paused` and
/// stores nothing; ListQueues shows the status; a long-poll parked on a queue whose
/// receives are paused is handed the message by the resume; a topic takes no status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_and_resume_over_the_wire() {
    let w = world().await;
    w.create_queue("jobs", WireQueueConfig::default()).await;
    w.send("jobs", &["before"]).await;
    let set = |status: &str| SetQueueStatusRequest {
        name: "jobs".into(),
        status: status.into(),
    };
    let _: Empty = w
        .client
        .call(Rpc::SetQueueStatus, &set("disabled"))
        .await
        .expect("pause");
    let refused = w
        .client
        .call::<_, SendResponse>(
            Rpc::Send,
            &SendRequest {
                queue: "jobs".into(),
                messages: vec![WireMessage::from_out(&mqlite::OutMessage::new("no"))],
                ..Default::default()
            },
        )
        .await;
    let (status, what, message) = api_error(refused);
    assert_eq!((status, what.as_str()), (409, "queue_paused"), "{message}");
    assert!(message.contains("mqlite resume jobs"), "{message}");
    let listed: QueuesResponse = w
        .client
        .call(Rpc::ListQueues, &Empty {})
        .await
        .expect("ListQueues");
    assert_eq!(listed.queues[0].status, "disabled");
    assert_eq!(w.stats("jobs").await.active, 1, "nothing stored");

    let mut parked = w.broker.engine().expect("serving").long_poll_waiters();
    let waiting = long_poll(&w.client, "jobs");
    parked.wait_for(|n| *n == 1).await.expect("parked");
    let _: Empty = w
        .client
        .call(Rpc::SetQueueStatus, &set("active"))
        .await
        .expect("resume");
    let got = waiting.await.expect("join").expect("Receive");
    assert_eq!(
        got.messages.iter().map(text).collect::<Vec<_>>(),
        ["before"]
    );

    w.create_topic("orders").await;
    let topic = w
        .client
        .call::<_, Empty>(
            Rpc::SetQueueStatus,
            &SetQueueStatusRequest {
                name: "orders".into(),
                status: "receive_disabled".into(),
            },
        )
        .await;
    assert_eq!(code(topic).0, 400);
    let unknown = w
        .client
        .call::<_, Empty>(Rpc::SetQueueStatus, &set("sleeping"))
        .await;
    assert_eq!(code(unknown).0, 400);
}

/// CreateSchedule, ListSchedules and DeleteSchedule (promise 21) over the wire: the
/// broker's scheduler fires a tick as the clock reaches it, the message carrying
/// the tick's id; a request with both or neither recurrence is
/// 400, a missing queue 404, a bad zone 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedules_over_the_wire() {
    let w = world().await;
    w.create_queue("jobs", WireQueueConfig::default()).await;
    let request =
        |every_ms: Option<i64>, cron: Option<&str>, tz: Option<&str>| CreateScheduleRequest {
            name: "pulse".into(),
            queue: "jobs".into(),
            every_ms,
            cron: cron.map(str::to_owned),
            tz: tz.map(str::to_owned),
            missed: None,
            message: WireMessage::from_out(&mqlite::OutMessage::new("beat").with_subject("pulse")),
        };
    for bad in [
        request(Some(60_000), Some("* * * * *"), None),
        request(None, None, None),
        request(None, Some("0 2 * * *"), Some("Moon/Base")),
        request(Some(10), None, None),
    ] {
        let r = w
            .client
            .call::<_, WireSchedule>(Rpc::CreateSchedule, &bad)
            .await;
        assert_eq!(code(r).0, 400);
    }
    let missing = w
        .client
        .call::<_, WireSchedule>(
            Rpc::CreateSchedule,
            &CreateScheduleRequest {
                queue: "nope".into(),
                ..request(Some(60_000), None, None)
            },
        )
        .await;
    assert_eq!(code(missing).0, 404);

    let created: WireSchedule = w
        .client
        .call(Rpc::CreateSchedule, &request(Some(60_000), None, None))
        .await
        .expect("CreateSchedule");
    assert_eq!(created.next_at_ms, START_MS + 60_000);
    assert_eq!(
        (created.every_ms, created.missed.as_str()),
        (60_000, "fire_once")
    );

    // The scheduler's pass at the tick's time fires it (the tests' brokers run their
    // sweeps by hand).
    w.run_sweeps().await;
    assert_eq!(w.stats("jobs").await.active, 0, "not due yet");
    w.clock.advance(60_000);
    w.run_sweeps().await;
    let got: MessagesResponse = w
        .client
        .call(
            Rpc::Receive,
            &ReceiveRequest {
                queue: "jobs".into(),
                ..Default::default()
            },
        )
        .await
        .expect("Receive");
    assert_eq!(got.messages.len(), 1);
    assert_eq!(
        got.messages[0].message_id,
        format!("pulse@{}", START_MS + 60_000)
    );
    assert_eq!(got.messages[0].subject, "pulse");

    let listed: SchedulesResponse = w
        .client
        .call(Rpc::ListSchedules, &Empty {})
        .await
        .expect("ListSchedules");
    assert_eq!(listed.schedules.len(), 1);
    assert_eq!(listed.schedules[0].fired, 1);
    assert_eq!(listed.schedules[0].last_tick_ms, START_MS + 60_000);
    assert_eq!(listed.schedules[0].next_at_ms, START_MS + 120_000);

    let delete = DeleteScheduleRequest {
        name: "pulse".into(),
    };
    let gone: DeleteQueueResponse = w
        .client
        .call(Rpc::DeleteSchedule, &delete)
        .await
        .expect("DeleteSchedule");
    assert!(gone.deleted);
    let again: DeleteQueueResponse = w
        .client
        .call(Rpc::DeleteSchedule, &delete)
        .await
        .expect("DeleteSchedule");
    assert!(!again.deleted);
}

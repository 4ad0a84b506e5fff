//! The broker against hostile and careless clients, over real sockets on loopback: each
//! attack ends in a bounded outcome (the connection closed or refused with a typed
//! answer, `/healthz` answered for everyone else). Bounds are lowered in the broker's
//! configuration so each case takes well under a second of real time; the timeouts here
//! are guards against a hang, never waits for something to happen.

use crate::common;

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use common::*;
use mqlite_broker::{AuthConfig, ConnLimits};

/// Longest a case waits for an answer that should come at once; only a failure waits it.
const GUARD: Duration = Duration::from_secs(10);

fn limits(header_ms: u64, body_ms: u64, max_connections: usize) -> ConnLimits {
    ConnLimits {
        header_timeout: Duration::from_millis(header_ms),
        body_timeout: Duration::from_millis(body_ms),
        max_connections,
    }
}

/// Reads until the server closes the connection (or the guard passes: a failure).
async fn read_to_close(conn: &mut TcpStream) -> String {
    let mut answer = Vec::new();
    let read = tokio::time::timeout(GUARD, conn.read_to_end(&mut answer)).await;
    match read {
        Ok(_) => String::from_utf8_lossy(&answer).into_owned(),
        Err(_) => panic!(
            "the server held the connection past {GUARD:?}; read so far: {:?}",
            String::from_utf8_lossy(&answer)
        ),
    }
}

/// `GET /healthz` on a fresh connection: the status line, within `within`.
async fn healthz(addr: SocketAddr, within: Duration) -> String {
    let ask = async {
        let mut conn = TcpStream::connect(addr).await.expect("connects");
        conn.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .expect("writes");
        let mut answer = Vec::new();
        let _ = conn.read_to_end(&mut answer).await;
        String::from_utf8_lossy(&answer).into_owned()
    };
    match tokio::time::timeout(within, ask).await {
        Ok(answer) => answer.lines().next().unwrap_or_default().to_owned(),
        Err(_) => panic!("/healthz did not answer within {within:?}"),
    }
}

/// Opens `n` connections that each send the start of a request and nothing more.
async fn slowloris(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    let mut held = Vec::with_capacity(n);
    for _ in 0..n {
        let mut c = TcpStream::connect(addr).await.expect("connects");
        c.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            .await
            .expect("writes");
        held.push(c);
    }
    held
}

#[tokio::test]
async fn a_request_whose_headers_never_end_is_closed_at_the_header_timeout() {
    let w = world_with(AuthConfig::Off, |c| c.limits = limits(200, 60_000, 64)).await;
    let addr = w.broker.addr();
    let mut attacker = slowloris(addr, 1).await.remove(0);
    // Others are answered while the attacker holds its connection...
    assert_eq!(
        healthz(addr, Duration::from_secs(1)).await,
        "HTTP/1.1 200 OK"
    );
    // ...and the attacker's connection ends without an answer.
    let answer = read_to_close(&mut attacker).await;
    assert!(!answer.contains("200 OK"), "{answer:?}");
    w.broker.shutdown().await.expect("stops");
}

#[tokio::test]
async fn an_idle_connection_that_never_asks_is_closed_at_the_header_timeout() {
    let w = world_with(AuthConfig::Off, |c| c.limits = limits(200, 60_000, 64)).await;
    let mut idle = TcpStream::connect(w.broker.addr()).await.expect("connects");
    assert_eq!(read_to_close(&mut idle).await, "");
    w.broker.shutdown().await.expect("stops");
}

#[tokio::test]
async fn a_body_that_never_ends_is_answered_408_at_the_body_timeout() {
    let w = world_with(AuthConfig::Tokens(vec![ADMIN.into()]), |c| {
        c.limits = limits(10_000, 200, 64)
    })
    .await;
    let mut conn = TcpStream::connect(w.broker.addr()).await.expect("connects");
    let head = format!(
        "POST /mqlite.v1.QueueService/Send HTTP/1.1\r\nHost: x\r\n\
         Authorization: Bearer {ADMIN}\r\nContent-Type: application/json\r\n\
         Transfer-Encoding: chunked\r\n\r\n5\r\n{{\"que\r\n"
    );
    conn.write_all(head.as_bytes()).await.expect("writes");
    let answer = read_to_close(&mut conn).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer:?}");
    assert!(
        answer.contains("\"code\":\"deadline_exceeded\""),
        "{answer:?}"
    );
    assert!(answer.contains("MQLITE_BODY_TIMEOUT_MS"), "{answer:?}");
    w.broker.shutdown().await.expect("stops");
}

#[tokio::test]
async fn a_caller_without_a_token_is_answered_before_its_body_is_read() {
    let w = world_with(AuthConfig::Tokens(vec![ADMIN.into()]), |c| {
        c.limits = limits(10_000, 60_000, 64)
    })
    .await;
    let mut conn = TcpStream::connect(w.broker.addr()).await.expect("connects");
    conn.write_all(
        b"POST /mqlite.v1.QueueService/Send HTTP/1.1\r\nHost: x\r\n\
          Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"que\r\n",
    )
    .await
    .expect("writes");
    let answer = read_to_close(&mut conn).await;
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer:?}");
    w.broker.shutdown().await.expect("stops");
}

/// Past the connection limit, silent connections give way: a newcomer displaces the
/// oldest connection serving nothing, so `/healthz` answers at once however many
/// attackers connect.
#[tokio::test]
async fn silent_connections_past_the_limit_do_not_stop_anyone_else() {
    let w = world_with(AuthConfig::Off, |c| c.limits = limits(10_000, 60_000, 16)).await;
    let addr = w.broker.addr();
    let attackers = slowloris(addr, 100).await;
    for _ in 0..5 {
        assert_eq!(
            healthz(addr, Duration::from_secs(1)).await,
            "HTTP/1.1 200 OK"
        );
    }
    drop(attackers);
    w.broker.shutdown().await.expect("stops");
}

/// When every held connection is serving a request (parked long-polls), a newcomer is
/// refused at once with 503 `unavailable` naming the setting, and the long-polls are
/// untouched.
#[tokio::test]
async fn past_the_limit_with_every_connection_busy_a_newcomer_is_refused_with_503() {
    let w = world_with(AuthConfig::Off, |c| c.limits = limits(10_000, 60_000, 4)).await;
    let addr = w.broker.addr();
    w.create_queue("q", Default::default()).await;
    let mut polls = Vec::new();
    for _ in 0..4 {
        let mut c = TcpStream::connect(addr).await.expect("connects");
        let body = r#"{"queue":"q","wait_time_ms":20000}"#;
        let req = format!(
            "POST /mqlite.v1.QueueService/Receive HTTP/1.1\r\nHost: localhost\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        c.write_all(req.as_bytes()).await.expect("writes");
        polls.push(c);
    }
    let mut waiters = w.broker.engine().expect("serving").long_poll_waiters();
    tokio::time::timeout(GUARD, waiters.wait_for(|n| *n >= 4))
        .await
        .expect("the four receives park")
        .expect("the engine runs");
    let refused = healthz(addr, Duration::from_secs(1)).await;
    assert_eq!(refused, "HTTP/1.1 503 Service Unavailable");
    // The parked polls answer (empty) when the broker stops.
    let stop = tokio::spawn(w.broker.shutdown());
    for mut c in polls {
        let answer = read_to_close(&mut c).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
        assert!(answer.contains(r#"{"messages":[]}"#), "{answer:?}");
    }
    stop.await.expect("joins").expect("stops");
}

/// `/metrics` scraped while subscriptions come and go answers 200 every time: a queue
/// deleted between the list and its counts is skipped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_scraped_during_subscription_churn_always_answer() {
    let w = world().await;
    w.create_topic("t").await;
    let engine = w.broker.engine().expect("serving").clone();
    let churn = tokio::spawn(async move {
        for i in 0..300 {
            let name = format!("s{}", i % 7);
            engine
                .subscribe("t", &name, "", Default::default())
                .await
                .expect("subscribes");
            engine.unsubscribe("t", &name).await.expect("unsubscribes");
        }
    });
    let mut scrapes = 0;
    while !churn.is_finished() {
        let (status, text) = w.client.get("/metrics").await.expect("answered");
        assert_eq!(status, 200, "{}", text);
        scrapes += 1;
    }
    churn.await.expect("churn ends");
    assert!(scrapes > 0);
    w.broker.shutdown().await.expect("stops");
}

/// Posts `body` to CreateQueue with exactly these headers: the status and the body.
async fn create_queue_with(
    addr: SocketAddr,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let mut req = reqwest::Client::new()
        .post(format!("http://{addr}/mqlite.v1.AdminService/CreateQueue"))
        .body(body.to_owned());
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let r = req.send().await.expect("answered");
    (r.status().as_u16(), r.text().await.expect("a body"))
}

/// What a web page in the user's browser could send: a form post (not JSON), a request
/// from another origin, and a DNS-rebound `Host` with auth off. Each is refused and
/// changes nothing; the broker's own page (same origin) is answered.
#[tokio::test]
async fn cross_site_requests_are_refused_and_change_nothing() {
    let w = world_with(AuthConfig::Off, |_| {}).await;
    let addr = w.broker.addr();
    let body = r#"{"name":"evil"}"#;
    let (status, text) = create_queue_with(
        addr,
        &[("content-type", "application/x-www-form-urlencoded")],
        body,
    )
    .await;
    assert_eq!(status, 415, "{text}");
    assert!(text.contains("application/json"), "{text}");
    let (status, _) = create_queue_with(addr, &[("content-type", "text/plain")], body).await;
    assert_eq!(status, 415);
    let (status, _) = create_queue_with(addr, &[], body).await;
    assert_eq!(status, 415);
    let (status, text) = create_queue_with(
        addr,
        &[
            ("content-type", "application/json"),
            ("origin", "http://evil.example"),
        ],
        body,
    )
    .await;
    assert_eq!(status, 403, "{text}");
    assert!(text.contains("evil.example"), "{text}");
    let (status, text) = create_queue_with(
        addr,
        &[
            ("content-type", "application/json"),
            ("host", "evil.example"),
        ],
        body,
    )
    .await;
    assert_eq!(status, 403, "{text}");
    assert!(text.contains("loopback"), "{text}");
    let queues: mqlite_broker::wire::QueuesResponse = w
        .client
        .call(
            mqlite_broker::Rpc::ListQueues,
            &mqlite_broker::wire::Empty {},
        )
        .await
        .expect("ListQueues");
    assert!(queues.queues.is_empty(), "{queues:?}");

    // The broker's own page: same origin, JSON.
    let own = format!("http://{addr}");
    let (status, text) = create_queue_with(
        addr,
        &[
            ("content-type", "application/json; charset=utf-8"),
            ("origin", own.as_str()),
        ],
        body,
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let (status, _) = create_queue_with(
        addr,
        &[
            ("content-type", "application/json"),
            ("host", "localhost:1"),
        ],
        r#"{"name":"ok2"}"#,
    )
    .await;
    assert_eq!(status, 200);
    w.broker.shutdown().await.expect("stops");
}

/// With auth off, a non-loopback address is refused unless the risk is accepted.
#[tokio::test]
async fn auth_off_on_a_non_loopback_address_is_refused_unless_told() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = mqlite_broker::BrokerConfig::new(
        "0.0.0.0:0".parse().expect("addr"),
        dir.path().join("q.db").display().to_string(),
        AuthConfig::Off,
    );
    config.background = false;
    let refused = mqlite_broker::Broker::start(config.clone())
        .await
        .err()
        .expect("refused");
    assert!(
        refused.to_string().contains("--insecure-allow-remote"),
        "{refused}"
    );
    config.insecure_allow_remote = true;
    let broker = mqlite_broker::Broker::start(config).await.expect("starts");
    broker.shutdown().await.expect("stops");
}

/// A Receive whose answer would pass the answer cap returns what fits and leaves the
/// rest claimable: nothing is locked that was not returned. Peek likewise stops at the
/// cap. A small answer is one claim, as before.
#[tokio::test]
async fn receive_and_peek_stop_at_the_answer_cap_and_lock_only_what_they_return() {
    use mqlite_broker::wire::*;
    let w = world_with(AuthConfig::Tokens(vec![ADMIN.into()]), |c| {
        c.memory.max_answer_bytes = 4 << 20;
    })
    .await;
    w.create_queue("big", Default::default()).await;
    let body = "x".repeat(700 << 10);
    for _ in 0..3 {
        let bodies: Vec<&str> = vec![body.as_str(); 10];
        w.send("big", &bodies).await;
    }
    let got = w.receive("big", 256).await;
    let answer: usize = got.iter().map(|m| m.body.len()).sum();
    assert!(!got.is_empty() && got.len() < 30, "{} messages", got.len());
    assert!(answer <= 4 << 20, "{answer} bytes of bodies");
    let stats = w.stats("big").await;
    assert_eq!(stats.locked as usize, got.len(), "{stats:?}");
    assert_eq!(stats.active as usize, 30 - got.len(), "{stats:?}");

    let peeked: MessagesResponse = w
        .client
        .call(
            mqlite_broker::Rpc::Peek,
            &PeekRequest {
                queue: "big".into(),
                max: Some(1000),
                ..Default::default()
            },
        )
        .await
        .expect("Peek");
    let answer: usize = peeked.messages.iter().map(|m| m.body.len()).sum();
    assert!(!peeked.messages.is_empty() && peeked.messages.len() < 30);
    assert!(answer <= 4 << 20, "{answer} bytes of bodies");
    w.broker.shutdown().await.expect("stops");
}

/// A restart of the broker keeps its remote clients' leases: after it, the message is
/// not delivered again while the lease lives, and the holder's Complete succeeds.
#[tokio::test]
async fn a_restart_keeps_remote_clients_leases() {
    use mqlite_broker::wire::*;
    let w = world().await;
    w.create_queue(
        "jobs",
        WireQueueConfig {
            lock_duration_ms: Some(60_000),
            ..Default::default()
        },
    )
    .await;
    w.send("jobs", &["work"]).await;
    let held = w.receive("jobs", 1).await.remove(0);
    let db = w.dir.path().join("broker.db").display().to_string();
    w.broker.shutdown().await.expect("stops");

    let mut config = mqlite_broker::BrokerConfig::new(
        "127.0.0.1:0".parse().expect("addr"),
        db,
        AuthConfig::Tokens(vec![ADMIN.into()]),
    );
    config.clock = w.clock.shared();
    config.background = false;
    let broker = mqlite_broker::Broker::start(config)
        .await
        .expect("restarts");
    let client =
        mqlite_broker::Client::new(format!("http://{}", broker.addr()), Some(ADMIN.into()));
    let again: MessagesResponse = client
        .call(
            mqlite_broker::Rpc::Receive,
            &ReceiveRequest {
                queue: "jobs".into(),
                ..Default::default()
            },
        )
        .await
        .expect("Receive");
    assert!(
        again.messages.is_empty(),
        "delivered again inside a live lease"
    );
    let done: OkResponse = client
        .call(
            mqlite_broker::Rpc::Complete,
            &SettleRequest {
                queue: "jobs".into(),
                seq_number: held.seq_number,
                lock_token: held.lock_token.clone(),
                ..Default::default()
            },
        )
        .await
        .expect("the holder completes after the restart");
    assert!(done.ok);
    broker.shutdown().await.expect("stops");
}

/// The database deleted under the running broker: sends are refused (503 naming the
/// file) instead of acknowledged into the unlinked file, `/readyz` fails with the
/// reason, `/healthz` stays live.
#[tokio::test]
async fn a_deleted_database_refuses_sends_and_fails_readiness() {
    let w = world().await;
    w.create_queue("q", Default::default()).await;
    w.send("q", &["before"]).await;
    let (status, text) = w.client.get("/readyz").await.expect("answered");
    assert_eq!((status, text.as_str()), (200, "ready"));
    let db = w.dir.path().join("broker.db");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    let r = w
        .client
        .call::<_, mqlite_broker::wire::SendResponse>(
            mqlite_broker::Rpc::Send,
            &mqlite_broker::wire::SendRequest {
                queue: "q".into(),
                messages: vec![mqlite_broker::wire::WireMessage::with_body("after")],
                ..Default::default()
            },
        )
        .await;
    let (status, code, message) = api_error(r);
    assert_eq!((status, code.as_str()), (503, "unavailable"));
    assert!(
        message.contains("broker.db") && message.contains("deleted"),
        "{message}"
    );
    let (status, text) = w.client.get("/readyz").await.expect("answered");
    assert_eq!(status, 503, "{text}");
    assert!(text.contains("refuses writes"), "{text}");
    let (status, _) = w.client.get("/healthz").await.expect("answered");
    assert_eq!(status, 200);
    w.broker.shutdown().await.expect("stops");
}

/// Small messages are not held back by the answer cap's rounds: a Receive of 256 and a
/// Peek of 1,000 over 300 small messages return 256 and 300 (each round gives back what
/// its worst case took but its messages did not use).
#[tokio::test]
async fn rounds_under_the_cap_return_everything_that_fits() {
    use mqlite_broker::wire::*;
    let w = world().await;
    w.create_queue("small", Default::default()).await;
    for _ in 0..3 {
        let bodies: Vec<&str> = vec!["x"; 100];
        w.send("small", &bodies).await;
    }
    let peeked: MessagesResponse = w
        .client
        .call(
            mqlite_broker::Rpc::Peek,
            &PeekRequest {
                queue: "small".into(),
                max: Some(1000),
                ..Default::default()
            },
        )
        .await
        .expect("Peek");
    assert_eq!(peeked.messages.len(), 300);
    assert_eq!(w.receive("small", 256).await.len(), 256);
    w.broker.shutdown().await.expect("stops");
}

//! A broker on a loopback port over a fresh database, with a manual clock, and a
//! client of it.

#![allow(dead_code, unreachable_pub)]

use mqlite::ManualClock;
use mqlite_broker::wire::*;
use mqlite_broker::{AuthConfig, Broker, BrokerConfig, Client, ClientError, Rpc};

pub const ADMIN: &str = "admin-token-for-tests";
pub const START_MS: i64 = 1_700_000_000_000;

pub struct World {
    pub broker: Broker,
    pub client: Client,
    pub clock: ManualClock,
    pub dir: tempfile::TempDir,
}

pub async fn world() -> World {
    world_with(AuthConfig::Tokens(vec![ADMIN.to_owned()]), |_| {}).await
}

pub async fn world_with(auth: AuthConfig, tweak: impl FnOnce(&mut BrokerConfig)) -> World {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = ManualClock::new(START_MS);
    let mut config = BrokerConfig::new(
        "127.0.0.1:0".parse().expect("addr"),
        dir.path().join("broker.db").display().to_string(),
        auth,
    );
    config.clock = clock.shared();
    config.background = false;
    tweak(&mut config);
    let broker = Broker::start(config).await.expect("broker starts");
    let client = Client::new(format!("http://{}", broker.addr()), Some(ADMIN.to_owned()));
    World {
        broker,
        client,
        clock,
        dir,
    }
}

impl World {
    pub async fn create_queue(&self, name: &str, config: WireQueueConfig) {
        let _: Empty = self
            .client
            .call(
                Rpc::CreateQueue,
                &CreateQueueRequest {
                    name: name.into(),
                    config,
                },
            )
            .await
            .expect("CreateQueue");
    }

    pub async fn create_topic(&self, name: &str) {
        let config = WireQueueConfig {
            kind: Some("topic".into()),
            ..Default::default()
        };
        self.create_queue(name, config).await;
    }

    /// Subscribes `name` to `topic` with the filter `expr` (empty: every message).
    pub async fn subscribe(
        &self,
        topic: &str,
        name: &str,
        expr: &str,
    ) -> Result<Empty, ClientError> {
        self.client
            .call(
                Rpc::Subscribe,
                &SubscribeRequest {
                    topic: topic.into(),
                    name: name.into(),
                    filter: (!expr.is_empty()).then(|| FilterSpec { expr: expr.into() }),
                },
            )
            .await
    }

    /// A managed access key with these permissions (its token is in the answer).
    pub async fn create_key(&self, name: &str, permissions: &[&str]) -> WireKey {
        self.client
            .call(
                Rpc::CreateKey,
                &CreateKeyRequest {
                    name: name.into(),
                    permissions: permissions.iter().map(|p| (*p).to_owned()).collect(),
                    ..Default::default()
                },
            )
            .await
            .expect("CreateKey")
    }

    pub async fn send(&self, queue: &str, bodies: &[&str]) -> Vec<i64> {
        let r: SendResponse = self
            .client
            .call(
                Rpc::Send,
                &SendRequest {
                    queue: queue.into(),
                    messages: bodies.iter().map(WireMessage::with_body).collect(),
                    ..Default::default()
                },
            )
            .await
            .expect("Send");
        r.seq_numbers
    }

    pub async fn receive(&self, queue: &str, max: i64) -> Vec<WireMessage> {
        let r: MessagesResponse = self
            .client
            .call(
                Rpc::Receive,
                &ReceiveRequest {
                    queue: queue.into(),
                    max_messages: Some(max),
                    ..Default::default()
                },
            )
            .await
            .expect("Receive");
        r.messages
    }

    /// One pass of the broker's background sweeps (the tests' brokers run none of
    /// their own): lapsed leases back, due messages visible, retention applied.
    pub async fn run_sweeps(&self) {
        let engine = self.broker.engine().expect("serving");
        engine.run_sweeps().await.expect("sweeps");
    }

    pub async fn stats(&self, queue: &str) -> StatsResponse {
        self.client
            .call(
                Rpc::Stats,
                &QueueRequest {
                    queue: queue.into(),
                },
            )
            .await
            .expect("Stats")
    }

    pub async fn settle(
        &self,
        rpc: Rpc,
        queue: &str,
        m: &WireMessage,
        tweak: impl FnOnce(&mut SettleRequest),
    ) -> Result<OkResponse, ClientError> {
        let mut req = SettleRequest {
            queue: queue.into(),
            seq_number: m.seq_number,
            lock_token: m.lock_token.clone(),
            ..Default::default()
        };
        tweak(&mut req);
        self.client.call(rpc, &req).await
    }
}

/// The body of a wire message, decoded.
pub fn text(m: &WireMessage) -> String {
    String::from_utf8(m.decoded_body().expect("base64")).expect("utf-8")
}

/// The error code of a failed call.
pub fn code<T: std::fmt::Debug>(r: Result<T, ClientError>) -> (u16, String) {
    let (status, code, _) = api_error(r);
    (status, code)
}

/// The status, code and message of a failed call.
pub fn api_error<T: std::fmt::Debug>(r: Result<T, ClientError>) -> (u16, String, String) {
    match r {
        Err(ClientError::Api {
            status,
            code,
            message,
        }) => (status, code, message),
        other => panic!("expected an API error, got {other:?}"),
    }
}

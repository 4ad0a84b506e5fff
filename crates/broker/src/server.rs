//! The HTTP server: one route per RPC of the wire contract, the open GET routes, auth,
//! limits, the error envelope, metrics, and graceful shutdown.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use mqlite::limits::{MAX_KEY_PAGE, MAX_PEEK, MAX_RECEIVE_BATCH, MAX_WAIT};
use mqlite::{AnyEngine, DynStore, EngineOptions, Location};
use mqlite::{
    Error, LockRef, Message, MessageState, OrderingMode, PeekOptions, Permission, PurgeOptions,
    QueueConfig, QueueKind, ReceiveMode, ReceiveOptions, RedriveOptions, SendOptions, SeqNumber,
};

use crate::auth::{Auth, Principal};
use crate::config::{AuthConfig, BrokerConfig};
use crate::memory::{Budget, MemoryLimits, Share, answer_bytes, worst_message};
use crate::{prom::Prom, rpc::Rpc, wire::*};

mod error;
mod handlers;
mod local;
mod site;

pub use local::Local;

pub(crate) use error::ApiError;
use error::json_response;
use site::same_site;

/// The largest request body (32 MiB); a larger one is 413 and changes nothing.
pub const MAX_REQUEST_BYTES: usize = 32 << 20;
/// The broker's version, as the discovery card and Status report it.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Why a broker could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BrokerError {
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// Auth is off and the address is not loopback: anyone who reaches it could do
    /// anything.
    #[error(
        "refusing to serve {addr} with auth off: anyone who reaches it could read and purge \
         every queue; set MQLITE_TOKENS (or MQLITE_TOKENS_FILE), listen on 127.0.0.1, or \
         pass --insecure-allow-remote to accept the risk"
    )]
    Insecure {
        /// The address asked for.
        addr: SocketAddr,
    },
    /// The store could not be opened, or the configuration is invalid.
    #[error(transparent)]
    Store(#[from] Error),
    /// The server failed while serving.
    #[error("the server failed: {0}")]
    Serve(#[source] std::io::Error),
}

pub(crate) struct Shared {
    pub(crate) engine: AnyEngine,
    pub(crate) auth: Auth,
    pub(crate) prom: Prom,
    started: Instant,
    draining: watch::Receiver<bool>,
    ui: bool,
    body_timeout: Duration,
    /// Auth is off on a loopback address: only loopback `Host`s are answered.
    loopback_only: bool,
    /// Web origins that may call from a browser.
    cors: crate::config::Cors,
    budget: Budget,
    memory: MemoryLimits,
    readiness: Readiness,
}

type BrokerState = Arc<Shared>;

/// A running broker.
pub struct Broker {
    addr: SocketAddr,
    /// Set once the broker serves its store: at start, or when a standby takes over.
    engine: Arc<OnceLock<AnyEngine>>,
    stop: watch::Sender<bool>,
    task: JoinHandle<Result<(), BrokerError>>,
}

impl Broker {
    /// Opens the store, binds the address and starts serving in the background.
    ///
    /// A remote (libSQL) database whose owner lease another broker holds does not stop
    /// the start: this broker listens as a **standby** (`/healthz` live, `/readyz` and
    /// every RPC 503 `unavailable`), tries the lease every 250 ms, and takes over when
    /// the other's lapses (its leases kept: promise 3.1). Any other failure to open is
    /// returned.
    pub async fn start(config: BrokerConfig) -> Result<Broker, BrokerError> {
        if config.auth == AuthConfig::Off
            && !config.addr.ip().is_loopback()
            && !config.insecure_allow_remote
        {
            return Err(BrokerError::Insecure { addr: config.addr });
        }
        let opened = match open_engine(&config).await {
            Ok(engine) => Some(engine),
            Err(Error::DbLocked {
                holder: mqlite::LockHolder::AnotherOwner,
                ..
            }) => None,
            Err(e) => return Err(e.into()),
        };
        let listener =
            TcpListener::bind(config.addr)
                .await
                .map_err(|source| BrokerError::Bind {
                    addr: config.addr,
                    source,
                })?;
        let addr = listener.local_addr().map_err(BrokerError::Serve)?;
        let (stop, stopped) = watch::channel(false);
        let engine = Arc::new(OnceLock::new());
        let (routes, routed) = watch::channel(standby_router());
        let activate = {
            let (engine, config, stopped) = (engine.clone(), config.clone(), stopped.clone());
            move |opened: AnyEngine| {
                let _ = engine.set(opened.clone());
                let _ = routes.send(router(Arc::new(Shared::new(
                    opened, &config, addr, stopped,
                ))));
            }
        };
        let takeover = match opened {
            Some(opened) => {
                activate(opened);
                None
            }
            None => {
                tracing::warn!(
                    %addr,
                    db = %config.db,
                    "another broker holds the database's owner lease: standing by to take over when it lapses"
                );
                Some(tokio::spawn(stand_by(
                    config.clone(),
                    stopped.clone(),
                    activate,
                )))
            }
        };
        let limits = config.limits;
        let serving = engine.clone();
        let task = tokio::spawn(async move {
            crate::conn::serve(listener, routed, limits, stopped).await;
            if let Some(t) = takeover {
                t.abort();
            }
            if let Some(engine) = serving.get() {
                engine.close().await;
            }
            Ok(())
        });
        tracing::info!(%addr, db = %config.db, "mqlite broker listening");
        Ok(Broker {
            addr,
            engine,
            stop,
            task,
        })
    }

    /// Whether it serves its store (false: a standby waiting for the owner lease).
    pub fn is_active(&self) -> bool {
        self.engine.get().is_some()
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The engine it serves (for in-process inspection; tests drive sweeps with it);
    /// None while it stands by.
    pub fn engine(&self) -> Option<&AnyEngine> {
        self.engine.get()
    }

    /// Graceful shutdown: stops accepting, wakes long-polls (they answer with what they
    /// have), lets admitted requests finish, and closes the engine (14.5).
    pub async fn shutdown(self) -> Result<(), BrokerError> {
        // Stops accepting; parked long-polls see it and answer at once; admitted work
        // still finishes, then the engine closes.
        let _ = self.stop.send(true);
        match self.task.await {
            Ok(r) => r,
            Err(e) => Err(BrokerError::Serve(std::io::Error::other(e))),
        }
    }

    /// Serves until `signal` resolves, then shuts down gracefully.
    pub async fn run_until(self, signal: impl Future<Output = ()>) -> Result<(), BrokerError> {
        signal.await;
        self.shutdown().await
    }
}

impl Shared {
    fn new(
        engine: AnyEngine,
        config: &BrokerConfig,
        addr: SocketAddr,
        draining: watch::Receiver<bool>,
    ) -> Shared {
        Shared {
            engine,
            auth: Auth::new(config.auth.clone()),
            prom: Prom::default(),
            started: Instant::now(),
            draining,
            ui: config.ui,
            body_timeout: config.limits.body_timeout,
            loopback_only: config.auth == AuthConfig::Off && addr.ip().is_loopback(),
            cors: config.cors.clone(),
            budget: Budget::new(config.memory.budget_bytes),
            memory: config.memory,
            readiness: Readiness::default(),
        }
    }
}

/// How often a standby tries the owner lease (one read of the lease row when it is
/// held), so a takeover follows the lapse within this.
const STANDBY_RETRY: Duration = Duration::from_millis(250);

/// Tries the owner lease until it is free, then serves (`activate`).
async fn stand_by(
    config: BrokerConfig,
    mut stopped: watch::Receiver<bool>,
    activate: impl FnOnce(AnyEngine),
) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(STANDBY_RETRY) => {}
            _ = stopped.wait_for(|s| *s) => return,
        }
        match open_engine(&config).await {
            Ok(engine) => {
                tracing::warn!(db = %config.db, "took over the database's owner lease: serving");
                activate(engine);
                return;
            }
            Err(Error::DbLocked { .. }) => {}
            Err(e) => tracing::warn!(error = %e, "a standby's try of the owner lease failed"),
        }
    }
}

/// What a standby answers: live, not ready, every RPC 503.
fn standby_router() -> Router {
    let standing_by = || {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "this broker is a standby: another broker holds the database's owner lease, \
             and this one takes over when it lapses",
        )
    };
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .fallback(move || async move { standing_by() })
}

/// Opens the store the configuration names, and the engine over it.
async fn open_engine(config: &BrokerConfig) -> Result<AnyEngine, Error> {
    let location = Location::parse(&config.db)?;
    // `--sync` is the SQLite store's option; every other store opens by location.
    let store = if location.store() == "sqlite" {
        let options = mqlite::SqliteOptions::new(location.target())
            .clock(config.clock.clone())
            .synchronous(config.sync);
        DynStore::new(mqlite::SqliteStore::open(options).await?)
    } else {
        mqlite::open_store(&config.db, config.clock.clone()).await?
    };
    let options = EngineOptions {
        max_message_bytes: config.max_message_bytes,
        background: config.background,
        // The broker's leases belong to its remote clients, who outlive a restart.
        leases_at_open: mqlite::LeasesAtOpen::Keep,
        retention: config.retention,
        ..Default::default()
    };
    AnyEngine::with_store(store, options).await
}

fn router(shared: BrokerState) -> Router {
    let mut app = Router::new()
        // The SQS endpoint shares the address: POST / with `X-Amz-Target` (crate::sqs).
        .route("/", get(discovery).post(sqs_entry))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics));
    app = if shared.ui {
        app.merge(crate::console::routes())
    } else {
        app.route(
            "/ui",
            get(|| async {
                ApiError::new(
                    StatusCode::NOT_FOUND,
                    "not_found",
                    "the console is off: start the broker with `--ui on` (MQLITE_UI=on)",
                )
            }),
        )
    };
    for &rpc in Rpc::ALL {
        app = app.route(
            &rpc.path(),
            post(
                move |state: State<BrokerState>,
                      peer: Option<axum::Extension<crate::conn::Peer>>,
                      headers: HeaderMap,
                      body: Body| { handle(state, rpc, peer, headers, body) },
            ),
        );
    }
    app.fallback(|| async {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            "no such route: RPCs are POST /mqlite.v1.<Service>/<Method> (see GET /)",
        )
    })
    // Another method on a route: 405 with the contract's envelope (code
    // `unimplemented`), not an empty body.
    .method_not_allowed_fallback(|method: axum::http::Method| async move {
        ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "unimplemented",
            format!("{method} is not served here: RPCs are POST, the open routes GET"),
        )
    })
    .layer(axum::middleware::from_fn_with_state(
        shared.clone(),
        site::cors,
    ))
    .with_state(shared)
}

async fn discovery(State(s): State<BrokerState>) -> Response {
    let card = DiscoveryCard {
        name: "mqlite".into(),
        version: VERSION.into(),
        description: "a reliable message queue in one SQLite file, over HTTP/JSON".into(),
        status: "ok".into(),
        auth: s.auth.mode().into(),
        docs: "docs/broker.md".into(),
        endpoints: Rpc::ALL.iter().map(|r| r.path()).collect(),
        health: "/healthz".into(),
        metrics: "/metrics".into(),
        ui: s.ui.then(|| "/ui".into()),
    };
    json_response(StatusCode::OK, &card)
}

/// Whether the broker can take sends: false from a write the store refused (a full
/// disk, its file deleted or replaced) until a send succeeds again.
#[derive(Default)]
struct Readiness {
    failing: std::sync::Mutex<Option<String>>,
}

impl Readiness {
    fn writes_fail(&self, why: &str) {
        *self.failing.lock().unwrap_or_else(|e| e.into_inner()) = Some(why.to_owned());
    }

    fn writes_work(&self) {
        let mut failing = self.failing.lock().unwrap_or_else(|e| e.into_inner());
        if failing.is_some() {
            tracing::info!("writes work again: ready");
            *failing = None;
        }
    }

    fn failing(&self) -> Option<String> {
        self.failing
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// `/readyz`: 200 `ready` while the store takes writes; 503 with the reason after a
/// write it refused, until a send succeeds again. `/healthz` answers `ok` throughout:
/// the process is alive, and receives and settlements may still work.
async fn readyz(State(s): State<BrokerState>) -> Response {
    if *s.draining.borrow() {
        return ApiError::from(Error::Closed).into_response();
    }
    match s.readiness.failing() {
        None => "ready".into_response(),
        Some(why) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            format!("the store refuses writes: {why}"),
        )
        .into_response(),
    }
}

async fn metrics(State(s): State<BrokerState>, headers: HeaderMap) -> Response {
    if let Err(e) = s
        .auth
        .check(&s.engine, &headers, Some(Permission::Manage))
        .await
    {
        return e.into_response();
    }
    match s.prom.render(&s.engine).await {
        Ok(text) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
            text,
        )
            .into_response(),
        Err(e) => ApiError::from(e).into_response(),
    }
}

/// What the access line of one RPC says beside its method, status and duration.
#[derive(Default)]
struct Access {
    /// The queue, topic or key the request names, once it is parsed.
    target: Option<String>,
    /// The access key's id (administrators and auth-off callers have none).
    key: Option<String>,
}

async fn handle(
    State(s): State<BrokerState>,
    rpc: Rpc,
    peer: Option<axum::Extension<crate::conn::Peer>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let started = Instant::now();
    let mut access = Access::default();
    let (response, code) = match serve_rpc(&s, rpc, &headers, body, &mut access).await {
        Ok(r) => {
            if matches!(rpc, Rpc::Send | Rpc::Schedule) {
                s.readiness.writes_work();
            }
            (r, "ok")
        }
        Err(e) => {
            if e.store_fault {
                s.readiness.writes_fail(&e.message);
            }
            let code = e.code;
            (e.into_response(), code)
        }
    };
    let elapsed = started.elapsed();
    let status = response.status().as_u16();
    s.prom.observe(rpc.label(), status, elapsed);
    // Never a token: the key's public id only.
    tracing::info!(
        target: "mqlite::access",
        method = rpc.method(),
        target_name = access.target.as_deref().unwrap_or(""),
        status,
        code,
        duration_us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX),
        key = access.key.as_deref().unwrap_or(""),
        peer = %peer.map(|p| p.0.0.to_string()).unwrap_or_default(),
        "rpc"
    );
    response
}

async fn serve_rpc(
    s: &Shared,
    rpc: Rpc,
    headers: &HeaderMap,
    body: Body,
    access: &mut Access,
) -> Result<Response, ApiError> {
    same_site(s, headers)?;
    let principal = s.auth.check(&s.engine, headers, rpc.needs()).await?;
    if let Principal::Key(k) = &principal {
        access.key = Some(k.id.clone());
    }
    let (bytes, _share) = read_body(s, headers, body).await?;
    handlers::dispatch(handlers::Call {
        s,
        rpc,
        bytes: &bytes,
        principal: &principal,
        target: &mut access.target,
    })
    .await
}

/// Reads a request's body within the body timeout and the request size bound, holding
/// its share of the memory budget (the returned [`Share`]) until the answer is made.
async fn read_body(
    s: &Shared,
    headers: &HeaderMap,
    body: Body,
) -> Result<(axum::body::Bytes, Share), ApiError> {
    // The body's share of the memory budget, held until the request is answered.
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(MAX_REQUEST_BYTES)
        .min(MAX_REQUEST_BYTES);
    let share = s.budget.take(declared).await;
    let read = tokio::time::timeout(
        s.body_timeout,
        axum::body::to_bytes(body, MAX_REQUEST_BYTES),
    );
    let bytes = read
        .await
        .map_err(|_| {
            ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "deadline_exceeded",
                format!(
                    "the request body did not arrive within {} ms (MQLITE_BODY_TIMEOUT_MS)",
                    s.body_timeout.as_millis()
                ),
            )
        })?
        .map_err(|_| {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "message_too_large",
                format!("the request body exceeds {MAX_REQUEST_BYTES} bytes"),
            )
        })?;
    Ok((bytes, share))
}

/// POST /: the SQS endpoint (the AWS JSON 1.0 protocol, [`crate::sqs`]), on the
/// broker's own address, with the same body bounds, site checks and access log.
async fn sqs_entry(
    State(s): State<BrokerState>,
    peer: Option<axum::Extension<crate::conn::Peer>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let started = Instant::now();
    let action = crate::sqs::action(&headers).unwrap_or("").to_owned();
    let read = async {
        site::same_site_as(&s, &headers, crate::sqs::CONTENT_TYPE)?;
        read_body(&s, &headers, body).await
    };
    let response = match read.await {
        Ok((bytes, _share)) => {
            let ctx = crate::sqs::Ctx {
                engine: &s.engine,
                auth: &s.auth,
                headers: &headers,
                uri: &uri,
                draining: s.draining.clone(),
            };
            crate::sqs::serve(ctx, &bytes).await
        }
        Err(e) => crate::sqs::SqsError::from_api(&e).into_response(),
    };
    let elapsed = started.elapsed();
    tracing::info!(
        target: "mqlite::access",
        method = %format!("sqs.{action}"),
        status = response.status().as_u16(),
        duration_us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX),
        peer = %peer.map(|p| p.0.0.to_string()).unwrap_or_default(),
        "rpc"
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A full disk is 507 `resource_exhausted` naming the database, and fails readiness
    /// (10.7); the store's other refusals of writes are 503 `unavailable`.
    #[test]
    fn a_full_disk_is_507_and_a_store_fault() {
        let full = ApiError::from(Error::StorageFull {
            backend: "redb",
            location: "/data/mq.redb".into(),
        });
        assert_eq!(full.status, StatusCode::INSUFFICIENT_STORAGE);
        assert_eq!(full.code, "resource_exhausted");
        assert!(full.message.contains("/data/mq.redb"), "{}", full.message);
        assert!(full.store_fault);
        let gone = ApiError::from(Error::StoreGone {
            location: "/data/mq.redb".into(),
            detail: "its path names nothing now".into(),
        });
        assert_eq!(gone.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(gone.code, "unavailable");
        assert!(gone.store_fault);
    }
}

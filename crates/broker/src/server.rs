//! The HTTP server: one route per RPC of the wire contract, the open GET routes, auth,
//! limits, the error envelope, metrics, and graceful shutdown.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use mqlite::limits::{MAX_KEY_PAGE, MAX_PEEK, MAX_RECEIVE_BATCH};
use mqlite::{AnyEngine, DynStore, EngineOptions, Location};
use mqlite::{
    Error, LockRef, Message, MessageState, OrderingMode, PeekOptions, Permission, PurgeOptions,
    QueueConfig, QueueKind, ReceiveMode, ReceiveOptions, RedriveOptions, SendOptions, SeqNumber,
};

use crate::auth::{Auth, Principal};
use crate::config::{AuthConfig, BrokerConfig};
use crate::memory::{Budget, MemoryLimits, Share, answer_bytes, worst_message};
use crate::prom::Prom;
use crate::rpc::Rpc;
use crate::wire::*;

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

/// An error as the wire shows it: a status and the `{code, message}` envelope.
#[derive(Debug)]
pub(crate) struct ApiError {
    pub(crate) status: StatusCode,
    pub(crate) code: &'static str,
    pub(crate) message: String,
    /// The store cannot take writes (a full disk, its file gone): readiness fails.
    pub(crate) store_fault: bool,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            store_fault: false,
        }
    }

    fn invalid(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_argument", message)
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        let (status, code) = match &e {
            Error::InvalidArgument(_) => (StatusCode::BAD_REQUEST, "invalid_argument"),
            Error::GroupRequired { .. } => (StatusCode::BAD_REQUEST, "group_required"),
            Error::NotFound { .. } => (StatusCode::NOT_FOUND, "not_found"),
            Error::DedupConflict { .. } => (StatusCode::CONFLICT, "already_exists"),
            Error::LockLost { .. } => (StatusCode::CONFLICT, "lock_lost"),
            Error::NameConflict { .. } => (StatusCode::CONFLICT, "name_conflict"),
            Error::KeyConflict { .. } => (StatusCode::CONFLICT, "key_conflict"),
            Error::MessageTooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "message_too_large"),
            Error::Cancelled => (client_closed(), "cancelled"),
            Error::OutcomeUnknown { .. } => (StatusCode::SERVICE_UNAVAILABLE, "outcome_unknown"),
            Error::StorageFull { .. } | Error::StoreGone { .. } | Error::Deposed { .. } => {
                tracing::error!(error = %e, "the store refuses writes");
                let (status, code) = match e {
                    Error::StorageFull { .. } => {
                        (StatusCode::INSUFFICIENT_STORAGE, "resource_exhausted")
                    }
                    _ => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
                };
                let mut api = ApiError::new(status, code, e.to_string());
                api.store_fault = true;
                return api;
            }
            Error::Closed => {
                return ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "unavailable",
                    "the broker is shutting down",
                );
            }
            _ => {
                // Never internal detail on the wire; the log has it.
                tracing::error!(error = %e, source = ?std::error::Error::source(&e), "internal error");
                return ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    "internal error",
                );
            }
        };
        ApiError::new(status, code, e.to_string())
    }
}

fn client_closed() -> StatusCode {
    StatusCode::from_u16(499).unwrap_or(StatusCode::BAD_REQUEST)
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            code: self.code.to_owned(),
            message: self.message,
        };
        json_response(self.status, &body)
    }
}

fn json_response<T: Serialize>(status: StatusCode, value: &T) -> Response {
    match serde_json::to_vec(value) {
        Ok(bytes) => (
            status,
            [(header::CONTENT_TYPE, "application/json")],
            Bytes::from(bytes),
        )
            .into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
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
    budget: Budget,
    memory: MemoryLimits,
    readiness: Readiness,
}

type St = Arc<Shared>;

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
    let store = match Location::parse(&config.db)? {
        Location::Sqlite(path) => {
            let options = mqlite::SqliteOptions::new(path)
                .clock(config.clock.clone())
                .synchronous(config.sync);
            DynStore::new(mqlite::SqliteStore::open(options).await?)
        }
        _ => mqlite::open_store(&config.db, config.clock.clone()).await?,
    };
    let options = EngineOptions {
        max_message_bytes: config.max_message_bytes,
        background: config.background,
        // The broker's leases belong to its remote clients, who outlive a restart.
        leases_at_open: mqlite::LeasesAtOpen::Keep,
        ..Default::default()
    };
    AnyEngine::with_store(store, options).await
}

fn router(shared: St) -> Router {
    let mut app = Router::new()
        .route("/", get(discovery))
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
                move |state: State<St>,
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
    .with_state(shared)
}

async fn discovery(State(s): State<St>) -> Response {
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
async fn readyz(State(s): State<St>) -> Response {
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

async fn metrics(State(s): State<St>, headers: HeaderMap) -> Response {
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
    State(s): State<St>,
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
    s.prom.observe(rpc.method(), status, elapsed);
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
    // The body's share of the memory budget, held until the request is answered.
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(MAX_REQUEST_BYTES)
        .min(MAX_REQUEST_BYTES);
    let _share = s.budget.take(declared).await;
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
    dispatch(s, rpc, &bytes, &principal, &mut access.target).await
}

/// Messages for an answer, with the shares of the memory budget they hold: kept until
/// the answer is serialized.
type Capped = (Vec<Message>, Vec<Share>);

/// Receives as [`mqlite::AnyEngine::receive`] does, within the answer cap: when
/// `max_messages` messages of the largest accepted size could pass it, in rounds that
/// each fit what is left of it (the first one waits, the others do not). A receive with
/// an attempt id is one claim (a replay must return the same messages), of at most
/// what fits.
async fn receive_capped(
    s: &Shared,
    queue: &str,
    mut options: ReceiveOptions,
) -> Result<Capped, Error> {
    let cap = s.memory.max_answer_bytes;
    let worst = worst_message(s.engine.options().max_message_bytes);
    let fits = |left: usize| u32::try_from(left / worst).unwrap_or(u32::MAX);
    let max = options.max_messages;
    if u64::from(max) * worst as u64 <= cap as u64 {
        let got = s.engine.receive(queue, options).await?;
        let share = s.budget.take(got.iter().map(answer_bytes).sum()).await;
        return Ok((got, vec![share]));
    }
    if options.attempt_id.is_some() {
        options.max_messages = fits(cap).clamp(1, max);
        let got = s.engine.receive(queue, options).await?;
        let share = s.budget.take(got.iter().map(answer_bytes).sum()).await;
        return Ok((got, vec![share]));
    }
    let mut out: Vec<Message> = Vec::new();
    let mut bytes = 0usize;
    let mut shares = Vec::new();
    loop {
        let taken = u32::try_from(out.len()).unwrap_or(u32::MAX);
        let round = fits(cap.saturating_sub(bytes))
            .min(max.saturating_sub(taken))
            .max(u32::from(out.is_empty()));
        if round == 0 {
            break;
        }
        let mut this = options.clone();
        this.max_messages = round;
        if !out.is_empty() {
            // Later rounds do not wait, and run only if their share is free now.
            this.wait = Duration::ZERO;
            match s.budget.try_take(round as usize * worst) {
                Some(share) => shares.push(share),
                None => break,
            }
        }
        let got = s.engine.receive(queue, this).await?;
        let got_bytes: usize = got.iter().map(answer_bytes).sum();
        if out.is_empty() {
            shares.push(s.budget.take(got_bytes).await);
        } else if let Some(share) = shares.last_mut() {
            // The round's worst case was taken; what it read is what it holds.
            share.shrink_to(got_bytes);
        }
        let full = got.len() == round as usize;
        bytes += got_bytes;
        out.extend(got);
        if !full || out.len() >= max as usize {
            break;
        }
    }
    Ok((out, shares))
}

/// Peeks as [`mqlite::AnyEngine::peek`] does, page by page, stopping before the answer
/// passes the cap (at least one message).
async fn peek_capped(s: &Shared, queue: &str, options: PeekOptions) -> Result<Capped, Error> {
    let cap = s.memory.max_answer_bytes;
    let worst = worst_message(s.engine.options().max_message_bytes);
    let page = u32::try_from(cap / worst).unwrap_or(u32::MAX).max(1);
    let mut out: Vec<Message> = Vec::new();
    let mut bytes = 0usize;
    let mut from = options.from_seq;
    let mut shares = Vec::new();
    while out.len() < options.max as usize {
        let want = page.min(options.max - u32::try_from(out.len()).unwrap_or(u32::MAX));
        let share = if out.is_empty() {
            Some(s.budget.take(want as usize * worst).await)
        } else {
            s.budget.try_take(want as usize * worst)
        };
        match share {
            Some(share) => shares.push(share),
            None => break,
        }
        let got = s
            .engine
            .peek(
                queue,
                PeekOptions {
                    from_seq: from,
                    state: options.state,
                    max: want,
                },
            )
            .await?;
        let full = got.len() == want as usize;
        if let Some(share) = shares.last_mut() {
            // The page's worst case was taken; what it read is what it holds.
            share.shrink_to(got.iter().map(answer_bytes).sum());
        }
        for m in got {
            let size = answer_bytes(&m);
            if !out.is_empty() && bytes + size > cap {
                return Ok((out, shares));
            }
            bytes += size;
            from = Some(SeqNumber(m.seq.0 + 1));
            out.push(m);
        }
        if !full {
            break;
        }
    }
    Ok((out, shares))
}

/// Refuses what a web page in the user's browser could send to the broker behind their
/// back: a body that is not declared JSON (an HTML form or a "simple" fetch cannot
/// declare it without a CORS preflight, which the broker does not grant), a request
/// from another origin, and, with auth off on a loopback address, a `Host` that is not
/// a loopback name (DNS rebinding).
fn same_site(s: &Shared, headers: &HeaderMap) -> Result<(), ApiError> {
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"));
    if !json {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "invalid_argument",
            "an RPC body is JSON: send Content-Type: application/json",
        ));
    }
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or_default();
        let origin_host = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"));
        if origin_host.is_none() || origin_host != host {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "permission_denied",
                format!(
                    "a request from the web origin {origin:?} is refused: only the broker's own pages may call it from a browser"
                ),
            ));
        }
    }
    if s.loopback_only && !host.is_some_and(loopback_host) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "permission_denied",
            format!(
                "Host {:?} is not a loopback name: with auth off the broker answers only \
                 requests addressed to localhost or a loopback address",
                host.unwrap_or_default()
            ),
        ));
    }
    Ok(())
}

/// Whether a `Host` header names this machine's loopback: `localhost`, 127.0.0.0/8 or
/// `[::1]`, with or without a port.
fn loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(n, _)| n),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Parses a request, noting the queue, topic or key it names for the access line.
fn parse<T: DeserializeOwned + Names>(
    bytes: &[u8],
    target: &mut Option<String>,
) -> Result<T, ApiError> {
    let parsed: T = parse_body(bytes)?;
    *target = parsed.names().map(str::to_owned);
    Ok(parsed)
}

fn parse_body<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let bytes: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
        b"{}"
    } else {
        bytes
    };
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(ApiError::invalid("the request body must be a JSON object"));
    }
    serde_json::from_slice(bytes)
        .map_err(|e| ApiError::invalid(format!("the request body is not valid: {e}")))
}

fn ok<T: Serialize>(value: T) -> Result<Response, ApiError> {
    Ok(json_response(StatusCode::OK, &value))
}

fn count(name: &str, v: i64, max: u32) -> Result<u32, ApiError> {
    u32::try_from(v)
        .ok()
        .filter(|n| (1..=max).contains(n))
        .ok_or_else(|| ApiError::invalid(format!("{name} must be 1..={max}")))
}

fn non_negative(name: &str, v: i64) -> Result<u64, ApiError> {
    u64::try_from(v).map_err(|_| ApiError::invalid(format!("{name} must be >= 0")))
}

fn span(name: &str, ms: i64) -> Result<Duration, ApiError> {
    non_negative(name, ms).map(Duration::from_millis)
}

fn locks(items: &[LockItem]) -> Result<Vec<LockRef>, ApiError> {
    items
        .iter()
        .map(|i| i.lock().map_err(ApiError::from))
        .collect()
}

fn send_options(r: &SendRequest) -> Result<SendOptions, ApiError> {
    Ok(SendOptions {
        scheduled_at_ms: r.scheduled_enqueue_time_ms,
        ttl: r.ttl_ms.map(|t| span("ttl_ms", t)).transpose()?,
    })
}

fn queue_config(c: WireQueueConfig) -> Result<(QueueKind, QueueConfig), ApiError> {
    let kind: QueueKind = match c.kind.as_deref() {
        None | Some("") => QueueKind::Queue,
        Some(k) => k.parse()?,
    };
    let mut config = QueueConfig::default();
    if let Some(v) = c.lock_duration_ms {
        config.lock_duration = span("lock_duration_ms", v)?;
    }
    if let Some(v) = c.max_delivery_count {
        config.max_delivery_count = v;
    }
    if let Some(v) = c.default_ttl_ms {
        config.default_ttl = span("default_ttl_ms", v)?;
    }
    if let Some(v) = c.dead_letter_on_expire {
        config.dead_letter_on_expire = v;
    }
    if let Some(v) = c.dedup_window_ms {
        config.dedup_window = span("dedup_window_ms", v)?;
    }
    if let Some(v) = c.ordering_mode.as_deref().filter(|v| !v.is_empty()) {
        config.ordering_mode = v.parse::<OrderingMode>()?;
    }
    config.dlq_max_age_ms = c.dlq_max_age_ms.unwrap_or(0);
    config.dlq_max_count = c.dlq_max_count.unwrap_or(0);
    config.dlq_max_bytes = c.dlq_max_bytes.unwrap_or(0);
    Ok((kind, config))
}

async fn dispatch(
    s: &Shared,
    rpc: Rpc,
    bytes: &[u8],
    principal: &Principal,
    target: &mut Option<String>,
) -> Result<Response, ApiError> {
    let mq = &s.engine;
    match rpc {
        Rpc::Send | Rpc::Schedule => {
            let r: SendRequest = parse(bytes, target)?;
            if rpc == Rpc::Schedule && r.scheduled_enqueue_time_ms.is_none() {
                return Err(ApiError::invalid(
                    "Schedule needs scheduled_enqueue_time_ms",
                ));
            }
            let options = send_options(&r)?;
            let messages = r
                .messages
                .into_iter()
                .map(WireMessage::into_out)
                .collect::<Result<Vec<_>, _>>()?;
            let seq_numbers = if messages.len() == 1 {
                let m = messages.into_iter().next().unwrap_or_default();
                vec![mq.send_with(&r.queue, m, options).await?.0]
            } else {
                mq.send_batch_with(&r.queue, messages, options)
                    .await?
                    .iter()
                    .map(|slot| slot.seq().0)
                    .collect()
            };
            ok(SendResponse { seq_numbers })
        }
        Rpc::Receive => {
            let r: ReceiveRequest = parse(bytes, target)?;
            let options = ReceiveOptions {
                max_messages: count(
                    "max_messages",
                    r.max_messages.unwrap_or(1),
                    MAX_RECEIVE_BATCH,
                )?,
                wait: span("wait_time_ms", r.wait_time_ms.unwrap_or(0))?,
                mode: match r.receive_mode.unwrap_or(0) {
                    0 => ReceiveMode::PeekLock,
                    1 => ReceiveMode::ReceiveAndDelete,
                    _ => {
                        return Err(ApiError::invalid(
                            "receive_mode is 0 (peek-lock) or 1 (receive-and-delete)",
                        ));
                    }
                },
                attempt_id: r.receive_attempt_id.filter(|a| !a.is_empty()),
            };
            let mut draining = s.draining.clone();
            if *draining.borrow() {
                return Err(Error::Closed.into());
            }
            // A shutdown wakes a parked long-poll: it answers with what it has (none).
            let (messages, _shares) = tokio::select! {
                got = receive_capped(s, &r.queue, options) => match got {
                    Err(Error::Closed) => Capped::default(),
                    other => other?,
                },
                _ = draining.wait_for(|d| *d) => Capped::default(),
            };
            ok(MessagesResponse {
                messages: messages
                    .into_iter()
                    .map(|m| WireMessage::from_message(m, false))
                    .collect(),
            })
        }
        Rpc::Complete | Rpc::Abandon | Rpc::Reject | Rpc::Defer | Rpc::Renew => {
            let r: SettleRequest = parse(bytes, target)?;
            let lock = LockItem {
                seq_number: r.seq_number,
                lock_token: r.lock_token.clone(),
            }
            .lock()?;
            let q = &r.queue;
            let mut locked_until_ms = 0;
            match rpc {
                Rpc::Complete => mq.complete(q, lock).await?,
                Rpc::Abandon => mq.abandon(q, lock, span("delay_ms", r.delay_ms)?).await?,
                Rpc::Reject => {
                    mq.reject(q, lock, &r.dead_letter_reason, &r.dead_letter_description)
                        .await?
                }
                Rpc::Defer => mq.defer(q, lock).await?,
                _ => locked_until_ms = mq.renew(q, lock).await?,
            }
            ok(OkResponse {
                ok: true,
                locked_until_ms,
            })
        }
        Rpc::CompleteBatch | Rpc::RenewBatch => {
            let r: BatchRequest = parse(bytes, target)?;
            let items = locks(&r.messages)?;
            let results = if rpc == Rpc::CompleteBatch {
                mq.complete_batch(&r.queue, &items).await?
            } else {
                mq.renew_batch(&r.queue, &items).await?
            };
            ok(BatchResponse {
                results: results.into_iter().map(BatchItem::from).collect(),
            })
        }
        Rpc::ReceiveDeferred => {
            let r: ReceiveDeferredRequest = parse(bytes, target)?;
            let seqs: Vec<SeqNumber> = r.seq_numbers.iter().map(|s| SeqNumber(*s)).collect();
            let messages = mq.receive_deferred(&r.queue, &seqs).await?;
            ok(MessagesResponse {
                messages: messages
                    .into_iter()
                    .map(|m| WireMessage::from_message(m, false))
                    .collect(),
            })
        }
        Rpc::Cancel => {
            let r: CancelRequest = parse(bytes, target)?;
            let done = mq.cancel(&r.queue, SeqNumber(r.seq_number)).await?;
            ok(OkResponse {
                ok: done,
                locked_until_ms: 0,
            })
        }
        Rpc::Peek => {
            let r: PeekRequest = parse(bytes, target)?;
            let options = PeekOptions {
                from_seq: r.from_seq.map(SeqNumber),
                state: r
                    .state
                    .as_deref()
                    .filter(|s| !s.is_empty())
                    .map(str::parse::<MessageState>)
                    .transpose()?,
                max: count("max", r.max.unwrap_or(32), MAX_PEEK)?,
            };
            let (messages, _shares) = peek_capped(s, &r.queue, options).await?;
            ok(MessagesResponse {
                messages: messages
                    .into_iter()
                    .map(|m| WireMessage::from_message(m, true))
                    .collect(),
            })
        }
        Rpc::Stats => {
            let r: QueueRequest = parse(bytes, target)?;
            let stats = mq.stats(&r.queue).await?;
            ok(StatsResponse::of(r.queue, stats))
        }
        Rpc::CreateQueue => {
            let r: CreateQueueRequest = parse(bytes, target)?;
            let topic_with_options = r.config.kind.as_deref() == Some("topic")
                && (r.config.lock_duration_ms.is_some()
                    || r.config.max_delivery_count.is_some()
                    || r.config.default_ttl_ms.is_some()
                    || r.config.dead_letter_on_expire.is_some()
                    || r.config.dedup_window_ms.is_some()
                    || r.config.ordering_mode.is_some()
                    || r.config.dlq_max_age_ms.is_some()
                    || r.config.dlq_max_count.is_some()
                    || r.config.dlq_max_bytes.is_some());
            if topic_with_options {
                // A topic holds no messages: its subscriptions carry the options.
                return Err(ApiError::invalid(
                    "a topic takes no queue options: set them on its subscriptions",
                ));
            }
            let (kind, config) = queue_config(r.config)?;
            match kind {
                QueueKind::Queue => mq.create_queue(&r.name, config).await?,
                QueueKind::Topic => mq.create_topic(&r.name).await?,
                QueueKind::Subscription => {
                    return Err(ApiError::invalid(
                        "a subscription is created with Subscribe {topic, name}",
                    ));
                }
            }
            ok(Empty {})
        }
        Rpc::Subscribe => {
            let r: SubscribeRequest = parse(bytes, target)?;
            let expr = r.filter.map(|f| f.expr).unwrap_or_default();
            mq.subscribe(&r.topic, &r.name, &expr, QueueConfig::default())
                .await?;
            ok(Empty {})
        }
        Rpc::ListSubscriptions => {
            let subscriptions = mq.list_subscriptions(None).await?;
            ok(SubscriptionsResponse {
                subscriptions: subscriptions
                    .into_iter()
                    .map(|s| WireSubscription {
                        topic: s.topic,
                        name: s.name,
                        expr: s.filter,
                    })
                    .collect(),
            })
        }
        Rpc::Unsubscribe => {
            let r: UnsubscribeRequest = parse(bytes, target)?;
            if !mq.unsubscribe(&r.topic, &r.name).await? {
                return Err(Error::NotFound {
                    kind: "subscription",
                    name: format!("{}/{}", r.topic, r.name),
                }
                .into());
            }
            tracing::info!(target: "mqlite::audit", topic = %r.topic, subscription = %r.name, by = %principal, "unsubscribed");
            ok(Empty {})
        }
        Rpc::TestFilter => {
            let r: TestFilterRequest = parse(bytes, target)?;
            let message = r.message.map(WireMessage::into_out).transpose()?;
            // A sample is judged like a message sent: no larger than Send would take.
            let limit = mq.options().max_message_bytes;
            if let Some(m) = &message
                && m.body.len() > limit
            {
                return Err(Error::MessageTooLarge {
                    size: m.body.len(),
                    limit,
                }
                .into());
            }
            // The evaluation is synchronous and its cost grows with the sample: off the
            // async workers, so a slow filter does not stall other requests.
            let engine = mq.clone();
            let tested =
                tokio::task::spawn_blocking(move || engine.test_filter(&r.expr, message.as_ref()))
                    .await
                    .map_err(|e| {
                        tracing::error!(error = %e, "a filter test failed to run");
                        ApiError::new(
                            StatusCode::INTERNAL_SERVER_ERROR,
                            "internal",
                            "internal error",
                        )
                    })?;
            ok(TestFilterResponse::from(tested))
        }
        Rpc::ListQueues => {
            let queues = mq.list_queues().await?;
            ok(QueuesResponse {
                queues: queues.into_iter().map(WireQueue::from).collect(),
            })
        }
        Rpc::Redrive => {
            let r: RedriveRequest = parse(bytes, target)?;
            let options = RedriveOptions {
                target: r.target.filter(|t| !t.is_empty()),
                max: non_negative("max", r.max)?,
                older_than: span("older_than_ms", r.older_than_ms)?,
                rate_per_sec: non_negative("rate_per_sec", r.rate_per_sec)?,
                seq_numbers: r.seq_numbers.into_iter().map(SeqNumber).collect(),
            };
            let moved = mq.redrive(&r.queue, options).await?;
            tracing::info!(target: "mqlite::audit", queue = %r.queue, moved, by = %principal, "dead letters redriven");
            ok(RedriveResponse { moved })
        }
        Rpc::Purge => {
            let r: PurgeRequest = parse(bytes, target)?;
            let options = PurgeOptions {
                max: non_negative("max", r.max)?,
                older_than: span("older_than_ms", r.older_than_ms)?,
            };
            let purged = mq.purge(&r.queue, options).await?;
            tracing::info!(target: "mqlite::audit", queue = %r.queue, purged, by = %principal, "dead letters purged");
            ok(PurgeResponse { purged })
        }
        Rpc::Status => {
            let started = Instant::now();
            let st = mq.status().await?;
            let ping_ms = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
            let backend = if st.remote {
                "remote libSQL/Turso"
            } else if st.location == ":memory:" {
                "memory"
            } else {
                "local file"
            };
            ok(StatusResponse {
                version: VERSION.into(),
                backend: backend.into(),
                remote: st.remote,
                location: st.location,
                schema_version: st.schema_token,
                ping_ms,
                db_size_bytes: st.size_bytes.unwrap_or(0),
                queues: st.queues,
                topics: st.topics,
                subscriptions: st.subscriptions,
                uptime_ms: i64::try_from(s.started.elapsed().as_millis()).unwrap_or(i64::MAX),
                auth: s.auth.mode().into(),
                relay_pending: st.relay.pending,
                relay_oldest_pending_ms: st
                    .relay
                    .oldest_created_at_ms
                    .map_or(0, |t| (s.engine.clock().now_ms() - t).max(0)),
            })
        }
        Rpc::CreateKey => {
            let r: CreateKeyRequest = parse(bytes, target)?;
            let permissions = r
                .permissions
                .iter()
                .map(|p| p.parse::<Permission>())
                .collect::<Result<Vec<_>, _>>()?;
            let id = (!r.id.is_empty()).then_some(r.id.as_str());
            let created = mq
                .create_key(id, &r.name, &permissions, r.expires_at_ms)
                .await?;
            tracing::info!(target: "mqlite::audit", id = %created.key.id, by = %principal, "access key created");
            let mut key = WireKey::from(created.key);
            key.token = created.token;
            ok(key)
        }
        Rpc::ListKeys => {
            let r: ListKeysRequest = parse(bytes, target)?;
            let limit = count("limit", r.limit.unwrap_or(100), MAX_KEY_PAGE)?;
            let keys = mq
                .list_keys(r.after_id.as_deref().filter(|a| !a.is_empty()), limit)
                .await?;
            let next_after_id = if keys.len() == limit as usize {
                keys.last().map(|k| k.id.clone()).unwrap_or_default()
            } else {
                String::new()
            };
            ok(ListKeysResponse {
                keys: keys.into_iter().map(WireKey::from).collect(),
                next_after_id,
            })
        }
        Rpc::RevokeKey => {
            let r: RevokeKeyRequest = parse(bytes, target)?;
            if !mq.revoke_key(&r.id).await? {
                return Err(Error::NotFound {
                    kind: "access key",
                    name: r.id,
                }
                .into());
            }
            tracing::info!(target: "mqlite::audit", id = %r.id, by = %principal, "access key revoked");
            ok(Empty {})
        }
        Rpc::WhoAmI => ok(principal.who()),
    }
}

/// The queue, topic or key a request names, for its access line.
trait Names {
    fn names(&self) -> Option<&str> {
        None
    }
}

/// `Names` for request types that name their target in a field.
macro_rules! names {
    ($($t:ty => $field:ident),* $(,)?) => {$(
        impl Names for $t {
            fn names(&self) -> Option<&str> {
                Some(&self.$field)
            }
        }
    )*};
}

names!(
    SendRequest => queue,
    ReceiveRequest => queue,
    SettleRequest => queue,
    BatchRequest => queue,
    ReceiveDeferredRequest => queue,
    CancelRequest => queue,
    PeekRequest => queue,
    QueueRequest => queue,
    RedriveRequest => queue,
    PurgeRequest => queue,
    CreateQueueRequest => name,
    SubscribeRequest => topic,
    UnsubscribeRequest => topic,
    RevokeKeyRequest => id,
);

impl Names for CreateKeyRequest {}
impl Names for ListKeysRequest {}
impl Names for TestFilterRequest {}

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

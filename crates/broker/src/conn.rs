//! Connections: the accept loop, the connection limit, and the timeouts a connection
//! lives under. A client without a token must not be able to stop the broker answering
//! anyone, so:
//!
//! - **headers** must arrive within [`ConnLimits::header_timeout`] of the connection
//!   opening or of the previous answer (hyper's header-read timer, which also ends an
//!   idle keep-alive connection; a long-poll in progress is not idle);
//! - **bodies** must arrive within [`ConnLimits::body_timeout`] (the RPC handler's
//!   deadline; 408 past it), and an RPC checks the caller before it reads a body;
//! - **at most [`ConnLimits::max_connections`]** are held (and never more than the
//!   process's file-descriptor limit allows). At the limit a new connection displaces
//!   the oldest connection that is not serving a request (an idle one, or one still
//!   sending its headers; a connection counts as serving until its answer's last byte
//!   is written out); when every held connection is serving a request, the new one is
//!   refused with 503 `unavailable`.
//!   Connections that hold a slot without asking anything therefore cannot starve those
//!   that do.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;
use tower_service::Service;

/// The default time a client has to send a request's headers, and the time an idle
/// keep-alive connection is kept (10 s).
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// The default time a client has to send a request's body (60 s).
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(60);
/// The default connection limit (4,096), lowered to fit the file-descriptor limit.
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;
/// How long a displaced connection may take to finish writing before it is cut.
const DISPLACE_GRACE: Duration = Duration::from_millis(50);
/// File descriptors kept back from the connection limit for the store's files, the
/// listener and the process itself.
const RESERVED_FDS: usize = 64;

/// The bounds every connection lives under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnLimits {
    /// Time to send a request's headers; also how long an idle keep-alive connection is
    /// kept (`MQLITE_HEADER_TIMEOUT_MS`).
    pub header_timeout: Duration,
    /// Time to send a request's body (`MQLITE_BODY_TIMEOUT_MS`).
    pub body_timeout: Duration,
    /// Connections held at once (`MQLITE_MAX_CONNECTIONS`); the broker lowers it to
    /// fit the process's file-descriptor limit.
    pub max_connections: usize,
}

impl Default for ConnLimits {
    fn default() -> Self {
        ConnLimits {
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

impl ConnLimits {
    /// The connection limit that fits the file-descriptor limit (at least 1).
    pub fn effective_max_connections(&self) -> usize {
        let fit = fd_limit().map_or(usize::MAX, |n| n.saturating_sub(RESERVED_FDS));
        self.max_connections.min(fit).max(1)
    }
}

#[cfg(unix)]
fn fd_limit() -> Option<usize> {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    limit.current.and_then(|n| usize::try_from(n).ok())
}

#[cfg(not(unix))]
fn fd_limit() -> Option<usize> {
    None
}

/// The peer of the connection a request came on (a request extension).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Peer(pub(crate) SocketAddr);

/// One held connection: how many requests it is serving, and the bell that asks it to
/// close.
struct Held {
    serving: AtomicUsize,
    displace: Notify,
}

/// The held connections, oldest first.
#[derive(Default)]
struct Registry {
    held: Mutex<BTreeMap<u64, Arc<Held>>>,
}

enum Admission {
    Held(Arc<Held>),
    Refused,
}

impl Registry {
    /// Holds a new connection, displacing the oldest one serving nothing at the limit.
    fn admit(&self, id: u64, max: usize) -> Admission {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if held.len() >= max {
            let idle = held
                .iter()
                .find(|(_, h)| h.serving.load(Ordering::Acquire) == 0)
                .map(|(id, _)| *id);
            match idle.and_then(|id| held.remove(&id)) {
                // notify_one keeps the permit if the task is not waiting yet.
                Some(displaced) => displaced.displace.notify_one(),
                None => return Admission::Refused,
            }
        }
        let h = Arc::new(Held {
            serving: AtomicUsize::new(0),
            displace: Notify::new(),
        });
        held.insert(id, h.clone());
        Admission::Held(h)
    }

    fn release(&self, id: u64) {
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
    }
}

/// Counts a request as being served while it lives.
struct Serving(Arc<Held>);

impl Serving {
    fn new(h: &Arc<Held>) -> Self {
        h.serving.fetch_add(1, Ordering::AcqRel);
        Serving(h.clone())
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.0.serving.fetch_sub(1, Ordering::AcqRel);
    }
}

/// An answer's body, counting its connection as serving until the body is done.
struct Answer {
    body: Body,
    _serving: Serving,
}

impl http_body::Body for Answer {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// What a refused connection reads before it is closed.
fn refusal(max: usize) -> String {
    let body = serde_json::to_string(&crate::wire::ErrorBody {
        code: "unavailable".into(),
        message: format!(
            "the broker holds its limit of {max} connections, each serving a request: \
             retry in a moment (MQLITE_MAX_CONNECTIONS raises the limit)"
        ),
    })
    .unwrap_or_default();
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         retry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// Accepts and serves connections until `stop` turns true, then lets every connection
/// finish what it is serving and returns. Each request is routed by the router `router`
/// holds when it arrives.
pub(crate) async fn serve(
    listener: TcpListener,
    router: watch::Receiver<Router>,
    limits: ConnLimits,
    mut stop: watch::Receiver<bool>,
) {
    let max = limits.effective_max_connections();
    let registry = Arc::new(Registry::default());
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let mut tasks = JoinSet::new();
    let mut next_id = 0u64;
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = stop.wait_for(|s| *s) => break,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Out of file descriptors or a connection reset before it was
                // accepted: the listener itself is fine. Held connections close on
                // their timeouts, so waiting a moment frees room.
                tracing::warn!(error = %e, "accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        next_id += 1;
        let id = next_id;
        let held = match registry.admit(id, max) {
            Admission::Held(held) => held,
            Admission::Refused => {
                tracing::warn!(%peer, max, "connection refused: every held connection is serving a request");
                let _ = stream.try_write(refusal(max).as_bytes());
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        tasks.spawn(connection(
            stream,
            Peer(peer),
            http.clone(),
            router.clone(),
            held,
            stop.clone(),
            Release(registry.clone(), id),
        ));
    }
    drop(listener);
    while tasks.join_next().await.is_some() {}
}

/// Takes a connection out of the registry when its task ends.
struct Release(Arc<Registry>, u64);

impl Drop for Release {
    fn drop(&mut self) {
        self.0.release(self.1);
    }
}

async fn connection(
    stream: TcpStream,
    peer: Peer,
    http: hyper::server::conn::http1::Builder,
    router: watch::Receiver<Router>,
    held: Arc<Held>,
    mut stop: watch::Receiver<bool>,
    _release: Release,
) {
    let for_requests = held.clone();
    let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
        let serving = Serving::new(&for_requests);
        request.extensions_mut().insert(peer);
        // The routes of the moment: a standby's until it takes over, then the broker's.
        let mut router = router.borrow().clone();
        async move {
            let answer = router.call(request.map(Body::new)).await;
            // Serving until the answer's last byte is produced.
            answer.map(|a| {
                a.map(|body| {
                    Body::new(Answer {
                        body,
                        _serving: serving,
                    })
                })
            })
        }
    });
    let conn = http.serve_connection(TokioIo::new(stream), service);
    let mut conn = std::pin::pin!(conn);
    let mut closing = false;
    loop {
        tokio::select! {
            done = conn.as_mut() => {
                if let Err(e) = done {
                    tracing::debug!(peer = %peer.0, error = %e, "connection ended");
                }
                return;
            }
            _ = held.displace.notified(), if !closing => {
                // It serves no request: an idle connection closes at once; one that is
                // half-way through sending headers is cut after a moment (a graceful
                // shutdown would wait for the rest of them).
                tracing::debug!(peer = %peer.0, "connection displaced at the connection limit");
                conn.as_mut().graceful_shutdown();
                break;
            }
            _ = stop.wait_for(|s| *s), if !closing => {
                conn.as_mut().graceful_shutdown();
                closing = true;
            }
        }
    }
    let _ = tokio::time::timeout(DISPLACE_GRACE, conn).await;
}

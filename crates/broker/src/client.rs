//! A client of the wire contract, on the same wire types as the server: what the
//! `mqlite` command's client subcommands and the broker's tests use. Over HTTP it is
//! the facade's [`mqlite::remote::Http`]; made by [`Client::local`], the broker's own
//! handlers serve its calls in this process.

use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;

pub use mqlite::remote::ClientError;
use mqlite::remote::{Http, Rpc, decode, encode, wire::ErrorBody};

use crate::Local;

/// A connection to one broker, or to a store opened in this process ([`Client::local`]).
#[derive(Debug, Clone)]
pub struct Client {
    http: Http,
    /// Set: every call is served in process by these handlers, not sent.
    local: Option<Arc<Local>>,
}

impl Client {
    /// A client of the broker at `endpoint` (`http://127.0.0.1:6754`), sending `token`
    /// as the bearer token when given.
    pub fn new(endpoint: impl Into<String>, token: Option<String>) -> Self {
        Client {
            http: Http::new(endpoint, token),
            local: None,
        }
    }

    /// A client whose calls the broker's handlers serve in this process, over the store
    /// `local` opened: the same requests, answers and errors as over HTTP, without a
    /// broker. Its endpoint is the store's location.
    pub fn local(local: Local, location: impl Into<String>) -> Self {
        Client {
            http: Http::new(location, None),
            local: Some(Arc::new(local)),
        }
    }

    /// The in-process store, for a client made by [`Client::local`].
    pub fn in_process(&self) -> Option<&Local> {
        self.local.as_deref()
    }

    /// The same broker with another token (or none).
    pub fn with_token(&self, token: Option<String>) -> Self {
        Client {
            http: self.http.with_token(token),
            local: self.local.clone(),
        }
    }

    /// The endpoint.
    pub fn endpoint(&self) -> &str {
        self.http.endpoint()
    }

    /// Calls `rpc` with `request`.
    pub async fn call<Q: Serialize + Sync + ?Sized, A: DeserializeOwned>(
        &self,
        rpc: Rpc,
        request: &Q,
    ) -> Result<A, ClientError> {
        if self.local.is_none() {
            return self.http.call(rpc, request).await;
        }
        self.call_raw(&rpc.path(), encode(request)?).await
    }

    /// Posts raw bytes to `path` and decodes the answer (tests send malformed bodies).
    pub async fn call_raw<A: DeserializeOwned>(
        &self,
        path: &str,
        body: impl Into<reqwest::Body>,
    ) -> Result<A, ClientError> {
        let (status, bytes) = self.post_raw(path, body).await?;
        decode(status, &bytes)
    }

    /// Posts raw bytes to `path`: the status and the body as they came.
    pub async fn post_raw(
        &self,
        path: &str,
        body: impl Into<reqwest::Body>,
    ) -> Result<(u16, Vec<u8>), ClientError> {
        let Some(local) = &self.local else {
            return self.http.post_raw(path, body).await;
        };
        let body: reqwest::Body = body.into();
        let bytes = body.as_bytes().unwrap_or_default();
        Ok(match Rpc::from_path(path) {
            Some(rpc) => local.call_bytes(rpc, bytes).await,
            None => not_served(path),
        })
    }

    /// GETs `path`: the status and the body as text.
    pub async fn get(&self, path: &str) -> Result<(u16, String), ClientError> {
        if self.local.is_some() {
            let (status, body) = not_served(path);
            return Ok((status, String::from_utf8_lossy(&body).into_owned()));
        }
        self.http.get(path).await
    }
}

/// What an in-process client answers for a path that is not an RPC: 404 with the
/// envelope.
fn not_served(path: &str) -> (u16, Vec<u8>) {
    let body = ErrorBody {
        code: "not_found".into(),
        message: format!("{path} is not an RPC: a store opened in process serves only the RPCs"),
    };
    (404, serde_json::to_vec(&body).unwrap_or_default())
}

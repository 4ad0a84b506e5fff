//! The wire contract over HTTP, untyped: one POST per RPC with a wire request, the
//! answer decoded or the error envelope read. The typed [`Client`](super::Client) and
//! the broker's own client (its CLI, its tests) call through it.

use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{Rpc, wire::ErrorBody};

/// What a call can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The broker could not be reached, or the connection failed.
    #[error("cannot reach the broker at {endpoint}: {source}")]
    Transport {
        /// The endpoint called.
        endpoint: String,
        /// What failed.
        #[source]
        source: reqwest::Error,
    },
    /// The broker answered with the error envelope.
    #[error("{status} {code}: {message}")]
    Api {
        /// The HTTP status.
        status: u16,
        /// The envelope's code.
        code: String,
        /// The envelope's message.
        message: String,
    },
    /// The answer was not what the contract says.
    #[error("the broker's answer (HTTP {status}) is not understood: {detail}")]
    Decode {
        /// The HTTP status.
        status: u16,
        /// What was wrong.
        detail: String,
    },
}

impl ClientError {
    /// The envelope's code, for an error the broker answered.
    pub fn code(&self) -> Option<&str> {
        match self {
            ClientError::Api { code, .. } => Some(code),
            _ => None,
        }
    }

    /// The HTTP status, when the broker answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Api { status, .. } | ClientError::Decode { status, .. } => Some(*status),
            ClientError::Transport { .. } => None,
        }
    }
}

/// A connection to one broker's HTTP endpoint. Clones share the connection pool.
#[derive(Debug, Clone)]
pub struct Http {
    http: reqwest::Client,
    endpoint: String,
    token: Option<String>,
}

impl Http {
    /// A client of the broker at `endpoint` (`http://127.0.0.1:6754`), sending `token`
    /// as the bearer token when given.
    pub fn new(endpoint: impl Into<String>, token: Option<String>) -> Self {
        let endpoint = endpoint.into().trim_end_matches('/').to_owned();
        let http = reqwest::Client::builder()
            // Longer than the longest long-poll (20 s), so a wait is never cut short.
            .timeout(Duration::from_secs(60))
            // Shorter than the broker's idle keep-alive (its header timeout, 10 s by
            // default), so a pooled connection is dropped here before the broker closes
            // it under a request.
            .pool_idle_timeout(Duration::from_secs(5))
            .build()
            .unwrap_or_default();
        Http {
            http,
            endpoint,
            token,
        }
    }

    /// The same broker with another token (or none).
    pub fn with_token(&self, token: Option<String>) -> Self {
        Http {
            token,
            ..self.clone()
        }
    }

    /// The endpoint.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    fn transport(&self, source: reqwest::Error) -> ClientError {
        ClientError::Transport {
            endpoint: self.endpoint.clone(),
            source,
        }
    }

    /// Calls `rpc` with `request`.
    pub async fn call<Q: Serialize + Sync + ?Sized, A: DeserializeOwned>(
        &self,
        rpc: Rpc,
        request: &Q,
    ) -> Result<A, ClientError> {
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
        let mut req = self
            .http
            .post(format!("{}{path}", self.endpoint))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        let resp = req.send().await.map_err(|e| self.transport(e))?;
        let status = resp.status().as_u16();
        let bytes = resp.bytes().await.map_err(|e| self.transport(e))?;
        Ok((status, bytes.to_vec()))
    }

    /// GETs `path`: the status and the body as text.
    pub async fn get(&self, path: &str) -> Result<(u16, String), ClientError> {
        let mut req = self.http.get(format!("{}{path}", self.endpoint));
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        let resp = req.send().await.map_err(|e| self.transport(e))?;
        let status = resp.status().as_u16();
        let text = resp.text().await.map_err(|e| self.transport(e))?;
        Ok((status, text))
    }
}

/// An answer as the contract has it: a 2xx body decoded as `A`, or the error envelope as
/// [`ClientError::Api`].
pub fn decode<A: DeserializeOwned>(status: u16, bytes: &[u8]) -> Result<A, ClientError> {
    if (200..300).contains(&status) {
        return serde_json::from_slice(bytes).map_err(|e| ClientError::Decode {
            status,
            detail: e.to_string(),
        });
    }
    match serde_json::from_slice::<ErrorBody>(bytes) {
        Ok(e) => Err(ClientError::Api {
            status,
            code: e.code,
            message: e.message,
        }),
        Err(_) => Err(ClientError::Decode {
            status,
            detail: String::from_utf8_lossy(bytes).chars().take(200).collect(),
        }),
    }
}

/// A request's JSON body.
pub fn encode<Q: Serialize + ?Sized>(request: &Q) -> Result<Vec<u8>, ClientError> {
    serde_json::to_vec(request).map_err(|e| ClientError::Decode {
        status: 0,
        detail: format!("the request does not encode: {e}"),
    })
}

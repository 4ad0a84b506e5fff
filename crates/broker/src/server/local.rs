//! The broker's RPCs served in process: the same handlers, over a store this process
//! opens, without a socket. What the `mqlite` command's embedded mode (`--db`,
//! `MQLITE_DB`) and `mqlite mcp` over a local file call.

use super::*;

/// The RPCs of the wire contract over a store opened in this process. No auth: the
/// caller holds the file. Leases are kept at open (as a broker keeps them), so a
/// message received locked by one command can be settled by the next.
pub struct Local {
    shared: Arc<Shared>,
    /// Never sent: the shared state's drain signal, which an in-process caller never
    /// raises.
    _stop: watch::Sender<bool>,
}

impl std::fmt::Debug for Local {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Local").finish_non_exhaustive()
    }
}

impl Local {
    /// Opens the store `config.db` names with `config`'s options (its address and auth
    /// are not used).
    pub async fn open(config: &BrokerConfig) -> Result<Local, BrokerError> {
        let engine = open_engine(config).await?;
        let (stop, stopped) = watch::channel(false);
        let mut config = config.clone();
        config.auth = AuthConfig::Off;
        let addr = SocketAddr::from(([127, 0, 0, 1], 0));
        Ok(Local {
            shared: Arc::new(Shared::new(engine, &config, addr, stopped)),
            _stop: stop,
        })
    }

    /// The engine it serves.
    pub fn engine(&self) -> &AnyEngine {
        &self.shared.engine
    }

    /// Calls `rpc` with a JSON request body: the status and the JSON answer, as the
    /// broker would send them.
    pub async fn call_bytes(&self, rpc: Rpc, body: &[u8]) -> (u16, Vec<u8>) {
        let mut target = None;
        let response = match handlers::dispatch(handlers::Call {
            s: &self.shared,
            rpc,
            bytes: body,
            principal: &Principal::Anyone,
            target: &mut target,
        })
        .await
        {
            Ok(r) => r,
            Err(e) => e.into_response(),
        };
        let status = response.status().as_u16();
        match axum::body::to_bytes(response.into_body(), usize::MAX).await {
            Ok(bytes) => (status, bytes.to_vec()),
            Err(e) => {
                let body = ErrorBody {
                    code: "internal".into(),
                    message: format!("the answer could not be read: {e}"),
                };
                (500, serde_json::to_vec(&body).unwrap_or_default())
            }
        }
    }

    /// Closes the engine (its background loops stop; the file is released).
    pub async fn close(&self) {
        self.shared.engine.close().await;
    }
}

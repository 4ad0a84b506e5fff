//! `mqlite serve`: the broker, until SIGTERM or SIGINT.

use mqlite_broker::{AuthConfig, Broker, BrokerConfig};

use crate::args::{ServeArgs, Setting};
use crate::{Failure, output};

/// Runs the broker the flags describe until SIGTERM or SIGINT, then shuts it down
/// gracefully.
pub(crate) fn run(a: ServeArgs) -> Result<(), Failure> {
    crate::logs::install()?;
    let parsed = match a
        .tokens_file
        .as_deref()
        .filter(|p| !p.as_os_str().is_empty())
    {
        Some(file) => Some(AuthConfig::from_file(file)),
        None => AuthConfig::parse(a.tokens()).transpose(),
    }
    .transpose()
    .map_err(|e| Failure::from(e.to_string()))?;
    let (auth, generated) = match parsed {
        Some(auth) => (auth, None),
        None => {
            let token = AuthConfig::generate_token();
            (AuthConfig::Tokens(vec![token.clone()]), Some(token))
        }
    };
    let mode = auth.mode();
    let mut config = BrokerConfig::new(a.addr, a.db(), auth);
    if let Some(Setting(Some(sync))) = a.sync {
        config.sync = sync;
    }
    if let Some(Setting(Some(bytes))) = a.max_message_bytes {
        config.max_message_bytes = bytes;
    }
    if let Some(Setting(Some(t))) = a.header_timeout_ms {
        config.limits.header_timeout = t;
    }
    if let Some(Setting(Some(t))) = a.body_timeout_ms {
        config.limits.body_timeout = t;
    }
    config.insecure_allow_remote = a.insecure_allow_remote;
    if let Some(Setting(Some(n))) = a.memory_budget_bytes {
        config.memory.budget_bytes = n;
    }
    if let Some(Setting(Some(n))) = a.max_answer_bytes {
        config.memory.max_answer_bytes = n;
    }
    if let Some(Setting(Some(n))) = a.max_connections {
        config.limits.max_connections = n;
    }
    let set = |v: &Option<String>| v.clone().filter(|v| !v.is_empty());
    if let Some(cors) = set(&a.cors) {
        config.cors =
            mqlite_broker::config::Cors::parse(&cors).map_err(|e| Failure::from(e.to_string()))?;
    }
    config.retention = mqlite_broker::config::retention(
        set(&a.dlq_retention).as_deref(),
        set(&a.dlq_max_age).as_deref(),
        set(&a.dlq_max_count).as_deref(),
        set(&a.dlq_max_bytes).as_deref(),
    )
    .map_err(|e| Failure::from(e.to_string()))?;
    config.ui = match a.ui {
        Some(Setting(Some(on))) => on,
        _ => config.auth != AuthConfig::Off,
    };
    if config.ui && config.auth == AuthConfig::Off {
        eprintln!(
            "mqlite: warning: the console is on with auth off: anyone who reaches the \
             address can purge queues from a browser"
        );
    }
    let console = config.ui;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::from(format!("cannot start the async runtime: {e}")))?;
    runtime.block_on(async move {
        // Installed before the ready line, so a signal sent as soon as it is read is
        // a graceful stop, not the default death.
        let mut stop = Stop::install()?;
        let broker = Broker::start(config).await?;
        if let Some(token) = generated {
            eprintln!("mqlite: no MQLITE_TOKENS given; generated admin token: {token}");
        }
        let ready = output::line(&format!(
            "mqlite broker listening on http://{} (db {}, auth {mode})",
            broker.addr(),
            a.db()
        ));
        let ready = match ready {
            Ok(()) if !broker.is_active() => output::line(
                "standby: another broker holds the database's owner lease; this one takes \
                 over when it lapses (/readyz answers 503 until then)",
            ),
            other => other,
        };
        let ready = match ready {
            Ok(()) if console => output::line(&format!("console: http://{}/ui", broker.addr())),
            other => other,
        };
        if let Err(e) = ready {
            let _ = broker.shutdown().await;
            return Err(e);
        }
        stop.next().await;
        // Shutdown lets admitted requests finish; a second signal stops waiting.
        tokio::select! {
            done = broker.shutdown() => done?,
            () = stop.next() => return Err(FORCED.into()),
        }
        output::line("mqlite broker stopped")
    })
}

/// Why a second signal during shutdown exits 1.
const FORCED: &str = "a second signal: stopped without waiting for requests in flight";

/// SIGTERM and SIGINT, listened for from installation on.
struct Stop {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
}

impl Stop {
    #[cfg(unix)]
    fn install() -> Result<Stop, Failure> {
        use tokio::signal::unix::{SignalKind, signal};
        let listen = |kind: SignalKind, name: &str| {
            signal(kind).map_err(|e| Failure::from(format!("cannot listen for {name}: {e}")))
        };
        Ok(Stop {
            term: listen(SignalKind::terminate(), "SIGTERM")?,
            int: listen(SignalKind::interrupt(), "SIGINT")?,
        })
    }

    #[cfg(not(unix))]
    fn install() -> Result<Stop, Failure> {
        Ok(Stop {})
    }

    /// The next SIGTERM or SIGINT.
    #[cfg(unix)]
    async fn next(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }

    /// The next Ctrl-C.
    #[cfg(not(unix))]
    async fn next(&mut self) {
        let _ = tokio::signal::ctrl_c().await;
    }
}

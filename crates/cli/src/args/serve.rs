//! `mqlite serve`'s flags and how their values are read.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use mqlite_broker::config::{self, Synchronous};

/// `mqlite serve`'s flags. An empty value (an environment variable set to "") counts
/// as unset, as in the broker's own `BrokerConfig::from_env`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Where to listen, host:port (port 0: any free port).
    #[arg(long, env = "MQLITE_ADDR", default_value = config::DEFAULT_ADDR, value_parser = parse_addr)]
    pub(crate) addr: SocketAddr,

    /// The store, from the global `--db` (MQLITE_DB).
    #[arg(skip)]
    pub(crate) db: String,

    /// Comma-separated administrator tokens (each at least 16 characters), or `off`
    /// for no authentication. Unset: a token is generated and printed once to stderr.
    /// A flag's value is visible to every user in the process list: prefer the
    /// environment or --tokens-file.
    #[arg(long, env = "MQLITE_TOKENS", hide_env_values = true)]
    pub(crate) tokens: Option<String>,

    /// A file of administrator tokens, one per line (`#` starts a comment line).
    #[arg(
        long,
        env = "MQLITE_TOKENS_FILE",
        value_name = "PATH",
        conflicts_with = "tokens"
    )]
    pub(crate) tokens_file: Option<PathBuf>,

    /// The durability point of a SQLite store: normal, full, off or extra [default:
    /// normal].
    #[arg(long, env = "MQLITE_SYNC", value_parser = parse_sync)]
    pub(crate) sync: Option<Setting<Synchronous>>,

    /// The body limit per message, bytes [default: the engine's].
    #[arg(long, env = "MQLITE_MAX_MESSAGE_BYTES", value_name = "BYTES", value_parser = parse_bytes)]
    pub(crate) max_message_bytes: Option<Setting<usize>>,

    /// The web console at /ui: on or off [default: on when auth is on, off without].
    #[arg(long, env = "MQLITE_UI", value_name = "on|off", value_parser = parse_ui)]
    pub(crate) ui: Option<Setting<bool>>,

    /// Time a client has to send a request's headers, and to keep an idle connection
    /// [default: 10000].
    #[arg(long, env = "MQLITE_HEADER_TIMEOUT_MS", value_name = "MS", value_parser = parse_ms)]
    pub(crate) header_timeout_ms: Option<Setting<Duration>>,

    /// Time a client has to send a request's body [default: 60000].
    #[arg(long, env = "MQLITE_BODY_TIMEOUT_MS", value_name = "MS", value_parser = parse_ms)]
    pub(crate) body_timeout_ms: Option<Setting<Duration>>,

    /// Request bodies and answers held in memory at once, bytes [default: 48 MiB];
    /// requests past it wait their turn.
    #[arg(long, env = "MQLITE_MEMORY_BUDGET_BYTES", value_name = "BYTES", value_parser = parse_count)]
    pub(crate) memory_budget_bytes: Option<Setting<usize>>,

    /// The largest Receive or Peek answer, bytes [default: 16 MiB]; an answer stops
    /// adding messages before it passes it.
    #[arg(long, env = "MQLITE_MAX_ANSWER_BYTES", value_name = "BYTES", value_parser = parse_count)]
    pub(crate) max_answer_bytes: Option<Setting<usize>>,

    /// Serve a non-loopback address with auth off. Refused without it: anyone who
    /// reaches the address could read and purge every queue.
    #[arg(long)]
    pub(crate) insecure_allow_remote: bool,

    /// Web origins that may call from a browser: `*`, `off`, or comma-separated origins
    /// (https://app.example) [default: * with auth on, off without].
    #[arg(long, env = "MQLITE_CORS", value_name = "*|off|ORIGINS")]
    pub(crate) cors: Option<String>,

    /// Dead-letter retention for queues that set none: on (14 days and 1,000,000 dead
    /// letters per queue, oldest dropped first) or off (every dead letter kept)
    /// [default: on].
    #[arg(long, env = "MQLITE_DLQ_RETENTION", value_name = "on|off")]
    pub(crate) dlq_retention: Option<String>,

    /// The oldest dead letter kept: a duration (336h, 14d) or milliseconds; 0 for no
    /// age bound [default: 14d].
    #[arg(long, env = "MQLITE_DLQ_MAX_AGE", value_name = "DURATION")]
    pub(crate) dlq_max_age: Option<String>,

    /// The most dead letters kept per queue; 0 for no bound [default: 1000000].
    #[arg(long, env = "MQLITE_DLQ_MAX_COUNT", value_name = "N")]
    pub(crate) dlq_max_count: Option<String>,

    /// The most dead-letter body bytes kept per queue; 0 for no bound [default: 0].
    #[arg(long, env = "MQLITE_DLQ_MAX_BYTES", value_name = "BYTES")]
    pub(crate) dlq_max_bytes: Option<String>,

    /// Connections held at once, lowered to fit the file-descriptor limit [default:
    /// 4096].
    #[arg(long, env = "MQLITE_MAX_CONNECTIONS", value_name = "N", value_parser = parse_count)]
    pub(crate) max_connections: Option<Setting<usize>>,
}

impl ServeArgs {
    /// The store location, the default for an empty value.
    pub(crate) fn db(&self) -> &str {
        if self.db.is_empty() {
            config::DEFAULT_DB
        } else {
            &self.db
        }
    }

    /// The tokens setting, None for an empty value.
    pub(crate) fn tokens(&self) -> Option<&str> {
        self.tokens.as_deref().filter(|t| !t.is_empty())
    }
}

/// A flag's value; `Setting(None)` for an empty one (the default applies).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Setting<T>(pub(crate) Option<T>);

pub(super) fn parse_addr(text: &str) -> Result<SocketAddr, String> {
    let text = if text.is_empty() {
        config::DEFAULT_ADDR
    } else {
        text
    };
    config::parse_addr(text).map_err(|e| e.to_string())
}

pub(super) fn parse_sync(text: &str) -> Result<Setting<Synchronous>, String> {
    if text.is_empty() {
        return Ok(Setting(None));
    }
    config::parse_sync(text)
        .map(|s| Setting(Some(s)))
        .map_err(|e| e.to_string())
}

pub(super) fn parse_ui(text: &str) -> Result<Setting<bool>, String> {
    if text.is_empty() {
        return Ok(Setting(None));
    }
    config::parse_switch("--ui", text)
        .map(|s| Setting(Some(s)))
        .map_err(|e| e.to_string())
}

pub(super) fn parse_bytes(text: &str) -> Result<Setting<usize>, String> {
    if text.is_empty() {
        return Ok(Setting(None));
    }
    text.parse()
        .map(|n| Setting(Some(n)))
        .map_err(|_| format!("{text:?} is not a byte count"))
}

pub(super) fn parse_ms(text: &str) -> Result<Setting<Duration>, String> {
    if text.is_empty() {
        return Ok(Setting(None));
    }
    text.parse::<u64>()
        .ok()
        .filter(|n| *n > 0)
        .map(|n| Setting(Some(Duration::from_millis(n))))
        .ok_or_else(|| format!("{text:?} is not a positive number of milliseconds"))
}

pub(super) fn parse_count(text: &str) -> Result<Setting<usize>, String> {
    if text.is_empty() {
        return Ok(Setting(None));
    }
    text.parse()
        .ok()
        .filter(|n| *n > 0)
        .map(|n| Setting(Some(n)))
        .ok_or_else(|| format!("{text:?} is not a positive count"))
}

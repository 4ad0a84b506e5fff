//! What a broker is started with: flags or the wire contract's environment knobs.

use std::net::SocketAddr;

use mqlite::limits::DEFAULT_MAX_MESSAGE_BYTES;
use mqlite::{Error, Result};
use mqlite::{SharedClock, SystemClock};

use crate::{conn::ConnLimits, memory::MemoryLimits};

/// The default listen address of the wire contract.
pub const DEFAULT_ADDR: &str = "127.0.0.1:6754";
/// The default store location.
pub const DEFAULT_DB: &str = "./mqlite.db";

/// The shortest administrator token accepted.
pub const MIN_TOKEN_LEN: usize = 16;

/// The dead-letter retention an unattended broker keeps by default, per queue: 14 days
/// and 1,000,000 dead letters, oldest dropped first; no byte cap. A queue's own
/// `dlq_max_*` overrides it; `MQLITE_DLQ_RETENTION=off` keeps every dead letter.
pub const DEFAULT_RETENTION: mqlite::RetentionDefaults = mqlite::RetentionDefaults {
    max_age: std::time::Duration::from_secs(14 * 24 * 3600),
    max_count: 1_000_000,
    max_bytes: 0,
};

/// Words that are settings, never tokens.
const RESERVED_WORDS: [&str; 8] = [
    "off", "on", "none", "true", "false", "null", "disabled", "bearer",
];

/// Which web origins may call the broker from a browser (`MQLITE_CORS`): the answer's
/// `Access-Control-Allow-Origin`, and the preflight a browser sends before a JSON POST.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cors {
    /// No other origin (the broker's own pages only).
    Off,
    /// Any origin (`*`): the default with auth on, where a call needs a bearer token a
    /// page cannot take from the user's browser on its own.
    Any,
    /// These origins (`https://app.example`), exactly.
    Origins(Vec<String>),
}

impl Cors {
    /// Parses `MQLITE_CORS`: `off`, `*`, or comma-separated origins.
    pub fn parse(text: &str) -> Result<Cors> {
        let t = text.trim();
        if t.eq_ignore_ascii_case("off") || t.eq_ignore_ascii_case("none") {
            return Ok(Cors::Off);
        }
        if t == "*" {
            return Ok(Cors::Any);
        }
        let origins: Vec<String> = t
            .split(',')
            .map(|o| o.trim().trim_end_matches('/').to_owned())
            .filter(|o| !o.is_empty())
            .collect();
        match origins
            .iter()
            .find(|o| !(o.starts_with("http://") || o.starts_with("https://")))
        {
            Some(bad) => Err(Error::invalid(format!(
                "MQLITE_CORS: {bad:?} is not an origin: give off, *, or origins such as \
                 https://app.example"
            ))),
            None if origins.is_empty() => Ok(Cors::Off),
            None => Ok(Cors::Origins(origins)),
        }
    }

    /// The default: any origin with auth on, none with auth off.
    pub fn default_for(auth: &AuthConfig) -> Cors {
        if auth.is_on() { Cors::Any } else { Cors::Off }
    }

    /// The `Access-Control-Allow-Origin` for a request from `origin`, if it may call.
    pub fn allow(&self, origin: &str) -> Option<String> {
        match self {
            Cors::Off => None,
            Cors::Any => Some("*".to_owned()),
            Cors::Origins(list) => list
                .iter()
                .any(|o| o.eq_ignore_ascii_case(origin))
                .then(|| origin.to_owned()),
        }
    }
}

/// Who may call the broker.
#[derive(Clone, PartialEq, Eq)]
pub enum AuthConfig {
    /// No authentication (`MQLITE_TOKENS=off`): every caller is an administrator.
    Off,
    /// These administrator tokens, plus the managed access keys in the store.
    Tokens(Vec<String>),
}

impl std::fmt::Debug for AuthConfig {
    // Never print a token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AuthConfig::Off => f.write_str("Off"),
            AuthConfig::Tokens(t) => write!(f, "Tokens({} configured)", t.len()),
        }
    }
}

impl AuthConfig {
    /// Reads `MQLITE_TOKENS`: comma-separated administrator tokens, `off`, or unset
    /// (None: the caller generates one and prints it once). Each token is at least
    /// [`MIN_TOKEN_LEN`] characters and not a reserved word (`off`, `on`, `none`, ...).
    pub fn parse(value: Option<&str>) -> Result<Option<Self>> {
        let Some(v) = value else { return Ok(None) };
        if v.trim().eq_ignore_ascii_case("off") {
            return Ok(Some(AuthConfig::Off));
        }
        Self::tokens("MQLITE_TOKENS", v.split(',')).map(Some)
    }

    /// Reads administrator tokens from a file (`MQLITE_TOKENS_FILE`): one per line (or
    /// comma-separated), blank lines and lines starting with `#` ignored. A file keeps
    /// tokens out of the process list and the shell's history.
    pub fn from_file(path: &std::path::Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            Error::invalid(format!(
                "MQLITE_TOKENS_FILE {}: cannot read it: {e}",
                path.display()
            ))
        })?;
        let items = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.starts_with('#'))
            .flat_map(|l| l.split(','));
        Self::tokens(&format!("MQLITE_TOKENS_FILE {}", path.display()), items)
    }

    fn tokens<'a>(source: &str, items: impl Iterator<Item = &'a str>) -> Result<Self> {
        let mut tokens = Vec::new();
        for (i, t) in items.map(str::trim).filter(|t| !t.is_empty()).enumerate() {
            let n = i + 1;
            if RESERVED_WORDS.iter().any(|w| t.eq_ignore_ascii_case(w)) {
                return Err(Error::invalid(format!(
                    "{source}: token {n} is the word {t:?}, which is not a token (`off` \
                     alone turns auth off)"
                )));
            }
            let len = t.chars().count();
            if len < MIN_TOKEN_LEN {
                // Never the token itself: it may be a real secret, mistyped.
                return Err(Error::invalid(format!(
                    "{source}: token {n} has {len} characters; a token has at least \
                     {MIN_TOKEN_LEN} (leave the setting unset to have one generated)"
                )));
            }
            tokens.push(t.to_owned());
        }
        if tokens.is_empty() {
            return Err(Error::invalid(format!(
                "{source} holds no token: give comma-separated tokens, or `off`"
            )));
        }
        Ok(AuthConfig::Tokens(tokens))
    }

    /// Whether RPCs need a bearer token (Status's `auth`).
    pub fn is_on(&self) -> bool {
        *self != AuthConfig::Off
    }

    /// "bearer" or "none", as the discovery card says.
    pub fn mode(&self) -> &'static str {
        match self {
            AuthConfig::Off => "none",
            AuthConfig::Tokens(_) => "bearer",
        }
    }

    /// A fresh administrator token: `mqk_` and 64 hexadecimal characters.
    pub fn generate_token() -> String {
        mqlite::access::mint_token()
    }
}

/// The durability point of a local SQLite store (`MQLITE_SYNC`).
pub use mqlite::Synchronous;

/// Everything a broker is started with.
#[derive(Clone)]
pub struct BrokerConfig {
    /// Where to listen (port 0: any free port; [`crate::Broker::addr`] tells which).
    pub addr: SocketAddr,
    /// The store location (`MQLITE_DB`): a file path, `:memory:`, `redb:<path>`.
    pub db: String,
    /// Who may call.
    pub auth: AuthConfig,
    /// Body limit per message, bytes (`MQLITE_MAX_MESSAGE_BYTES`).
    pub max_message_bytes: usize,
    /// The durability point of a SQLite store (`MQLITE_SYNC`).
    pub sync: Synchronous,
    /// The clock the store and engine read (tests inject a manual one).
    pub clock: SharedClock,
    /// Whether the engine's background loops run (tests drive sweeps by hand).
    pub background: bool,
    /// Whether the web console is served at `/ui` (`MQLITE_UI`). Off by default here;
    /// `mqlite serve` turns it on when auth is on.
    pub ui: bool,
    /// Timeouts and the connection limit.
    pub limits: ConnLimits,
    /// The memory budget and the answer cap.
    pub memory: MemoryLimits,
    /// Serve a non-loopback address with auth off (`--insecure-allow-remote`); refused
    /// otherwise.
    pub insecure_allow_remote: bool,
    /// Dead-letter retention for queues that set none ([`DEFAULT_RETENTION`]).
    pub retention: mqlite::RetentionDefaults,
    /// Web origins that may call from a browser ([`Cors::default_for`] the auth).
    pub cors: Cors,
}

impl std::fmt::Debug for BrokerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrokerConfig")
            .field("addr", &self.addr)
            .field("db", &self.db)
            .field("auth", &self.auth)
            .field("max_message_bytes", &self.max_message_bytes)
            .field("sync", &self.sync)
            .field("ui", &self.ui)
            .field("limits", &self.limits)
            .field("insecure_allow_remote", &self.insecure_allow_remote)
            .field("memory", &self.memory)
            .field("retention", &self.retention)
            .field("cors", &self.cors)
            .finish_non_exhaustive()
    }
}

impl BrokerConfig {
    /// A broker on `addr` over `db` with these administrator tokens and the defaults.
    pub fn new(addr: SocketAddr, db: impl Into<String>, auth: AuthConfig) -> Self {
        BrokerConfig {
            addr,
            db: db.into(),
            cors: Cors::default_for(&auth),
            auth,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            sync: Synchronous::Normal,
            clock: SystemClock::shared(),
            background: true,
            ui: false,
            limits: ConnLimits::default(),
            insecure_allow_remote: false,
            memory: MemoryLimits::default(),
            retention: DEFAULT_RETENTION,
        }
    }

    /// Reads the contract's environment knobs (`MQLITE_DB`, `MQLITE_TOKENS`,
    /// `MQLITE_SYNC`, `MQLITE_MAX_MESSAGE_BYTES`, `MQLITE_UI`, `MQLITE_ADDR` for the
    /// address) and the connection bounds (`MQLITE_HEADER_TIMEOUT_MS`,
    /// `MQLITE_BODY_TIMEOUT_MS`, `MQLITE_MAX_CONNECTIONS`). The console is on when `MQLITE_UI` says so, or, unset, when auth is.
    /// With `MQLITE_TOKENS` unset, a token is generated and returned beside the
    /// configuration so the caller prints it once.
    pub fn from_env() -> Result<(Self, Option<String>)> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let addr_text = var("MQLITE_ADDR").unwrap_or_else(|| DEFAULT_ADDR.to_owned());
        let addr = parse_addr(&addr_text)?;
        let db = var("MQLITE_DB").unwrap_or_else(|| DEFAULT_DB.to_owned());
        let parsed = match (var("MQLITE_TOKENS"), var("MQLITE_TOKENS_FILE")) {
            (Some(_), Some(_)) => {
                return Err(Error::invalid(
                    "both MQLITE_TOKENS and MQLITE_TOKENS_FILE are set: give one",
                ));
            }
            (_, Some(file)) => Some(AuthConfig::from_file(std::path::Path::new(&file))?),
            (tokens, None) => AuthConfig::parse(tokens.as_deref())?,
        };
        let (auth, generated) = match parsed {
            Some(a) => (a, None),
            None => {
                let t = AuthConfig::generate_token();
                (AuthConfig::Tokens(vec![t.clone()]), Some(t))
            }
        };
        let mut config = BrokerConfig::new(addr, db, auth);
        if let Some(v) = var("MQLITE_SYNC") {
            config.sync = parse_sync(&v)?;
        }
        if let Some(v) = var("MQLITE_MAX_MESSAGE_BYTES") {
            config.max_message_bytes = v.parse().map_err(|_| {
                Error::invalid(format!(
                    "MQLITE_MAX_MESSAGE_BYTES={v:?} is not a byte count"
                ))
            })?;
        }
        if let Some(v) = var("MQLITE_HEADER_TIMEOUT_MS") {
            config.limits.header_timeout = parse_ms("MQLITE_HEADER_TIMEOUT_MS", &v)?;
        }
        if let Some(v) = var("MQLITE_BODY_TIMEOUT_MS") {
            config.limits.body_timeout = parse_ms("MQLITE_BODY_TIMEOUT_MS", &v)?;
        }
        for (name, slot, what) in [
            (
                "MQLITE_MAX_CONNECTIONS",
                &mut config.limits.max_connections,
                "count",
            ),
            (
                "MQLITE_MEMORY_BUDGET_BYTES",
                &mut config.memory.budget_bytes,
                "byte count",
            ),
            (
                "MQLITE_MAX_ANSWER_BYTES",
                &mut config.memory.max_answer_bytes,
                "byte count",
            ),
        ] {
            if let Some(v) = var(name) {
                *slot = positive(name, &v, what)?;
            }
        }
        config.ui = match var("MQLITE_UI") {
            Some(v) => parse_switch("MQLITE_UI", &v)?,
            None => config.auth != AuthConfig::Off,
        };
        if let Some(v) = var("MQLITE_CORS") {
            config.cors = Cors::parse(&v)?;
        }
        config.retention = retention(
            var("MQLITE_DLQ_RETENTION").as_deref(),
            var("MQLITE_DLQ_MAX_AGE").as_deref(),
            var("MQLITE_DLQ_MAX_COUNT").as_deref(),
            var("MQLITE_DLQ_MAX_BYTES").as_deref(),
        )?;
        Ok((config, generated))
    }
}

/// The dead-letter retention the settings give: `MQLITE_DLQ_RETENTION` (`on`, the
/// default, or `off`: every dead letter kept), then each bound over
/// [`DEFAULT_RETENTION`]'s (`MQLITE_DLQ_MAX_AGE` a duration such as `336h` or `14d`,
/// or milliseconds; the counts whole numbers; 0 unbounded).
pub fn retention(
    switch: Option<&str>,
    max_age: Option<&str>,
    max_count: Option<&str>,
    max_bytes: Option<&str>,
) -> Result<mqlite::RetentionDefaults> {
    if let Some(v) = switch
        && !parse_switch("MQLITE_DLQ_RETENTION", v)?
    {
        return Ok(mqlite::RetentionDefaults::default());
    }
    let mut r = DEFAULT_RETENTION;
    if let Some(v) = max_age {
        r.max_age = parse_duration("MQLITE_DLQ_MAX_AGE", v)?;
    }
    for (name, value, slot) in [
        ("MQLITE_DLQ_MAX_COUNT", max_count, &mut r.max_count),
        ("MQLITE_DLQ_MAX_BYTES", max_bytes, &mut r.max_bytes),
    ] {
        if let Some(v) = value {
            *slot = v
                .trim()
                .parse::<i64>()
                .ok()
                .filter(|n| *n >= 0)
                .ok_or_else(|| {
                    Error::invalid(format!("{name}={v:?} is not a count (0: unbounded)"))
                })?;
        }
    }
    Ok(r)
}

/// Parses a duration for the setting `name`: milliseconds, or a whole number with a
/// unit (`ms`, `s`, `m`, `h`, `d`).
pub fn parse_duration(name: &str, text: &str) -> Result<std::time::Duration> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let per_unit_ms: u64 = match unit {
        "" | "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => 0,
    };
    digits
        .parse::<u64>()
        .ok()
        .filter(|_| per_unit_ms > 0)
        .and_then(|n| n.checked_mul(per_unit_ms))
        .map(std::time::Duration::from_millis)
        .ok_or_else(|| {
            Error::invalid(format!(
                "{name}={text:?} is not a duration: milliseconds, or a number with ms, s, m, \
                 h or d (336h, 14d)"
            ))
        })
}

/// Parses `on` or `off` (also `true`/`false`, `1`/`0`) for the setting `name`.
pub fn parse_switch(name: &str, text: &str) -> Result<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "on" | "true" | "1" => Ok(true),
        "off" | "false" | "0" => Ok(false),
        _ => Err(Error::invalid(format!(
            "{name}={text:?} is not understood: on or off"
        ))),
    }
}

/// Parses a positive number of milliseconds for the setting `name`.
pub fn parse_ms(name: &str, text: &str) -> Result<std::time::Duration> {
    positive(name, text.trim(), "number of milliseconds").map(std::time::Duration::from_millis)
}

/// Parses a positive integer for the setting `name`; `what` says what it counts.
fn positive<T: std::str::FromStr + PartialOrd + Default>(
    name: &str,
    text: &str,
    what: &str,
) -> Result<T> {
    text.parse()
        .ok()
        .filter(|n| *n > T::default())
        .ok_or_else(|| Error::invalid(format!("{name}={text:?} is not a positive {what}")))
}

/// Parses a listen address (`host:port`).
pub fn parse_addr(text: &str) -> Result<SocketAddr> {
    text.parse().map_err(|_| {
        Error::invalid(format!(
            "{text:?} is not a listen address: give host:port, such as {DEFAULT_ADDR}"
        ))
    })
}

/// Parses `normal` or `full`.
pub fn parse_sync(text: &str) -> Result<Synchronous> {
    text.parse()
}

//! The one map from a location to a store, for callers that choose the store at run
//! time (a server reading `MQLITE_DB`, a tool taking `--store`): a file path or
//! `:memory:` is the SQLite store; `redb:<path>` is the redb store; `libsql://…` /
//! `http(s)://…` is the remote libSQL store (its auth token from `MQLITE_DB_AUTH_TOKEN`).
//! Each store sits behind a cargo feature of this crate (`sqlite`, on by default;
//! `redb` and `libsql`, off); a location whose store is compiled out names the feature
//! to turn on, and an unknown scheme says what locations are understood.

use mqlite_contract::{DynStore, Error, Result, SharedClock, SystemClock};
use mqlite_engine::{Engine, EngineOptions};

/// The run-time engine: any store, chosen by location.
pub type AnyEngine = Engine<DynStore>;

/// Which store a location names, and what the store is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// The local SQLite store: a file path, or `:memory:`.
    Sqlite(String),
    /// The redb store (`redb:<path>`).
    Redb(String),
    /// The remote libSQL store (`libsql://…`, `http://…`, `https://…`).
    Libsql(String),
}

/// What every error about a location ends with: the forms understood.
const FORMS: &str = "use a file path or `:memory:` (SQLite, the default), \
                     `sqlite:<path>`, `redb:<path>` or `libsql://host` / `https://host`";

impl Location {
    /// Parses a location. A string without a scheme is a file path.
    pub fn parse(location: &str) -> Result<Self> {
        if location.is_empty() {
            return Err(Error::invalid(format!("an empty store location: {FORMS}")));
        }
        if location == ":memory:" {
            return Ok(Location::Sqlite(location.to_owned()));
        }
        let Some((scheme, rest)) = location.split_once(':') else {
            return Ok(Location::Sqlite(location.to_owned()));
        };
        // A one-letter "scheme" is a Windows drive; a scheme is letters, digits, + - .
        let is_scheme = scheme.len() > 1
            && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
        if !is_scheme {
            return Ok(Location::Sqlite(location.to_owned()));
        }
        match scheme.to_ascii_lowercase().as_str() {
            "sqlite" | "file" => Ok(Location::Sqlite(
                rest.strip_prefix("//").unwrap_or(rest).to_owned(),
            )),
            "redb" => Ok(Location::Redb(rest.to_owned())),
            "libsql" | "http" | "https" | "ws" | "wss" => Ok(Location::Libsql(location.to_owned())),
            other => Err(Error::invalid(format!(
                "unknown store scheme `{other}:` in {location:?}: {FORMS}"
            ))),
        }
    }
}

/// Opens the store `location` names, reading time from `clock`.
pub async fn open_store(location: &str, clock: SharedClock) -> Result<DynStore> {
    match Location::parse(location)? {
        #[cfg(feature = "sqlite")]
        Location::Sqlite(path) => {
            let options = mqlite_store_sqlite::SqliteOptions::new(path).clock(clock);
            Ok(DynStore::new(
                mqlite_store_sqlite::SqliteStore::open(options).await?,
            ))
        }
        #[cfg(not(feature = "sqlite"))]
        Location::Sqlite(_) => {
            let _ = clock;
            Err(compiled_out(location, "SQLite", "sqlite"))
        }
        #[cfg(feature = "redb")]
        Location::Redb(path) => {
            let options = mqlite_store_redb::RedbOptions::new(path).clock(clock);
            Ok(DynStore::new(
                mqlite_store_redb::RedbStore::open(options).await?,
            ))
        }
        #[cfg(not(feature = "redb"))]
        Location::Redb(_) => Err(compiled_out(location, "redb", "redb")),
        #[cfg(feature = "libsql")]
        Location::Libsql(url) => {
            let options = mqlite_store_libsql::LibsqlOptions::new(url).clock(clock);
            Ok(DynStore::new(
                mqlite_store_libsql::LibsqlStore::open(options).await?,
            ))
        }
        #[cfg(not(feature = "libsql"))]
        Location::Libsql(_) => Err(compiled_out(location, "libSQL", "libsql")),
    }
}

/// Opens the run-time engine over the store `location` names, with the system clock
/// and default options.
pub async fn open(location: &str) -> Result<AnyEngine> {
    open_with(location, SystemClock::shared(), EngineOptions::default()).await
}

/// Opens the run-time engine with this clock and these options.
pub async fn open_with(
    location: &str,
    clock: SharedClock,
    options: EngineOptions,
) -> Result<AnyEngine> {
    Engine::with_store(open_store(location, clock).await?, options).await
}

#[cfg(any(
    not(feature = "sqlite"),
    not(feature = "redb"),
    not(feature = "libsql")
))]
fn compiled_out(location: &str, store: &str, feature: &str) -> Error {
    Error::invalid(format!(
        "{location:?} names the {store} store, which this build leaves out: enable the \
         `{feature}` feature of the mqlite crate"
    ))
}

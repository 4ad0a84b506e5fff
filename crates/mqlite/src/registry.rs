//! The one list of stores, and the map from a location to one of them, for callers that
//! choose the store at run time (a server reading `MQLITE_DB`, a tool taking a
//! location): a file path or `:memory:` is the SQLite store; `redb:<path>` is the redb
//! store; `libsql://…` / `http(s)://…` is the remote libSQL store (its auth token from
//! `MQLITE_DB_AUTH_TOKEN`). Each store says its schemes, whether it is a local file and
//! how it opens in its own crate (`StoreKind`); here it is one line of [`__stores!`],
//! behind a cargo feature of this crate of the same name (`sqlite`, on by default;
//! `redb` and `libsql`, off). A location whose store is compiled out names the feature
//! to turn on, and an unknown scheme says what locations are understood.

use mqlite_contract::{DynStore, Error, Result, SharedClock, StoreKind, SystemClock};
use mqlite_engine::{Engine, EngineOptions};

/// The registered stores, one line each: its name (also the cargo feature of this crate
/// that brings it in) and its type, whose `StoreKind` says the rest. A new store adds
/// its line here. `$then` (a macro's path) receives the list after its own arguments; the facade's own
/// expansions keep only the stores this build compiles (`cfg(feature = …)` on each
/// line), and the test registry (`mqlite-testbed`, which builds every store) reaches
/// each through `mqlite::__store_crates`.
#[doc(hidden)]
#[macro_export]
macro_rules! __stores {
    ({ $($then:tt)* } { $($args:tt)* }) => {
        $($then)*! {
            { $($args)* }
            "sqlite" => mqlite_store_sqlite::SqliteStore;
            "redb" => mqlite_store_redb::RedbStore;
            "libsql" => mqlite_store_libsql::LibsqlStore;
        }
    };
}

macro_rules! __reexport {
    ({} $($name:literal => $krate:ident :: $ty:ident;)*) => {
        $(
            #[cfg(feature = $name)]
            pub use $krate;
        )*
    };
}

/// The crates of the stores this build compiles, by crate name, for expansions of
/// [`__stores!`] in other crates (the test registry).
#[doc(hidden)]
pub mod __store_crates {
    __stores!({ __reexport } {});
}

/// Runs `$body` with `$n` the type of the compiled store named `$store`: `Some(body)`,
/// or `None` for a name this build does not compile.
macro_rules! with_kind {
    ($store:expr, $n:ident => $body:expr) => {
        $crate::__stores!({ __with_kind } { $store, $n => $body })
    };
}
macro_rules! __with_kind {
    ({ $store:expr, $n:ident => $body:expr } $($name:literal => $krate:ident :: $ty:ident;)*) => {
        match $store {
            $(
                #[cfg(feature = $name)]
                $name => {
                    type $n = $krate::$ty;
                    Some($body)
                }
            )*
            _ => None,
        }
    };
}
pub(crate) use {__with_kind, with_kind};

/// A registered store as this build has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreInfo {
    /// Its name (and the cargo feature of this crate that brings it in).
    pub name: &'static str,
    /// The location schemes that name it.
    pub schemes: &'static [&'static str],
    /// Whether its data is a local file.
    pub local_file: bool,
}

macro_rules! __infos {
    ({ $compiled:ident, $left_out:ident } $($name:literal => $krate:ident :: $ty:ident;)*) => {
        $(
            #[cfg(feature = $name)]
            $compiled.push(StoreInfo {
                name: <$krate::$ty as StoreKind>::NAME,
                schemes: <$krate::$ty as StoreKind>::SCHEMES,
                local_file: <$krate::$ty as StoreKind>::LOCAL_FILE,
            });
            #[cfg(not(feature = $name))]
            $left_out.push($name);
        )*
    };
}

/// The stores this build compiles, in the registry's order, and the names of those it
/// leaves out.
pub fn stores() -> (Vec<StoreInfo>, Vec<&'static str>) {
    #[allow(unused_mut, reason = "a build may compile every store, or none")]
    let (mut compiled, mut left_out): (Vec<StoreInfo>, Vec<&'static str>) = Default::default();
    __stores!({ __infos } { compiled, left_out });
    (compiled, left_out)
}

/// The store a location without a scheme names.
const DEFAULT_STORE: &str = "sqlite";

/// Which store a location names, and what the store is given to open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    store: &'static str,
    target: String,
    local_file: bool,
}

/// What every error about a location ends with: the forms understood.
const FORMS: &str = "use a file path or `:memory:` (SQLite, the default), \
                     `sqlite:<path>`, `redb:<path>` or `libsql://host` / `https://host`";

impl Location {
    /// Parses a location. A string without a scheme is a file path for the default
    /// (SQLite) store.
    pub fn parse(location: &str) -> Result<Self> {
        if location.is_empty() {
            return Err(Error::invalid(format!("an empty store location: {FORMS}")));
        }
        let scheme = location.split_once(':').filter(|(scheme, _)| {
            // A one-letter "scheme" is a Windows drive; a scheme is letters, digits,
            // + - . and starts with a letter.
            scheme.len() > 1
                && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        });
        let (store, target) = match scheme {
            _ if location == ":memory:" => (DEFAULT_STORE, None),
            None => (DEFAULT_STORE, None),
            Some((scheme, rest)) => {
                let scheme = scheme.to_ascii_lowercase();
                let (compiled, left_out) = stores();
                let Some(info) = compiled.iter().find(|s| s.schemes.contains(&&*scheme)) else {
                    return Err(unknown_scheme(&scheme, location, &left_out));
                };
                (info.name, Some((scheme, rest)))
            }
        };
        let found = with_kind!(store, N => Location {
            store: N::NAME,
            target: match &target {
                Some((scheme, rest)) => N::target(scheme, rest),
                None => location.to_owned(),
            },
            local_file: N::LOCAL_FILE && location != ":memory:",
        });
        found.ok_or_else(|| compiled_out(location, store))
    }

    /// The name of the store it names (`sqlite`, `redb`, `libsql`).
    pub fn store(&self) -> &'static str {
        self.store
    }

    /// What the store is given to open: a path, `:memory:` or a URL.
    pub fn target(&self) -> &str {
        &self.target
    }

    /// The local file it names, if it names one (not `:memory:`, not a server).
    pub fn local_file(&self) -> Option<&std::path::Path> {
        self.local_file.then(|| std::path::Path::new(&self.target))
    }
}

/// Opens the store `location` names, reading time from `clock`.
pub async fn open_store(location: &str, clock: SharedClock) -> Result<DynStore> {
    let location = Location::parse(location)?;
    let opened = with_kind!(location.store, N => {
        DynStore::new(N::open_at(&location.target, clock).await?)
    });
    opened.ok_or_else(|| compiled_out(&location.target, location.store))
}

/// The run-time engine: any store, chosen by location.
pub type AnyEngine = Engine<DynStore>;

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

fn unknown_scheme(scheme: &str, location: &str, left_out: &[&str]) -> Error {
    let hint: String = left_out
        .iter()
        .map(|name| {
            format!(
                "; the {name} store, if it is that one, is left out of this build: enable \
                 the `{name}` feature of the mqlite crate"
            )
        })
        .collect();
    Error::invalid(format!(
        "unknown store scheme `{scheme}:` in {location:?}: {FORMS}{hint}"
    ))
}

fn compiled_out(location: &str, store: &str) -> Error {
    Error::invalid(format!(
        "{location:?} names the {store} store, which this build leaves out: enable the \
         `{store}` feature of the mqlite crate"
    ))
}

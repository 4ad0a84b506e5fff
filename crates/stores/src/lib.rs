//! The one registration point of mqlite's stores. Everything that runs against every
//! store — the conformance kit (`tests/tck.rs` here), the crash-injection harness
//! (`mqlite-crash`) and the benchmarks (`mqlite-benches`) — goes through
//! [`with_each_store!`] or [`with_store!`], so a new store is added here once and
//! every suite picks it up.
//!
//! A store registers its `mqlite_tck::StoreFactory` (behind its crate's `tck` feature),
//! its name, and whether it is local (a file this machine owns: the crash harness kills
//! processes over local stores only).

pub use mqlite_store_libsql;
pub use mqlite_store_redb;
pub use mqlite_store_sqlite;
pub use mqlite_tck;

/// One registered store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Registered {
    /// Its name in test names and on the command line.
    pub name: &'static str,
    /// Whether its data is a local file (the crash harness runs local stores).
    pub local: bool,
}

/// Every registered store, in the order the suites run them.
pub const STORES: &[Registered] = &[
    Registered {
        name: "sqlite",
        local: true,
    },
    Registered {
        name: "redb",
        local: true,
    },
    Registered {
        name: "libsql",
        local: false,
    },
];

/// The names of the local stores.
pub fn local_stores() -> impl Iterator<Item = &'static str> {
    STORES.iter().filter(|s| s.local).map(|s| s.name)
}

/// Evaluates `$body` once per registered store with `$name` bound to its name and
/// `$factory` to its TCK factory (each store's factory has its own type, so this is a
/// macro and not a loop).
#[macro_export]
macro_rules! with_each_store {
    ($name:ident, $factory:ident => $body:expr) => {{
        {
            let $name: &'static str = "sqlite";
            let $factory = $crate::mqlite_store_sqlite::tck::SqliteFactory;
            $body;
        }
        {
            let $name: &'static str = "redb";
            let $factory = $crate::mqlite_store_redb::tck::RedbFactory;
            $body;
        }
        {
            let $name: &'static str = "libsql";
            let $factory = $crate::mqlite_store_libsql::tck::LibsqlFactory;
            $body;
        }
    }};
}

/// [`with_each_store!`] over the stores that can run here: a store whose server is not
/// installed is left out, with its reason printed (the benchmarks use this; the TCK
/// reports such a store's cases as skipped instead).
#[macro_export]
macro_rules! with_each_available_store {
    ($name:ident, $factory:ident => $body:expr) => {{
        $crate::with_each_store!($name, $factory => {
            match $crate::mqlite_tck::StoreFactory::unavailable(&$factory) {
                Some(why) => eprintln!("{}: left out: {why}", $name),
                None => $body,
            }
        })
    }};
}

/// Stops whatever the stores started for a run (the libSQL store's sqld servers).
pub fn stop_servers() {
    mqlite_store_libsql::tck::stop_servers();
}

/// Binds `$factory` to the TCK factory of the store named `$name` and evaluates
/// `$body` with it; an unknown name is an `Err(String)`.
#[macro_export]
macro_rules! with_store {
    ($name:expr, $factory:ident => $body:expr) => {
        match $name {
            "sqlite" => {
                let $factory = $crate::mqlite_store_sqlite::tck::SqliteFactory;
                Ok($body)
            }
            "redb" => {
                let $factory = $crate::mqlite_store_redb::tck::RedbFactory;
                Ok($body)
            }
            "libsql" => {
                let $factory = $crate::mqlite_store_libsql::tck::LibsqlFactory;
                Ok($body)
            }
            other => Err(format!(
                "unknown store {other:?}: registered are {:?}",
                $crate::STORES.iter().map(|s| s.name).collect::<Vec<_>>()
            )),
        }
    };
}

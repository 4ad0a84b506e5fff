//! The one registration point of mqlite's stores. Everything that runs against every
//! store — the conformance kit (`tests/tck.rs` here), the crash-injection harness
//! (`mqlite-crash`) and the benchmarks (`mqlite-benches`) — goes through
//! [`with_each_store!`] or [`with_store!`], so a new store is added here once and
//! every suite picks it up.
//!
//! A store registers one line in `__registry!`: its name and its
//! `mqlite_tck::StoreFactory` (behind its crate's `tck` feature). Whether it is local (a
//! file this machine owns: the crash harness kills processes over local stores only)
//! is its factory's `LocalFile` capability.

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

/// The registry: every store's name and TCK factory, written once, in the order the
/// suites run them. A new store adds its line here. The macros below hand this list to
/// `$then` with their own arguments in front.
#[doc(hidden)]
#[macro_export]
macro_rules! __registry {
    ($then:ident ! ($($args:tt)*)) => {
        $crate::$then! {
            ($($args)*)
            "sqlite" => $crate::mqlite_store_sqlite::tck::SqliteFactory;
            "redb" => $crate::mqlite_store_redb::tck::RedbFactory;
            "libsql" => $crate::mqlite_store_libsql::tck::LibsqlFactory;
        }
    };
}

/// Every registered store, in the order the suites run them; a store is local when its
/// factory offers [`Capability::LocalFile`](mqlite_tck::Capability::LocalFile).
pub fn stores() -> Vec<Registered> {
    let mut out = Vec::new();
    with_each_store!(name, factory => {
        let local = mqlite_tck::StoreFactory::unsupported(
            &factory,
            mqlite_tck::Capability::LocalFile,
        )
        .is_none();
        out.push(Registered { name, local });
    });
    out
}

/// The names of the local stores.
pub fn local_stores() -> impl Iterator<Item = &'static str> {
    stores().into_iter().filter(|s| s.local).map(|s| s.name)
}

/// Evaluates `$body` once per registered store with `$name` bound to its name and
/// `$factory` to its TCK factory (each store's factory has its own type, so this is a
/// macro and not a loop).
#[macro_export]
macro_rules! with_each_store {
    ($name:ident, $factory:ident => $body:expr) => {
        $crate::__registry!(__each!($name, $factory => $body))
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __each {
    (($name:ident, $factory:ident => $body:expr) $($n:literal => $f:path;)*) => {{
        $({
            let $name: &'static str = $n;
            let $factory = $f;
            $body;
        })*
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
        $crate::__registry!(__one!($name, $factory => $body))
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __one {
    (($name:expr, $factory:ident => $body:expr) $($n:literal => $f:path;)*) => {
        match $name {
            $($n => {
                let $factory = $f;
                Ok($body)
            })*
            other => Err(format!(
                "unknown store {other:?}: registered are {:?}",
                $crate::stores().iter().map(|s| s.name).collect::<Vec<_>>()
            )),
        }
    };
}

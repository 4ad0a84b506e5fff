//! The stores under test. Everything that runs against every store — the conformance
//! kit (`tests/tck.rs` here), the crash-injection harness (`mqlite-crash`) and the
//! benchmarks (`mqlite-benches`) — goes through [`with_each_store!`] or
//! [`with_store!`], which iterate the facade's one list of stores (`mqlite`'s
//! registry), so every suite picks a new store up from its line there.
//!
//! What a store needs to be tested lives here, one file per store: its conformance-kit
//! factory ([`mqlite_tck::StoreFactory`]: where a case's data lives, what the store
//! cannot do, and the hooks that reach past the store), tied to the store by
//! [`Tested`]. A store in the list without one fails to compile here, naming it.

pub mod libsql;
pub mod redb;
pub mod sqlite;

pub use mqlite;
pub use mqlite_tck;

/// The conformance-kit factory of a registered store.
pub trait Tested: mqlite_contract::StoreKind {
    /// Its factory.
    type Factory: mqlite_tck::StoreFactory<Store = Self> + Default;
}

/// One registered store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Registered {
    /// Its name in test names and on the command line.
    pub name: &'static str,
    /// Whether its data is a local file (the crash harness runs local stores).
    pub local: bool,
}

/// The facade's list of stores, handed to `$then` with its own arguments in front, each
/// store as its name and its type (reached through `mqlite::__store_crates`).
#[doc(hidden)]
#[macro_export]
macro_rules! __registry {
    ($then:ident ! ($($args:tt)*)) => {
        $crate::mqlite::__stores!({ $crate::__typed } { $then ($($args)*) })
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __typed {
    ({ $then:ident ($($args:tt)*) } $($name:literal => $krate:ident :: $ty:ident;)*) => {
        $crate::$then! {
            ($($args)*)
            $($name => $crate::mqlite::__store_crates::$krate::$ty;)*
        }
    };
}

/// Every registered store, in the order the suites run them; a store is local when its
/// data is a local file (`StoreKind::LOCAL_FILE`).
pub fn stores() -> Vec<Registered> {
    mqlite::stores()
        .0
        .iter()
        .map(|s| Registered {
            name: s.name,
            local: s.local_file,
        })
        .collect()
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
    (($name:ident, $factory:ident => $body:expr) $($n:literal => $s:ty;)*) => {{
        $({
            let $name: &'static str = $n;
            let $factory = <<$s as $crate::Tested>::Factory as Default>::default();
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
    libsql::stop_servers();
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
    (($name:expr, $factory:ident => $body:expr) $($n:literal => $s:ty;)*) => {
        match $name {
            $($n => {
                let $factory = <<$s as $crate::Tested>::Factory as Default>::default();
                Ok($body)
            })*
            other => Err(format!(
                "unknown store {other:?}: registered are {:?}",
                $crate::stores().iter().map(|s| s.name).collect::<Vec<_>>()
            )),
        }
    };
}

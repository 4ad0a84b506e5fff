//! A store's one registration: its name, the location schemes that name it, whether its
//! data is a local file, and how it opens from a location. A store crate implements
//! [`StoreKind`] once; the facade lists each store in one line (`mqlite`'s registry),
//! and its `open`, the trace, the CLI and the test registry all read this from there.

use std::future::Future;

use crate::{clock::SharedClock, error::Result, store::OutboxStore};

/// What a location needs to know of a store, and how to open it.
pub trait StoreKind: OutboxStore + Sized {
    /// Its name: in messages, in test names and for `mqlite-tck --store`.
    const NAME: &'static str;
    /// The location schemes that name it, lowercase (`redb` for `redb:<path>`).
    const SCHEMES: &'static [&'static str];
    /// Whether its data is a file on this machine that the location's target names
    /// (the trace refuses a missing one; the crash harness kills processes over it).
    const LOCAL_FILE: bool;

    /// What a location `scheme:rest` hands the store to open: `rest`, unless the
    /// store's targets keep their scheme (a URL).
    fn target(scheme: &str, rest: &str) -> String {
        let _ = scheme;
        rest.to_owned()
    }

    /// Opens the store at `target` (a path, `:memory:`, a URL: what [`Self::target`]
    /// made of a location), reading time from `clock`, with the store's defaults.
    fn open_at(target: &str, clock: SharedClock) -> impl Future<Output = Result<Self>> + Send;
}

//! What the libSQL store's own tests share: a trial that needs a real sqld, reported
//! skipped with the reason when none is installed (a failure under `CI=true`), and run
//! on a runtime of its own with a temporary directory for the server's data.

#![allow(dead_code, unreachable_pub)]

use std::pin::Pin;

use libtest_mimic::{Completion, Failed, Trial};

use std::time::Duration;

use mqlite_contract::{Error, SharedClock};
use mqlite_engine::{Engine, EngineOptions};
use mqlite_store_libsql::{LibsqlOptions, LibsqlStore};
use mqlite_testbed::libsql::sqld_binary;

/// What a trial's body answers.
pub type Outcome = Result<(), Box<dyn std::error::Error>>;
/// A trial's body, given a fresh directory.
pub type Flow = fn(tempfile::TempDir) -> Pin<Box<dyn Future<Output = Outcome>>>;

/// A trial named `name` running `flow` against a real sqld.
pub fn trial(name: &'static str, flow: Flow) -> Trial {
    trial_with_blocking_threads(name, 512, flow)
}

/// [`trial`] on a runtime of at most `blocking` blocking threads (tokio's default is
/// 512).
pub fn trial_with_blocking_threads(name: &'static str, blocking: usize, flow: Flow) -> Trial {
    Trial::ignorable_test(name, move || {
        if let Err(why) = sqld_binary() {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                return Err(Failed::from(format!("CI=true and {why}")));
            }
            return Ok(Completion::ignored_with(format!("skipped: {why}")));
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .max_blocking_threads(blocking)
            .enable_all()
            .build()
            .map_err(|e| Failed::from(format!("runtime: {e}")))?;
        let dir = tempfile::tempdir().map_err(|e| Failed::from(e.to_string()))?;
        rt.block_on(flow(dir))
            .map_err(|e| Failed::from(e.to_string()))?;
        Ok(Completion::Completed)
    })
}

/// An engine over the store at `url`, background loops off, with this owner lease.
pub async fn engine(
    url: &str,
    clock: SharedClock,
    lease: Duration,
) -> Result<Engine<LibsqlStore>, Error> {
    let store = LibsqlStore::open(LibsqlOptions::new(url).clock(clock).lease(lease)).await?;
    let options = EngineOptions {
        background: false,
        ..Default::default()
    };
    Engine::with_store(store, options).await
}

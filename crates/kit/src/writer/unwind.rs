//! A store job that panics fails its own call alone; the writer goes on.

use std::panic::{AssertUnwindSafe, catch_unwind};

use mqlite_contract::error::{Error, Result};

/// A store job panicked: its call failed, and nothing of it was committed.
#[derive(Debug)]
pub struct JobPanicked(pub(super) String);

impl std::fmt::Display for JobPanicked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the store's job panicked ({}); nothing of it was committed",
            self.0
        )
    }
}

impl std::error::Error for JobPanicked {}

/// Runs a store job; a panic fails this call alone with an error, and the writer serves
/// the next job. What the job wrote is undone as for any failed call: its transaction
/// rolls back as it unwinds, or its savepoint is undone by the group.
pub(super) fn failing_on_panic<R>(f: impl FnOnce() -> Result<R>) -> Result<R> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        let what = panic_text(panic.as_ref());
        tracing::error!(
            panic = %what,
            "a store job panicked; its call fails and the writer goes on"
        );
        Err(Error::backend("store", JobPanicked(what)))
    })
}

/// The message of a panic payload.
pub(super) fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}

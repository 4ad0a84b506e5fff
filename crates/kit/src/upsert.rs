//! What a create-or-update of a name decides, the same for every store: the namespace
//! is one (12.1), an update of a missing queue is `NotFound`, and the ordering mode
//! changes only while nothing is in play (messages are lined up by the mode at enqueue,
//! so a change under them would break 5.1–5.3).

use mqlite_contract::error::{Error, Result};
use mqlite_contract::types::{OrderingMode, QueueConfig, QueueKind};

/// What the store does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upsert {
    /// Write it: a new name, or an update that keeps the ordering mode.
    Write,
    /// Write it only if the queue holds no message in play; else refuse with
    /// [`mode_change_refused`].
    WriteIfIdle,
}

/// Decides an upsert of `name` as `kind` with `config`, given the kind and ordering
/// mode of what holds the name now (None: nothing).
pub fn decide(
    name: &str,
    kind: QueueKind,
    config: &QueueConfig,
    update_only: bool,
    existing: Option<(QueueKind, OrderingMode)>,
) -> Result<Upsert> {
    match existing {
        None if update_only => Err(Error::queue_not_found(name)),
        None => Ok(Upsert::Write),
        Some((held, _)) if held != kind => Err(Error::NameConflict {
            name: name.to_owned(),
            existing: held.as_str().to_owned(),
        }),
        Some((_, mode)) if mode != config.ordering_mode => Ok(Upsert::WriteIfIdle),
        Some(_) => Ok(Upsert::Write),
    }
}

/// The refusal of a mode change while messages are in play.
pub fn mode_change_refused(name: &str, current: OrderingMode) -> Error {
    Error::invalid(format!(
        "the ordering mode of {name:?} can change only while it holds no message in play \
         (it is {current})"
    ))
}

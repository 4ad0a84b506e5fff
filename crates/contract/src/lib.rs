//! The mqlite contract: the domain types, the one error enum, the injectable clock and
//! the store traits ([`Store`], [`StoreTx`], [`OutboxStore`], and [`DynStore`] for a
//! store chosen at run time). The engine (crate `mqlite-engine`) runs over any store
//! that implements them; a store author implements them, with the help of the store
//! kit (crate `mqlite-kit`). Nothing here knows a backend or holds a queue's logic.

pub mod access;
pub mod clock;
pub mod dedup;
pub mod digest;
pub mod dyn_store;
pub mod error;
pub mod event;
#[cfg(feature = "serde")]
pub mod json;
pub mod kind;
pub mod limits;
pub mod ops;
pub mod side_tables;
pub mod store;
pub mod topics;
pub mod types;

pub use access::{AccessKey, CreatedKey, Permission};
pub use clock::{Clock, ManualClock, SharedClock, SystemClock};
pub use dyn_store::DynStore;
pub use error::{Error, LockHolder, LockLostReason, Result};
pub use event::{EventIdentity, Fingerprint};
pub use kind::StoreKind;
pub use ops::{AdminOps, KeyOps, MessageOps, TopicOps};
pub use side_tables::{InboxMarker, RelayBacklog, RelayIntent, SentEvidence, SideSweep};
pub use store::{HasOutbox, OutboxStore, Ownership, Store, StoreStatus, StoreTx, WorkStats};
pub use topics::{Route, Subscription};
pub use types::*;

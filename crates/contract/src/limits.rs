//! The bounds of one call, which the engine checks every call against and which a store
//! may rely on (a store sizes its statements for the largest batch).

use std::time::Duration;

/// Largest batch a single Receive may ask for.
pub const MAX_RECEIVE_BATCH: u32 = 256;
/// The refusal of a receive of no message or of more than [`MAX_RECEIVE_BATCH`]: the
/// engine's, and a SQL store's when its claim is called alone past the bound.
pub fn receive_batch_out_of_range() -> crate::error::Error {
    crate::error::Error::invalid(format!("max_messages must be 1..={MAX_RECEIVE_BATCH}"))
}
/// Longest long-poll wait.
pub const MAX_WAIT: Duration = Duration::from_secs(20);
/// Longest abandon delay.
pub const MAX_ABANDON_DELAY: Duration = Duration::from_secs(7 * 24 * 3600);
/// The most dead letters one selected redrive may name.
pub const MAX_REDRIVE_SELECTION: usize = 1000;
/// Largest Peek page.
pub const MAX_PEEK: u32 = 1000;
/// Largest RenewBatch.
pub const MAX_RENEW_BATCH: usize = 512;
/// Largest CompleteBatch: one transaction and a fixed number of statements whatever
/// its size; the bound only keeps one call's parameter (about 60 bytes an item) small.
pub const MAX_COMPLETE_BATCH: usize = 16_384;
/// Default body limit per message (1 MiB).
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 1 << 20;
/// Longest queue name, bytes.
pub const MAX_NAME_BYTES: usize = 256;
/// The highest message priority (promise 20.1): priorities run 0 (the default) ..= 9,
/// and a higher one is handed out first.
pub const MAX_PRIORITY: u8 = 9;
/// A message priority given as `value`, checked against `0 ..= MAX_PRIORITY`
/// (`InvalidArgument` outside it): the one check of every send path (the engine, the
/// stores' enqueue, the wire).
pub fn priority(value: i64) -> crate::error::Result<u8> {
    u8::try_from(value)
        .ok()
        .filter(|p| *p <= MAX_PRIORITY)
        .ok_or_else(|| {
            crate::error::Error::invalid(format!(
                "priority {value} is out of range: 0 ..= {MAX_PRIORITY} (higher is handed out \
                 first)"
            ))
        })
}

/// Largest number of messages in one send.
pub const MAX_SEND_BATCH: usize = 1000;
/// Largest page of access keys one list returns.
pub const MAX_KEY_PAGE: u32 = 1000;

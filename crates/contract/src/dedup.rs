//! Producer dedup keys (promise 4.1): the message id when there is one, else the SHA-256
//! of the body, so that a resend without an id still collapses into the original.

use crate::{digest::sha256_hex, types::OutMessage};

/// The SHA-256 of a body as 64 lowercase hex characters: the dedup key of a message
/// without an id.
pub fn body_digest(body: &[u8]) -> String {
    sha256_hex(body)
}

/// The dedup key and the body digest of a message: `(key, digest)`. An empty or absent
/// id keys on the digest itself (content-addressed). A message with an event identity
/// is compared by its envelope's fingerprint instead of its body, so the queue and the
/// consumer inbox agree on what a repeat is (4.2, 17.4).
pub fn dedup_key(message: &OutMessage) -> (String, String) {
    let digest = match &message.event {
        Some(_) => crate::event::fingerprint(message).to_string(),
        None => body_digest(&message.body),
    };
    match message.message_id.as_deref() {
        Some(id) if !id.is_empty() => (id_key(id), digest),
        _ => (format!("sha256:{digest}"), digest),
    }
}

/// The dedup entry's key of a producer's message id.
pub fn id_key(id: &str) -> String {
    format!("id:{id}")
}

//! Typed bodies (feature `serde`): a value goes in as its JSON and comes out as the type
//! the receiver names; a body that is not that JSON is an `InvalidArgument` naming the
//! type, never a panic.

use std::future::Future;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::queue::Queue;
use crate::store::Store;
use crate::types::{Message, OutMessage, SeqNumber};

impl OutMessage {
    /// A message whose body is `value` as JSON, with content type `application/json`.
    ///
    /// ```
    /// # #[derive(serde::Serialize)] struct Order { id: u64 }
    /// let m = mqlite_engine_core::OutMessage::json(&Order { id: 42 })?;
    /// assert_eq!(m.body, br#"{"id":42}"#);
    /// # Ok::<(), mqlite_engine_core::Error>(())
    /// ```
    pub fn json<T: Serialize + ?Sized>(value: &T) -> Result<Self> {
        let body = serde_json::to_vec(value).map_err(|e| {
            Error::invalid(format!(
                "a {} does not serialize to JSON: {e}",
                std::any::type_name::<T>()
            ))
        })?;
        Ok(OutMessage {
            body,
            content_type: Some("application/json".to_owned()),
            ..Default::default()
        })
    }
}

impl Message {
    /// The body read as the JSON of a `T`.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T> {
        serde_json::from_slice(&self.content.body).map_err(|e| {
            Error::invalid(format!(
                "message {} is not the JSON of a {}: {e}",
                self.seq,
                std::any::type_name::<T>()
            ))
        })
    }
}

impl<S: Store> Engine<S> {
    /// Sends `value` as a JSON message (see [`OutMessage::json`]). The value is encoded
    /// at once, so the returned future does not borrow it.
    pub fn send_json<T: Serialize + ?Sized>(
        &self,
        queue: &str,
        value: &T,
    ) -> impl Future<Output = Result<SeqNumber>> + Send + '_ {
        let message = OutMessage::json(value);
        let queue = queue.to_owned();
        async move { self.send(&queue, message?).await }
    }
}

impl<S: Store> Queue<S> {
    /// Sends `value` as a JSON message (see [`OutMessage::json`]).
    pub fn send_json<T: Serialize + ?Sized>(
        &self,
        value: &T,
    ) -> impl Future<Output = Result<SeqNumber>> + Send + '_ {
        self.engine().send_json(self.name(), value)
    }
}

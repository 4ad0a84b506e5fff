//! Typed bodies (feature `serde`): a value goes in as its JSON and comes out as the type
//! the receiver names; a body that is not that JSON is an `InvalidArgument` naming the
//! type, never a panic.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, Result};
use crate::types::{Message, OutMessage};

impl OutMessage {
    /// A message whose body is `value` as JSON, with content type `application/json`.
    ///
    /// ```
    /// # #[derive(serde::Serialize)] struct Order { id: u64 }
    /// let m = mqlite_contract::OutMessage::json(&Order { id: 42 })?;
    /// assert_eq!(m.body, br#"{"id":42}"#);
    /// # Ok::<(), mqlite_contract::Error>(())
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

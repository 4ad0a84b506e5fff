//! Typed sends (feature `serde`): a value goes in as its JSON (see the contract's
//! `OutMessage::json`; `Message::json` reads it back).

use std::future::Future;

use serde::Serialize;

use crate::{engine::Engine, queue::Queue};
use mqlite_contract::types::{OutMessage, SeqNumber};
use mqlite_contract::{error::Result, store::Store};

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

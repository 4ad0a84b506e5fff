//! Topics and subscriptions: a topic fans a published message out to its
//! subscriptions, each backed by a queue of kind `subscription` (promises 11, 12).

use crate::types::OutMessage;

/// A subscription of a topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscription {
    /// The topic it listens to.
    pub topic: String,
    /// Its name, which is also the name of its backing queue (one namespace, 12.1).
    pub name: String,
    /// Its filter expression (empty: every message; filters arrive with the topics
    /// work, until then only the empty filter is accepted).
    pub filter: String,
}

/// The copies a publish writes into one subscription's backing queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The subscription (its backing queue).
    pub subscription: String,
    /// The messages routed to it, in publish order.
    pub messages: Vec<OutMessage>,
}

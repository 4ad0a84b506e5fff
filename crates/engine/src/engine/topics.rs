//! Topics, subscriptions and filters: the topic names the engine keeps, the cache of
//! compiled filters, publish and its routing.

use std::sync::Arc;

use std::collections::HashSet;

use crate::filter::{Filter, FilterTest, Seen};
use mqlite_contract::error::{Error, Result};
use mqlite_contract::store::Store;
use mqlite_contract::topics::{Route, Subscription};
use mqlite_contract::types::{EnqueueSlot, OutMessage, QueueConfig, QueueKind, SendOptions};

use super::{Engine, MAX_CACHED_FILTERS, validate_name, validate_new_name, validate_send};

impl<S: Store> Engine<S> {
    /// Whether `name` is a topic.
    pub(super) fn is_topic(&self, name: &str) -> bool {
        self.inner
            .topics
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .contains(name)
    }

    /// The topic names as of now (a transaction keeps its own copy).
    pub(super) fn topics(&self) -> Arc<HashSet<String>> {
        self.inner
            .topics
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub(super) fn set_topic(&self, name: &str, present: bool) {
        let mut topics = self.inner.topics.write().unwrap_or_else(|e| e.into_inner());
        if topics.contains(name) != present {
            let mut next = (**topics).clone();
            if present {
                next.insert(name.to_owned());
            } else {
                next.remove(name);
            }
            *topics = Arc::new(next);
        }
    }

    /// The compiled filter of this text (compiled once, then cached).
    fn filter(&self, text: &str) -> Result<Arc<Filter>> {
        if let Some(f) = self.cached_filter(text) {
            return Ok(f);
        }
        let compiled = Arc::new(Filter::compile(text)?);
        self.remember_filter(&compiled);
        Ok(compiled)
    }

    /// How many compiled filters are kept for reuse (at most [`MAX_CACHED_FILTERS`]).
    pub fn cached_filters(&self) -> usize {
        self.inner
            .filters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    fn cached_filter(&self, text: &str) -> Option<Arc<Filter>> {
        self.inner
            .filters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(text.trim())
            .cloned()
    }

    /// Caches a compiled filter, within [`MAX_CACHED_FILTERS`]: at the bound an entry
    /// gives way (a filter still in use is compiled again on its next publish).
    fn remember_filter(&self, filter: &Arc<Filter>) {
        let mut cache = self.inner.filters.lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() >= MAX_CACHED_FILTERS && !cache.contains_key(filter.text()) {
            let victim = cache.keys().next().cloned();
            if let Some(victim) = victim {
                cache.remove(&victim);
            }
        }
        cache.insert(filter.text().to_owned(), filter.clone());
    }

    /// Creates a topic (or keeps an existing one): a name that fans published messages
    /// out to its subscriptions. A name held by a queue or subscription is
    /// `NameConflict` (12.1).
    pub async fn create_topic(&self, name: &str) -> Result<()> {
        validate_new_name(name)?;
        let _g = self.admit().await?;
        self.inner
            .store
            .upsert_queue(
                name.to_owned(),
                QueueKind::Topic,
                QueueConfig::default(),
                false,
            )
            .await?;
        self.set_topic(name, true);
        Ok(())
    }

    /// Creates or updates a subscription of `topic` named `name`, backed by a queue of
    /// that name with `config`, routing the messages `filter` accepts (empty: every
    /// message; see [`crate::filter`]). A filter that does not compile or check is
    /// `InvalidArgument` and nothing is stored (11.1); a name held by a queue or topic
    /// is `NameConflict` (12.1).
    #[tracing::instrument(level = "debug", skip_all, fields(topic = topic, subscription = name), err(level = "debug"))]
    pub async fn subscribe(
        &self,
        topic: &str,
        name: &str,
        filter: &str,
        config: QueueConfig,
    ) -> Result<()> {
        validate_name(topic)?;
        validate_new_name(name)?;
        config.validate()?;
        if !config.status.takes_sends() {
            return Err(Error::invalid(format!(
                "subscription {name:?} is filled by its topic's publishes: its status can \
                 pause receives only (receive_disabled)"
            )));
        }
        // Cached only once stored: a refused Subscribe leaves nothing behind.
        let compiled = match self.cached_filter(filter) {
            Some(f) => f,
            None => Arc::new(Filter::compile(filter)?),
        };
        let _g = self.admit().await?;
        let subscription = Subscription {
            topic: topic.to_owned(),
            name: name.to_owned(),
            filter: compiled.text().to_owned(),
        };
        self.inner
            .store
            .upsert_subscription(subscription, config)
            .await?;
        self.remember_filter(&compiled);
        Ok(())
    }

    /// Deletes the subscription `name` of `topic` with its backing queue and its
    /// messages; false if the topic has no such subscription.
    pub async fn unsubscribe(&self, topic: &str, name: &str) -> Result<bool> {
        validate_name(topic)?;
        validate_name(name)?;
        let subscribed = self
            .list_subscriptions(Some(topic))
            .await?
            .iter()
            .any(|s| s.name == name);
        if !subscribed {
            return Ok(false);
        }
        self.delete_queue(name).await
    }

    /// Every subscription (of one topic, or of all), by topic then name.
    pub async fn list_subscriptions(&self, topic: Option<&str>) -> Result<Vec<Subscription>> {
        if let Some(t) = topic {
            validate_name(t)?;
        }
        let _g = self.admit().await?;
        self.inner
            .store
            .list_subscriptions(topic.map(str::to_owned))
            .await
    }

    /// Publishes messages to a topic: to every subscription, the messages its filter
    /// accepts, all in one transaction (11.2); a filter that fails on a message routes
    /// it nowhere and is logged (11.3); a publish that routes nothing is a valid no-op
    /// (11.4). Returns, per subscription that took a copy, its name and what its queue
    /// did with each copy.
    #[tracing::instrument(level = "debug", skip_all, fields(topic = topic, n = messages.len()), err(level = "debug"))]
    pub async fn publish(
        &self,
        topic: &str,
        mut messages: Vec<OutMessage>,
        options: SendOptions,
    ) -> Result<Vec<(String, Vec<EnqueueSlot>)>> {
        validate_send(
            topic,
            &mut messages,
            &options,
            self.inner.options.max_message_bytes,
        )?;
        Ok(self.publish_inner(topic, messages, options).await?.0)
    }

    /// Tests a filter without storing anything: whether Subscribe would accept it and,
    /// given a message, whether the message passes (the wire's TestFilter).
    pub fn test_filter(&self, filter: &str, message: Option<&OutMessage>) -> FilterTest {
        let now = self.inner.clock.now_ms();
        crate::filter::test_filter(
            filter,
            message.map(|message| Seen {
                message,
                enqueued_at: now,
                visible_at: now,
            }),
        )
    }

    /// Routes and publishes; also returns, per message, the slot of its first copy
    /// ([`EnqueueSlot::Unrouted`] when no subscription took it).
    pub(super) async fn publish_inner(
        &self,
        topic: &str,
        messages: Vec<OutMessage>,
        options: SendOptions,
    ) -> Result<(Vec<(String, Vec<EnqueueSlot>)>, Vec<EnqueueSlot>)> {
        let _g = self.admit().await?;
        let store = &self.inner.store;
        let now = self.inner.clock.now_ms();
        let visible_at = options.visible_at(now);
        // Routing is decided here, once for every store.
        let mut filters = Vec::new();
        for s in store.list_subscriptions(Some(topic.to_owned())).await? {
            match self.filter(&s.filter) {
                Ok(f) => filters.push((s.name, f)),
                Err(e) => {
                    tracing::warn!(subscription = %s.name, error = %e, "a stored filter does not compile: it routes nothing");
                }
            }
        }
        let heavy = filters.iter().any(|(_, f)| !f.text().is_empty());
        let messages = Arc::new(messages);
        let route = {
            let messages = messages.clone();
            move || route_by_filters(&filters, &messages, now, visible_at)
        };
        // Filters walk message bodies: off the executor when there is one to run.
        let picks: Vec<(String, Vec<usize>)> = if heavy {
            tokio::task::spawn_blocking(route)
                .await
                .map_err(|e| Error::backend("filter", e))?
        } else {
            route()
        };
        let (names, picks): (Vec<String>, Vec<Vec<usize>>) = picks.into_iter().unzip();
        let routes: Vec<Route> = names
            .iter()
            .zip(&picks)
            .map(|(name, picked)| Route {
                subscription: name.clone(),
                messages: picked.iter().map(|i| messages[*i].clone()).collect(),
            })
            .collect();
        let slots = store.publish(topic.to_owned(), routes, options).await?;
        let mut first = vec![EnqueueSlot::Unrouted; messages.len()];
        for (picked, route_slots) in picks.iter().zip(&slots) {
            for (i, slot) in picked.iter().zip(route_slots) {
                if first[*i] == EnqueueSlot::Unrouted {
                    first[*i] = *slot;
                }
            }
        }
        for (name, route_slots) in names.iter().zip(&slots) {
            self.wake_queue(name, route_slots.len());
        }
        Ok((names.into_iter().zip(slots).collect(), first))
    }
}

/// Which messages each subscription takes, by index: the filters evaluated, failures
/// routing nothing and logged (sampled, so a stream of failures does not flood the log).
fn route_by_filters(
    filters: &[(String, Arc<Filter>)],
    messages: &[OutMessage],
    now: i64,
    visible_at: i64,
) -> Vec<(String, Vec<usize>)> {
    filters
        .iter()
        .filter_map(|(name, filter)| {
            let picked: Vec<usize> = messages
                .iter()
                .enumerate()
                .filter(|(_, message)| {
                    let seen = Seen {
                        message,
                        enqueued_at: now,
                        visible_at,
                    };
                    filter.matches(seen).unwrap_or_else(|e| {
                        if let Some(n) = filter.note_failure() {
                            tracing::warn!(subscription = %name, filter = %filter.text(), error = %e, failures = n, "filter failed on a message: not routed there (fail-closed)");
                        }
                        false
                    })
                })
                .map(|(i, _)| i)
                .collect();
            (!picked.is_empty()).then(|| (name.clone(), picked))
        })
        .collect()
}

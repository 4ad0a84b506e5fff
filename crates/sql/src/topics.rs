//! Subscriptions and publish (11.2, 11.4, 12.1): a subscription is a row plus its
//! backing queue of kind `subscription`; a publish enqueues every copy in the caller's
//! one transaction.

use mqlite_contract::{
    EnqueueSlot, QueueConfig, QueueKind, Result, Route, SendOptions, Subscription,
};
use mqlite_kit::decide;

use crate::exec::{Row, SqlExec, Value};
use crate::{admin::upsert_queue, rows::load_any};

/// One subscription by name.
pub const SUB_SELECT: &str =
    "SELECT topic, name, filter FROM mqlite_subscriptions WHERE name = :name";

/// Create-or-update of a subscription row (its backing queue is written first).
pub const SUB_UPSERT: &str = "INSERT INTO mqlite_subscriptions (name, topic, filter, created_at)
VALUES (:name, :topic, :filter, :now)
ON CONFLICT (name) DO UPDATE SET filter = excluded.filter";

/// Every subscription, by topic then name.
pub const SUB_LIST_ALL: &str =
    "SELECT topic, name, filter FROM mqlite_subscriptions ORDER BY topic, name";

/// A topic's subscriptions, by name (`mqlite_sub_topic`).
pub const SUB_LIST_TOPIC: &str =
    "SELECT topic, name, filter FROM mqlite_subscriptions WHERE topic = :topic ORDER BY name";

fn subscription(r: &Row) -> Result<Subscription> {
    Ok(Subscription {
        topic: r.text(0)?,
        name: r.text(1)?,
        filter: r.text(2)?,
    })
}

/// Creates or updates a subscription and its backing queue; cross-kind names are
/// NameConflict and leave nothing behind (the caller's transaction rolls back).
pub async fn upsert_subscription<X: SqlExec>(
    x: &mut X,
    now: i64,
    s: &Subscription,
    config: &QueueConfig,
) -> Result<()> {
    decide::subscribable(&s.topic, load_any(x, &s.topic).await?.0)?;
    let existing = x
        .query(SUB_SELECT, &[(":name", Value::from(s.name.as_str()))])
        .await?;
    if let Some(r) = existing.first() {
        let other = subscription(r)?;
        if other.topic != s.topic {
            return Err(decide::subscription_taken(&s.name, &other.topic));
        }
    }
    upsert_queue(x, now, &s.name, QueueKind::Subscription, config, false).await?;
    x.execute(
        SUB_UPSERT,
        &[
            (":name", Value::from(s.name.as_str())),
            (":topic", Value::from(s.topic.as_str())),
            (":filter", Value::from(s.filter.as_str())),
            (":now", Value::from(now)),
        ],
    )
    .await?;
    Ok(())
}

/// Subscriptions of one topic, or of all.
pub async fn list_subscriptions<X: SqlExec>(
    x: &mut X,
    topic: Option<&str>,
) -> Result<Vec<Subscription>> {
    let rows = match topic {
        Some(t) => {
            x.query(SUB_LIST_TOPIC, &[(":topic", Value::from(t))])
                .await?
        }
        None => x.query(SUB_LIST_ALL, &[]).await?,
    };
    rows.iter().map(subscription).collect()
}

/// Enqueues every route's copies in the caller's transaction (11.2); a route to a name
/// that is no longer a subscription of the topic gets nothing.
pub async fn publish<X: SqlExec>(
    x: &mut X,
    now: i64,
    topic: &str,
    routes: Vec<Route>,
    options: SendOptions,
) -> Result<Vec<Vec<EnqueueSlot>>> {
    decide::publishable(topic, load_any(x, topic).await?.0)?;
    let current: std::collections::HashSet<String> = list_subscriptions(x, Some(topic))
        .await?
        .into_iter()
        .map(|s| s.name)
        .collect();
    let mut out = Vec::with_capacity(routes.len());
    for route in routes {
        if !decide::delivers(&route, &current) {
            out.push(Vec::new());
            continue;
        }
        out.push(
            crate::enqueue::enqueue(x, now, &route.subscription, route.messages, options, false)
                .await?,
        );
    }
    Ok(out)
}

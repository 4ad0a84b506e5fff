//! Subscriptions and publish: crates/sql's `topics`.

use std::collections::HashSet;

use redb::ReadableTable;

use mqlite_contract::{
    EnqueueSlot, Error, QueueConfig, QueueKind, Result, Route, SendOptions, Subscription,
};
use mqlite_kit::decide;

use crate::enc::{Decoder, Encoder, Key, key_str};
use crate::{db, tables::Tables};

use super::{enqueue, load_any, upsert_queue};

fn subscription(name: &str, buf: &[u8]) -> Result<Subscription> {
    let mut r = Decoder(buf);
    Ok(Subscription {
        topic: r.s()?,
        name: name.to_owned(),
        filter: r.s()?,
    })
}

pub(crate) fn upsert_subscription(
    t: &mut Tables<'_>,
    now: i64,
    s: &Subscription,
    config: &QueueConfig,
) -> Result<()> {
    decide::subscribable(&s.topic, load_any(t, &s.topic)?.0)?;
    let existing = t
        .subs
        .get(s.name.as_str())
        .map_err(db)?
        .map(|v| {
            let sub = subscription(&s.name, v.value())?;
            let mut r = Decoder(v.value());
            let (_, _, created) = (r.s()?, r.s()?, r.i()?);
            Ok::<_, Error>((sub, created))
        })
        .transpose()?;
    if let Some((other, _)) = &existing
        && other.topic != s.topic
    {
        return Err(decide::subscription_taken(&s.name, &other.topic));
    }
    upsert_queue(t, now, &s.name, QueueKind::Subscription, config, false)?;
    let created = existing.map_or(now, |(_, c)| c);
    let mut w = Encoder::default();
    w.s(&s.topic).s(&s.filter).i(created);
    t.subs.insert(s.name.as_str(), w.0.as_slice()).map_err(db)?;
    t.subs_by_topic
        .insert(Key::new().s(&s.topic).s(&s.name).bytes(), ())
        .map_err(db)?;
    Ok(())
}

pub(crate) fn list_subscriptions(t: &Tables<'_>, topic: Option<&str>) -> Result<Vec<Subscription>> {
    let (start, end) = match topic {
        Some(tp) => {
            let k = Key::new().s(tp);
            (k.0.clone(), k.end())
        }
        // Every key starts with an encoded string, whose first byte is never 0xFF.
        None => (Vec::new(), vec![0xFF; 8]),
    };
    let mut names = Vec::new();
    for e in t
        .subs_by_topic
        .range::<&[u8]>(start.as_slice()..end.as_slice())
        .map_err(db)?
    {
        let k = e.map_err(db)?.0.value().to_vec();
        let (_, pos) = key_str(&k, 0).ok_or_else(|| crate::enc::corrupt("key"))?;
        names.push(
            key_str(&k, pos)
                .ok_or_else(|| crate::enc::corrupt("key"))?
                .0,
        );
    }
    let mut out = Vec::new();
    for n in names {
        if let Some(v) = t.subs.get(n.as_str()).map_err(db)? {
            out.push(subscription(&n, v.value())?);
        }
    }
    Ok(out)
}

pub(crate) fn publish(
    t: &mut Tables<'_>,
    now: i64,
    topic: &str,
    routes: Vec<Route>,
    options: SendOptions,
) -> Result<Vec<Vec<EnqueueSlot>>> {
    // A missing name is the queue lookup's NotFound, another kind a missing topic.
    decide::publishable(topic, load_any(t, topic)?.0)?;
    let current: HashSet<String> = list_subscriptions(t, Some(topic))?
        .into_iter()
        .map(|s| s.name)
        .collect();
    let mut out = Vec::with_capacity(routes.len());
    for route in routes {
        if !decide::delivers(&route, &current) {
            out.push(Vec::new());
            continue;
        }
        out.push(enqueue(
            t,
            now,
            &route.subscription,
            route.messages,
            options,
        )?);
    }
    Ok(out)
}

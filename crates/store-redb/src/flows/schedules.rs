//! Recurring schedules: crates/sql's `schedules`.

use redb::ReadableTable;

use mqlite_contract::{Result, Schedule, ScheduleFire, ScheduleSpec, SendOptions};

use super::{enqueue, load_queue};
use crate::db;
use crate::enc::{decode_schedule, encode_schedule};
use crate::tables::Tables;

fn get(t: &Tables<'_>, name: &str) -> Result<Option<Schedule>> {
    t.work.lookup();
    match t.schedules.get(name).map_err(db)? {
        Some(v) => decode_schedule(name, v.value()).map(Some),
        None => Ok(None),
    }
}

fn put(t: &mut Tables<'_>, s: &Schedule) -> Result<()> {
    t.schedules
        .insert(s.spec.name.as_str(), encode_schedule(s).as_slice())
        .map_err(db)?;
    Ok(())
}

pub(crate) fn put_schedule(
    t: &mut Tables<'_>,
    now: i64,
    spec: &ScheduleSpec,
    next_at: i64,
) -> Result<Schedule> {
    load_queue(t, &spec.queue)?;
    let stored = match get(t, &spec.name)? {
        Some(old) => Schedule {
            spec: spec.clone(),
            next_at_ms: next_at,
            revision: old.revision + 1,
            ..old
        },
        None => Schedule {
            spec: spec.clone(),
            next_at_ms: next_at,
            revision: 1,
            fired: 0,
            last_tick_ms: None,
            created_at_ms: now,
        },
    };
    put(t, &stored)?;
    Ok(stored)
}

pub(crate) fn list_schedules(t: &Tables<'_>) -> Result<Vec<Schedule>> {
    let mut out = Vec::new();
    for e in t.schedules.iter().map_err(db)? {
        let (k, v) = e.map_err(db)?;
        t.work.visit();
        out.push(decode_schedule(k.value(), v.value())?);
    }
    Ok(out)
}

pub(crate) fn delete_schedule(t: &mut Tables<'_>, name: &str) -> Result<bool> {
    Ok(t.schedules.remove(name).map_err(db)?.is_some())
}

/// Deletes the schedules that send to `queue` (its deletion).
pub(crate) fn delete_schedules_of(t: &mut Tables<'_>, queue: &str) -> Result<()> {
    for s in list_schedules(t)? {
        if s.spec.queue == queue {
            delete_schedule(t, &s.spec.name)?;
        }
    }
    Ok(())
}

pub(crate) fn fire_schedule(t: &mut Tables<'_>, now: i64, fire: ScheduleFire) -> Result<bool> {
    let Some(s) = get(t, &fire.name)? else {
        return Ok(false);
    };
    if s.revision != fire.revision || s.next_at_ms != fire.due_at_ms {
        return Ok(false);
    }
    let queue = s.spec.queue.clone();
    let fired = u64::from(fire.send.is_some());
    let moved = Schedule {
        next_at_ms: fire.next_at_ms,
        fired: s.fired + fired,
        last_tick_ms: fire.send.as_ref().map(|(tick, _)| *tick).or(s.last_tick_ms),
        ..s
    };
    put(t, &moved)?;
    if let Some((_, message)) = fire.send {
        enqueue(t, now, &queue, vec![message], SendOptions::default())?;
    }
    Ok(true)
}

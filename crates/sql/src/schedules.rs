//! Recurring schedules (21): the stored schedule and the one transaction that fires a
//! tick. The engine plans each fire (which tick, where the schedule moves on to); the
//! flow applies it only from the state it was planned from.

use mqlite_contract::{
    Error, Missed, OutMessage, Recurrence, Result, Schedule, ScheduleFire, ScheduleSpec,
    SendOptions,
};
use mqlite_kit::codec::{decode_out, encode_out};

use crate::exec::{CorruptRow, Row, SqlExec, Value};
use crate::rows::load_queue;

/// A schedule's columns, in [`schedule`]'s order.
macro_rules! schedule_columns {
    () => {
        "name, queue, every_ms, cron, tz, missed, message, next_at, revision, fired, last_tick, \
         created_at"
    };
}

/// Creates a schedule or replaces its definition: a replaced one keeps its creation
/// time and fire count, and its revision moves on.
pub const SCHEDULE_PUT: &str = concat!(
    "INSERT INTO mqlite_schedules (",
    schedule_columns!(),
    ")
VALUES (:name, :queue, :every_ms, :cron, :tz, :missed, :message, :next_at, 1, 0, NULL, :now)
ON CONFLICT (name) DO UPDATE SET
    queue = excluded.queue, every_ms = excluded.every_ms, cron = excluded.cron,
    tz = excluded.tz, missed = excluded.missed, message = excluded.message,
    next_at = excluded.next_at, revision = revision + 1
RETURNING ",
    schedule_columns!()
);

/// Every schedule, by name.
pub const SCHEDULE_LIST: &str = concat!(
    "SELECT ",
    schedule_columns!(),
    " FROM mqlite_schedules ORDER BY name"
);

/// Deletes one schedule.
pub const SCHEDULE_DELETE: &str = "DELETE FROM mqlite_schedules WHERE name = :name";

/// Moves a schedule on, only from the revision and next time its fire was planned from
/// (21.2): the guard that makes a tick fire once.
pub const SCHEDULE_FIRE: &str = "UPDATE mqlite_schedules
   SET next_at = :next_at, fired = fired + :fired, last_tick = coalesce(:tick, last_tick)
 WHERE name = :name AND revision = :revision AND next_at = :due_at
RETURNING queue";

fn corrupt(what: &str) -> Error {
    Error::backend("sql", CorruptRow(format!("{what} of a schedule")))
}

fn schedule(r: &Row) -> Result<Schedule> {
    let every = Recurrence::from_parts(r.int(2)?, r.opt_text(3)?, r.opt_text(4)?);
    Ok(Schedule {
        spec: ScheduleSpec {
            name: r.text(0)?,
            queue: r.text(1)?,
            every,
            missed: r.text(5)?.parse::<Missed>()?,
            message: decode_out(&r.blob(6)?).ok_or_else(|| corrupt("the message"))?,
        },
        next_at_ms: r.int(7)?,
        revision: r.int(8)?,
        fired: u64::try_from(r.int(9)?).map_err(|_| corrupt("the fire count"))?,
        last_tick_ms: r.opt_int(10)?,
        created_at_ms: r.int(11)?,
    })
}

/// Stores a schedule (the queue must hold messages) with its next tick.
pub async fn put_schedule<X: SqlExec>(
    x: &mut X,
    now: i64,
    spec: &ScheduleSpec,
    next_at: i64,
) -> Result<Schedule> {
    load_queue(x, &spec.queue).await?;
    let (every_ms, cron, tz) = spec.every.parts();
    let rows = x
        .query(
            SCHEDULE_PUT,
            &[
                (":name", Value::from(spec.name.as_str())),
                (":queue", Value::from(spec.queue.as_str())),
                (":every_ms", Value::from(every_ms)),
                (":cron", Value::from(cron)),
                (":tz", Value::from(tz)),
                (":missed", Value::from(spec.missed.as_str())),
                (":message", Value::from(encode_out(&spec.message))),
                (":next_at", Value::from(next_at)),
                (":now", Value::from(now)),
            ],
        )
        .await?;
    schedule(rows.first().ok_or_else(|| corrupt("the stored row"))?)
}

/// Every schedule, by name.
pub async fn list_schedules<X: SqlExec>(x: &mut X) -> Result<Vec<Schedule>> {
    x.query(SCHEDULE_LIST, &[])
        .await?
        .iter()
        .map(schedule)
        .collect()
}

/// Deletes a schedule; false if there was none.
pub async fn delete_schedule<X: SqlExec>(x: &mut X, name: &str) -> Result<bool> {
    let done = x
        .execute(SCHEDULE_DELETE, &[(":name", Value::from(name))])
        .await?;
    Ok(done.changes > 0)
}

/// Applies a planned fire: the guarded move, then the tick's message in the same
/// transaction. False when the guard held nothing (fired elsewhere, changed, deleted).
pub async fn fire_schedule<X: SqlExec>(x: &mut X, now: i64, fire: ScheduleFire) -> Result<bool> {
    let tick = fire.send.as_ref().map(|(tick, _)| *tick);
    let rows = x
        .query(
            SCHEDULE_FIRE,
            &[
                (":next_at", Value::from(fire.next_at_ms)),
                (":fired", Value::from(i64::from(fire.send.is_some()))),
                (":tick", Value::from(tick)),
                (":name", Value::from(fire.name.as_str())),
                (":revision", Value::from(fire.revision)),
                (":due_at", Value::from(fire.due_at_ms)),
            ],
        )
        .await?;
    let Some(row) = rows.first() else {
        return Ok(false);
    };
    if let Some((_, message)) = fire.send {
        let queue = row.text(0)?;
        let one: Vec<OutMessage> = vec![message];
        crate::enqueue::enqueue(x, now, &queue, one, SendOptions::default(), false).await?;
    }
    Ok(true)
}

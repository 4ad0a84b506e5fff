//! Recurring schedules (promise 21): create, list and delete a schedule, and the pass
//! of the scheduler loop that fires every due one.
//!
//! The engine plans each fire from the stored schedule and its clock: the latest tick
//! that has come, whether the missed-window policy lets it fire, and the next tick after
//! now. The store applies the plan in one transaction, only from the revision and next
//! time it was planned from (21.2), so two processes, a crash between the send and the
//! move, or a restart fire each tick once; the message's id names its tick, so a
//! queue's dedup window would collapse a repeat too.

use std::str::FromStr;

use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;
use croner::Cron;

use mqlite_contract::error::{Error, Result};
use mqlite_contract::store::Store;
use mqlite_contract::types::{
    MIN_SCHEDULE_INTERVAL, MISSED_GRACE, Missed, Recurrence, Schedule, ScheduleFire, ScheduleSpec,
    SendOptions, millis, tick_id,
};

use super::limits::validate_send;
use super::{Engine, validate_name, validate_new_name};

/// How a recurrence finds its ticks.
#[derive(Debug)]
pub(crate) enum Ticks {
    /// A fixed interval, in ms.
    Every(i64),
    /// A cron expression in a time zone.
    Cron(Box<Cron>, Tz),
}

/// Where a due schedule stands at `now`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Standing {
    /// The latest tick at or before now.
    pub latest: i64,
    /// The first tick after now.
    pub next: i64,
}

/// `ms` in `tz`, down to the whole second (a cron tick is a whole second, and croner
/// keeps a fraction it is given).
fn at(ms: i64, tz: Tz) -> Result<DateTime<Tz>> {
    Utc.timestamp_millis_opt(ms.div_euclid(1000) * 1000)
        .single()
        .map(|t| t.with_timezone(&tz))
        .ok_or_else(|| Error::invalid(format!("{ms} ms is outside the calendar")))
}

impl Ticks {
    /// Reads a recurrence; an interval under [`MIN_SCHEDULE_INTERVAL`], an expression
    /// croner refuses or a zone the IANA database does not name is `InvalidArgument`.
    pub(crate) fn of(every: &Recurrence) -> Result<Ticks> {
        match every {
            Recurrence::Every(d) => {
                if *d < MIN_SCHEDULE_INTERVAL || *d > mqlite_contract::types::MAX_SPAN {
                    return Err(Error::invalid(format!(
                        "a schedule's interval is {}s..=100 years",
                        MIN_SCHEDULE_INTERVAL.as_secs()
                    )));
                }
                Ok(Ticks::Every(millis(*d)))
            }
            Recurrence::Cron { expr, tz } => {
                let cron = Cron::from_str(expr).map_err(|e| {
                    Error::invalid(format!(
                        "cron expression {expr:?}: {e} (five fields: minute hour day-of-month \
                         month day-of-week, or six with seconds first)"
                    ))
                })?;
                let zone = Tz::from_str(tz).map_err(|_| {
                    Error::invalid(format!(
                        "time zone {tz:?} is not an IANA zone name (say \"UTC\" or \
                         \"Europe/Paris\")"
                    ))
                })?;
                Ok(Ticks::Cron(Box::new(cron), zone))
            }
        }
    }

    /// The first tick after `t`: where a created or replaced schedule starts (an
    /// interval counts from `t`), and a cron expression's next tick.
    pub(crate) fn first_after(&self, t: i64) -> Result<i64> {
        match self {
            Ticks::Every(d) => Ok(t.saturating_add(*d)),
            Ticks::Cron(cron, tz) => cron
                .find_next_occurrence(&at(t, *tz)?, false)
                .map(|d| d.timestamp_millis())
                .map_err(|e| Error::invalid(format!("the cron expression has no next tick: {e}"))),
        }
    }

    /// Where a schedule due at `due` (≤ `now`) stands at `now`: an interval keeps its
    /// phase (ticks are `due + k × interval`), a cron expression its calendar.
    pub(crate) fn standing(&self, due: i64, now: i64) -> Result<Standing> {
        match self {
            Ticks::Every(d) => {
                let latest = due + (now - due) / d * d;
                Ok(Standing {
                    latest,
                    next: latest.saturating_add(*d),
                })
            }
            Ticks::Cron(cron, tz) => {
                let previous = cron
                    .find_previous_occurrence(&at(now, *tz)?, true)
                    .map(|d| d.timestamp_millis())
                    .unwrap_or(due);
                Ok(Standing {
                    latest: previous.clamp(due, now),
                    next: self.first_after(now)?,
                })
            }
        }
    }
}

/// The fire of a schedule due at `now`: the latest tick fires when it is on time (found
/// within its grace: the smaller of [`MISSED_GRACE`] and the time to the tick after
/// it), or under [`Missed::FireOnce`] for the whole missed window; the schedule moves
/// on to its first tick after now.
pub(crate) fn plan(s: &Schedule, now: i64) -> Result<ScheduleFire> {
    let ticks = Ticks::of(&s.spec.every)?;
    let Standing { latest, next } = ticks.standing(s.next_at_ms, now)?;
    let grace = (next - latest).min(millis(MISSED_GRACE));
    let on_time = now - latest <= grace;
    let send = (on_time || s.spec.missed == Missed::FireOnce).then(|| {
        let mut message = s.spec.message.clone();
        message.message_id = Some(tick_id(&s.spec.name, latest));
        (latest, message)
    });
    Ok(ScheduleFire {
        name: s.spec.name.clone(),
        revision: s.revision,
        due_at_ms: s.next_at_ms,
        next_at_ms: next,
        send,
    })
}

impl<S: Store> Engine<S> {
    /// Creates a recurring schedule, or replaces the definition of the one of that name
    /// (promise 21): from now on, each tick of `spec.every` sends `spec.message` to
    /// `spec.queue`, once, whatever number of processes serve the database. The first
    /// tick is the first after now (an interval counts from now); the message's id is
    /// set by each tick to `<name>@<tick in epoch ms>`.
    ///
    /// `InvalidArgument` for a bad name, interval (under a second), cron expression or
    /// time zone, or message; `NotFound` if the queue does not exist.
    #[tracing::instrument(level = "debug", skip_all, fields(schedule = %spec.name, queue = %spec.queue), err(level = "debug"))]
    pub async fn create_schedule(&self, mut spec: ScheduleSpec) -> Result<Schedule> {
        validate_new_name(&spec.name)?;
        validate_name(&spec.queue)?;
        let ticks = Ticks::of(&spec.every)?;
        spec.message.event = None;
        spec.message.message_id = None;
        validate_send(
            &spec.queue,
            std::slice::from_mut(&mut spec.message),
            &SendOptions::default(),
            self.inner.options.max_message_bytes,
        )?;
        let _g = self.admit().await?;
        let next = ticks.first_after(self.inner.clock.now_ms())?;
        self.inner.store.put_schedule(spec, next).await
    }

    /// Every schedule, by name.
    pub async fn list_schedules(&self) -> Result<Vec<Schedule>> {
        let _g = self.admit().await?;
        self.inner.store.list_schedules().await
    }

    /// Deletes a schedule; false if there was none. Its messages already sent stay.
    #[tracing::instrument(level = "debug", skip_all, fields(schedule = name), err(level = "debug"))]
    pub async fn delete_schedule(&self, name: &str) -> Result<bool> {
        validate_name(name)?;
        let _g = self.admit().await?;
        self.inner.store.delete_schedule(name.to_owned()).await
    }

    /// Fires every schedule due now, each in its own transaction, and returns how many
    /// messages were sent. The scheduler loop runs this every pass; a tick fired by
    /// another process meanwhile is left alone. A schedule whose queue refuses the send
    /// (paused, deleted) stays due and is tried again at the next pass; when the queue
    /// takes sends again its missed-window policy decides.
    pub async fn fire_schedules(&self) -> Result<u64> {
        let _g = self.admit().await?;
        self.fire_due_schedules().await
    }

    /// [`Engine::fire_schedules`] for a caller already admitted.
    pub(super) async fn fire_due_schedules(&self) -> Result<u64> {
        let store = &self.inner.store;
        let now = self.inner.clock.now_ms();
        let mut fired = 0;
        for s in store.list_schedules().await? {
            if s.next_at_ms > now {
                continue;
            }
            let fire = match plan(&s, now) {
                Ok(fire) => fire,
                Err(e) => {
                    tracing::warn!(schedule = %s.spec.name, error = %e, "schedule not fired");
                    continue;
                }
            };
            let sends = u64::from(fire.send.is_some());
            match store.fire_schedule(fire).await {
                Ok(true) => fired += sends,
                Ok(false) => {}
                Err(e @ Error::QueuePaused { .. }) => {
                    tracing::debug!(schedule = %s.spec.name, error = %e, "tick waits for its queue");
                }
                Err(
                    e @ (Error::NotFound { .. }
                    | Error::GroupRequired { .. }
                    | Error::InvalidArgument(_)),
                ) => tracing::warn!(
                    schedule = %s.spec.name, queue = %s.spec.queue, error = %e,
                    "schedule not fired; it stays due"
                ),
                Err(e) => return Err(e),
            }
        }
        self.woken_if(fired);
        Ok(fired)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const MIN: i64 = 60_000;

    #[test]
    fn an_interval_keeps_its_phase_and_names_the_latest_tick() {
        let t = Ticks::of(&Recurrence::Every(Duration::from_secs(60))).unwrap();
        assert_eq!(t.first_after(1_000).unwrap(), 61_000);
        let s = t.standing(61_000, 61_000).unwrap();
        assert_eq!((s.latest, s.next), (61_000, 121_000));
        let s = t.standing(61_000, 61_000 + 3 * MIN + 5).unwrap();
        assert_eq!((s.latest, s.next), (61_000 + 3 * MIN, 61_000 + 4 * MIN));
    }

    #[test]
    fn bad_recurrences_are_refused_with_the_way_to_write_them() {
        let short = Ticks::of(&Recurrence::Every(Duration::from_millis(999))).unwrap_err();
        assert!(short.to_string().contains("interval"), "{short}");
        let cron = |expr: &str, tz: &str| {
            Ticks::of(&Recurrence::Cron {
                expr: expr.into(),
                tz: tz.into(),
            })
        };
        let e = cron("61 * * * *", "UTC").unwrap_err();
        assert!(e.to_string().contains("five fields"), "{e}");
        let e = cron("0 2 * * *", "Mars/Olympus").unwrap_err();
        assert!(e.to_string().contains("IANA"), "{e}");
    }

    #[test]
    fn a_cron_tick_is_read_in_its_time_zone() {
        // 2026-07-01T00:00:00Z; 02:00 in Paris (UTC+2 in summer) is 00:00Z.
        let july = 1_782_864_000_000;
        let t = Ticks::of(&Recurrence::Cron {
            expr: "0 2 * * *".into(),
            tz: "Europe/Paris".into(),
        })
        .unwrap();
        assert_eq!(t.first_after(july - 1).unwrap(), july);
        assert_eq!(t.first_after(july).unwrap(), july + 24 * 60 * MIN);
        let s = t.standing(july, july + 3 * 24 * 60 * MIN + 7).unwrap();
        assert_eq!(s.latest, july + 3 * 24 * 60 * MIN);
        assert_eq!(s.next, july + 4 * 24 * 60 * MIN);
    }

    fn schedule(missed: Missed, every: Duration) -> Schedule {
        Schedule {
            spec: ScheduleSpec {
                missed,
                ..ScheduleSpec::new(
                    "s",
                    "q",
                    Recurrence::Every(every),
                    mqlite_contract::OutMessage::new("x"),
                )
            },
            next_at_ms: 10 * MIN,
            revision: 3,
            fired: 0,
            last_tick_ms: None,
            created_at_ms: 0,
        }
    }

    #[test]
    fn an_on_time_tick_fires_under_either_policy() {
        for missed in [Missed::FireOnce, Missed::Skip] {
            let f = plan(
                &schedule(missed, Duration::from_secs(300)),
                10 * MIN + 59_000,
            )
            .unwrap();
            let (tick, m) = f.send.expect("fires");
            assert_eq!(tick, 10 * MIN);
            assert_eq!(m.message_id.as_deref(), Some("s@600000"));
            assert_eq!(
                (f.due_at_ms, f.next_at_ms, f.revision),
                (10 * MIN, 15 * MIN, 3)
            );
        }
    }

    #[test]
    fn a_missed_window_fires_once_or_is_skipped() {
        // Down for an hour: twelve five-minute ticks passed; found 2 minutes after the
        // latest, past its one-minute grace.
        let now = 70 * MIN + 2 * MIN;
        let once = plan(&schedule(Missed::FireOnce, Duration::from_secs(300)), now).unwrap();
        assert_eq!(once.send.map(|(t, _)| t), Some(70 * MIN));
        assert_eq!(once.next_at_ms, 75 * MIN);
        let skip = plan(&schedule(Missed::Skip, Duration::from_secs(300)), now).unwrap();
        assert!(skip.send.is_none());
        assert_eq!(skip.next_at_ms, 75 * MIN);
        // Many ticks passed but the latest is on time: it fires under skip too.
        let skip = plan(
            &schedule(Missed::Skip, Duration::from_secs(300)),
            70 * MIN + 10,
        )
        .unwrap();
        assert_eq!(skip.send.map(|(t, _)| t), Some(70 * MIN));
        // A short interval's grace is its interval.
        let fast = plan(
            &schedule(Missed::Skip, Duration::from_secs(5)),
            10 * MIN + 4_999,
        )
        .unwrap();
        assert_eq!(fast.send.map(|(t, _)| t), Some(10 * MIN));
    }
}

//! Section 21: recurring schedules.

use std::time::Duration;

use mqlite_contract::store::Store;
use mqlite_contract::{
    AdminOps, Error, Missed, OutMessage, QueueConfig, QueueStatus, Recurrence, Schedule,
    ScheduleFire, ScheduleSpec,
};
use mqlite_engine::Engine;

use super::peek_all;
use crate::harness::{Access, Ctx, START_MS, TckResult};

const Q: &str = "q";
const MIN: i64 = 60_000;

fn every(name: &str, ms: u64, missed: Missed) -> ScheduleSpec {
    ScheduleSpec {
        missed,
        ..ScheduleSpec::new(
            name,
            Q,
            Recurrence::Every(Duration::from_millis(ms)),
            OutMessage::new(format!("tick of {name}"))
                .with_subject("report")
                .with_priority(4),
        )
    }
}

async fn schedule_of<S: Store>(mq: &Engine<S>, name: &str) -> mqlite_contract::Result<Schedule> {
    mq.list_schedules()
        .await?
        .into_iter()
        .find(|s| s.spec.name == name)
        .ok_or_else(|| Error::invalid(format!("no schedule {name}")))
}

/// Two schedules of `period` ms on [`Q`], `once` (fire_once) and `skip`.
async fn once_and_skip<S: Store>(mq: &Engine<S>, period: i64) -> mqlite_contract::Result<()> {
    for (name, missed) in [("once", Missed::FireOnce), ("skip", Missed::Skip)] {
        mq.create_schedule(every(name, period as u64, missed))
            .await?;
    }
    Ok(())
}

/// The message ids `queue` holds, by sequence number.
async fn ids<S: Store>(mq: &Engine<S>, queue: &str) -> mqlite_contract::Result<Vec<String>> {
    Ok(peek_all(mq, queue)
        .await?
        .into_iter()
        .map(|m| m.content.message_id.unwrap_or_default())
        .collect())
}

/// 21.1 A schedule created on a queue fires one message per tick, the first tick an
/// interval after its creation: the message is the schedule's, its id names the tick
/// (`<name>@<tick ms>`), and a pass at the same time fires nothing more. The schedule
/// reads back with its fire count, last tick and next tick.
pub async fn p21_1_each_tick_fires_one_message_naming_it<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, QueueConfig::default()).await?;
    let created = mq
        .create_schedule(every("five", 5 * MIN as u64, Missed::FireOnce))
        .await?;
    assert_eq!(created.next_at_ms, START_MS + 5 * MIN);
    assert_eq!((created.fired, created.last_tick_ms), (0, None));
    assert_eq!(created.created_at_ms, START_MS);
    assert_eq!(mq.fire_schedules().await?, 0, "not due yet");

    let mut expected = Vec::new();
    for k in 1..=4 {
        ctx.clock.set(START_MS + k * 5 * MIN);
        assert_eq!(mq.run_sweeps().await?.fired, 1, "tick {k}");
        assert_eq!(mq.fire_schedules().await?, 0, "tick {k} fires once");
        expected.push(format!("five@{}", START_MS + k * 5 * MIN));
    }
    assert_eq!(ids(&mq, Q).await?, expected);
    let m = &peek_all(&mq, Q).await?[0];
    assert_eq!(m.body(), b"tick of five");
    assert_eq!(m.content.subject.as_deref(), Some("report"));
    assert_eq!(m.content.priority, 4);
    let s = schedule_of(&mq, "five").await?;
    assert_eq!(s.fired, 4);
    assert_eq!(s.last_tick_ms, Some(START_MS + 20 * MIN));
    assert_eq!(s.next_at_ms, START_MS + 25 * MIN);
    assert_eq!(s.revision, created.revision);
    Ok(())
}

/// 21.2 The store moves a schedule only from the revision and next time a fire was
/// planned from, and sends in the same transaction: a plan naming another next time or
/// revision, or one already applied, changes nothing and sends nothing; two passes at
/// once fire a tick once.
pub async fn p21_2_a_tick_fires_once_from_its_guard<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, QueueConfig::default()).await?;
    let s = mq
        .create_schedule(every("g", MIN as u64, Missed::FireOnce))
        .await?;
    let due = s.next_at_ms;
    let fire = |revision: i64, due_at_ms: i64| ScheduleFire {
        name: "g".into(),
        revision,
        due_at_ms,
        next_at_ms: due + MIN,
        send: Some((
            due_at_ms,
            OutMessage::new("x").with_id(format!("g@{due_at_ms}")),
        )),
    };
    let store = mq.store();
    assert!(
        !store.fire_schedule(fire(s.revision, due - 1)).await?,
        "another next time"
    );
    assert!(
        !store.fire_schedule(fire(s.revision + 1, due)).await?,
        "another revision"
    );
    assert!(ids(&mq, Q).await?.is_empty());
    assert!(store.fire_schedule(fire(s.revision, due)).await?);
    assert!(
        !store.fire_schedule(fire(s.revision, due)).await?,
        "applied twice"
    );
    assert_eq!(ids(&mq, Q).await?, vec![format!("g@{due}")]);
    assert_eq!(schedule_of(&mq, "g").await?.next_at_ms, due + MIN);

    // Two passes racing over the next tick.
    ctx.clock.set(due + MIN);
    let (a, b) = tokio::join!(mq.fire_schedules(), mq.fire_schedules());
    assert_eq!(a? + b?, 1);
    assert_eq!(ids(&mq, Q).await?.len(), 2);
    // A replaced definition gets a new revision: the old plan no longer applies.
    let replaced = mq
        .create_schedule(every("g", 2 * MIN as u64, Missed::Skip))
        .await?;
    assert_eq!(replaced.revision, s.revision + 1);
    assert_eq!(
        (replaced.fired, replaced.created_at_ms),
        (2, s.created_at_ms)
    );
    assert_eq!(
        replaced.next_at_ms,
        due + 3 * MIN,
        "an interval counts from now"
    );
    assert!(
        !store
            .fire_schedule(ScheduleFire {
                due_at_ms: replaced.next_at_ms,
                ..fire(s.revision, due)
            })
            .await?
    );
    Ok(())
}

/// 21.3 A tick its queue refuses (paused for sends) sends nothing and leaves the
/// schedule due; resumed within the tick's grace, the tick fires. After a window of
/// missed ticks, `fire_once` sends one message naming the latest and `skip` sends none;
/// both go on at their next tick.
pub async fn p21_3_a_refused_tick_waits_and_missed_windows_follow_the_policy<F: Access>(
    ctx: Ctx<F>,
) -> TckResult {
    let mq = ctx.engine_with_queue(Q, QueueConfig::default()).await?;
    let period = 10 * MIN;
    once_and_skip(&mq, period).await?;
    mq.set_queue_status(Q, QueueStatus::SendDisabled).await?;
    ctx.clock.set(START_MS + period);
    assert_eq!(mq.fire_schedules().await?, 0);
    assert!(ids(&mq, Q).await?.is_empty());
    assert_eq!(
        schedule_of(&mq, "once").await?.next_at_ms,
        START_MS + period
    );
    ctx.clock.advance(30_000);
    mq.set_queue_status(Q, QueueStatus::Active).await?;
    assert_eq!(mq.fire_schedules().await?, 2, "on time: both fire");
    let first = format!("@{}", START_MS + period);
    assert_eq!(
        ids(&mq, Q).await?,
        vec![format!("once{first}"), format!("skip{first}")]
    );

    // Paused across three ticks, resumed five minutes after the last.
    mq.set_queue_status(Q, QueueStatus::Disabled).await?;
    ctx.clock.set(START_MS + 4 * period + 5 * MIN);
    assert_eq!(mq.fire_schedules().await?, 0);
    mq.set_queue_status(Q, QueueStatus::Active).await?;
    assert_eq!(mq.fire_schedules().await?, 1);
    let ids_now = ids(&mq, Q).await?;
    assert_eq!(ids_now.len(), 3);
    assert_eq!(ids_now[2], format!("once@{}", START_MS + 4 * period));
    for name in ["once", "skip"] {
        let s = schedule_of(&mq, name).await?;
        assert_eq!(s.next_at_ms, START_MS + 5 * period, "{name} goes on");
    }
    assert_eq!(schedule_of(&mq, "skip").await?.fired, 1);
    Ok(())
}

/// 21.4 Schedules are stored: after a restart they read back unchanged, and the ticks
/// that passed while nothing ran follow the policy (one message, or none); a cron
/// expression fires at its instant in its time zone.
pub async fn p21_4_schedules_survive_a_restart<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, QueueConfig::default()).await?;
    let period = 10 * MIN;
    once_and_skip(&mq, period).await?;
    // 09:30 in Kolkata (UTC+05:30) is 04:00Z: the first after START_MS
    // (2023-11-14T22:13:20Z) is 2023-11-15T04:00:00Z.
    let cron = mq
        .create_schedule(ScheduleSpec::new(
            "kolkata",
            Q,
            Recurrence::Cron {
                expr: "30 9 * * *".into(),
                tz: "Asia/Kolkata".into(),
            },
            OutMessage::new("namaste"),
        ))
        .await?;
    let morning = 1_700_020_800_000;
    assert_eq!(cron.next_at_ms, morning);
    let before = mq.list_schedules().await?;
    mq.close().await;

    ctx.clock.set(morning + 30_000);
    let mq = ctx.engine().await?;
    assert_eq!(mq.list_schedules().await?, before);
    assert_eq!(
        mq.fire_schedules().await?,
        2,
        "once's window and the cron tick"
    );
    // The last ten-minute tick before now is 03:53:20Z, seven minutes late: missed.
    let latest = START_MS + (morning + 30_000 - START_MS) / period * period;
    assert_eq!(morning - latest, 6 * MIN + 40_000);
    assert_eq!(
        ids(&mq, Q).await?,
        vec![format!("kolkata@{morning}"), format!("once@{latest}")]
    );
    assert_eq!(schedule_of(&mq, "skip").await?.next_at_ms, latest + period);
    assert_eq!(schedule_of(&mq, "skip").await?.fired, 0);
    assert_eq!(
        schedule_of(&mq, "kolkata").await?.next_at_ms,
        morning + 24 * 60 * MIN
    );
    Ok(())
}

/// 21.5 A schedule names an existing queue (`NotFound`; a topic is `InvalidArgument`),
/// a valid recurrence (an interval of at least a second, a cron expression, an IANA
/// zone) and a valid message; delete answers whether there was one, and deleting a
/// queue deletes its schedules.
pub async fn p21_5_schedules_are_checked_and_deleted<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, QueueConfig::default()).await?;
    mq.create_topic("t").await?;
    let on =
        |queue: &str, every: Recurrence| ScheduleSpec::new("s", queue, every, OutMessage::new("x"));
    let minute = Recurrence::Every(Duration::from_secs(60));
    let missing = mq.create_schedule(on("nope", minute.clone())).await;
    assert!(
        matches!(missing, Err(Error::NotFound { .. })),
        "{missing:?}"
    );
    let topic = mq.create_schedule(on("t", minute.clone())).await;
    assert!(matches!(topic, Err(Error::InvalidArgument(_))), "{topic:?}");
    for bad in [
        Recurrence::Every(Duration::from_millis(500)),
        Recurrence::Cron {
            expr: "every day".into(),
            tz: "UTC".into(),
        },
        Recurrence::Cron {
            expr: "0 2 * * *".into(),
            tz: "Europe/Atlantis".into(),
        },
    ] {
        let r = mq.create_schedule(on(Q, bad.clone())).await;
        assert!(
            matches!(r, Err(Error::InvalidArgument(_))),
            "{bad:?}: {r:?}"
        );
    }
    let too_big = ScheduleSpec::new("s", Q, minute.clone(), OutMessage::new(vec![0; 2 << 20]));
    let r = mq.create_schedule(too_big).await;
    assert!(matches!(r, Err(Error::MessageTooLarge { .. })), "{r:?}");
    assert!(mq.list_schedules().await?.is_empty(), "nothing stored");

    mq.create_schedule(on(Q, minute.clone())).await?;
    assert!(mq.delete_schedule("s").await?);
    assert!(!mq.delete_schedule("s").await?);
    mq.create_schedule(on(Q, minute)).await?;
    mq.delete_queue(Q).await?;
    assert!(mq.list_schedules().await?.is_empty());
    Ok(())
}

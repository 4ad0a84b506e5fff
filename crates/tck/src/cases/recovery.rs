//! Section 3: recovery and at-least-once.

use mqlite_contract::{Error, MessageState, OutMessage, REASON_MAX_DELIVERY};
use mqlite_engine::{EngineOptions, LeasesAtOpen};

use super::{config, peek_all, receive_one};
use crate::harness::{Access, Ctx, TckResult};

/// 3.1 Open reclaims every orphaned locked row under the reaper's rule: active, or
/// dead-lettered at the limit; a crash never buys an extra delivery.
pub async fn p3_1_open_reclaims_orphaned_leases<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine().await?;
    mq.create_queue("retry", config(60_000, 3)).await?;
    mq.create_queue("last", config(60_000, 1)).await?;
    let a = mq.send("retry", OutMessage::new("a")).await?;
    let b = mq.send("last", OutMessage::new("b")).await?;
    let held_a = receive_one(&mq, "retry").await?;
    let held_b = receive_one(&mq, "last").await?;
    // The process "dies" with both leases live: the rows stay locked in the data.
    mq.close().await;

    let mq = ctx.engine().await?;
    let retry = peek_all(&mq, "retry").await?;
    assert_eq!((retry[0].seq, retry[0].state), (a, MessageState::Active));
    assert_eq!(
        retry[0].delivery_count, 1,
        "no delivery counted by recovery"
    );
    let last = peek_all(&mq, "last").await?;
    assert_eq!(
        (last[0].seq, last[0].state),
        (b, MessageState::DeadLettered)
    );
    assert_eq!(
        last[0].dead_letter_reason.as_deref(),
        Some(REASON_MAX_DELIVERY)
    );
    // The orphaned tokens are fenced.
    assert!(matches!(
        mq.complete("retry", &held_a).await,
        Err(Error::LockLost { .. })
    ));
    assert!(matches!(
        mq.complete("last", &held_b).await,
        Err(Error::LockLost { .. })
    ));
    let again = receive_one(&mq, "retry").await?;
    assert_eq!((again.seq, again.delivery_count), (a, 2));
    Ok(())
}

/// 3.1 / 15.2 with [`LeasesAtOpen::Keep`] (the broker's policy): opening keeps each held
/// lease to its deadline. A lease already past it is reclaimed at open; a live one stays
/// locked, its token still settles, and when its deadline passes the reaper returns it.
pub async fn p3_1_open_keeps_leases_to_their_deadline_when_told<F: Access>(
    ctx: Ctx<F>,
) -> TckResult {
    let keep = || {
        ctx.engine_with(EngineOptions {
            background: false,
            leases_at_open: LeasesAtOpen::Keep,
            ..Default::default()
        })
    };
    let mq = ctx.engine().await?;
    mq.create_queue("short", config(1_000, 3)).await?;
    mq.create_queue("long", config(60_000, 3)).await?;
    mq.send("short", OutMessage::new("s")).await?;
    mq.send("long", OutMessage::new("l1")).await?;
    let l2 = mq.send("long", OutMessage::new("l2")).await?;
    let held_s = receive_one(&mq, "short").await?;
    let held_l1 = receive_one(&mq, "long").await?;
    let held_l2 = receive_one(&mq, "long").await?;
    mq.close().await;
    ctx.clock.advance(2_000);

    // Past its deadline: reclaimed at open, its token fenced.
    let mq = keep().await?;
    let short = peek_all(&mq, "short").await?;
    assert_eq!(short[0].state, MessageState::Active);
    assert!(matches!(
        mq.complete("short", &held_s).await,
        Err(Error::LockLost { .. })
    ));
    // Live: still locked to its holder, whose token settles.
    let long = peek_all(&mq, "long").await?;
    assert!(
        long.iter().all(|m| m.state == MessageState::Locked),
        "{long:?}"
    );
    assert!(
        mq.receive_one("long").await?.is_none(),
        "no second live lease"
    );
    mq.complete("long", &held_l1).await?;
    assert_eq!(peek_all(&mq, "long").await?.len(), 1);
    // At its deadline the reaper returns the other, counted once.
    ctx.clock.advance(60_000);
    mq.run_sweeps().await?;
    assert!(matches!(
        mq.complete("long", &held_l2).await,
        Err(Error::LockLost { .. })
    ));
    let again = receive_one(&mq, "long").await?;
    assert_eq!((again.seq, again.delivery_count), (l2, 2));
    Ok(())
}

//! Section 3: recovery and at-least-once.

use mqlite_engine_core::{Error, MessageState, OutMessage, REASON_MAX_DELIVERY};

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

//! Section 3 (3.2, 3.3): settlement receipts and receive attempts.

use mqlite_contract::{
    Error, LockRef, MessageState, OutMessage, RECEIPT_PRUNE_GRACE_MS, RECEIPT_TTL_MS, ReceiveMode,
    ReceiveOptions, from_millis,
};
use std::time::Duration;

use super::{config, peek_all, receive_one, send_n, state_of};
use crate::harness::{Access, Ctx, TckResult};

const Q: &str = "q";

/// 3.2 A retry of the identical settlement replays success; another verb with the same
/// token is LockLost.
pub async fn p3_2_identical_settle_replays_success<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, config(30_000, 10)).await?;
    send_n(&mq, Q, "m", 4).await?;
    let got = mq.receive(Q, ReceiveOptions::batch(4)).await?;
    mq.complete(Q, &got[0]).await?;
    mq.complete(Q, &got[0]).await?;
    assert!(matches!(
        mq.defer(Q, &got[0]).await,
        Err(Error::LockLost { .. })
    ));
    assert!(matches!(
        mq.abandon(Q, &got[0], Duration::ZERO).await,
        Err(Error::LockLost { .. })
    ));
    mq.defer(Q, &got[1]).await?;
    mq.defer(Q, &got[1]).await?;
    mq.abandon(Q, &got[2], from_millis(250)).await?;
    mq.abandon(Q, &got[2], from_millis(250)).await?;
    mq.reject(Q, &got[3], "Bad", "why").await?;
    mq.reject(Q, &got[3], "Bad", "why").await?;
    let batch = mq.complete_batch(Q, &[LockRef::from(&got[0])]).await?;
    assert_eq!(batch.len(), 1);
    assert!(batch[0].ok, "a batch item replays too");
    // Each settlement took effect once; the replays changed nothing.
    let all = peek_all(&mq, Q).await?;
    let states: Vec<_> = all.iter().map(|m| (m.seq, m.state)).collect();
    assert_eq!(
        states,
        vec![
            (got[1].seq, MessageState::Deferred),
            (got[2].seq, MessageState::Scheduled),
            (got[3].seq, MessageState::DeadLettered),
        ]
    );
    assert_eq!(
        (
            all[2].dead_letter_reason.as_deref(),
            all[2].dead_letter_description.as_deref()
        ),
        (Some("Bad"), Some("why"))
    );
    assert_eq!(all[1].delivery_count, 1, "abandoned once, not twice");
    Ok(())
}

/// 3.2 A receipt is keyed by the whole request: another message's sequence number, another
/// verb, another delay, another reason or description is LockLost.
pub async fn p3_2_receipt_is_keyed_by_the_whole_request<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, config(30_000, 10)).await?;
    send_n(&mq, Q, "m", 3).await?;
    let got = mq.receive(Q, ReceiveOptions::batch(3)).await?;
    mq.complete(Q, &got[0]).await?;
    let other_message = LockRef {
        seq: got[1].seq,
        token: got[0].token(),
    };
    assert!(matches!(
        mq.complete(Q, other_message).await,
        Err(Error::LockLost { .. })
    ));
    assert_eq!(
        state_of(&mq, Q, got[1].seq).await?,
        Some(MessageState::Locked)
    );
    mq.abandon(Q, &got[1], from_millis(1_000)).await?;
    assert!(matches!(
        mq.abandon(Q, &got[1], from_millis(2_000)).await,
        Err(Error::LockLost { .. })
    ));
    assert!(matches!(
        mq.abandon(Q, &got[1], Duration::ZERO).await,
        Err(Error::LockLost { .. })
    ));
    mq.reject(Q, &got[2], "R1", "D1").await?;
    assert!(matches!(
        mq.reject(Q, &got[2], "R2", "D1").await,
        Err(Error::LockLost { .. })
    ));
    assert!(matches!(
        mq.reject(Q, &got[2], "R1", "D2").await,
        Err(Error::LockLost { .. })
    ));
    assert!(matches!(
        mq.reject(Q, &got[2], "R1D", "1").await,
        Err(Error::LockLost { .. })
    ));
    mq.reject(Q, &got[2], "R1", "D1").await?;
    Ok(())
}

/// 3.2 An expired receipt never replays (expiry is checked at statement time, before any
/// janitor pass), and the janitor prunes it within the grace the contract allows.
pub async fn p3_2_expired_receipt_never_replays<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, config(30_000, 10)).await?;
    mq.send(Q, OutMessage::new("x")).await?;
    let m = receive_one(&mq, Q).await?;
    mq.complete(Q, &m).await?;
    ctx.clock.advance(RECEIPT_TTL_MS - 1);
    mq.complete(Q, &m).await?;
    ctx.clock.advance(1);
    assert!(matches!(
        mq.complete(Q, &m).await,
        Err(Error::LockLost { .. })
    ));
    ctx.clock.advance(RECEIPT_PRUNE_GRACE_MS);
    assert!(matches!(
        mq.complete(Q, &m).await,
        Err(Error::LockLost { .. })
    ));
    let report = mq.run_sweeps().await?;
    assert!(
        report.pruned >= 1,
        "the janitor prunes a receipt within RECEIPT_PRUNE_GRACE_MS of its expiry"
    );
    Ok(())
}

/// 3.2 A replay never grants a new effect or renews a lease.
pub async fn p3_2_replay_never_grants_a_new_effect<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, config(10_000, 10)).await?;
    let seq = mq.send(Q, OutMessage::new("x")).await?;
    let first = receive_one(&mq, Q).await?;
    mq.abandon(Q, &first, Duration::ZERO).await?;
    let second = receive_one(&mq, Q).await?;
    mq.abandon(Q, &first, Duration::ZERO).await?;
    let now = peek_all(&mq, Q).await?;
    assert_eq!(
        now[0].state,
        MessageState::Locked,
        "the replay did not abandon again"
    );
    assert_eq!(
        now[0].locked_until_ms, second.locked_until_ms,
        "the lease untouched"
    );
    assert!(
        now[0].lock_token.is_none(),
        "peek never reveals a lease's token"
    );
    assert!(matches!(
        mq.renew(Q, &first).await,
        Err(Error::LockLost { .. })
    ));
    mq.renew(Q, &second).await?;
    // After the original lease has lapsed, the replay still answers, and still does nothing.
    ctx.clock.advance(20_000);
    mq.abandon(Q, &first, Duration::ZERO).await?;
    assert_eq!(state_of(&mq, Q, seq).await?, Some(MessageState::Locked));
    assert!(matches!(
        mq.renew(Q, &second).await,
        Err(Error::LockLost { .. })
    ));
    Ok(())
}

/// 3.3 A Receive retried with the same attempt id replays the same messages with the same
/// tokens, without claiming anew or counting another delivery.
pub async fn p3_3_retried_receive_attempt_replays<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, config(30_000, 10)).await?;
    send_n(&mq, Q, "m", 5).await?;
    let opts = |id: &str, n, mode| ReceiveOptions {
        max_messages: n,
        attempt_id: Some(id.to_owned()),
        mode,
        ..Default::default()
    };
    let first = mq.receive(Q, opts("a1", 2, ReceiveMode::PeekLock)).await?;
    let again = mq.receive(Q, opts("a1", 2, ReceiveMode::PeekLock)).await?;
    assert_eq!(first, again, "same messages, same tokens");
    let counts: Vec<_> = peek_all(&mq, Q)
        .await?
        .iter()
        .map(|m| m.delivery_count)
        .collect();
    assert_eq!(
        counts,
        vec![1, 1, 0, 0, 0],
        "no delivery counted by the replay"
    );
    let other_mode = mq
        .receive(Q, opts("a1", 2, ReceiveMode::ReceiveAndDelete))
        .await;
    assert!(
        matches!(other_mode, Err(Error::InvalidArgument(_))),
        "an attempt id replays only the same kind of receive"
    );
    let rad = mq
        .receive(Q, opts("a2", 1, ReceiveMode::ReceiveAndDelete))
        .await?;
    let rad_again = mq
        .receive(Q, opts("a2", 1, ReceiveMode::ReceiveAndDelete))
        .await?;
    assert_eq!(
        rad, rad_again,
        "receive-and-delete replays its deleted message"
    );
    let fresh = mq.receive(Q, opts("a3", 5, ReceiveMode::PeekLock)).await?;
    assert_eq!(fresh.len(), 2, "another attempt claims anew");
    assert_eq!(mq.stats(Q).await?.total, 4);
    // Attempt records expire like receipts.
    ctx.clock.advance(RECEIPT_TTL_MS);
    mq.run_sweeps().await?;
    let late = mq.receive(Q, opts("a1", 2, ReceiveMode::PeekLock)).await?;
    assert_eq!(
        late.iter().map(|m| m.seq).collect::<Vec<_>>(),
        first.iter().map(|m| m.seq).collect::<Vec<_>>(),
        "an expired attempt claims anew: the reaped messages, oldest first"
    );
    for (l, f) in late.iter().zip(&first) {
        assert_ne!(l.token(), f.token(), "a fresh claim, not a replay");
        assert_eq!(l.delivery_count, 2, "the new claim counts a delivery");
    }
    // An attempt that found nothing claimed nothing: its retry (a long-poll's next look,
    // say) may claim what arrived since.
    mq.create_queue("later", config(30_000, 10)).await?;
    let none = mq
        .receive("later", opts("w", 1, ReceiveMode::PeekLock))
        .await?;
    assert!(none.is_empty());
    let seq = mq.send("later", OutMessage::new("arrived")).await?;
    let got = mq
        .receive("later", opts("w", 1, ReceiveMode::PeekLock))
        .await?;
    assert_eq!(got.iter().map(|m| m.seq).collect::<Vec<_>>(), vec![seq]);
    Ok(())
}

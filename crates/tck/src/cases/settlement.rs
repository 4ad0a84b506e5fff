//! Section 2: settlement, fenced on the lock token.

use mqlite_contract::{
    Error, LockRef, LockToken, MessageState, OutMessage, REASON_MAX_DELIVERY, ReceiveOptions,
    from_millis,
};
use std::time::Duration;

use super::{config, peek_all, receive_one, send_n, state_of};
use crate::harness::{Access, Ctx, TckResult};

const Q: &str = "q";

/// 2.1 Complete deletes the message.
pub async fn p2_1_complete_deletes<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, config(30_000, 10)).await?;
    let seqs = send_n(&mq, Q, "m", 2).await?;
    let m = receive_one(&mq, Q).await?;
    mq.complete(Q, &m).await?;
    assert_eq!(state_of(&mq, Q, m.seq).await?, None);
    let left: Vec<_> = peek_all(&mq, Q).await?.iter().map(|m| m.seq).collect();
    assert_eq!(left, vec![seqs[1]]);
    assert_eq!(mq.stats(Q).await?.total, 1);
    Ok(())
}

/// 2.2 Abandon returns the message to active; with a delay it parks in scheduled until
/// the delay lapses.
pub async fn p2_2_abandon_reactivates_or_parks_with_delay<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, config(30_000, 10)).await?;
    let seq = mq.send(Q, OutMessage::new("x")).await?;
    let m = receive_one(&mq, Q).await?;
    mq.abandon(Q, &m, Duration::ZERO).await?;
    assert_eq!(state_of(&mq, Q, seq).await?, Some(MessageState::Active));
    let m = receive_one(&mq, Q).await?;
    assert_eq!(m.delivery_count, 2);
    mq.abandon(Q, &m, from_millis(5_000)).await?;
    assert_eq!(state_of(&mq, Q, seq).await?, Some(MessageState::Scheduled));
    ctx.clock.advance(4_999);
    mq.run_sweeps().await?;
    assert!(mq.receive_one(Q).await?.is_none(), "parked for the delay");
    ctx.clock.advance(1);
    mq.run_sweeps().await?;
    let again = receive_one(&mq, Q).await?;
    assert_eq!((again.seq, again.delivery_count), (seq, 3));
    Ok(())
}

/// 2.2 Abandon at the delivery bound dead-letters the message.
pub async fn p2_2_abandon_at_the_bound_dead_letters<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, config(30_000, 2)).await?;
    let seq = mq.send(Q, OutMessage::new("x")).await?;
    let m = receive_one(&mq, Q).await?;
    mq.abandon(Q, &m, Duration::ZERO).await?;
    let m = receive_one(&mq, Q).await?;
    mq.abandon(Q, &m, from_millis(1_000)).await?;
    let all = peek_all(&mq, Q).await?;
    assert_eq!(all[0].seq, seq);
    assert_eq!(all[0].state, MessageState::DeadLettered);
    assert_eq!(
        all[0].dead_letter_reason.as_deref(),
        Some(REASON_MAX_DELIVERY)
    );
    Ok(())
}

/// 2.3 Reject dead-letters the message with the caller's reason and description.
pub async fn p2_3_reject_dead_letters_with_reason<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, config(30_000, 10)).await?;
    let seq = mq.send(Q, OutMessage::new("poison")).await?;
    let m = receive_one(&mq, Q).await?;
    mq.reject(Q, &m, "BadFormat", "field total is missing")
        .await?;
    let all = peek_all(&mq, Q).await?;
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].seq, seq);
    assert_eq!(all[0].state, MessageState::DeadLettered);
    assert_eq!(all[0].dead_letter_reason.as_deref(), Some("BadFormat"));
    assert_eq!(
        all[0].dead_letter_description.as_deref(),
        Some("field total is missing")
    );
    assert_eq!(all[0].body(), b"poison", "the body survives dead-lettering");
    assert!(mq.receive_one(Q).await?.is_none());
    Ok(())
}

/// 2.4 Defer sets the message aside; only ReceiveDeferred returns it, and the reaper
/// never reclaims it.
pub async fn p2_4_defer_sets_aside_until_receive_deferred<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, config(1_000, 10)).await?;
    let seq = mq.send(Q, OutMessage::new("later")).await?;
    let m = receive_one(&mq, Q).await?;
    mq.defer(Q, &m).await?;
    assert_eq!(state_of(&mq, Q, seq).await?, Some(MessageState::Deferred));
    ctx.clock.advance(3_600_000);
    mq.run_sweeps().await?;
    assert_eq!(
        state_of(&mq, Q, seq).await?,
        Some(MessageState::Deferred),
        "the reaper never touches deferred rows"
    );
    assert!(mq.receive_one(Q).await?.is_none(), "plain receive skips it");
    let got = mq.receive_deferred(Q, &[seq]).await?;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].state, MessageState::Locked);
    assert_eq!(got[0].delivery_count, 2);
    assert_ne!(got[0].token(), m.token());
    assert!(
        mq.receive_deferred(Q, &[seq]).await?.is_empty(),
        "now locked"
    );
    mq.complete(Q, &got[0]).await?;
    assert_eq!(state_of(&mq, Q, seq).await?, None);
    Ok(())
}

/// 2.5 Renew extends a live lease by the lock duration; it never revives an expired
/// lease and never shortens one.
pub async fn p2_5_renew_extends_never_revives_never_shortens<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, config(10_000, 10)).await?;
    mq.send(Q, OutMessage::new("x")).await?;
    let m = receive_one(&mq, Q).await?;
    ctx.clock.advance(4_000);
    let until = mq.renew(Q, &m).await?;
    assert_eq!(until, ctx.clock.now() + 10_000);
    // The queue's lock duration shrinks; a renewal still never shortens the lease.
    mq.update_queue(Q, config(1_000, 10)).await?;
    let until2 = mq.renew(Q, &m).await?;
    assert_eq!(until2, until, "never shortened");
    ctx.clock.advance(until - ctx.clock.now());
    assert!(
        matches!(mq.renew(Q, &m).await, Err(Error::LockLost { .. })),
        "never revived"
    );
    assert_eq!(state_of(&mq, Q, m.seq).await?, Some(MessageState::Locked));
    Ok(())
}

/// 2.6 A settlement with a token that is not the current one is LockLost and changes
/// nothing.
pub async fn p2_6_stale_token_is_lock_lost<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, config(30_000, 10)).await?;
    let seq = mq.send(Q, OutMessage::new("x")).await?;
    let m = receive_one(&mq, Q).await?;
    let forged = LockRef {
        seq,
        token: LockToken::random(),
    };
    assert!(matches!(
        mq.complete(Q, forged).await,
        Err(Error::LockLost { .. })
    ));
    assert!(matches!(
        mq.abandon(Q, forged, Duration::ZERO).await,
        Err(Error::LockLost { .. })
    ));
    assert!(matches!(
        mq.reject(Q, forged, "r", "d").await,
        Err(Error::LockLost { .. })
    ));
    assert!(matches!(
        mq.defer(Q, forged).await,
        Err(Error::LockLost { .. })
    ));
    assert!(matches!(
        mq.renew(Q, forged).await,
        Err(Error::LockLost { .. })
    ));
    let other_seq = LockRef {
        seq: mqlite_contract::SeqNumber(seq.0 + 1000),
        token: m.token(),
    };
    assert!(matches!(
        mq.complete(Q, other_seq).await,
        Err(Error::LockLost { .. })
    ));
    let all = peek_all(&mq, Q).await?;
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].state, MessageState::Locked, "nothing changed");
    assert_eq!(all[0].locked_until_ms, m.locked_until_ms);
    mq.complete(Q, &m).await?;
    // Settled already: the token is no longer current (and a different verb has no
    // receipt to replay).
    assert!(matches!(
        mq.abandon(Q, &m, Duration::ZERO).await,
        Err(Error::LockLost { .. })
    ));
    Ok(())
}

/// 2.6 The lease is checked at statement time: `locked_until == now` is already expired,
/// even before the reaper has run.
pub async fn p2_6_lease_deadline_equality_is_expired<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, config(5_000, 10)).await?;
    mq.send(Q, OutMessage::new("x")).await?;
    let m = receive_one(&mq, Q).await?;
    ctx.clock.advance(4_999);
    mq.renew(Q, &m).await?;
    let until = peek_all(&mq, Q).await?[0].locked_until_ms;
    ctx.clock.advance(until - ctx.clock.now());
    assert!(matches!(
        mq.complete(Q, &m).await,
        Err(Error::LockLost { .. })
    ));
    assert!(matches!(mq.defer(Q, &m).await, Err(Error::LockLost { .. })));
    assert_eq!(state_of(&mq, Q, m.seq).await?, Some(MessageState::Locked));
    Ok(())
}

/// 2.7 CompleteBatch settles many in one transaction with per-item fencing and
/// idempotency; a stale item reports ok = false, changes nothing and never fails the
/// batch.
pub async fn p2_7_complete_batch_fences_per_item<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, config(30_000, 10)).await?;
    let seqs = send_n(&mq, Q, "m", 4).await?;
    let fourth = seqs[3];
    let got = mq.receive(Q, ReceiveOptions::batch(3)).await?;
    assert_eq!(got.len(), 3);
    let stale = LockRef {
        seq: got[2].seq,
        token: LockToken::random(),
    };
    let items = [LockRef::from(&got[0]), LockRef::from(&got[1]), stale];
    let results = mq.complete_batch(Q, &items).await?;
    let oks: Vec<_> = results.iter().map(|r| (r.seq, r.ok)).collect();
    assert_eq!(
        oks,
        vec![(got[0].seq, true), (got[1].seq, true), (got[2].seq, false)]
    );
    let left: Vec<_> = peek_all(&mq, Q).await?.iter().map(|m| m.seq).collect();
    assert_eq!(left, vec![got[2].seq, fourth]);
    assert_eq!(
        state_of(&mq, Q, got[2].seq).await?,
        Some(MessageState::Locked),
        "the stale item changed nothing"
    );
    assert_eq!(state_of(&mq, Q, fourth).await?, Some(MessageState::Active));
    // The same batch again: the settled items replay, the stale one is still not ok.
    let again = mq.complete_batch(Q, &items).await?;
    assert_eq!(
        again.iter().map(|r| (r.seq, r.ok)).collect::<Vec<_>>(),
        oks,
        "per-item idempotency"
    );
    mq.complete(Q, &got[2]).await?;
    assert_eq!(state_of(&mq, Q, got[2].seq).await?, None);
    // Each token is checked against its own number: two live locks presented with
    // their tokens crossed complete neither.
    let pair = mq.receive(Q, ReceiveOptions::batch(1)).await?;
    let [fifth] = &send_n(&mq, Q, "m", 1).await?[..] else {
        panic!("one send, one number")
    };
    let more = mq.receive(Q, ReceiveOptions::batch(1)).await?;
    let (a, b) = (LockRef::from(&pair[0]), LockRef::from(&more[0]));
    assert_eq!((a.seq, b.seq), (fourth, *fifth));
    let crossed = [
        LockRef {
            seq: a.seq,
            token: b.token,
        },
        LockRef {
            seq: b.seq,
            token: a.token,
        },
    ];
    let results = mq.complete_batch(Q, &crossed).await?;
    assert!(
        results.iter().all(|r| !r.ok),
        "crossed tokens complete nothing: {results:?}"
    );
    assert_eq!(state_of(&mq, Q, a.seq).await?, Some(MessageState::Locked));
    assert_eq!(state_of(&mq, Q, b.seq).await?, Some(MessageState::Locked));
    mq.complete_batch(Q, &[a, b])
        .await?
        .iter()
        .for_each(|r| assert!(r.ok, "{r:?}"));
    Ok(())
}

/// 2.8 RenewBatch renews up to 512 leases with per-item fencing and reports each
/// committed locked_until; more than 512 is InvalidArgument.
pub async fn p2_8_renew_batch_fences_per_item_and_caps_at_512<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, config(10_000, 10)).await?;
    send_n(&mq, Q, "m", 3).await?;
    let got = mq.receive(Q, ReceiveOptions::batch(3)).await?;
    ctx.clock.advance(2_000);
    let stale = LockRef {
        seq: got[1].seq,
        token: LockToken::random(),
    };
    let items = [LockRef::from(&got[0]), stale, LockRef::from(&got[2])];
    let results = mq.renew_batch(Q, &items).await?;
    assert_eq!(results.len(), 3);
    assert!(results[0].ok && !results[1].ok && results[2].ok);
    assert_eq!(results[0].locked_until_ms, ctx.clock.now() + 10_000);
    assert_eq!(results[1].locked_until_ms, 0);
    assert_eq!(results[2].locked_until_ms, ctx.clock.now() + 10_000);
    let stored: Vec<_> = peek_all(&mq, Q).await?;
    assert_eq!(stored[0].locked_until_ms, results[0].locked_until_ms);
    assert_eq!(stored[2].locked_until_ms, results[2].locked_until_ms);
    assert_eq!(
        stored[1].locked_until_ms, got[1].locked_until_ms,
        "stale item unchanged"
    );
    // Fencing is per item: a forged token for a message another item renews is not ok.
    let forged_twin = LockRef {
        seq: got[0].seq,
        token: LockToken::random(),
    };
    let twins = mq
        .renew_batch(Q, &[LockRef::from(&got[0]), forged_twin])
        .await?;
    assert!(twins[0].ok && !twins[1].ok, "per-item fencing: {twins:?}");
    assert_eq!(twins[1].locked_until_ms, 0);
    let too_many = vec![LockRef::from(&got[0]); 513];
    assert!(matches!(
        mq.renew_batch(Q, &too_many).await,
        Err(Error::InvalidArgument(_))
    ));
    let at_cap = vec![LockRef::from(&got[0]); 512];
    let renewed = mq.renew_batch(Q, &at_cap).await?;
    assert_eq!(renewed.len(), 512);
    assert!(
        renewed.iter().all(|r| r.ok && r.seq == got[0].seq),
        "512 is within the cap: every item renewed"
    );
    Ok(())
}

/// 2.9 After redelivery the previous holder's token is fenced: its settle is LockLost and
/// the new holder's succeeds.
pub async fn p2_9_redelivery_fences_the_previous_holder<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, config(1_000, 10)).await?;
    mq.send(Q, OutMessage::new("x")).await?;
    let old = receive_one(&mq, Q).await?;
    ctx.clock.advance(1_000);
    mq.run_sweeps().await?;
    let new = receive_one(&mq, Q).await?;
    assert_eq!(new.seq, old.seq);
    assert!(matches!(
        mq.complete(Q, &old).await,
        Err(Error::LockLost { .. })
    ));
    assert!(matches!(
        mq.renew(Q, &old).await,
        Err(Error::LockLost { .. })
    ));
    mq.complete(Q, &new).await?;
    assert_eq!(state_of(&mq, Q, new.seq).await?, None);
    Ok(())
}

/// 2.6 LockLost says why, as far as the store can tell: the lease expired, the message
/// was delivered again under another token, it is no longer locked, it is gone, or it
/// is in another queue; batch items carry the same reason.
pub async fn p2_6_lock_lost_says_why<F: Access>(ctx: Ctx<F>) -> TckResult {
    use mqlite_contract::{LockLostReason as Why, LockRef};
    let mq = ctx.engine_with_queue(Q, config(1_000, 10)).await?;
    mq.create_queue("other", config(1_000, 10)).await?;
    let reason = |r: mqlite_contract::Result<()>| match r {
        Err(Error::LockLost { reason }) => Ok(reason),
        other => Err(format!("expected LockLost, got {other:?}")),
    };
    send_n(&mq, Q, "m", 2).await?;
    let first = receive_one(&mq, Q).await?;
    // A well-formed token that no receive handed out for this message (delivered once:
    // its token is the only one ever issued).
    let forged_text = if first.token().to_string() == "0123456789abcdef0123456789abcdef" {
        "fedcba9876543210fedcba9876543210"
    } else {
        "0123456789abcdef0123456789abcdef"
    };
    let forged = LockRef {
        seq: first.seq,
        token: forged_text.parse().map_err(|e| format!("{e}"))?,
    };
    assert_eq!(reason(mq.complete(Q, forged).await)?, Why::NotIssued);
    assert_eq!(reason(mq.complete("other", &first).await)?, Why::WrongQueue);
    ctx.clock.advance(1_000);
    assert_eq!(reason(mq.complete(Q, &first).await)?, Why::Expired);
    let renewed = mq.renew_batch(Q, &[LockRef::from(&first)]).await?;
    assert_eq!(renewed[0].lost, Some(Why::Expired));
    mq.run_sweeps().await?;
    assert_eq!(reason(mq.defer(Q, &first).await)?, Why::NotLocked);
    let again = mq
        .receive(Q, mqlite_contract::ReceiveOptions::batch(2))
        .await?;
    assert_eq!(again[0].seq, first.seq);
    assert_eq!(
        reason(mq.abandon(Q, &first, Duration::ZERO).await)?,
        Why::OtherToken
    );
    mq.complete(Q, &again[0]).await?;
    assert_eq!(
        reason(mq.reject(Q, &again[0], "late", "").await)?,
        Why::Gone
    );
    let batch = mq
        .complete_batch(Q, &[LockRef::from(&first), LockRef::from(&again[1])])
        .await?;
    assert_eq!((batch[0].ok, batch[0].lost), (false, Some(Why::Gone)));
    assert_eq!((batch[1].ok, batch[1].lost), (true, None));
    let text = Error::LockLost {
        reason: Why::Expired,
    }
    .to_string();
    assert!(
        text.contains("expired"),
        "the message names the cause: {text}"
    );
    Ok(())
}

/// 2.10 CompleteAndReceive: the completions' results are CompleteBatch's (a stale item
/// is ok = false), the claim in the same transaction sees the line a completion freed,
/// a claim that fails rolls the completions back, and no lock is a plain receive.
pub async fn p2_10_complete_and_receive_is_one_transaction<F: Access>(ctx: Ctx<F>) -> TckResult {
    let mq = ctx.engine_with_queue(Q, config(30_000, 10)).await?;
    let grouped = |body: &str| OutMessage::new(body.to_owned()).with_group("g");
    let first = mq.send(Q, grouped("g-1")).await?;
    let second = mq.send(Q, grouped("g-2")).await?;
    let loose = mq.send(Q, OutMessage::new("loose")).await?;
    let got = mq
        .receive(
            Q,
            ReceiveOptions {
                max_messages: 10,
                ..Default::default()
            },
        )
        .await?;
    let seqs: Vec<_> = got.iter().map(|m| m.seq).collect();
    assert_eq!(seqs, vec![first, loose], "g-2 waits behind its line's head");
    let stale = LockRef {
        seq: second,
        token: LockToken::random(),
    };
    let mut locks: Vec<LockRef> = got.iter().map(LockRef::from).collect();
    locks.push(stale);

    // A claim that fails (the attempt id was used with the other mode) rolls the
    // completions back: both messages are still locked under their tokens.
    let attempt = ReceiveOptions {
        attempt_id: Some("a-1".into()),
        ..Default::default()
    };
    mq.send(Q, OutMessage::new("taken by the attempt")).await?;
    mq.receive(
        Q,
        ReceiveOptions {
            mode: mqlite_contract::ReceiveMode::ReceiveAndDelete,
            ..attempt.clone()
        },
    )
    .await?;
    let refused = mq.complete_and_receive(Q, &locks, attempt).await;
    assert!(
        matches!(refused, Err(Error::InvalidArgument(_))),
        "{refused:?}"
    );
    assert_eq!(state_of(&mq, Q, first).await?, Some(MessageState::Locked));

    let (done, next) = mq
        .complete_and_receive(
            Q,
            &locks,
            ReceiveOptions {
                max_messages: 10,
                ..Default::default()
            },
        )
        .await?;
    let oks: Vec<_> = done.iter().map(|r| (r.seq, r.ok)).collect();
    assert_eq!(oks, vec![(first, true), (loose, true), (second, false)]);
    assert_eq!(next.iter().map(|m| m.seq).collect::<Vec<_>>(), vec![second]);
    assert_eq!(state_of(&mq, Q, first).await?, None);
    assert_eq!(state_of(&mq, Q, loose).await?, None);

    // No lock: a plain receive (the queue is empty now but for g-2, locked).
    let (none, nothing) = mq.complete_and_receive(Q, &[], Default::default()).await?;
    assert!(none.is_empty() && nothing.is_empty());
    let (last, empty) = mq
        .complete_and_receive(Q, &[LockRef::from(&next[0])], Default::default())
        .await?;
    assert!(
        last[0].ok && empty.is_empty(),
        "completed while the claim found nothing"
    );
    assert_eq!(mq.stats(Q).await?.total, 0);
    Ok(())
}

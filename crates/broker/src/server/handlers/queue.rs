//! The QueueService's RPCs: send, receive, settle, peek, stats.

use super::*;

/// Send and Schedule (which needs a time): one message, or a batch in one transaction.
pub(super) async fn send(mut c: Call<'_>) -> Result<Response, ApiError> {
    let mq = &c.s.engine;
    let r: SendRequest = c.request()?;
    if c.rpc == Rpc::Schedule && r.scheduled_enqueue_time_ms.is_none() {
        return Err(ApiError::invalid(
            "Schedule needs scheduled_enqueue_time_ms",
        ));
    }
    let options = send_options(&r)?;
    let messages = r
        .messages
        .into_iter()
        .map(WireMessage::into_out)
        .collect::<Result<Vec<_>, _>>()?;
    let seq_numbers = if messages.len() == 1 {
        let m = messages.into_iter().next().unwrap_or_default();
        vec![mq.send_with(&r.queue, m, options).await?.0]
    } else {
        mq.send_batch_with(&r.queue, messages, options)
            .await?
            .iter()
            .map(|slot| slot.seq().0)
            .collect()
    };
    ok(SendResponse { seq_numbers })
}

/// Receive: a claim within the answer cap, long-polling up to the wait; a shutdown
/// answers a parked poll with what it has.
pub(super) async fn receive(mut c: Call<'_>) -> Result<Response, ApiError> {
    let s = c.s;
    let r: ReceiveRequest = c.request()?;
    let options = ReceiveOptions {
        // The contract clamps: 0 takes one message, more than the bound the bound, and
        // a longer wait the longest.
        max_messages: clamped(
            "max_messages",
            r.max_messages.unwrap_or(1),
            1,
            MAX_RECEIVE_BATCH,
        )?,
        wait: span("wait_time_ms", r.wait_time_ms.unwrap_or(0))?.min(MAX_WAIT),
        mode: match r.receive_mode.unwrap_or(0) {
            0 => ReceiveMode::PeekLock,
            1 => ReceiveMode::ReceiveAndDelete,
            _ => {
                return Err(ApiError::invalid(
                    "receive_mode is 0 (peek-lock) or 1 (receive-and-delete)",
                ));
            }
        },
        attempt_id: r.receive_attempt_id.filter(|a| !a.is_empty()),
    };
    let mut draining = s.draining.clone();
    if *draining.borrow() {
        return Err(Error::Closed.into());
    }
    // A shutdown wakes a parked long-poll: it answers with what it has (none).
    let (messages, _shares) = tokio::select! {
        got = receive_capped(s, &r.queue, options) => match got {
            Err(Error::Closed) => Capped::default(),
            other => other?,
        },
        _ = draining.wait_for(|d| *d) => Capped::default(),
    };
    answer_messages(messages, false)
}

/// Complete, Abandon, Reject, Defer and Renew of one message under its lock.
pub(super) async fn settle(mut c: Call<'_>) -> Result<Response, ApiError> {
    let mq = &c.s.engine;
    let r: SettleRequest = c.request()?;
    let lock = LockItem {
        seq_number: r.seq_number,
        lock_token: r.lock_token.clone(),
    }
    .lock()?;
    let q = &r.queue;
    let mut locked_until_ms = 0;
    match c.rpc {
        Rpc::Complete => {
            mq.complete(q, lock).await?;
            c.s.prom.completed(q, 1);
        }
        Rpc::Abandon => mq.abandon(q, lock, span("delay_ms", r.delay_ms)?).await?,
        Rpc::Reject => {
            mq.reject(q, lock, &r.dead_letter_reason, &r.dead_letter_description)
                .await?
        }
        Rpc::Defer => mq.defer(q, lock).await?,
        _ => locked_until_ms = mq.renew(q, lock).await?,
    }
    ok(OkResponse {
        ok: true,
        locked_until_ms,
    })
}

/// CompleteBatch and RenewBatch: each item answered on its own.
pub(super) async fn settle_batch(mut c: Call<'_>) -> Result<Response, ApiError> {
    let mq = &c.s.engine;
    let r: BatchRequest = c.request()?;
    // An item whose token is not a lock token is answered not ok on its own, like a
    // stale one; the rest go to the store.
    let items: Vec<Option<LockRef>> = r.messages.iter().map(|i| i.lock().ok()).collect();
    let valid: Vec<LockRef> = items.iter().flatten().cloned().collect();
    let mut settled = if valid.is_empty() && !items.is_empty() {
        Vec::new()
    } else if c.rpc == Rpc::CompleteBatch {
        let done = mq.complete_batch(&r.queue, &valid).await?;
        let completed = done.iter().filter(|r| r.ok).count();
        c.s.prom.completed(&r.queue, completed as u64);
        done
    } else {
        mq.renew_batch(&r.queue, &valid).await?
    }
    .into_iter();
    let results = r
        .messages
        .iter()
        .zip(&items)
        .map(|(item, lock)| match lock {
            Some(_) => settled.next().map(BatchItem::from).unwrap_or_default(),
            None => BatchItem {
                seq_number: item.seq_number,
                ok: false,
                locked_until_ms: 0,
            },
        })
        .collect();
    ok(BatchResponse { results })
}

/// ReceiveDeferred: deferred messages by sequence number.
pub(super) async fn receive_deferred(mut c: Call<'_>) -> Result<Response, ApiError> {
    let s = c.s;
    let mq = &s.engine;
    let r: ReceiveDeferredRequest = c.request()?;
    let seqs: Vec<SeqNumber> = r.seq_numbers.iter().map(|s| SeqNumber(*s)).collect();
    let messages = mq.receive_deferred(&r.queue, &seqs).await?;
    answer_messages(messages, false)
}

/// Cancel: a scheduled message before it is due.
pub(super) async fn cancel(mut c: Call<'_>) -> Result<Response, ApiError> {
    let mq = &c.s.engine;
    let r: CancelRequest = c.request()?;
    let done = mq.cancel(&r.queue, SeqNumber(r.seq_number)).await?;
    ok(OkResponse {
        ok: done,
        locked_until_ms: 0,
    })
}

/// Peek: messages without locking them, page by page within the answer cap.
pub(super) async fn peek(mut c: Call<'_>) -> Result<Response, ApiError> {
    let s = c.s;
    let r: PeekRequest = c.request()?;
    let options = PeekOptions {
        from_seq: r.from_seq.map(SeqNumber),
        state: r
            .state
            .as_deref()
            .filter(|s| !s.is_empty())
            .map(str::parse::<MessageState>)
            .transpose()?,
        // The contract clamps: 0 is the default page of 32, more than the bound the bound.
        max: clamped("max", r.max.unwrap_or(0), 32, MAX_PEEK)?,
    };
    let (messages, _shares) = peek_capped(s, &r.queue, options).await?;
    answer_messages(messages, true)
}

/// Stats: a queue's counts by state.
pub(super) async fn stats(mut c: Call<'_>) -> Result<Response, ApiError> {
    let mq = &c.s.engine;
    let r: QueueRequest = c.request()?;
    let stats = mq.stats(&r.queue).await?;
    ok(StatsResponse::of(r.queue, stats))
}

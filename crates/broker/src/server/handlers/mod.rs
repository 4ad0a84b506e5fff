//! One handler per RPC, grouped by service (`queue`, `admin`, `auth`): each parses its
//! request, calls the engine and answers. [`dispatch`] is the table from RPC to
//! handler; it names every RPC, so one without a handler does not compile.

mod admin;
mod auth;
mod queue;

use super::*;

/// What a handler gets: the broker, the RPC, the request's body, who called, and
/// where to note the queue, topic or key the request names (for the access line).
pub(super) struct Call<'a> {
    pub(super) s: &'a Shared,
    pub(super) rpc: Rpc,
    pub(super) bytes: &'a [u8],
    pub(super) principal: &'a Principal,
    pub(super) target: &'a mut Option<String>,
}

impl Call<'_> {
    /// The request, parsed; notes the queue, topic or key it names for the access line.
    fn request<T: DeserializeOwned + Names>(&mut self) -> Result<T, ApiError> {
        let parsed: T = parse_body(self.bytes)?;
        *self.target = parsed.names().map(str::to_owned);
        Ok(parsed)
    }
}

/// The answer of Receive, ReceiveDeferred and Peek; `with_state` (Peek) adds each
/// message's state.
fn answer_messages(messages: Vec<Message>, with_state: bool) -> Result<Response, ApiError> {
    ok(MessagesResponse {
        messages: messages
            .into_iter()
            .map(|m| WireMessage::from_message(m, with_state))
            .collect(),
    })
}

/// Runs the handler of `c.rpc`.
pub(super) async fn dispatch(c: Call<'_>) -> Result<Response, ApiError> {
    match c.rpc {
        Rpc::Send | Rpc::Schedule => queue::send(c).await,
        Rpc::Receive => queue::receive(c).await,
        Rpc::Complete | Rpc::Abandon | Rpc::Reject | Rpc::Defer | Rpc::Renew => {
            queue::settle(c).await
        }
        Rpc::CompleteBatch | Rpc::RenewBatch => queue::settle_batch(c).await,
        Rpc::ReceiveDeferred => queue::receive_deferred(c).await,
        Rpc::Cancel => queue::cancel(c).await,
        Rpc::Peek => queue::peek(c).await,
        Rpc::Stats => queue::stats(c).await,
        Rpc::CreateQueue => admin::create_queue(c).await,
        Rpc::Subscribe => admin::subscribe(c).await,
        Rpc::ListSubscriptions => admin::list_subscriptions(c).await,
        Rpc::Unsubscribe => admin::unsubscribe(c).await,
        Rpc::DeleteQueue => admin::delete_queue(c).await,
        Rpc::TestFilter => admin::test_filter(c).await,
        Rpc::ListQueues => admin::list_queues(c).await,
        Rpc::Redrive => admin::redrive(c).await,
        Rpc::Purge => admin::purge(c).await,
        Rpc::SetQueueStatus => admin::set_queue_status(c).await,
        Rpc::CreateSchedule => admin::create_schedule(c).await,
        Rpc::ListSchedules => admin::list_schedules(c).await,
        Rpc::DeleteSchedule => admin::delete_schedule(c).await,
        Rpc::Status => admin::status(c).await,
        Rpc::CreateKey => auth::create_key(c).await,
        Rpc::ListKeys => auth::list_keys(c).await,
        Rpc::RevokeKey => auth::revoke_key(c).await,
        Rpc::WhoAmI => auth::who_am_i(c).await,
    }
}

/// Messages for an answer, with the shares of the memory budget they hold: kept until
/// the answer is serialized.
type Capped = (Vec<Message>, Vec<Share>);

/// Receives as [`mqlite::AnyEngine::receive`] does, within the answer cap: when
/// `max_messages` messages of the largest accepted size could pass it, in rounds that
/// each fit what is left of it (the first one waits, the others do not). A receive with
/// an attempt id is one claim (a replay must return the same messages), of at most
/// what fits.
async fn receive_capped(
    s: &Shared,
    queue: &str,
    mut options: ReceiveOptions,
) -> Result<Capped, Error> {
    let cap = s.memory.max_answer_bytes;
    let worst = worst_message(s.engine.options().max_message_bytes);
    let fits = |left: usize| u32::try_from(left / worst).unwrap_or(u32::MAX);
    let max = options.max_messages;
    if u64::from(max) * worst as u64 <= cap as u64 {
        let got = s.engine.receive(queue, options).await?;
        let share = s.budget.take(got.iter().map(answer_bytes).sum()).await;
        return Ok((got, vec![share]));
    }
    if options.attempt_id.is_some() {
        options.max_messages = fits(cap).clamp(1, max);
        let got = s.engine.receive(queue, options).await?;
        let share = s.budget.take(got.iter().map(answer_bytes).sum()).await;
        return Ok((got, vec![share]));
    }
    let mut out: Vec<Message> = Vec::new();
    let mut bytes = 0usize;
    let mut shares = Vec::new();
    loop {
        let taken = u32::try_from(out.len()).unwrap_or(u32::MAX);
        let round = fits(cap.saturating_sub(bytes))
            .min(max.saturating_sub(taken))
            .max(u32::from(out.is_empty()));
        if round == 0 {
            break;
        }
        let mut this = options.clone();
        this.max_messages = round;
        if !out.is_empty() {
            // Later rounds do not wait, and run only if their share is free now.
            this.wait = Duration::ZERO;
            match s.budget.try_take(round as usize * worst) {
                Some(share) => shares.push(share),
                None => break,
            }
        }
        let got = s.engine.receive(queue, this).await?;
        let got_bytes: usize = got.iter().map(answer_bytes).sum();
        if out.is_empty() {
            shares.push(s.budget.take(got_bytes).await);
        } else if let Some(share) = shares.last_mut() {
            // The round's worst case was taken; what it read is what it holds.
            share.shrink_to(got_bytes);
        }
        let full = got.len() == round as usize;
        bytes += got_bytes;
        out.extend(got);
        if !full || out.len() >= max as usize {
            break;
        }
    }
    Ok((out, shares))
}

/// Peeks as [`mqlite::AnyEngine::peek`] does, page by page, stopping before the answer
/// passes the cap (at least one message).
async fn peek_capped(s: &Shared, queue: &str, options: PeekOptions) -> Result<Capped, Error> {
    let cap = s.memory.max_answer_bytes;
    let worst = worst_message(s.engine.options().max_message_bytes);
    let page = u32::try_from(cap / worst).unwrap_or(u32::MAX).max(1);
    let mut out: Vec<Message> = Vec::new();
    let mut bytes = 0usize;
    let mut from = options.from_seq;
    let mut shares = Vec::new();
    while out.len() < options.max as usize {
        let want = page.min(options.max - u32::try_from(out.len()).unwrap_or(u32::MAX));
        let share = if out.is_empty() {
            Some(s.budget.take(want as usize * worst).await)
        } else {
            s.budget.try_take(want as usize * worst)
        };
        match share {
            Some(share) => shares.push(share),
            None => break,
        }
        let got = s
            .engine
            .peek(
                queue,
                PeekOptions {
                    from_seq: from,
                    state: options.state,
                    max: want,
                },
            )
            .await?;
        let full = got.len() == want as usize;
        if let Some(share) = shares.last_mut() {
            // The page's worst case was taken; what it read is what it holds.
            share.shrink_to(got.iter().map(answer_bytes).sum());
        }
        for m in got {
            let size = answer_bytes(&m);
            if !out.is_empty() && bytes + size > cap {
                return Ok((out, shares));
            }
            bytes += size;
            from = Some(SeqNumber(m.seq.0 + 1));
            out.push(m);
        }
        if !full {
            break;
        }
    }
    Ok((out, shares))
}

/// A request body as JSON: an empty body is `{}`, anything but an object is refused.
fn parse_body<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let bytes: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
        b"{}"
    } else {
        bytes
    };
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(ApiError::invalid("the request body must be a JSON object"));
    }
    serde_json::from_slice(bytes)
        .map_err(|e| ApiError::invalid(format!("the request body is not valid: {e}")))
}

fn ok<T: Serialize>(value: T) -> Result<Response, ApiError> {
    Ok(json_response(StatusCode::OK, &value))
}

fn count(name: &str, v: i64, max: u32) -> Result<u32, ApiError> {
    u32::try_from(v)
        .ok()
        .filter(|n| (1..=max).contains(n))
        .ok_or_else(|| ApiError::invalid(format!("{name} must be 1..={max}")))
}

/// A count the wire contract clamps rather than refuses: 0 means `zero_as`, more than
/// `max` means `max`; a negative count is refused.
fn clamped(name: &str, v: i64, zero_as: u32, max: u32) -> Result<u32, ApiError> {
    match non_negative(name, v)? {
        0 => Ok(zero_as),
        n => Ok(u32::try_from(n).unwrap_or(max).min(max)),
    }
}

fn non_negative(name: &str, v: i64) -> Result<u64, ApiError> {
    u64::try_from(v).map_err(|_| ApiError::invalid(format!("{name} must be >= 0")))
}

fn span(name: &str, ms: i64) -> Result<Duration, ApiError> {
    non_negative(name, ms).map(Duration::from_millis)
}

fn send_options(r: &SendRequest) -> Result<SendOptions, ApiError> {
    Ok(SendOptions {
        scheduled_at_ms: r.scheduled_enqueue_time_ms,
        ttl: r.ttl_ms.map(|t| span("ttl_ms", t)).transpose()?,
    })
}

fn queue_config(c: WireQueueConfig) -> Result<(QueueKind, QueueConfig), ApiError> {
    let kind: QueueKind = match c.kind.as_deref() {
        None | Some("") => QueueKind::Queue,
        Some(k) => k.parse()?,
    };
    let mut config = QueueConfig::default();
    if let Some(v) = c.lock_duration_ms {
        config.lock_duration = span("lock_duration_ms", v)?;
    }
    if let Some(v) = c.max_delivery_count {
        config.max_delivery_count = v;
    }
    if let Some(v) = c.default_ttl_ms {
        config.default_ttl = span("default_ttl_ms", v)?;
    }
    if let Some(v) = c.dead_letter_on_expire {
        config.dead_letter_on_expire = v;
    }
    if let Some(v) = c.dedup_window_ms {
        config.dedup_window = span("dedup_window_ms", v)?;
    }
    if let Some(v) = c.ordering_mode.as_deref().filter(|v| !v.is_empty()) {
        config.ordering_mode = v.parse::<OrderingMode>()?;
    }
    config.dlq_max_age_ms = c.dlq_max_age_ms.unwrap_or(0);
    config.dlq_max_count = c.dlq_max_count.unwrap_or(0);
    config.dlq_max_bytes = c.dlq_max_bytes.unwrap_or(0);
    config.dead_letter_target = c.dead_letter_target.filter(|t| !t.is_empty());
    config.require_message_id = c.require_message_id.unwrap_or(false);
    if let Some(v) = c.status.as_deref().filter(|v| !v.is_empty()) {
        config.status = v.parse()?;
    }
    Ok((kind, config))
}

/// The queue, topic or key a request names, for its access line.
trait Names {
    fn names(&self) -> Option<&str> {
        None
    }
}

/// `Names` for request types that name their target in a field.
macro_rules! names {
    ($($t:ty => $field:ident),* $(,)?) => {$(
        impl Names for $t {
            fn names(&self) -> Option<&str> {
                Some(&self.$field)
            }
        }
    )*};
}

names!(
    SendRequest => queue,
    ReceiveRequest => queue,
    SettleRequest => queue,
    BatchRequest => queue,
    ReceiveDeferredRequest => queue,
    CancelRequest => queue,
    PeekRequest => queue,
    QueueRequest => queue,
    RedriveRequest => queue,
    PurgeRequest => queue,
    CreateQueueRequest => name,
    SetQueueStatusRequest => name,
    CreateScheduleRequest => name,
    DeleteScheduleRequest => name,
    SubscribeRequest => topic,
    UnsubscribeRequest => topic,
    DeleteQueueRequest => name,
    RevokeKeyRequest => id,
);

impl Names for CreateKeyRequest {}
impl Names for ListKeysRequest {}
impl Names for TestFilterRequest {}

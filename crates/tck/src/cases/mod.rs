//! The cases, one module per section of the conformance spec, registered in [`all`].
//! Each case's `///` line states the promise it pins.

use mqlite_contract::{
    Message, MessageState, OutMessage, PeekOptions, QueueConfig, ReceiveMode, ReceiveOptions,
    Result, SeqNumber, Store, from_millis,
};
use mqlite_engine::Engine;

use crate::harness::{Access, Capability, Case};

pub mod access;
pub mod cancellation;
pub mod concurrency;
pub mod dead_letters;
pub mod dedup;
pub mod idempotency;
pub mod inbox;
pub mod integrity;
pub mod lifecycle;
pub mod model;
pub mod ordering;
pub mod outbox;
pub mod priority;
pub mod recovery;
pub mod retention;
pub mod schedules;
pub mod scheduling;
pub mod settlement;
pub mod status;
pub mod storage;
pub mod topics;
pub mod worker;

macro_rules! register {
    ($( $module:ident :: $case:ident $([$($cap:ident),*])? ),* $(,)?) => {
        /// The name of every case, in promise order.
        pub const NAMES: &[&str] = &[$(stringify!($case)),*];

        /// Every case, in promise order, with the capabilities it needs.
        pub fn all<F: Access>() -> Vec<Case<F>> {
            vec![$(
                Case {
                    name: stringify!($case),
                    needs: &[$($(Capability::$cap),*)?],
                    run: |ctx| Box::pin($module::$case(ctx)),
                }
            ),*]
        }
    };
}

register! {
    lifecycle::p1_1_receive_claims_oldest_eligible_with_fresh_token,
    lifecycle::p1_2_locked_message_is_invisible_until_settled_or_expired,
    lifecycle::p1_3_every_claim_counts_a_delivery,
    lifecycle::p1_4_reaper_reactivates_or_dead_letters_expired_leases,
    lifecycle::p1_4_background_reaper_follows_the_manual_clock,
    lifecycle::p1_5_claim_never_reclaims_an_expired_lease,
    lifecycle::p1_6_batch_receive_claims_oldest_n,
    lifecycle::p1_7_receive_and_delete_grants_no_lease,
    lifecycle::p1_7_receive_and_delete_drains_a_line_in_order,
    lifecycle::p1_8_long_poll_wakes_on_send,
    lifecycle::p1_8_long_poll_returns_empty_at_deadline,
    lifecycle::p1_8_long_poll_wakes_when_work_is_freed,
    lifecycle::p1_8_long_poll_wakes_when_a_timer_comes_due,
    settlement::p2_1_complete_deletes,
    settlement::p2_2_abandon_reactivates_or_parks_with_delay,
    settlement::p2_2_abandon_at_the_bound_dead_letters,
    settlement::p2_3_reject_dead_letters_with_reason,
    settlement::p2_4_defer_sets_aside_until_receive_deferred,
    settlement::p2_5_renew_extends_never_revives_never_shortens,
    settlement::p2_6_stale_token_is_lock_lost,
    settlement::p2_6_lease_deadline_equality_is_expired,
    settlement::p2_6_lock_lost_says_why,
    settlement::p2_7_complete_batch_fences_per_item,
    lifecycle::p2_7_complete_batch_takes_thousands,
    settlement::p2_8_renew_batch_fences_per_item_and_caps_at_512,
    settlement::p2_9_redelivery_fences_the_previous_holder,
    settlement::p2_10_complete_and_receive_is_one_transaction,
    recovery::p3_1_open_reclaims_orphaned_leases [Reopen],
    recovery::p3_1_open_keeps_leases_to_their_deadline_when_told [Reopen],
    idempotency::p3_2_identical_settle_replays_success,
    idempotency::p3_2_receipt_is_keyed_by_the_whole_request,
    idempotency::p3_2_expired_receipt_never_replays,
    idempotency::p3_2_replay_never_grants_a_new_effect,
    idempotency::p3_3_retried_receive_attempt_replays,
    integrity::p3_4_integrity_sweep,
    model::p3_4_store_matches_the_reference_model,
    dedup::p4_1_repeat_inside_window_collapses,
    dedup::p4_1_repeat_inside_one_batch_collapses,
    dedup::p4_2_single_send_conflict,
    dedup::p4_3_batch_conflict_slot_is_zero,
    dedup::p4_4_dedup_is_per_queue,
    dedup::p4_5_required_message_id_refuses_idless_sends,
    ordering::p5_1_standard_groups_are_fifo_and_parallel,
    ordering::p5_1_ordering_mode_changes_only_when_idle,
    ordering::p5_1_every_exit_from_play_releases_the_line,
    ordering::p5_1_a_batch_lines_up_behind_itself,
    ordering::p5_2_group_fifo_requires_a_group,
    ordering::p5_3_strict_fifo_one_in_flight,
    ordering::p5_4_line_survives_lease_expiry,
    ordering::p5_5_line_survives_backoff,
    ordering::p5_6_claim_behind_a_blocked_backlog,
    ordering::p5_6_claim_work_is_flat_in_the_backlog [WorkCounter],
    ordering::p5_7_scheduled_at_send_holds_its_line,
    ordering::p5_8_redrive_rejoins_its_line_by_sequence,
    ordering::p5_9_redrive_into_group_fifo_needs_a_group,
    dead_letters::p6_1_delivery_bound_dead_letters,
    dead_letters::p6_2_redrive_purge_and_peek,
    dead_letters::p6_2_redrive_to_target_queue,
    dead_letters::p6_2_redrive_selected_moves_only_those,
    dead_letters::p6_2_purge_every_state_empties_the_queue,
    dead_letters::p6_3_dead_letter_target_forwards,
    dead_letters::p6_2_redrive_rate_bounds_moves_per_second,
    scheduling::p7_1_scheduled_hidden_until_due_and_cancellable,
    scheduling::p7_2_ttl_dead_letters_or_discards,
    retention::p8_1_retention_drops_oldest_dead_letters_only,
    retention::p8_2_no_bound_keeps_every_dead_letter,
    retention::p8_3_queue_bound_resolves_against_engine_default,
    access::p9_3_access_keys_are_digests_and_revoke_at_once,
    storage::p10_1_second_open_is_db_locked [FileLock],
    storage::p10_6_a_deleted_or_replaced_file_refuses_writes [LocalFile],
    storage::p10_2_foreign_schema_token_is_refused [SchemaGuard],
    storage::p10_5_status_describes_the_store,
    topics::p11_1_filters_are_checked_at_subscribe,
    topics::p11_2_publish_copies_to_every_subscription,
    topics::p11_2_publish_routes_by_filter,
    topics::p11_3_filter_evaluation_fails_closed,
    topics::p11_4_publish_that_routes_nowhere_is_a_no_op,
    topics::p11_4_a_publish_no_filter_accepts_is_a_no_op,
    topics::p12_1_one_namespace_and_a_failed_creation_leaves_nothing,
    topics::p12_2_send_resolves_topic_then_queue,
    cancellation::p13_1_cancelled_before_running_executes_nothing,
    cancellation::p13_2_cancelled_while_waiting_for_the_writer_mutates_nothing,
    cancellation::p13_3_database_usable_after_a_cancellation_storm,
    cancellation::p13_4_cancelled_transaction_rolls_back,
    cancellation::p13_5_remote_statements_can_be_cancelled [RemoteCancel],
    concurrency::p14_1_exclusive_delivery_under_parallelism,
    concurrency::p14_2_fence_holds_under_parallel_settles,
    concurrency::p14_3_completed_message_is_never_redelivered [Reopen],
    concurrency::p14_3_sequence_numbers_never_repeat [Reopen],
    concurrency::p14_3_sequence_numbers_never_repeat_after_any_delete,
    concurrency::p14_4_every_message_is_eventually_completed,
    concurrency::p14_5_close_stops_admission_and_wakes_long_polls [Reopen],
    concurrency::p14_6_a_failing_call_leaves_its_neighbours_committed,
    outbox::p16_1_outbox_commits_both_or_neither,
    outbox::p16_2_native_handle_inside_the_transaction,
    inbox::p17_1_identity_survives_every_transport_attempt,
    inbox::p17_1_the_relay_marks_what_it_sent_and_refuses_conflicts,
    inbox::p17_2_each_consumer_applies_once,
    inbox::p17_3_marker_commits_with_the_effect,
    inbox::p17_4_same_identity_other_payload_is_conflict,
    worker::p18_1_a_hung_handler_is_dropped_at_its_maximum_runtime,
    worker::p18_1_only_a_handler_showing_progress_keeps_its_lease,
    status::p19_1_paused_sends_are_refused_and_store_nothing,
    status::p19_2_paused_receives_get_nothing_until_resume,
    status::p19_3_leases_held_across_a_pause_settle,
    status::p19_4_status_survives_restart_and_fits_the_kind [Reopen],
    priority::p20_1_higher_priority_first_oldest_within,
    priority::p20_2_a_line_keeps_sequence_order,
    priority::p20_3_priority_travels_and_is_bounded,
    priority::p20_4_claim_work_is_flat_across_priorities [WorkCounter],
    schedules::p21_1_each_tick_fires_one_message_naming_it,
    schedules::p21_2_a_tick_fires_once_from_its_guard,
    schedules::p21_3_a_refused_tick_waits_and_missed_windows_follow_the_policy,
    schedules::p21_4_schedules_survive_a_restart [Reopen],
    schedules::p21_5_schedules_are_checked_and_deleted,
}

/// The work pins' rule: a claim visits something, and the claim over the larger
/// backlog (`visits[1]`) at most a tenth more than over the smaller one (`visits[0]`).
pub fn assert_flat(visits: &[u64], backlogs: &str) {
    assert!(
        visits[0] > 0,
        "a claim that visits nothing: the counter reads nothing"
    );
    assert!(
        visits[1] <= visits[0] + visits[0] / 10,
        "claim work grew with the backlog: {visits:?} (visits {backlogs})"
    );
}

/// A queue configuration with this lock duration and delivery bound.
pub fn config(lock_ms: i64, max_delivery: i64) -> QueueConfig {
    QueueConfig {
        lock_duration: from_millis(lock_ms),
        max_delivery_count: max_delivery,
        ..Default::default()
    }
}

/// Sends `n` messages with bodies `"<prefix>-<i>"`; returns their sequence numbers.
pub async fn send_n<S: Store>(
    engine: &Engine<S>,
    queue: &str,
    prefix: &str,
    n: usize,
) -> Result<Vec<SeqNumber>> {
    let mut seqs = Vec::with_capacity(n);
    for i in 0..n {
        seqs.push(
            engine
                .send(queue, OutMessage::new(format!("{prefix}-{i}")))
                .await?,
        );
    }
    Ok(seqs)
}

/// One round of the space-reuse workload of G7 (the store tests that show deleted
/// messages give their space back): 2,000 unique bodies of 2 KiB sent in batches of
/// 500, then drained by receive-and-delete; returns how many were drained.
pub async fn space_reuse_round<S: Store>(
    engine: &Engine<S>,
    queue: &str,
    round: usize,
) -> Result<usize> {
    for chunk in 0..4 {
        let batch = (0..500)
            .map(|i| {
                // Unique bodies: the queue dedups by content inside its window.
                let mut body = format!("{round}/{chunk}/{i}/").into_bytes();
                body.resize(2048, b'a' + ((round + chunk + i) % 26) as u8);
                OutMessage::new(body)
            })
            .collect();
        engine.send_batch(queue, batch).await?;
    }
    let mut drained = 0;
    loop {
        let got = engine
            .receive(
                queue,
                ReceiveOptions {
                    max_messages: 256,
                    mode: ReceiveMode::ReceiveAndDelete,
                    ..Default::default()
                },
            )
            .await?;
        if got.is_empty() {
            return Ok(drained);
        }
        drained += got.len();
    }
}

/// Every message of a queue in any state (up to 1000).
pub async fn peek_all<S: Store>(engine: &Engine<S>, queue: &str) -> Result<Vec<Message>> {
    engine
        .peek(
            queue,
            PeekOptions {
                max: 1000,
                ..Default::default()
            },
        )
        .await
}

/// The state of one message, or None when it is gone.
pub async fn state_of<S: Store>(
    engine: &Engine<S>,
    queue: &str,
    seq: SeqNumber,
) -> Result<Option<MessageState>> {
    let found = engine
        .peek(
            queue,
            PeekOptions {
                from_seq: Some(seq),
                state: None,
                max: 1,
            },
        )
        .await?;
    Ok(found.into_iter().find(|m| m.seq == seq).map(|m| m.state))
}

/// Receives exactly one message or fails the case.
pub async fn receive_one<S: Store>(engine: &Engine<S>, queue: &str) -> Result<Message> {
    engine
        .receive_one(queue)
        .await?
        .ok_or_else(|| mqlite_contract::Error::invalid("expected a message, got none"))
}

/// Starts a receive on `queue` that long-polls up to 20 s and returns its task once it
/// is parked (nothing eligible yet): only a wake-up, or close, can end it while the
/// manual clock stands still.
pub async fn parked_receiver<S: Store>(
    mq: &Engine<S>,
    queue: &str,
) -> std::result::Result<tokio::task::JoinHandle<Result<Vec<Message>>>, Box<dyn std::error::Error>>
{
    let waiter = {
        let (mq, queue) = (mq.clone(), queue.to_owned());
        tokio::spawn(async move {
            mq.receive(
                &queue,
                mqlite_contract::ReceiveOptions {
                    wait: from_millis(20_000),
                    ..Default::default()
                },
            )
            .await
        })
    };
    mq.long_poll_waiters().wait_for(|n| *n >= 1).await?;
    Ok(waiter)
}

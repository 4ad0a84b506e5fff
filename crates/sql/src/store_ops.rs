//! The `Store` methods every SQL store implements alike: each runs one shared flow in
//! one transaction of the store's own `sql_tx`, which is all a SQL store supplies.

/// Expands to the impls of the four concern traits (`MessageOps`, `AdminOps`, `KeyOps`,
/// `TopicOps`) for `$store`, each operation one shared flow: a send runs the store's
/// own `fn sql_enqueue(&self, queue, messages, options)` (which may merge sends; most
/// run [`enqueue`](crate::enqueue::enqueue) through `sql_tx_growing`), a receive its
/// `fn sql_claim(&self, queue, spec)` and a settlement of one lock its
/// `fn sql_settle(&self, queue, lock, settlement)` (which may merge receives and
/// completions; most run [`claim`](crate::claim::claim) and
/// [`settle`](crate::settle::settle) through `sql_tx_sized`); `$store` has
/// `fn sql_tx_sized(&self, items, f) -> impl Future<Output = Result<R>> + Send` running `f(&mut exec, now)` in one transaction. `items` says how much the call
/// carries (messages, locks; [`LONG`](crate::LONG) for a scan whose length the
/// caller does not bound), so a local store can keep long work off the caller's
/// thread. The flows that add messages (send, publish) go through `sql_tx_growing`
/// instead, with the same shape, so a store can refuse them while its disk is full and
/// keep the rest working. `Store` itself (`backend`, `clock`, `ownership`, `work`,
/// `status` and `close`) stays with the store.
#[macro_export]
macro_rules! store_ops {
    ($store:ty) => {
        impl $crate::core::MessageOps for $store {
            fn enqueue(
                &self,
                queue: String,
                messages: Vec<$crate::core::OutMessage>,
                options: $crate::core::SendOptions,
            ) -> impl ::std::future::Future<Output = $crate::core::Result<Vec<$crate::core::EnqueueSlot>>> + Send {
                self.sql_enqueue(queue, messages, options)
            }

            fn claim(
                &self,
                queue: String,
                spec: $crate::core::ClaimSpec,
            ) -> impl ::std::future::Future<Output = $crate::core::Result<Vec<$crate::core::Message>>> + Send {
                self.sql_claim(queue, spec)
            }

            fn settle(
                &self,
                queue: String,
                lock: $crate::core::LockRef,
                settlement: $crate::core::Settlement,
            ) -> impl ::std::future::Future<Output = $crate::core::Result<()>> + Send {
                self.sql_settle(queue, lock, settlement)
            }

            fn complete_batch(
                &self,
                queue: String,
                locks: Vec<$crate::core::LockRef>,
            ) -> impl ::std::future::Future<Output = $crate::core::Result<Vec<$crate::core::BatchResult>>> + Send {
                self.sql_tx_sized(locks.len(), async move |x, now| $crate::settle::complete_batch(x, now, &queue, &locks).await)
            }

            fn complete_and_claim(
                &self,
                queue: String,
                locks: Vec<$crate::core::LockRef>,
                spec: $crate::core::ClaimSpec,
            ) -> impl ::std::future::Future<Output = $crate::core::Result<(Vec<$crate::core::BatchResult>, Vec<$crate::core::Message>)>> + Send {
                let items = locks.len() + spec.max_messages as usize;
                self.sql_tx_sized(items, async move |x, now| {
                    // The completions are not the flow's end: the claim follows them.
                    let done = $crate::settle::complete_batch(&mut $crate::exec::NotLast(&mut *x), now, &queue, &locks).await?;
                    let got = $crate::claim::claim(x, now, &queue, &spec).await?;
                    Ok((done, got))
                })
            }

            fn renew_batch(
                &self,
                queue: String,
                locks: Vec<$crate::core::LockRef>,
            ) -> impl ::std::future::Future<Output = $crate::core::Result<Vec<$crate::core::BatchResult>>> + Send {
                self.sql_tx_sized(locks.len(), async move |x, now| $crate::settle::renew_batch(x, now, &queue, &locks).await)
            }

            fn receive_deferred(
                &self,
                queue: String,
                seqs: Vec<$crate::core::SeqNumber>,
            ) -> impl ::std::future::Future<Output = $crate::core::Result<Vec<$crate::core::Message>>> + Send {
                self.sql_tx_sized(seqs.len(), async move |x, now| $crate::claim::receive_deferred(x, now, &queue, &seqs).await)
            }

            fn cancel(&self, queue: String, seq: $crate::core::SeqNumber) -> impl ::std::future::Future<Output = $crate::core::Result<bool>> + Send {
                self.sql_tx_sized(1, async move |x, _| $crate::admin::cancel(x, &queue, seq).await)
            }
        }

        impl $crate::core::AdminOps for $store {
            fn upsert_queue(
                &self,
                name: String,
                kind: $crate::core::QueueKind,
                config: $crate::core::QueueConfig,
                update_only: bool,
            ) -> impl ::std::future::Future<Output = $crate::core::Result<()>> + Send {
                self.sql_tx_sized(1, async move |x, now| {
                    $crate::admin::upsert_queue(x, now, &name, kind, &config, update_only).await
                })
            }

            fn delete_queue(&self, name: String) -> impl ::std::future::Future<Output = $crate::core::Result<bool>> + Send {
                self.sql_tx_sized($crate::LONG, async move |x, _| $crate::admin::delete_queue(x, &name).await)
            }

            fn list_queues(&self) -> impl ::std::future::Future<Output = $crate::core::Result<Vec<$crate::core::QueueInfo>>> + Send {
                self.sql_tx_sized($crate::LONG, async move |x, _| $crate::admin::list_queues(x).await)
            }

            fn peek(
                &self,
                queue: String,
                options: $crate::core::PeekOptions,
            ) -> impl ::std::future::Future<Output = $crate::core::Result<Vec<$crate::core::Message>>> + Send {
                self.sql_tx_sized(options.max as usize, async move |x, _| $crate::admin::peek(x, &queue, &options).await)
            }

            fn stats(&self, queue: String) -> impl ::std::future::Future<Output = $crate::core::Result<$crate::core::QueueStats>> + Send {
                self.sql_tx_sized($crate::LONG, async move |x, now| $crate::admin::stats(x, now, &queue).await)
            }

            fn redrive(
                &self,
                queue: String,
                options: $crate::core::RedriveOptions,
            ) -> impl ::std::future::Future<Output = $crate::core::Result<u64>> + Send {
                self.sql_tx_sized($crate::LONG, async move |x, now| $crate::admin::redrive(x, now, &queue, &options).await)
            }

            fn purge(
                &self,
                queue: String,
                options: $crate::core::PurgeOptions,
            ) -> impl ::std::future::Future<Output = $crate::core::Result<u64>> + Send {
                self.sql_tx_sized($crate::LONG, async move |x, now| $crate::admin::purge(x, now, &queue, &options).await)
            }

            fn recover(&self, task: $crate::core::RecoverTask) -> impl ::std::future::Future<Output = $crate::core::Result<u64>> + Send {
                self.sql_tx_sized($crate::LONG, async move |x, now| $crate::sweeps::recover(x, now, task).await)
            }

            fn put_schedule(
                &self,
                spec: $crate::core::ScheduleSpec,
                next_at_ms: i64,
            ) -> impl ::std::future::Future<Output = $crate::core::Result<$crate::core::Schedule>> + Send {
                self.sql_tx_sized(1, async move |x, now| $crate::schedules::put_schedule(x, now, &spec, next_at_ms).await)
            }

            fn list_schedules(&self) -> impl ::std::future::Future<Output = $crate::core::Result<Vec<$crate::core::Schedule>>> + Send {
                self.sql_tx_sized($crate::LONG, async move |x, _| $crate::schedules::list_schedules(x).await)
            }

            fn delete_schedule(&self, name: String) -> impl ::std::future::Future<Output = $crate::core::Result<bool>> + Send {
                self.sql_tx_sized(1, async move |x, _| $crate::schedules::delete_schedule(x, &name).await)
            }

            fn fire_schedule(&self, fire: $crate::core::ScheduleFire) -> impl ::std::future::Future<Output = $crate::core::Result<bool>> + Send {
                self.sql_tx_growing(1, async move |x, now| $crate::schedules::fire_schedule(x, now, fire).await)
            }
        }

        impl $crate::core::KeyOps for $store {
            fn create_key(&self, key: $crate::core::AccessKey) -> impl ::std::future::Future<Output = $crate::core::Result<()>> + Send {
                self.sql_tx_sized(1, async move |x, _| $crate::keys::create_key(x, &key).await)
            }

            fn list_keys(
                &self,
                after_id: Option<String>,
                limit: u32,
            ) -> impl ::std::future::Future<Output = $crate::core::Result<Vec<$crate::core::AccessKey>>> + Send {
                self.sql_tx_sized(limit as usize, async move |x, _| $crate::keys::list_keys(x, after_id.as_deref(), limit).await)
            }

            fn revoke_key(&self, id: String) -> impl ::std::future::Future<Output = $crate::core::Result<bool>> + Send {
                self.sql_tx_sized(1, async move |x, now| $crate::keys::revoke_key(x, now, &id).await)
            }

            fn key_by_digest(
                &self,
                digest: String,
            ) -> impl ::std::future::Future<Output = $crate::core::Result<Option<$crate::core::AccessKey>>> + Send {
                self.sql_tx_sized(1, async move |x, _| $crate::keys::key_by_digest(x, &digest).await)
            }
        }

        impl $crate::core::TopicOps for $store {
            fn upsert_subscription(
                &self,
                subscription: $crate::core::Subscription,
                config: $crate::core::QueueConfig,
            ) -> impl ::std::future::Future<Output = $crate::core::Result<()>> + Send {
                self.sql_tx_sized(1, async move |x, now| {
                    $crate::topics::upsert_subscription(x, now, &subscription, &config).await
                })
            }

            fn list_subscriptions(
                &self,
                topic: Option<String>,
            ) -> impl ::std::future::Future<Output = $crate::core::Result<Vec<$crate::core::Subscription>>> + Send {
                self.sql_tx_sized($crate::LONG, async move |x, _| $crate::topics::list_subscriptions(x, topic.as_deref()).await)
            }

            fn publish(
                &self,
                topic: String,
                routes: Vec<$crate::core::Route>,
                options: $crate::core::SendOptions,
            ) -> impl ::std::future::Future<Output = $crate::core::Result<Vec<Vec<$crate::core::EnqueueSlot>>>> + Send {
                self.sql_tx_growing(routes.len(), async move |x, now| $crate::topics::publish(x, now, &topic, routes, options).await)
            }
        }
    };
}

/// Expands, inside `impl StoreTx for T`, to `enqueue`, `now_ms` and the side-table
/// methods: `T` has a field `now` and `async fn flow<R>(&mut self, op) -> Result<R>`
/// that checks cancellation and runs `op(&mut exec)` in the application's transaction.
#[macro_export]
macro_rules! side_tx_ops {
    () => {
        async fn enqueue(
            &mut self,
            queue: &str,
            messages: Vec<$crate::core::OutMessage>,
            options: $crate::core::SendOptions,
        ) -> $crate::core::Result<Vec<$crate::core::EnqueueSlot>> {
            let now = self.now;
            self.flow(async |x| {
                $crate::enqueue::enqueue(x, now, queue, messages, options, false).await
            })
            .await
        }

        fn now_ms(&self) -> i64 {
            self.now
        }

        async fn inbox_markers(
            &mut self,
            source: &str,
            id: &str,
        ) -> $crate::core::Result<Vec<$crate::core::InboxMarker>> {
            self.flow(async |x| $crate::side_tables::inbox_markers(x, source, id).await)
                .await
        }

        async fn inbox_insert(
            &mut self,
            marker: &$crate::core::InboxMarker,
        ) -> $crate::core::Result<()> {
            self.flow(async |x| $crate::side_tables::inbox_insert(x, marker).await)
                .await
        }

        async fn relay_insert(
            &mut self,
            queue: &str,
            message: &$crate::core::OutMessage,
        ) -> $crate::core::Result<i64> {
            let now = self.now;
            self.flow(async |x| $crate::side_tables::relay_insert(x, now, queue, message).await)
                .await
        }

        async fn relay_pending(
            &mut self,
            limit: usize,
        ) -> $crate::core::Result<Vec<$crate::core::RelayIntent>> {
            self.flow(async |x| $crate::side_tables::relay_pending(x, limit).await)
                .await
        }

        async fn relay_mark(&mut self, seqs: &[i64]) -> $crate::core::Result<u64> {
            let now = self.now;
            self.flow(async |x| $crate::side_tables::relay_mark(x, now, seqs).await)
                .await
        }

        async fn relay_refuse(&mut self, seqs: &[i64]) -> $crate::core::Result<u64> {
            let now = self.now;
            self.flow(async |x| $crate::side_tables::relay_refuse(x, now, seqs).await)
                .await
        }

        async fn relay_find(
            &mut self,
            source: &str,
            id: &str,
        ) -> $crate::core::Result<Vec<$crate::core::RelayIntent>> {
            self.flow(async |x| $crate::side_tables::relay_find(x, source, id).await)
                .await
        }

        async fn relay_backlog(&mut self) -> $crate::core::Result<$crate::core::RelayBacklog> {
            self.flow(async |x| $crate::side_tables::relay_backlog(x).await)
                .await
        }

        async fn side_sweep(
            &mut self,
            markers_before: i64,
            intents_before: i64,
        ) -> $crate::core::Result<$crate::core::SideSweep> {
            self.flow(async |x| $crate::side_tables::sweep(x, markers_before, intents_before).await)
                .await
        }

        async fn find_sent(
            &mut self,
            queue: &str,
            key: &str,
        ) -> $crate::core::Result<$crate::core::SentEvidence> {
            self.flow(async |x| $crate::side_tables::find_sent(x, queue, key).await)
                .await
        }
    };
}

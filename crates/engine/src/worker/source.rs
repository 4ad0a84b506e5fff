//! Where a worker takes messages from and settles them: the calls the worker makes,
//! so the same worker runs over the embedded engine and over a broker (the facade's
//! `mqlite::remote::Client`).

use std::future::Future;
use std::time::Duration;

use crate::engine::Engine;
use mqlite_contract::clock::SharedClock;
use mqlite_contract::error::Result;
use mqlite_contract::store::Store;
use mqlite_contract::types::{BatchResult, LockRef, Message, ReceiveOptions};

/// What a [`Worker`](super::Worker) consumes: receive, the settlements and renewals,
/// and the clock its waits read. Clones share one connection (an engine's clones share
/// its store). Each call means what the engine's method of the same name means.
pub trait Source: Clone + Send + Sync + 'static {
    /// The clock the worker's renewals and grace period read.
    fn clock(&self) -> &SharedClock;

    /// [`Engine::receive`].
    fn receive(
        &self,
        queue: &str,
        options: ReceiveOptions,
    ) -> impl Future<Output = Result<Vec<Message>>> + Send;

    /// [`Engine::complete`].
    fn complete(&self, queue: &str, lock: LockRef) -> impl Future<Output = Result<()>> + Send;

    /// [`Engine::complete_batch`].
    fn complete_batch(
        &self,
        queue: &str,
        locks: &[LockRef],
    ) -> impl Future<Output = Result<Vec<BatchResult>>> + Send;

    /// [`Engine::complete_and_receive`]: one transaction where the engine has it.
    fn complete_and_receive(
        &self,
        queue: &str,
        completed: &[LockRef],
        options: ReceiveOptions,
    ) -> impl Future<Output = Result<(Vec<BatchResult>, Vec<Message>)>> + Send;

    /// [`Engine::renew`]: the lease's new end.
    fn renew(&self, queue: &str, lock: LockRef) -> impl Future<Output = Result<i64>> + Send;

    /// [`Engine::renew_batch`].
    fn renew_batch(
        &self,
        queue: &str,
        locks: &[LockRef],
    ) -> impl Future<Output = Result<Vec<BatchResult>>> + Send;

    /// [`Engine::abandon`].
    fn abandon(
        &self,
        queue: &str,
        lock: LockRef,
        delay: Duration,
    ) -> impl Future<Output = Result<()>> + Send;

    /// [`Engine::reject`].
    fn reject(
        &self,
        queue: &str,
        lock: LockRef,
        reason: &str,
        description: &str,
    ) -> impl Future<Output = Result<()>> + Send;
}

/// Implements [`Source`] for a type whose inherent methods of the same names and
/// signatures are the calls: `source_by_inherent_methods!([S: Store] Engine<S>)`, or
/// `source_by_inherent_methods!([] Client)` for a type without generics.
#[macro_export]
macro_rules! source_by_inherent_methods {
    ([$($generics:tt)*] $ty:ty) => {
        impl<$($generics)*> $crate::worker::Source for $ty {
            fn clock(&self) -> &$crate::__contract::SharedClock {
                <$ty>::clock(self)
            }

            fn receive(
                &self,
                queue: &str,
                options: $crate::__contract::ReceiveOptions,
            ) -> impl ::std::future::Future<
                Output = $crate::__contract::Result<Vec<$crate::__contract::Message>>,
            > + Send {
                <$ty>::receive(self, queue, options)
            }

            fn complete(
                &self,
                queue: &str,
                lock: $crate::__contract::LockRef,
            ) -> impl ::std::future::Future<Output = $crate::__contract::Result<()>> + Send {
                <$ty>::complete(self, queue, lock)
            }

            fn complete_batch(
                &self,
                queue: &str,
                locks: &[$crate::__contract::LockRef],
            ) -> impl ::std::future::Future<
                Output = $crate::__contract::Result<Vec<$crate::__contract::BatchResult>>,
            > + Send {
                <$ty>::complete_batch(self, queue, locks)
            }

            fn complete_and_receive(
                &self,
                queue: &str,
                completed: &[$crate::__contract::LockRef],
                options: $crate::__contract::ReceiveOptions,
            ) -> impl ::std::future::Future<
                Output = $crate::__contract::Result<(
                    Vec<$crate::__contract::BatchResult>,
                    Vec<$crate::__contract::Message>,
                )>,
            > + Send {
                <$ty>::complete_and_receive(self, queue, completed, options)
            }

            fn renew(
                &self,
                queue: &str,
                lock: $crate::__contract::LockRef,
            ) -> impl ::std::future::Future<Output = $crate::__contract::Result<i64>> + Send {
                <$ty>::renew(self, queue, lock)
            }

            fn renew_batch(
                &self,
                queue: &str,
                locks: &[$crate::__contract::LockRef],
            ) -> impl ::std::future::Future<
                Output = $crate::__contract::Result<Vec<$crate::__contract::BatchResult>>,
            > + Send {
                <$ty>::renew_batch(self, queue, locks)
            }

            fn abandon(
                &self,
                queue: &str,
                lock: $crate::__contract::LockRef,
                delay: ::std::time::Duration,
            ) -> impl ::std::future::Future<Output = $crate::__contract::Result<()>> + Send {
                <$ty>::abandon(self, queue, lock, delay)
            }

            fn reject(
                &self,
                queue: &str,
                lock: $crate::__contract::LockRef,
                reason: &str,
                description: &str,
            ) -> impl ::std::future::Future<Output = $crate::__contract::Result<()>> + Send {
                <$ty>::reject(self, queue, lock, reason, description)
            }
        }
    };
}

crate::source_by_inherent_methods!([S: Store] Engine<S>);

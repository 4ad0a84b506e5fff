//! The run-time store: [`DynStore`] holds any [`Store`] behind one pointer, so a program
//! can pick its backend from a URL (see the facade's registry) and still run every
//! operation through `Engine<DynStore>`.
//!
//! The erasure is written once: `concerns!` takes each concern trait's signatures
//! (the `ops` module) and writes the trait, its object-safe mirror with every future
//! boxed (one box per call, the cost `async-trait` would add, without a proc-macro
//! dependency), the mirror's impl for every store and the trait's impl for `DynStore`.
//! The few methods of [`Store`] itself are erased here by hand. The outbox
//! ([`OutboxStore::in_tx`] is generic, so it cannot be erased) stays reachable:
//! [`HasOutbox`] downcasts to the concrete store the caller names.

use std::any::Any;
use std::future::Future;

use crate::clock::{BoxFuture, SharedClock};
use crate::error::{Error, Result};
use crate::ops::ErasedOps;
use crate::store::{HasOutbox, OutboxStore, Ownership, Store, StoreStatus, WorkStats};

/// Declares the store's concern traits from one list of signatures, and their erasure:
/// each trait (native `impl Future` methods, `Send + Sync + 'static`), its impl for
/// [`DynStore`], and `ErasedOps`, the object-safe mirror of them all (every future
/// boxed) with its impl for every type that implements every concern.
macro_rules! concerns {
    ($(
        $(#[$tmeta:meta])*
        pub trait $trait:ident {
            $(
                $(#[$meta:meta])*
                fn $name:ident(&self $(, $arg:ident: $ty:ty)* $(,)?) -> $ret:ty;
            )*
        }
    )*) => {
        $(
            $(#[$tmeta])*
            pub trait $trait: Send + Sync + 'static {
                $(
                    $(#[$meta])*
                    fn $name(&self $(, $arg: $ty)*)
                        -> impl ::std::future::Future<Output = $ret> + Send;
                )*
            }

            impl $trait for $crate::dyn_store::DynStore {
                $(
                    fn $name(&self $(, $arg: $ty)*)
                        -> impl ::std::future::Future<Output = $ret> + Send {
                        self.erased().$name($($arg),*)
                    }
                )*
            }
        )*

        /// Every concern's methods with their futures boxed: the object-safe view a
        /// [`DynStore`](crate::DynStore) holds.
        pub(crate) trait ErasedOps: Send + Sync + 'static {
            $($(
                fn $name(&self $(, $arg: $ty)*) -> $crate::clock::BoxFuture<'_, $ret>;
            )*)*
        }

        impl<S> ErasedOps for S
        where
            S: $($trait +)* Send,
        {
            $($(
                fn $name(&self $(, $arg: $ty)*) -> $crate::clock::BoxFuture<'_, $ret> {
                    Box::pin(<S as $trait>::$name(self $(, $arg)*))
                }
            )*)*
        }
    };
}
pub(crate) use concerns;

/// [`Store`]'s own methods, erased, over every concern's.
trait ErasedStore: ErasedOps {
    fn dyn_backend(&self) -> &'static str;
    fn dyn_clock(&self) -> &SharedClock;
    fn dyn_ownership(&self) -> Ownership;
    fn dyn_work(&self) -> Option<WorkStats>;
    fn dyn_reclaims_pages(&self) -> bool;
    fn dyn_status(&self) -> BoxFuture<'_, Result<StoreStatus>>;
    fn dyn_close(&self) -> BoxFuture<'_, ()>;
    fn as_any(&self) -> &dyn Any;
}

impl<S: Store> ErasedStore for S {
    fn dyn_backend(&self) -> &'static str {
        Store::backend(self)
    }
    fn dyn_clock(&self) -> &SharedClock {
        Store::clock(self)
    }
    fn dyn_ownership(&self) -> Ownership {
        Store::ownership(self)
    }
    fn dyn_work(&self) -> Option<WorkStats> {
        Store::work(self)
    }
    fn dyn_reclaims_pages(&self) -> bool {
        Store::reclaims_pages(self)
    }
    fn dyn_status(&self) -> BoxFuture<'_, Result<StoreStatus>> {
        Box::pin(Store::status(self))
    }
    fn dyn_close(&self) -> BoxFuture<'_, ()> {
        Box::pin(Store::close(self))
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Any store, chosen at run time. `Engine<DynStore>` is the run-time engine.
pub struct DynStore(Box<dyn ErasedStore>);

impl DynStore {
    /// Erases a store.
    pub fn new<S: Store>(store: S) -> Self {
        DynStore(Box::new(store))
    }

    /// The concrete store inside, if it is an `S`.
    pub fn downcast_ref<S: Store>(&self) -> Option<&S> {
        self.0.as_any().downcast_ref::<S>()
    }

    /// The erased operations (for the impls `concerns!` writes).
    pub(crate) fn erased(&self) -> &dyn ErasedOps {
        &*self.0
    }
}

impl std::fmt::Debug for DynStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("DynStore")
            .field(&self.0.dyn_backend())
            .finish()
    }
}

impl<N: OutboxStore> HasOutbox<N> for DynStore {
    fn outbox(&self) -> Result<&N> {
        self.downcast_ref::<N>().ok_or_else(|| {
            Error::invalid(format!(
                "this engine's store is {}, not {}: the outbox needs the store it names",
                self.0.dyn_backend(),
                std::any::type_name::<N>()
            ))
        })
    }
}

impl Store for DynStore {
    fn backend(&self) -> &'static str {
        self.0.dyn_backend()
    }
    fn clock(&self) -> &SharedClock {
        self.0.dyn_clock()
    }
    fn ownership(&self) -> Ownership {
        self.0.dyn_ownership()
    }
    fn work(&self) -> Option<WorkStats> {
        self.0.dyn_work()
    }
    fn reclaims_pages(&self) -> bool {
        self.0.dyn_reclaims_pages()
    }
    fn status(&self) -> impl Future<Output = Result<StoreStatus>> + Send {
        self.0.dyn_status()
    }
    fn close(&self) -> impl Future<Output = ()> + Send {
        self.0.dyn_close()
    }
}

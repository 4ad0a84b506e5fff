//! Driving a future to completion on the current thread: a store's writer thread runs
//! the application's outbox body (an async closure) and its own async statement flows
//! there, and a short call on a caller's thread drives a flow over a synchronous
//! connection, which completes on its first poll.

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

/// Wakes the blocked thread by unparking it.
struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls `future` on the current thread until it completes, parking between polls.
///
/// With `runtime`, the runtime is entered first, so a body that awaits a tokio timer or
/// channel finds its driver. From inside an async task, only for a future that never
/// waits (a SQL flow over rusqlite): anything else would park the executor's thread. Not
/// for a call of the writer thread's handle (`crate::writer::WriterThread`) on a
/// runtime's worker thread: such a call may yield its task first, and the worker wakes
/// a yielded task from its own loop, which this would park for good.
pub fn block_on<F: Future>(runtime: Option<&tokio::runtime::Handle>, future: F) -> F::Output {
    let _entered = runtime.map(tokio::runtime::Handle::enter);
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::park();
    }
}

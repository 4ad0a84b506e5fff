//! Driving a future to completion on a thread that is not an async executor: a store's
//! writer thread runs the application's outbox body (an async closure) and its own
//! async statement flows there.

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
/// channel finds its driver. Never call this from inside an async task: it blocks.
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

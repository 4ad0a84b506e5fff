//! Timed visibility without waiting for a sweep: a scheduled send, an abandon with a
//! delay and a lease all make a message claimable at a known time, which the store
//! reaches only through the scheduler and the reaper. Their loops run once a second,
//! so a long-poll parked on an idle queue used to get such a message up to a second
//! late. The engine notes each time it hands out (per queue, in memory); a parked
//! receiver wakes at the earliest time noted for its queue and, if no other receiver
//! did it first, runs the scheduler's and the reaper's pass then. Times the engine did
//! not hand out (messages scheduled before a restart, sends through the outbox) are
//! still found by the loops: this only shortens the wait.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

/// The most times kept per queue. A queue whose receivers never park would otherwise
/// grow its set with every lease; past the bound the latest times are dropped, and
/// the sweeps find what they would have woken.
const MAX_PER_QUEUE: usize = 4096;

/// Times a message of a queue becomes claimable, as the engine handed them out.
#[derive(Debug, Default)]
pub(crate) struct DueTimes {
    queues: Mutex<HashMap<String, BTreeSet<i64>>>,
}

impl DueTimes {
    /// Notes that a message of `queue` becomes claimable at `at` (epoch ms) unless
    /// something settles it first.
    pub(crate) fn note(&self, queue: &str, at: i64) {
        let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        let times = match queues.get_mut(queue) {
            Some(t) => t,
            None => queues.entry(queue.to_owned()).or_default(),
        };
        times.insert(at);
        if times.len() > MAX_PER_QUEUE {
            times.pop_last();
        }
    }

    /// The earliest time noted for `queue`.
    pub(crate) fn next(&self, queue: &str) -> Option<i64> {
        let queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        queues.get(queue).and_then(|t| t.first().copied())
    }

    /// Takes every time of `queue` that has come by `now`: true if there was one, so
    /// that of the receivers woken together one runs the pass.
    pub(crate) fn take_due(&self, queue: &str, now: i64) -> bool {
        let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        let Some(times) = queues.get_mut(queue) else {
            return false;
        };
        let later = times.split_off(&(now + 1));
        let came = !times.is_empty();
        *times = later;
        if times.is_empty() {
            queues.remove(queue);
        }
        came
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_come_due_once_and_stay_bounded() {
        let due = DueTimes::default();
        due.note("q", 30);
        due.note("q", 10);
        due.note("other", 5);
        assert_eq!(due.next("q"), Some(10));
        assert!(!due.take_due("q", 9));
        assert!(due.take_due("q", 10));
        assert!(!due.take_due("q", 10), "taken once");
        assert_eq!(due.next("q"), Some(30));
        assert!(due.take_due("q", 100));
        assert_eq!(due.next("q"), None);
        assert_eq!(due.next("other"), Some(5));
        for t in 0..(MAX_PER_QUEUE as i64 + 10) {
            due.note("big", 1_000 + t);
        }
        assert_eq!(due.next("big"), Some(1_000), "the earliest are kept");
        let kept = due.queues.lock().expect("lock")["big"].len();
        assert_eq!(kept, MAX_PER_QUEUE);
    }
}

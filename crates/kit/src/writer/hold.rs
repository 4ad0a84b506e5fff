//! How long calls on their callers' threads held those threads: the store's own share of
//! an executor's lateness, counted where it happens. A probe task on the runtime
//! (`benches`' `LatenessProbe`) measures the whole machine: another process, the
//! kernel's writeback and a busy core make it late with no store call in sight. These
//! counts see only the time a call ran on a thread that was not the writer's.
//!
//! Fixed memory and no lock: one counter per bucket, four buckets per power of two
//! from 1 µs (a bucket's bounds are within a quarter of each other), so a percentile
//! read from them is an upper bound at most a quarter above the true value.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The powers of two of nanoseconds the buckets cover from 2^10 ns (about 1 µs) up:
/// to 2^30 ns, about a second. Longer holds share the last bucket.
const POWERS: usize = 20;
/// Buckets per power of two.
const SUB: usize = 4;
/// Below 2^10 ns, then `SUB` per power, then the overflow.
const BUCKETS: usize = 1 + POWERS * SUB + 1;
/// The first power the buckets split.
const FIRST_POWER: u32 = 10;

/// Counts of hold times, recorded from any thread.
#[derive(Debug)]
pub struct HoldTimes {
    buckets: [AtomicU64; BUCKETS],
}

impl Default for HoldTimes {
    fn default() -> Self {
        HoldTimes {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// The bucket of a hold of `ns` nanoseconds.
fn bucket(ns: u64) -> usize {
    if ns < 1 << FIRST_POWER {
        return 0;
    }
    let power = 63 - ns.leading_zeros();
    let from_first = (power - FIRST_POWER) as usize;
    if from_first >= POWERS {
        return BUCKETS - 1;
    }
    let sub = ((ns >> (power - 2)) & 3) as usize;
    1 + from_first * SUB + sub
}

/// The largest hold bucket `i` counts (its exclusive upper bound); None for the
/// overflow, which has none.
fn upper_bound(i: usize) -> Option<Duration> {
    if i == 0 {
        return Some(Duration::from_nanos(1 << FIRST_POWER));
    }
    if i >= BUCKETS - 1 {
        return None;
    }
    let power = FIRST_POWER + ((i - 1) / SUB) as u32;
    let sub = ((i - 1) % SUB) as u64;
    Some(Duration::from_nanos((5 + sub) << (power - 2)))
}

impl HoldTimes {
    /// Counts one hold.
    pub fn record(&self, held: Duration) {
        let ns = u64::try_from(held.as_nanos()).unwrap_or(u64::MAX);
        self.buckets[bucket(ns)].fetch_add(1, Ordering::Relaxed);
    }

    /// The counts so far.
    pub fn snapshot(&self) -> HoldSnapshot {
        HoldSnapshot {
            counts: self
                .buckets
                .iter()
                .map(|b| b.load(Ordering::Relaxed))
                .collect(),
        }
    }
}

/// Hold counts at one moment; two subtract to the holds between them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoldSnapshot {
    counts: Vec<u64>,
}

/// A percentile or maximum of holds: below `Duration`, or longer than the buckets
/// reach (about a second). Every `Under` orders before every `Beyond`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum HoldBound {
    /// Under this duration.
    Under(Duration),
    /// Longer than every bucket's bound.
    Beyond(Duration),
}

impl std::fmt::Display for HoldBound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HoldBound::Under(d) => write!(f, "< {d:?}"),
            HoldBound::Beyond(d) => write!(f, "> {d:?}"),
        }
    }
}

impl HoldSnapshot {
    /// The holds counted since `earlier`, a snapshot of the same counts (every snapshot
    /// has one count per bucket).
    pub fn since(&self, earlier: &HoldSnapshot) -> HoldSnapshot {
        HoldSnapshot {
            counts: self
                .counts
                .iter()
                .zip(&earlier.counts)
                .map(|(now, then)| now.saturating_sub(*then))
                .collect(),
        }
    }

    /// How many holds it counts.
    pub fn holds(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The bound under which a fraction `q` (0 to 1) of the holds fall; None when there
    /// are none.
    pub fn quantile(&self, q: f64) -> Option<HoldBound> {
        let total = self.holds();
        if total == 0 {
            return None;
        }
        // The rank of the hold the quantile names, 1-based: at least the first.
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, n) in self.counts.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some(bound(i));
            }
        }
        Some(bound(self.counts.len() - 1))
    }

    /// The bound of the longest hold counted; None when there are none.
    pub fn max(&self) -> Option<HoldBound> {
        self.counts.iter().rposition(|n| *n > 0).map(bound)
    }
}

/// The bound of bucket `i`.
fn bound(i: usize) -> HoldBound {
    upper_bound(i).map_or_else(
        || HoldBound::Beyond(Duration::from_nanos(1 << (FIRST_POWER + POWERS as u32))),
        HoldBound::Under,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_hold_falls_under_its_buckets_bound_and_the_bound_is_tight() {
        for ns in [
            0u64,
            1,
            1023,
            1024,
            1279,
            1280,
            1535,
            1536,
            2047,
            2048,
            5_000,
            99_999,
            1 << 29,
            (1 << 30) - 1,
        ] {
            let i = bucket(ns);
            let upper = upper_bound(i).expect("inside the buckets");
            assert!(u128::from(ns) < upper.as_nanos(), "{ns} ns in bucket {i}");
            if i > 0 {
                let lower = upper_bound(i - 1).expect("a bucket below");
                assert!(u128::from(ns) >= lower.as_nanos(), "{ns} ns in bucket {i}");
                // No bucket is wider than a quarter of its lower bound.
                assert!(upper.as_nanos() - lower.as_nanos() <= lower.as_nanos() / 4 + 1);
            }
        }
        assert_eq!(bucket(1 << 30), BUCKETS - 1);
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn percentiles_and_the_maximum_are_read_from_the_holds_between_two_snapshots() {
        let holds = HoldTimes::default();
        holds.record(Duration::from_millis(50));
        let before = holds.snapshot();
        for _ in 0..998 {
            holds.record(Duration::from_micros(20));
        }
        holds.record(Duration::from_micros(300));
        holds.record(Duration::from_micros(900));
        let window = holds.snapshot().since(&before);
        assert_eq!(window.holds(), 1000);
        let under = |b: Option<HoldBound>| match b {
            Some(HoldBound::Under(d)) => d,
            other => panic!("{other:?}"),
        };
        let p50 = under(window.quantile(0.5));
        assert!(p50 > Duration::from_micros(20) && p50 <= Duration::from_micros(25));
        let p999 = under(window.quantile(0.999));
        assert!(p999 > Duration::from_micros(300) && p999 <= Duration::from_micros(375));
        // The 50 ms hold came before the window: the maximum is the 900 µs one.
        let max = under(window.max());
        assert!(max > Duration::from_micros(900) && max <= Duration::from_micros(1125));
        assert_eq!(HoldTimes::default().snapshot().quantile(0.5), None);
        holds.record(Duration::from_secs(5));
        assert!(matches!(
            holds.snapshot().max(),
            Some(HoldBound::Beyond(d)) if d >= Duration::from_secs(1)
        ));
    }
}

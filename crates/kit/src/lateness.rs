//! The executor budget's measure (docs/benchmark.md, "Where store work runs"): a
//! thread outside the runtime ticks every millisecond and hands each tick's time to a
//! task on the runtime; the task records how long after the tick it ran. A store call
//! that holds an executor thread too long shows here as lateness. (A thread feeds the
//! task because tokio's own timer rounds every deadline up to its millisecond wheel,
//! which would hide the delay being measured.)
//!
//! The same thread also records how late it woke from each of its own 1 ms sleeps: a
//! plain thread that no executor and no store can hold, woken by the kernel in the same
//! window. That is the machine's own wake-up delay at the moment of the measure, the
//! floor beneath the probe's figure: a runtime worker parked in the kernel waits for the
//! same scheduler to run it. The benches, the broker's load test and
//! `lateness_floor` print both.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How often the probe ticks.
const TICK: Duration = Duration::from_millis(1);

/// What the ticking thread (how late it woke) and the probe's task (how late it ran)
/// each return: one delay per tick.
type Samples = Vec<Duration>;

/// A running probe: see the module's documentation.
pub struct LatenessProbe {
    stop: Arc<AtomicBool>,
    ticker: Option<std::thread::JoinHandle<Samples>>,
    task: Option<tokio::task::JoinHandle<Samples>>,
    rt: tokio::runtime::Handle,
}

impl LatenessProbe {
    /// Starts ticking; the probe task runs on `rt`.
    pub fn start(rt: &tokio::runtime::Handle) -> Self {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Instant>();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let ticker = std::thread::spawn(move || {
            let mut overslept = Vec::new();
            while !stopped.load(Ordering::Relaxed) {
                let asleep = Instant::now();
                std::thread::sleep(TICK);
                let tick = Instant::now();
                overslept.push(tick.duration_since(asleep).saturating_sub(TICK));
                if tx.send(tick).is_err() {
                    break;
                }
            }
            overslept
        });
        let task = rt.spawn(async move {
            let mut late = Vec::new();
            while let Some(tick) = rx.recv().await {
                late.push(tick.elapsed());
            }
            late
        });
        LatenessProbe {
            stop,
            ticker: Some(ticker),
            task: Some(task),
            rt: rt.clone(),
        }
    }

    /// Stops the probe and prints its percentiles under `label` (stderr, beside a
    /// bench's own lines), with the machine's wake-up in the same window; returns the
    /// probe's p99.9. Not from inside the runtime: see [`Self::finish_within`].
    pub fn report(self, label: &str) -> Duration {
        let l = self.finish();
        eprintln!("{}", l.line(label));
        l.probe.p999
    }

    /// Stops the probe; how late its task ran, and how late its ticking thread woke.
    /// Not from inside the runtime (it blocks on the probe's task): see
    /// [`Self::finish_within`].
    pub fn finish(mut self) -> Lateness {
        let (ticker, task) = self.halt();
        let wake = ticker.map(|t| t.join().unwrap_or_default());
        let late = task.map(|t| self.rt.block_on(t).unwrap_or_default());
        Lateness::of(late.unwrap_or_default(), wake.unwrap_or_default())
    }

    /// [`Self::finish`] from a task on a runtime (a test's own, as the broker's load
    /// test runs); the ticking thread is joined off the executor.
    pub async fn finish_within(mut self) -> Lateness {
        let (ticker, task) = self.halt();
        let wake = match ticker {
            Some(t) => tokio::task::spawn_blocking(move || t.join().unwrap_or_default())
                .await
                .unwrap_or_default(),
            None => Vec::new(),
        };
        let late = match task {
            Some(t) => t.await.unwrap_or_default(),
            None => Vec::new(),
        };
        Lateness::of(late, wake)
    }

    /// Tells the ticking thread to stop (it ends within one tick, and the probe's task
    /// when it has); their handles, for [`Self::finish`] and [`Self::finish_within`] to
    /// join each its own way.
    fn halt(
        &mut self,
    ) -> (
        Option<std::thread::JoinHandle<Samples>>,
        Option<tokio::task::JoinHandle<Samples>>,
    ) {
        self.stop.store(true, Ordering::Relaxed);
        (self.ticker.take(), self.task.take())
    }
}

impl Drop for LatenessProbe {
    fn drop(&mut self) {
        // A probe dropped unfinished (a bench that panicked) stops its thread.
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// What a [`LatenessProbe`] recorded.
#[derive(Debug, Clone, Copy, Default)]
pub struct Lateness {
    /// How late the probe's task ran after each tick: the budget's measure.
    pub probe: Percentiles,
    /// How late the ticking thread woke from each of its sleeps, in the same window:
    /// the machine's wake-up delay, beneath any runtime's.
    pub wake: Percentiles,
}

impl Lateness {
    fn of(late: Vec<Duration>, overslept: Vec<Duration>) -> Self {
        Lateness {
            probe: Percentiles::of(late),
            wake: Percentiles::of(overslept),
        }
    }

    /// One line for a report: `lateness <label>: …`, the probe's percentiles, then the
    /// plain thread's wake-up in the same window.
    pub fn line(&self, label: &str) -> String {
        let (p, w) = (self.probe, self.wake);
        format!(
            "lateness {label}: {} ticks, p50 {:?}, p99 {:?}, p99.9 {:?}, max {:?}; \
             a plain thread's wake-up in the same window: p99 {:?}, p99.9 {:?}, max {:?}",
            p.count, p.p50, p.p99, p.p999, p.max, w.p99, w.p999, w.max
        )
    }
}

/// Percentiles of a set of durations (each the sample at that rank, the largest last).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Percentiles {
    /// Samples.
    pub count: usize,
    /// The median.
    pub p50: Duration,
    /// The 99th percentile.
    pub p99: Duration,
    /// The 99.9th percentile: the budget's measure.
    pub p999: Duration,
    /// The largest.
    pub max: Duration,
}

impl Percentiles {
    /// The percentiles of `samples` (all zero when there are none).
    pub fn of(mut samples: Vec<Duration>) -> Self {
        samples.sort_unstable();
        let at = |q: f64| {
            let rank = ((samples.len() as f64 * q) as usize).min(samples.len().saturating_sub(1));
            samples.get(rank).copied().unwrap_or_default()
        };
        Percentiles {
            count: samples.len(),
            p50: at(0.5),
            p99: at(0.99),
            p999: at(0.999),
            max: samples.last().copied().unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_the_samples_at_their_ranks() {
        let ms = |n: u64| Duration::from_millis(n);
        // 2,000 samples of 1..=2000 ms, shuffled by a stride.
        let samples: Vec<Duration> = (0..2000u64).map(|i| ms((i * 7) % 2000 + 1)).collect();
        let p = Percentiles::of(samples);
        assert_eq!(p.count, 2000);
        assert_eq!(p.p50, ms(1001));
        assert_eq!(p.p99, ms(1981));
        assert_eq!(p.p999, ms(1999));
        assert_eq!(p.max, ms(2000));
    }

    #[test]
    fn no_samples_are_all_zero() {
        assert_eq!(Percentiles::of(Vec::new()), Percentiles::default());
        let one = Percentiles::of(vec![Duration::from_micros(5)]);
        assert_eq!(one.p50, Duration::from_micros(5));
        assert_eq!(one.p999, Duration::from_micros(5));
        assert_eq!(one.max, Duration::from_micros(5));
    }
}

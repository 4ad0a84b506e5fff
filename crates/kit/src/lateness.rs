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
//! same scheduler to run it. And each tick wakes a second plain thread, parked in the
//! kernel on a channel, as it wakes the runtime's worker for the probe's task: how late
//! that thread runs is the wake-up of a parked thread with no executor, which a parked
//! worker pays before it can poll anything. The benches, the broker's load test and
//! `lateness_floor` print all three.
//!
//! A runtime built with [`unparked`] as its `on_thread_unpark` hook also says, for each
//! tick over the budget, where the time went: a tick that found the worker which ran
//! it parked waited first for the kernel to wake that worker and then in its queue; a
//! tick that found it running waited only in the queue, behind the tasks polled before
//! it.

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How often the probe ticks.
const TICK: Duration = Duration::from_millis(1);

/// The budget: a tick later than this is split into its waits ([`Split`]).
const BUDGET: Duration = Duration::from_millis(1);

/// What the ticking thread returns, one delay per tick: how late it woke, and how late
/// the parked thread it woke ran.
type Samples = (Vec<Duration>, Vec<Duration>);

/// What the probe's task returns, one per tick: how late it ran, and, when the worker
/// that ran it had been parked at the tick, how long after the tick that worker woke;
/// then whether the runtime calls [`unparked`] at all.
type Ticks = (Vec<(Duration, Option<Duration>)>, bool);

thread_local! {
    /// When this thread last came back from parking, if it is a runtime worker whose
    /// runtime calls [`unparked`].
    static UNPARKED: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// A runtime's `on_thread_unpark` hook (`Builder::on_thread_unpark(unparked)`): notes
/// when the worker woke, so that the probe can split a late tick into the worker's
/// wake-up and its wait in the queue. One clock read per unpark.
pub fn unparked() {
    UNPARKED.with(|u| u.set(Some(Instant::now())));
}

/// A running probe: see the module's documentation.
pub struct LatenessProbe {
    stop: Arc<AtomicBool>,
    ticker: Option<std::thread::JoinHandle<Samples>>,
    task: Option<tokio::task::JoinHandle<Ticks>>,
    rt: tokio::runtime::Handle,
}

impl LatenessProbe {
    /// Starts ticking; the probe task runs on `rt`.
    pub fn start(rt: &tokio::runtime::Handle) -> Self {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Instant>();
        let (to_parked, parked_rx) = std::sync::mpsc::channel::<Instant>();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        // A plain thread parked in the kernel, woken by each tick as the runtime's
        // worker is woken for the probe's task: the same wake-up, with no executor.
        let parked = std::thread::spawn(move || {
            let mut late = Vec::new();
            while let Ok(tick) = parked_rx.recv() {
                late.push(tick.elapsed());
            }
            late
        });
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
                let _ = to_parked.send(tick);
            }
            // The parked thread ends when its sender is gone.
            drop(to_parked);
            let parked = parked.join().unwrap_or_default();
            (overslept, parked)
        });
        let task = rt.spawn(async move {
            let (mut late, mut hooked) = (Vec::new(), false);
            while let Some(tick) = rx.recv().await {
                let unparked = UNPARKED.with(Cell::get);
                hooked |= unparked.is_some();
                let woke = unparked
                    .and_then(|u| u.checked_duration_since(tick))
                    .filter(|w| !w.is_zero());
                late.push((tick.elapsed(), woke));
            }
            (late, hooked)
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

    /// Stops the probe; how late its task ran, how late its ticking thread woke, and
    /// how late the parked thread ran after each tick. Not from inside the runtime (it
    /// blocks on the probe's task): see [`Self::finish_within`]. The runtime must run
    /// its tasks on threads of its own (a multi-thread runtime): a current-thread
    /// runtime's handle cannot drive the probe's task to its end.
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
            None => Samples::default(),
        };
        let late = match task {
            Some(t) => t.await.unwrap_or_default(),
            None => Ticks::default(),
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
        Option<tokio::task::JoinHandle<Ticks>>,
    ) {
        self.stop.store(true, Ordering::Relaxed);
        (self.ticker.take(), self.task.take())
    }
}

impl Drop for LatenessProbe {
    fn drop(&mut self) {
        // A probe dropped unfinished (a bench that panicked) stops its ticking thread,
        // and with it the parked one.
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
    /// How late a plain thread parked in the kernel ran after each tick woke it, in the
    /// same window: the wake-up a parked runtime worker pays too, with no executor.
    pub parked: Percentiles,
    /// The ticks over the budget, split into their waits; None when the runtime does
    /// not call [`unparked`].
    pub split: Option<Split>,
}

/// The ticks later than the budget (1 ms), by what they waited for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Split {
    /// Of the ticks over the budget, those whose worker was parked at the tick: how
    /// long after the tick the worker woke (the kernel's part).
    pub parked_wake: Percentiles,
    /// The same ticks: how long they then waited on the awake worker (the queue's
    /// part).
    pub parked_queue: Percentiles,
    /// The ticks whose worker was running at the tick: how late they ran (all of it in
    /// the queue, behind the tasks polled before them).
    pub running: Percentiles,
}

impl Split {
    /// None when no worker ever reported an unpark (the hook is not installed).
    fn of(ticks: &[(Duration, Option<Duration>)], hooked: bool) -> Option<Self> {
        if !hooked {
            return None;
        }
        let over = ticks.iter().filter(|(late, _)| *late > BUDGET);
        let (mut wake, mut queue, mut running) = (Vec::new(), Vec::new(), Vec::new());
        for &(late, woke) in over {
            match woke {
                Some(w) => {
                    wake.push(w);
                    queue.push(late.saturating_sub(w));
                }
                None => running.push(late),
            }
        }
        Some(Split {
            parked_wake: Percentiles::of(wake),
            parked_queue: Percentiles::of(queue),
            running: Percentiles::of(running),
        })
    }

    /// How many ticks were over the budget: those whose worker was parked and those
    /// whose worker was running.
    pub fn over(&self) -> usize {
        self.parked_wake.count + self.running.count
    }
}

impl Lateness {
    fn of((ticks, hooked): Ticks, (overslept, parked): Samples) -> Self {
        let split = Split::of(&ticks, hooked);
        Lateness {
            probe: Percentiles::of(ticks.into_iter().map(|(late, _)| late).collect()),
            wake: Percentiles::of(overslept),
            parked: Percentiles::of(parked),
            split,
        }
    }

    /// One line for a report: `lateness <label>: …`, the probe's percentiles, then the
    /// sleeping thread's and the parked thread's wake-ups in the same window, then the
    /// split of the ticks over the budget when there is one and any tick was over.
    pub fn line(&self, label: &str) -> String {
        let (p, w, k) = (self.probe, self.wake, self.parked);
        let mut line = format!(
            "lateness {label}: {} ticks, p50 {:?}, p99 {:?}, p99.9 {:?}, max {:?}; \
             a plain thread's wake-up in the same window: p99 {:?}, p99.9 {:?}, max {:?}; \
             a parked thread woken by the tick: p99 {:?}, p99.9 {:?}, max {:?}",
            p.count, p.p50, p.p99, p.p999, p.max, w.p99, w.p999, w.max, k.p99, k.p999, k.max
        );
        if let Some(s) = self.split.filter(|s| s.over() > 0) {
            line.push_str(&format!(
                "; of the {} ticks over 1 ms, {} found their worker parked (it woke p50 {:?}, \
                 max {:?} after the tick; then queued p50 {:?}, max {:?}) and {} found it \
                 running (queued p50 {:?}, max {:?})",
                s.over(),
                s.parked_wake.count,
                s.parked_wake.p50,
                s.parked_wake.max,
                s.parked_queue.p50,
                s.parked_queue.max,
                s.running.count,
                s.running.p50,
                s.running.max
            ));
        }
        line
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
    fn ticks_over_the_budget_split_by_whether_their_worker_was_parked() {
        let us = Duration::from_micros;
        let ticks = vec![
            (us(300), None),            // within the budget: not split
            (us(900), Some(us(800))),   // within the budget, its worker parked
            (us(1500), Some(us(1200))), // over: the worker woke 1.2 ms after the tick
            (us(2500), Some(us(400))),  // over: woke at 0.4 ms, then queued 2.1 ms
            (us(1800), None),           // over: its worker was running
        ];
        let s = Split::of(&ticks, true).expect("hooked");
        assert_eq!(s.over(), 3);
        assert_eq!(s.parked_wake.count, 2);
        assert_eq!(s.parked_wake.max, us(1200));
        assert_eq!(s.parked_queue.max, us(2100));
        assert_eq!(s.parked_queue.p50, us(2100));
        assert_eq!(s.running.count, 1);
        assert_eq!(s.running.max, us(1800));
        // A runtime without the hook has no split, and its line says nothing of one.
        assert_eq!(Split::of(&ticks, false), None);
        let l = Lateness::of((ticks, false), (vec![us(100)], vec![us(50)]));
        assert!(
            !l.line("x").contains("found their worker"),
            "{}",
            l.line("x")
        );
        let l = Lateness::of(
            (vec![(us(1500), Some(us(1200)))], true),
            (vec![us(100)], vec![us(50)]),
        );
        assert!(
            l.line("x").contains("1 found their worker parked"),
            "{}",
            l.line("x")
        );
    }

    #[test]
    fn a_probe_finishes_and_its_threads_end() {
        // Finished at once: the ticking thread may stop before its first tick. Its
        // parked thread must end too (it waits on the ticker's channel), or finishing
        // hangs.
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .on_thread_unpark(unparked)
            .build()
            .expect("runtime");
        for _ in 0..3 {
            let l = LatenessProbe::start(rt.handle()).finish();
            assert_eq!(l.probe.count, l.parked.count);
        }
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

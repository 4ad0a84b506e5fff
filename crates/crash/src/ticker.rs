//! A recurring schedule across processes and kills (promise 21.2): two (or more) ticker
//! processes serve one database file, a leader that holds it and a standby that waits
//! for its one-writer lock; a shared clock file moves one tick at a time; the harness
//! kills the leader with SIGKILL at random moments — racing its fire, or after it — and
//! starts a new standby. Every tick must be fired exactly once.
//!
//! The ticker process prints, flushed:
//!
//! - `STANDBY` — the database is held by another process; it retries;
//! - `LEADER` — it opened the database;
//! - `AT <fired> <next_at>` — the schedule as stored, after each pass that changed it
//!   (read after the commit, so it is evidence);
//! - `MIDFIRE` — the torn variant (`--torn`, the harness's self-check): it sent the
//!   due tick's message in a transaction of its own and waits, before moving the
//!   schedule, to be killed. The next leader fires the tick again, and the check must
//!   find the repeat.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use mqlite_contract::clock::BoxFuture;
use mqlite_contract::{
    Clock, Error, OutMessage, PeekOptions, QueueConfig, Recurrence, ScheduleSpec, SharedClock,
};
use mqlite_engine::{Engine, EngineOptions};
use mqlite_tck::cases::integrity::Rng;
use mqlite_tck::{Access, StoreFactory, Typed};

/// The queue the schedule sends to.
pub const TICKS: &str = "ticks";
/// The schedule.
pub const SCHEDULE: &str = "tick";
/// The schedule's interval, ms.
pub const PERIOD_MS: i64 = 1_000;
/// The clock's reading before the first tick.
pub const T0_MS: i64 = 1_800_000_000_000;

/// A clock every process reads from one file (epoch ms as text), written by the
/// harness: the processes' manual clock.
#[derive(Debug, Clone)]
pub struct FileClock(PathBuf);

impl FileClock {
    /// The clock kept in `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        FileClock(path.into())
    }

    /// Sets the clock: written beside the file and renamed over it, so a reader never
    /// sees half a number.
    pub fn set(&self, ms: i64) -> std::io::Result<()> {
        let tmp = self.0.with_extension("tmp");
        std::fs::write(&tmp, ms.to_string())?;
        std::fs::rename(&tmp, &self.0)
    }
}

impl Clock for FileClock {
    fn now_ms(&self) -> i64 {
        std::fs::read_to_string(&self.0)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    }

    fn sleep_until(&self, deadline_ms: i64) -> BoxFuture<'static, ()> {
        let clock = self.clone();
        Box::pin(async move {
            while clock.now_ms() < deadline_ms {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
    }
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    // A lost pipe means the harness is gone; the process is about to die anyway.
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// The ticker process: waits for the database, then fires the schedule as the clock
/// file moves, until killed.
pub async fn run_ticker<F: Access>(
    access: F,
    dir: &Path,
    clock: &Path,
    torn: bool,
) -> Result<(), Error> {
    let clock: SharedClock = std::sync::Arc::new(FileClock::new(clock));
    let mut announced = false;
    let store = loop {
        match access.open(dir, clock.clone()).await {
            Ok(store) => break store,
            Err(Error::DbLocked { .. }) => {
                if !announced {
                    say("STANDBY");
                    announced = true;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            Err(e) => return Err(e),
        }
    };
    let options = EngineOptions {
        background: false,
        ..Default::default()
    };
    let mq = Engine::with_store(store, options).await?;
    say("LEADER");
    let mut last = None;
    loop {
        if torn {
            tear(&mq).await?;
        } else {
            mq.fire_schedules().await?;
        }
        let s = mq
            .list_schedules()
            .await?
            .into_iter()
            .find(|s| s.spec.name == SCHEDULE)
            .ok_or_else(|| Error::invalid("the schedule is gone"))?;
        let now = (s.fired, s.next_at_ms);
        if last != Some(now) {
            say(&format!("AT {} {}", now.0, now.1));
            last = Some(now);
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// The torn fire: the due tick's message in one transaction, and no move of the
/// schedule (the process waits to be killed there).
async fn tear<S: mqlite_contract::Store>(mq: &Engine<S>) -> Result<(), Error> {
    let now = mq.clock().now_ms();
    for s in mq.list_schedules().await? {
        if s.next_at_ms <= now {
            let tick = mqlite_contract::tick_id(&s.spec.name, s.next_at_ms);
            mq.send(TICKS, s.spec.message.clone().with_id(tick)).await?;
            say("MIDFIRE");
            std::future::pending::<()>().await;
        }
    }
    Ok(())
}

/// An engine over the store in `dir` whose sweeps run only when called.
async fn by_hand<F: Access>(
    access: &F,
    dir: &Path,
    clock: SharedClock,
) -> Result<Engine<F::Store>, Error> {
    let store = access.open(dir, clock).await?;
    let options = EngineOptions {
        background: false,
        ..Default::default()
    };
    Engine::with_store(store, options).await
}

/// One run's settings.
#[derive(Debug, Clone)]
pub struct TickSpec {
    /// The store's name in `mqlite_testbed::stores()`.
    pub store: &'static str,
    /// The ticker binary.
    pub ticker: PathBuf,
    /// The store's directory.
    pub dir: PathBuf,
    /// The clock file.
    pub clock: PathBuf,
    /// How many ticks.
    pub ticks: i64,
    /// Seeds the kill points.
    pub seed: u64,
    /// The self-check: the first ticker tears its first fire (see `MIDFIRE`) and is
    /// killed there; the check must then find that tick repeated.
    pub torn: bool,
}

/// What a run did and found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TickTotals {
    /// Leaders killed while their tick was due (racing the fire).
    pub kills_racing: u32,
    /// Leaders killed after their tick was confirmed.
    pub kills_after: u32,
    /// Processes that became leader.
    pub leaders: u32,
    /// Messages the queue holds at the end.
    pub messages: usize,
    /// Ticks with no message.
    pub missing: Vec<i64>,
    /// Ticks with more than one message.
    pub repeated: Vec<i64>,
    /// The schedule's fire count at the end.
    pub fired: u64,
}

struct Procs {
    spec: TickSpec,
    children: Vec<Option<Child>>,
    lines: mpsc::Receiver<(usize, String)>,
    tx: mpsc::Sender<(usize, String)>,
    leader: Option<usize>,
    fired: u64,
    next_at: i64,
    midfire: bool,
}

impl Procs {
    fn spawn(&mut self, torn: bool) -> Result<(), String> {
        let mut command = Command::new(&self.spec.ticker);
        if torn {
            command.arg("--torn");
        }
        let mut child = command
            .arg("--store")
            .arg(self.spec.store)
            .arg("--dir")
            .arg(&self.spec.dir)
            .arg("--clock")
            .arg(&self.spec.clock)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("spawn ticker: {e}"))?;
        let stdout = child.stdout.take().ok_or("no ticker stdout")?;
        let id = self.children.len();
        let tx = self.tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send((id, line)).is_err() {
                    break;
                }
            }
        });
        self.children.push(Some(child));
        Ok(())
    }

    /// Reads lines until `done` holds of the run's state; a fire count past `ticks` is
    /// a tick fired twice.
    fn until(
        &mut self,
        ticks: u64,
        totals: &mut TickTotals,
        done: impl Fn(&Procs) -> bool,
    ) -> Result<(), String> {
        while !done(self) {
            let (id, line) = self
                .lines
                .recv_timeout(Duration::from_secs(60))
                .map_err(|_| {
                    format!(
                        "no progress for a minute: fired {}, next at {}, waiting for tick {ticks}",
                        self.fired, self.next_at
                    )
                })?;
            if line == "MIDFIRE" {
                self.midfire = true;
            } else if line == "LEADER" {
                self.leader = Some(id);
                totals.leaders += 1;
            } else if let Some(at) = line.strip_prefix("AT ") {
                let mut words = at.split(' ').map(str::parse::<i64>);
                let (Some(Ok(fired)), Some(Ok(next_at))) = (words.next(), words.next()) else {
                    return Err(format!("bad line {line:?}"));
                };
                let fired = fired as u64;
                self.next_at = self.next_at.max(next_at);
                if fired > ticks {
                    return Err(format!(
                        "fired {fired} times by tick {ticks}: a tick fired twice"
                    ));
                }
                self.fired = self.fired.max(fired);
            }
        }
        Ok(())
    }

    fn kill_leader(&mut self) -> Result<(), String> {
        let id = self.leader.take().ok_or("no leader to kill")?;
        if let Some(mut child) = self.children[id].take() {
            child.kill().map_err(|e| format!("SIGKILL: {e}"))?;
            child.wait().map_err(|e| e.to_string())?;
        }
        self.spawn(false)
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        for child in self.children.iter_mut().flatten() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Creates the queue and the schedule, runs two tickers over `spec.ticks` ticks with
/// kills, and checks the queue: one message per tick, named by it.
pub fn run_ticks<F: StoreFactory>(factory: F, spec: &TickSpec) -> Result<TickTotals, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let clock = FileClock::new(&spec.clock);
    clock.set(T0_MS).map_err(|e| e.to_string())?;
    let access = Typed(factory);
    let shared: SharedClock = std::sync::Arc::new(clock.clone());
    rt.block_on(async {
        let mq = by_hand(&access, &spec.dir, shared.clone()).await?;
        mq.create_queue(TICKS, QueueConfig::default()).await?;
        mq.create_schedule(ScheduleSpec::new(
            SCHEDULE,
            TICKS,
            Recurrence::Every(Duration::from_millis(PERIOD_MS as u64)),
            OutMessage::new("tick"),
        ))
        .await?;
        mq.close().await;
        Ok::<_, Error>(())
    })
    .map_err(|e| format!("setup: {e}"))?;

    let (tx, lines) = mpsc::channel();
    let mut procs = Procs {
        spec: spec.clone(),
        children: Vec::new(),
        lines,
        tx,
        leader: None,
        fired: 0,
        next_at: 0,
        midfire: false,
    };
    let mut totals = TickTotals::default();
    let mut rng = Rng::new(spec.seed);
    // The first ticker is the leader (the torn one, in the self-check).
    procs.spawn(spec.torn)?;
    procs.until(0, &mut totals, |p| p.leader.is_some())?;
    procs.spawn(false)?;
    for k in 1..=spec.ticks {
        clock
            .set(T0_MS + k * PERIOD_MS)
            .map_err(|e| e.to_string())?;
        let ticks = k as u64;
        // The torn run fires its first tick twice.
        let bound = ticks + u64::from(spec.torn);
        if spec.torn && k == 1 {
            // Killed between its send and its move: the next leader fires again.
            procs.until(bound, &mut totals, |p| p.midfire)?;
            procs.kill_leader()?;
            totals.kills_racing += 1;
        } else if rng.below(8) == 0 && procs.leader.is_some() {
            // Racing the fire: before, inside or after its transaction.
            procs.kill_leader()?;
            totals.kills_racing += 1;
        }
        // The schedule has moved past tick k (its fire committed).
        procs.until(bound, &mut totals, |p| p.next_at > T0_MS + k * PERIOD_MS)?;
        if rng.below(16) == 0 {
            procs.until(bound, &mut totals, |p| p.leader.is_some())?;
            procs.kill_leader()?;
            totals.kills_after += 1;
        }
    }
    drop(procs);

    rt.block_on(async {
        let mq = by_hand(&access, &spec.dir, shared).await?;
        let mut seen = std::collections::BTreeMap::<i64, u32>::new();
        let mut from = None;
        loop {
            let page = mq
                .peek(
                    TICKS,
                    PeekOptions {
                        from_seq: from,
                        max: 1000,
                        ..Default::default()
                    },
                )
                .await?;
            let Some(last) = page.last() else { break };
            from = Some(mqlite_contract::SeqNumber(last.seq.0 + 1));
            for m in &page {
                totals.messages += 1;
                let id = m.content.message_id.clone().unwrap_or_default();
                let tick = id
                    .strip_prefix(&format!("{SCHEDULE}@"))
                    .and_then(|t| t.parse::<i64>().ok())
                    .ok_or_else(|| Error::invalid(format!("a message of another id: {id:?}")))?;
                *seen.entry(tick).or_default() += 1;
            }
        }
        for k in 1..=spec.ticks {
            let tick = T0_MS + k * PERIOD_MS;
            match seen.remove(&tick) {
                None => totals.missing.push(tick),
                Some(1) => {}
                Some(_) => totals.repeated.push(tick),
            }
        }
        totals.repeated.extend(seen.into_keys());
        let s = mq.list_schedules().await?;
        totals.fired = s.first().map_or(0, |s| s.fired);
        mq.close().await;
        Ok::<_, Error>(())
    })
    .map_err(|e| format!("check: {e}"))?;
    Ok(totals)
}

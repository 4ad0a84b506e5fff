//! The worker's workload: producers, consumers and an outbox writer, each reporting
//! every acknowledged effect as one line on standard output, written and flushed before
//! the next action:
//!
//! - `SENT <seq>` — a send was acknowledged;
//! - `COMPLETING <seq>` / `DONE <seq>` — before a complete is issued / after it is
//!   acknowledged;
//! - `OUTBOX <id>` — an outbox transaction (business row + message) committed;
//! - `MIDTX <id>` — coordinated mode: the outbox transaction is open between its writes.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mqlite_contract::{Error, OutMessage, QueueConfig, ReceiveOptions, SystemClock};
use mqlite_engine::{Engine, EngineOptions};
use mqlite_tck::Access;
use mqlite_tck::cases::integrity::Rng;

use crate::{MAX_DELIVERY, OUTBOX, WORK};

/// How the worker behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Stop inside an outbox transaction after a few commits and wait to be killed.
    Coordinated,
    /// Run until killed.
    Random,
}

/// Worker settings, from its command line.
#[derive(Debug, Clone)]
pub struct WorkerArgs {
    /// The store's directory.
    pub dir: std::path::PathBuf,
    /// Coordinated or random.
    pub mode: Mode,
    /// Seeds the worker's choices.
    pub seed: u64,
    /// The broken variant: business row and message in two transactions.
    pub torn: bool,
}

/// One line per acknowledged effect, flushed at once.
#[derive(Clone)]
struct Report(Arc<Mutex<std::io::Stdout>>);

impl Report {
    fn line(&self, text: String) {
        let mut out = self.0.lock().unwrap_or_else(|e| e.into_inner());
        // A lost pipe means the harness is gone; the process is about to die anyway.
        let _ = writeln!(out, "{text}");
        let _ = out.flush();
    }
}

/// Runs the workload until killed (or until an error, which exits non-zero).
pub async fn run<F: Access>(access: F, args: WorkerArgs) -> Result<(), Error> {
    let store = access.open(&args.dir, SystemClock::shared()).await?;
    let mq = Engine::with_store(store, EngineOptions::default()).await?;
    let work = QueueConfig {
        max_delivery_count: MAX_DELIVERY,
        ..Default::default()
    };
    mq.create_queue(WORK, work).await?;
    mq.create_queue(OUTBOX, QueueConfig::default()).await?;
    // Outbox ids continue from what is already committed.
    let mut next_id = mq
        .tx::<F::Native, _, _>(async |tx| F::business_rows(tx.native()).await)
        .await?
        .last()
        .map_or(0, |id| id + 1);
    let report = Report(Arc::new(Mutex::new(std::io::stdout())));
    report.line("READY".into());

    let producer = {
        let (mq, report) = (mq.clone(), report.clone());
        tokio::spawn(async move {
            for n in 0u64.. {
                let seq = mq.send(WORK, OutMessage::new(format!("p-{n}"))).await?;
                report.line(format!("SENT {}", seq.0));
            }
            Ok::<_, Error>(())
        })
    };
    let consumer = {
        let (mq, report) = (mq.clone(), report.clone());
        let mut rng = Rng::new(args.seed ^ 0xc0);
        tokio::spawn(async move {
            loop {
                let got = mq.receive(WORK, ReceiveOptions::batch(8)).await?;
                if got.is_empty() {
                    tokio::task::yield_now().await;
                }
                for m in got {
                    match rng.below(10) {
                        0..=2 => mq.abandon(WORK, &m, Duration::ZERO).await?,
                        3 => {} // left locked: an orphan if the kill comes now
                        _ => {
                            report.line(format!("COMPLETING {}", m.seq.0));
                            mq.complete(WORK, &m).await?;
                            report.line(format!("DONE {}", m.seq.0));
                        }
                    }
                }
            }
        })
    };
    let mut rng = Rng::new(args.seed);
    let stop_after = match args.mode {
        Mode::Coordinated => Some(rng.below(16)),
        Mode::Random => None,
    };
    for round in 0u64.. {
        let id = next_id;
        next_id += 1;
        let stop_here = stop_after == Some(round);
        if args.torn {
            // The broken variant: two transactions, so a kill between them tears.
            mq.tx::<F::Native, _, _>(async move |tx| F::insert_business_row(tx.native(), id).await)
                .await?;
            if stop_here {
                report.line(format!("MIDTX {id}"));
                std::future::pending::<()>().await;
            }
            mq.tx::<F::Native, _, _>(async move |tx| {
                tx.send(OUTBOX, OutMessage::new(format!("o-{id}"))).await
            })
            .await?;
        } else {
            let report_in_tx = report.clone();
            mq.tx::<F::Native, _, _>(async move |tx| {
                F::insert_business_row(tx.native(), id).await?;
                if stop_here {
                    // Hold the transaction open between its two writes until the kill.
                    report_in_tx.line(format!("MIDTX {id}"));
                    loop {
                        std::thread::park();
                    }
                }
                tx.send(OUTBOX, OutMessage::new(format!("o-{id}"))).await
            })
            .await?;
        }
        report.line(format!("OUTBOX {id}"));
        if producer.is_finished() || consumer.is_finished() {
            break;
        }
        tokio::task::yield_now().await;
    }
    // Only reached when a task failed: surface its error.
    match producer.await {
        Ok(Err(e)) => return Err(e),
        Err(e) => return Err(Error::invalid(format!("producer: {e}"))),
        Ok(Ok(())) => {}
    }
    match consumer.await {
        Ok(Err(e)) => Err(e),
        Err(e) => Err(Error::invalid(format!("consumer: {e}"))),
        Ok(Ok(())) => Ok(()),
    }
}

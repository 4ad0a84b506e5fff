//! The kill loop: start the worker, kill it with SIGKILL at the mode's moment, check the
//! store, restart, and add up the findings.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use mqlite_tck::StoreFactory;
use mqlite_tck::cases::integrity::Rng;

use crate::check::{Findings, Ledger, check};

use crate::worker::Mode;

/// One kill loop's settings.
#[derive(Debug, Clone)]
pub struct LoopSpec {
    /// The store's name in `mqlite_testbed::stores()`.
    pub store: &'static str,
    /// How the worker reaches it: "typed" or "dyn" (the run-time engine).
    pub path: &'static str,
    /// The worker binary.
    pub worker: PathBuf,
    /// The store's directory (kept across kills).
    pub dir: PathBuf,
    /// Coordinated or random kills.
    pub mode: Mode,
    /// How many kills.
    pub kills: u32,
    /// Run the broken two-transaction variant of the worker.
    pub torn: bool,
    /// Seeds the kill points and the workers.
    pub seed: u64,
}

/// What a kill loop did and found.
#[derive(Debug, Default, Clone)]
pub struct Totals {
    /// Kills delivered.
    pub kills: u32,
    /// Acknowledged sends over all runs.
    pub acknowledged_sends: usize,
    /// Acknowledged outbox transactions over all runs.
    pub acknowledged_outbox: usize,
    /// Locked rows the kills left behind, all found resettled by recovery.
    pub orphans: u64,
    /// Everything the checks found wrong, summed.
    pub findings: Findings,
    /// The first check that found something, for the report.
    pub first_finding: Option<(u32, Findings)>,
}

impl std::fmt::Display for Totals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let x = &self.findings;
        write!(
            f,
            "kills={} acknowledged_sends={} acknowledged_outbox={} orphans={} lost_sends={} \
             resurrected={} torn_outbox={} lost_outbox={} locked_rows={} \
             bound_violations={} integrity_failures={}",
            self.kills,
            self.acknowledged_sends,
            self.acknowledged_outbox,
            self.orphans,
            x.lost_sends,
            x.resurrected,
            x.torn,
            x.lost_outbox,
            x.locked_rows,
            x.bound_violations,
            x.integrity_failures
        )
    }
}

fn spawn(spec: &LoopSpec, seed: u64) -> std::io::Result<Child> {
    let mut cmd = Command::new(&spec.worker);
    cmd.arg("--store")
        .arg(spec.store)
        .arg("--path")
        .arg(spec.path)
        .arg("--dir")
        .arg(&spec.dir)
        .arg("--mode")
        .arg(match spec.mode {
            Mode::Coordinated => "coordinated",
            Mode::Random => "random",
        })
        .arg("--seed")
        .arg(seed.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if spec.torn {
        cmd.arg("--torn");
    }
    cmd.spawn()
}

/// Runs the kill loop for one store; errors are the harness's own failures (a worker
/// that died by itself, a store that would not open).
pub fn run_loop<F: StoreFactory>(factory: &F, spec: &LoopSpec) -> Result<Totals, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let mut rng = Rng::new(spec.seed);
    let mut ledger = Ledger::default();
    let mut totals = Totals::default();
    let mut torn = std::collections::BTreeSet::new();
    for kill in 0..spec.kills {
        let mut child = spawn(spec, rng.next_u64()).map_err(|e| format!("spawn worker: {e}"))?;
        let stdout = child.stdout.take().ok_or("no worker stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        // Random mode: kill after this many commits reported since the restart.
        let target = 1 + rng.below(40);
        let mut evidence = 0;
        let mut ready = false;
        loop {
            let Some(line) = lines.next() else {
                let status = child.wait().map_err(|e| e.to_string())?;
                return Err(format!(
                    "kill {kill}: the worker ended by itself ({status}) before its kill point"
                ));
            };
            let line = line.map_err(|e| e.to_string())?;
            ready |= line == "READY";
            if ledger.record(&line) {
                evidence += 1;
            }
            let now = match spec.mode {
                Mode::Coordinated => line.starts_with("MIDTX"),
                Mode::Random => ready && evidence >= target,
            };
            if now {
                break;
            }
        }
        child.kill().map_err(|e| format!("SIGKILL: {e}"))?;
        child.wait().map_err(|e| e.to_string())?;
        // Lines the worker wrote before it died are still in the pipe.
        for line in lines.map_while(Result::ok) {
            ledger.record(&line);
        }
        totals.kills += 1;
        let report = rt
            .block_on(check(factory, &spec.dir, &ledger))
            .map_err(|e| format!("kill {kill}: check: {e}"))?;
        let found = report.findings;
        if !found.clean() && totals.first_finding.is_none() {
            totals.first_finding = Some((kill, found));
        }
        totals.findings.add(found);
        totals.orphans += report.orphans;
        // A tear stays in the data: count each torn transaction once.
        torn.extend(report.torn_ids);
        totals.findings.torn = torn.len() as u64;
    }
    totals.acknowledged_sends = ledger.sent.len();
    totals.acknowledged_outbox = ledger.outbox.len();
    Ok(totals)
}

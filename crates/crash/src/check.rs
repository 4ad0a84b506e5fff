//! What the harness checks after each kill, from the data alone.

use std::collections::BTreeSet;
use std::path::Path;

use mqlite_contract::{
    AdminOps, MessageState, OutboxStore, PeekOptions, REASON_MAX_DELIVERY, RecoverTask, Result,
    SeqNumber, Store, SystemClock,
};
use mqlite_tck::StoreFactory;

use crate::{MAX_DELIVERY, OUTBOX, WORK};

/// Everything the worker acknowledged, over every run so far.
#[derive(Debug, Default, Clone)]
pub struct Ledger {
    /// Acknowledged sends.
    pub sent: BTreeSet<i64>,
    /// Completes issued (acknowledged or not).
    pub completing: BTreeSet<i64>,
    /// Acknowledged completes.
    pub done: BTreeSet<i64>,
    /// Acknowledged outbox transactions.
    pub outbox: BTreeSet<i64>,
}

impl Ledger {
    /// Records one reported line; returns true if it is evidence of a commit.
    pub fn record(&mut self, line: &str) -> bool {
        let mut parts = line.split_whitespace();
        let (Some(kind), Some(n)) = (parts.next(), parts.next().and_then(|n| n.parse().ok()))
        else {
            return false;
        };
        match kind {
            "SENT" => self.sent.insert(n),
            "COMPLETING" => {
                self.completing.insert(n);
                return false;
            }
            "DONE" => self.done.insert(n),
            "OUTBOX" => self.outbox.insert(n),
            _ => return false,
        };
        true
    }
}

/// What one check found wrong (all zero when the store kept every promise).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Findings {
    /// Acknowledged sends neither present nor completed (15.3).
    pub lost_sends: u64,
    /// Acknowledged completes whose message is back (14.3).
    pub resurrected: u64,
    /// Business rows without their message, or messages without their row (15.1).
    pub torn: u64,
    /// Acknowledged outbox transactions missing after the kill (15.1, 15.3).
    pub lost_outbox: u64,
    /// Rows still locked after recovery, or orphans resettled against the rule (15.2).
    pub locked_rows: u64,
    /// Rows delivered more often than the bound.
    pub bound_violations: u64,
    /// The store's own integrity check failed.
    pub integrity_failures: u64,
}

impl Findings {
    /// Whether nothing was found.
    pub fn clean(&self) -> bool {
        *self == Findings::default()
    }

    /// Adds another check's findings (tears are counted by the caller, once each).
    pub fn add(&mut self, o: Findings) {
        self.lost_sends += o.lost_sends;
        self.resurrected += o.resurrected;
        self.lost_outbox += o.lost_outbox;
        self.locked_rows += o.locked_rows;
        self.bound_violations += o.bound_violations;
        self.integrity_failures += o.integrity_failures;
    }
}

async fn all_messages<S: Store>(store: &S, queue: &str) -> Result<Vec<mqlite_contract::Message>> {
    let mut out = Vec::new();
    let mut from = SeqNumber(0);
    loop {
        let page = store
            .peek(
                queue.to_owned(),
                PeekOptions {
                    from_seq: Some(from),
                    state: None,
                    max: 1000,
                },
            )
            .await?;
        let Some(last) = page.last() else { break };
        from = SeqNumber(last.seq.0 + 1);
        let full = page.len() == 1000;
        out.extend(page);
        if !full {
            break;
        }
    }
    Ok(out)
}

/// What one check saw.
#[derive(Debug, Default, Clone)]
pub struct CheckReport {
    /// What was wrong.
    pub findings: Findings,
    /// Outbox ids with a business row but no message, or the reverse.
    pub torn_ids: BTreeSet<i64>,
    /// Rows the kill left locked (all resettled by recovery, or counted as findings).
    pub orphans: u64,
}

/// Opens the killed worker's store, recovers it and checks every promise of section 15
/// against the ledger. The store is closed again before this returns.
pub async fn check<F: StoreFactory>(
    factory: &F,
    dir: &Path,
    ledger: &Ledger,
) -> Result<CheckReport> {
    let mut f = Findings::default();
    let store = factory.open(dir, SystemClock::shared()).await?;
    let queues: Vec<String> = store
        .list_queues()
        .await?
        .into_iter()
        .map(|q| q.name)
        .collect();
    if !queues.iter().any(|q| q == WORK) {
        // The worker died before creating its queues: nothing can have been acknowledged.
        store.close().await;
        f.lost_sends = ledger.sent.len() as u64;
        f.lost_outbox = ledger.outbox.len() as u64;
        return Ok(CheckReport {
            findings: f,
            ..Default::default()
        });
    }
    // The orphans, as the kill left them.
    let orphans: Vec<(SeqNumber, i64)> = all_messages(&store, WORK)
        .await?
        .iter()
        .filter(|m| m.state == MessageState::Locked)
        .map(|m| (m.seq, m.delivery_count))
        .collect();
    let orphan_count = orphans.len() as u64;
    store.recover(RecoverTask::Orphans).await?;
    let work = all_messages(&store, WORK).await?;
    let outbox = all_messages(&store, OUTBOX).await?;
    // 15.2: nothing locked; each orphan resettled under the reaper's rule.
    f.locked_rows += work
        .iter()
        .chain(&outbox)
        .filter(|m| m.state == MessageState::Locked)
        .count() as u64;
    for (seq, count) in orphans {
        let Some(m) = work.iter().find(|m| m.seq == seq) else {
            f.locked_rows += 1;
            continue;
        };
        let by_rule = if count >= MAX_DELIVERY {
            m.state == MessageState::DeadLettered
                && m.dead_letter_reason.as_deref() == Some(REASON_MAX_DELIVERY)
        } else {
            m.state == MessageState::Active
        };
        if !by_rule || m.delivery_count != count {
            f.locked_rows += 1;
        }
    }
    // 15.3 and 14.3: every acknowledged send is here or was completed; completed stays gone.
    let present: BTreeSet<i64> = work.iter().map(|m| m.seq.0).collect();
    f.lost_sends = ledger
        .sent
        .iter()
        .filter(|s| !present.contains(s) && !ledger.completing.contains(s))
        .count() as u64;
    f.resurrected = ledger.done.iter().filter(|s| present.contains(s)).count() as u64;
    f.bound_violations = work
        .iter()
        .filter(|m| m.delivery_count > MAX_DELIVERY)
        .count() as u64;
    // 15.1: business rows and outbox messages are equal sets.
    let rows: BTreeSet<i64> = store
        .in_tx(async |tx| F::business_rows(tx).await)
        .await?
        .into_iter()
        .collect();
    let messages: BTreeSet<i64> = outbox
        .iter()
        .filter_map(|m| {
            std::str::from_utf8(m.body())
                .ok()?
                .strip_prefix("o-")?
                .parse()
                .ok()
        })
        .collect();
    let torn: BTreeSet<i64> = rows.symmetric_difference(&messages).copied().collect();
    f.torn = torn.len() as u64;
    f.lost_outbox = ledger
        .outbox
        .iter()
        .filter(|id| !rows.contains(id) || !messages.contains(id))
        .count() as u64;
    store.close().await;
    if let Some(verdict) = factory.integrity_check(dir)?
        && verdict != "ok"
    {
        f.integrity_failures += 1;
    }
    Ok(CheckReport {
        findings: f,
        torn_ids: torn,
        orphans: orphan_count,
    })
}

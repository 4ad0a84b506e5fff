//! The line rule's bookkeeping: which lines are busy, and the lines a settlement
//! leaves (crates/sql's `line`).

use std::collections::{BTreeSet, HashSet};

use mqlite_contract::Result;

use crate::enc::{Key, MessageRow};
use crate::tables::{Ix, Tables};

/// The lines among `lines` that already have a member in play in `queue`.
pub(super) fn busy_lines(
    t: &Tables<'_>,
    queue: &str,
    lines: &BTreeSet<String>,
) -> Result<HashSet<String>> {
    let mut out = HashSet::new();
    for l in lines {
        if t.first_seq(Ix::Line, &Key::new().s(queue).s(l))?.is_some() {
            out.insert(l.clone());
        }
    }
    Ok(out)
}

/// Lines whose head left play: (queue, line).
#[derive(Debug, Default)]
pub(super) struct Departed(pub(super) BTreeSet<(String, String)>);

impl Departed {
    pub(super) fn add(&mut self, row: &MessageRow) {
        if let (Some(line), false) = (&row.line, row.waiting) {
            self.0.insert((row.queue.clone(), line.clone()));
        }
    }

    /// Promotes the oldest in-play member of every line a head left (one seek each).
    pub(super) fn release(self, t: &mut Tables<'_>) -> Result<()> {
        for (q, l) in self.0 {
            if let Some(seq) = t.first_seq(Ix::Line, &Key::new().s(&q).s(&l))?
                && let Some(row) = t.row(seq)?.filter(|r| r.waiting)
            {
                let new = MessageRow {
                    waiting: false,
                    ..row.clone()
                };
                t.put(seq, Some(&row), Some(&new))?;
            }
        }
        Ok(())
    }
}

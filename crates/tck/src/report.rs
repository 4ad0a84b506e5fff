//! The report card: every case run against one store (through the typed and the
//! run-time engine), graded per promise section and per guarantee of the store
//! contract (G1–G8 and the fine print F1–F4 of docs/backends.md), with the cost pins
//! that ran. Rendered as text for a terminal, markdown for docs, JSON for CI.

use std::fmt::Write as _;
use std::sync::Arc;

use crate::harness::{Access, Erased, Typed, Verdict, verdict};
use crate::{Case, StoreFactory};

/// One case's result on one access path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaseResult {
    /// The case (its name starts with its promise: `p6_2_…`).
    pub case: &'static str,
    /// `typed` or `dyn`.
    pub path: &'static str,
    /// What became of it.
    pub verdict: Verdict,
}

impl CaseResult {
    /// The promise number, `6.2`.
    pub fn promise(&self) -> String {
        promise_of(self.case)
    }
}

fn promise_of(case: &str) -> String {
    let mut parts = case.trim_start_matches('p').splitn(3, '_');
    match (parts.next(), parts.next()) {
        (Some(a), Some(b)) => format!("{a}.{b}"),
        _ => case.to_owned(),
    }
}

fn section_of(case: &str) -> u32 {
    case.trim_start_matches('p')
        .split('_')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The promise sections of docs/promises.md.
pub const SECTIONS: &[(u32, &str)] = &[
    (1, "Peek-lock lifecycle"),
    (2, "Settlement, fenced on the lock token"),
    (3, "Idempotency and at-least-once"),
    (4, "Producer deduplication"),
    (5, "Ordering modes"),
    (6, "Dead letters"),
    (7, "Scheduling, deferral, TTL"),
    (8, "Dead-letter retention"),
    (9, "Broker auth and errors"),
    (10, "Storage and schema"),
    (11, "Topics, subscriptions and filters"),
    (12, "Naming"),
    (13, "Cancellation"),
    (14, "Concurrency"),
    (15, "Crash recovery"),
    (16, "The transactional outbox"),
    (17, "Consumer inbox"),
];

/// The guarantees of the store contract (docs/backends.md) and the cases that evidence
/// each, by name prefix. An empty list: the kit cannot show it (a store's own tests or
/// its design must).
pub const GUARANTEES: &[(&str, &str, &[&str])] = &[
    (
        "G1",
        "every send stored durably, in order, under a sequence number that only grows",
        &["p1_1_", "p1_6_", "p14_3_", "p14_4_"],
    ),
    (
        "G2",
        "a claim picks the eligible head and locks it in one indivisible step",
        &["p1_2_", "p1_5_", "p2_9_", "p14_1_"],
    ),
    (
        "G3",
        "ordered lookups per state at O(log n) however deep the backlog",
        &["p1_4_", "p5_6_", "p7_1_"],
    ),
    (
        "G4",
        "secondary lookups: dedup by key, dead letters per queue, messages by expiry",
        &["p4_", "p6_", "p7_2_", "p8_"],
    ),
    (
        "G5",
        "transactions over many rows, all or nothing, open to the application's tables",
        &["p1_6_", "p13_4_", "p14_6_", "p16_"],
    ),
    (
        "G6",
        "after a crash the data alone is the truth; leases are rows",
        &["p3_1_", "p3_4_integrity", "p14_3_", "p14_5_"],
    ),
    ("G7", "deleting in bulk gives the space back", &[]),
    ("G8", "in the process, no server beside it", &[]),
    (
        "F1",
        "conditional writes: token, state and lease deadline compared and written at once",
        &["p2_6_", "p14_2_"],
    ),
    (
        "F2",
        "a serialization story for the claim path",
        &["p13_2_", "p14_1_"],
    ),
    (
        "F3",
        "receipts, attempts and dedup entries in the operation's own commit",
        &["p3_2_", "p3_3_", "p4_3_"],
    ),
    (
        "F4",
        "a durability point and a guard against a second writer",
        &["p10_1_", "p10_2_"],
    ),
];

/// The cases whose cost they pin: the work counter (rows or index entries a claim
/// visits behind a blocked backlog).
pub const COST_PINS: &[&str] = &["p5_6_claim_work_is_flat_in_the_backlog"];

/// A grade: what the cases behind it say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grade {
    /// Every case behind it passed.
    Pass,
    /// Some passed; the others could not run here (named with their reasons).
    Partial(Vec<String>),
    /// None could run here (the reasons).
    NotShown(Vec<String>),
    /// These cases failed, with their first failure.
    Fail(Vec<String>),
    /// No case of the kit evidences it.
    NotGraded,
}

impl Grade {
    fn of<'a>(results: impl Iterator<Item = &'a CaseResult>) -> Grade {
        let (mut passed, mut skipped, mut failed) = (0, Vec::new(), Vec::new());
        for r in results {
            match &r.verdict {
                Verdict::Pass => passed += 1,
                Verdict::Skip(why) => {
                    let line = format!("{} ({}): {why}", r.case, r.path);
                    skipped.push(line);
                }
                Verdict::Fail(why) => {
                    let first = why.lines().next().unwrap_or("failed");
                    failed.push(format!("{} ({}): {first}", r.case, r.path));
                }
            }
        }
        if !failed.is_empty() {
            Grade::Fail(failed)
        } else if passed == 0 && skipped.is_empty() {
            Grade::NotGraded
        } else if passed == 0 {
            Grade::NotShown(skipped)
        } else if skipped.is_empty() {
            Grade::Pass
        } else {
            Grade::Partial(skipped)
        }
    }

    /// One word for tables: pass, partial, not shown, FAIL, not graded.
    pub fn word(&self) -> &'static str {
        match self {
            Grade::Pass => "pass",
            Grade::Partial(_) => "partial",
            Grade::NotShown(_) => "not shown",
            Grade::Fail(_) => "FAIL",
            Grade::NotGraded => "not graded by the kit",
        }
    }

    /// The lines behind the word (skips with reasons, failures with their first line).
    pub fn details(&self) -> &[String] {
        match self {
            Grade::Partial(v) | Grade::NotShown(v) | Grade::Fail(v) => v,
            Grade::Pass | Grade::NotGraded => &[],
        }
    }
}

/// A store's report card.
#[derive(Debug, Clone)]
pub struct ReportCard {
    /// The store's name.
    pub store: String,
    /// Every case, both paths.
    pub results: Vec<CaseResult>,
    /// The store's query-plan pins (SQL stores): each statement's verdict.
    pub plans: Vec<(String, std::result::Result<(), String>)>,
    /// The short benchmark beside the SQLite store, when it was run.
    pub bench: Option<crate::bench::Beside>,
}

/// Runs every case against `factory`'s store through both engines and returns the
/// card. `progress` hears `(done, total, case)` after each case.
pub fn grade<F: StoreFactory + Clone>(
    store: &str,
    factory: F,
    progress: &mut dyn FnMut(usize, usize, &str),
) -> ReportCard {
    let typed = Arc::new(Typed(factory.clone()));
    let erased = Arc::new(Erased(factory));
    let typed_cases = crate::cases::all::<Typed<F>>();
    let erased_cases = crate::cases::all::<Erased<F>>();
    let total = typed_cases.len() + erased_cases.len();
    let mut results = Vec::with_capacity(total);
    run_all(&typed, &typed_cases, total, &mut results, progress);
    run_all(&erased, &erased_cases, total, &mut results, progress);
    let plans = plan_pins(typed.factory());
    ReportCard {
        store: store.to_owned(),
        results,
        plans,
        bench: None,
    }
}

/// The store's plan pins on a fresh database of its own.
fn plan_pins<F: StoreFactory>(factory: &F) -> Vec<(String, std::result::Result<(), String>)> {
    let run = || -> std::result::Result<_, String> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        Ok(rt.block_on(factory.plan_pins(dir.path())))
    };
    run().unwrap_or_else(|e| vec![("plans".to_owned(), Err(e))])
}

fn run_all<A: Access>(
    access: &Arc<A>,
    cases: &[Case<A>],
    total: usize,
    results: &mut Vec<CaseResult>,
    progress: &mut dyn FnMut(usize, usize, &str),
) {
    for case in cases {
        results.push(CaseResult {
            case: case.name,
            path: access.label(),
            verdict: verdict(access, case),
        });
        progress(results.len(), total, case.name);
    }
}

impl ReportCard {
    /// Counts: (passed, skipped, failed).
    pub fn counts(&self) -> (usize, usize, usize) {
        let mut c = (0, 0, 0);
        for r in &self.results {
            match r.verdict {
                Verdict::Pass => c.0 += 1,
                Verdict::Skip(_) => c.1 += 1,
                Verdict::Fail(_) => c.2 += 1,
            }
        }
        c
    }

    /// Whether nothing failed.
    pub fn passed(&self) -> bool {
        self.counts().2 == 0
    }

    /// The grade of each promise section that has cases.
    pub fn sections(&self) -> Vec<(u32, &'static str, Grade)> {
        SECTIONS
            .iter()
            .filter_map(|(n, title)| {
                let mut of = self
                    .results
                    .iter()
                    .filter(|r| section_of(r.case) == *n)
                    .peekable();
                of.peek()?;
                Some((*n, *title, Grade::of(of)))
            })
            .collect()
    }

    /// The grade of each guarantee, from the cases that evidence it.
    pub fn guarantees(&self) -> Vec<(&'static str, &'static str, Grade)> {
        GUARANTEES
            .iter()
            .map(|(id, what, prefixes)| {
                let of = self
                    .results
                    .iter()
                    .filter(|r| prefixes.iter().any(|p| r.case.starts_with(p)));
                (*id, *what, Grade::of(of))
            })
            .collect()
    }

    /// The cost pins' grades: the work counter's case, and the store's plan pins when
    /// it has a query planner (one row for every statement's plan).
    pub fn cost_pins(&self) -> Vec<(String, Grade)> {
        let mut out: Vec<(String, Grade)> = COST_PINS
            .iter()
            .map(|pin| {
                let g = Grade::of(self.results.iter().filter(|r| r.case == *pin));
                ((*pin).to_owned(), g)
            })
            .collect();
        if !self.plans.is_empty() {
            let failed: Vec<String> = self
                .plans
                .iter()
                .filter_map(|(name, v)| v.as_ref().err().map(|why| format!("{name}: {why}")))
                .collect();
            let grade = if failed.is_empty() {
                Grade::Pass
            } else {
                Grade::Fail(failed)
            };
            out.push((
                format!(
                    "query plans: none of {} statements walks a growing table; each seeks its index",
                    self.plans.len()
                ),
                grade,
            ));
        }
        out
    }

    /// The card as markdown (docs, CI summaries).
    pub fn to_markdown(&self) -> String {
        let (pass, skip, fail) = self.counts();
        let mut out = String::new();
        let _ = writeln!(out, "### {}\n", self.store);
        let _ = writeln!(
            out,
            "{} trials (every case through the typed and the run-time engine): {pass} \
             passed, {skip} skipped, {fail} failed.\n",
            self.results.len()
        );
        let _ = writeln!(
            out,
            "| promise section | grade | behind it |\n|---|---|---|"
        );
        for (n, title, g) in self.sections() {
            let _ = writeln!(out, "| {n} {title} | {} | {} |", g.word(), cell(&g));
        }
        let _ = writeln!(out, "\n| guarantee | grade | behind it |\n|---|---|---|");
        for (id, what, g) in self.guarantees() {
            let _ = writeln!(out, "| {id} {what} | {} | {} |", g.word(), cell(&g));
        }
        let _ = writeln!(out, "\n| cost pin | grade | behind it |\n|---|---|---|");
        for (pin, g) in self.cost_pins() {
            let _ = writeln!(out, "| {pin} | {} | {} |", g.word(), cell(&g));
        }
        if let Some(b) = &self.bench {
            let _ = writeln!(
                out,
                "\n| short benchmark | {} | SQLite, same run | × SQLite |\n|---|---|---|---|",
                self.store
            );
            for (path, store, sqlite, ratio) in b.rows() {
                let _ = writeln!(out, "| {path} | {store} | {sqlite} | {ratio:.2} |");
            }
        }
        out
    }

    /// The card as plain text (a terminal).
    pub fn to_text(&self) -> String {
        let (pass, skip, fail) = self.counts();
        let mut out = String::new();
        let _ = writeln!(
            out,
            "report card: {} — {pass} passed, {skip} skipped, {fail} failed ({} trials)",
            self.store,
            self.results.len()
        );
        let mut block = |title: &str, rows: Vec<(String, Grade)>| {
            let _ = writeln!(out, "\n{title}");
            for (name, g) in rows {
                let _ = writeln!(out, "  {:<10} {name}", g.word());
                for d in g.details() {
                    let _ = writeln!(out, "      {d}");
                }
            }
        };
        block(
            "promises",
            self.sections()
                .into_iter()
                .map(|(n, t, g)| (format!("{n} {t}"), g))
                .collect(),
        );
        block(
            "guarantees",
            self.guarantees()
                .into_iter()
                .map(|(id, w, g)| (format!("{id} {w}"), g))
                .collect(),
        );
        block("cost pins", self.cost_pins());
        if let Some(b) = &self.bench {
            let _ = writeln!(
                out,
                "\nshort benchmark (× the SQLite store's speed, same run)"
            );
            for (path, store, sqlite, ratio) in b.rows() {
                let _ = writeln!(out, "  {ratio:>6.2}x  {path}: {store} (SQLite {sqlite})");
            }
        }
        out
    }

    /// The card as JSON (CI).
    pub fn to_json(&self) -> String {
        let grade = |g: &Grade| serde_json::json!({"grade": g.word(), "details": g.details()});
        let value = serde_json::json!({
            "store": self.store,
            "passed": self.counts().0,
            "skipped": self.counts().1,
            "failed": self.counts().2,
            "sections": self.sections().iter().map(|(n, t, g)| {
                serde_json::json!({"section": n, "title": t, "grade": grade(g)})
            }).collect::<Vec<_>>(),
            "guarantees": self.guarantees().iter().map(|(id, w, g)| {
                serde_json::json!({"id": id, "guarantee": w, "grade": grade(g)})
            }).collect::<Vec<_>>(),
            "cost_pins": self.cost_pins().iter().map(|(p, g)| {
                serde_json::json!({"case": p, "grade": grade(g)})
            }).collect::<Vec<_>>(),
            "bench": self.bench.map(|b| b.rows().into_iter().map(|(path, store, sqlite, ratio)| {
                serde_json::json!({"path": path, "store": store, "sqlite": sqlite, "ratio": ratio})
            }).collect::<Vec<_>>()),
            "cases": self.results.iter().map(|r| {
                let (verdict, detail) = match &r.verdict {
                    Verdict::Pass => ("pass", String::new()),
                    Verdict::Skip(w) => ("skip", w.clone()),
                    Verdict::Fail(w) => ("fail", w.clone()),
                };
                serde_json::json!({"case": r.case, "path": r.path, "promise": r.promise(),
                                   "verdict": verdict, "detail": detail})
            }).collect::<Vec<_>>(),
        });
        serde_json::to_string_pretty(&value).unwrap_or_default()
    }
}

/// A markdown table cell: the details, escaped, on one line.
fn cell(g: &Grade) -> String {
    g.details()
        .iter()
        .map(|d| d.replace('|', "\\|").replace('\n', " "))
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(case: &'static str, verdict: Verdict) -> CaseResult {
        CaseResult {
            case,
            path: "typed",
            verdict,
        }
    }

    #[test]
    fn grades_follow_the_cases_behind_them() {
        let card = ReportCard {
            store: "toy".into(),
            plans: vec![("CLAIM".into(), Err("walks".into()))],
            bench: None,
            results: vec![
                result("p1_1_a", Verdict::Pass),
                result("p1_2_b", Verdict::Fail("assertion failed: x\nmore".into())),
                result("p2_1_c", Verdict::Pass),
                result("p2_6_d", Verdict::Skip("no fence here".into())),
                result("p10_1_e", Verdict::Skip("no lock".into())),
            ],
        };
        let sections = card.sections();
        assert_eq!(
            sections[0].2,
            Grade::Fail(vec!["p1_2_b (typed): assertion failed: x".into()])
        );
        assert_eq!(sections[1].2.word(), "partial");
        assert_eq!(sections[2].2.word(), "not shown");
        let g = |id: &str| {
            card.guarantees()
                .into_iter()
                .find(|(i, _, _)| *i == id)
                .map(|(_, _, g)| g)
        };
        assert_eq!(g("G1"), Some(Grade::Pass));
        assert_eq!(g("G2").map(|g| g.word()), Some("FAIL"));
        assert_eq!(g("G7"), Some(Grade::NotGraded));
        assert_eq!(g("F4").map(|g| g.word()), Some("not shown"));
        assert!(!card.passed());
        assert!(
            card.to_markdown()
                .contains("| 1 Peek-lock lifecycle | FAIL |")
        );
        assert!(card.to_json().contains("\"failed\": 1"));
        let pins = card.cost_pins();
        assert_eq!(pins[1].1, Grade::Fail(vec!["CLAIM: walks".into()]));
    }

    #[test]
    fn promise_numbers_come_from_case_names() {
        assert_eq!(promise_of("p10_2_foreign_schema_token_is_refused"), "10.2");
        assert_eq!(section_of("p10_2_foreign_schema_token_is_refused"), 10);
    }
}

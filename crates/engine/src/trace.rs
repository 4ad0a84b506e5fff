//! The trace: diagnose an event by boundary. A persisted intent, an accepted message
//! and an applied effect are three facts, often in three databases no transaction
//! spans. The trace reads each boundary's own evidence for one identity `(source, id)`
//! and says, per boundary, what it shows, where it was read, and what it cannot tell.
//!
//! ```no_run
//! # use mqlite_engine::{Engine, trace::Trace};
//! use mqlite_contract::OutboxStore;
//! # async fn demo<P: OutboxStore, Q: OutboxStore, C: OutboxStore>(
//! #     producer: Engine<P>, queue: Engine<Q>, consumer: Engine<C>,
//! # ) -> mqlite_contract::Result<()> {
//! let mut trace = Trace::new("https://shop.example/orders", "order-42");
//! trace.producer(&producer, "producer.db").await?;
//! trace.queue(&queue, "orders", "queue.db").await?;
//! trace.consumers(&consumer, "consumer.db", &["projection-v1"]).await?;
//! println!("{trace}");
//! # Ok(()) }
//! ```

use std::fmt;

use crate::engine::Engine;
use mqlite_contract::error::Result;
use mqlite_contract::event::{EventIdentity, Fingerprint, fingerprint};
use mqlite_contract::side_tables::{InboxMarker, RelayIntent, SentEvidence};
use mqlite_contract::store::{HasOutbox, OutboxStore, StoreTx};
use mqlite_contract::types::{MessageState, OutMessage};

/// One boundary's evidence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Boundary {
    /// Which boundary: `producer outbox`, `queue <name>`, `consumer <name>`.
    pub boundary: String,
    /// What the evidence shows, in a word: `pending`, `published`, `refused`, `active`,
    /// `completed`, `dead_lettered`, `applied`, `conflict`, `none`.
    pub state: String,
    /// The evidence, in a sentence.
    pub detail: String,
    /// Where it was read.
    pub evidence: String,
    /// What it cannot tell, if anything.
    pub unknown: Option<String>,
}

/// The trace of one identity (see the module).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trace {
    /// The identity traced.
    pub event: EventIdentity,
    /// One row per boundary read, in the order read (producer, queue, consumers).
    pub rows: Vec<Boundary>,
    /// The envelope's fingerprint, from the first boundary that held the message.
    pub fingerprint: Option<Fingerprint>,
    published: Option<bool>,
}

/// An epoch-ms time as RFC 3339 UTC (`2026-11-30T10:00:00.000Z`).
fn when(ms: i64) -> String {
    let (days, in_day) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    // Days since 1970-01-01 to a civil date (the proleptic Gregorian calendar).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (h, m, sec, milli) = (
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000,
    );
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{sec:02}.{milli:03}Z")
}

impl Trace {
    /// A trace of `(source, id)` with no boundary read yet.
    pub fn new(source: &str, id: &str) -> Self {
        Trace {
            event: EventIdentity::new(source, id),
            rows: Vec::new(),
            fingerprint: None,
            published: None,
        }
    }

    fn saw(&mut self, m: &OutMessage) {
        if self.fingerprint.is_none() {
            self.fingerprint = Some(fingerprint(m));
        }
    }

    /// Reads the producer's relay outbox in `engine`'s database (`label` names it).
    pub async fn producer<P: HasOutbox<N>, N: OutboxStore>(
        &mut self,
        engine: &Engine<P>,
        label: &str,
    ) -> Result<()> {
        let (source, id) = (self.event.source.clone(), self.event.id.clone());
        let intents: Vec<RelayIntent> = engine
            .tx::<N, _, _>(async move |t| t.native().relay_find(&source, &id).await)
            .await?;
        let evidence = format!("mqlite_relay in {label}");
        let row = match intents.last() {
            None => {
                self.published = Some(false);
                Boundary {
                    boundary: "producer outbox".into(),
                    state: "none".into(),
                    detail: "no intent with this identity".into(),
                    evidence,
                    unknown: Some(
                        "whether the producer never committed it, or its published intent \
                         was swept after retention"
                            .into(),
                    ),
                }
            }
            Some(last) => {
                self.saw(&last.message);
                let more = match intents.len() {
                    1 => String::new(),
                    n => format!(" ({n} intents share this identity)"),
                };
                match (last.published_at_ms, last.refused_at_ms) {
                    (_, Some(at)) => {
                        self.published = Some(false);
                        Boundary {
                            boundary: "producer outbox".into(),
                            state: "refused".into(),
                            detail: format!(
                                "intent #{} for queue {} written at {}, refused at {}: the \
                                 queue holds this identity with another payload{more}",
                                last.seq,
                                last.queue,
                                when(last.created_at_ms),
                                when(at)
                            ),
                            evidence,
                            unknown: Some(
                                "which payload is right: the relay sends it no more; an \
                                 operator decides"
                                    .into(),
                            ),
                        }
                    }
                    (Some(at), None) => {
                        self.published = Some(true);
                        Boundary {
                            boundary: "producer outbox".into(),
                            state: "published".into(),
                            detail: format!(
                                "intent #{} for queue {} written at {}, published at {}{more}",
                                last.seq,
                                last.queue,
                                when(last.created_at_ms),
                                when(at)
                            ),
                            evidence,
                            unknown: Some(
                                "published means the queue accepted it once; a crash before \
                                 the mark may have sent it twice"
                                    .into(),
                            ),
                        }
                    }
                    (None, None) => {
                        self.published = Some(false);
                        Boundary {
                            boundary: "producer outbox".into(),
                            state: "pending".into(),
                            detail: format!(
                                "intent #{} for queue {} written at {}, not yet published{more}",
                                last.seq,
                                last.queue,
                                when(last.created_at_ms)
                            ),
                            evidence,
                            unknown: Some(
                                "whether a send already reached the queue before a crash (the \
                                 queue row says)"
                                    .into(),
                            ),
                        }
                    }
                }
            }
        };
        self.rows.push(row);
        Ok(())
    }

    /// Reads the queue `queue` in `engine`'s database: the dedup entry of the identity
    /// and the message row while it lives.
    pub async fn queue<Q: HasOutbox<N>, N: OutboxStore>(
        &mut self,
        engine: &Engine<Q>,
        queue: &str,
        label: &str,
    ) -> Result<()> {
        let key = mqlite_contract::dedup::id_key(&self.event.dedup_key());
        let q = queue.to_owned();
        let now = engine.clock().now_ms();
        let found: SentEvidence = engine
            .tx::<N, _, _>(async move |t| t.native().find_sent(&q, &key).await)
            .await?;
        let evidence = format!("dedup entry and message row of queue {queue} in {label}");
        let boundary = format!("queue {queue}");
        let row = match (&found.dedup, &found.message) {
            (_, Some(m)) => {
                self.saw(&m.content);
                let mut detail = format!(
                    "#{} {} (delivery count {})",
                    m.seq,
                    m.state.as_str(),
                    m.delivery_count
                );
                if m.state == MessageState::DeadLettered {
                    detail.push_str(&format!(
                        ": {} ({})",
                        m.dead_letter_reason.as_deref().unwrap_or("no reason"),
                        m.dead_letter_description.as_deref().unwrap_or("")
                    ));
                }
                Boundary {
                    boundary,
                    state: m.state.as_str().into(),
                    detail,
                    evidence,
                    unknown: None,
                }
            }
            (Some((seq, expires)), None) => Boundary {
                boundary,
                state: "completed".into(),
                detail: format!(
                    "accepted as #{seq}; the row is gone: completed (or purged){}",
                    if *expires <= now {
                        ", dedup entry expired and not yet swept"
                    } else {
                        ""
                    }
                ),
                evidence,
                unknown: Some("completed and purged leave the same evidence".into()),
            },
            (None, None) => Boundary {
                boundary,
                state: "none".into(),
                detail: "no dedup entry and no row with this identity".into(),
                evidence,
                unknown: Some(match self.published {
                    Some(true) => "published, no queue evidence, dedup window expired: \
                                   delivery unknown"
                        .into(),
                    Some(false) => "not sent yet, or sent before a crash and already gone".into(),
                    None => "never sent, or gone after the dedup window expired (a queue \
                             without a dedup window keeps no entry to find it by)"
                        .into(),
                }),
            },
        };
        self.rows.push(row);
        Ok(())
    }

    /// Reads the inbox markers in `engine`'s database (a consumer's): one row per
    /// consumer in `expected` and per other consumer found.
    pub async fn consumers<C: HasOutbox<N>, N: OutboxStore>(
        &mut self,
        engine: &Engine<C>,
        label: &str,
        expected: &[&str],
    ) -> Result<()> {
        let (source, id) = (self.event.source.clone(), self.event.id.clone());
        let markers: Vec<InboxMarker> = engine
            .tx::<N, _, _>(async move |t| t.native().inbox_markers(&source, &id).await)
            .await?;
        let evidence = format!("mqlite_inbox in {label}");
        let mut names: Vec<String> = expected.iter().map(|s| (*s).to_owned()).collect();
        for m in &markers {
            if !names.contains(&m.consumer) {
                names.push(m.consumer.clone());
            }
        }
        for name in names {
            let boundary = format!("consumer {name}");
            let row = match markers.iter().find(|m| m.consumer == name) {
                None => Boundary {
                    boundary,
                    state: "none".into(),
                    detail: "no marker: not applied".into(),
                    evidence: evidence.clone(),
                    unknown: Some(
                        "whether it is still on its way, or its marker was swept after \
                         retention"
                            .into(),
                    ),
                },
                Some(m) => {
                    let (state, matches, unknown) = match self.fingerprint {
                        Some(f) if f == m.fingerprint => ("applied", "matches", None),
                        Some(_) => ("conflict", "differs from the envelope traced", None),
                        None => (
                            "applied",
                            "not compared",
                            Some("no other boundary still holds the envelope".to_owned()),
                        ),
                    };
                    Boundary {
                        boundary,
                        state: state.into(),
                        detail: format!(
                            "applied at {}, fingerprint {} {matches}",
                            when(m.applied_at_ms),
                            short(m.fingerprint)
                        ),
                        evidence: evidence.clone(),
                        unknown,
                    }
                }
            };
            self.rows.push(row);
        }
        Ok(())
    }

    /// Where the event stopped: the last boundary with positive evidence, in a sentence.
    pub fn verdict(&self) -> String {
        let positive = |r: &Boundary| r.state != "none" && r.state != "pending";
        let consumers: Vec<&Boundary> = self
            .rows
            .iter()
            .filter(|r| r.boundary.starts_with("consumer "))
            .collect();
        if let Some(r) = self.rows.iter().find(|r| r.state == "dead_lettered") {
            return format!("stopped at {}: dead-lettered", r.boundary);
        }
        if let Some(r) = consumers.iter().find(|r| r.state == "conflict") {
            return format!("{}: conflict (same identity, other payload)", r.boundary);
        }
        if !consumers.is_empty() && consumers.iter().all(|r| r.state == "applied") {
            return "applied by every consumer traced".into();
        }
        if let Some(r) = self.rows.first()
            && r.state == "refused"
        {
            return "stuck in the producer outbox: refused by the queue (same identity, \
                    other payload)"
                .into();
        }
        match self.rows.iter().rev().find(|r| positive(r)) {
            Some(r) => format!("last confirmed at {} ({})", r.boundary, r.state),
            None => match self.rows.first() {
                Some(r) if r.state == "pending" => {
                    "stuck in the producer outbox: pending, never published".into()
                }
                _ => "no boundary holds evidence of this event".into(),
            },
        }
    }

    /// The trace as JSON, for scripts.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "source": self.event.source,
            "id": self.event.id,
            "fingerprint": self.fingerprint.map(|f| f.to_string()),
            "verdict": self.verdict(),
            "boundaries": self.rows.iter().map(|r| serde_json::json!({
                "boundary": r.boundary,
                "state": r.state,
                "detail": r.detail,
                "evidence": r.evidence,
                "unknown": r.unknown,
            })).collect::<Vec<_>>(),
        })
    }
}

fn short(f: Fingerprint) -> String {
    f.to_string()[..12].to_owned()
}

impl fmt::Display for Trace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "event ({}, {})", self.event.source, self.event.id)?;
        let w = self
            .rows
            .iter()
            .map(|r| r.boundary.len())
            .max()
            .unwrap_or(8);
        for r in &self.rows {
            writeln!(f, "  {:w$}  {:13}  {}", r.boundary, r.state, r.detail)?;
            writeln!(f, "  {:w$}  {:13}  evidence: {}", "", "", r.evidence)?;
            if let Some(u) = &r.unknown {
                writeln!(f, "  {:w$}  {:13}  unknown: {u}", "", "")?;
            }
        }
        write!(f, "verdict: {}", self.verdict())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn times_read_as_utc() {
        assert_eq!(super::when(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(super::when(1_764_500_000_123), "2025-11-30T10:53:20.123Z");
        assert_eq!(super::when(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }
}

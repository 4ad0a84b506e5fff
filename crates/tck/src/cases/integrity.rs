//! Section 3 (3.4): the integrity sweep — a randomized run with hashed bodies, consumed
//! concurrently with abandons, lapsed leases and redeliveries.

use mqlite_contract::{
    Error, OutMessage, ReceiveOptions, SeqNumber, dedup::body_digest, from_millis,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::config;
use crate::harness::{Access, Ctx, TckResult};

const Q: &str = "q";

/// A small deterministic generator (xorshift64*), so a failing run can be replayed from
/// its seed without a dependency.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a non-zero seed.
    pub fn new(seed: u64) -> Self {
        Rng(seed.max(1))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

/// 3.4 Integrity: N messages with hashed random bodies, consumed concurrently with
/// abandons, expiries and redeliveries, are each delivered, intact, and never more often
/// than the delivery bound.
pub async fn p3_4_integrity_sweep<F: Access>(ctx: Ctx<F>) -> TckResult {
    let bound = 8;
    let mq = ctx.engine_with_queue(Q, config(1_000, bound)).await?;
    let seed = std::env::var("MQLITE_TCK_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_u64);
    let mut rng = Rng::new(seed);
    let n = 400;
    let mut sent: HashMap<SeqNumber, String> = HashMap::new();
    for _ in 0..n / 20 {
        let batch: Vec<OutMessage> = (0..20)
            .map(|_| {
                let len = rng.below(2048) as usize;
                let body: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
                let digest = body_digest(&body);
                OutMessage::new(body).with_property("sha256", digest)
            })
            .collect();
        let digests: Vec<String> = batch
            .iter()
            .map(|m| m.properties["sha256"].clone())
            .collect();
        for (seq, d) in mq.send_batch(Q, batch).await?.into_iter().zip(digests) {
            sent.insert(seq, d);
        }
    }
    let deliveries: Arc<Mutex<HashMap<SeqNumber, i64>>> = Arc::default();
    let completed: Arc<Mutex<Vec<SeqNumber>>> = Arc::default();
    for round in 0..200u64 {
        let mut tasks = Vec::new();
        for worker in 0..3u64 {
            let (mq, deliveries, completed) = (mq.clone(), deliveries.clone(), completed.clone());
            let mut rng = Rng::new(seed ^ (round << 8) ^ worker);
            let expected = sent.clone();
            tasks.push(tokio::spawn(async move {
                let got = mq
                    .receive(Q, ReceiveOptions::batch(1 + rng.below(16) as u32))
                    .await?;
                for m in got {
                    let digest = body_digest(m.body());
                    assert_eq!(
                        Some(&digest),
                        expected.get(&m.seq),
                        "{} arrived intact",
                        m.seq
                    );
                    assert_eq!(m.content.properties.get("sha256"), Some(&digest));
                    assert!(m.delivery_count <= bound, "{} over its bound", m.seq);
                    deliveries
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(m.seq, m.delivery_count);
                    match rng.below(10) {
                        0 | 1 => mq.abandon(Q, &m, Duration::ZERO).await?,
                        2 => mq.abandon(Q, &m, from_millis(500)).await?,
                        3 => {} // the consumer vanishes; the lease lapses
                        _ => {
                            mq.complete(Q, &m).await?;
                            completed
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .push(m.seq);
                        }
                    }
                }
                Ok::<_, Error>(())
            }));
        }
        for t in tasks {
            t.await??;
        }
        ctx.clock.advance(500);
        mq.run_sweeps().await?;
        if mq.stats(Q).await?.total == mq.stats(Q).await?.dead_lettered {
            break;
        }
    }
    let completed = completed.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let dead = mq
        .peek(
            Q,
            mqlite_contract::PeekOptions {
                state: Some(mqlite_contract::MessageState::DeadLettered),
                max: 1000,
                ..Default::default()
            },
        )
        .await?;
    // Every message ended completed (once) or dead-lettered at its bound: none lost.
    let mut accounted: HashMap<SeqNumber, &str> = HashMap::new();
    for s in &completed {
        assert!(
            accounted.insert(*s, "completed").is_none(),
            "{s} completed twice"
        );
    }
    for d in &dead {
        assert_eq!(d.delivery_count, bound, "dead-lettered only at the bound");
        assert_eq!(
            Some(&body_digest(d.body())),
            sent.get(&d.seq),
            "dead letter intact"
        );
        assert!(
            accounted.insert(d.seq, "dead").is_none(),
            "{} both done and dead",
            d.seq
        );
    }
    assert_eq!(
        accounted.len(),
        n,
        "every message accounted for, seed {seed}"
    );
    for seq in sent.keys() {
        assert!(accounted.contains_key(seq), "{seq} lost (seed {seed})");
    }
    Ok(())
}

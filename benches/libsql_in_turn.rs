//! The libSQL bench's single operations timed in turn: the store and the bare libsql
//! client, each on its own sqld on loopback (the world of `benches/libsql.rs`), each round
//! running every path once on each side, starting from a different one. The machine's
//! drift between criterion runs (a third and more on this VM) falls on both sides
//! alike, so the ratio of the two is steadier than criterion's, run after run.
//!
//! Paths: a send of one message (one round trip on each side), and a receive of one
//! with its completion (two on each side: `receive_one` and `complete_batch` of one
//! against an autocommit `UPDATE … RETURNING` and a `DELETE`), as the bench times them.
//!
//! ```sh
//! cargo run --release -p mqlite-benches --example libsql_in_turn -- 2000
//! ```
//!
//! Needs sqld (scripts/install-sqld.sh).

use std::time::Instant;

use mqlite_contract::{LockRef, OutMessage};

#[path = "libsql_world.rs"]
#[allow(
    dead_code,
    reason = "the criterion bench's round-trip counts and batch send are not timed here"
)]
mod libsql_world;

use libsql_world::{Q, World, world};

type Failure = Box<dyn std::error::Error>;

/// The paths, each side's in turn.
const PATHS: [&str; 4] = [
    "send 1: mqlite",
    "send 1: bare",
    "receive 1 + complete: mqlite",
    "receive 1 + complete: bare",
];

/// Runs path `k` once; its time in µs.
async fn once(w: &World, k: usize) -> Result<f64, Failure> {
    let start = Instant::now();
    match k {
        0 => {
            w.engine.send(Q, OutMessage::new(w.next())).await?;
        }
        1 => w.bare_send(w.next()).await,
        2 => {
            let m = w
                .engine
                .receive_one(Q)
                .await?
                .ok_or("a message to receive")?;
            w.engine.complete_batch(Q, &[LockRef::from(&m)]).await?;
        }
        _ => w.bare_receive_complete().await,
    }
    Ok(start.elapsed().as_secs_f64() * 1e6)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<(), Failure> {
    let rounds = mqlite_benches::rounds_arg(2000)?;
    mqlite_testbed::libsql::sqld_binary()?;
    let w = world();
    let mut times = vec![Vec::with_capacity(rounds); PATHS.len()];
    w.rt.block_on(async {
        // The first send reads the queue's row; a backlog for every receive below, on
        // each side (the sends in rounds add one more each).
        for _ in 0..rounds.div_ceil(64) {
            let batch = (0..64).map(|_| OutMessage::new(w.next())).collect();
            w.engine.send_batch(Q, batch).await?;
            w.bare_send_64((0..64).map(|_| w.next()).collect()).await;
        }
        for round in 0..rounds {
            for k in 0..PATHS.len() {
                let k = (k + round) % PATHS.len();
                times[k].push(once(&w, k).await?);
            }
        }
        Ok::<_, Failure>(())
    })?;
    let medians: Vec<f64> = times.iter_mut().map(|v| median(v)).collect();
    let means: Vec<f64> = times
        .iter()
        .map(|v| v.iter().sum::<f64>() / v.len() as f64)
        .collect();
    println!("{rounds} rounds, each path once a round on each side, in turn");
    for (k, name) in PATHS.iter().enumerate() {
        println!(
            "{name:<30} median {:8.1} µs   mean {:8.1} µs",
            medians[k], means[k]
        );
    }
    for (path, (m, b)) in [("send 1", (0, 1)), ("receive 1 + complete", (2, 3))] {
        println!(
            "{path:<22} bare ÷ mqlite: {:.3} by the medians, {:.3} by the means",
            medians[b] / medians[m],
            means[b] / means[m]
        );
    }
    Ok(())
}

//! The main job on the embedded default: one local SQLite file, a queue, and the whole
//! peek-lock lifecycle — send, receive, complete, an abandon and its redelivery, and a
//! dead letter — printed as it happens.
//!
//! ```text
//! cargo run --release -p mqlite --example quickstart [path/to/file.db]
//! ```

use std::time::Duration;

use mqlite::{Engine, OutMessage, PeekOptions, QueueConfig, ReceiveOptions};

#[tokio::main]
async fn main() -> mqlite::Result<()> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "quickstart.db".to_owned());
    let mq = Engine::open(&path).await?;
    println!("opened {path}");

    let config = QueueConfig {
        max_delivery_count: 2,
        ..Default::default()
    };
    mq.create_queue("jobs", config).await?;
    mq.purge("jobs", Default::default()).await?;
    println!("queue jobs: lock 30 s, at most 2 deliveries");

    let seqs = mq
        .send_batch(
            "jobs",
            vec![
                OutMessage::new("resize photo 1"),
                OutMessage::new("resize photo 2"),
                OutMessage::new("a job that always fails"),
            ],
        )
        .await?;
    let seqs: Vec<i64> = seqs.iter().map(|s| s.0).collect();
    println!("sent three messages: {seqs:?}");

    let m = mq.receive_one("jobs").await?.expect("a message");
    println!(
        "received #{} {:?} (delivery {}, token {}, locked until {})",
        m.seq,
        String::from_utf8_lossy(m.body()),
        m.delivery_count,
        m.token(),
        m.locked_until_ms
    );
    mq.complete("jobs", &m).await?;
    println!("completed #{}", m.seq);

    let m = mq.receive_one("jobs").await?.expect("a message");
    println!("received #{}; abandoning it", m.seq);
    mq.abandon("jobs", &m, Duration::ZERO).await?;
    let again = mq.receive_one("jobs").await?.expect("the redelivery");
    println!(
        "redelivered #{} (delivery {}), the old token is fenced: {}",
        again.seq,
        again.delivery_count,
        match mq.complete("jobs", &m).await {
            Err(e) => e.to_string(),
            Ok(()) => "unexpectedly accepted".into(),
        }
    );
    mq.complete("jobs", &again).await?;
    println!("completed #{}", again.seq);

    for attempt in 1..=2 {
        let m = mq.receive_one("jobs").await?.expect("the failing job");
        println!(
            "received #{} (delivery {attempt}); it fails, abandon",
            m.seq
        );
        mq.abandon("jobs", &m, Duration::ZERO).await?;
    }
    let dead = mq
        .peek(
            "jobs",
            PeekOptions {
                state: Some(mqlite::MessageState::DeadLettered),
                ..Default::default()
            },
        )
        .await?;
    for d in &dead {
        println!(
            "dead-lettered #{} {:?}: {}",
            d.seq,
            String::from_utf8_lossy(d.body()),
            d.dead_letter_reason.as_deref().unwrap_or("")
        );
    }
    let nothing_left = mq
        .receive("jobs", ReceiveOptions::default())
        .await?
        .is_empty();
    let stats = mq.stats("jobs").await?;
    println!(
        "queue now: nothing left to receive ({nothing_left}), {} dead letter(s)",
        stats.dead_lettered
    );
    mq.close().await;
    println!("closed");
    Ok(())
}

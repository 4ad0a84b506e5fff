//! A worker: four handlers at once, each lock renewed while its handler runs, a retry
//! with backoff for a failure worth retrying, a dead letter for one that is not, and a
//! graceful stop once the queue is drained.
//!
//! ```text
//! cargo run -p mqlite --example worker [path/to/file.db]
//! ```

use std::time::Duration;

use mqlite::worker::{HandlerError, RetryPolicy};
use mqlite::{Engine, OutMessage, QueueConfig};

#[tokio::main]
async fn main() -> mqlite::Result<()> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "worker.db".to_owned());
    let mq = Engine::open(&path).await?;
    mq.create_queue("resize", QueueConfig::default()).await?;
    mq.purge("resize", Default::default()).await?;
    let jobs = (1..=12)
        .map(|i| OutMessage::new(format!("photo-{i}.jpg")))
        .collect();
    mq.send_batch("resize", jobs).await?;

    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = mq
        .worker("resize", |m| async move {
            let name = String::from_utf8_lossy(m.body()).into_owned();
            match name.as_str() {
                // A flaky dependency: the first attempt fails, the retry succeeds.
                "photo-3.jpg" if m.delivery_count == 1 => {
                    Err(HandlerError::retry("thumbnail service timed out"))
                }
                // A broken input: no retry will fix it.
                "photo-7.jpg" => Err(HandlerError::permanent("not a JPEG file")),
                _ => {
                    println!("resized {name} (delivery {})", m.delivery_count);
                    Ok(())
                }
            }
        })
        .concurrency(4)
        .poll_wait(Duration::from_millis(200))
        .retry(RetryPolicy {
            initial_backoff: Duration::from_millis(100),
            ..Default::default()
        })
        .run_until(async {
            let _ = stopped.await;
        });
    let running = tokio::spawn(worker);

    // Stop once every job is completed or dead-lettered.
    loop {
        let stats = mq.stats("resize").await?;
        if stats.total == stats.dead_lettered {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = stop.send(());
    let report = running
        .await
        .map_err(|e| mqlite::Error::invalid(format!("the worker task failed: {e}")))??;
    println!("{report:?}");
    let dead = mq.stats("resize").await?.dead_lettered;
    println!("dead letters: {dead} (photo-7.jpg: not a JPEG file)");
    assert_eq!(
        (report.completed, report.retried, report.dead_lettered),
        (11, 1, 1)
    );
    mq.close().await;
    Ok(())
}

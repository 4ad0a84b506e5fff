//! Benchmarks of mqlite live in this crate's bench targets; see docs/benchmark.md. What
//! they share lives here.

use mqlite_engine_core::{Engine, EngineOptions, QueueConfig, Store};

/// An engine over `store` with the background loops off (a bench drives everything it
/// measures) and the queue `queue` created with `config`.
pub async fn engine_with_queue<S: Store>(store: S, queue: &str, config: QueueConfig) -> Engine<S> {
    let options = EngineOptions {
        background: false,
        ..Default::default()
    };
    let engine = Engine::with_store(store, options).await.expect("engine");
    engine.create_queue(queue, config).await.expect("queue");
    engine
}

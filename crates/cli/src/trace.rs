//! `mqlite trace`: diagnose one event by boundary, reading each database directly.

use mqlite::trace::{TraceSources, trace};

use crate::args::{Output, TraceArgs};
use crate::{Failure, output};

/// Prints the trace of `--source`/`--id` over the databases given.
pub(crate) fn run(a: TraceArgs, out: Output) -> Result<(), Failure> {
    if a.producer.is_none() && a.queue_db.is_none() && a.consumer_db.is_none() {
        return Err(
            "give at least one of --producer, --queue-db (with --queue), --consumer-db".into(),
        );
    }
    let sources = TraceSources {
        producer: a.producer,
        queue: a.queue_db.zip(a.queue),
        consumers: a.consumer_db.map(|db| (db, a.consumers)),
    };
    let t = crate::runtime()?
        .block_on(trace(&a.source, &a.id, &sources))
        .map_err(|e| Failure::from(crate::chain(&e)))?;
    match out {
        Output::Json => output::json(&t.to_json()),
        Output::Table => output::line(&t.to_string()),
    }
}

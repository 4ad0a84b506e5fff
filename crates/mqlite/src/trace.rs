//! The trace by location: [`trace`] opens each boundary's database (a path, `redb:…`,
//! `libsql://…`) and reads its evidence for one event identity (see
//! [`mqlite_engine::trace`]). `mqlite trace` calls it.

use mqlite_contract::{Error, Result, SystemClock};
use mqlite_engine::EngineOptions;
pub use mqlite_engine::trace::{Boundary, Trace};

use crate::registry::{__with_kind, AnyEngine, Location, open_with, with_kind};

/// Where each boundary's evidence lives; a boundary left `None` is not read.
#[derive(Debug, Clone, Default)]
pub struct TraceSources {
    /// The producer's database (its relay outbox).
    pub producer: Option<String>,
    /// The queue's database and the queue's name.
    pub queue: Option<(String, String)>,
    /// The consumers' database and the consumer names expected there (others found
    /// are listed too).
    pub consumers: Option<(String, Vec<String>)>,
}

/// Opens a database for reading evidence. A local path that does not exist is refused
/// rather than created.
async fn open_existing(location: &str) -> Result<(AnyEngine, Location)> {
    let parsed = Location::parse(location)?;
    if let Some(path) = parsed.local_file()
        && !path.exists()
    {
        return Err(Error::invalid(format!(
            "no database at {path:?}: the trace reads existing databases only"
        )));
    }
    let options = EngineOptions {
        background: false,
        ..Default::default()
    };
    Ok((
        open_with(location, SystemClock::shared(), options).await?,
        parsed,
    ))
}

/// Runs `$body` with `$n` the concrete store type `$loc` names (the facade's one list).
macro_rules! with_native {
    ($loc:expr, $n:ident => $body:expr) => {
        with_kind!($loc.store(), $n => $body).unwrap_or_else(|| {
            Err(Error::invalid(format!(
                "this build cannot trace {:?}: enable its store's feature",
                $loc.target()
            )))
        })
    };
}

/// Traces the event `(source, id)` across the boundaries `sources` names, each read in
/// its own database, then closes them.
pub async fn trace(source: &str, id: &str, sources: &TraceSources) -> Result<Trace> {
    let mut t = Trace::new(source, id);
    if let Some(location) = &sources.producer {
        let (engine, kind) = open_existing(location).await?;
        let r = with_native!(&kind, N => t.producer::<_, N>(&engine, location).await);
        engine.close().await;
        r?;
    }
    if let Some((location, queue)) = &sources.queue {
        let (engine, kind) = open_existing(location).await?;
        let r = with_native!(&kind, N => t.queue::<_, N>(&engine, queue, location).await);
        engine.close().await;
        r?;
    }
    if let Some((location, names)) = &sources.consumers {
        let (engine, kind) = open_existing(location).await?;
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let r = with_native!(&kind, N => t.consumers::<_, N>(&engine, location, &names).await);
        engine.close().await;
        r?;
    }
    Ok(t)
}

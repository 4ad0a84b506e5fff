//! The served broker's log on stderr: `MQLITE_LOG` (falling back to `RUST_LOG`, then
//! `info`) chooses what is written, in tracing's filter syntax (`info`,
//! `warn,mqlite::access=off`, `debug`); `MQLITE_LOG_FORMAT` chooses text (the default)
//! or `json`, one object per line.

use tracing_subscriber::EnvFilter;

use crate::Failure;

/// Installs the log; an unreadable filter or format is an error naming the setting.
pub(crate) fn install() -> Result<(), Failure> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    let (name, directives) = match (var("MQLITE_LOG"), var("RUST_LOG")) {
        (Some(v), _) => ("MQLITE_LOG", v),
        (None, Some(v)) => ("RUST_LOG", v),
        (None, None) => ("the default", "info".to_owned()),
    };
    let filter = EnvFilter::builder()
        .parse(&directives)
        .map_err(|e| Failure::from(format!("{name}={directives:?} is not a log filter: {e}")))?;
    let json = match var("MQLITE_LOG_FORMAT").map(|f| f.trim().to_ascii_lowercase()) {
        None => false,
        Some(f) if f == "text" => false,
        Some(f) if f == "json" => true,
        Some(f) => {
            return Err(Failure::from(format!(
                "MQLITE_LOG_FORMAT={f:?} is not understood: text or json"
            )));
        }
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false);
    let installed = if json {
        builder.json().flatten_event(true).try_init()
    } else {
        builder.try_init()
    };
    installed.map_err(|e| Failure::from(format!("cannot install the log: {e}")))
}

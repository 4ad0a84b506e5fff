//! `mqlite vacuum`: gives a local SQLite file's free pages back to the file system,
//! through the store (so a broker holding the file refuses it, as it refuses any
//! second writer).

use mqlite::{SqliteOptions, SqliteStore, Store};

use crate::args::{Output, VacuumArgs};
use crate::{Failure, output};

/// Vacuums the file `db` names; prints the size before and after.
pub(crate) fn run(a: &VacuumArgs, db: Option<&str>, out: Output) -> Result<(), Failure> {
    let Some(db) = db.filter(|d| !d.trim().is_empty()) else {
        return Err("vacuum works on a local file: name it with --db or MQLITE_DB".into());
    };
    let path = crate::backup::existing_sqlite_file(
        db,
        "vacuum reclaims a local SQLite file's pages (a libSQL server manages its own \
         file; redb has no incremental reclamation)",
    )?
    .display()
    .to_string();
    let report = crate::runtime()?.block_on(async {
        let store = SqliteStore::open(SqliteOptions::new(path)).await?;
        let report = store.vacuum(a.full).await;
        store.close().await;
        report
    });
    let report = report.map_err(|e| {
        let mut f = Failure::from(crate::chain(&e));
        if matches!(e, mqlite::Error::DbLocked { .. }) {
            f.0.push_str(
                "\n(stop the broker that serves it first: vacuum needs the file to itself)",
            );
        }
        f
    })?;
    match out {
        Output::Json => output::json(&serde_json::json!({
            "full": report.full,
            "bytes_before": report.bytes_before(),
            "bytes_after": report.bytes_after(),
            "free_pages_before": report.free_pages_before,
            "free_pages_after": report.free_pages_after,
            "incremental": report.incremental,
        })),
        Output::Table => {
            output::pairs(&[
                ("bytes_before", report.bytes_before().to_string()),
                ("bytes_after", report.bytes_after().to_string()),
                ("incremental", report.incremental.to_string()),
            ])?;
            if !report.incremental {
                eprintln!(
                    "mqlite: this file was made without incremental auto-vacuum (an earlier \
                     version): run `mqlite vacuum --full` once to convert it"
                );
            }
            Ok(())
        }
    }
}

//! `mqlite migrate <old> <new>`: copies a local SQLite database of an earlier layout into
//! a new file of this version's (the store's `migrate`), and prints what it copied.

use mqlite::Error;

use crate::args::{MigrateArgs, Output};
use crate::{Failure, output};

/// Migrates `old_path` into `new_path`; prints the layouts and the rows per table.
pub(crate) fn run(a: &MigrateArgs, out: Output) -> Result<(), Failure> {
    let report = mqlite::migrate(&a.old_path, &a.new_path).map_err(|e| {
        let mut f = Failure::from(crate::chain(&e));
        if matches!(e, Error::DbLocked { .. }) {
            f.0.push_str("\n(stop the broker or program that has it open: migrate copies offline)");
        }
        f
    })?;
    let rows = |table: &str| report.rows(table).to_string();
    match out {
        Output::Json => output::json(&serde_json::json!({
            "from": report.from,
            "to": report.to,
            "tables": report.tables.iter().map(|(t, n)| (t.clone(), *n)).collect::<std::collections::BTreeMap<_, _>>(),
        })),
        Output::Table => {
            output::pairs(&[
                (
                    "from",
                    format!("{} ({})", a.old_path.display(), report.from),
                ),
                ("to", format!("{} ({})", a.new_path.display(), report.to)),
                ("queues", rows("mqlite_queues")),
                ("messages", rows("mqlite_messages")),
                ("subscriptions", rows("mqlite_subscriptions")),
                ("access_keys", rows("mqlite_access_keys")),
            ])?;
            eprintln!(
                "mqlite: every table's rows were copied and counted; serve the new file \
                 (for example: mv the old one aside and the new one into its place)"
            );
            Ok(())
        }
    }
}

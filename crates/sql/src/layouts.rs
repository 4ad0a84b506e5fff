//! The layouts a tagged release has written, frozen, and how each maps onto the current
//! one: what `mqlite migrate` reads (promise 10.2: a file of another layout is refused
//! at open and copied into a new file by the migration, never changed in place).
//!
//! Each layout keeps the DDL its release created as a copy of the golden file of that
//! time (`layouts/<token>.sql`, never edited afterwards), and the value of every column
//! of the current tables that it did not have, or had under another shape. A column the
//! current layout shares with an old one by name is copied as it is.
//!
//! When the DDL changes: keep the old golden file here under its token, add its
//! [`Layout`] with the expressions the new columns need, change
//! [`crate::SCHEMA_TOKEN`], and bless the golden file. The migration test (in the
//! `mqlite` crate) builds a database of every layout listed here from its frozen DDL and
//! the rows checked in beside it, migrates it, and serves it.

/// One released layout.
#[derive(Debug, Clone, Copy)]
pub struct Layout {
    /// Its schema guard token.
    pub token: &'static str,
    /// The release that introduced it.
    pub release: &'static str,
    /// Its DDL as the golden file of its release holds it.
    pub golden: &'static str,
    /// `(table, column, SQL expression over the old row)` for each current column the
    /// old table lacks or stores differently.
    pub columns: &'static [(&'static str, &'static str, &'static str)],
}

/// Every released layout, oldest first. The last one's DDL equals the golden file while
/// its token is the current one (the test below).
pub const LAYOUTS: &[Layout] = &[Layout {
    token: "mqlite-rs/4",
    release: "v0.1.0",
    golden: include_str!("../layouts/mqlite-rs-4.sql"),
    columns: &[
        (
            "mqlite_receipts",
            "bucket",
            concat!("expires_at / ", receipt_bucket!()),
        ),
        // `mqlite-rs/14`: the state is a number (`crate::rows::state_code`).
        ("mqlite_messages", "state", STATE_FROM_TEXT),
        // `mqlite-rs/15`: a receipt entry holds a page's locks; an old receipt is an
        // entry of its one lock.
        (
            "mqlite_receipts",
            "page",
            concat!("seq / ", receipt_page!()),
        ),
        (
            "mqlite_receipts",
            "items",
            "unhex(printf('%016x', seq) || lock_token)",
        ),
    ],
}];

/// A message's state as the layouts before `mqlite-rs/14` wrote it (its name) mapped to
/// the number it is now ([`crate::rows::state_code`]); a name outside them maps to NULL,
/// which the new column's NOT NULL refuses, so the migration fails rather than guess.
const STATE_FROM_TEXT: &str = "CASE state WHEN 'active' THEN 0 WHEN 'locked' THEN 1 \
     WHEN 'deferred' THEN 2 WHEN 'scheduled' THEN 3 WHEN 'completed' THEN 4 \
     WHEN 'dead_lettered' THEN 5 END";

/// The layout this build writes. A file of it migrates as a plain copy (no column
/// changes), also before a release has frozen it.
pub const CURRENT: Layout = Layout {
    token: crate::SCHEMA_TOKEN,
    release: "this build",
    golden: include_str!("../golden/schema.sql"),
    columns: &[],
};

/// The layout of `token`, if a release wrote it.
pub fn layout(token: &str) -> Option<&'static Layout> {
    LAYOUTS.iter().find(|l| l.token == token)
}

/// The layout `mqlite migrate` reads a file of `token` as: a released one, or this
/// build's own.
pub fn readable(token: &str) -> Option<&'static Layout> {
    layout(token).or((token == crate::SCHEMA_TOKEN).then_some(&CURRENT))
}

/// The tokens `mqlite migrate` reads, for messages.
pub fn known_tokens() -> String {
    LAYOUTS
        .iter()
        .map(|l| format!("{} ({})", l.token, l.release))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Layout {
    /// The expression that gives `table.column` its value from the old row, when the
    /// layout names one.
    pub fn column(&self, table: &str, column: &str) -> Option<&'static str> {
        self.columns
            .iter()
            .find(|(t, c, _)| *t == table && *c == column)
            .map(|(_, _, e)| *e)
    }

    /// The layout's DDL as statements that create it, tables first (the golden file
    /// lists objects by kind and name, and an index needs its table).
    pub fn statements(&self) -> Vec<String> {
        let mut objects: Vec<(bool, String)> = Vec::new();
        let mut current: Option<(bool, String)> = None;
        for line in self.golden.lines() {
            if let Some(header) = line.strip_prefix("-- ") {
                let kind = header.split(' ').next().unwrap_or("");
                if ["table", "index", "trigger", "view"].contains(&kind) {
                    objects.extend(current.take());
                    current = Some((kind == "table", String::new()));
                    continue;
                }
                if current.is_none() || header == "(no sql)" {
                    continue;
                }
            }
            if let Some((_, text)) = current.as_mut() {
                text.push_str(line);
                text.push('\n');
            }
        }
        objects.extend(current);
        let mut statements: Vec<(bool, String)> = objects
            .into_iter()
            .map(|(table, text)| {
                let text = text.trim_end().trim_end_matches(';').to_owned();
                (table, text)
            })
            .filter(|(_, text)| !text.is_empty())
            .collect();
        statements.sort_by_key(|(table, _)| !table);
        statements.into_iter().map(|(_, text)| text).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The newest layout's frozen copy is the golden file itself while the token is
    /// current: a DDL change must freeze the old file under its token first.
    #[test]
    fn the_current_layout_is_frozen_as_the_golden_file() {
        let golden = std::fs::read_to_string(crate::golden::PATH).expect("the golden file");
        match layout(crate::SCHEMA_TOKEN) {
            Some(current) => assert_eq!(
                current.golden,
                golden,
                "layouts/{}.sql differs from golden/schema.sql under the same token",
                crate::SCHEMA_TOKEN.replace('/', "-")
            ),
            None => {
                let newest = LAYOUTS.last().expect("a released layout");
                assert_ne!(newest.golden, golden, "a new token over the old DDL");
            }
        }
        for l in LAYOUTS {
            assert!(
                l.golden.contains(&crate::golden::token_line(l.token)),
                "layouts/{} names another token",
                l.token
            );
        }
    }

    /// The migration maps each state's old name to the number the statements test for
    /// it, and nothing else to a number.
    #[test]
    fn old_state_names_map_to_their_numbers() {
        use mqlite_contract::MessageState as S;
        let states = [
            S::Active,
            S::Locked,
            S::Deferred,
            S::Scheduled,
            S::Completed,
            S::DeadLettered,
        ];
        for s in states {
            let code = crate::rows::state_code(s);
            assert!(
                STATE_FROM_TEXT.contains(&format!("WHEN '{}' THEN {code} ", s.as_str()))
                    || STATE_FROM_TEXT.ends_with(&format!("WHEN '{}' THEN {code} END", s.as_str())),
                "{s} maps to {code}"
            );
            assert_eq!(crate::rows::state_of(code).expect("a state"), s);
        }
        assert_eq!(STATE_FROM_TEXT.matches(" THEN ").count(), states.len());
        assert!(
            !STATE_FROM_TEXT.contains("ELSE"),
            "an unknown name maps to NULL"
        );
        assert!(crate::rows::state_of(6).is_err() && crate::rows::state_of(-1).is_err());
    }

    /// The statements create tables before anything that needs them, and keep the
    /// trigger's inner `;`.
    #[test]
    fn statements_come_tables_first() {
        let statements = LAYOUTS[0].statements();
        let first_index = statements
            .iter()
            .position(|s| !s.starts_with("CREATE TABLE"))
            .expect("an index");
        assert!(
            statements[first_index..]
                .iter()
                .all(|s| !s.starts_with("CREATE TABLE"))
        );
        assert_eq!(first_index, 10, "8 tables and the 2 side tables");
        let trigger = statements
            .iter()
            .find(|s| s.starts_with("CREATE TRIGGER"))
            .expect("the trigger");
        assert!(trigger.ends_with("END"), "{trigger}");
    }
}

//! The one golden file of the SQL stores' DDL (promise 10.2): what a fresh database's
//! `sqlite_master` holds, rendered as text, checked in as `golden/schema.sql` with the
//! schema token it belongs to. The SQLite store's test blesses and checks it; the libSQL
//! store's test checks the server's copy against the same file.

/// The checked-in golden file.
pub const PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/golden/schema.sql");

/// Every schema object outside SQLite's own, as (type, name, sql), in a stable order.
pub const OBJECTS: &str = "SELECT type, name, sql FROM sqlite_master \
     WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name";

/// The line of the golden file that names the token its DDL belongs to.
pub fn token_line(token: &str) -> String {
    format!("-- schema token: {token}\n")
}

/// The golden text of these objects (rows of [`OBJECTS`]) under this binary's token.
pub fn render(rows: &[(String, String, Option<String>)]) -> String {
    let mut out = String::from(
        "-- The DDL of a fresh mqlite SQLite database, as sqlite_master holds it.\n\
         -- Checked by tests/schema_golden.rs; rewrite with MQLITE_BLESS=1.\n",
    );
    out.push_str(&token_line(crate::SCHEMA_TOKEN));
    for (kind, name, text) in rows {
        out.push_str(&format!("\n-- {kind} {name}\n"));
        match text {
            Some(text) => out.push_str(&format!("{text};\n")),
            None => out.push_str("-- (no sql)\n"),
        }
    }
    out
}

/// The golden text without its token line: the DDL alone.
pub fn ddl_only(golden: &str) -> String {
    golden
        .lines()
        .filter(|l| !l.starts_with("-- schema token: "))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The golden text with the space before each `(` removed: the libsql client sends each
/// statement as its parser renders it (`ON t (c)` where the DDL says `ON t(c)`), and the
/// server stores that, so the libSQL store compares DDL in this form.
pub fn without_space_before_parens(text: &str) -> String {
    text.replace(" (", "(")
}

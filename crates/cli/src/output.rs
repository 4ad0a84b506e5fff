//! Printing answers: the wire response as JSON, or aligned columns for people.

use std::io::Write;

use mqlite_broker::wire::WireMessage;
use serde::Serialize;

use crate::Failure;

/// The widest a body is shown in a table, in characters.
const BODY_WIDTH: usize = 60;

/// Prints `value` as pretty JSON on stdout.
pub(crate) fn json<T: Serialize>(value: &T) -> Result<(), Failure> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| Failure::from(format!("the answer does not encode as JSON: {e}")))?;
    line(&text)
}

/// Prints one line on stdout.
pub(crate) fn line(text: &str) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")
        .and_then(|()| out.flush())
        .map_err(|e| Failure::from(format!("cannot write to stdout: {e}")))
}

/// Prints `rows` under `headers` in columns two spaces apart; the last column is not
/// padded (it holds bodies).
pub(crate) fn table(headers: &[&str], rows: &[Vec<String>]) -> Result<(), Failure> {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let render = |cells: &mut dyn Iterator<Item = &str>| {
        let mut text = String::new();
        for (i, (cell, w)) in cells.zip(&widths).enumerate() {
            if i > 0 {
                text.push_str("  ");
            }
            text.push_str(cell);
            if i + 1 < widths.len() {
                let pad = w.saturating_sub(cell.chars().count());
                text.extend(std::iter::repeat_n(' ', pad));
            }
        }
        text.trim_end().to_owned()
    };
    let mut text = render(&mut headers.iter().copied());
    for row in rows {
        text.push('\n');
        text.push_str(&render(&mut row.iter().map(String::as_str)));
    }
    line(&text)
}

/// Prints `name: value` pairs, the names aligned.
pub(crate) fn pairs(pairs: &[(&str, String)]) -> Result<(), Failure> {
    let width = pairs.iter().map(|(k, _)| k.len() + 1).max().unwrap_or(0);
    let text = pairs
        .iter()
        .map(|(k, v)| {
            format!("{:width$}  {v}", format!("{k}:"))
                .trim_end()
                .to_owned()
        })
        .collect::<Vec<_>>()
        .join("\n");
    line(&text)
}

/// Prints each message's body, its bytes exactly as sent, followed by a newline
/// (`--raw`).
pub(crate) fn raw_bodies(messages: &[WireMessage]) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    for m in messages {
        let bytes = m
            .decoded_body()
            .map_err(|_| Failure::from(format!("the body of {} is not base64", m.seq_number)))?;
        out.write_all(&bytes)
            .and_then(|()| out.write_all(b"\n"))
            .map_err(|e| Failure::from(format!("cannot write to stdout: {e}")))?;
    }
    out.flush()
        .map_err(|e| Failure::from(format!("cannot write to stdout: {e}")))
}

/// A message's body for a table: its text with control characters escaped (one row per
/// message), or `base64:` and the wire's base64 when it is not UTF-8 (a terminal is
/// never sent raw bytes; `--raw` prints them), at most [`BODY_WIDTH`] characters.
pub(crate) fn body(m: &WireMessage) -> String {
    let bytes = match m.decoded_body() {
        Ok(b) => b,
        Err(_) => return "<body is not base64>".to_owned(),
    };
    let Ok(text) = std::str::from_utf8(&bytes) else {
        return truncate(&format!("base64:{}", m.body), BODY_WIDTH);
    };
    let escaped: String = text
        .chars()
        .flat_map(|c| {
            let esc: Vec<char> = if c.is_control() {
                c.escape_default().collect()
            } else {
                vec![c]
            };
            esc
        })
        .collect();
    truncate(&escaped, BODY_WIDTH)
}

/// At most `max` characters, the last one an ellipsis when cut.
fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// An optional field for a table: `-` when empty.
pub(crate) fn or_dash(s: &str) -> String {
    if s.is_empty() {
        "-".to_owned()
    } else {
        s.to_owned()
    }
}

/// A millisecond count for a table: `-` when zero.
pub(crate) fn ms_or_dash(ms: i64) -> String {
    if ms == 0 {
        "-".to_owned()
    } else {
        ms.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_decoded_escaped_and_cut() {
        assert_eq!(body(&WireMessage::with_body("hello")), "hello");
        assert_eq!(body(&WireMessage::with_body("a\nb\tc")), "a\\nb\\tc");
        assert_eq!(body(&WireMessage::with_body([0xff, b'x'])), "base64:/3g=");
        let long = "é".repeat(100);
        let shown = body(&WireMessage::with_body(&long));
        assert_eq!(shown.chars().count(), BODY_WIDTH);
        assert!(shown.ends_with('…'));
        let bad = WireMessage {
            body: "!!".into(),
            ..Default::default()
        };
        assert_eq!(body(&bad), "<body is not base64>");
    }

    #[test]
    fn exactly_the_width_is_not_cut() {
        let text = "x".repeat(BODY_WIDTH);
        assert_eq!(truncate(&text, BODY_WIDTH), text);
    }
}

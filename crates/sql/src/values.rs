//! Rows of values bound by position: a statement over `n` rows is one of a few prepared
//! texts, `n` rounded up to the next of [`SIZES`], its spare rows bound to NULL and left
//! out by the statement. A batch then costs one statement however large it is (1.6),
//! with no JSON to write or parse and no hex; each value is a `?N` parameter, which the
//! drivers bind by its number (SQLite finds a name by walking the statement's list of
//! names, which a statement of thousands of values cannot afford).

use std::sync::LazyLock;

use crate::exec::Value;

/// The row counts of the prepared texts.
pub const SIZES: [usize; 10] = [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];

/// The most values one statement binds (SQLite's default limit is 32,766).
pub const MAX_PARAMS: usize = 16_384;

/// The index in [`SIZES`] of the smallest size that holds `n` rows (the largest past
/// it).
fn size_index(n: usize) -> usize {
    SIZES
        .iter()
        .position(|&s| s >= n)
        .unwrap_or(SIZES.len() - 1)
}

/// The row count of the text that holds `n` rows.
pub fn rows_for(n: usize) -> usize {
    SIZES[size_index(n)]
}

/// The texts of one statement, one per size up to the statement's largest batch,
/// built on first use.
pub struct Texts {
    texts: LazyLock<Vec<String>>,
}

impl Texts {
    /// The texts `build` makes (with [`build`]: one per size, smallest first).
    pub const fn new(build: fn() -> Vec<String>) -> Self {
        Self {
            texts: LazyLock::new(build),
        }
    }

    /// The text for `n` rows: the smallest that holds them. Past the largest built,
    /// the largest, whose parameter count then differs from the values bound, which
    /// the driver refuses as a typed error.
    pub fn get(&'static self, n: usize) -> &'static str {
        let texts = &*self.texts;
        texts[size_index(n).min(texts.len() - 1)].as_str()
    }

    /// Every text, with its row count.
    pub fn all(&'static self) -> impl Iterator<Item = (usize, &'static str)> {
        SIZES.into_iter().zip(self.texts.iter().map(String::as_str))
    }
}

/// Builds the texts of a statement for every size up to `max` rows.
pub fn build(max: usize, text: impl Fn(usize) -> String) -> Vec<String> {
    SIZES
        .into_iter()
        .take_while(|&s| s <= max)
        .map(text)
        .collect()
}

/// `(k, ?a, ?b, …), …` for `rows` rows of `cols` parameters numbered from `first`, each
/// row led by its index `k` when `numbered`.
pub fn rows(first: usize, rows: usize, cols: usize, numbered: bool) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    for r in 0..rows {
        out.push_str(if r == 0 { "(" } else { ", (" });
        if numbered {
            let _ = write!(out, "{r}");
        }
        let at = first + r * cols;
        for p in at..at + cols {
            let sep = if numbered || p > at { ", " } else { "" };
            let _ = write!(out, "{sep}?{p}");
        }
        out.push(')');
    }
    out
}

/// The name of parameter `?i`.
pub fn name(i: usize) -> &'static str {
    static NAMES: LazyLock<Vec<String>> =
        LazyLock::new(|| (1..=MAX_PARAMS).map(|i| format!("?{i}")).collect());
    NAMES[i - 1].as_str()
}

/// The parameters of a sized statement: `values` in order as `?1`, `?2`, …, then NULL
/// up to `total`.
pub fn bind(values: impl IntoIterator<Item = Value>, total: usize) -> Vec<(&'static str, Value)> {
    let mut out: Vec<(&'static str, Value)> = Vec::with_capacity(total);
    for v in values {
        out.push((name(out.len() + 1), v));
    }
    while out.len() < total {
        out.push((name(out.len() + 1), Value::Null));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_number_their_parameters_in_order() {
        assert_eq!(rows(3, 2, 2, false), "(?3, ?4), (?5, ?6)");
        assert_eq!(rows(1, 2, 1, true), "(0, ?1), (1, ?2)");
        assert_eq!(rows_for(1), 2);
        assert_eq!(rows_for(64), 64);
        assert_eq!(rows_for(65), 128);
        let p = bind([Value::Int(1)], 3);
        assert_eq!(p.len(), 3);
        assert_eq!(p[2], ("?3", Value::Null));
    }
}

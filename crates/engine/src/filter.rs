//! Subscription filters: one boolean expression in the expr language (the language
//! mqlite's filters are written in, through the `expr-lang` crate), compiled and checked
//! at Subscribe, evaluated per published message, failing closed (promises 11.1–11.3).
//!
//! The crate offers no syntax tree, type checker or evaluation budget, so the checks
//! are ours:
//! - the text is at most [`MAX_FILTER_LEN`] bytes and nests brackets at most
//!   [`MAX_FILTER_DEPTH`] deep;
//! - the constructs whose cost is not bounded by the message's own size are refused:
//!   the range operator `a..b` (an array of `b - a` items), `repeat(s, n)` (`n`
//!   copies), `replace` (an empty pattern replaced by the body is quadratic in it),
//!   `$env` (it would read the body without the filter naming it), and a predicate
//!   inside a predicate (`all(a, {all(a, {...})})` is quadratic, and deeper is worse):
//!   braces nest at most one deep. What remains walks the message's fields,
//!   properties or body a bounded number of times, so its cost is bounded by the
//!   message (the body by the message size limit), and `matches` uses the linear-time
//!   `regex` crate, with a string literal for its pattern that compiles within
//!   [`MAX_PATTERN_BYTES`] (checked here; the language then compiles it once, with
//!   the program, not per message);
//! - a trial evaluation against a sample message with every field present, and one
//!   with every field empty: an unknown name or function is refused, and so is a
//!   result that is not a boolean; so are the date functions (`now()`, `date()`),
//!   which this build leaves out: compare `enqueued_at` or `visible_at` instead. A trial that fails otherwise (a comparison of a string with a number on
//!   the empty sample, say) is accepted: such a filter fails at run time on messages
//!   like it, and routes nothing there.
//!
//! The message environment: `subject`, `properties` (string → string), `group_id`,
//! `correlation_id`, `reply_to`, `message_id`, `content_type` (absent fields are empty
//! strings), `enqueued_at` and `visible_at` (epoch ms), `subject_parts` (the subject
//! split on `.`), `body_size`, `property_keys` (sorted), `body_text` (the body as UTF-8,
//! lossy) and `body_json` (the body parsed as JSON when the content type is JSON or
//! unset, else an empty object; also an empty object when it does not parse).
//! `body_text` and `body_json` are decoded only when the filter names them.

use std::collections::BTreeMap;

use expr::{Context, Program, Value};

use mqlite_contract::error::{Error, Result};
use mqlite_contract::types::OutMessage;

/// The longest filter text, bytes.
pub const MAX_FILTER_LEN: usize = 2048;
/// The deepest bracket nesting of a filter.
pub const MAX_FILTER_DEPTH: usize = 32;

/// The largest compiled form of a `matches` pattern, bytes (the regex crate's size
/// limit): a larger pattern is refused when the filter is compiled.
pub const MAX_PATTERN_BYTES: usize = 256 << 10;

/// The names a filter may use.
pub const FILTER_FIELDS: [&str; 14] = [
    "subject",
    "properties",
    "group_id",
    "correlation_id",
    "reply_to",
    "message_id",
    "content_type",
    "enqueued_at",
    "visible_at",
    "subject_parts",
    "body_size",
    "property_keys",
    "body_text",
    "body_json",
];

/// A compiled filter. The empty filter matches every message.
pub struct Filter {
    text: String,
    program: Option<Program>,
    body_text: bool,
    body_json: bool,
    failures: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for Filter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Filter").field(&self.text).finish()
    }
}

/// What a message looks like to a filter at one moment.
#[derive(Debug, Clone, Copy)]
pub struct Seen<'a> {
    /// The message.
    pub message: &'a OutMessage,
    /// When it is sent, epoch ms.
    pub enqueued_at: i64,
    /// When it becomes visible, epoch ms.
    pub visible_at: i64,
}

/// The answer of a filter test (the wire's TestFilter).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FilterTest {
    /// Whether the filter compiles and passes the checks of Subscribe.
    pub valid: bool,
    /// Why not, or why the sample's evaluation failed.
    pub error: Option<String>,
    /// Whether a sample message was evaluated.
    pub ran: bool,
    /// Whether it matched.
    pub matched: bool,
}

/// The identifiers outside string literals, what the text nests, and the patterns of
/// its `matches` operators, in one pass.
struct Scan {
    idents: Vec<String>,
    depth: usize,
    brace_depth: usize,
    range: bool,
    /// The string literals (quotes included) that follow a `matches` operator.
    patterns: Vec<String>,
    /// A `matches` whose pattern is not a string literal.
    dynamic_pattern: bool,
}

fn scan(text: &str) -> Scan {
    let mut out = Scan {
        idents: Vec::new(),
        depth: 0,
        brace_depth: 0,
        range: false,
        patterns: Vec::new(),
        dynamic_pattern: false,
    };
    let mut depth = 0usize;
    let mut braces = 0usize;
    let mut chars = text.char_indices().peekable();
    let mut ident = String::new();
    // What came before the identifier being read (`.matches` is a field, not the
    // operator).
    let mut before_ident = '\0';
    let mut quote: Option<(char, usize)> = None;
    let mut prev = '\0';
    // Whether the last identifier was the `matches` operator, so the next token is
    // its pattern.
    let mut pattern_next = false;
    let end_ident = |ident: &mut String, before: char, pattern_next: &mut bool, out: &mut Scan| {
        if ident.is_empty() {
            return;
        }
        *pattern_next = ident == "matches" && before != '.';
        out.idents.push(std::mem::take(ident));
    };
    while let Some((at, c)) = chars.next() {
        if let Some((q, started)) = quote {
            if c == '\\' {
                chars.next();
            } else if c == q {
                quote = None;
                if started != usize::MAX {
                    out.patterns
                        .push(text[started..at + c.len_utf8()].to_owned());
                }
            }
            prev = c;
            continue;
        }
        if c.is_alphanumeric() || c == '_' || c == '$' || c == '#' {
            if ident.is_empty() {
                if pattern_next {
                    out.dynamic_pattern = true;
                    pattern_next = false;
                }
                before_ident = prev;
            }
            ident.push(c);
            prev = c;
            continue;
        }
        end_ident(&mut ident, before_ident, &mut pattern_next, &mut out);
        if c.is_whitespace() {
            prev = c;
            continue;
        }
        let pattern = std::mem::take(&mut pattern_next);
        match c {
            '"' | '\'' | '`' => quote = Some((c, if pattern { at } else { usize::MAX })),
            _ if pattern => out.dynamic_pattern = true,
            _ => {}
        }
        match c {
            '(' | '[' | '{' => {
                depth += 1;
                out.depth = out.depth.max(depth);
                if c == '{' {
                    braces += 1;
                    out.brace_depth = out.brace_depth.max(braces);
                }
            }
            ')' | ']' | '}' => {
                depth = depth.saturating_sub(1);
                if c == '}' {
                    braces = braces.saturating_sub(1);
                }
            }
            '.' if prev == '.' => out.range = true,
            _ => {}
        }
        prev = c;
    }
    end_ident(&mut ident, before_ident, &mut pattern_next, &mut out);
    if pattern_next {
        out.dynamic_pattern = true;
    }
    out
}

/// Compiles the pattern of a `matches` (a string literal, quotes included) as the
/// evaluation will, within [`MAX_PATTERN_BYTES`].
fn check_pattern(literal: &str) -> std::result::Result<(), String> {
    let pattern = match expr::eval(literal, &Context::default()) {
        Ok(Value::String(p)) => p,
        Ok(_) | Err(_) => return Err(format!("{literal} is not a string literal")),
    };
    regex::RegexBuilder::new(&pattern)
        .size_limit(MAX_PATTERN_BYTES)
        .build()
        .map(drop)
        .map_err(|e| match e {
            regex::Error::CompiledTooBig(_) => {
                format!("the pattern {pattern:?} compiles to more than {MAX_PATTERN_BYTES} bytes")
            }
            other => format!("the pattern {pattern:?} does not compile: {other}"),
        })
}

fn invalid(text: &str, why: impl std::fmt::Display) -> Error {
    Error::invalid(format!("filter {text:?}: {why}"))
}

impl Filter {
    /// Compiles and checks a filter (11.1): InvalidArgument when it is malformed, too
    /// long or deep, uses a refused construct, names an unknown field, or does not
    /// yield a boolean.
    pub fn compile(text: &str) -> Result<Filter> {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Ok(Filter {
                text: String::new(),
                program: None,
                body_text: false,
                body_json: false,
                failures: Default::default(),
            });
        }
        if trimmed.len() > MAX_FILTER_LEN {
            return Err(invalid(
                &trimmed[..trimmed.floor_char_boundary(64)],
                format_args!("longer than {MAX_FILTER_LEN} bytes"),
            ));
        }
        let s = scan(trimmed);
        if s.depth > MAX_FILTER_DEPTH {
            return Err(invalid(
                trimmed,
                format_args!("nests deeper than {MAX_FILTER_DEPTH} brackets"),
            ));
        }
        if s.range {
            return Err(invalid(
                trimmed,
                "the range operator `..` is not allowed in a filter (its cost is not \
                 bounded by the message)",
            ));
        }
        for refused in ["repeat", "replace", "$env"] {
            if s.idents.iter().any(|i| i == refused) {
                return Err(invalid(
                    trimmed,
                    format_args!(
                        "{refused} is not allowed in a filter (its cost is not bounded by \
                         the message)"
                    ),
                ));
            }
        }
        if s.brace_depth > 1 {
            return Err(invalid(
                trimmed,
                "a predicate inside a predicate is not allowed in a filter (its cost grows \
                 as a power of the message)",
            ));
        }
        if s.dynamic_pattern {
            return Err(invalid(
                trimmed,
                "the pattern of `matches` must be a string literal (it is compiled once, \
                 when the filter is)",
            ));
        }
        for literal in &s.patterns {
            check_pattern(literal).map_err(|e| invalid(trimmed, e))?;
        }
        let program = expr::compile(trimmed).map_err(|e| invalid(trimmed, e))?;
        let filter = Filter {
            text: trimmed.to_owned(),
            program: Some(program),
            body_text: s.idents.iter().any(|i| i == "body_text"),
            body_json: s.idents.iter().any(|i| i == "body_json"),
            failures: Default::default(),
        };
        for sample in [full_sample(), OutMessage::default()] {
            let seen = Seen {
                message: &sample,
                enqueued_at: 1,
                visible_at: 1,
            };
            match filter.evaluate(seen) {
                Ok(Value::Bool(_)) => {}
                Ok(other) => {
                    return Err(invalid(
                        trimmed,
                        format_args!("yields {} where a boolean is needed", kind(&other)),
                    ));
                }
                Err(e) if e.starts_with("unknown variable") => {
                    return Err(invalid(
                        trimmed,
                        format_args!("{e} (a filter sees {})", FILTER_FIELDS.join(", ")),
                    ));
                }
                Err(e) if e.starts_with("Unknown function") => {
                    return Err(invalid(trimmed, e));
                }
                // now(), date(), duration(): the date functions are left out of this
                // build, and a filter that reads the clock would route differently on
                // every publish anyway.
                Err(e) if e.contains("requires expr-lang's") => {
                    return Err(invalid(
                        trimmed,
                        "the date and time functions are not available in filters; \
                         compare enqueued_at or visible_at (epoch ms) instead",
                    ));
                }
                // Fails on this sample only: fails closed on such messages at run time.
                Err(_) => {}
            }
        }
        Ok(filter)
    }

    /// Counts a run-time failure; true when it should be logged: the 1st, 2nd, 4th,
    /// 8th... so a filter that fails on every message of a stream does not flood the log.
    pub fn note_failure(&self) -> Option<u64> {
        let n = self
            .failures
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        n.is_power_of_two().then_some(n)
    }

    /// The filter's text (empty: every message).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether the message passes. An evaluation error or a non-boolean result is an
    /// error: the caller routes nothing to this subscription (11.3).
    pub fn matches(&self, seen: Seen<'_>) -> std::result::Result<bool, String> {
        if self.program.is_none() {
            return Ok(true);
        }
        match self.evaluate(seen)? {
            Value::Bool(b) => Ok(b),
            other => Err(format!("yielded {} instead of a boolean", kind(&other))),
        }
    }

    fn evaluate(&self, seen: Seen<'_>) -> std::result::Result<Value, String> {
        let Some(program) = &self.program else {
            return Ok(Value::Bool(true));
        };
        let ctx = self.context(seen);
        expr::run(program, &ctx).map_err(|e| e.to_string())
    }

    fn context(&self, seen: Seen<'_>) -> Context {
        let m = seen.message;
        let text = |v: &Option<String>| Value::String(v.clone().unwrap_or_default());
        let subject = m.subject.clone().unwrap_or_default();
        let parts = if subject.is_empty() {
            Vec::new()
        } else {
            subject
                .split('.')
                .map(|p| Value::String(p.to_owned()))
                .collect()
        };
        let mut ctx = Context::default();
        ctx.insert("subject", Value::String(subject));
        ctx.insert(
            "properties",
            Value::Map(
                m.properties
                    .iter()
                    .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                    .collect(),
            ),
        );
        ctx.insert("group_id", text(&m.group_id));
        ctx.insert("correlation_id", text(&m.correlation_id));
        ctx.insert("reply_to", text(&m.reply_to));
        ctx.insert("message_id", text(&m.message_id));
        ctx.insert("content_type", text(&m.content_type));
        ctx.insert("enqueued_at", Value::Integer(seen.enqueued_at));
        ctx.insert("visible_at", Value::Integer(seen.visible_at));
        ctx.insert("subject_parts", Value::Array(parts));
        ctx.insert(
            "body_size",
            Value::Integer(i64::try_from(m.body.len()).unwrap_or(i64::MAX)),
        );
        ctx.insert(
            "property_keys",
            Value::Array(
                m.properties
                    .keys()
                    .map(|k| Value::String(k.clone()))
                    .collect(),
            ),
        );
        if self.body_text {
            ctx.insert(
                "body_text",
                Value::String(String::from_utf8_lossy(&m.body).into_owned()),
            );
        }
        if self.body_json {
            ctx.insert("body_json", body_json(m));
        }
        ctx
    }
}

/// Tests a filter without storing anything: whether it is valid and, given a sample,
/// whether the sample matches (the wire's TestFilter).
pub fn test_filter(text: &str, sample: Option<Seen<'_>>) -> FilterTest {
    let filter = match Filter::compile(text) {
        Ok(f) => f,
        Err(e) => {
            return FilterTest {
                valid: false,
                error: Some(e.to_string()),
                ..Default::default()
            };
        }
    };
    let Some(seen) = sample else {
        return FilterTest {
            valid: true,
            ..Default::default()
        };
    };
    match filter.matches(seen) {
        Ok(matched) => FilterTest {
            valid: true,
            error: None,
            ran: true,
            matched,
        },
        Err(e) => FilterTest {
            valid: true,
            error: Some(e),
            ran: true,
            matched: false,
        },
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Integer(_) => "an integer",
        Value::Float(_) => "a number",
        Value::Nil => "nil",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Map(_) | Value::KeyedMap(_) => "a map",
        Value::Bool(_) => "a boolean",
        #[allow(unreachable_patterns)]
        _ => "a value of another type",
    }
}

/// A message with every field present, for the trial evaluation at Subscribe.
fn full_sample() -> OutMessage {
    OutMessage {
        body: br#"{"sample":true,"n":1,"s":"x","a":[1],"o":{"k":"v"}}"#.to_vec(),
        message_id: Some("sample-id".into()),
        group_id: Some("sample-group".into()),
        subject: Some("sample.subject".into()),
        correlation_id: Some("sample-correlation".into()),
        reply_to: Some("sample-reply".into()),
        content_type: Some("application/json".into()),
        properties: BTreeMap::from([("sample".to_owned(), "value".to_owned())]),
        event: None,
        priority: 0,
    }
}

fn body_json(m: &OutMessage) -> Value {
    let empty = || Value::Map(Default::default());
    let is_json = match m.content_type.as_deref() {
        None | Some("") => true,
        Some(ct) => {
            let ct = ct
                .split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase();
            ct == "application/json" || ct.ends_with("+json") || ct == "text/json"
        }
    };
    if !is_json {
        return empty();
    }
    match serde_json::from_slice::<serde_json::Value>(&m.body) {
        Ok(v) => json_value(v),
        Err(_) => empty(),
    }
}

fn json_value(v: serde_json::Value) -> Value {
    match v {
        serde_json::Value::Null => Value::Nil,
        serde_json::Value::Bool(b) => Value::Bool(b),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => Value::Integer(i),
            None => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        serde_json::Value::String(s) => Value::String(s),
        serde_json::Value::Array(a) => Value::Array(a.into_iter().map(json_value).collect()),
        serde_json::Value::Object(o) => {
            Value::Map(o.into_iter().map(|(k, v)| (k, json_value(v))).collect())
        }
    }
}

//! A table of filters — valid, refused at Subscribe, failing at run time — with the
//! routing each must produce over the same five messages. The filters of mqlite's own
//! documentation are among them, so "filters written for mqlite work unchanged" is
//! tested, not claimed.

use mqlite_contract::{Error, OutMessage};
use mqlite_engine::filter::{Filter, Seen, test_filter};

/// The messages every filter is run over, by index.
fn messages() -> Vec<OutMessage> {
    vec![
        // 0: a card payment, large, EU, JSON with items.
        OutMessage {
            subject: Some("payment.card".into()),
            content_type: Some("application/json".into()),
            correlation_id: Some("c-1".into()),
            reply_to: Some("reply.payments".into()),
            message_id: Some("m-1".into()),
            group_id: Some("customer-7".into()),
            ..OutMessage::new(
                r#"{"amount":500,"currency":"EUR","items":[{"sku":"A1","qty":3}],"customer":{"id":7}}"#,
            )
        }
        .with_property("region", "eu")
        .with_property("tier", "gold")
        .with_property("vip", "yes"),
        // 1: a small wire payment, US, JSON.
        OutMessage {
            subject: Some("payment.wire".into()),
            content_type: Some("application/json; charset=utf-8".into()),
            message_id: Some("m-2".into()),
            ..OutMessage::new(r#"{"amount":20,"currency":"USD","items":[]}"#)
        }
        .with_property("region", "us"),
        // 2: an order event, JSON without a content type (read as JSON).
        OutMessage {
            subject: Some("order.created".into()),
            ..OutMessage::new(r#"{"amount":150,"currency":"EUR"}"#)
        }
        .with_property("tier", "silver"),
        // 3: plain text; body_json is an empty object.
        OutMessage {
            subject: Some("audit.test".into()),
            content_type: Some("text/plain".into()),
            ..OutMessage::new("  hello EUR  ")
        },
        // 4: nothing at all.
        OutMessage::default(),
    ]
}

#[derive(Debug)]
enum Expect {
    /// Accepted; these message indexes match, the others do not (errors included).
    Routes(&'static [usize]),
    /// Accepted; these indexes match and these fail at run time (routed nowhere).
    RoutesFailing(&'static [usize], &'static [usize]),
    /// Refused at Subscribe, the message naming this.
    Refused(&'static str),
}

use Expect::*;

const TABLE: &[(&str, Expect)] = &[
    // The filters mqlite's documentation shows.
    (r#"subject startsWith "payment.""#, Routes(&[0, 1])),
    (r#"properties.region == "eu""#, Routes(&[0])),
    (r#"body_json.amount > 100"#, RoutesFailing(&[0, 2], &[3, 4])),
    (
        r#"subject matches "^order\\.(created|paid)$""#,
        Routes(&[2]),
    ),
    (r#""vip" in property_keys"#, Routes(&[0])),
    // Fields.
    ("", Routes(&[0, 1, 2, 3, 4])),
    ("true", Routes(&[0, 1, 2, 3, 4])),
    ("false", Routes(&[])),
    (r#"subject endsWith ".test""#, Routes(&[3])),
    (r#"not (subject endsWith ".test")"#, Routes(&[0, 1, 2, 4])),
    (
        r#"len(subject_parts) == 2 && subject_parts[0] == "payment""#,
        Routes(&[0, 1]),
    ),
    (r#"content_type == "application/json""#, Routes(&[0])),
    (r#"group_id != """#, Routes(&[0])),
    (
        r#"correlation_id == "c-1" && reply_to startsWith "reply.""#,
        Routes(&[0]),
    ),
    (r#"message_id matches "^m-[0-9]+$""#, Routes(&[0, 1])),
    ("body_size > 40", Routes(&[0, 1])),
    (
        "visible_at >= enqueued_at && enqueued_at > 0",
        Routes(&[0, 1, 2, 3, 4]),
    ),
    (r#"properties.tier in ["gold", "platinum"]"#, Routes(&[0])),
    (
        r#"(properties.tier ?? "none") == "none""#,
        Routes(&[1, 3, 4]),
    ),
    (r#"upper(properties.region ?? "") == "EU""#, Routes(&[0])),
    (r#"trim(body_text) == "hello EUR""#, Routes(&[3])),
    (r#"body_text contains "EUR""#, Routes(&[0, 2, 3])),
    // The body as JSON.
    (
        r#"body_json.currency in ["EUR", "USD"] && body_json.amount >= 100"#,
        Routes(&[0, 2]),
    ),
    (
        r#"body_json.items[0].sku == "A1""#,
        RoutesFailing(&[0], &[1, 2, 3, 4]),
    ),
    ("any(body_json.items ?? [], {#.qty > 2})", Routes(&[0])),
    ("body_json?.customer?.id == 7", Routes(&[0])),
    (
        "let limit = 100; body_json.amount > limit",
        RoutesFailing(&[0, 2], &[3, 4]),
    ),
    ("body_json.amount * 2 > 300", RoutesFailing(&[0], &[3, 4])),
    // Failing at run time on some messages: those route nowhere (fail-closed).
    (
        "int(properties.tier) > 0",
        RoutesFailing(&[], &[0, 1, 2, 3, 4]),
    ),
    // Division by zero is infinity, not an error; a missing amount is.
    (
        "body_json.amount / 0 > 1",
        RoutesFailing(&[0, 1, 2], &[3, 4]),
    ),
    // Refused at Subscribe.
    ("subject ==", Refused("filter")),
    ("amount > 100", Refused("unknown variable")),
    ("subject", Refused("boolean")),
    ("body_size + 1", Refused("boolean")),
    ("body_json", Refused("boolean")),
    ("frobnicate(subject)", Refused("Unknown function")),
    ("now() > 0", Refused("date and time")),
    ("len(1..1000000) > 0", Refused("range")),
    (r#"repeat(subject, 1000000) != """#, Refused("repeat")),
    (
        r#"replace(body_text, "", body_text) != """#,
        Refused("replace"),
    ),
    (r#"$env["body_json"].amount > 1"#, Refused("$env")),
    (
        "all(body_json.items ?? [], {all(body_json.items ?? [], {true})})",
        Refused("predicate inside a predicate"),
    ),
    // `matches`: the pattern is a literal, compiled and size-checked with the filter.
    (r#"subject matches "(""#, Refused("does not compile")),
    (r#"subject matches '[a-'"#, Refused("does not compile")),
    (
        r#"subject matches "\\w{1000}\\w{1000}\\w{1000}""#,
        Refused("compiles to more than"),
    ),
    (
        r#"subject matches properties.region"#,
        Refused("string literal"),
    ),
    (r#"subject matches (subject)"#, Refused("string literal")),
    (r#"subject matches"#, Refused("string literal")),
    // `matches` as a property's name is not the operator.
    (r#"properties.matches == "x""#, Routes(&[])),
    (
        r#"(subject matches `^payment\.`) && properties.region == "eu""#,
        Routes(&[0]),
    ),
];

fn seen(message: &OutMessage) -> Seen<'_> {
    Seen {
        message,
        enqueued_at: 1_700_000_000_000,
        visible_at: 1_700_000_000_000,
    }
}

#[test]
fn each_filter_routes_what_it_must() {
    assert!(TABLE.len() >= 30, "at least 30 filters");
    let messages = messages();
    for (text, expect) in TABLE {
        let compiled = Filter::compile(text);
        match expect {
            Refused(why) => {
                let err = compiled.expect_err(text);
                assert!(matches!(err, Error::InvalidArgument(_)), "{text}: {err:?}");
                assert!(
                    err.to_string().contains(why),
                    "{text}: {err} should name {why:?}"
                );
            }
            Routes(matching) | RoutesFailing(matching, _) => {
                let filter = compiled.unwrap_or_else(|e| panic!("{text:?} refused: {e}"));
                let failing: &[usize] = match expect {
                    RoutesFailing(_, f) => f,
                    _ => &[],
                };
                for (i, m) in messages.iter().enumerate() {
                    let got = filter.matches(seen(m));
                    if failing.contains(&i) {
                        assert!(
                            got.is_err(),
                            "{text:?} on message {i}: expected a run-time error, got {got:?}"
                        );
                    } else {
                        assert_eq!(got, Ok(matching.contains(&i)), "{text:?} on message {i}");
                    }
                }
            }
        }
    }
}

#[test]
fn over_long_and_over_deep_filters_are_refused() {
    let long = format!(r#"subject == "{}""#, "x".repeat(3000));
    assert!(
        Filter::compile(&long)
            .unwrap_err()
            .to_string()
            .contains("longer")
    );
    let deep = format!("{}true{}", "(".repeat(33), ")".repeat(33));
    assert!(
        Filter::compile(&deep)
            .unwrap_err()
            .to_string()
            .contains("deeper")
    );
    let ok = format!("{}true{}", "(".repeat(32), ")".repeat(32));
    assert!(Filter::compile(&ok).is_ok());
    // Brackets and dots inside strings are text, not structure.
    assert!(Filter::compile(r#"subject != "((((..))))""#).is_ok());
}

#[test]
fn test_filter_reports_validity_and_a_sample_match() {
    let m = &messages()[0];
    let t = test_filter("body_json.amount > 100", Some(seen(m)));
    assert!(t.valid && t.ran && t.matched && t.error.is_none());
    let t = test_filter("body_json.amount > 1000", Some(seen(m)));
    assert!(t.valid && t.ran && !t.matched);
    let t = test_filter("amount >", None);
    assert!(!t.valid && !t.ran && t.error.is_some());
    let t = test_filter("int(properties.tier) > 0", Some(seen(m)));
    assert!(t.valid && t.ran && !t.matched && t.error.is_some());
    let t = test_filter("true", None);
    assert!(t.valid && !t.ran);
}
